/// The operator tool's MQTT connection, made synchronous: connect and wait
/// for the CONNACK, subscribe and wait for the SUBACK, take messages in
/// arrival order, and `sync`: a marker sent to the tool's own topic that
/// comes back after everything the broker had queued for it before (the
/// retained statuses of a new subscription), so an inventory knows when it
/// has seen them all without waiting for silence (docs/fleet.md).
import MQTTBridge
import SoundboxSystem
import Glibc

public struct FleetError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public final class FleetLink: MQTTClientDelegate, @unchecked Sendable {
    public struct Message: Sendable {
        public let topic: String
        public let payload: [UInt8]
        public let retained: Bool
    }

    /// Everything below is guarded by `wake`'s lock.
    private struct State {
        var connack: Int32?
        var disconnects = 0
        var subacks: [Int32: [Int32]] = [:]
        /// QoS 1 publishes the broker acknowledged, not yet waited for.
        var acked: Set<Int32> = []
        var inbox: [Message] = []
        var head = 0
        var dropped = 0
        var notes: [String] = []
        /// Attempts that could not connect (refused, TLS, DNS): the tool gives
        /// up once every broker has failed so.
        var failedAttempts = 0
        /// Connections the broker closed before its CONNACK: the client then
        /// falls back to MQTT 3.1.1 (RabbitMQ 3.10 refuses 5 so), so a few are waited out.
        var closedAttempts = 0
    }
    private var state = State()
    private let wake = Condition()
    private var client: MQTTClient?
    private let clientID: String
    /// Messages held at most; more are counted as dropped (a flood cannot exhaust memory).
    public let capacity: Int
    /// The tool's own topic for `sync` markers.
    public let syncTopic: String
    private var syncCount = 0

    /// When set, messages go to it on the network thread instead of the
    /// queue, before their PUBACK: what it has written is acknowledged, and
    /// a message it had no time for (the tool killed) comes again.
    private let handler: (@Sendable (Message) -> Void)?

    /// The brokers the client tries in turn.
    private let brokers: Int

    private func gaveUp(_ s: State) -> Bool { s.failedAttempts >= brokers || s.closedAttempts >= 2 + 2 * brokers }

    public init(_ options: MQTTClient.Options, capacity: Int = 1_000_000, handler: (@Sendable (Message) -> Void)? = nil) throws(FleetError) {
        self.capacity = capacity
        self.handler = handler
        clientID = options.clientID
        brokers = options.alternates.count + 1
        syncTopic = "soundbox-fleet/\(options.clientID)/sync"
        do { client = try MQTTClient(options, delegate: self) } catch { throw FleetError(error.description) }
    }

    deinit { client?.stop() }

    /// Starts the connection and waits until the broker accepts it.
    public func connect(timeout: Double) throws(FleetError) {
        guard let client else { return }
        do { try client.start() } catch { throw FleetError(error.description) }
        let rc = locked(timeout: timeout, until: { $0.connack != nil || gaveUp($0) }) { $0.connack }
        guard let rc else {
            throw FleetError(locked { gaveUp($0) } ? "cannot connect\(notes())" : "no answer from the broker within \(Int(timeout)) s\(notes())")
        }
        guard rc == 0 else { throw FleetError("the broker refused the connection: \(MQTTClient.connackText(rc: rc))\(notes())") }
        try subscribe([syncTopic], qos: 0, timeout: timeout)
    }

    /// Subscribes and waits for the SUBACK; a refused topic (an ACL) is an error naming it.
    /// `retained` false: no stored retained messages (MQTT 5; on 3.1.1 they come, flagged).
    public func subscribe(_ topics: [String], qos: Int32, retained: Bool = true, timeout: Double) throws(FleetError) {
        guard let client else { return }
        var mids: [(Int32, String)] = []
        for t in topics {
            do { mids.append((try client.subscribe(t, qos: qos, retained: retained), t)) } catch { throw FleetError(error.description) }
        }
        for (mid, topic) in mids {
            guard let granted = locked(timeout: timeout, until: { $0.subacks[mid] != nil }, { $0.subacks.removeValue(forKey: mid) }) else {
                throw FleetError("no SUBACK for \(topic) within \(Int(timeout)) s\(notes())")
            }
            if let code = granted.first, code >= 128 {
                throw FleetError("the broker refused the subscription to \(topic): \(MQTTClient.connackText(rc: code)) (is the tool's account allowed to read it?)")
            }
        }
    }

