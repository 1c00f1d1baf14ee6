// ~600 lines: the one owner of the libmosquitto handle and its network thread (callbacks, attempts, probes, socket options), kept whole so every C call on the handle is in one file.
import CMosquitto
import Glibc
import SoundboxSystem
import Soundbox
import Synchronization

/// One libmosquitto client handle, run by a network thread of ours in
/// threaded mode (`mosquitto_threaded_set(true)`): then, as under
/// `mosquitto_loop_start`, the PUBACK of an incoming QoS 1 message is only
/// written after `on_message` has returned (measured on 2.0.11; unthreaded,
/// it leaves before). Our thread, making every connection itself, rather
/// than `mosquitto_loop_start` or `mosquitto_loop_forever`: libmosquitto's
/// own loop gives up for good when the first connection fails, on a TLS
/// error or a DNS failure (a box that boots before its network would never
/// connect), it could not switch protocol versions between attempts, and
/// it knows nothing of the box's network.
///
/// The thread sleeps in poll(2) on the broker's socket, the kernel's
/// routing netlink (`LinkWatcher`: links, addresses, routes) and an
/// eventfd (a publish, `stop`), and lets `mosquitto_loop` (with no wait)
/// do the socket's work when it is ready. `ConnectionPlan` decides, from
/// what each attempt saw and what the network did, when to connect, when
/// to give an attempt up and how long to wait (docs/mqtt.md, "When the
/// network goes away"). Connects are non-blocking (`mosquitto_connect_
/// bind_async`) with deadlines of their own, not the kernel's two minutes
/// of SYN retries; every connection has TCP keep-alive probes and a
/// TCP_USER_TIMEOUT (`Options.deadLink`), so a dead link is noticed in
/// seconds.
///
/// MQTT 5 by default (clean start off, a Session Expiry Interval, a
/// Maximum Packet Size the broker must not exceed towards us); when the
/// broker refuses MQTT 5 (CONNACK "unsupported protocol version", or two
/// MQTT 5 connections in a row closed before any CONNACK while 3.1.1 then
/// gets one), MQTT 3.1.1 with clean session off, said once through
/// `mqttLibraryLog`. `protocolVersion` tells which.
public final class MQTTClient: @unchecked Sendable {
    public struct Options: Sendable {
        public var clientID: String
        public var host: String
        public var port: Int
        /// More brokers (a cluster's other nodes), tried in turn after
        /// `host`: each attempt that ends without a connection, and each
        /// connection that ends, moves to the next. A nil port is `port`.
        public var alternates: [BrokerAddress] = []
        public var keepalive: Int = 60
        /// Seconds without an answer after which the connection is known
        /// dead: a TCP keep-alive probe after `deadLink - 2` s of silence,
        /// then every second, and TCP_USER_TIMEOUT `deadLink` s (which
        /// also bounds unacknowledged data). 0: only the MQTT keep-alive.
        public var deadLink: Int = 10
        /// Watch the kernel's routing netlink and act on a link that comes
        /// back or a route that moves (ConnectionPlan).
        public var watchNetwork = true
        /// Last will: published by the broker if we vanish. Made before
        /// each connection from its start (Unix ms, `connectionSince`):
        /// a cluster's nodes each keep their own retained copy, and a
        /// reader tells the newest by it (docs/mqtt.md `since`).
        public var will: (topic: String, payload: @Sendable (_ since: Int64) -> String)?
        public var tls: TLS?
        public var username: String?
        public var password: String?
        public var reconnectMax: Int = 60
        /// 5: MQTT 5, falling back to 3.1.1 when the broker refuses it;
        /// 4: MQTT 3.1.1 only.
        public var protocolVersion: Int = 5
        /// MQTT 5 Maximum Packet Size (whole packet: header, topic,
        /// properties, payload): the broker drops, instead of sending us,
        /// any message that would not fit. libmosquitto itself does not
        /// enforce it on what it reads (2.0.11 allocates whatever length a
        /// packet announces, up to 256 MB); only the broker honouring it
        /// protects us. With MQTT 3.1.1 there is no such property: the
        /// broker's `message_size_limit` is the only bound.
        ///
        /// A backstop, not the filter: mosquitto (2.0.11, and 2.0.18 still)
        /// loses one of our in-flight slots for every message it drops this
        /// way, and after Receive Maximum (20) of them sends us nothing more
        /// until we reconnect. The broker must refuse large messages itself
        /// (`message_size_limit`, `max_packet_size`) below this size, as
        /// board/mosquitto/soundbox-fleet.conf does (16 KiB / 32 KiB).
        public var maximumPacketSize: UInt32 = 64 * 1024
        /// MQTT 5 Session Expiry Interval in seconds: how long the broker
        /// keeps our session (subscriptions, queued QoS 1 messages) while
        /// we are away. 0xFFFFFFFF = never expires, which is what clean
        /// session off means in MQTT 3.1.1; the broker may cap it
        /// (mosquitto: `persistent_client_expiration`).
        public var sessionExpiry: UInt32 = .max
        /// A fresh session at every connect, dropped when the connection
        /// ends (clean start / clean session, no Session Expiry Interval):
        /// for a tool that reads and leaves, not for a device.
        public var cleanStart = false

