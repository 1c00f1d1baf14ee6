/// What to do with a payment when its turn comes. Pure, so the rules are
/// tested without a clock, a speaker or a database.
public enum AnnouncePolicy {
    public enum Decision: Sendable, Equatable {
        case speak
        /// The mute switch or setting is on: recorded `muted`, replayable.
        case mute
        /// Older than `queue.stale_after_s` and the clock is known good.
        case expire(reason: String)
    }

    /// - Parameters:
    ///   - happenedAt: the payment's `ts` (Unix s), else when it was accepted.
    ///   - now: Unix seconds.
    ///   - staleAfter: `queue.stale_after_s`; 0 = never stale.
    ///   - clockSynchronized: without a synchronised clock (a Pi has no RTC)
    ///     age cannot be trusted, so nothing expires: speaking late beats
    ///     dropping a payment on a wrong date.
    ///   - heldBack: seconds the payment waited behind requests (a replay,
    ///     a prompt) after it arrived: never counted against it.
    public static func decide(happenedAt: Int64, now: Int64, heldBack: Int64 = 0, staleAfter: Int, clockSynchronized: Bool,
                              muted: Bool) -> Decision {
        if muted { return .mute }
        let age = now - heldBack - happenedAt
        if staleAfter > 0 && clockSynchronized && age > Int64(staleAfter) {
            return .expire(reason: "stale: \(age) s old, limit \(staleAfter) s")
        }
        return .speak
    }

    /// Seconds of `[from, to]` that fall inside `busy` (a request that was
    /// speaking): how long a payment that arrived at `from` was held back.
    public static func overlap(from: Int64, to: Int64, busy: ClosedRange<Int64>?) -> Int64 {
        guard let busy else { return 0 }
        return max(0, min(to, busy.upperBound) - max(from, busy.lowerBound))
    }
}
