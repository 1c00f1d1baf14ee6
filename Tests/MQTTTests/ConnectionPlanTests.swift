import Testing
import MQTTBridge
import SoundboxSystem

/// The network loop's decisions over scripted sequences of attempts, link
/// news and clock ticks (the real fallbacks against real brokers, and a
/// real link going away, are in DaemonTests' MQTT and network suites).
@Suite struct ConnectionPlanTests {
    static let lost = ConnectionPlan.connectionLost
    typealias End = ConnectionPlan.End
    /// libmosquitto's MOSQ_ERR_ERRNO with Linux's errno values.
    static func errno(_ e: Int32) -> End { End(code: ConnectionPlan.errnoCode, errno: e) }
    static let netUnreachable = errno(101), timedOut = errno(110), refused = errno(111), hostUnreachable = errno(113)
    static let wifi = RoutePath(source: "192.168.1.20", interface: 3)
    static let cellular = RoutePath(source: "100.64.7.9", interface: 5)

    /// A plan past its first tick (the first attempt started at `t`).
    static func started(_ version: Int = 4, reconnectMax: Int = 60, at t: Double = 0) -> ConnectionPlan {
        var plan = ConnectionPlan(protocolVersion: version, reconnectMax: reconnectMax)
        #expect(plan.tick(at: t) == .connect)
        return plan
    }

    // MARK: - MQTT version

    @Test func aRefusedMQTT5FallsBackAtOnceAndQuietly() {
        var plan = Self.started(5)
        let (report, note) = plan.connack(ConnectionPlan.unsupportedProtocolVersion, text: "unacceptable protocol version")
        #expect(!report)
        #expect(note == .mqtt5Refused(connack: "unacceptable protocol version"))
        #expect(plan.ended(End(connack: 132, disconnectRC: 2), at: 0, jitter: 0.5).next == .now)
        #expect(plan.version == 4)
        // From now on 3.1.1: a later refusal or loss keeps it.
        #expect(plan.tick(at: 0) == .connect)
        #expect(plan.connack(0, at: 0) == (true, nil))
        #expect(plan.ended(End(connack: 0, disconnectRC: Self.lost), at: 20, jitter: 0.25).next == .wait(seconds: 0.25))
        #expect(plan.version == 4)
    }

    @Test func twoMQTT5ConnectionsClosedBeforeAnswerTryMQTT311AndItsAnswerKeepsIt() {
        var plan = Self.started(5)
        plan.tcpUp(at: 0)
        let first = plan.ended(End(disconnectRC: Self.lost), at: 0, jitter: 0)
        #expect(first.next == .wait(seconds: 1) && first.note == nil && plan.version == 5)
        #expect(plan.tick(at: 1) == .connect)
        plan.tcpUp(at: 1)
        let second = plan.ended(End(disconnectRC: Self.lost), at: 1, jitter: 0)
        #expect(second.next == .now && second.note == .mqtt5ClosedTryingMQTT311 && plan.version == 4)
        #expect(plan.tick(at: 1) == .connect)
        #expect(plan.connack(0) == (true, .mqtt311Answers))
        _ = plan.ended(End(connack: 0, disconnectRC: Self.lost), at: 2, jitter: 0)
        // Confirmed: being closed early on 3.1.1 now no longer goes back.
        #expect(plan.tick(at: 10) == .connect)
        plan.tcpUp(at: 10)
        _ = plan.ended(End(disconnectRC: Self.lost), at: 10, jitter: 0)
        #expect(plan.version == 4)
    }

    @Test func mqtt311ClosedTooGoesBackToMQTT5() {
        var plan = Self.started(5)
        var t = 0.0
        func closedEarly() -> ConnectionPlan.Decision {
            plan.tcpUp(at: t)
            let d = plan.ended(End(disconnectRC: Self.lost), at: t, jitter: 0)
            t += 100
            #expect(plan.tick(at: t) == .connect)
            return d
        }
        _ = closedEarly()
        _ = closedEarly()
        let back = closedEarly()
        #expect(back.note == .mqtt311ClosedToo && plan.version == 5)
        if case .wait = back.next {} else { Issue.record("going back waits: \(back.next)") }
    }

