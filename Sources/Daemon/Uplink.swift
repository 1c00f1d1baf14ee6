import Glibc
import MQTTBridge
import Soundbox
import SoundboxStore
import Synchronization

/// The link to the bank's backend (DESIGN §2): payments, config and
/// commands in; receipts, status and config/applied out.
///
/// Payments are made durable inside `on_message` (through `Ingest`), so the
/// broker's PUBACK only leaves once they are stored. Receipts are sent
/// oldest first from the store's outbox, at QoS 1, at most `window` in
/// flight, and deleted only when the broker acknowledges them; after a
/// reconnect everything unacknowledged is sent again.
final class Uplink: MQTTClientDelegate, @unchecked Sendable {
    let topics: Topics
    private var client: MQTTClient?
    private let context: Context
    let events: Wakeup
    private let log = Log("mqtt")
    private let stopping = Atomic<Bool>(false)
    static let window = 20

    private struct State {
        var connected = false
        var everConnected = false
        /// mid → outbox row, for receipts in flight.
        var inflight: [Int32: Int64] = [:]
        /// mid → receipt held only in memory (storage failing).
        var inflightMemory: [Int32: Receipt] = [:]
        /// PUBACKs that arrived before we recorded their mid (a publish
        /// and its PUBACK can race on loopback), with when they came. Only
        /// fresh ones count: a late PUBACK of a message libmosquitto re-sent
        /// after a reconnect must not, 65,536 messages later, acknowledge
        /// another receipt whose mid wrapped around to it.
        var earlyAcks: [Int32: Double] = [:]

        /// Takes an early PUBACK for `mid` if one came in the last second.
        mutating func takeEarlyAck(_ mid: Int32) -> Bool {
            guard let t = earlyAcks.removeValue(forKey: mid) else { return false }
            return SystemClock.monotonic() - t < 1
        }
        /// Outbox rows acknowledged, to delete.
        var acked: [Int64] = []
        /// Highest outbox row sent on this connection.
        var lastSent: Int64 = 0
        var lastStatus = ""
        var lastStatusAt = 0.0
        /// When each link prompt was last spoken (once a minute at most).
        var lastPromptAt: [Prompt: Double] = [:]
    }
    private let state = Mutex(State())

    init(context: Context, events: Wakeup, device: String) {
        self.context = context
        self.events = events
        topics = Topics(prefix: context.settings.current[.mqttPrefix], device: device)
    }

