// ~560 lines: thousands of boxes behind one poll loop, each speaking the whole device contract (status, config, cmd update); split, the contract would be read in pieces.
/// Thousands of simulated boxes in one process, each its own MQTT
/// connection speaking the device contract (docs/mqtt.md): a retained
/// `status` with a will, `config` → `config/applied` with the signature
/// checked, and `cmd update` answered by receipts and a reboot onto the
/// new version (or a rollback, for the devices told to fail). For the
/// fleet tool's tests and `soundbox-bench fleet`; not a device: no audio,
/// no queue, no payments.
///
/// One thread, one epoll set, one socket per box speaking MQTT 3.1.1
/// itself (MQTTWire): libmosquitto takes three descriptors per client, and
/// 10,000 boxes must fit in one process's descriptor limit (20,000 here).
import CLinux
import Glibc
import Soundbox
import SoundboxCrypto
import SoundboxSystem

public final class SimulatedFleet: @unchecked Sendable {
    public struct Options: Sendable {
        public var host = "127.0.0.1"
        public var port: Int
        public var prefix = "soundbox/v1"
        public var ids: [String]
        public var version = "0.1.0"
        /// Configs and commands must verify with it (nil: taken unsigned).
        public var backendKey: Ed25519PublicKey?
        /// Devices whose updates fail their health check and roll back.
        public var failing: Set<String> = []
        /// Seconds between an update's steps, and of the reboot.
        public var step = 0.05
        public var reboot = 0.3
        public var keepalive: Int32 = 120
        /// Connections opened but not yet accepted at most (the broker's backlog).
        public var connectWindow = 200

        public init(port: Int, ids: [String]) { self.port = port; self.ids = ids }
    }

    /// What the devices did, for tests and benchmarks to wait on.
    public struct Counters: Sendable, Equatable {
        public var connected = 0
        public var connects = 0
        public var configsApplied = 0
        public var configsRefused = 0
        public var signaturesRefused = 0
        public var updatesTaken = 0
        public var committed = 0
        public var rolledBack = 0
        public var updatesRefused = 0
    }

    public let options: Options
    private let counters = Condition()
    private var _counters = Counters()
    private var devices: [Device] = []
    private var epoll: Int32 = -1
    private var thread: ServiceThread?
    private var running = true
    private var timers = TimerHeap()
    /// Devices waiting for their first connection.
    private var toConnect: [Int] = []
    private var touched: Set<Int> = []

    public init(_ options: Options) {
        self.options = options
    }

    deinit { stop() }

