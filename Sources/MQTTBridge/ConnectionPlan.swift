// ~500 lines: one pure state machine (attempts, backoff, link news, dead-link probes) whose rules read together; its tests script it event by event.
import SoundboxSystem

/// The network loop's decisions, without I/O: when to start a connection
/// attempt, when to give one up, how long to wait after one ended, which
/// MQTT version it uses, and what a change of the box's network means.
/// Inputs are what the loop saw (an attempt's TCP handshake, its CONNACK,
/// how it ended, the kernel's route to the broker, a link that came back)
/// and the clock; outputs are actions (connect, abandon), waits and notes.
/// docs/mqtt.md, "When the network goes away", says the same for the
/// backend team.
///
/// Waits, by how the last attempt or connection ended (`Failure`):
/// - `noRoute` (nothing left the box: no route, network down): 1.5-2.5 s.
///   They cost nothing on the air and do not grow.
/// - `silent` (no SYN-ACK within `tcpDeadline`, the host unreachable, the
///   name lookup unanswered): 0-0.25 s, and the attempts that follow give
///   their one SYN 1 s, so that a way that opens again is found within
///   about 1.25 s (a SYN, ~60 bytes, every ~1.1 s); after
///   `silentPatience` of silence, 4-6 s. They do not grow either.
/// - `refused` (a broker, or its host, answered and said no: a refusing
///   CONNACK, a reset, TLS failing, closed before its CONNACK, or no
///   CONNACK within `connackDeadline`): capped exponential backoff with
///   fresh jitter, 1-2 s doubling per refusal to `reconnectMax`: a
///   restarted broker facing thousands of boxes is not stampeded.
/// - `lost` (an accepted connection ended): 0-1 s, or the delegate's
///   `minimumWait` (a session taken over); a connection lost within
///   `stableAfter` of its CONNACK counts as a refusal, and only one that
///   lasted resets the refusals' backoff.
/// - `linkChanged` (the plan ended it: the link came back, the route
///   moved): at once.
///
/// The network (`network(path:regained:at:)`): when the kernel's route to
/// the broker appears or changes, or the link it uses comes back, any wait
/// is cut short and a connect in progress abandoned for a new one; a
/// connection believed up is replaced when its link came back (the broker
/// resends what it had in flight at once, instead of after its own
/// retransmission timer) or its source address is no longer the route's.
/// At most one such action per `linkSpacing`: a flapping link neither
/// spins the loop nor starves it. The attempts right after news give
/// their SYN 0.25 s, 0.5 s and 1 s in turn (`linkDeadlines`), one after
/// the other: a link that just came back often loses the first.
///
/// MQTT version: MQTT 5 refused (CONNACK 132, what a 3.1.1 broker
/// answers): 3.1.1 from now on, at once, that CONNACK and its disconnect
/// not reported. Two MQTT 5 attempts in a row closed before any CONNACK (a
/// broker or proxy that drops what it cannot parse): 3.1.1 at once; a
/// 3.1.1 CONNACK confirms it, 3.1.1 closed early too goes back to 5.
public struct ConnectionPlan: Sendable {
    /// MQTT 5's CONNACK reason "unsupported protocol version".
    public static let unsupportedProtocolVersion: Int32 = 132
    /// libmosquitto's MOSQ_ERR_CONN_LOST: the peer closed the connection.
    public static let connectionLost: Int32 = 7
    /// libmosquitto's MOSQ_ERR_ERRNO and MOSQ_ERR_EAI (a name lookup failed; errno holds getaddrinfo's code).
    public static let errnoCode: Int32 = 14, lookupCode: Int32 = 15

