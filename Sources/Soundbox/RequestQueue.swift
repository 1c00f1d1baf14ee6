/// Requests that go through the speaker between payments (a replay, the
/// test sentence, a prompt, today's summary), queued by the scheduler's
/// rule (DESIGN §1): **payments come first**. A request runs only when no
/// payment waits, so a new payment is never behind more than the one
/// request already speaking, however many are asked for.
///
/// Requests with the same key (a replay of the same payment, a second
/// `test`) coalesce: the later asker waits for the one already queued. At
/// most `capacity` are queued; more are refused, so a flood of commands
/// cannot grow memory or starve anything. Pure: unit-tested without a speaker.
public struct RequestQueue<Job: AnyObject> {
    public let capacity: Int
    private var queued: [(key: String, job: Job)] = []

    public init(capacity: Int) { self.capacity = capacity }

    public enum Submission {
        /// Queued as a new request.
        case queued(Job)
        /// The same request was already queued: wait for that one.
        case joined(Job)
        /// The queue is full.
        case refused
    }

    /// Queues the request `key` (made by `make` only if it is new).
    public mutating func submit(key: String, _ make: () -> Job) -> Submission {
        if let same = queued.first(where: { $0.key == key }) { return .joined(same.job) }
        guard queued.count < capacity else { return .refused }
        let job = make()
        queued.append((key, job))
        return .queued(job)
    }

    /// The next request to run, oldest first, when `paymentsWaiting` is
    /// false; nil otherwise (payments first).
    public mutating func next(paymentsWaiting: Bool) -> Job? {
        guard !paymentsWaiting, !queued.isEmpty else { return nil }
        return queued.removeFirst().job
    }

    /// Removes and returns everything queued (at shutdown).
    public mutating func drain() -> [Job] {
        defer { queued = [] }
        return queued.map(\.job)
    }

    public var count: Int { queued.count }
    public var isEmpty: Bool { queued.isEmpty }
}

extension RequestQueue: Sendable where Job: Sendable {}
extension RequestQueue.Submission: Sendable where Job: Sendable {}
