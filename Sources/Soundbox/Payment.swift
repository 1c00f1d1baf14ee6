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

    public init(id: String?, status: Status, ts: Int64, reason: String? = nil, durable: Bool? = nil, kind: String? = nil,
                summary: Bool? = nil) {
        self.id = id; self.status = status; self.ts = ts; self.reason = reason; self.durable = durable; self.kind = kind
        self.summary = summary
    }

    /// The receipt's JSON, keys in a fixed order:
    /// {"id":"T1","status":"queued","ts":1764415001}
    public var json: String {
        var o = JSONObject()
        o.add("id", ifPresent: id)
        o.add("kind", ifPresent: kind)
        o.add("status", status.rawValue)
        o.add("ts", ts)
        o.add("reason", ifPresent: reason)
        if let durable { o.add("durable", durable) }
        if let summary { o.add("summary", summary) }
        return o.text
    }
}