    public struct Timing: Sendable, Equatable {
        /// An attempt whose SYN has had no answer for this long is given up
        /// (the kernel sends the SYN again after 1 s)…
        public var tcpDeadline = 2.0
        /// …after one such, the next ones after this long (one SYN each:
        /// the way back is found sooner for the same bytes)…
        public var silentTCPDeadline = 1.0
        /// …but every eighth in a row waits this long for the SYN sent then and
        /// the kernel's two retries (at 1 and 3 s): a path slower than 1 s
        /// still gets through.
        public var longTCPDeadline = 3.5
        /// From an attempt's start to its CONNACK, at most.
        public var connackDeadline = 10.0
        /// After a silent attempt, a wait of up to this (random)…
        public var silentWait = 0.25
        /// …for this long into the silence; then 0.8-1.2 × `slowSilentWait`.
        public var silentPatience = 300.0
        public var slowSilentWait = 5.0
        /// With no route: attempts 0.75-1.25 × this apart.
        public var noRouteWait = 2.0
        /// After an accepted connection ended: up to this (random)…
        public var lostWait = 1.0
        /// …if it had been up this long; one lost sooner counts as a
        /// refusal (a broker that accepts and drops at once, a link too slow
        /// for `mqtt.dead_link_s`: without it, a TLS handshake a second).
        public var stableAfter = 10.0
        /// Network news acts at most once per this long.
        public var linkSpacing = 1.0
        /// After network news, the attempts' times for their SYN-ACK, one
        /// after the other with no wait between (then as for a silent way): the
        /// first SYN at a link's return is often lost while the kernels at
        /// both ends bring it up (neighbour resolution, routes), and the
        /// kernel would send it again only after 1 s. A fresh SYN soon after
        /// gets through (measured: the link back after 5 s without carrier,
        /// a fresh connect every 0.1 s got through after 0.3 s).
        public var linkDeadlines = [0.25, 0.5, 1.0]

        public init() {}

        /// For a keep-alive of `keepalive` seconds: libmosquitto starts its
        /// keep-alive clock when an attempt starts and, with no CONNACK
        /// once it runs out, ends the attempt as a keep-alive failure
        /// (rc 19). Every deadline ends the attempt 2 s before that can.
        public init(keepalive: Int) {
            self.init()
            let limit = Double(max(keepalive - 2, 2))
            tcpDeadline = min(tcpDeadline, limit)
            silentTCPDeadline = min(silentTCPDeadline, limit)
            longTCPDeadline = min(longTCPDeadline, limit)
            connackDeadline = min(connackDeadline, limit)
        }
    }

    /// How an attempt or a connection ended, as far as the next wait goes.
    public enum Failure: String, Sendable, Equatable {
        case noRoute = "no route", silent, refused, lost, linkChanged = "link changed"
    }

    /// Why the plan ends an attempt or a connection.
    public enum Abandon: Equatable, Sendable, CustomStringConvertible {
        case noSYNACK(seconds: Double)
        case noCONNACK(seconds: Double)
        /// The link the route uses came back: what was sent meanwhile is stuck behind retransmission timers.
        case linkBack
        /// The route to the broker appeared or now leaves from another address.
        case pathMoved(to: String)

        public var description: String {
            switch self {
            case .noSYNACK(let s): "no answer to the connection request within \(Self.seconds(s))"
            case .noCONNACK(let s): "no CONNACK within \(Self.seconds(s)) of the attempt's start"
            case .linkBack: "the link came back"
            case .pathMoved(let to): "the route to the broker changed (now \(to))"
            }
        }
        static func seconds(_ s: Double) -> String {
            s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
        }
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Start an attempt now.
        case connect
        /// End the attempt in progress, or the connection, now; then report `ended`.
        case abandon(Abandon)
    }

    public enum Next: Equatable, Sendable {
        case now
        case wait(seconds: Double)
    }

    /// How an attempt ended, as the loop saw it.
    public struct End: Equatable, Sendable {
        /// The CONNACK's code, if one came.
        public var connack: Int32?
        /// The rc its disconnect reported, if it did.
        public var disconnectRC: Int32?
        /// libmosquitto's code for the connect or loop call that failed (0: none), and errno then.
        public var code: Int32
        public var errno: Int32
        public init(connack: Int32? = nil, disconnectRC: Int32? = nil, code: Int32 = 0, errno: Int32 = 0) {
            self.connack = connack; self.disconnectRC = disconnectRC; self.code = code; self.errno = errno
        }
    }

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

