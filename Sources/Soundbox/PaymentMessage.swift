/// The payment topic's message (docs/DESIGN.md §2 "Payment"): raw MQTT
/// payload bytes in, a `Payment` or a `PaymentRejection` with its reason out.
///
/// ```json
/// {"id": "T20261129-000123", "amount": "123.45", "currency": "CNY",
///  "channel": "alipay", "ts": 1764415000, "lang": "zh-CN"}
/// ```
///
/// The first problem found wins, in this order: size, JSON, top-level
/// object, `id`, amount, `currency`, `channel`, `ts`, `lang`. `id` is
/// checked first so that every later rejection carries it. An optional
/// field that is null counts as absent; so does a null `amount` or
/// `amount_minor` (the other one may then be given). Unknown fields are
/// ignored.
public enum PaymentMessage {
    public static let maxBytes = 4096
    /// The fields read; the others are validated as JSON, then ignored.
    static let fields = ["id", "amount", "amount_minor", "currency", "channel", "ts", "lang"] + Signature.envelopeFields
    /// Latest accepted `ts`: 2100-01-01T00:00:00Z.
    public static let maxTimestamp: Int64 = 4_102_444_800
    /// The reason (DESIGN §2) a payment that arrives with the retain flag is
    /// refused: a payment is an event, not a state.
    public static let retainedReason = "retained"

    /// The payment in `bytes`, or why it is rejected. `id` in the rejection is
    /// the payment's id when one could be read (a string of 1–64 printable ASCII),
    /// so the backend can match the rejected receipt.
    public static func parse(_ bytes: [UInt8], maxAmount: Amount) -> Result<Payment, PaymentRejection> {
        parseKeepingDocument(bytes, maxAmount: maxAmount).map(\.payment)
    }

    /// Like `parse(_:maxAmount:)`, with the document (its known members) for
    /// the signature check.
    public static func parseKeepingDocument(_ bytes: [UInt8], maxAmount: Amount) -> Result<(payment: Payment, document: JSONValue), PaymentRejection> {
        guard bytes.count <= maxBytes else {
            return .failure(PaymentRejection(id: nil, reason: "payload is \(bytes.count) bytes, more than \(maxBytes)"))
        }
        let document: JSONValue
        do { document = try JSONValue.parse(bytes, maxDepth: 16, keeping: fields) } catch {
            return .failure(PaymentRejection(id: nil, reason: "not valid JSON: \(error)"))
        }
        return parse(document, maxAmount: maxAmount).map { ($0, document) }
    }

    /// The payment in an already parsed document (e.g. a `say` command, which
    /// carries a payment's fields), or why it is rejected. Same rules as
    /// `parse(_:maxAmount:)` after the size and JSON checks.
    public static func parse(_ document: JSONValue, maxAmount: Amount) -> Result<Payment, PaymentRejection> {
        guard case .object(let members) = document else {
            return .failure(PaymentRejection(id: nil, reason: "payload must be a JSON object, not \(document.kindDescription)"))
        }

        var id, amount, amountMinor, currency, channel, ts, lang: JSONValue?
        for (key, value) in members {
            switch key {
            case "id": id = value
            case "amount": amount = value
            case "amount_minor": amountMinor = value
            case "currency": currency = value
            case "channel": channel = value
            case "ts": ts = value
            case "lang": lang = value
            default: break
            }
        }

        // id
        guard let id else { return .failure(PaymentRejection(id: nil, reason: "id is missing")) }
        guard case .string(let paymentID) = id else {
            return .failure(PaymentRejection(id: nil, reason: "id must be a string, not \(id.kindDescription)"))
        }
        if let problem = Payment.problem(withID: paymentID) {
            return .failure(PaymentRejection(id: nil, reason: problem))
        }
        func reject(_ reason: String) -> Result<Payment, PaymentRejection> {
            .failure(PaymentRejection(id: paymentID, reason: reason))
        }

        // amount or amount_minor
        let value: Amount
        switch (present(amount), present(amountMinor)) {
        case (.some, .some):
            return reject("give amount or amount_minor, not both")
        case (nil, nil):
            return reject("amount is missing")
        case (let given?, nil):
            let text: String
            switch given {
            case .string(let s), .number(let s): text = s
            default: return reject("amount must be a string or a number, not \(given.kindDescription)")
            }
            do { value = try Amount.parse(text, max: maxAmount) } catch {
                return reject(error.description)   // "amount is negative", ...: already names the field
            }
        case (nil, let given?):
            // An integer, as DESIGN §2 says: a string here is a backend bug
            // (which unit did it mean?), not something to guess at.
            guard case .number(let text) = given else {
                return reject("amount_minor must be an integer number of minor units (e.g. 12345 for 123.45), not \(given.kindDescription)")
            }
            do { value = try Amount.parseMinorUnits(text, max: maxAmount) } catch {
                return reject("amount_minor: \(error.description)")
            }
        }
        var payment = Payment(id: paymentID, amount: value)

        // currency
        if let currency = present(currency) {
            guard case .string(let code) = currency else {
                return reject("currency must be a string, not \(currency.kindDescription)")
            }
            guard code.utf8.count == 3, code.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
                return reject("currency must be 3 uppercase letters (ISO 4217, e.g. CNY)\(notShown(code))")
            }
            payment.currency = code
        }

        // channel
        if let channel = present(channel) {
            guard case .string(let name) = channel else {
                return reject("channel must be a string, not \(channel.kindDescription)")
            }
            payment.channel = Channel(name: name)
        }

        // ts
        if let ts = present(ts) {
            guard case .number(let text) = ts else {
                return reject("ts must be a number (Unix seconds), not \(ts.kindDescription)")
            }
            guard let seconds = timestamp(text) else {
                return reject("ts must be a whole number of seconds, without fraction or exponent, not \(text.prefix(32))")
            }
            guard seconds >= 0 && seconds <= maxTimestamp else {
                return reject("ts must be between 0 and \(maxTimestamp), not \(text.prefix(32))")
            }
            payment.ts = seconds
        }

        // lang
        if let lang = present(lang) {
            guard case .string(let code) = lang else {
                return reject("lang must be a string, not \(lang.kindDescription)")
            }
            guard (1...16).contains(code.utf8.count), code.utf8.allSatisfy(isLangByte) else {
                return reject("lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN)\(notShown(code))")
            }
            payment.lang = code
        }

        return .success(payment)
    }

    /// The value unless it is missing or null.
    private static func present(_ v: JSONValue?) -> JSONValue? {
        if case .null? = v { return nil }
        return v
    }

    /// A JSON number's text as a whole number, clamped outside Int64's
    /// reach (the caller checks the range); nil for a fraction or exponent.
    private static func timestamp(_ text: String) -> Int64? {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        // JSON numbers have no leading zeros: more than 18 digits is out of range.
        guard digits.utf8.count <= 18 else { return negative ? Int64.min : Int64.max }
        let magnitude = Int64(digits)!
        return negative ? -magnitude : magnitude
    }

    private static func isLangByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): true
        default: false
        }
    }

    /// ", not 'cny'" when the value is short printable ASCII, else "".
    private static func notShown(_ s: String) -> String {
        guard !s.isEmpty, s.utf8.count <= 32, s.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "" }
        return ", not '\(s)'"
    }
}

/// Why a payment message was rejected: the `rejected` receipt's reason, with
/// the payment's id when one could be read.
public struct PaymentRejection: Error, Sendable, Equatable {
    public var id: String?
    public var reason: String

    public init(id: String?, reason: String) {
        self.id = id; self.reason = reason
    }
}
