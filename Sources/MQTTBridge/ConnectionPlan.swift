/// The network loop's decisions, without I/O: which MQTT version the next
/// connection attempt uses and how long to wait before it. Inputs are what
/// each attempt saw (its CONNACK, the rc of its end); outputs are whether
/// to report the CONNACK, when to try again, and notes for the log.
///
/// - MQTT 5 refused (CONNACK 132 "unsupported protocol version", what a
///   3.1.1 broker answers): MQTT 3.1.1 from now on, at once; that CONNACK
///   and its disconnect are not reported.
/// - Two MQTT 5 attempts in a row closed before any CONNACK (a broker or
///   proxy that drops what it cannot parse): 3.1.1 is tried at once;
///   any 3.1.1 CONNACK confirms it, 3.1.1 closed early too goes back to 5.
/// - Otherwise capped exponential backoff with fresh jitter: 1-2 s,
///   doubling per failure, at most `reconnectMax`; an accepted CONNACK
///   resets it, and a delegate's `minimumWait` lengthens one wait.
public struct ConnectionPlan: Sendable, Equatable {
    /// MQTT 5's CONNACK reason "unsupported protocol version".
    public static let unsupportedProtocolVersion: Int32 = 132
    /// libmosquitto's MOSQ_ERR_CONN_LOST: the peer closed the connection.
    public static let connectionLost: Int32 = 7

    public enum Note: Equatable, Sendable, CustomStringConvertible {
        case mqtt5Refused(connack: String)
        case mqtt5ClosedTryingMQTT311
        case mqtt311Answers
        case mqtt311ClosedToo

        public var description: String {
            let bound = "where only the broker's message_size_limit bounds the messages it sends"
            switch self {
            case .mqtt5Refused(let text): return "the broker refused MQTT 5 (CONNACK: \(text)); using MQTT 3.1.1 from now on, \(bound)"
            case .mqtt5ClosedTryingMQTT311: return "the broker closed 2 MQTT 5 connections in a row before answering; trying MQTT 3.1.1"
            case .mqtt311Answers: return "the broker answers MQTT 3.1.1 but closed MQTT 5 connections; using MQTT 3.1.1 from now on, \(bound)"
            case .mqtt311ClosedToo: return "the broker closed MQTT 3.1.1 too; back to MQTT 5"
            }
        }
    }

    public enum Next: Equatable, Sendable {
        /// A protocol fallback: the next attempt at once.
        case now
        case wait(seconds: Double)
    }

    /// 5 or 4: the version of the next attempt (or of the current connection).
    public private(set) var version: Int
    private let configured: Int
    private let reconnectMax: Int
    /// Failed attempts since the last accepted CONNACK: the backoff's exponent.
    private var failures = 0
    /// MQTT 5 attempts in a row closed before a CONNACK.
    private var closedBeforeConnack = 0
    /// Trying 3.1.1 after MQTT 5 connections were closed (not refused).
    private var probingMQTT311 = false
    /// The current attempt's MQTT 5 was refused: fall back when it ends.
    private var fallBackNow = false

    /// `protocolVersion` 5 (MQTT 5, falling back) or 4 (3.1.1 only).
    public init(protocolVersion: Int, reconnectMax: Int) {
        precondition(protocolVersion == 5 || protocolVersion == 4, "protocolVersion is 5 or 4")
        version = protocolVersion
        configured = protocolVersion
        self.reconnectMax = reconnectMax
    }

    /// A CONNACK with code `rc` (`text`: how it reads) arrived on the
    /// current attempt. `report` is false for the MQTT 5 refusal the
    /// fallback handles (its disconnect is not reported either).
    public mutating func connack(_ rc: Int32, text: @autoclosure () -> String = "") -> (report: Bool, note: Note?) {
        if version == 5 && configured == 5 && rc == Self.unsupportedProtocolVersion {
            fallBackNow = true
            return (false, .mqtt5Refused(connack: text()))
        }
        var note: Note?
        if version == 4 && probingMQTT311 {
            probingMQTT311 = false
            note = .mqtt311Answers
        }
        if rc == 0 { closedBeforeConnack = 0 }
        return (true, note)
    }

    /// The attempt ended: its CONNACK (nil: none came) and the rc its
    /// disconnect reported (nil: none). `jitter` is a fresh random number
    /// in 1...2; `minimumWait` the delegate's least wait in seconds (taken
    /// only when there is a wait).
    public mutating func ended(connack: Int32?, disconnectRC: Int32?, jitter: Double,
                               minimumWait: @autoclosure () -> Double = 0) -> (next: Next, note: Note?) {
        if connack == 0 { failures = 0 }
        let (retryNow, note) = decideVersion(connack: connack, disconnectRC: disconnectRC)
        fallBackNow = false
        if retryNow { return (.now, note) }
        let ceiling = Double(max(reconnectMax, 2))
        let backoff = min(ceiling, jitter * Double(1 << min(failures, 16)))
        failures += 1
        return (.wait(seconds: max(backoff, minimumWait())), note)
    }

    private mutating func decideVersion(connack: Int32?, disconnectRC: Int32?) -> (Bool, Note?) {
        guard configured == 5 else { return (false, nil) }
        let closedEarly = connack == nil && disconnectRC == Self.connectionLost
        if version == 5 {
            if fallBackNow {
                version = 4
                return (true, nil)
            }
            guard closedEarly else {
                if connack != nil { closedBeforeConnack = 0 }
                return (false, nil)
            }
            closedBeforeConnack += 1
            guard closedBeforeConnack >= 2 else { return (false, nil) }
            closedBeforeConnack = 0
            probingMQTT311 = true
            version = 4
            return (true, .mqtt5ClosedTryingMQTT311)
        }
        if probingMQTT311 && closedEarly {
            probingMQTT311 = false
            version = 5
            return (false, .mqtt311ClosedToo)
        }
        return (false, nil)
    }
}