    /// Closed early once, then a CONNACK: the count starts again.
    @Test func aConnackBetweenEarlyClosesResetsTheirCount() {
        var plan = Self.started(5)
        plan.tcpUp(at: 0)
        _ = plan.ended(End(disconnectRC: Self.lost), at: 0, jitter: 0)
        #expect(plan.tick(at: 10) == .connect)
        _ = plan.connack(5)   // refused (not authorised), but an answer
        _ = plan.ended(End(connack: 5, disconnectRC: 5), at: 10, jitter: 0)
        #expect(plan.tick(at: 20) == .connect)
        plan.tcpUp(at: 20)
        #expect(plan.ended(End(disconnectRC: Self.lost), at: 20, jitter: 0).next != .now)
        #expect(plan.version == 5)
    }

    @Test func configuredMQTT311NeverChanges() {
        var plan = Self.started(4)
        #expect(plan.connack(ConnectionPlan.unsupportedProtocolVersion).report)
        for i in 0..<4 {
            plan.tcpUp(at: Double(i) * 100)
            #expect(plan.ended(End(disconnectRC: Self.lost), at: Double(i) * 100, jitter: 0).note == nil)
            #expect(plan.tick(at: Double(i + 1) * 100) == .connect)
        }
        #expect(plan.version == 4)
    }

    // MARK: - Waits by how an attempt ended

    /// Refusals (a broker that answers no) back off exponentially, with
    /// jitter, to the cap; a connection that lasted resets it.
    @Test func refusalsDoubleUpToTheCapAndAConnectionThatLastedResetsIt() {
        var plan = Self.started(reconnectMax: 20)
        var t = 0.0
        var waits: [ConnectionPlan.Next] = []
        for _ in 0..<7 {
            let d = plan.ended(Self.refused, at: t, jitter: 0.5)
            #expect(d.failure == .refused && d.say)
            waits.append(d.next)
            t += 100
            #expect(plan.tick(at: t) == .connect)
        }
        #expect(waits == [1.5, 3, 6, 12, 20, 20, 20].map { ConnectionPlan.Next.wait(seconds: $0) })
        _ = plan.connack(0, at: t)
        t += 10
        #expect(plan.ended(End(connack: 0, disconnectRC: Self.lost), at: t, jitter: 0.25).next == .wait(seconds: 0.25))
        #expect(plan.tick(at: t + 1) == .connect)
        #expect(plan.ended(Self.refused, at: t + 1, jitter: 0.25).next == .wait(seconds: 1.25))
    }

    /// A broker that accepts and drops at once (or a link too slow for the
    /// dead-link probe) is backed off from like a refusal: not a TLS
    /// handshake a second.
    @Test func aConnectionLostSoonAfterItsCONNACKCountsAsARefusal() {
        var plan = Self.started(reconnectMax: 60)
        var t = 0.0
        var waits: [ConnectionPlan.Next] = []
        for _ in 0..<5 {
            plan.tcpUp(at: t)
            _ = plan.connack(0, at: t + 0.1)
            let d = plan.ended(End(connack: 0, disconnectRC: Self.lost), at: t + 2, jitter: 0.5)
            #expect(d.failure == .lost)
            waits.append(d.next)
            t += 100
            #expect(plan.tick(at: t) == .connect)
        }
        #expect(waits == [1.5, 3, 6, 12, 24].map { ConnectionPlan.Next.wait(seconds: $0) })
    }

    /// What each failure is, from libmosquitto's code and errno.
    @Test func failuresAreClassifiedByWhatCameBack() {
        #expect(ConnectionPlan.classify(code: 14, errno: 101) == .noRoute)    // ENETUNREACH
        #expect(ConnectionPlan.classify(code: 14, errno: 100) == .noRoute)    // ENETDOWN
        #expect(ConnectionPlan.classify(code: 14, errno: 113) == .silent)     // EHOSTUNREACH: no ARP answer
        #expect(ConnectionPlan.classify(code: 14, errno: 110) == .silent)     // ETIMEDOUT
        #expect(ConnectionPlan.classify(code: 14, errno: 111) == .refused)    // ECONNREFUSED: the host answered
        #expect(ConnectionPlan.classify(code: 15, errno: -3) == .silent)      // EAI_AGAIN: no answer from DNS
        #expect(ConnectionPlan.classify(code: 15, errno: -2) == .refused)     // EAI_NONAME: no such broker
        #expect(ConnectionPlan.classify(code: 8, errno: 0) == .refused)       // TLS
        // Once its TCP connection is up, an attempt that ends without a CONNACK was refused.
        var plan = Self.started()
        plan.tcpUp(at: 0)
        #expect(plan.ended(Self.timedOut, at: 1, jitter: 0).failure == .refused)
    }