    /// What `ended` decided.
    public struct Decision: Equatable, Sendable {
        public var next: Next
        public var failure: Failure
        public var note: Note?
        /// Whether to log this end: the first of its kind in a row, every
        /// refusal, else once per `sayEvery` (with `repeats`: the ends of
        /// this kind not logged since).
        public var say: Bool
        public var repeats: Int
    }

    /// Ends of the same kind in a row are logged at most this often.
    public static let sayEvery = 300.0

    enum Phase: Equatable {
        case waiting(until: Double)
        case connecting(since: Double, tcpUp: Bool)
        case connected(source: String?, since: Double)
    }

    /// 5 or 4: the version of the next attempt (or of the current connection).
    public private(set) var version: Int
    public let timing: Timing
    private let configured: Int
    private let reconnectMax: Int
    private var phase = Phase.waiting(until: -.infinity)
    /// Refusals since the last connection that lasted: the backoff's exponent.
    private var failures = 0
    /// When the current run of silent attempts began, and how many in it.
    private var silentSince: Double?
    private var silentInARow = 0
    /// Attempts made since network news (an index into `linkDeadlines`), nil: none.
    private var sinceNews: Int?
    /// The action the plan asked for and `ended` has not yet seen.
    private var abandoning: Abandon?
    /// The route to the broker last reported; nil inside: none; outer nil: not yet known.
    private var path: RoutePathState = .unknown
    private var lastLinkAction = -Double.infinity
    /// Network news held back by `linkSpacing`: act on it at this time.
    private var linkDue: Double?
    private var pendingNews = (back: false, moved: false)
    /// The last end logged and those of its kind since.
    private var said: (failure: Failure, at: Double)?
    private var unsaid = 0
    /// MQTT 5 attempts in a row closed before a CONNACK.
    private var closedBeforeConnack = 0
    /// Trying 3.1.1 after MQTT 5 connections were closed (not refused).
    private var probingMQTT311 = false
    /// The current attempt's MQTT 5 was refused: fall back when it ends.
    private var fallBackNow = false

    enum RoutePathState: Equatable { case unknown, none, some(source: String, interface: Int32) }

    /// `protocolVersion` 5 (MQTT 5, falling back) or 4 (3.1.1 only).
    public init(protocolVersion: Int, reconnectMax: Int, timing: Timing = Timing()) {
        precondition(protocolVersion == 5 || protocolVersion == 4, "protocolVersion is 5 or 4")
        version = protocolVersion
        configured = protocolVersion
        self.reconnectMax = reconnectMax
        self.timing = timing
    }

    // MARK: - The clock

    /// Time has come to `now`: the action due, if any (the first attempt,
    /// the end of a wait, an attempt past its deadline, network news held
    /// back by `linkSpacing`).
    public mutating func tick(at now: Double) -> Action {
        if let due = linkDue, now >= due {
            let news = pendingNews
            linkDue = nil
            pendingNews = (false, false)
            let action = linkNews(back: news.back, moved: news.moved, at: now)
            if action != .none { return action }
        }
        switch phase {
        case .waiting(let until) where now >= until:
            phase = .connecting(since: now, tcpUp: false)
            return .connect
        case .connecting(let since, let tcpUp) where abandoning == nil:
            let tcp = tcpDeadline
            if !tcpUp && now - since >= tcp { return abandon(.noSYNACK(seconds: tcp)) }
            if now - since >= timing.connackDeadline { return abandon(.noCONNACK(seconds: timing.connackDeadline)) }
            return .none
        default:
            return .none
        }
    }

    /// When `tick` next has something to do, if ever (absent other events).
    public var nextWake: Double? {
        var wake: Double?
        switch phase {
        case .waiting(let until): wake = until
        case .connecting(let since, let tcpUp) where abandoning == nil:
            let tcp = tcpDeadline
            wake = since + (tcpUp ? timing.connackDeadline : min(tcp, timing.connackDeadline))
        default: break
        }
        if let due = linkDue { wake = min(wake ?? due, due) }
        return wake
    }

