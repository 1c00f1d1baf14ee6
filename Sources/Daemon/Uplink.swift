import Glibc
import MQTTBridge
import Soundbox
import SoundboxStore
import Synchronization

/// The link to the bank's backend (DESIGN §2): payments, config and
/// commands in; receipts, status and config/applied out.
///
/// Every message goes through `Inbox` inside `on_message`: payments are
/// made durable there (through `Ingest`), so the broker's PUBACK only
/// leaves once they are stored. Receipts go out through `ReceiptSender`;
/// the retained status when it changes. The link's state, and whether another
/// client keeps taking the session (`TakeoverWatch`), are kept in one
/// place, `device.link`, which status, doctor and the LED read;
/// `LinkPrompts` decides when 网络已断开 / 网络已连接 are spoken, and the
/// scheduler hears of them and of each connect as `LinkEvent`s.
final class Uplink: Service, MQTTClientDelegate, @unchecked Sendable {
    let name = "mqtt"
    let topics: Topics
    private let deviceID: String
    private var client: MQTTClient!   // set once in init (it needs self as its delegate)
    /// What the retained status reports; the uplink writes its `link`.
    private let device: DeviceState
    private let inbox: Inbox
    private let receipts: ReceiptSender
    private let changes: Changes
    /// Wakes the sender thread: a receipt waits, the link changed, stop.
    private var events: Wakeup { changes.uplink }
    private let onLink: @Sendable (LinkEvent) -> Void
    private let log = Log("mqtt")
    private let stopping = Atomic<Bool>(false)
    private let deadline = Mutex<Double>(0)

    /// The sender thread's and the network thread's timers (the link's
    /// state itself is `device.link`).
    private struct State {
        var status = StatusThrottle()
        var prompts = LinkPrompts()
        var takeover: TakeoverWatch
        /// The SUBSCRIBE of the current connection, until its SUBACK.
        var subscribeMID: Int32?
        /// Connections in a row closed before the SUBACK.
        var refusedInARow = 0
    }
    private let state: Mutex<State>

    /// Makes the client (nothing is sent yet).
    /// - Parameter onLink: told of each connect and of the link prompts to speak (the scheduler).
    init(config: Config, deviceID: String, device: DeviceState, inbox: Inbox, changes: Changes,
         onLink: @escaping @Sendable (LinkEvent) -> Void) throws(MQTTError) {
        self.device = device
        self.inbox = inbox
        self.changes = changes
        self.onLink = onLink
        receipts = ReceiptSender(storage: device.storage)
        self.deviceID = deviceID
        state = Mutex(State(takeover: TakeoverWatch(reconnectMax: config[.mqttReconnectMax])))
        topics = Topics(prefix: config[.mqttPrefix], device: deviceID)
        // One broker, or a cluster's nodes tried in turn (validated with the settings).
        let brokers = BrokerAddress.list(config[.mqttHost]) ?? [BrokerAddress(host: config[.mqttHost])]
        var o = MQTTClient.Options(clientID: deviceID, host: brokers[0].host, port: brokers[0].port ?? config[.mqttPort])
        o.alternates = brokers.dropFirst().map { BrokerAddress(host: $0.host, port: $0.port ?? config[.mqttPort]) }
        o.keepalive = config[.mqttKeepalive]
        o.deadLink = config[.mqttDeadLink]
        o.will = (topics.status, { [deviceID] since in StatusReport.offline(id: deviceID, since: since) })
        o.reconnectMax = config[.mqttReconnectMax]
        if !config[.mqttTLSCA].isEmpty {
            o.tls = .init(ca: config[.mqttTLSCA], cert: config[.mqttTLSCert].nonEmpty, key: config[.mqttTLSKey].nonEmpty)
        }
        o.username = config[.mqttUsername].nonEmpty
        o.password = config[.mqttPassword].nonEmpty
        client = try MQTTClient(o, delegate: self)
        device.link.withLock { $0.endpoint = client.currentBroker; $0.enabled = true }
        log.info("connecting", ["host": o.host, "port": "\(o.port)", "client_id": deviceID, "tls": o.tls == nil ? "off" : "on",
                                "brokers": "\(brokers.count)"])
    }

    /// Starts connecting in the background; returns at once.
    func connect() throws(MQTTError) { try client.start() }

    // MARK: - Service (the sender thread)