        public struct TLS: Sendable {
            public var ca: String
            public var cert: String?
            public var key: String?
            public init(ca: String, cert: String?, key: String?) { self.ca = ca; self.cert = cert; self.key = key }
        }
        public init(clientID: String, host: String, port: Int) { self.clientID = clientID; self.host = host; self.port = port }
    }

    private let handle: OpaquePointer
    private let options: Options
    private weak var delegateRef: (any MQTTClientDelegate)?
    private let started = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let version: Atomic<Int>
    /// The least wait before the next reconnect, in milliseconds (`delayReconnect`).
    private let minimumWaitMs = Atomic<Int>(0)
    /// Wakes the network thread: a packet was queued, or stop().
    private let wake = Doorbell()
    private var thread: ServiceThread?

    // The current attempt, and the version and backoff decisions: touched
    // only on the network thread (libmosquitto's callbacks run there too).
    private var attempt = Attempt()
    private struct Attempt {
        var connack: Int32?         // the CONNACK's code, once it came
        var disconnectRC: Int32?    // the rc on_disconnect reported, once it did
        var errno: Int32 = 0        // errno when on_disconnect ran
        var suppressDisconnect = false
        var running = false         // a socket of this attempt exists (or did)
        var family: Int32 = 0       // its socket's address family
        var tcpUp = false           // its TCP connection came up
    }
    private var plan: ConnectionPlan
    /// Each broker's address as last connected (for the route to it when
    /// `host` is a name), by endpoint index.
    private var peers: [Int: String] = [:]
    /// The address family the next attempt on a broker's name takes, by
    /// endpoint index (none: libmosquitto's choice, the resolver's first
    /// address). libmosquitto's non-blocking connect tries only the first
    /// address of a name: with "localhost" that is ::1 where the broker
    /// may listen on 127.0.0.1 only, and a name with an AAAA record comes
    /// first where IPv6 is broken. So an attempt that got no TCP connection
    /// (refused, silent) sends the next one to the name's other family, if
    /// it has one; the family of a connection that came up is kept.
    private var families: [Int: Int32] = [:]
    /// When a packet last went out or came in (monotonic s, as seen from
    /// here: the socket was ready, or a publish rang the doorbell).
    /// libmosquitto decides to ping, or that its ping went unanswered, from
    /// its own such times (in whole seconds) when `mosquitto_loop` runs: it
    /// runs again `keepalive` + 1 s after this, and not before, when
    /// nothing else happens (an idle box does not wake for nothing).
    private var lastIO = 0.0
    /// Network notes: a burst of up to 5, then one per 2 s (a flapping link
    /// would write ten lines a second): the tokens left, when counted, and
    /// how many notes were held back since the last one told.
    private var notes = (tokens: 5.0, at: 0.0, held: 0)
    /// The broker of the current (or next) attempt, in `endpoints`.
    private let brokerIndex = Atomic<Int>(0)
    private let since = Atomic<Int64>(0)