    /// A silent way (no SYN-ACK) is tried again quickly and does not grow;
    /// after five minutes of silence, every ~5 s.
    @Test func silenceIsRetriedQuicklyWithoutGrowing() {
        var plan = Self.started()
        var t = 0.0
        var waits: [(at: Double, wait: Double)] = []
        while t < 400 {
            // The kernel's SYN goes unanswered: the plan gives up at its deadline.
            let deadline = plan.nextWake!
            #expect(plan.tick(at: deadline - 0.01) == .none)
            guard case .abandon(.noSYNACK(let s)) = plan.tick(at: deadline) else { Issue.record("no deadline at \(deadline)"); return }
            #expect(s == 2 || s == 1 || s == 3.5)
            let d = plan.ended(End(), at: deadline, jitter: 1)
            #expect(d.failure == .silent)
            guard case .wait(let w) = d.next else { Issue.record("\(d.next)"); return }
            waits.append((deadline, w))
            t = deadline + w
            #expect(plan.tick(at: t) == .connect)
        }
        #expect(waits.filter { $0.at < 300 }.allSatisfy { $0.wait <= 0.25 })
        #expect(waits.filter { $0.at >= 305 }.allSatisfy { $0.wait >= 4 && $0.wait <= 6.001 })
        #expect(waits.filter { $0.at < 300 }.count > 150)   // a SYN every ~1.5 s or less
    }

    @Test func everyEighthSilentAttemptWaitsLongerForItsSYNACK() {
        var plan = Self.started()
        var t = 0.0
        var deadlines: [Double] = []
        for _ in 0..<16 {
            let due = plan.nextWake!
            deadlines.append(due - t)
            _ = plan.tick(at: due)
            _ = plan.ended(End(), at: due, jitter: 0)
            t = due
            #expect(plan.tick(at: t) == .connect)
        }
        // The first SYN gets the kernel's one retry (2 s); once the way is
        // silent, one SYN each (1 s), and 3.5 s every eighth: a slow path still gets through.
        #expect(deadlines == [2, 1, 1, 1, 1, 1, 1, 3.5, 1, 1, 1, 1, 1, 1, 1, 3.5])
    }

    /// No route: attempts cost nothing on the air; every ~2 s, not growing.
    @Test func noRouteNeitherGrowsNorSpins() {
        var plan = Self.started()
        for i in 0..<20 {
            let d = plan.ended(Self.netUnreachable, at: Double(i) * 10, jitter: 0.5)
            #expect(d.failure == .noRoute && d.next == .wait(seconds: 2))
            // Logged once, then once per five minutes.
            #expect(d.say == (i == 0))
            #expect(plan.tick(at: Double(i + 1) * 10) == .connect)
        }
    }

    @Test func aSlowBrokerIsGivenUpAtItsCONNACKDeadlineAndBackedOffFrom() {
        var plan = Self.started()
        plan.tcpUp(at: 0.3)
        #expect(plan.nextWake == 10)
        #expect(plan.tick(at: 9.9) == .none)
        #expect(plan.tick(at: 10) == .abandon(.noCONNACK(seconds: 10)))
        let d = plan.ended(End(disconnectRC: Self.lost), at: 10, jitter: 0.5)
        #expect(d.failure == .refused && d.next == .wait(seconds: 1.5))
    }

    /// Attempts the plan gives up (no CONNACK in time) are not the broker
    /// closing them: they never switch the MQTT version.
    @Test func attemptsGivenUpDoNotSwitchTheVersion() {
        var plan = Self.started(5)
        var t = 0.0
        for _ in 0..<4 {
            plan.tcpUp(at: t)
            t += 10
            #expect(plan.tick(at: t) == .abandon(.noCONNACK(seconds: 10)))
            let d = plan.ended(End(disconnectRC: Self.lost), at: t, jitter: 0)
            #expect(d.note == nil && plan.version == 5)
            t = plan.nextWake!
            #expect(plan.tick(at: t) == .connect)
        }
    }

