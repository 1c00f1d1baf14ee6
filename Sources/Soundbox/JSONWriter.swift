/// Builds one JSON object, members in the order they are added: the one
/// writer for everything the device publishes (receipts, status,
/// config/applied), so quoting and escaping live in one place.
///
///     var o = JSONObject()
///     o.add("id", "T1"); o.add("ts", 1764415001)
///     o.text   // {"id":"T1","ts":1764415001}
public struct JSONObject: Sendable, Equatable {
    private var body = ""

    public init() {}

    public mutating func add(_ key: String, _ value: String) { member(key, JSONText.quote(value)) }
    public mutating func add(_ key: String, _ value: Int) { member(key, String(value)) }
    public mutating func add(_ key: String, _ value: Int64) { member(key, String(value)) }
    public mutating func add(_ key: String, _ value: Bool) { member(key, value ? "true" : "false") }
    public mutating func add(_ key: String, _ values: [String]) {
        member(key, "[" + values.map(JSONText.quote).joined(separator: ",") + "]")
    }
    public mutating func add(_ key: String, _ object: JSONObject) { member(key, object.text) }
    /// A measurement (a level in dB, not money: amounts are integers of
    /// minor units), as Swift writes a Double: -18.2.
    public mutating func add(_ key: String, decimal value: Double) { member(key, value.isFinite ? String(value) : "null") }

    /// Adds the member only when `value` is non-nil.
    public mutating func add(_ key: String, ifPresent value: String?) { if let value { add(key, value) } }

    /// An object of string members, in the given order.
    public init(_ pairs: [(String, String)]) {
        for (k, v) in pairs { add(k, v) }
    }

    private mutating func member(_ key: String, _ json: String) {
        if !body.isEmpty { body += "," }
        body += JSONText.quote(key) + ":" + json
    }

    public var text: String { "{" + body + "}" }
}

public enum JSONText {
    /// A JSON string literal for `s`: quotes, backslashes and control
    /// characters escaped; everything else as UTF-8.
    public static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20 || u.value == 0x7F:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }
}

extension JSONValue {
    /// Compact JSON text (numbers as their source text, members in order).
    public var text: String {
        switch self {
        case .object(let members): "{" + members.map { JSONText.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
        case .string(let s): JSONText.quote(s)
        case .number(let n): n
        case .bool(let b): b ? "true" : "false"
        case .null: "null"
        }
    }
}