    /// The current attempt's time for its SYN-ACK: 2 s, 1 s once the way
    /// has been silent, 3.5 s every eighth silent attempt in a row.
    private var tcpDeadline: Double {
        if let n = sinceNews, n < timing.linkDeadlines.count { return timing.linkDeadlines[n] }
        return switch silentInARow {
        case 0: timing.tcpDeadline
        case let n where n % 8 == 7: timing.longTCPDeadline
        default: timing.silentTCPDeadline
        }
    }

    /// Whether a connection is up (CONNACK accepted, not ended).
    public var isConnected: Bool { if case .connected = phase { true } else { false } }

    // MARK: - An attempt

    /// The attempt's TCP connection is up (its SYN was answered).
    public mutating func tcpUp(at now: Double) {
        guard case .connecting(let since, false) = phase else { return }
        phase = .connecting(since: since, tcpUp: true)
        silentSince = nil
        silentInARow = 0
        sinceNews = nil
    }

    /// A CONNACK with code `rc` (`text`: how it reads) arrived on the
    /// current attempt, whose local address is `source`. `report` is false
    /// for the MQTT 5 refusal the fallback handles (its disconnect is not
    /// reported either).
    public mutating func connack(_ rc: Int32, text: @autoclosure () -> String = "", source: String? = nil,
                                 at now: Double = 0) -> (report: Bool, note: Note?) {
        if version == 5 && configured == 5 && rc == Self.unsupportedProtocolVersion {
            fallBackNow = true
            return (false, .mqtt5Refused(connack: text()))
        }
        var note: Note?
        if version == 4 && probingMQTT311 {
            probingMQTT311 = false
            note = .mqtt311Answers
        }
        if rc == 0 {
            closedBeforeConnack = 0
            phase = .connected(source: source, since: now)
        }
        return (true, note)
    }

    /// The attempt or connection ended (`end`: how). `jitter` is a fresh
    /// random number in 0..<1; `minimumWait` the delegate's least wait in
    /// seconds (taken only when there is a wait).
    public mutating func ended(_ end: End, at now: Double, jitter: Double,
                               minimumWait: @autoclosure () -> Double = 0) -> Decision {
        let tcpWasUp: Bool
        var upFor = 0.0
        switch phase {
        case .connecting(_, let up): tcpWasUp = up
        case .connected(_, let since): tcpWasUp = true; upFor = now - since
        case .waiting: tcpWasUp = false
        }
        let failure = classify(end, tcpUp: tcpWasUp)
        // An attempt the plan gave up says nothing of the MQTT version.
        let ours = abandoning != nil
        abandoning = nil
        var (retryNow, note) = (false, Note?.none)
        if !ours && (failure == .refused || failure == .lost) {
            (retryNow, note) = decideVersion(connack: end.connack, disconnectRC: end.disconnectRC)
        }
        fallBackNow = false
        if failure != .silent && failure != .noRoute { silentSince = nil; silentInARow = 0 }
        // Network news: its attempts follow one another at once.
        if failure == .silent, let n = sinceNews, n + 1 < timing.linkDeadlines.count {
            sinceNews = n + 1
            phase = .waiting(until: now)
            return Decision(next: .now, failure: .silent, note: nil, say: false, repeats: 0)
        }
        if failure != .linkChanged { sinceNews = nil }
        let wait: Double
        switch failure {
        case .linkChanged: wait = 0
        case .noRoute: wait = timing.noRouteWait * (0.75 + 0.5 * jitter)
        case .silent:
            let since = silentSince ?? now
            silentSince = since
            silentInARow += 1
            wait = now - since < timing.silentPatience ? timing.silentWait * jitter : timing.slowSilentWait * (0.8 + 0.4 * jitter)
        case .lost where upFor >= timing.stableAfter:
            failures = 0
            wait = timing.lostWait * jitter
        case .refused, .lost:
            let ceiling = Double(max(reconnectMax, 2))
            wait = min(ceiling, (1 + jitter) * Double(1 << min(failures, 16)))
            failures += 1
        }
        let next: Next = retryNow || failure == .linkChanged ? .now : .wait(seconds: max(wait, minimumWait()))
        switch next {
        case .now: phase = .waiting(until: now)
        case .wait(let s): phase = .waiting(until: now + s)
        }
        // Logged: a new kind, every refusal, else once per sayEvery.
        let say = said?.failure != failure || failure == .refused || now - (said?.at ?? now) >= Self.sayEvery
        let repeats = unsaid
        if say { said = (failure, now); unsaid = 0 } else { unsaid += 1 }
        return Decision(next: next, failure: failure, note: note, say: say, repeats: say ? repeats : 0)
    }