    /// When the current (or last) connection attempt began, Unix milliseconds.
    public var connectionSince: Int64 { since.load(ordering: .relaxed) }
    private var endpoints: [(host: String, port: Int)] {
        let port = options.port != 0 ? options.port : (options.tls == nil ? 1883 : 8883)
        return [(options.host, port)] + options.alternates.map { ($0.host, $0.port ?? port) }
    }

    /// "host:port" of the broker the client is connected to, or tries next.
    public var currentBroker: String {
        let e = endpoints[brokerIndex.load(ordering: .relaxed) % endpoints.count]
        return BrokerAddress(host: e.host, port: e.port).description
    }

    /// Library initialisation, once per process.
    private static let libraryReady: Bool = { mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue }()

    /// Creates the handle with a persistent session: the broker keeps QoS 1
    /// payments while we are away (MQTT 5: clean start off and
    /// `sessionExpiry`; 3.1.1: clean session off).
    public init(_ options: Options, delegate: any MQTTClientDelegate) throws(MQTTError) {
        precondition(Self.libraryReady, "mosquitto_lib_init failed")
        plan = ConnectionPlan(protocolVersion: options.protocolVersion, reconnectMax: options.reconnectMax,
                              timing: ConnectionPlan.Timing(keepalive: options.keepalive))
        self.options = options
        version = Atomic(options.protocolVersion)
        guard let h = mosquitto_new(options.clientID, options.cleanStart, nil) else {
            throw MQTTError(call: "mosquitto_new", code: MOSQ_ERR_ERRNO.rawValue, errno: Glibc.errno)
        }
        handle = h
        delegateRef = delegate
        mosquitto_user_data_set(h, Unmanaged.passUnretained(self).toOpaque())
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, Int32(options.protocolVersion)), "mosquitto_int_option(PROTOCOL_VERSION)")
        // Without it, Nagle plus delayed ACK add 13-44 ms to every exchange.
        try check(mosquitto_int_option(h, MOSQ_OPT_TCP_NODELAY, 1), "mosquitto_int_option(TCP_NODELAY)")
        if let user = options.username {
            try check(mosquitto_username_pw_set(h, user, options.password), "mosquitto_username_pw_set")
        }
        if let tls = options.tls {
            // libmosquitto opens these itself (fopen): a FIFO would block it
            // for ever, so each must be a regular file first.
            for path in [tls.ca, tls.cert, tls.key].compactMap({ $0 }) {
                do { try Files.checkRegular(path) } catch {
                    throw MQTTError(call: "open(\(path))", code: MOSQ_ERR_ERRNO.rawValue, errno: error.errno, detail: error.phrase)
                }
            }
            try check(mosquitto_tls_set(h, tls.ca, nil, tls.cert, tls.key, nil), "mosquitto_tls_set")
            // Verify the broker's certificate and name, TLS 1.2 or newer;
            // there is deliberately no switch to turn this off.
            try check(mosquitto_tls_opts_set(h, 1, "tlsv1.2", nil), "mosquitto_tls_opts_set")
            try check(mosquitto_tls_insecure_set(h, false), "mosquitto_tls_insecure_set")
        }

        mosquitto_connect_callback_set(h) { _, ctx, rc in
            MQTTClient.from(ctx)?.connected(rc: rc)
        }
        mosquitto_disconnect_callback_set(h) { _, ctx, rc in
            MQTTClient.from(ctx)?.disconnected(rc: rc)
        }
        mosquitto_message_callback_set(h) { _, ctx, message in
            guard let client = MQTTClient.from(ctx), let m = message?.pointee else { return }
            let topic = String(cString: m.topic)
            let payload = m.payloadlen > 0
                ? Array(UnsafeRawBufferPointer(start: m.payload, count: Int(m.payloadlen)).bindMemory(to: UInt8.self))
                : []
            client.delegateRef?.mqttMessage(topic: topic, payload: payload, retained: m.retain)
        }
        mosquitto_subscribe_callback_set(h) { _, ctx, mid, count, granted in
            let codes = (0..<Int(max(count, 0))).map { granted?[$0] ?? 128 }
            MQTTClient.from(ctx)?.delegateRef?.mqttSubscribed(mid: mid, granted: codes)
        }
        mosquitto_publish_callback_set(h) { _, ctx, mid in
            MQTTClient.from(ctx)?.delegateRef?.mqttPublished(mid: mid)
        }
        mosquitto_log_callback_set(h) { _, ctx, level, text in
            guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
            MQTTClient.from(ctx)?.delegateRef?.mqttLibraryLog(String(cString: text))
        }
    }

    deinit {
        stop()
        mosquitto_destroy(handle)
    }

    private static func from(_ ctx: UnsafeMutableRawPointer?) -> MQTTClient? {
        ctx.map { Unmanaged<MQTTClient>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The MQTT version of the current connection, or of the next attempt
    /// when there is none: 5 (MQTT 5) or 4 (MQTT 3.1.1, after the broker
    /// refused MQTT 5, or `Options.protocolVersion` 4).
    public var protocolVersion: Int { version.load(ordering: .relaxed) }

    /// True for the MQTT 5 DISCONNECT reason 142, "session taken over":
    /// another client connected with our client id (see `mqttDisconnected`
    /// for the brokers that send it; others just close: rc 7).
    public static func isSessionTakeover(rc: Int32) -> Bool { rc == 142 }

    /// The `mqttDisconnected` rc of a connection the peer closed
    /// (MOSQ_ERR_CONN_LOST): what a mosquitto before 2.0.15 does to the
    /// session another client took over.
    public static let connectionLost: Int32 = MOSQ_ERR_CONN_LOST.rawValue

    /// A CONNACK code as text: 3.1.1 return codes (1-5) and MQTT 5 reason
    /// codes (128 and up) do not overlap.
    public static func connackText(rc: Int32) -> String {
        String(cString: rc < 128 ? mosquitto_connack_string(rc) : mosquitto_reason_string(rc))
    }

    /// A `mqttDisconnected` rc as text: libmosquitto's error (below 128) or
    /// the broker's MQTT 5 DISCONNECT reason (128 and up).
    public static func disconnectText(rc: Int32) -> String {
        String(cString: rc < 128 ? mosquitto_strerror(rc) : mosquitto_reason_string(rc))
    }

    /// Starts connecting in the background; returns at once. Failures to
    /// reach the broker are retried by the network thread, forever.
    public func start() throws(MQTTError) {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        try check(mosquitto_threaded_set(handle, true), "mosquitto_threaded_set")
        thread = ServiceThread(name: "mqtt") { [self] in networkLoop() }
    }

    /// Makes the wait before the next connection attempt at least
    /// `seconds` (the usual backoff still applies when it is longer).
    /// For a delegate that sees its session taken over again and again and
    /// wants to give the other client room; call it from `mqttDisconnected`
    /// to affect the reconnect that follows. `stop()` still ends the wait.
    public func delayReconnect(atLeast seconds: Double) {
        minimumWaitMs.store(max(0, Int(seconds * 1000)), ordering: .relaxed)
    }

    /// Disconnects cleanly (no will) and stops the network thread, waiting
    /// for it at most `timeout` seconds; returns whether it ended. (It
    /// cannot end while libmosquitto looks up the broker's name: the
    /// resolver's own timeouts bound that.)
    @discardableResult
    public func stop(timeout: Double = 5) -> Bool {
        guard started.exchange(false, ordering: .relaxed) else { return true }
        stopping.store(true, ordering: .relaxed)
        poke()
        return thread?.join(timeout: timeout) ?? true
    }

    /// Wakes the network thread.
    private func poke() { wake.ring() }

    // MARK: - Network thread

    private func connected(rc: Int32) {
        attempt.connack = rc
        // A 3.1.1 broker answers a v5 CONNECT with a v3 CONNACK "unacceptable
        // protocol version"; libmosquitto reports it as 132 (handle__connack)
        // and then closes with MOSQ_ERR_PROTOCOL: the plan falls back.
        let socket = mosquitto_socket(handle)
        if socket >= 0, let peer = NetworkPaths.peerAddress(socket) { peers[brokerIndex.load(ordering: .relaxed) % endpoints.count] = peer }
        let (report, note) = plan.connack(rc, text: Self.connackText(rc: rc), source: socket >= 0 ? NetworkPaths.localAddress(socket) : nil,
                                          at: MonotonicClock.seconds())
        if let note { delegateRef?.mqttLibraryLog(note.description) }
        guard report else { attempt.suppressDisconnect = true; return }
        delegateRef?.mqttConnected(rc: rc)
    }

    private func disconnected(rc: Int32) {
        attempt.errno = Glibc.errno
        attempt.disconnectRC = rc
        // An attempt with no CONNACK is reported whole by attemptEnded.
        if attempt.suppressDisconnect || attempt.connack == nil { return }
        delegateRef?.mqttDisconnected(rc: rc)
    }

    /// CONNECT properties for MQTT 5 (the caller frees them).
    private func connectProperties() throws(MQTTError) -> OpaquePointer? {
        var props: OpaquePointer?
        do throws(MQTTError) {
            try check(mosquitto_property_add_int32(&props, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), options.cleanStart ? 0 : options.sessionExpiry),
                      "mosquitto_property_add_int32(SESSION_EXPIRY_INTERVAL)")
            try check(mosquitto_property_add_int32(&props, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), options.maximumPacketSize),
                      "mosquitto_property_add_int32(MAXIMUM_PACKET_SIZE)")
        } catch {
            mosquitto_property_free_all(&props)
            throw error
        }
        return props
    }

    private func networkLoop() {
        let now = MonotonicClock.seconds()
        let watcher: LinkWatcher?
        if options.watchNetwork {
            do { watcher = try LinkWatcher() } catch {
                watcher = nil
                delegateRef?.mqttLibraryLog("cannot watch the network (routing netlink: \(error)); reconnects follow their timers only")
            }
        } else {
            watcher = nil
        }
        var links = LinkTable()
        var regained = Set<Int32>()
        var settleAt: Double?
        var route = NetworkPaths.route(to: routeTarget())
        _ = plan.network(path: route, regained: false, at: now)   // where things stand
        var fds: [pollfd] = []
        while !stopping.load(ordering: .relaxed) {
            perform(plan.tick(at: MonotonicClock.seconds()))
            if stopping.load(ordering: .relaxed) { break }
            let socket = mosquitto_socket(handle)
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wake.fd, events: Int16(POLLIN), revents: 0))
            if let watcher { fds.append(pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)) }
            if socket >= 0 {
                let out = mosquitto_want_write(handle) ? Int16(POLLOUT) : 0
                fds.append(pollfd(fd: socket, events: Int16(POLLIN) | out, revents: 0))
            }
            var due = [plan.nextWake, settleAt].compactMap { $0 }.min()
            if socket >= 0 { due = min(due ?? .infinity, lastIO + Double(options.keepalive) + 1) }
            let wait = due.map { Int32(min(max(0, $0 - MonotonicClock.seconds()), 3600) * 1000) + 1 } ?? -1
            _ = poll(&fds, nfds_t(fds.count), wait)
            let rang = fds[0].revents != 0
            if rang { wake.drain() }
            if stopping.load(ordering: .relaxed) { break }
            if let watcher, fds[1].revents != 0 {
                let heard = watcher.read()
                if heard.malformed > 0 { delegateRef?.mqttLibraryLog("routing netlink: \(heard.malformed) message(s) that make no sense, ignored") }
                let (back, changed) = links.apply(heard.messages)
                regained.formUnion(back)
                // A burst (carrier, address, route) settles before the route is looked up.
                if changed { settleAt = settleAt ?? MonotonicClock.seconds() + 0.05 }
            }
            if socket >= 0 {
                if rang || fds[fds.count - 1].revents != 0 { lastIO = MonotonicClock.seconds() }
                service()
            }
            if let at = settleAt, MonotonicClock.seconds() >= at {
                settleAt = nil
                let was = route
                route = NetworkPaths.route(to: routeTarget())
                let back = route.map { regained.contains($0.interface) } ?? false
                for index in regained { note("link \(links.name(index) ?? "#\(index)") is up") }
                regained.removeAll()
                if route != was {
                    note(route.map { "route to the broker \(currentBroker): \($0)\(links.name($0.interface).map { " (\($0))" } ?? "")" }
                         ?? "no route to the broker \(currentBroker)")
                }
                perform(plan.network(path: route, regained: back, at: MonotonicClock.seconds()))
            }
        }
        goodbye()
    }

    /// Tells the delegate what the network did (a burst of 5, then one per 2 s).
    private func note(_ text: String) {
        let now = MonotonicClock.seconds()
        notes.tokens = min(5, notes.tokens + (now - notes.at) / 2)
        notes.at = now
        guard notes.tokens >= 1 else { notes.held += 1; return }
        notes.tokens -= 1
        let held = notes.held
        notes.held = 0
        delegateRef?.mqttNetwork(held > 0 ? "\(text) (and \(held) network notes not logged since the last)" : text)
    }

    /// What the route is looked up for: the broker's address (its name's,
    /// as last connected), else an address only a default route reaches.
    private func routeTarget() -> String {
        let all = endpoints
        let index = brokerIndex.load(ordering: .relaxed) % all.count
        if NetworkPaths.isNumeric(all[index].host) { return all[index].host }
        return peers[index] ?? "198.51.100.1"   // TEST-NET-2 (RFC 5737): routed by the default route only
    }

    private func perform(_ action: ConnectionPlan.Action) {
        switch action {
        case .none: break
        case .connect: connect()
        case .abandon(let why):
            if attempt.connack == 0 { note("reconnecting to \(currentBroker): \(why)") }
            // Ends the socket's TCP connection; libmosquitto then closes it
            // as lost and reports the disconnect.
            let socket = mosquitto_socket(handle)
            if socket >= 0 {
                _ = shutdown(socket, Int32(SHUT_RDWR))
                for _ in 0..<4 where mosquitto_socket(handle) != -1 { _ = mosquitto_loop(handle, 0, 1) }
            }
            attemptEnded(code: 0, errno: 0, why: why.description)
        }
    }

    /// Starts an attempt: non-blocking (the name lookup excepted); its end
    /// is seen by `service` or reported at once.
    private func connect() {
        attempt = Attempt()
        attempt.running = true
        let all = endpoints
        let (host, port) = all[brokerIndex.load(ordering: .relaxed) % all.count]
        let v = version.load(ordering: .relaxed)
        let now = MonotonicClock.unixMilliseconds()
        since.store(now, ordering: .relaxed)
        if let will = options.will {
            let bytes = Array(will.payload(now).utf8)
            let rc = mosquitto_will_set(handle, will.topic, Int32(bytes.count), bytes, 1, true)
            if rc != MOSQ_ERR_SUCCESS.rawValue { delegateRef?.mqttLibraryLog(MQTTError(call: "mosquitto_will_set", code: rc, errno: 0).description) }
        }
        if let e = setVersion(v) { return attemptEnded(code: e, errno: 0) }
        // libmosquitto (2.0) takes CONNECT properties only through its
        // blocking connect, which keeps them before it checks its
        // arguments: a keep-alive of 1 (invalid) stores them and returns.
        // 3.1.1: none (they would make its connect fail), so the stored
        // ones are cleared the same way.
        var props: OpaquePointer?
        if v == 5 { do { props = try connectProperties() } catch { delegateRef?.mqttLibraryLog(error.description) } }
        // A wildcard bind address of one family: libmosquitto skips the
        // name's addresses of the other (its socket cannot bind there).
        let bind: String? = switch families[brokerIndex.load(ordering: .relaxed) % all.count] {
        case AF_INET: "0.0.0.0"
        case AF_INET6: "::"
        default: nil
        }
        let primed = mosquitto_connect_bind_v5(handle, host, Int32(port), 1, bind, props)
        mosquitto_property_free_all(&props)
        precondition(primed == MOSQ_ERR_INVAL.rawValue, "libmosquitto connected with a keep-alive of 1 s (rc \(primed))")
        let rc = mosquitto_connect_bind_async(handle, host, Int32(port), Int32(options.keepalive), bind)
        let err = Glibc.errno
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { return attemptEnded(code: rc, errno: err, host: host, port: port) }
        let socket = mosquitto_socket(handle)
        attempt.family = NetworkPaths.family(of: socket)
        if options.deadLink > 0, socket >= 0,
           let failed = NetworkPaths.armDeadLinkProbe(socket, idle: max(1, options.deadLink - 2), interval: 1, timeout: options.deadLink) {
            delegateRef?.mqttLibraryLog("setsockopt(\(failed.option)) failed: \(failed.error); a dead link is noticed by the MQTT keep-alive only")
        }
        lastIO = MonotonicClock.seconds()
        service()
    }

    /// Lets libmosquitto do the socket's work (no wait), then sees whether
    /// the attempt's TCP connection came up or the attempt ended.
    private func service() {
        let rc = mosquitto_loop(handle, 0, 1)
        let err = Glibc.errno
        let socket = mosquitto_socket(handle)
        if socket >= 0 {
            if attempt.running, !plan.isConnected, attempt.connack == nil, let peer = NetworkPaths.peerAddress(socket) {
                peers[brokerIndex.load(ordering: .relaxed) % endpoints.count] = peer
                attempt.tcpUp = true
                plan.tcpUp(at: MonotonicClock.seconds())
            }
        } else if attempt.running {
            attemptEnded(code: rc == MOSQ_ERR_SUCCESS.rawValue ? 0 : rc, errno: attempt.disconnectRC != nil ? attempt.errno : err)
        }
    }

    /// The attempt (or its connection) is over: reports what nobody else
    /// did, moves to the next broker, and lets the plan set the next wait.
    private func attemptEnded(code: Int32, errno: Int32, why: String? = nil, host: String? = nil, port: Int? = nil) {
        guard attempt.running || code != 0 else { return }
        let ended = attempt
        attempt.running = false
        let broker = currentBroker
        if ended.connack == 0 && ended.disconnectRC == nil {
            // Ended without on_disconnect (abandoned, or select failed): say
            // it, so every accepted CONNACK has its disconnect.
            delegateRef?.mqttDisconnected(rc: code != 0 ? code : Self.connectionLost)
        }
        let all = endpoints
        let index = brokerIndex.load(ordering: .relaxed) % all.count
        if all.count > 1 { brokerIndex.add(1, ordering: .relaxed) }
        let decision = plan.ended(.init(connack: ended.connack, disconnectRC: ended.disconnectRC, code: code, errno: errno),
                                  at: MonotonicClock.seconds(), jitter: Double.random(in: 0..<1),
                                  minimumWait: Double(minimumWaitMs.exchange(0, ordering: .relaxed)) / 1000)
        version.store(plan.version, ordering: .relaxed)
        if let note = decision.note { delegateRef?.mqttLibraryLog(note.description) }
        let name = all[index].host
        if ended.family != 0, !NetworkPaths.isNumeric(name) {
            if ended.tcpUp {
                families[index] = ended.family
            } else if decision.failure == .silent || decision.failure == .refused {
                let other = ended.family == AF_INET6 ? AF_INET : AF_INET6
                families[index] = NetworkPaths.resolves(name, family: other) ? other : nil
            }
        }
        switch decision.failure {
        case .lost where errno == ETIMEDOUT:
            delegateRef?.mqttLibraryLog("the connection to \(broker) was dead: nothing came back for \(options.deadLink) s (mqtt.dead_link_s)")
        case .lost, .linkChanged:
            break
        case .noRoute, .silent, .refused:
            guard ended.connack == nil else { return }   // a refusing CONNACK was reported as such
            let over = ended.family == 0 || NetworkPaths.isNumeric(all[index].host) ? ""
                : ended.family == AF_INET6 ? " over IPv6" : " over IPv4"
            let what = why.map { "\($0)\(over)" } ?? MQTTError(call: "connect to \(host.map { BrokerAddress(host: $0, port: port).description } ?? broker)\(over)",
                                        code: code != 0 ? code : MOSQ_ERR_ERRNO.rawValue, errno: errno).description
            let next = switch decision.next {
            case .now: "trying again now"
            case .wait(let s): "next attempt in \((s * 10).rounded() / 10) s"
            }
            let more = decision.repeats > 0 ? ", \(decision.repeats) more like it not logged" : ""
            delegateRef?.mqttAttemptFailed(.init(broker: broker, reason: "\(what) [\(decision.failure.rawValue)\(more)]; \(next)",
                                                 failure: decision.failure, closedBeforeCONNACK: ended.disconnectRC != nil,
                                                 worthALogLine: decision.say))
        }
    }

    /// stop(): a clean goodbye (no will) within a second, when connected.
    private func goodbye() {
        guard mosquitto_socket(handle) != -1 else { return }
        mosquitto_disconnect(handle)
        for _ in 0..<10 {
            if mosquitto_loop(handle, 100, 1) != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(handle) == -1 { break }
        }
    }

    /// Sets the protocol version for the next connect; an error code or nil.
    private func setVersion(_ v: Int) -> Int32? {
        let rc = mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, Int32(v == 5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311))
        return rc == MOSQ_ERR_SUCCESS.rawValue ? nil : rc
    }

    /// Publishes; returns the message id that `mqttPublished` will report.
    @discardableResult
    public func publish(_ topic: String, _ payload: String, qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        try publish(topic, Array(payload.utf8), qos: qos, retain: retain)
    }

    /// Publishes bytes; returns the message id that `mqttPublished` will report.
    @discardableResult
    public func publish(_ topic: String, _ bytes: [UInt8], qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        try check(mosquitto_publish(handle, &mid, topic, Int32(bytes.count), bytes, qos, retain), "mosquitto_publish(\(topic))")
        poke()
        return mid
    }

    /// Subscribes; returns the message id that `mqttSubscribed` will report.
    /// `retained` false: the broker sends no stored retained messages for
    /// it (MQTT 5's Retain Handling 2; on 3.1.1 they come, flagged retained).
    @discardableResult
    public func subscribe(_ topic: String, qos: Int32 = 1, retained: Bool = true) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let options = retained || protocolVersion != 5 ? 0 : Int32(MQTT_SUB_OPT_SEND_RETAIN_NEVER.rawValue)
        try check(mosquitto_subscribe_v5(handle, &mid, topic, qos, options, nil), "mosquitto_subscribe(\(topic))")
        poke()
        return mid
    }

    private func check(_ rc: Int32, _ call: String) throws(MQTTError) {
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw MQTTError(call: call, code: rc, errno: Glibc.errno) }
    }
}