    /// Sends receipts and status until `shutdown`, then says goodbye.
    func run() {
        while !stopping.load(ordering: .relaxed) {
            receipts.pump(client, topic: topics.receipt)
            var wait = publishStatus()
            if let t = checkLink() { wait = min(wait ?? t, t) }
            events.waitForWork(timeout: wait)
        }
        receipts.pump(client, topic: topics.receipt)
        if device.link.withLock({ $0.connected }) {
            // A clean goodbye: the will is not published, so say it ourselves.
            _ = try? client.publish(topics.status, StatusReport.offline(id: deviceID, since: client.connectionSince), retain: true)
        }
        // Within the shutdown's deadline (a connect hanging on a dead network cannot be cut short).
        if !client.stop(timeout: max(0, deadline.withLock { $0 } - SystemClock.monotonic())) {
            log.warning("network_thread_still_busy")
        }
    }

    func shutdown(deadline: Double) {
        self.deadline.withLock { $0 = deadline }
        stopping.store(true, ordering: .relaxed)
        events.notify()
    }

    // MARK: - Network thread

    func mqttConnected(rc: Int32) {
        guard rc == 0 else {
            let why = MQTTClient.connackText(rc: rc)
            log.error("connect_refused", ["rc": "\(rc)", "reason": why])
            device.link.withLock { $0.lastError = "the broker refused the connection (CONNACK \(rc): \(why))" }
            return
        }
        let broker = client.currentBroker
        device.link.withLock { $0.endpoint = broker }
        let prompt = state.withLock { s -> Prompt? in
            let now = SystemClock.monotonic()
            s.status.reconnected()
            s.takeover.connected(at: now)
            return s.prompts.connected(at: now)
        }
        receipts.connected()
        do {
            var last: Int32 = 0
            for t in [topics.payment, topics.config, topics.cmd] { last = try client.subscribe(t, qos: 1) }
            state.withLock { $0.subscribeMID = last }
        } catch {
            log.error("subscribe_failed", ["error": error.description])
        }
        log.info("connected", ["payment_topic": topics.payment, "mqtt": "\(client.protocolVersion)", "broker": broker])
        // What waited at the broker while the box was away arrives now.
        onLink(.connected)
        device.link.withLock { $0.connected = true; $0.lastError = nil; $0.protocolLevel = client.protocolVersion }
        speak(prompt)
        changes.post(.state)
    }

    func mqttSubscribed(mid: Int32, granted: [Int32]) {
        state.withLock { s in
            if s.subscribeMID == mid { s.subscribeMID = nil; s.refusedInARow = 0 }
        }
    }

    func mqttDisconnected(rc: Int32) {
        receipts.disconnected()
        // Closed before the broker acknowledged our subscriptions: a refusal
        // (an ACL on a 3.1.1 broker, or a cluster that cannot reach the node
        // holding this device's session: RabbitMQ), not another client.
        let refused = state.withLock { s -> Int in
            guard s.subscribeMID != nil, !MQTTClient.isSessionTakeover(rc: rc) else { s.refusedInARow = 0; return 0 }
            s.subscribeMID = nil
            s.refusedInARow += 1
            return s.refusedInARow
        }
        // One such close is any dropped link; two in a row, a refusal.
        if refused >= 2 {
            let why = "the broker at \(client.currentBroker) closed the connection before acknowledging the subscriptions (\(refused) in a row)"
            state.withLock { $0.prompts.disconnected(at: SystemClock.monotonic()) }
            device.link.withLock { $0.connected = false; $0.lastError = why }
            guard !stopping.load(ordering: .relaxed) else { return }
            if refused == 2 || refused % 20 == 0 {
                log.warning("subscription_refused", ["broker": client.currentBroker, "in_a_row": "\(refused)",
                                                     "hint": "an ACL that forbids this device's topics, or a clustered broker that cannot reach the node holding this device's session (RabbitMQ: until that node is back); the box keeps trying the brokers of mqtt.host in turn"])
            }
            changes.post(.state)
            return
        }
        let certain = MQTTClient.isSessionTakeover(rc: rc)
        let (holdOff, takenOver, wasTakenOver) = state.withLock { s in
            let was = s.takeover.isTakenOver
            // A broker that hands our session to another client closes the
            // connection (rc 7, "connection lost"; MQTT 5 brokers from
            // mosquitto 2.0.15 on say 142 first); a keepalive timeout (19)
            // or a refusal is something else.
            let now = SystemClock.monotonic()
            let holdOff = s.takeover.disconnected(at: now, certain: certain, lost: rc == MQTTClient.connectionLost)
            s.prompts.disconnected(at: now)
            return (holdOff, s.takeover.isTakenOver, was)
        }
        device.link.withLock {
            $0.connected = false
            $0.takeover = takenOver
            $0.lastError = $0.lastError ?? "disconnected (rc \(rc): \(MQTTClient.disconnectText(rc: rc)))"
        }
        guard !stopping.load(ordering: .relaxed) else { return }
        log.warning("disconnected", ["rc": "\(rc)", "takeover": certain ? "certain" : takenOver ? "suspected" : "no"])
        if takenOver {
            if !wasTakenOver {
                log.error("session_taken_over", ["client_id": deviceID, "disconnects": "\(state.withLock { $0.takeover.inARow })",
                                                 "hint": "another box uses this device id (or another client its credentials): make device.id unique; bind client ids to credentials on the broker"])
            }
            client.delayReconnect(atLeast: holdOff)
        }
        changes.post(.state)   // the LED; the sender thread times the loss prompt (checkLink)
    }

