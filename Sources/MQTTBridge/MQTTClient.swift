import CMosquitto
import Glibc
import SoundboxThreads
import Synchronization

/// A failed libmosquitto call: the call, its `MOSQ_ERR_*` code and, for
/// `MOSQ_ERR_ERRNO`, the errno.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let code: Int32
    public let errno: Int32
    public var description: String {
        let text = code == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(code))
        return "\(call) failed: \(text) (\(code)\(code == MOSQ_ERR_ERRNO.rawValue ? ", errno \(errno)" : ""))"
    }
}

/// What the client reports. Called on libmosquitto's network thread: keep
/// each call short, and never call `stop()` from it.
public protocol MQTTClientDelegate: AnyObject, Sendable {
    /// CONNACK arrived; `rc` 0 means accepted.
    func mqttConnected(rc: Int32)
    /// The link went down (`rc` 0: we asked for it).
    func mqttDisconnected(rc: Int32)
    /// A message arrived. For QoS 1, its PUBACK is sent after this returns
    /// (threaded loop): make it durable here.
    func mqttMessage(topic: String, payload: [UInt8], retained: Bool)
    /// The broker acknowledged our QoS 1 publish `mid`.
    func mqttPublished(mid: Int32)
    /// libmosquitto's own warnings and errors (TLS failures, refused
    /// connections): what a technician needs to see.
    func mqttLibraryLog(_ message: String)
}

extension MQTTClientDelegate {
    public func mqttLibraryLog(_ message: String) {}
}

/// One libmosquitto client handle, run by a network thread of ours in
/// threaded mode (`mosquitto_threaded_set(true)`): then, as under
/// `mosquitto_loop_start`, the PUBACK of an incoming QoS 1 message is only
/// written after `on_message` has returned (measured on 2.0.11; unthreaded,
/// it leaves before). Our thread rather than `mosquitto_loop_start`'s
/// because libmosquitto's own loop gives up for good when the first
/// connection fails, on a TLS error or a DNS failure: a box that boots
/// before its network would never connect. Reconnects use capped
/// exponential backoff whose base gets fresh jitter after every disconnect.
public final class MQTTClient: @unchecked Sendable {
    public struct Options: Sendable {
        public var clientID: String
        public var host: String
        public var port: Int
        public var keepalive: Int = 30
        /// Last will: published by the broker if we vanish.
        public var will: (topic: String, payload: String)?
        public var tls: TLS?
        public var username: String?
        public var password: String?
        public var reconnectMax: Int = 60

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
    private let wake = Condition()
    private var thread: ServiceThread?

    /// Library initialisation, once per process.
    private static let libraryReady: Bool = { mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue }()

    /// Creates the handle with a persistent session (MQTT 3.1.1, clean
    /// session off): the broker keeps QoS 1 payments while we are away.
    public init(_ options: Options, delegate: any MQTTClientDelegate) throws(MQTTError) {
        precondition(Self.libraryReady, "mosquitto_lib_init failed")
        self.options = options
        guard let h = mosquitto_new(options.clientID, false, nil) else {
            throw MQTTError(call: "mosquitto_new", code: MOSQ_ERR_ERRNO.rawValue, errno: Glibc.errno)
        }
        handle = h
        delegateRef = delegate
        mosquitto_user_data_set(h, Unmanaged.passUnretained(self).toOpaque())
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311), "mosquitto_int_option(PROTOCOL_VERSION)")
        // Without it, Nagle plus delayed ACK add 13-44 ms to every exchange.
        try check(mosquitto_int_option(h, MOSQ_OPT_TCP_NODELAY, 1), "mosquitto_int_option(TCP_NODELAY)")
        if let will = options.will {
            let bytes = Array(will.payload.utf8)
            try check(mosquitto_will_set(h, will.topic, Int32(bytes.count), bytes, 1, true), "mosquitto_will_set")
        }
        if let user = options.username {
            try check(mosquitto_username_pw_set(h, user, options.password), "mosquitto_username_pw_set")
        }
        if let tls = options.tls {
            try check(mosquitto_tls_set(h, tls.ca, nil, tls.cert, tls.key, nil), "mosquitto_tls_set")
            // Verify the broker's certificate and name, TLS 1.2 or newer;
            // there is deliberately no switch to turn this off.
            try check(mosquitto_tls_opts_set(h, 1, "tlsv1.2", nil), "mosquitto_tls_opts_set")
            try check(mosquitto_tls_insecure_set(h, false), "mosquitto_tls_insecure_set")
        }
        jitterReconnectDelay()

