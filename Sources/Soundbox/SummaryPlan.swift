/// The offline summary's decisions, pure (docs/soundboxd.md, "The offline
/// summary"): whether one may be due, whether to wait for a backlog still
/// landing, and which payments each summary takes. The scheduler feeds it
/// the queue and speaks what it returns.
public struct SummaryPlan: Sendable {
    /// At least this many payments of a currency (`queue.summary_min`; 0: never).
    public let minimum: Int
    /// Older than this (`queue.summary_after_s`, in ms) counts as waited.
    public let afterMs: Int64
    /// A backlog is landing while the newest payment is younger than this
    /// (a broker hands one over back to back: each message waits only for
    /// the one before it to be stored, a few ms to a few tens on an SD card)…
    public static let burstQuietMs: Int64 = 250
    /// …but the wait for it ends this long after the summary was armed
    /// (what has not landed by then can make a summary of its own).
    public static let burstWaitLimit = 1.5

    public init(minimum: Int, afterSeconds: Int) {
        self.minimum = minimum
        afterMs = Int64(afterSeconds) * 1000
    }

    /// A waiting payment: `happenedAtMs` is its `ts` (in ms), else when it
    /// was accepted; `group` the currency a pack reads it in (nil: no pack
    /// has words for it, it is chimed on its own).
    public struct Candidate<ID: Sendable>: Sendable {
        public let id: ID
        public let happenedAtMs: Int64
        public let group: String?
        public init(id: ID, happenedAtMs: Int64, group: String?) {
            self.id = id; self.happenedAtMs = happenedAtMs; self.group = group
        }
    }

    public func isOld(happenedAtMs: Int64, now: Int64) -> Bool { now - happenedAtMs >= afterMs }

    /// Whether a summary may be due, seen from the next payment: not one
    /// left `playing` by a crash (it is spoken again first, on its own),
    /// only a durable one, only an old one (a fresh one: nothing waited),
    /// never while muted. False disarms the summary until the next reconnect.
    public func mayBeDue(headPlays: Int, headDurable: Bool, headHappenedAtMs: Int64, now: Int64, muted: Bool) -> Bool {
        minimum > 0 && headPlays == 0 && headDurable && !muted && isOld(happenedAtMs: headHappenedAtMs, now: now)
    }

    /// Whether to wait a little more for the broker's burst to land: the
    /// newest waiting payment came less than `burstQuietMs` ago, and the
    /// summary was armed less than `burstWaitLimit` seconds ago.
    public static func keepWaiting(newestAcceptedMs: Int64?, now: Int64, armedFor seconds: Double) -> Bool {
        guard let newest = newestAcceptedMs else { return false }
        return now - newest < burstQuietMs && seconds < burstWaitLimit
    }

    /// The summaries to speak, oldest first, one per currency: each the ids
    /// of its old payments, when they are at least `minimum` (and at least
    /// `minimum` old payments wait in all).
    public func summaries<ID>(_ waiting: [Candidate<ID>], now: Int64) -> [[ID]] {
        let old = waiting.filter { isOld(happenedAtMs: $0.happenedAtMs, now: now) }
        guard minimum > 0, old.count >= minimum else { return [] }
        var groups: [(key: String, ids: [ID])] = []
        for c in old {
            guard let key = c.group else { continue }
            if let i = groups.firstIndex(where: { $0.key == key }) { groups[i].ids.append(c.id) } else { groups.append((key, [c.id])) }
        }
        return groups.map(\.ids).filter { $0.count >= minimum }
    }
}