    @discardableResult
    public func publish(_ topic: String, _ payload: String, qos: Int32 = 1, retain: Bool = false) throws(FleetError) -> Int32 {
        guard let client else { return 0 }
        do { return try client.publish(topic, payload, qos: qos, retain: retain) } catch { throw FleetError(error.description) }
    }

    /// Waits until the broker has acknowledged every QoS 1 publish in
    /// `mids`; returns how many it had not within `timeout`.
    public func waitAcknowledged(_ mids: [Int32], timeout: Double) -> Int {
        let wanted = Set(mids)
        _ = wake.wait(timeout: timeout) { wanted.isSubset(of: state.acked) }
        return locked { s in
            let missing = wanted.subtracting(s.acked).count
            s.acked.subtract(wanted)
            return missing
        }
    }

    /// The next message, waiting at most `timeout` seconds.
    public func next(timeout: Double) -> Message? {
        locked(timeout: timeout, until: { $0.head < $0.inbox.count }) { s in
            guard s.head < s.inbox.count else { return nil }
            let m = s.inbox[s.head]
            s.head += 1
            if s.head == s.inbox.count { s.inbox.removeAll(keepingCapacity: true); s.head = 0 }
            return m
        }
    }

    /// Sends a marker to the tool's own topic and hands every message that
    /// arrives before it to `body`; false when the marker did not come back
    /// within `timeout` (the account may not publish to its own topic).
    public func sync(timeout: Double, _ body: (Message) -> Void) throws(FleetError) -> Bool {
        syncCount += 1
        let token = "sync-\(getpid())-\(syncCount)"
        try publish(syncTopic, token, qos: 0)
        let deadline = MonotonicClock.seconds() + timeout
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0, let m = next(timeout: left) else { return false }
            if m.topic == syncTopic {
                if String(decoding: m.payload, as: UTF8.self) == token { return true }
                continue
            }
            body(m)
        }
    }

    /// Messages dropped because `capacity` were already waiting.
    public var dropped: Int { locked { $0.dropped } }

    public func close() { client?.stop() }

    /// The MQTT version of the connection: 5, or 4 (3.1.1) when the broker refused 5.
    public var protocolVersion: Int { client?.protocolVersion ?? 5 }

    // MARK: - MQTTClientDelegate (the client's network thread)

    public func mqttConnected(rc: Int32) { update { $0.connack = rc } }
    public func mqttDisconnected(rc: Int32) { update { $0.disconnects += 1 } }
    public func mqttAttemptFailed(_ f: AttemptFailure) {
        update { s in
            if f.closedBeforeCONNACK { s.closedAttempts += 1 } else { s.failedAttempts += 1 }
            s.notes.append(f.reason)
            if s.notes.count > 5 { s.notes.removeFirst() }
        }
    }
    public func mqttPublished(mid: Int32) { update { _ = $0.acked.insert(mid) } }
    public func mqttSubscribed(mid: Int32, granted: [Int32]) { update { $0.subacks[mid] = granted } }
    public func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        if let handler, topic != syncTopic { handler(Message(topic: topic, payload: payload, retained: retained)); return }
        update { s in
            if s.inbox.count - s.head >= capacity { s.dropped += 1; return }
            s.inbox.append(Message(topic: topic, payload: payload, retained: retained))
        }
    }
    public func mqttLibraryLog(_ message: String) {
        update { s in
            s.notes.append(message)
            if s.notes.count > 5 { s.notes.removeFirst() }
        }
    }

    // MARK: -

    private func notes() -> String {
        let n = locked { $0.notes }
        return n.isEmpty ? "" : " (\(n.joined(separator: "; ")))"
    }

    private func update(_ body: (inout State) -> Void) { wake.broadcast { body(&state) } }

    private func locked<T>(_ body: (inout State) -> T) -> T { wake.broadcast { body(&state) } }

    private func locked<T>(timeout: Double, until ready: (State) -> Bool, _ body: (inout State) -> T?) -> T? {
        guard wake.wait(timeout: timeout, until: { ready(state) }) else { return nil }
        return wake.broadcast { body(&state) }
    }
}
