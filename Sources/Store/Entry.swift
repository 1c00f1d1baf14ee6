import CSQLite
import Soundbox

/// Where a payment is kept.
public enum EntryRef: Hashable, Sendable {
    /// In the database, by its seq.
    case stored(Int64)
    /// Held in memory while the database cannot be written (`MemoryJournal`), by its token.
    case memory(Int64)

    public var isStored: Bool { if case .stored = self { true } else { false } }
}

/// One payment, wherever it is kept: the one record of a payment, read
/// from the database, held in memory, written through, and handed to the
/// scheduler. (A new column of `payments` touches: the schema migration,
/// this type, `columns` and `init(row:)` below, and `Store.insert`.)
public struct Entry: Sendable, Equatable {
    public var ref: EntryRef
    /// Acceptance order: increasing, never reused, even after pruning; 0 for
    /// an entry held in memory (it gets one when written through).
    public var seq: Int64 {
        if case .stored(let seq) = ref { return seq }
        return 0
    }
    public var payment: Payment
    public var state: PaymentState
    /// Unix milliseconds.
    public var acceptedAt: Int64
    /// When the payment happened, in Unix ms: its `ts`, else when it was accepted.
    public var happenedAtMs: Int64 { payment.ts.map { $0 * 1000 } ?? acceptedAt }
    /// Unix milliseconds of the last state change.
    public var updatedAt: Int64
    /// How many times speaking started: more than 1 after a crash or a retry.
    public var plays: Int
    /// Why the entry is `failed` (or another final state), if said.
    public var reason: String?
    /// The offline summary it is (or was) spoken in: that summary's first
    /// seq; nil when spoken on its own.
    public var summary: Int64?

    public init(seq: Int64, payment: Payment, state: PaymentState, acceptedAt: Int64, updatedAt: Int64,
                plays: Int, reason: String?, summary: Int64? = nil) {
        self.init(ref: .stored(seq), payment: payment, state: state, acceptedAt: acceptedAt, updatedAt: updatedAt,
                  plays: plays, reason: reason, summary: summary)
    }

    public init(ref: EntryRef, payment: Payment, state: PaymentState, acceptedAt: Int64, updatedAt: Int64,
                plays: Int, reason: String?, summary: Int64? = nil) {
        self.ref = ref; self.payment = payment; self.state = state; self.acceptedAt = acceptedAt
        self.updatedAt = updatedAt; self.plays = plays; self.reason = reason; self.summary = summary
    }
}

/// What `Store.accept` did with a payment.
public enum AcceptOutcome: Sendable, Equatable {
    /// Stored as a new entry, durably.
    case queued(seq: Int64)
    /// The id was accepted within the dedup window: nothing queued. The entry
    /// already holding that id, or nil when it has since been pruned from the
    /// history (its id is remembered longer than the entry may be kept).
    case duplicate(of: Entry?)
}

/// A receipt waiting for the broker to take it.
public struct OutboxItem: Sendable, Equatable {
    /// Order of writing; the key for `deleteOutbox`.
    public var n: Int64
    /// The receipt's JSON, as it goes on the wire.
    public var payload: String
    /// Unix milliseconds.
    public var createdAt: Int64

    public init(n: Int64, payload: String, createdAt: Int64) {
        self.n = n; self.payload = payload; self.createdAt = createdAt
    }
}

extension Entry {
    /// The columns `init(row:)` reads, in order.
    static let columns = "seq, id, amount_minor, currency, channel, lang, ts, accepted_at, updated_at, state, plays, reason, summary"

    init(row s: Statement) throws(StoreError) {
        let state = s.text(9) ?? ""
        guard let known = PaymentState(rawValue: state) else {
            throw StoreError(call: "reading payments", code: SQLITE_CORRUPT, message: "entry \(s.int64(0)) has unknown state '\(state)'")
        }
        let payment = Payment(id: s.text(1) ?? "", amount: Amount(minorUnits: s.int64(2)), currency: s.text(3),
                              channel: Channel(rawValue: s.text(4) ?? "") ?? .other, ts: s.optionalInt64(6), lang: s.text(5))
        self.init(seq: s.int64(0), payment: payment, state: known, acceptedAt: s.int64(7), updatedAt: s.int64(8),
                  plays: Int(s.int64(10)), reason: s.text(11), summary: s.optionalInt64(12))
    }
}