    /// Opens every connection (a window at a time) on the simulator's thread.
    public func start() throws(SimulatorError) {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(options.host, String(options.port), &hints, &found) == 0, let a = found, let sa = a.pointee.ai_addr else {
            throw SimulatorError("\(options.host): no IPv4 address")
        }
        sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address = $0.pointee }
        freeaddrinfo(a)
        epoll = soundbox_epoll_create()
        guard epoll >= 0 else { throw SimulatorError("epoll_create1: errno \(errno)") }
        var raised = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised)
        let need = rlim_t(options.ids.count + 256)
        if raised.rlim_cur < need {
            raised.rlim_cur = min(need, raised.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised)
        }
        guard raised.rlim_cur >= need else { throw SimulatorError("\(options.ids.count) devices need \(need) descriptors; the limit is \(raised.rlim_cur)") }
        devices = options.ids.enumerated().map { Device(index: $0.offset, id: $0.element, version: options.version) }
        toConnect = Array(devices.indices.reversed())
        thread = ServiceThread(name: "fleet-sim") { [self] in loop() }
    }

    private var address = sockaddr_in()

    /// Waits until `ready` holds for the counters (or the timeout).
    public func wait(timeout: Double, until ready: (Counters) -> Bool) -> Bool {
        counters.wait(timeout: timeout) { ready(_counters) }
    }

    public var snapshot: Counters { counters.broadcast { _counters } }

    /// The running version of a device (after its updates).
    public func version(of id: String) -> String? {
        counters.broadcast { versions[id] ?? (options.ids.contains(id) ? options.version : nil) }
    }
    /// Versions after a committed update (under `counters`' lock).
    private var versions: [String: String] = [:]

    /// Stops the thread; the connections end without their will (a clean stop).
    public func stop() {
        guard let t = thread else { return }
        counters.broadcast { running = false }
        _ = t.join(timeout: 30)
        thread = nil
        for d in devices where d.socket >= 0 {
            _ = MQTTWire.disconnect.withUnsafeBytes { send(d.socket, $0.baseAddress, 2, Int32(MSG_NOSIGNAL)) }
            close(d.socket)
            d.socket = -1
        }
        if epoll >= 0 { close(epoll); epoll = -1 }
    }

    // MARK: the loop (the simulator's thread only)

    private func loop() {
        var data = [UInt64](repeating: 0, count: 256)
        var events = [UInt32](repeating: 0, count: 256)
        var lastMisc = MonotonicClock.seconds()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while counters.broadcast({ running }) {
            openConnections()
            let wait = timers.first.map { max(0, min(100, Int(($0 - MonotonicClock.seconds()) * 1000))) } ?? 100
            let n = soundbox_epoll_wait(epoll, &data, &events, 256, Int32(touched.isEmpty ? wait : 0))
            for i in 0..<max(0, Int(n)) {
                let d = devices[Int(data[i])]
                guard d.socket >= 0 else { continue }
                if d.connecting {
                    var error: Int32 = 0
                    var size = socklen_t(4)
                    getsockopt(d.socket, SOL_SOCKET, SO_ERROR, &error, &size)
                    guard error == 0 else { dropped(d); continue }
                    d.connecting = false
                    d.since = MonotonicClock.unixMilliseconds()
                    let will = Array(offline(d).utf8)
                    d.queue(MQTTWire.connect(clientID: d.id, keepalive: UInt16(options.keepalive), willTopic: topic(d, "status"), will: will))
                }
                if events[i] & (soundbox_epoll_in | soundbox_epoll_err | soundbox_epoll_hup) != 0 { read(d, &chunk) }
                touched.insert(d.index)
            }
            let now = MonotonicClock.seconds()
            while let due = timers.first, due <= now, let (_, index, action) = timers.pop() { run(action, devices[index]) }
            if now - lastMisc >= 1 {
                lastMisc = now
                for d in devices where d.online && now - d.lastSent >= Double(options.keepalive) / 2 {
                    d.queue(MQTTWire.pingreq)
                    touched.insert(d.index)
                }
            }
            flush()
        }
    }

    /// Reads what the socket has and handles each whole packet.
    private func read(_ d: Device, _ chunk: inout [UInt8]) {
        while d.socket >= 0 {
            let got = chunk.withUnsafeMutableBytes { recv(d.socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) { dropped(d); return }
            if got < 0 { break }
            d.input += chunk[0..<got]
            var at = 0
            do {
                while let (packet, length) = try MQTTWire.next(d.input, from: at, limit: 256 << 10) {
                    at += length
                    handle(d, packet)
                    guard d.socket >= 0 else { return }
                }
            } catch {
                dropped(d); return
            }
            d.input.removeFirst(at)
        }
    }

    private func handle(_ d: Device, _ packet: MQTTWire.Packet) {
        switch packet {
        case .connack(let rc): connected(d, Int32(rc))
        case .publish(let topic, let payload, let qos, let retain, let id):
            if qos > 0 { d.queue(MQTTWire.puback(id)) }
            message(d, topic: topic, payload: payload, retained: retain)
        case .other: break
        }
    }

    /// Writes what each touched connection has queued; one that cannot take
    /// more waits for EPOLLOUT.
    private func flush() {
        for i in touched {
            let d = devices[i]
            guard d.socket >= 0, !d.connecting else { continue }
            if !write(d) { continue }
            let wanted = d.sentUpTo < d.output.count
            if wanted != d.watchingOut {
                d.watchingOut = wanted
                _ = soundbox_epoll_set(epoll, EPOLL_CTL_MOD, d.socket, soundbox_epoll_in | (wanted ? soundbox_epoll_out : 0), UInt64(i))
            }
        }
        touched = []
    }

    /// Sends what it can of the device's output; false if the connection broke.
    @discardableResult
    private func write(_ d: Device) -> Bool {
        while d.sentUpTo < d.output.count {
            let n = d.output.withUnsafeBytes { send(d.socket, $0.baseAddress! + d.sentUpTo, $0.count - d.sentUpTo, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
            guard n > 0 else { dropped(d); return false }
            d.sentUpTo += n
            d.lastSent = MonotonicClock.seconds()
        }
        if d.sentUpTo == d.output.count { d.output.removeAll(keepingCapacity: true); d.sentUpTo = 0 }
        return true
    }

    private func openConnections() {
        var inFlight = devices.count - toConnect.count - counters.broadcast { _counters.connected } - rebooting
        while inFlight < options.connectWindow, let i = toConnect.popLast() {
            connect(devices[i])
            inFlight += 1
        }
    }

    private var rebooting = 0

    /// A non-blocking connect; the CONNECT goes when the socket is writable.
    private func connect(_ d: Device) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { timers.push(MonotonicClock.seconds() + 1, d.index, .reconnect); return }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        var a = address
        let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 || errno == EINPROGRESS else { close(fd); timers.push(MonotonicClock.seconds() + 1, d.index, .reconnect); return }
        d.socket = fd
        d.connecting = true
        d.input = []
        d.output = []
        d.sentUpTo = 0
        d.watchingOut = true
        _ = soundbox_epoll_add(epoll, fd, soundbox_epoll_in | soundbox_epoll_out, UInt64(d.index))
    }

    /// The connection broke (not a reboot): connect again in a second.
    private func dropped(_ d: Device) {
        disconnected(d)
        if !d.inReboot { timers.push(MonotonicClock.seconds() + 1, d.index, .reconnect) }
    }

    /// Closes the socket (the broker sends the will unless a DISCONNECT went first).
    private func disconnected(_ d: Device) {
        if d.socket >= 0 { _ = soundbox_epoll_del(epoll, d.socket); close(d.socket) }
        d.socket = -1
        d.connecting = false
        if d.online { count { $0.connected -= 1 } }
        d.online = false
    }

    private func count(_ change: (inout Counters) -> Void) { counters.broadcast { change(&_counters) } }

    // MARK: the device contract

    private func topic(_ d: Device, _ leaf: String) -> String { options.prefix + "/" + d.id + "/" + leaf }

    private func connected(_ d: Device, _ rc: Int32) {
        guard rc == 0 else { dropped(d); return }
        if !d.online { count { $0.connected += 1; $0.connects += 1 } }
        d.online = true
        d.queue(MQTTWire.subscribe(id: d.nextID(), topics: [topic(d, "config"), topic(d, "cmd")], qos: 1))
        if let outcome = d.afterReboot {
            d.afterReboot = nil
            receipt(d, outcome.status, reason: outcome.reason)
        }
        publishStatus(d)
        touched.insert(d.index)
    }

    private func publish(_ d: Device, _ leaf: String, _ text: String, retain: Bool = false) {
        guard d.socket >= 0 else { return }
        d.queue(MQTTWire.publish(topic: topic(d, leaf), payload: Array(text.utf8), qos: 1, retain: retain, id: d.nextID()))
        touched.insert(d.index)
    }

    /// The will and a clean stop: `since_ms` the connection's start (docs/mqtt.md).
    private func offline(_ d: Device) -> String { #"{"online":false,"id":\#(JSONText.quote(d.id)),"since_ms":\#(d.since)}"# }

    private func publishStatus(_ d: Device) {
        var update = JSONObject()
        update.add("state", d.update.state)
        if let p = d.update.progress { update.add("progress", p) }
        update.add("version", ifPresent: d.update.version)
        update.add("reason", ifPresent: d.update.reason)
        update.add("id", ifPresent: d.update.id)
        var o = JSONObject()
        o.add("online", true)
        o.add("id", d.id)
        o.add("since_ms", d.since)
        o.add("version", d.version)
        o.add("slot", d.slot)
        o.add("update", update)
        o.add("boot_reason", d.bootReason)
        o.add("volume", d.volume)
        o.add("muted", false)
        o.add("queue_depth", 0)
        o.add("voice", "hi-IN")
        o.add("durable", true)
        o.add("faults", [String]())
        o.add("uptime_s", 1)
        publish(d, "status", o.text, retain: true)
    }

    private func receipt(_ d: Device, _ status: String, progress: Int? = nil, reason: String? = nil) {
        var o = JSONObject()
        o.add("id", ifPresent: d.update.id)
        o.add("kind", "update")
        o.add("status", status)
        if let progress { o.add("progress", progress) }
        o.add("version", ifPresent: d.update.version)
        o.add("ts", Int64(time(nil)))
        o.add("reason", ifPresent: reason)
        publish(d, "receipt", o.text)
    }

    private func message(_ d: Device, topic: String, payload: [UInt8], retained: Bool) {
        touched.insert(d.index)
        let isConfig = topic.hasSuffix("/config")
        guard !payload.isEmpty, payload.count <= 64 << 10, isConfig || !retained else { return }
        guard let document = try? JSONValue.parse(payload, maxDepth: 8) else { return }
        if let key = options.backendKey, let problem = Self.refusal(document, kind: isConfig ? .config : .cmd, device: d.id, key: key) {
            count { $0.signaturesRefused += 1 }
            var o = JSONObject()
            o.add("kind", isConfig ? "config" : "cmd")
            o.add("status", "rejected")
            o.add("reason", problem)
            o.add("ts", Int64(time(nil)))
            publish(d, "receipt", o.text)
            return
        }
        if isConfig { config(d, document, payload: payload, retained: retained) } else { command(d, document) }
    }

    /// nil when the message's signature verifies for this device.
    static func refusal(_ document: JSONValue, kind: Signature.Kind, device: String, key: Ed25519PublicKey) -> String? {
        switch Signature.envelope(document, kind: kind, device: device) {
        case .failure(let p): return p.description
        case .success(let envelope):
            guard envelope.kid == nil || envelope.kid == key.id else { return "signature: unknown key \(envelope.kid ?? "")" }
            switch Signature.content(document).flatMap({ Signature.canonical(kind: kind, device: device, envelope: envelope, content: $0) }) {
            case .failure(let p): return p.description
            case .success(let bytes): return key.verify(envelope.sig, of: bytes) ? nil : "signature: does not verify"
            }
        }
    }

    private func config(_ d: Device, _ document: JSONValue, payload: [UInt8], retained: Bool) {
        // A retained config already applied is not applied (nor answered) again.
        if retained && d.lastConfig == payload { return }
        var rejected = JSONObject(), refusals = 0
        var applied: [(String, String)] = []
        switch Signature.flatten(document, excluding: Signature.envelopeFields) {
        case .failure(let e):
            rejected.add("config", e.description); refusals += 1
        case .success(let pairs):
            for (name, value) in pairs {
                guard let key = ConfigKey.named(name) else { rejected.add(name, "\(name) is not a setting"); refusals += 1; continue }
                if let why = key.refusal(.remote) { rejected.add(name, why); refusals += 1; continue }
                guard key.kind.parse(value) != nil else {
                    rejected.add(name, ConfigError.badValue(key: name, value: value, allowed: key.kind.allowed).description); refusals += 1; continue
                }
                applied.append((name, value))
            }
        }
        var answer = JSONObject()
        if refusals == 0 {
            d.lastConfig = payload
            for (k, v) in applied where k == "audio.volume" { d.volume = Int(v) ?? d.volume }
            answer.add("ok", true)
            answer.add("config", JSONObject(applied))
            count { $0.configsApplied += 1 }
        } else {
            answer.add("ok", false)
            answer.add("rejected", rejected)
            count { $0.configsRefused += 1 }
        }
        publish(d, "config/applied", answer.text, retain: true)
        publishStatus(d)
    }

    private func command(_ d: Device, _ document: JSONValue) {
        guard case .string("update")? = document["cmd"] else { return }   // replay, test, summary: nothing to say
        guard case .success(let request) = UpdateRequest.parse(document), let version = request.version else { return }
        if ["downloading", "installing", "waiting to reboot", "trying"].contains(d.update.state) {
            if request.sha256 == d.sha256 { return }   // the same request again
            refuseUpdate(d, request, "an update is under way (\(d.update.state) \(d.update.version ?? ""))")
            return
        }
        guard DebianVersion.compare(version, d.version) > 0 else {
            refuseUpdate(d, request, "version \(version) is not newer than \(d.version), which runs")
            return
        }
        count { $0.updatesTaken += 1 }
        d.sha256 = request.sha256
        d.target = version
        d.update = .init(state: "downloading", progress: 0, version: version, id: request.id)
        receipt(d, "downloading", progress: 0)
        publishStatus(d)
        timers.push(MonotonicClock.seconds() + options.step, d.index, .step(1))
    }

    private func refuseUpdate(_ d: Device, _ request: UpdateRequest, _ reason: String) {
        count { $0.updatesRefused += 1 }
        var o = JSONObject()
        o.add("id", ifPresent: request.id)
        o.add("kind", "update")
        o.add("status", "failed")
        o.add("version", ifPresent: request.version)
        o.add("ts", Int64(time(nil)))
        o.add("reason", reason)
        publish(d, "receipt", o.text)
    }

    /// An update's steps: downloading 50, 100; installing 0, 50, 100; waiting to reboot; the reboot.
    private static let steps: [(String, Int?)] = [("downloading", 50), ("downloading", 100), ("installing", 0), ("installing", 50),
                                                  ("installing", 100), ("waiting to reboot", nil)]

    private func run(_ action: TimerHeap.Action, _ d: Device) {
        switch action {
        case .reconnect:
            guard d.socket < 0 else { return }
            if d.inReboot { d.inReboot = false; rebooting -= 1 }
            connect(d)
        case .step(let n) where n < Self.steps.count:
            let (state, progress) = Self.steps[n]
            d.update.state = state
            d.update.progress = progress
            receipt(d, state, progress: progress)
            publishStatus(d)
            timers.push(MonotonicClock.seconds() + options.step, d.index, .step(n + 1))
        case .step:
            // The reboot: a clean stop says offline; the new slot (or, failing its health check, the old one) comes back.
            publish(d, "status", offline(d), retain: true)
            if options.failing.contains(d.id) {
                d.update = .init(state: "rolled back", version: d.target, id: d.update.id,
                                 reason: "not healthy on slot \(d.slot == "A" ? "B" : "A") by the deadline: simulated")
                d.bootReason = "rollback"
                d.afterReboot = ("rolled back", d.update.reason)
                count { $0.rolledBack += 1 }
            } else {
                d.version = d.target ?? d.version
                d.slot = d.slot == "A" ? "B" : "A"
                d.update = .init(state: "committed", version: d.target, id: d.update.id)
                d.bootReason = "update"
                d.afterReboot = ("committed", nil)
                count { $0.committed += 1; versions[d.id] = d.version }
            }
            d.queue(MQTTWire.disconnect)
            write(d)
            disconnected(d)
            d.inReboot = true
            rebooting += 1
            timers.push(MonotonicClock.seconds() + options.reboot, d.index, .reconnect)
        }
    }

}

public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One simulated box.
final class Device {
    let index: Int
    let id: String
    var socket: Int32 = -1
    var connecting = false
    var watchingOut = false
    /// CONNACK received.
    var online = false
    var inReboot = false
    var input: [UInt8] = []
    var output: [UInt8] = []
    var sentUpTo = 0
    var lastSent = 0.0
    /// When the current connection began (Unix ms).
    var since: Int64 = 0
    private var lastID: UInt16 = 0
    var version: String
    var slot = "A"
    var bootReason = "clean reboot"
    var volume = 6
    var lastConfig: [UInt8]?
    struct Update { var state = "idle"; var progress: Int?; var version: String?; var id: String?; var reason: String? }
    var update = Update()
    var sha256: String?
    var target: String?
    /// The receipt to send once back from a reboot.
    var afterReboot: (status: String, reason: String?)?

    init(index: Int, id: String, version: String) {
        self.index = index; self.id = id; self.version = version
    }

    func queue(_ bytes: [UInt8]) { output += bytes }

    /// A packet id: 1-65535, in turn.
    func nextID() -> UInt16 {
        lastID = lastID == .max ? 1 : lastID + 1
        return lastID
    }
}

/// Timers by due time (a binary heap).
struct TimerHeap {
    enum Action { case reconnect, step(Int) }
    private var items: [(due: Double, index: Int, action: Action)] = []

    var first: Double? { items.first?.due }

    mutating func push(_ due: Double, _ index: Int, _ action: Action) {
        items.append((due, index, action))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].due < items[parent].due else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (Double, Int, Action)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count && items[l].due < items[m].due { m = l }
            if r < items.count && items[r].due < items[m].due { m = r }
            guard m != i else { break }
            items.swapAt(i, m)
            i = m
        }
        return top
    }
}