    /// libmosquitto's keep-alive clock starts with the attempt: every
    /// deadline ends it 2 s before that could (no spurious rc 19).
    @Test func deadlinesStayUnderTheKeepAlive() {
        let t = ConnectionPlan.Timing(keepalive: 5)
        #expect(t.tcpDeadline == 2 && t.silentTCPDeadline == 1 && t.longTCPDeadline == 3 && t.connackDeadline == 3)
        #expect(ConnectionPlan.Timing(keepalive: 30).connackDeadline == 10)
    }

    @Test func aDelegatesLeastWaitLengthensOneWaitButNotAFallback() {
        var plan = Self.started(5)
        _ = plan.connack(0)
        #expect(plan.ended(End(connack: 0, disconnectRC: 142), at: 0, jitter: 0, minimumWait: 30).next == .wait(seconds: 30))
        #expect(plan.tick(at: 30) == .connect)
        _ = plan.connack(ConnectionPlan.unsupportedProtocolVersion)
        var asked = false
        let fallback = plan.ended(End(connack: 132, disconnectRC: 2), at: 30, jitter: 0, minimumWait: { asked = true; return 30 }())
        #expect(fallback.next == .now && !asked)   // kept for the wait that follows
    }

    // MARK: - The network

    /// The route comes back while the plan waits out a refusal's backoff:
    /// the wait is cut short; the backoff itself is not forgotten.
    @Test func aRouteThatComesBackCutsTheWaitShort() {
        var plan = Self.started()
        #expect(plan.network(path: nil, regained: false, at: 0) == .none)   // where things stand: no route
        var t = 0.0
        for _ in 0..<5 { _ = plan.ended(Self.refused, at: t, jitter: 0.5); t = plan.nextWake!; #expect(plan.tick(at: t) == .connect) }
        let d = plan.ended(Self.refused, at: t, jitter: 0.5)
        #expect(d.next == .wait(seconds: 48))
        #expect(plan.network(path: Self.wifi, regained: false, at: t + 3) == .connect)
        // The next refusal continues the backoff.
        #expect(plan.ended(Self.refused, at: t + 3, jitter: 0.5).next == .wait(seconds: 60))
    }

    /// A link whose carrier comes back (the route was there all along):
    /// a silent attempt in progress is abandoned for a new one.
    @Test func aLinkThatComesBackAbandonsAConnectInProgress() {
        var plan = Self.started()
        #expect(plan.network(path: Self.wifi, regained: false, at: 0) == .none)
        #expect(plan.network(path: Self.wifi, regained: true, at: 1.2) == .abandon(.linkBack))
        #expect(plan.ended(End(), at: 1.2, jitter: 0.9).next == .now)
        #expect(plan.tick(at: 1.2) == .connect)
    }

    /// A connection the client believes up is replaced when its link came
    /// back (the broker resends what it had in flight at once) or when its
    /// route moved to another address; not for news that changes neither.
    @Test func aConnectionIsReplacedWhenItsLinkComesBackOrItsRouteMoves() {
        var plan = Self.started()
        #expect(plan.network(path: Self.wifi, regained: false, at: 0) == .none)
        _ = plan.connack(0, source: Self.wifi.source)
        #expect(plan.network(path: Self.wifi, regained: false, at: 5) == .none)   // an address elsewhere
        #expect(plan.network(path: Self.wifi, regained: true, at: 10) == .abandon(.linkBack))
        #expect(plan.ended(End(connack: 0, disconnectRC: Self.lost), at: 10, jitter: 0.5).failure == .linkChanged)
        #expect(plan.tick(at: 10) == .connect)
        _ = plan.connack(0, source: Self.wifi.source)
        // Wi-Fi gone, the 4G modem's route takes over.
        #expect(plan.network(path: Self.cellular, regained: false, at: 20) == .abandon(.pathMoved(to: "from 100.64.7.9")))
        #expect(plan.ended(End(connack: 0, disconnectRC: Self.lost), at: 20, jitter: 0.5).next == .now)
        #expect(plan.tick(at: 20) == .connect)
        _ = plan.connack(0, source: Self.cellular.source)
        // No route for a while, then the same route again: back.
        #expect(plan.network(path: nil, regained: false, at: 30) == .none)
        #expect(plan.network(path: Self.cellular, regained: false, at: 40) == .abandon(.linkBack))
    }

    /// A flapping link: news every 100 ms for a minute acts at most once a
    /// second, and the last news is not lost.
    @Test func aFlappingLinkActsAtMostOncePerSecond() {
        var plan = Self.started()
        #expect(plan.network(path: Self.wifi, regained: false, at: 0) == .none)
        var actions = 0, attempts = 0
        var t = 0.0
        for i in 1...600 {
            t = Double(i) / 10
            let path = i % 2 == 0 ? Self.wifi : nil
            var action = plan.network(path: path, regained: path != nil, at: t)
            if action == .none { action = plan.tick(at: t) }
            switch action {
            case .none: break
            case .connect: actions += 1
            case .abandon(.noSYNACK), .abandon(.noCONNACK):
                // An attempt's own deadline (those right after news are short): not news.
                attempts += 1
                _ = plan.ended(End(), at: t, jitter: 0)
                #expect(plan.tick(at: t) == .connect)
            case .abandon:
                actions += 1
                _ = plan.ended(End(), at: t, jitter: 0)
                #expect(plan.tick(at: t) == .connect)
            }
        }
        #expect(actions >= 55 && actions <= 61, "\(actions)")
        #expect(attempts <= 180, "\(attempts)")
        // The link stays up: the plan settles into an attempt, no more news.
        #expect(plan.tick(at: t + 5) != .connect)
    }

    /// After network news the first SYN is often lost while both ends bring
    /// the link up: the attempts that follow give their SYN 0.25 s, then
    /// 0.5 s, then 1 s, with no wait between; then as for a silent way.
    @Test func afterNewsTheAttemptsComeQuicklyThenAsUsual() {
        var plan = Self.started()
        #expect(plan.network(path: nil, regained: false, at: 0) == .none)
        _ = plan.ended(Self.netUnreachable, at: 0, jitter: 0.5)
        var t = 0.5
        #expect(plan.network(path: Self.wifi, regained: false, at: t) == .connect)
        var deadlines: [Double] = []
        for _ in 0..<5 {
            let due = plan.nextWake!
            deadlines.append(due - t)
            guard case .abandon(.noSYNACK) = plan.tick(at: due) else { Issue.record("no deadline"); return }
            let d = plan.ended(End(), at: due, jitter: 1)
            t = due
            if case .wait(let w) = d.next { t += w }
            #expect(plan.tick(at: t) == .connect)
        }
        #expect(deadlines == [0.25, 0.5, 1, 1, 1])   // then silent: one SYN a second
        // Its SYN answered: the next news starts again from 0.25 s.
        plan.tcpUp(at: t + 0.1)
        _ = plan.connack(0, source: Self.wifi.source)
        #expect(plan.network(path: Self.cellular, regained: false, at: t + 5) == .abandon(.pathMoved(to: "from 100.64.7.9")))
        _ = plan.ended(End(connack: 0, disconnectRC: Self.lost), at: t + 5, jitter: 0)
        #expect(plan.tick(at: t + 5) == .connect && plan.nextWake == t + 5.25)
    }

    /// News held back by the spacing is acted on when the spacing ends.
    @Test func newsHeldBackIsActedOnLater() {
        var plan = Self.started()
        #expect(plan.network(path: nil, regained: false, at: 0) == .none)
        _ = plan.ended(Self.netUnreachable, at: 0, jitter: 0.5)
        #expect(plan.network(path: Self.wifi, regained: false, at: 0.1) == .connect)
        _ = plan.ended(Self.refused, at: 0.2, jitter: 0.5)
        #expect(plan.network(path: Self.cellular, regained: false, at: 0.5) == .none)
        #expect(plan.nextWake == 1.1)
        #expect(plan.tick(at: 1.1) == .connect)
    }
}

@Suite struct ConnectionPlanCodesTests {
    /// The plan's codes are libmosquitto's (it has no C import of its own).
    @Test func thePlansCodesAreLibmosquittos() {
        #expect(ConnectionPlan.connectionLost == MQTTClient.connectionLost)
        #expect(MQTTClient.connackText(rc: ConnectionPlan.unsupportedProtocolVersion) == "Unsupported Protocol Version")
    }
}
