/// The volume buttons as a plain state machine with an injected clock
/// (docs/gpio.md): raw edges in, actions out, and when to call back.
///
/// - Edges closer than `debounce` to the previous accepted edge of the same
///   button are bounce and ignored (libgpiod v1 has no kernel debounce).
/// - A short press (released before `longPress`) of up or down: ±1, on release.
/// - Holding down repeats −1: first at `repeatDelay`, then every `repeatEvery`.
/// - Holding up for `longPress` replays the last payment (up does not
///   repeat: a long press must not also change the volume).
/// - Holding both for `longPress` speaks today's summary; nothing else fires.
/// - Pressing the second button cancels the first one's pending short press.
public struct Gestures: Sendable {
    public enum Button: Sendable, Hashable { case up, down }
    public enum Action: Sendable, Equatable { case volumeUp, volumeDown, replayLast, summary }

    public struct Timing: Sendable {
        public var debounce = 0.030
        public var longPress = 1.5
        public var repeatDelay = 0.5
        public var repeatEvery = 0.25
        public init() {}
    }

    public let timing: Timing
    private var level: [Button: Bool] = [.up: false, .down: false]
    private var lastEdge: [Button: Double] = [:]
    private var downAt: [Button: Double] = [:]
    private var bothSince: Double?
    /// The current press already did something (or was cancelled): its
    /// release must not add a short-press step.
    private var consumed: Set<Button> = []
    private var nextRepeat: Double?

    public init(timing: Timing = Timing()) { self.timing = timing }

    /// A raw edge from the line (pressed = true), at time `now` (seconds).
    public mutating func edge(_ button: Button, pressed: Bool, at now: Double) -> [Action] {
        if let last = lastEdge[button], now - last < timing.debounce { return [] }
        guard level[button] != pressed else { return [] }
        lastEdge[button] = now
        level[button] = pressed
        let other: Button = button == .up ? .down : .up
        if pressed {
            downAt[button] = now
            consumed.remove(button)
            if level[other] == true {
                bothSince = now
                consumed.formUnion([.up, .down])
                nextRepeat = nil
            } else if button == .down {
                nextRepeat = now + timing.repeatDelay
            }
            return []
        }
        // Released.
        defer { downAt[button] = nil; if level[other] != true { bothSince = nil } }
        if button == .down { nextRepeat = nil }
        if consumed.contains(button) { return [] }
        return [button == .up ? .volumeUp : .volumeDown]
    }

    /// Time passed: the long-press and repeat actions due by `now`.
    public mutating func tick(at now: Double) -> [Action] {
        var out: [Action] = []
        if let since = bothSince {
            if now - since >= timing.longPress {
                out.append(.summary)
                bothSince = nil   // once per hold
            }
            return out
        }
        if level[.up] == true, let t = downAt[.up], !consumed.contains(.up), now - t >= timing.longPress {
            consumed.insert(.up)
            out.append(.replayLast)
        }
        if level[.down] == true, var due = nextRepeat {
            while due <= now {
                out.append(.volumeDown)
                consumed.insert(.down)
                due += timing.repeatEvery
            }
            nextRepeat = due
        }
        return out
    }

    /// When `tick` next has something to do; nil when nothing is pending
    /// (so the caller can sleep until the next edge).
    public var nextDeadline: Double? {
        if let since = bothSince { return since + timing.longPress }
        var times: [Double] = []
        if level[.up] == true, let t = downAt[.up], !consumed.contains(.up) { times.append(t + timing.longPress) }
        if level[.down] == true, let r = nextRepeat { times.append(r) }
        return times.min()
    }
}

/// What the status LED shows (docs/gpio.md).
public enum LEDPattern: String, Sendable, Equatable {
    /// Muted: the box will not speak.
    case off
    /// Connected and ready.
    case steady
    /// Connecting to the broker.
    case slowBlink = "slow_blink"
    /// A fault: audio or storage.
    case fastBlink = "fast_blink"

    /// Muted wins (the merchant must see the box is silent), then faults,
    /// then the link.
    public static func of(muted: Bool, fault: Bool, connected: Bool) -> LEDPattern {
        if muted { return .off }
        if fault { return .fastBlink }
        return connected ? .steady : .slowBlink
    }

    /// Seconds on and off; nil for steady light or dark.
    public var period: (on: Double, off: Double)? {
        switch self {
        case .off, .steady: nil
        case .slowBlink: (0.5, 0.5)
        case .fastBlink: (0.125, 0.125)
        }
    }
}

public enum AnnounceVolume {
    /// The level a payment is spoken at: never below `minimum` (so a
    /// payment is always heard), never changing the user's level; nil when
    /// muted (nothing is spoken).
    public static func level(user: Int, minimum: Int, muted: Bool) -> Int? {
        muted ? nil : max(user, minimum)
    }
}
