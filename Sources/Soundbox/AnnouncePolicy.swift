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
    public static func decide(happenedAt: Int64, now: Int64, staleAfter: Int, clockSynchronized: Bool, muted: Bool) -> Decision {
        if muted { return .mute }
        let age = now - happenedAt
        if staleAfter > 0 && clockSynchronized && age > Int64(staleAfter) {
            return .expire(reason: "stale: \(age) s old, limit \(staleAfter) s")
        }
        return .speak
    }
}
