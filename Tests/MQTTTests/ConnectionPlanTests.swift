import Testing
import MQTTBridge

/// The network loop's version and backoff decisions over scripted
/// sequences of attempts (the real fallbacks against real brokers are in
/// DaemonTests' MQTT suites).
@Suite struct ConnectionPlanTests {
    static let lost = ConnectionPlan.connectionLost

    @Test func aRefusedMQTT5FallsBackAtOnceAndQuietly() {
        var plan = ConnectionPlan(protocolVersion: 5, reconnectMax: 60)
        let (report, note) = plan.connack(ConnectionPlan.unsupportedProtocolVersion, text: "unacceptable protocol version")
        #expect(!report)
        #expect(note == .mqtt5Refused(connack: "unacceptable protocol version"))
        #expect(plan.ended(connack: 132, disconnectRC: 2, jitter: 1.5).next == .now)
        #expect(plan.version == 4)
        // From now on 3.1.1: a later refusal or loss keeps it.
        #expect(plan.connack(0) == (true, nil))
        #expect(plan.ended(connack: 0, disconnectRC: Self.lost, jitter: 1).next == .wait(seconds: 1))
        #expect(plan.version == 4)
    }

    @Test func twoMQTT5ConnectionsClosedBeforeAnswerTryMQTT311AndItsAnswerKeepsIt() {
        var plan = ConnectionPlan(protocolVersion: 5, reconnectMax: 60)
        let first = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        #expect(first.next == .wait(seconds: 1) && first.note == nil && plan.version == 5)
        let second = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        #expect(second.next == .now && second.note == .mqtt5ClosedTryingMQTT311 && plan.version == 4)
        #expect(plan.connack(0) == (true, .mqtt311Answers))
        _ = plan.ended(connack: 0, disconnectRC: Self.lost, jitter: 1)
        // Confirmed: being closed early on 3.1.1 now no longer goes back.
        _ = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        #expect(plan.version == 4)
    }

    @Test func mqtt311ClosedTooGoesBackToMQTT5() {
        var plan = ConnectionPlan(protocolVersion: 5, reconnectMax: 60)
        _ = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        _ = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        let back = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        #expect(back.note == .mqtt311ClosedToo && plan.version == 5)
        if case .wait = back.next {} else { Issue.record("going back waits: \(back.next)") }
    }

    /// Closed early once, then a CONNACK: the count starts again.
    @Test func aConnackBetweenEarlyClosesResetsTheirCount() {
        var plan = ConnectionPlan(protocolVersion: 5, reconnectMax: 60)
        _ = plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1)
        _ = plan.connack(5)   // refused (not authorised), but an answer
        _ = plan.ended(connack: 5, disconnectRC: 5, jitter: 1)
        #expect(plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1).next != .now)
        #expect(plan.version == 5)
    }

    @Test func configuredMQTT311NeverChanges() {
        var plan = ConnectionPlan(protocolVersion: 4, reconnectMax: 60)
        #expect(plan.connack(ConnectionPlan.unsupportedProtocolVersion).report)
        for _ in 0..<4 { #expect(plan.ended(connack: nil, disconnectRC: Self.lost, jitter: 1).note == nil) }
        #expect(plan.version == 4)
    }

    @Test func backoffDoublesUpToTheCapAndAnAcceptedConnackResetsIt() {
        var plan = ConnectionPlan(protocolVersion: 4, reconnectMax: 20)
        let waits = (0..<7).map { _ in plan.ended(connack: nil, disconnectRC: nil, jitter: 1.5).next }
        #expect(waits == [1.5, 3, 6, 12, 20, 20, 20].map { ConnectionPlan.Next.wait(seconds: $0) })
        #expect(plan.ended(connack: 0, disconnectRC: Self.lost, jitter: 1.25).next == .wait(seconds: 1.25))
        #expect(plan.ended(connack: nil, disconnectRC: nil, jitter: 1.25).next == .wait(seconds: 2.5))
    }

    @Test func aDelegatesLeastWaitLengthensOneWaitButNotAFallback() {
        var plan = ConnectionPlan(protocolVersion: 5, reconnectMax: 60)
        #expect(plan.ended(connack: 0, disconnectRC: 142, jitter: 1, minimumWait: 30).next == .wait(seconds: 30))
        _ = plan.connack(ConnectionPlan.unsupportedProtocolVersion)
        var asked = false
        let fallback = plan.ended(connack: 132, disconnectRC: 2, jitter: 1, minimumWait: { asked = true; return 30 }())
        #expect(fallback.next == .now && !asked)   // kept for the wait that follows
    }
}

@Suite struct ConnectionPlanCodesTests {
    /// The plan's codes are libmosquitto's (it has no C import of its own).
    @Test func thePlansCodesAreLibmosquittos() {
        #expect(ConnectionPlan.connectionLost == MQTTClient.connectionLost)
        #expect(MQTTClient.connackText(rc: ConnectionPlan.unsupportedProtocolVersion) == "Unsupported Protocol Version")
    }
}