        mosquitto_connect_callback_set(h) { _, ctx, rc in
            MQTTClient.from(ctx)?.delegateRef?.mqttConnected(rc: rc)
        }
        mosquitto_disconnect_callback_set(h) { _, ctx, rc in
            guard let client = MQTTClient.from(ctx) else { return }
            client.jitterReconnectDelay()
            client.delegateRef?.mqttDisconnected(rc: rc)
        }
        mosquitto_message_callback_set(h) { _, ctx, message in
            guard let client = MQTTClient.from(ctx), let m = message?.pointee else { return }
            let topic = String(cString: m.topic)
            let payload = m.payloadlen > 0
                ? Array(UnsafeRawBufferPointer(start: m.payload, count: Int(m.payloadlen)).bindMemory(to: UInt8.self))
                : []
            client.delegateRef?.mqttMessage(topic: topic, payload: payload, retained: m.retain)
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

    /// Starts connecting in the background; returns at once. Failures to
    /// reach the broker are retried by the network thread, forever.
    public func start() throws(MQTTError) {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        try check(mosquitto_threaded_set(handle, true), "mosquitto_threaded_set")
        thread = ServiceThread(name: "mqtt") { [self] in networkLoop() }
    }

    /// Disconnects cleanly (no will) and stops the network thread.
    public func stop() {
        guard started.exchange(false, ordering: .relaxed) else { return }
        wake.broadcast { stopping.store(true, ordering: .relaxed) }
        mosquitto_disconnect(handle)   // makes mosquitto_loop_forever return
        thread?.join(timeout: 5)
    }

    private func networkLoop() {
        let port = options.port != 0 ? options.port : (options.tls == nil ? 1883 : 8883)
        var attempt = 0
        var everConnected = false
        while !stopping.load(ordering: .relaxed) {
            var rc = everConnected ? mosquitto_reconnect(handle)
                                   : mosquitto_connect(handle, options.host, Int32(port), Int32(options.keepalive))
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                everConnected = true
                attempt = 0
                // Returns after disconnect(), or on errors its own retries do not cover.
                rc = mosquitto_loop_forever(handle, -1, 1)
            }
            if stopping.load(ordering: .relaxed) { break }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                delegateRef?.mqttLibraryLog(MQTTError(call: "connect to \(options.host):\(port)", code: rc, errno: Glibc.errno).description)
            }
            // Capped exponential backoff with jitter: 1-2 s, doubling, at most reconnectMax.
            let ceiling = Double(max(options.reconnectMax, 2))
            let delay = min(ceiling, Double.random(in: 1...2) * Double(1 << min(attempt, 16)))
            attempt += 1
            wake.wait(timeout: delay) { stopping.load(ordering: .relaxed) }
        }
    }

    /// Publishes; returns the message id that `mqttPublished` will report.
    @discardableResult
    public func publish(_ topic: String, _ payload: String, qos: Int32 = 1, retain: Bool = false) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let bytes = Array(payload.utf8)
        try check(mosquitto_publish(handle, &mid, topic, Int32(bytes.count), bytes, qos, retain), "mosquitto_publish(\(topic))")
        return mid
    }

    public func subscribe(_ topic: String, qos: Int32 = 1) throws(MQTTError) {
        try check(mosquitto_subscribe(handle, nil, topic, qos), "mosquitto_subscribe(\(topic))")
    }

    /// Capped exponential backoff from a base of 1–2 s (fresh jitter each
    /// time the link drops), so a fleet of boxes does not reconnect in step.
    private func jitterReconnectDelay() {
        let base = UInt32.random(in: 1...2)
        mosquitto_reconnect_delay_set(handle, base, UInt32(max(options.reconnectMax, 2)), true)
    }

    private func check(_ rc: Int32, _ call: String) throws(MQTTError) {
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw MQTTError(call: call, code: rc, errno: Glibc.errno) }
    }
}

public enum MQTTBridge {
    /// "2.0.11": the libmosquitto this binary runs against.
    public static var libraryVersion: String {
        var major: Int32 = 0, minor: Int32 = 0, revision: Int32 = 0
        mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}

/// The topics of DESIGN §2 for one device.
public struct Topics: Sendable, Equatable {
    public let payment, receipt, config, configApplied, cmd, status: String
    public init(prefix: String, device: String) {
        let base = prefix + "/" + device
        payment = base + "/payment"; receipt = base + "/receipt"; config = base + "/config"
        configApplied = base + "/config/applied"; cmd = base + "/cmd"; status = base + "/status"
    }
}
