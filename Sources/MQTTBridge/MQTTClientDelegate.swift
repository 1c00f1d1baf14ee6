import CMosquitto
import Glibc

/// A failed libmosquitto call: the call, its `MOSQ_ERR_*` code and, for
/// `MOSQ_ERR_ERRNO`, the errno.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let code: Int32
    public let errno: Int32
    /// Why, when it is no errno's or mosquitto's text (a certificate that is a FIFO).
    public var detail: String? = nil
    public var description: String {
        let text = detail ?? (code == MOSQ_ERR_ERRNO.rawValue ? String(cString: strerror(errno)) : String(cString: mosquitto_strerror(code)))
        return "\(call) failed: \(text) (\(code)\(code == MOSQ_ERR_ERRNO.rawValue ? ", errno \(errno)" : ""))"
    }
}

/// What the client reports. Called on the client's network thread: keep
/// each call short, and never call `stop()` from it.
public protocol MQTTClientDelegate: AnyObject, Sendable {
    /// CONNACK arrived; `rc` 0 means accepted. A refusal is MQTT 3.1.1's
    /// return code (1-5, e.g. 4 bad user name or password, 5 not
    /// authorised) or, on an MQTT 5 connection, its reason code (128 and
    /// up, e.g. 134 bad user name or password, 135 not authorised):
    /// `MQTTClient.connackText(rc:)` says which. A refusal of MQTT 5 itself
    /// (132) is not reported here: the client falls back to 3.1.1 and says
    /// so through `mqttLibraryLog`.
    func mqttConnected(rc: Int32)
    /// The link went down. Called once after every CONNACK (after a
    /// refusing one too); an attempt that ended with no CONNACK at all is
    /// `mqttAttemptFailed`. `rc` is what libmosquitto
    /// 2.0.11 hands its `on_disconnect` callback, one of three kinds:
    ///
    /// - `0`: we asked for it (`stop()`).
    /// - 1-30, a libmosquitto `MOSQ_ERR_*` code: the connection ended
    ///   without a DISCONNECT from the broker. 7 (`MOSQ_ERR_CONN_LOST`):
    ///   the broker closed the connection or it was reset, which includes
    ///   **a session takeover on an MQTT 3.1.1 connection, and on MQTT 5
    ///   with mosquitto before 2.0.15** (Debian 12's 2.0.11 closes the
    ///   old connection without a DISCONNECT); 19 (`MOSQ_ERR_KEEPALIVE`):
    ///   no answer within 1.5 × keepalive; 5 (`MOSQ_ERR_CONN_REFUSED`):
    ///   after a refusing 3.1.1 CONNACK; 2 (`MOSQ_ERR_PROTOCOL`): after a
    ///   refusing MQTT 5 CONNACK, or a malformed packet; 14
    ///   (`MOSQ_ERR_ERRNO`), 8 (`MOSQ_ERR_TLS`): socket or TLS errors.
    /// - 128 and up, only on MQTT 5 connections: the reason code of the
    ///   broker's DISCONNECT, e.g. **142 session taken over** (another
    ///   client connected with our client id; mosquitto 2.0.15 and later),
    ///   139 server shutting down, 149 packet too large, 152
    ///   administrative action. `MQTTClient.isSessionTakeover(rc:)` tells
    ///   a takeover; `MQTTClient.disconnectText(rc:)` describes any rc.
    ///
    /// (A broker may also send DISCONNECT with reason 0, "normal
    /// disconnection"; mosquitto never does. It then reads as `0` too.)
    func mqttDisconnected(rc: Int32)
    /// A message arrived. For QoS 1, its PUBACK is sent after this returns
    /// (threaded loop): make it durable here.
    func mqttMessage(topic: String, payload: [UInt8], retained: Bool)
    /// The broker acknowledged our QoS 1 publish `mid`.
    func mqttPublished(mid: Int32)
    /// The broker answered our SUBSCRIBE `mid`: per topic, the QoS granted
    /// (0-2) or a refusal (128 and up, e.g. 135 not authorised).
    func mqttSubscribed(mid: Int32, granted: [Int32])
    /// libmosquitto's own warnings and errors (TLS failures, refused
    /// connections) and the client's own notes (falling back to MQTT
    /// 3.1.1): what a technician needs to see.
    func mqttLibraryLog(_ message: String)
    /// What the box's network did, as far as the broker is concerned (a
    /// link that came back, the route to the broker, a reconnect for it):
    /// for the log at info level.
    func mqttNetwork(_ note: String)
    /// An attempt ended with no CONNACK (every one: a tool counts them).
    func mqttAttemptFailed(_ failure: AttemptFailure)
}

/// An attempt to connect that ended with no CONNACK.
public struct AttemptFailure: Sendable {
    /// "host:port" of the broker tried.
    public let broker: String
    /// What happened, in words, with the next step ("…; next attempt in 0.3 s").
    public let reason: String
    public let failure: ConnectionPlan.Failure
    /// Its TCP connection was up and the broker (or a proxy) closed it
    /// before answering: what a broker that cannot parse MQTT 5 does.
    public let closedBeforeCONNACK: Bool
    /// The first of its kind in a row, every refusal, else one per five
    /// minutes: a box with no network tries every second or two.
    public let worthALogLine: Bool
}

extension MQTTClientDelegate {
    public func mqttLibraryLog(_ message: String) {}
    public func mqttNetwork(_ note: String) {}
    public func mqttAttemptFailed(_ failure: AttemptFailure) {
        if failure.worthALogLine { mqttLibraryLog(failure.reason) }
    }
    public func mqttSubscribed(mid: Int32, granted: [Int32]) {}
}