    func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        let kind: Signature.Kind
        switch topic {
        case topics.payment: kind = .payment
        case topics.config: kind = .config
        case topics.cmd: kind = .cmd
        default: log.warning("unexpected_topic", ["topic": topic]); return
        }
        guard let answer = inbox.receive(kind, payload, retained: retained) else { return }
        do { try client.publish(topics.configApplied, answer, retain: true) } catch {
            log.error("config_applied_publish_failed", ["error": error.description])
        }
    }

    func mqttLibraryLog(_ message: String) {
        log.warning("library", ["message": message])
        device.link.withLock { $0.noteError(message) }
    }

    func mqttNetwork(_ note: String) {
        log.info("network", ["note": note])
    }

    func mqttPublished(mid: Int32) {
        if receipts.acknowledged(mid: mid) { events.notify() }
    }

    // MARK: - Sender thread

    /// Publishes the retained status when it changed, at most twice a
    /// second; returns how long to wait before trying again, if pending.
    private func publishStatus() -> Double? {
        guard device.link.withLock({ $0.connected }) else { return nil }
        let report = StatusReport.make(device)
        let text = report.json(id: deviceID, since: client.connectionSince, uptime: false)
        let now = SystemClock.monotonic()
        switch state.withLock({ $0.status.decide(text, now: now) }) {
        case .none: return nil
        case .wait(let seconds): return seconds
        case .publish: break
        }
        do {
            try client.publish(topics.status, report.json(id: deviceID, since: client.connectionSince, uptime: true), retain: true)
            state.withLock { $0.status.published(text, at: now) }
        } catch {
            log.warning("status_publish_failed", ["error": error.description])
        }
        return nil
    }

    /// The link's timers: clears a takeover fault once the link has stayed
    /// up long enough; speaks 网络已断开 once it has been down long enough
    /// (and no takeover is suspected). Returns when to look again.
    private func checkLink() -> Double? {
        let now = SystemClock.monotonic()
        let (cleared, prompt, next) = state.withLock { s in
            (s.takeover.check(at: now), s.prompts.check(at: now, conflict: s.takeover.isTakenOver),
             [s.takeover.nextCheck, s.prompts.nextCheck].compactMap { $0 }.min())
        }
        if cleared {
            device.link.withLock { $0.takeover = false }
            changes.post(.state)
            log.info("session_stable", ["client_id": deviceID])
        }
        speak(prompt)
        return next.map { max(0, $0 - now) }
    }

    /// A link prompt `LinkPrompts` decided on, when mqtt.link_prompts is on.
    private func speak(_ prompt: Prompt?) {
        guard let prompt, device.settings.current[.mqttLinkPrompts] else { return }
        onLink(.prompt(prompt))
    }
}

/// What the broker link tells the rest of the daemon (the scheduler).
enum LinkEvent: Sendable {
    /// Connected (again): what waited at the broker arrives now, and an
    /// offline summary may be due.
    case connected
    /// A link prompt to speak (网络已断开 / 网络已连接).
    case prompt(Prompt)
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
