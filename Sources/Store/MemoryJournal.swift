import Soundbox

/// What could not be written to the database, held in memory until it can
/// be (docs/soundboxd.md, "When storage fails"): payments accepted meanwhile
/// with their states, receipts not yet in the outbox, final states of
/// stored payments that could not be recorded, and signed commands' nonces.
/// A plain value: `Storage` decides when to use it and writes it through
/// (`takeForWriting`, then `written`); it does no I/O and reads no clock.
///
/// Bounded: finished payments and receipts are capped at `cap` each (the
/// oldest go first; pending payments are never dropped), nonces too.
public struct MemoryJournal: Sendable {
    public let cap: Int
    /// Payments accepted while the database could not be written, oldest
    /// first, each with `ref` `.memory(token)`.
    public private(set) var entries: [Entry] = []
    /// Receipts not yet in the outbox, oldest first.
    public private(set) var receipts: [(token: Int64, receipt: Receipt)] = []
    /// Stored payments whose final state could not be written (seq → state).
    public private(set) var unrecorded: [Int64: (state: PaymentState, reason: String?)] = [:]
    /// Memory tokens written through, and their seqs: a reference the
    /// scheduler still holds finds its stored entry.
    private var adopted: [Int64: Int64] = [:]
    /// Nonces seen while the database could not be written (nonce → Unix ms).
    private var nonces: [String: Int64] = [:]
    private var nextToken: Int64 = 1
    /// Receipts dropped so far because `cap` were held.
    public private(set) var receiptsDropped = 0

    public init(cap: Int = 10_000) { self.cap = cap }

    /// Anything waits to be written to the database (nonces aside: they
    /// matter only until the restart).
    public var isEmpty: Bool { entries.isEmpty && receipts.isEmpty && unrecorded.isEmpty }

    /// Where `ref` is now: a memory entry written through is stored.
    public func resolve(_ ref: EntryRef) -> EntryRef {
        if case .memory(let token) = ref, let seq = adopted[token] { return .stored(seq) }
        return ref
    }

    // MARK: - Payments

    /// A payment the database could not take. A duplicate if its id is held
    /// here (or `earlier` says the database has it: "seq 3 played"); else
    /// held `queued`. Either way with its receipt (not durable).
    public mutating func accept(_ p: Payment, now: Int64, earlier: String?) -> (entry: Entry?, earlier: String?) {
        if let held = entries.last(where: { $0.payment.id == p.id }) {
            hold(PaymentTransition.duplicate.receipt(id: p.id, at: now, durable: false))
            return (nil, "in memory, \(held.state.rawValue)")
        }
        if let earlier {
            hold(PaymentTransition.duplicate.receipt(id: p.id, at: now, durable: false))
            return (nil, earlier)
        }
        let entry = Entry(ref: .memory(token()), payment: p, state: .queued, acceptedAt: now, updatedAt: now, plays: 0, reason: nil)
        entries.append(entry)
        hold(PaymentTransition.accepted.receipt(id: p.id, at: now, durable: false))
        trimFinished()
        return (entry, nil)
    }

    /// The oldest pending payment held here.
    public var next: Entry? { entries.first { $0.state.isPending } }

    /// Pending payments held here, oldest first.
    public var pending: [Entry] { entries.filter { $0.state.isPending } }

    /// Speaking of a payment held here starts.
    public mutating func markPlaying(token: Int64, now: Int64) {
        guard let i = entries.firstIndex(where: { $0.ref == .memory(token) }) else { return }
        entries[i].state = .playing
        entries[i].plays += 1
        entries[i].updatedAt = now
    }

    /// A payment's final state that the database could not take: a stored
    /// one is remembered (so it is not spoken again in this run), one held
    /// here changes; either way with its receipt.
    public mutating func finish(_ entry: Entry, _ final: PaymentState, reason: String?, now: Int64) {
        switch resolve(entry.ref) {
        case .stored(let seq):
            unrecorded[seq] = (final, reason)
        case .memory(let token):
            guard let i = entries.firstIndex(where: { $0.ref == .memory(token) }) else { return }
            entries[i].state = final
            entries[i].reason = reason
            entries[i].updatedAt = now
        }
        hold(PaymentTransition.finished(final, reason: reason).receipt(id: entry.payment.id, at: now, durable: false))
        trimFinished()
    }

    /// The newest payment held here with this id.
    public func entry(id: String) -> Entry? { entries.last { $0.payment.id == id } }

    /// Count and sum of the payments held here accepted since `since` (ms).
    public func summary(since: Int64) -> (count: Int, totalMinor: Int64) {
        let held = entries.filter { $0.acceptedAt >= since }
        return (held.count, held.reduce(0) { $0 + $1.payment.amount.minorUnits })
    }

    // MARK: - Receipts

    /// Holds a receipt (dropping the oldest past `cap`).
    public mutating func hold(_ r: Receipt) {
        receipts.append((token(), r))
        if receipts.count > cap {
            receiptsDropped += receipts.count - cap
            receipts.removeFirst(receipts.count - cap)
        }
    }

    /// The broker took these receipts.
    public mutating func forget(tokens: Set<Int64>) {
        receipts.removeAll { tokens.contains($0.token) }
    }

    // MARK: - Nonces

    /// A signed command's nonce: true the first time it is seen here since
    /// `since` (ms), false for a replay. (The database is asked first.)
    public func seen(nonce: String, since: Int64) -> Bool {
        if let at = nonces[nonce], at >= since { return true }
        return false
    }

    /// Remembers a nonce the database could not take.
    public mutating func remember(nonce: String, now: Int64, since: Int64) {
        if nonces.count >= cap { nonces = nonces.filter { $0.value >= since } }
        if nonces.count >= cap, let oldest = nonces.min(by: { $0.value < $1.value }) { nonces[oldest.key] = nil }
        nonces[nonce] = now
    }

    // MARK: - Writing through

    /// What to write to the database, in order: the payments held here and
    /// the receipts. `written(seqs:)` when that transaction committed.
    public var forWriting: (entries: [Entry], receipts: [Receipt]) { (entries, receipts.map(\.receipt)) }

    /// The payments and receipts of `forWriting` are in the database, the
    /// payments under `seqs` (in order).
    public mutating func written(seqs: [Int64]) {
        for (e, seq) in zip(entries, seqs) {
            if case .memory(let token) = e.ref { adopted[token] = seq }
        }
        entries = []
        receipts = []
    }

    /// A final state of `unrecorded` is in the database (or no longer needs to be).
    public mutating func recorded(seq: Int64) { unrecorded[seq] = nil }

    // MARK: - Inside

    private mutating func token() -> Int64 {
        defer { nextToken += 1 }
        return nextToken
    }

    private mutating func trimFinished() {
        let finished = entries.filter { !$0.state.isPending }.count
        guard finished > cap, let i = entries.firstIndex(where: { !$0.state.isPending }) else { return }
        entries.remove(at: i)
    }
}
