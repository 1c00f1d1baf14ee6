import Foundation
import TestSupport
import MQTTBridge

/// The bank's backend, played by the test over a real MQTT connection:
/// publishes payments, config and commands; collects receipts, status and
/// config/applied; lets a test wait for a condition on what arrived.
package final class Backend: MQTTClientDelegate, @unchecked Sendable {
    package let topics: Topics
    private var client: MQTTClient?
    private let cond = NSCondition()
    private var connected = false
    private var _receipts: [[String: Any]] = []
    /// Receipt statuses by payment id, and counts by status: kept as they
    /// arrive so that waiting on 10,000 receipts stays linear.
    private var _byID: [String: [String]] = [:]
    private var _byStatus: [String: Int] = [:]
    private var _status: [String: Any]?
    private var _applied: [[String: Any]] = []
    private var _messages: [(topic: String, payload: String)] = []

    private let extraTopics: [String]
    private let pingTopic: String

    /// - Parameters:
    ///   - subscribe: more topics to collect (`messages(on:)`).
    ///   - username, password: a login (brokers without anonymous access).
    package init(port: Int, device: String, prefix: String = "soundbox/v1", tls: MQTTClient.Options.TLS? = nil,
         host: String = "127.0.0.1", clientID: String? = nil, subscribe: [String] = [],
         username: String? = nil, password: String? = nil) throws {
        topics = Topics(prefix: prefix, device: device)
        extraTopics = subscribe
        pingTopic = topics.receipt + "/ping"   // inside the device's own topics, so ACLs allow it
        var o = MQTTClient.Options(clientID: clientID ?? "backend-\(UUID().uuidString.prefix(8))", host: host, port: port)
        o.tls = tls
        o.username = username
        o.password = password
        o.keepalive = 10
        o.reconnectMax = 2
        let c = try MQTTClient(o, delegate: self)
        client = c
        try c.start()
        guard waitUntil(timeout: 30, { self.connected }) else { throw TestFailure("backend could not connect to port \(port) within 30 s") }
    }

    deinit { client?.stop() }


    package func mqttConnected(rc: Int32) {
        guard rc == 0 else { return }
        for t in [topics.receipt, topics.status, topics.configApplied] + extraTopics { try? client?.subscribe(t, qos: 1) }
        // A subscription is only live once SUBACK arrives; a ping through
        // our own topic proves it (published after the SUBSCRIBEs, in order).
        try? client?.subscribe(pingTopic, qos: 1)
        _ = try? client?.publish(pingTopic, "ping")
    }
    package func mqttDisconnected(rc: Int32) { cond.lock(); connected = false; cond.unlock() }
    package func mqttPublished(mid: Int32) {}
    package func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        let text = String(decoding: payload, as: UTF8.self)
        cond.lock()
        defer { cond.broadcast(); cond.unlock() }
        _messages.append((topic, text))
        if topic == pingTopic { connected = true; return }
        let json = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
        switch topic {
        case topics.receipt:
            if let json {
                _receipts.append(json)
                let status = json["status"] as? String ?? "?"
                if let id = json["id"] as? String { _byID[id, default: []].append(status) }
                _byStatus[status, default: 0] += 1
            }
        case topics.status: _status = json
        case topics.configApplied: if let json { _applied.append(json) }
        default: break
        }
    }

    package func publish(_ topic: String, _ payload: String, retain: Bool = false) throws {
        try client!.publish(topic, payload, qos: 1, retain: retain)
    }
    package func pay(_ json: String) throws { try publish(topics.payment, json) }
    package func pay(id: String, amount: String) throws { try pay(#"{"id":"\#(id)","amount":"\#(amount)"}"#) }

    package var receipts: [[String: Any]] { cond.lock(); defer { cond.unlock() }; return _receipts }
    package var status: [String: Any]? { cond.lock(); defer { cond.unlock() }; return _status }
    package var applied: [[String: Any]] { cond.lock(); defer { cond.unlock() }; return _applied }
    package func messages(on topic: String) -> [String] {
        cond.lock(); defer { cond.unlock() }
        return _messages.filter { $0.topic == topic }.map(\.payload)
    }
    package var isConnected: Bool { cond.lock(); defer { cond.unlock() }; return connected }

    /// Like a real backend: re-send, every `every` seconds, each payment
    /// the device has not answered `played` or `duplicate` (a receipt sent
    /// while the backend itself was cut off from a restarted broker is
    /// gone; the re-sent payment's `duplicate` then says the device has it).
    @discardableResult
    package func payUntilAcknowledged(_ ids: [String], amount: String = "7.77", every: Double = 2, timeout: Double = 90) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        let final: Set<String> = ["played", "duplicate"]
        while Date() < deadline {
            for id in ids where !receipts(for: id).contains(where: final.contains) { try? pay(id: id, amount: amount) }
            if waitForReceipts(ids, final, timeout: every) { return true }
        }
        return false
    }

    package func receipts(for id: String) -> [String] { cond.lock(); defer { cond.unlock() }; return _byID[id] ?? [] }
    package func count(_ status: String) -> Int { cond.lock(); defer { cond.unlock() }; return _byStatus[status] ?? 0 }

    /// Waits (on arrivals, not on a clock) until `done` holds; false on timeout.
    @discardableResult
    package func waitUntil(timeout: Double, _ done: () -> Bool) -> Bool {
        cond.wait(timeout: timeout, until: done)
    }

    /// Waits until every id has a receipt with one of `statuses`.
    @discardableResult
    package func waitForReceipts(_ ids: [String], _ statuses: Set<String>, timeout: Double = 60) -> Bool {
        var pending = ids[...]
        return waitUntil(timeout: timeout) {
            while let id = pending.first, self.receipts(for: id).contains(where: statuses.contains) { pending = pending.dropFirst() }
            return pending.isEmpty
        }
    }
}
