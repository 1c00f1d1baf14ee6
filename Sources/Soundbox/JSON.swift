/// A JSON value (RFC 8259), as read by `JSONValue.parse`: a small, strict
/// parser for the MQTT payloads (docs/DESIGN.md §2).
///
/// Numbers keep their exact source text ("1.10" stays "1.10"): money is
/// never parsed through a binary floating point, so callers turn the text
/// into what they need (`Amount.parse`, a checked integer).
///
/// Objects keep their members in document order; a document with the same
/// key twice in one object is rejected. `==` compares objects member by
/// member in that order.
///
/// Not `indirect`: arrays already hold their elements out of line, and
/// boxing every scalar made parsing about twice as slow.
public enum JSONValue: Sendable, Equatable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    /// The number's exact text, valid under the JSON number grammar.
    case number(String)
    case bool(Bool)
    case null

    /// The member named `key` of an object; nil for a missing key or a value
    /// that is not an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        for (k, v) in members where k == key { return v }
        return nil
    }

    /// "an object", "a string", ...: for messages such as
    /// "amount must be a string or a number, not an array".
    public var kindDescription: String {
        switch self {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        }
    }

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case let (.object(x), .object(y)):
            guard x.count == y.count else { return false }
            for (m, n) in zip(x, y) where m.0 != n.0 || m.1 != n.1 { return false }
            return true
        case let (.array(x), .array(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.bool(x), .bool(y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    /// Parses one JSON document from UTF-8 `bytes`.
    ///
    /// Strict: no byte order mark, comments, trailing commas, single quotes,
    /// NaN/Infinity, leading zeros, raw control characters in strings, lone
    /// surrogates, duplicate keys, invalid UTF-8 or data after the value.
    /// Containers (arrays and objects) nest at most `maxDepth` levels. The
    /// parser is iterative, so hostile nesting cannot exhaust the stack.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 16) throws(JSONError) -> JSONValue {
        try parse(bytes, maxDepth: maxDepth, keeping: nil)
    }

    /// Like `parse(_:maxDepth:)`, but when `keeping` is given, only the
    /// top-level members with those keys are built: everything else is
    /// validated just as strictly, then dropped (a top-level array comes
    /// back empty). Hostile payloads full of unknown fields then cost no
    /// allocations.
    static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int, keeping: [String]?) throws(JSONError) -> JSONValue {
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            JSONParser.parse(buffer, maxDepth: maxDepth, keeping: keeping)
        }
        let result = parsed ?? Array(bytes).withUnsafeBufferPointer { JSONParser.parse($0, maxDepth: maxDepth, keeping: keeping) }
        return try result.get()
    }
}

/// Why bytes are not a JSON document: a short message for people and the
/// byte offset (from 0) where the problem was found.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var offset: Int

    public init(_ message: String, offset: Int) {
        self.message = message; self.offset = offset
    }

    /// "duplicate key 'id' at byte 40"
    public var description: String { "\(message) at byte \(offset)" }
}
