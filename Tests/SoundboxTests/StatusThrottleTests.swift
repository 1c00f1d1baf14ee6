import Testing
import Soundbox

@Suite struct StatusThrottleTests {
    @Test func aChangeGoesOutAtOnceThenAtMostTwiceASecond() {
        var t = StatusThrottle(interval: 0.5)
        #expect(t.decide("a", now: 100) == .publish)
        t.published("a", at: 100)
        #expect(t.decide("a", now: 100.1) == .none)
        if case .wait(let s) = t.decide("b", now: 100.2) { #expect(abs(s - 0.3) < 1e-9) } else { Issue.record("expected a wait") }
        #expect(t.decide("c", now: 100.5) == .publish)   // the burst's last state, one status
    }

    @Test func aReconnectSendsTheSameStatusAgainButNotSooner() {
        var t = StatusThrottle(interval: 0.5)
        t.published("a", at: 10)
        t.reconnected()
        if case .wait = t.decide("a", now: 10.1) {} else { Issue.record("a reconnect within the interval still waits") }
        #expect(t.decide("a", now: 10.6) == .publish)
    }
}