    /// Connects in the background; returns at once.
    func start(_ config: Config, device: String) throws(MQTTError) {
        var o = MQTTClient.Options(clientID: device, host: config[.mqttHost], port: config.integer(.mqttPort))
        o.keepalive = config.integer(.mqttKeepalive)
        o.will = (topics.status, #"{"online":false}"#)
        o.reconnectMax = config.integer(.mqttReconnectMax)
        if !config[.mqttTLSCA].isEmpty {
            o.tls = .init(ca: config[.mqttTLSCA], cert: config[.mqttTLSCert].nonEmpty, key: config[.mqttTLSKey].nonEmpty)
        }
        o.username = config[.mqttUsername].nonEmpty
        o.password = config[.mqttPassword].nonEmpty
        context.link.withLock { $0.endpoint = "\(o.host):\(o.port == 0 ? (o.tls == nil ? 1883 : 8883) : o.port)"; $0.enabled = true }
        let c = try MQTTClient(o, delegate: self)
        client = c
        log.info("connecting", ["host": o.host, "port": "\(o.port)", "client_id": device, "tls": o.tls == nil ? "off" : "on"])
        try c.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        events.notify()
        if let client, state.withLock({ $0.connected }) {
            // A clean goodbye: the will is not published, so say it ourselves.
            _ = try? client.publish(topics.status, #"{"online":false}"#, retain: true)
        }
        client?.stop()
    }

    // MARK: - Network thread

    func mqttConnected(rc: Int32) {
        guard rc == 0 else {
            log.error("connect_refused", ["rc": "\(rc)"])
            context.link.withLock { $0.lastError = "the broker refused the connection (CONNACK \(rc): " + (rc == 5 ? "not authorised" : rc == 4 ? "bad user name or password" : "refused") + ")" }
            return
        }
        let wasConnected = state.withLock { s -> Bool in
            let was = s.everConnected
            s.connected = true; s.everConnected = true
            s.inflight = [:]; s.earlyAcks = [:]; s.lastSent = 0; s.lastStatus = ""
            return was
        }
        do {
            for t in [topics.payment, topics.config, topics.cmd] { try client?.subscribe(t, qos: 1) }
        } catch {
            log.error("subscribe_failed", ["error": error.description])
        }
        log.info("connected", ["payment_topic": topics.payment])
        context.link.withLock { $0.connected = true; $0.lastError = nil }
        if wasConnected { prompt(.networkConnected) }
        events.notify()
    }

    func mqttDisconnected(rc: Int32) {
        let returned = state.withLock { s -> [Receipt] in
            s.connected = false
            let r = s.inflightMemory.sorted { $0.key < $1.key }.map(\.value)
            s.inflightMemory = [:]
            return r
        }
        if !returned.isEmpty { context.backlog.state.withLock { $0.receipts.insert(contentsOf: returned, at: 0) } }
        context.link.withLock { $0.connected = false; $0.lastError = $0.lastError ?? "disconnected (rc \(rc))" }
        guard !stopping.load(ordering: .relaxed) else { return }
        log.warning("disconnected", ["rc": "\(rc)"])
        prompt(.networkDisconnected)
    }

    func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        switch topic {
        case topics.payment: payment(payload)
        case topics.config: remoteConfig(payload)
        case topics.cmd: command(payload)
        default: log.warning("unexpected_topic", ["topic": topic])
        }
    }

    func mqttLibraryLog(_ message: String) {
        log.warning("library", ["message": message])
        context.link.withLock { $0.noteError(message) }
    }

    func mqttPublished(mid: Int32) {
        state.withLock { s in
            if let n = s.inflight.removeValue(forKey: mid) { s.acked.append(n) }
            else if s.inflightMemory.removeValue(forKey: mid) == nil {
                let now = SystemClock.monotonic()
                if s.earlyAcks.count > 64 { s.earlyAcks = s.earlyAcks.filter { now - $0.value < 1 } }
                s.earlyAcks[mid] = now
            }
        }
        events.notify()
    }

    /// Inside on_message: durable before returning (then the PUBACK leaves).
    private func payment(_ bytes: [UInt8]) {
        Failpoint.hit("in_on_message")
        switch PaymentMessage.parse(bytes, maxAmount: context.settings.current.amount(.paymentMaxAmount)) {
        case .success(let p): _ = context.ingest.accept(p)
        case .failure(let r): context.ingest.reject(r.id, r.reason)
        }
    }

    // MARK: - Sender thread

    /// Sends receipts and status until `stop`.
    func run() {
        while !stopping.load(ordering: .relaxed) {
            deleteAcknowledged()
            sendReceipts()
            let statusWait = publishStatus()
            events.waitForWork(timeout: statusWait)
        }
        deleteAcknowledged()
    }

    private func deleteAcknowledged() {
        let acked = state.withLock { s -> [Int64] in defer { s.acked = [] }; return s.acked }
        guard !acked.isEmpty else { return }
        do { try context.store?.deleteOutbox(acked) } catch {
            log.error("outbox_delete_failed", ["error": error.description])   // sent again later: at-least-once
        }
    }

    private func sendReceipts() {
        guard let client else { return }
        while true {
            deleteAcknowledged()
            let (connected, room, after) = state.withLock { s in (s.connected, Self.window - s.inflight.count - s.inflightMemory.count, s.lastSent) }
            guard connected, room > 0 else { return }
            var sent = 0
            // Receipts held in memory (storage failing) first: they are the newest
            // decisions about payments the backend cannot otherwise learn of.
            while sent < room, let r = context.backlog.state.withLock({ $0.receipts.isEmpty ? nil : $0.receipts.removeFirst() }) {
                do {
                    let mid = try client.publish(topics.receipt, r.json)
                    state.withLock { s in if !s.takeEarlyAck(mid) { s.inflightMemory[mid] = r } }
                    sent += 1
                } catch {
                    context.backlog.state.withLock { $0.receipts.insert(r, at: 0) }
                    return
                }
            }
            let items: [OutboxItem]
            do { items = try context.store?.outbox(limit: room + 2 * Self.window).filter { $0.n > after } ?? [] } catch {
                log.error("outbox_read_failed", ["error": error.description])
                return
            }
            for item in items.prefix(room - sent) {
                guard let mid = try? client.publish(topics.receipt, item.payload) else { return }
                state.withLock { s in
                    s.lastSent = max(s.lastSent, item.n)
                    if s.takeEarlyAck(mid) { s.acked.append(item.n) } else { s.inflight[mid] = item.n }
                }
                sent += 1
            }
            if sent == 0 { return }
        }
    }

    /// Publishes the retained status when it changed, at most twice a
    /// second; returns how long to wait before trying again, if pending.
    private func publishStatus() -> Double? {
        guard let client, state.withLock({ $0.connected }) else { return nil }
        let report = StatusReport.make(context)
        let text = report.json(uptime: false)
        let now = SystemClock.monotonic()
        let wait = state.withLock { s -> Double? in
            if text == s.lastStatus { return nil }
            let due = s.lastStatusAt + 0.5 - now
            return due > 0 ? due : 0
        }
        guard let wait else { return nil }
        if wait > 0 { return wait }
        do {
            try client.publish(topics.status, report.json(uptime: true), retain: true)
            state.withLock { $0.lastStatus = text; $0.lastStatusAt = now }
        } catch {
            log.warning("status_publish_failed", ["error": error.description])
        }
        return nil
    }

    /// 网络已断开 / 网络已连接, each at most once a minute (a flapping link
    /// must not drown out payments), when enabled.
    private func prompt(_ p: Prompt) {
        guard context.settings.current.bool(.mqttLinkPrompts) else { return }
        let now = SystemClock.monotonic()
        let due = state.withLock { s -> Bool in
            guard now - (s.lastPromptAt[p] ?? -1e9) >= 60 else { return false }
            s.lastPromptAt[p] = now
            return true
        }
        if due { context.scheduler.submit(UserJob(.prompt(p))) }
    }

    // MARK: - Config and commands (DESIGN §2)

    /// Validates every key, applies all or nothing, persists, answers on
    /// config/applied (retained). The same config again (a reconnect
    /// redelivers the retained message) changes nothing and says nothing.
    private func remoteConfig(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }   // the retained config was cleared
        let answer: String
        switch RemoteConfig.changes(bytes) {
        case .failure(let e):
            log.warning("config_rejected", ["reason": e.description])
            answer = #"{"ok":false,"error":"# + JSONText.quote(e.description) + "}"
        case .success(let changes):
            let rejected = context.settings.problems(changes)
            if !rejected.isEmpty {
                log.warning("config_rejected", ["keys": rejected.keys.sorted().joined(separator: ",")])
                let fields = rejected.sorted { $0.key < $1.key }.map { JSONText.quote($0.key) + ":" + JSONText.quote($0.value) }
                answer = #"{"ok":false,"rejected":{"# + fields.joined(separator: ",") + "}}"
            } else if changes.allSatisfy({ context.settings.current[ConfigKey.named($0.key)!] == $0.value }) {
                log.info("config_unchanged")
                return
            } else {
                do {
                    let now = try context.settings.set(changes)
                    let fields = now.effective.map { JSONText.quote($0.key.name) + ":" + JSONText.quote($0.value) }
                    answer = #"{"ok":true,"config":{"# + fields.joined(separator: ",") + "}}"
                    log.info("config_applied", ["keys": changes.keys.sorted().joined(separator: ",")])
                    events.notify()
                } catch {
                    answer = #"{"ok":false,"error":"# + JSONText.quote(error.description) + "}"
                }
            }
        }
        do { try client?.publish(topics.configApplied, answer, retain: true) } catch {
            log.error("config_applied_publish_failed", ["error": error.description])
        }
    }

    private func command(_ bytes: [UInt8]) {
        let config = context.settings.current
        switch RemoteCommand.parse(bytes, maxAmount: config.amount(.paymentMaxAmount), now: SystemClock.nowMs()) {
        case .failure(let e):
            log.warning("cmd_rejected", ["reason": e.description])
        case .success(.say(let p)):
            log.info("cmd", ["cmd": "say", "id": p.id])
            _ = context.ingest.accept(p)
        case .success(.replay(let id)):
            let entry = try? (id.map { try context.store?.entry(id: $0) } ?? context.store?.history(limit: 1).first)
            guard let entry = entry ?? nil else {
                log.warning("cmd_rejected", ["cmd": "replay", "reason": "no such payment", "id": id ?? "-"])
                return
            }
            log.info("cmd", ["cmd": "replay", "id": entry.payment.id])
            context.scheduler.submit(UserJob(.replay(entry.payment)))
        case .success(.summary):
            log.info("cmd", ["cmd": "summary"])
            context.scheduler.submit(UserJob(.summary))
        case .success(.test):
            log.info("cmd", ["cmd": "test"])
            context.scheduler.submit(UserJob(.test))
        }
    }
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
