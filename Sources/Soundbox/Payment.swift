/// A payment accepted for announcement (docs/DESIGN.md §2 "Payment").
public struct Payment: Sendable, Equatable {
    /// The dedup key: 1–64 printable ASCII characters.
    public var id: String
    public var amount: Amount
    /// ISO 4217; nil means the voice pack's default.
    public var currency: String?
    public var channel: Channel
    /// When the payment happened (Unix seconds), if the backend said.
    public var ts: Int64?
    /// Voice pack override; nil means `voice.lang`.
    public var lang: String?

    public init(id: String, amount: Amount, currency: String? = nil, channel: Channel = .other,
                ts: Int64? = nil, lang: String? = nil) {
        self.id = id; self.amount = amount; self.currency = currency
        self.channel = channel; self.ts = ts; self.lang = lang
    }

    /// Why `id` is not a valid payment id, or nil.
    public static func problem(withID id: String) -> String? {
        if id.isEmpty { return "id is empty" }
        if id.utf8.count > 64 { return "id is longer than 64 characters" }
        if !id.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) { return "id must be printable ASCII without spaces" }
        return nil
    }
}

/// Where a payment is in its life. `queued` and `playing` are waiting to be
/// spoken; the rest are final (and replayable).
public enum PaymentState: String, Sendable, CaseIterable, Codable {
    case queued, playing, played, muted, expired, failed
    public var isPending: Bool { self == .queued || self == .playing }
}

/// What the device tells the backend about a payment (DESIGN §2 "Receipt").
public struct Receipt: Sendable, Equatable {
    public enum Status: String, Sendable, Codable {
        case queued, duplicate, rejected, played, muted, expired, failed
        /// An update's (`"kind": "update"`): where it stands (`UpdatePhase`; failed is shared).
        case downloading, installing, waitingToReboot = "waiting to reboot", trying, committed, rolledBack = "rolled back"
    }
    public var id: String?
    public var status: Status
    /// Unix seconds when the device decided.
    public var ts: Int64
    public var reason: String?
    /// false when the payment could not be written to storage and is held
    /// in memory only; omitted when durable.
    public var durable: Bool?
    /// For a refused `cmd` or `config` message: which ("cmd", "config");
    /// omitted for payments.
    public var kind: String?
    /// true: played within an offline summary, not on its own; omitted otherwise.
    public var summary: Bool?
    /// An update's: how far it is (0-100) and the version it brings.
    public var progress: Int?
    public var version: String?

    public init(id: String?, status: Status, ts: Int64, reason: String? = nil, durable: Bool? = nil, kind: String? = nil,
                summary: Bool? = nil, progress: Int? = nil, version: String? = nil) {
        self.id = id; self.status = status; self.ts = ts; self.reason = reason; self.durable = durable; self.kind = kind
        self.summary = summary; self.progress = progress; self.version = version
    }

    /// The receipt's JSON, keys in a fixed order:
    /// {"id":"T1","status":"queued","ts":1764415001}
    public var json: String {
        var o = JSONObject()
        o.add("id", ifPresent: id)
        o.add("kind", ifPresent: kind)
        o.add("status", status.rawValue)
        if let progress { o.add("progress", progress) }
        o.add("version", ifPresent: version)
        o.add("ts", ts)
        o.add("reason", ifPresent: reason)
        if let durable { o.add("durable", durable) }
        if let summary { o.add("summary", summary) }
        return o.text
    }
}

/// A payment's change of state that the backend hears of: the one place a
/// payment's receipt is made from what happened to it (DESIGN §2
/// "Receipt"), whether the change is written to the database or held in
/// memory. (Speaking starts without a receipt: the backend hears how it ended.)
public enum PaymentTransition: Sendable, Equatable {
    /// Accepted into the queue: `queued`.
    case accepted
    /// Its id was accepted before: nothing changes, `duplicate`.
    case duplicate
    /// A final state (played, muted, expired, failed; never a pending one),
    /// with why if said; `summary` when spoken within an offline summary.
    case finished(PaymentState, reason: String?, summary: Bool = false)

    /// The receipt for payment `id`, decided at `ms` (Unix ms; receipts carry
    /// seconds); `durable` false when the change is held in memory only.
    public func receipt(id: String, at ms: Int64, durable: Bool = true) -> Receipt {
        let status: Receipt.Status
        var reason: String? = nil, summary = false
        switch self {
        case .accepted: status = .queued
        case .duplicate: status = .duplicate
        case .finished(let state, let why, let inSummary):
            switch state {
            case .queued, .playing: preconditionFailure("a payment cannot finish in the pending state \(state)")
            case .played: status = .played
            case .muted: status = .muted
            case .expired: status = .expired
            case .failed: status = .failed
            }
            reason = why
            summary = inSummary
        }
        return Receipt(id: id, status: status, ts: ms / 1000, reason: reason, durable: durable ? nil : false,
                       summary: summary ? true : nil)
    }
}

extension Receipt {
    /// A message that could not be taken (a payment, or a signed `cmd` or
    /// `config`: `kind`): `rejected` with the reason. `id` only if it is a
    /// valid payment id (a hostile one is not echoed).
    public static func rejected(id: String?, reason: String, kind: String? = nil, at ms: Int64) -> Receipt {
        Receipt(id: id.flatMap { Payment.problem(withID: $0) == nil ? $0 : nil }, status: .rejected, ts: ms / 1000,
                reason: reason, kind: kind)
    }
}
