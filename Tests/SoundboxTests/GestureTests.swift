import Testing
import Soundbox

/// Scripted press/release timelines through the gesture state machine.
@Suite struct GestureTests {
    /// Runs a timeline of (time, button, pressed) edges, ticking at every
    /// deadline in between; returns the actions with their times.
    func run(_ timeline: [(Double, Gestures.Button, Bool)], until end: Double) -> [(Double, Gestures.Action)] {
        var g = Gestures()
        var out: [(Double, Gestures.Action)] = []
        var events = timeline[...]
        var now = 0.0
        while now <= end {
            let nextEdge = events.first?.0 ?? .infinity
            let deadline = g.nextDeadline ?? .infinity
            if deadline <= nextEdge, deadline <= end {
                now = deadline
                out += g.tick(at: now).map { (now, $0) }
            } else if let e = events.popFirst() {
                now = e.0
                out += g.edge(e.1, pressed: e.2, at: now).map { (now, $0) }
            } else { break }
        }
        return out
    }
    func actions(_ timeline: [(Double, Gestures.Button, Bool)], until end: Double = 10) -> [Gestures.Action] {
        run(timeline, until: end).map(\.1)
    }

    @Test func shortPresses() {
        #expect(actions([(1, .up, true), (1.2, .up, false)]) == [.volumeUp])
        #expect(actions([(1, .down, true), (1.2, .down, false)]) == [.volumeDown])
        #expect(actions([(1, .up, true), (1.2, .up, false), (2, .up, true), (2.1, .up, false)]) == [.volumeUp, .volumeUp])
    }

    @Test func bounceIsIgnored() {
        // Contacts chatter for 10 ms around each press and release.
        let bouncy: [(Double, Gestures.Button, Bool)] = [
            (1.000, .up, true), (1.004, .up, false), (1.008, .up, true), (1.012, .up, false), (1.015, .up, true),
            (1.300, .up, false), (1.305, .up, true), (1.309, .up, false),
        ]
        #expect(actions(bouncy) == [.volumeUp])
    }

    @Test func holdingDownRepeats() {
        // Held 1.6 s: steps at 0.5, 0.75, 1.0, 1.25, 1.5 s; no extra step on release.
        let r = run([(1, .down, true), (2.6, .down, false)], until: 5)
        #expect(r.map(\.1) == Array(repeating: .volumeDown, count: 5))
        #expect(r.map(\.0) == [1.5, 1.75, 2.0, 2.25, 2.5])
    }

    @Test func longPressUpReplaysOnceWithoutChangingVolume() {
        let r = run([(1, .up, true), (4, .up, false)], until: 6)
        #expect(r.map(\.1) == [.replayLast])
        #expect(r.first?.0 == 2.5)
        // Released just before the threshold: a plain step.
        #expect(actions([(1, .up, true), (2.49, .up, false)]) == [.volumeUp])
    }

    @Test func bothLongSpeaksTheSummaryAndNothingElse() {
        let r = run([(1, .down, true), (1.1, .up, true), (3, .up, false), (3.05, .down, false)], until: 6)
        #expect(r.map(\.1) == [.summary])
        #expect(r.first?.0 == 2.6)
        // Both pressed but let go early: cancelled, no volume change.
        #expect(actions([(1, .up, true), (1.2, .down, true), (1.5, .down, false), (1.6, .up, false)]).isEmpty)
    }

    @Test func nothingPendingWhenIdle() {
        var g = Gestures()
        #expect(g.nextDeadline == nil)
        _ = g.edge(.up, pressed: true, at: 1)
        #expect(g.nextDeadline == 2.5)
        _ = g.edge(.up, pressed: false, at: 1.2)
        #expect(g.nextDeadline == nil, "no timer while nothing is held: no wakeups")
    }
}

@Suite struct LEDAndVolumeRules {
    @Test(arguments: [
        (true, true, true, LEDPattern.off), (true, false, false, .off),
        (false, true, true, .fastBlink), (false, true, false, .fastBlink),
        (false, false, false, .slowBlink), (false, false, true, .steady),
    ])
    func ledPattern(_ muted: Bool, _ fault: Bool, _ connected: Bool, _ expected: LEDPattern) {
        #expect(LEDPattern.of(muted: muted, fault: fault, connected: connected) == expected)
    }

    @Test func minimumAnnounceVolume() {
        #expect(AnnounceVolume.level(user: 2, minimum: 5, muted: false) == 5)
        #expect(AnnounceVolume.level(user: 8, minimum: 5, muted: false) == 8)
        #expect(AnnounceVolume.level(user: 0, minimum: 0, muted: false) == 0)
        #expect(AnnounceVolume.level(user: 9, minimum: 5, muted: true) == nil, "muted: not spoken at all")
    }
}
