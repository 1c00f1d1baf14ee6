/// Notices that another client keeps taking the device's MQTT session (the
/// same client id: a thief, or two boxes with the same `device.id`), as a
/// plain state machine fed with connects and disconnects.
///
/// A takeover is certain with MQTT 5 (the broker's DISCONNECT says "session
/// taken over", reason 0x8E) and only suspected with 3.1.1 (or mosquitto
/// before 2.0.15), where the broker just closes the link: a link lost soon
/// after it came up, again and again, looks the same. "Soon" is within the
/// longest reconnect wait plus 30 s (`quickLoss`): once one of two boxes
/// holds off, the other is kicked only when the first comes back, up to
/// that wait after its own connect — it too must see the conflict. After
/// `threshold` such disconnects in a row the device reports a fault and
/// waits longer before each reconnect (so two boxes stop ping-ponging); a
/// link that then stays up for `stableAfter` (twice `quickLoss`), or a
/// disconnect of another kind, clears it.
public struct TakeoverWatch: Sendable {
    public let threshold: Int
    /// The longest wait between reconnect attempts (`mqtt.reconnect_max_s`,
    /// at least 2 s as MQTTClient's backoff): it also caps the hold-off.
    public let reconnectMax: Double
    /// A 3.1.1 link lost within this many seconds of coming up counts.
    public var quickLoss: Double { reconnectMax + 30 }
    /// A link up this long clears the fault.
    public var stableAfter: Double { 2 * quickLoss }
    /// Disconnects in a row that were (or looked like) takeovers.
    public private(set) var inARow = 0
    private var connectedAt: Double?

    public init(threshold: Int = 3, reconnectMax: Int = 60) {
        self.threshold = threshold
        self.reconnectMax = Double(max(reconnectMax, 2))
    }

    /// Reported as a fault (status, doctor, LED); link prompts are not spoken meanwhile.
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
        // 15 s, 30 s, 60 s ... at most the longest reconnect wait: the other
        // box gets its turn, and its payments; a longer wait would make its
        // losses look slow (quickLoss).
        return min(reconnectMax, 15 * Double(1 << min(inARow - threshold, 5)))
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