    /// Why an attempt or connection ended, from what the loop saw.
    func classify(_ end: End, tcpUp: Bool) -> Failure {
        switch abandoning {
        case .linkBack?, .pathMoved?: return .linkChanged
        case .noSYNACK?: return .silent
        case .noCONNACK?: return .refused
        case nil: break
        }
        if end.connack == 0 { return .lost }
        if end.connack != nil || tcpUp { return .refused }
        return Self.classify(code: end.code, errno: end.errno)
    }

    /// A connect that failed before its TCP connection was up: libmosquitto's
    /// `code` and errno (getaddrinfo's code for `lookupCode`).
    public static func classify(code: Int32, errno: Int32) -> Failure {
        // Linux's numbers (this struct has no C import): ENETDOWN 100,
        // ENETUNREACH 101, EADDRNOTAVAIL 99, ETIMEDOUT 110, EHOSTDOWN 112,
        // EHOSTUNREACH 113; getaddrinfo's EAI_AGAIN -3.
        if code == lookupCode { return errno == -3 ? .silent : .refused }
        switch errno {
        case 99, 100, 101: return .noRoute
        case 110, 112, 113: return .silent
        default: return .refused
        }
    }

    private mutating func abandon(_ why: Abandon) -> Action {
        abandoning = why
        return .abandon(why)
    }

    // MARK: - The network

    /// The kernel's route to the broker now (`source`/`interface` of `path`;
    /// nil: there is none), and whether the link it uses came back since
    /// the last report. The first report only says where things stand.
    public mutating func network(path new: RoutePath?, regained: Bool, at now: Double) -> Action {
        let state: RoutePathState = new.map { .some(source: $0.source, interface: $0.interface) } ?? .none
        let before = path
        path = state
        guard before != .unknown, new != nil else { return .none }
        // Back: the route was gone, or its link lost its carrier, and is
        // here again. Moved: from one route to another.
        let back = regained || before == .none
        let moved = before != state && before != .none
        guard back || moved else { return .none }
        return linkNews(back: back, moved: moved, at: now)
    }

    /// Network news: act now if `linkSpacing` allows, else at the end of it.
    private mutating func linkNews(back: Bool, moved: Bool, at now: Double) -> Action {
        guard case .some(let source, _) = path else { return .none }
        let action: Action
        switch phase {
        case .waiting:
            action = .connect
        case .connecting where abandoning == nil:
            action = .abandon(moved ? .pathMoved(to: "from \(source)") : .linkBack)
        case .connected(let was, _) where moved && was != source:
            action = .abandon(.pathMoved(to: "from \(source)"))
        case .connected where back:
            action = .abandon(.linkBack)
        default:
            return .none
        }
        let due = lastLinkAction + timing.linkSpacing
        guard now >= due else {
            linkDue = due
            pendingNews = (pendingNews.back || back, pendingNews.moved || moved)
            return .none
        }
        lastLinkAction = now
        sinceNews = 0
        switch action {
        case .connect:
            phase = .connecting(since: now, tcpUp: false)
            return .connect
        case .abandon(let why):
            return abandon(why)
        case .none:
            return .none
        }
    }

    // MARK: - MQTT version

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
