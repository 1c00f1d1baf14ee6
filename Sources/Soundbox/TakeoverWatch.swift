/// Notices that another client keeps taking the device's MQTT session (the
/// same client id: a thief, or two boxes with the same `device.id`), as a
/// plain state machine fed with connects and disconnects.
///
/// A takeover is certain with MQTT 5 (the broker's DISCONNECT says "session
/// taken over", reason 0x8E) and only suspected with 3.1.1, where the broker
/// just closes the link: a link lost soon after it came up, again and
/// again, looks the same. After `threshold` such disconnects in a row the
/// device reports a fault and waits longer before each reconnect (so two
/// boxes stop ping-ponging); a link that then stays up for `stableAfter`
/// seconds, or a disconnect of another kind, clears it.
public struct TakeoverWatch: Sendable {
    public let threshold: Int
    /// A 3.1.1 link lost within this many seconds of coming up counts.
    public let quickLoss: Double
    public let stableAfter: Double
    /// Disconnects in a row that were (or looked like) takeovers.
    public private(set) var inARow = 0
    private var connectedAt: Double?

    public init(threshold: Int = 3, quickLoss: Double = 10, stableAfter: Double = 120) {
        self.threshold = threshold; self.quickLoss = quickLoss; self.stableAfter = stableAfter
    }

    /// Reported as a fault (status, doctor, LED).
    public var isTakenOver: Bool { inARow >= threshold }

    public mutating func connected(at t: Double) { connectedAt = t }

    /// The link dropped at `t`. `certain`: the broker said the session was
    /// taken over; `lost`: the connection was lost (not a clean goodbye).
    /// Returns how long to wait before reconnecting, beyond the usual backoff.
    public mutating func disconnected(at t: Double, certain: Bool, lost: Bool) -> Double {
        let upFor = connectedAt.map { t - $0 } ?? .infinity
        connectedAt = nil
        if certain || (lost && upFor < quickLoss) {
            inARow += 1
        } else {
            inARow = 0
        }
        guard isTakenOver else { return 0 }
        // 15 s, 30 s, 60 s ... at most 5 minutes: the other box gets its turn, and its payments.
        return min(300, 15 * Double(1 << min(inARow - threshold, 5)))
    }

    /// Called now and then while connected: a link up for `stableAfter`
    /// seconds clears the fault. Returns whether it was cleared.
    public mutating func check(at t: Double) -> Bool {
        guard inARow > 0, let since = connectedAt, t - since >= stableAfter else { return false }
        let was = isTakenOver
        inARow = 0
        return was
    }

    /// When `check` could next clear the fault, if it is set.
    public var nextCheck: Double? {
        guard inARow > 0, let since = connectedAt else { return nil }
        return since + stableAfter
    }
}
