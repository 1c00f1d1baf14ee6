import CMosquitto
import Glibc
import SoundboxSystem
import Soundbox
import Synchronization

/// One libmosquitto client handle, run by a network thread of ours in
/// threaded mode (`mosquitto_threaded_set(true)`): then, as under
/// `mosquitto_loop_start`, the PUBACK of an incoming QoS 1 message is only
/// written after `on_message` has returned (measured on 2.0.11; unthreaded,
/// it leaves before). Our thread, calling `mosquitto_loop` and making
/// every connection itself, rather than `mosquitto_loop_start` or
/// `mosquitto_loop_forever`: libmosquitto's own loop gives up for good
/// when the first connection fails, on a TLS error or a DNS failure (a box
/// that boots before its network would never connect), and it could not
/// switch protocol versions between attempts. Reconnects use capped
/// exponential backoff with fresh jitter for every wait.
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
        public var keepalive: Int = 30
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
    private let wake = Condition()
    private var thread: ServiceThread?

    // The current attempt, and the version and backoff decisions: touched
    // only on the network thread (libmosquitto's callbacks run there too).
    private var attempt = Attempt()
    private struct Attempt {
        var connack: Int32?         // the CONNACK's code, once it came
        var disconnectRC: Int32?    // the rc on_disconnect reported, once it did
        var suppressDisconnect = false
    }
    private var plan: ConnectionPlan
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
        plan = ConnectionPlan(protocolVersion: options.protocolVersion, reconnectMax: options.reconnectMax)
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
    /// cannot end while blocked in a TCP connect to an unreachable host:
    /// the kernel's SYN retries take up to ~2 minutes.)
    @discardableResult
    public func stop(timeout: Double = 5) -> Bool {
        guard started.exchange(false, ordering: .relaxed) else { return true }
        wake.broadcast { stopping.store(true, ordering: .relaxed) }
        mosquitto_disconnect(handle)   // the network thread sends DISCONNECT and returns
        return thread?.join(timeout: timeout) ?? true
    }

    // MARK: - Network thread

    private func connected(rc: Int32) {
        attempt.connack = rc
        // A 3.1.1 broker answers a v5 CONNECT with a v3 CONNACK "unacceptable
        // protocol version"; libmosquitto reports it as 132 (handle__connack)
        // and then closes with MOSQ_ERR_PROTOCOL: the plan falls back.
        let (report, note) = plan.connack(rc, text: Self.connackText(rc: rc))
        if let note { delegateRef?.mqttLibraryLog(note.description) }
        guard report else { attempt.suppressDisconnect = true; return }
        delegateRef?.mqttConnected(rc: rc)
    }

    private func disconnected(rc: Int32) {
        attempt.disconnectRC = rc
        if attempt.suppressDisconnect { return }
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
        let all = endpoints
        while !stopping.load(ordering: .relaxed) {
            attempt = Attempt()
            let (host, port) = all[brokerIndex.load(ordering: .relaxed) % all.count]
            let v = version.load(ordering: .relaxed)
            var rc: Int32
            var err: Int32 = 0
            let now = MonotonicClock.unixMilliseconds()
            since.store(now, ordering: .relaxed)
            if let will = options.will {
                let bytes = Array(will.payload(now).utf8)
                rc = mosquitto_will_set(handle, will.topic, Int32(bytes.count), bytes, 1, true)
                if rc != MOSQ_ERR_SUCCESS.rawValue { delegateRef?.mqttLibraryLog(MQTTError(call: "mosquitto_will_set", code: rc, errno: 0).description) }
            }
            if let e = setVersion(v) {
                rc = e
            } else if v == 5 {
                var props: OpaquePointer?
                do { props = try connectProperties() } catch { delegateRef?.mqttLibraryLog(error.description) }
                rc = mosquitto_connect_bind_v5(handle, host, Int32(port), Int32(options.keepalive), nil, props)
                err = Glibc.errno
                mosquitto_property_free_all(&props)
            } else {
                // No properties: they would make a 3.1.1 connect fail (NOT_SUPPORTED).
                rc = mosquitto_connect_bind_v5(handle, host, Int32(port), Int32(options.keepalive), nil, nil)
                err = Glibc.errno
            }
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                // Until the link ends (on_disconnect has run then), or stop().
                repeat {
                    // libmosquitto shortens the wait to its next keep-alive
                    // deadline itself, and publish/disconnect wake it: no
                    // other periodic wake-up (-1 would be every second).
                    rc = mosquitto_loop(handle, Int32(max(options.keepalive, 1)) * 1000, 1)
                    err = Glibc.errno
                } while rc == MOSQ_ERR_SUCCESS.rawValue && !stopping.load(ordering: .relaxed)
            }
            if stopping.load(ordering: .relaxed) {
                // stop() may have come before this connection existed, or
                // before the loop wrote its DISCONNECT: say goodbye cleanly
                // (no will), within a second.
                if mosquitto_socket(handle) != -1 {
                    mosquitto_disconnect(handle)
                    for _ in 0..<10 {
                        if mosquitto_loop(handle, 100, 1) != MOSQ_ERR_SUCCESS.rawValue || mosquitto_socket(handle) == -1 { break }
                    }
                }
                break
            }
            if attempt.connack == 0 && attempt.disconnectRC == nil {
                // Ended without on_disconnect (e.g. select failed): say it,
                // so every accepted CONNACK has its disconnect.
                delegateRef?.mqttDisconnected(rc: rc)
            } else if attempt.disconnectRC == nil && rc != MOSQ_ERR_SUCCESS.rawValue && rc != MOSQ_ERR_NO_CONN.rawValue {
                // The connect itself failed (refused, DNS, TLS): nothing else reported it.
                delegateRef?.mqttLibraryLog(MQTTError(call: "connect to \(BrokerAddress(host: host, port: port))", code: rc, errno: err).description)
            }
            // A cluster: the next attempt goes to the next node.
            if all.count > 1 { brokerIndex.add(1, ordering: .relaxed) }
            let (next, note) = plan.ended(connack: attempt.connack, disconnectRC: attempt.disconnectRC,
                                          jitter: Double.random(in: 1...2),
                                          minimumWait: Double(minimumWaitMs.exchange(0, ordering: .relaxed)) / 1000)
            version.store(plan.version, ordering: .relaxed)
            if let note { delegateRef?.mqttLibraryLog(note.description) }
            if case .wait(let delay) = next { wake.wait(timeout: delay) { stopping.load(ordering: .relaxed) } }
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
        return mid
    }

    private func check(_ rc: Int32, _ call: String) throws(MQTTError) {
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw MQTTError(call: call, code: rc, errno: Glibc.errno) }
    }
}
