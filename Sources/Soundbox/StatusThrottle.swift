/// The retained status's rate limit, pure: a status that changed goes out,
/// at most one per `interval` seconds (a burst of changes is one status
/// with the last of them); the same status is never sent twice in a row.
public struct StatusThrottle: Sendable, Equatable {
    public enum Action: Equatable, Sendable {
        /// Nothing new to say.
        case none
        case publish
        /// Changed, but the last went out too recently: look again then.
        case wait(seconds: Double)
    }

    public let interval: Double
    private var last: String?
    private var lastAt = -Double.infinity

    public init(interval: Double = 0.5) { self.interval = interval }

    /// What to do with status `text` at monotonic time `now`.
    public func decide(_ text: String, now: Double) -> Action {
        guard text != last else { return .none }
        let due = lastAt + interval - now
        return due > 0 ? .wait(seconds: due) : .publish
    }

    /// `text` went out at `now`.
    public mutating func published(_ text: String, at now: Double) { last = text; lastAt = now }

    /// A new connection: the next status goes out even if unchanged (still
    /// not sooner than `interval` after the last).
    public mutating func reconnected() { last = nil }
}
