// ~560 lines on purpose: one parser (and its two helper types) for every
// hostile byte from the broker, kept whole so its bounds read together.
//
// JSONValue.parse's strict, non-recursive parser (JSON.swift says what it accepts).

private let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")

/// One open container while parsing. Its values (and keys) so far sit at
/// the end of the parser's shared `values` (and `keys`) stacks, from
/// `start` (`keyStart`) on: no recursion, one allocation per container.
private struct OpenContainer {
    var isObject: Bool
    var start: Int
    var keyStart: Int
    /// All keys, once the object is too big for a linear duplicate check.
    var keyTable: KeyTable? = nil
}

/// The keys of one big object, for the duplicate check: open addressing
/// over indices into the parser's `keys`, with a cheap hash seeded once
/// per process (much faster than `Set<String>`, whose SipHash dominated
/// objects with hundreds of short keys).
private struct KeyTable {
    private struct Slot { var hash: UInt64 = 0; var index: Int32 = -1 }
    private var slots = [Slot](repeating: Slot(), count: 64)
    private var count = 0

    /// Adds `keys[index]`; false if an equal key is already there.
    mutating func insert(_ index: Int, of keys: [String]) -> Bool {
        if (count + 1) * 2 > slots.count { grow() }
        let hash = Self.hash(keys[index])
        let mask = slots.count - 1
        var s = Int(truncatingIfNeeded: hash) & mask
        while slots[s].index >= 0 {
            if slots[s].hash == hash && keys[Int(slots[s].index)] == keys[index] { return false }
            s = (s + 1) & mask
        }
        slots[s] = Slot(hash: hash, index: Int32(truncatingIfNeeded: index))
        count += 1
        return true
    }

    private mutating func grow() {
        let old = slots
        slots = [Slot](repeating: Slot(), count: old.count * 2)
        let mask = slots.count - 1
        for slot in old where slot.index >= 0 {
            var s = Int(truncatingIfNeeded: slot.hash) & mask
            while slots[s].index >= 0 { s = (s + 1) & mask }
            slots[s] = slot
        }
    }

    private static let seed = UInt64.random(in: .min ... .max)

    private static func hash(_ key: String) -> UInt64 {
        var key = key
        var h = seed ^ UInt64(truncatingIfNeeded: key.utf8.count)
        key.withUTF8 { bytes in
            // 8 bytes at a time, then the rest.
            var k = 0
            while k + 8 <= bytes.count {
                h = (h ^ UnsafeRawBufferPointer(bytes).loadUnaligned(fromByteOffset: k, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15
                h ^= h >> 29
                k += 8
            }
            while k < bytes.count {
                h = (h ^ UInt64(bytes[k])) &* 0x0000_0100_0000_01B3
                k += 1
            }
        }
        // fmix64 (MurmurHash3): every bit of h reaches the low bits used.
        h ^= h >> 33; h &*= 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33; h &*= 0xC4CE_B9FE_1A85_EC53
        return h ^ h >> 33
    }
}

struct JSONParser {
    let p: UnsafeBufferPointer<UInt8>
    let end: Int
    let maxDepth: Int
    var i = 0
    private var stack: [OpenContainer] = []
    /// Values of the open containers, innermost last.
    var values: [JSONValue] = []
    /// Keys of the open objects, innermost last; an object has one more key
    /// than values while its last member's value is being read.
    var keys: [String] = []
    /// Reused for strings that hold escapes.
    var scratch: [UInt8] = []
    /// The top-level keys whose values are built; nil: build everything.
    let keeping: [String]?
    /// Values read now are validated, not built (see `keeping`).
    var discarding = false
    /// The top-level members kept (see `keeping`).
    var kept: [(String, JSONValue)] = []

    init(p: UnsafeBufferPointer<UInt8>, maxDepth: Int, keeping: [String]?) {
        self.p = p; end = p.count; self.maxDepth = maxDepth; self.keeping = keeping
    }

    static func parse(_ p: UnsafeBufferPointer<UInt8>, maxDepth: Int, keeping: [String]?) -> Result<JSONValue, JSONError> {
        var parser = JSONParser(p: p, maxDepth: maxDepth, keeping: keeping)
        do { return .success(try parser.document()) } catch { return .failure(error) }
    }

    mutating func document() throws(JSONError) -> JSONValue {
        if end >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF {
            throw JSONError("starts with a byte order mark, which JSON does not allow", offset: 0)
        }
        skipWhitespace()
        guard i < end else { throw JSONError("no JSON value: the input is empty", offset: i) }
        discarding = keeping != nil && p[i] != UInt8(ascii: "{")
        let value = try valueTree()
        skipWhitespace()
        if i < end { throw unexpected("the end of the input after the JSON value") }
        return value
    }

    // MARK: Values

    /// Reads one value, however deeply nested, without recursion.
    mutating func valueTree() throws(JSONError) -> JSONValue {
        readValue: while true {
            skipWhitespace()
            var value: JSONValue
            guard i < end else { throw unexpected("a value") }
            switch p[i] {
            case UInt8(ascii: "{"):
                try enterContainer()
                i += 1
                skipWhitespace()
                if i < end && p[i] == UInt8(ascii: "}") {
                    i += 1
                    value = .object([])
                } else {
                    stack.append(OpenContainer(isObject: true, start: values.count, keyStart: keys.count))
                    try readKey()
                    continue readValue
                }
            case UInt8(ascii: "["):
                try enterContainer()
                i += 1
                skipWhitespace()
                if i < end && p[i] == UInt8(ascii: "]") {
                    i += 1
                    value = .array([])
                } else {
                    stack.append(OpenContainer(isObject: false, start: values.count, keyStart: keys.count))
                    continue readValue
                }
            case quote: value = .string(try string(building: !discarding))
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): value = try number(building: !discarding)
            default: value = try literal()
            }

            // A value is complete: add it to its container, closing
            // containers as long as they end here.
            while !stack.isEmpty {
                if keeping != nil && stack.count == 1 && stack[0].isObject {
                    if !discarding { kept.append((keys[keys.count - 1], value)) }
                } else if !discarding {
                    values.append(consume value)
                }
                skipWhitespace()
                if stack[stack.count - 1].isObject {
                    if i < end && p[i] == UInt8(ascii: ",") {
                        i += 1
                        try readKey()
                        continue readValue
                    }
                    guard i < end && p[i] == UInt8(ascii: "}") else {
                        throw unexpected("',' or '}' after an object member")
                    }
                    i += 1
                    if keeping != nil && (discarding || stack.count == 1) {
                        keys.removeLast(keys.count - stack.removeLast().keyStart)
                        value = .object(stack.isEmpty ? kept : [])
                    } else {
                        value = .object(closeObject())
                    }
                } else {
                    if i < end && p[i] == UInt8(ascii: ",") {
                        i += 1
                        skipWhitespace()
                        if i < end && p[i] == UInt8(ascii: "]") {
                            throw JSONError("trailing comma before ']'", offset: i)
                        }
                        continue readValue
                    }
                    guard i < end && p[i] == UInt8(ascii: "]") else {
                        throw unexpected("',' or ']' after an array element")
                    }
                    i += 1
                    if discarding {
                        stack.removeLast()
                        value = .array([])
                    } else {
                        value = .array(closeArray())
                    }
                }
            }
            return value
        }
    }

    /// Pops the innermost container, an array: its values, moved (not
    /// copied) out of the shared stack.
    mutating func closeArray() -> [JSONValue] {
        let start = stack.removeLast().start
        let n = values.count - start
        guard n > 0 else { return [] }
        let items = [JSONValue](unsafeUninitializedCapacity: n) { buffer, count in
            values.withUnsafeMutableBufferPointer { source in
                let from = source.baseAddress! + start
                buffer.baseAddress!.moveInitialize(from: from, count: n)
                from.initialize(repeating: .null, count: n)  // nothing left to release
            }
            count = n
        }
        values.removeLast(n)
        return items
    }

    /// Pops the innermost container, an object: its members, moved out of
    /// the shared stacks.
    mutating func closeObject() -> [(String, JSONValue)] {
        let top = stack.removeLast()
        let n = values.count - top.start
        guard n > 0 else { keys.removeLast(keys.count - top.keyStart); return [] }
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(n)
        keys.withUnsafeMutableBufferPointer { k in
            values.withUnsafeMutableBufferPointer { v in
                for j in 0..<n {
                    members.append(((k.baseAddress! + top.keyStart + j).move(), (v.baseAddress! + top.start + j).move()))
                }
                (k.baseAddress! + top.keyStart).initialize(repeating: "", count: n)
                (v.baseAddress! + top.start).initialize(repeating: .null, count: n)
            }
        }
        keys.removeLast(n)
        values.removeLast(n)
        return members
    }

    /// Whether `key` is one of the few kept: cheaper than hashing it.
    func keeps(_ key: String, _ keeping: [String]) -> Bool {
        let n = key.utf8.count
        return keeping.contains { $0.utf8.count == n && $0 == key }
    }

    func enterContainer() throws(JSONError) {
        guard stack.count < maxDepth else {
            throw JSONError("nested deeper than \(maxDepth) levels", offset: i)
        }
    }

    /// Reads `"key" :` for the innermost (object) container.
    mutating func readKey() throws(JSONError) {
        skipWhitespace()
        guard i < end && p[i] == quote else {
            if i < end && p[i] == UInt8(ascii: "}") { throw JSONError("trailing comma before '}'", offset: i) }
            if i < end && p[i] == UInt8(ascii: "'") { throw JSONError("strings must be in double quotes", offset: i) }
            throw unexpected("a string key")
        }
        let at = i
        let key = try string(building: true)
        let top = stack.count - 1
        let keyStart = stack[top].keyStart
        if keys.count - keyStart < 16 {
            for k in keys[keyStart...] where k == key { throw duplicate(key, at) }
            keys.append(key)
        } else {
            if stack[top].keyTable == nil {
                var table = KeyTable()
                for k in keyStart..<keys.count { _ = table.insert(k, of: keys) }
                stack[top].keyTable = table
            }
            keys.append(key)
            guard stack[top].keyTable!.insert(keys.count - 1, of: keys) else { throw duplicate(key, at) }
        }
        if top == 0, let keeping { discarding = !keeps(key, keeping) }
        skipWhitespace()
        guard i < end && p[i] == UInt8(ascii: ":") else { throw unexpected("':' after the key '\(shown(key))'") }
        i += 1
    }

    func duplicate(_ key: String, _ at: Int) -> JSONError {
        JSONError("duplicate key '\(shown(key))'", offset: at)
    }

    // MARK: Strings

    /// Reads a string starting at its opening quote; "" unless `building`.
    mutating func string(building: Bool) throws(JSONError) -> String {
        let open = i
        i += 1
        let start = i
        // Fast path: no escapes, the string is a slice of the input.
        while i < end {
            let b = p[i]
            if b == quote {
                let s = building ? String(decoding: UnsafeBufferPointer(rebasing: p[start..<i]), as: UTF8.self) : ""
                i += 1
                return s
            }
            if b == backslash { break }
            if b < 0x20 { throw controlCharacter(b) }
            i = b < 0x80 ? i + 1 : try utf8Sequence()
        }
        guard i < end else { throw JSONError("unterminated string", offset: open) }

        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: p[start..<i]))
        while i < end {
            let b = p[i]
            if b == quote {
                i += 1
                return building ? String(decoding: scratch, as: UTF8.self) : ""
            }
            if b == backslash {
                try escape(open: open)
            } else if b < 0x20 {
                throw controlCharacter(b)
            } else if b < 0x80 {
                scratch.append(b)
                i += 1
            } else {
                let next = try utf8Sequence()
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: p[i..<next]))
                i = next
            }
        }
        throw JSONError("unterminated string", offset: open)
    }

    /// Reads one escape (at its backslash) into `scratch`; `open` is the
    /// string's opening quote.
    mutating func escape(open: Int) throws(JSONError) {
        let at = i
        guard i + 1 < end else { throw JSONError("unterminated string", offset: open) }
        let c = p[i + 1]
        i += 2
        switch c {
        case quote, backslash, UInt8(ascii: "/"): scratch.append(c)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4(at: at)
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                guard i + 1 < end && p[i] == backslash && p[i + 1] == UInt8(ascii: "u") else {
                    throw loneSurrogate(scalar, at)
                }
                let lowAt = i
                i += 2
                let low = try hex4(at: lowAt)
                guard low >= 0xDC00 && low <= 0xDFFF else { throw loneSurrogate(scalar, at) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw loneSurrogate(scalar, at)
            }
            appendUTF8(scalar)
        case 0x21..<0x7F:
            throw JSONError("invalid escape '\\\(Character(Unicode.Scalar(c)))' in a string", offset: at)
        default:
            if c >= 0x80 && utf8Length(at: at + 1) == nil { throw JSONError("invalid UTF-8", offset: at + 1) }
            throw JSONError("invalid escape: '\\' followed by \(describe(c, at: at + 1))", offset: at)
        }
    }

    /// The 4 hex digits after "\u" (which starts at `at`); `i` is after "\u".
    mutating func hex4(at: Int) throws(JSONError) -> UInt32 {
        guard i + 4 <= end else { throw JSONError("\\u must be followed by 4 hex digits", offset: at) }
        var v: UInt32 = 0
        for k in 0..<4 {
            let b = p[i + k]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw JSONError("\\u must be followed by 4 hex digits", offset: at)
            }
            v = v << 4 | UInt32(d)
        }
        i += 4
        return v
    }

    func loneSurrogate(_ v: UInt32, _ at: Int) -> JSONError {
        JSONError("lone surrogate \\u\(hex(v)) in a string", offset: at)
    }

    mutating func appendUTF8(_ v: UInt32) {
        switch v {
        case 0..<0x80:
            scratch.append(UInt8(v))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | v >> 6)); scratch.append(UInt8(0x80 | v & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | v >> 12)); scratch.append(UInt8(0x80 | v >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | v & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | v >> 18)); scratch.append(UInt8(0x80 | v >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | v >> 6 & 0x3F)); scratch.append(UInt8(0x80 | v & 0x3F))
        }
    }

    func controlCharacter(_ b: UInt8) -> JSONError {
        JSONError("control character U+00\(hex(UInt32(b)).suffix(2)) in a string must be escaped", offset: i)
    }

    /// The end of the valid UTF-8 sequence of a non-ASCII byte at `i`, or
    /// an "invalid UTF-8" error.
    func utf8Sequence() throws(JSONError) -> Int {
        guard let n = utf8Length(at: i) else { throw JSONError("invalid UTF-8", offset: i) }
        return i + n
    }

    /// The length of the well-formed UTF-8 sequence at `at` (RFC 3629: no
    /// overlong forms, no surrogates, nothing above U+10FFFF), or nil.
    func utf8Length(at: Int) -> Int? {
        let b0 = p[at]
        func cont(_ k: Int, _ lo: UInt8 = 0x80, _ hi: UInt8 = 0xBF) -> Bool {
            at + k < end && p[at + k] >= lo && p[at + k] <= hi
        }
        switch b0 {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: return cont(1) ? 2 : nil
        case 0xE0: return cont(1, 0xA0) && cont(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF: return cont(1) && cont(2) ? 3 : nil
        case 0xED: return cont(1, 0x80, 0x9F) && cont(2) ? 3 : nil
        case 0xF0: return cont(1, 0x90) && cont(2) && cont(3) ? 4 : nil
        case 0xF1...0xF3: return cont(1) && cont(2) && cont(3) ? 4 : nil
        case 0xF4: return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : nil
        default: return nil
        }
    }

    // MARK: Numbers and literals

    /// Reads a number (at '-' or a digit), keeping its text.
    mutating func number(building: Bool) throws(JSONError) -> JSONValue {
        let start = i
        if p[i] == UInt8(ascii: "-") {
            i += 1
            if i < end && isLetter(p[i]) { throw wordError(start: start) }
        }
        guard i < end && isDigit(p[i]) else { throw JSONError("expected a digit after '-'", offset: i) }
        if p[i] == UInt8(ascii: "0") {
            i += 1
            if i < end && isDigit(p[i]) { throw JSONError("numbers must not have leading zeros", offset: start) }
        } else {
            while i < end && isDigit(p[i]) { i += 1 }
        }
        if i < end && p[i] == UInt8(ascii: ".") {
            i += 1
            guard i < end && isDigit(p[i]) else { throw JSONError("expected a digit after the decimal point", offset: i) }
            while i < end && isDigit(p[i]) { i += 1 }
        }
        if i < end && (p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E")) {
            i += 1
            if i < end && (p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < end && isDigit(p[i]) else { throw JSONError("expected a digit in the exponent", offset: i) }
            while i < end && isDigit(p[i]) { i += 1 }
        }
        return .number(building ? String(decoding: UnsafeBufferPointer(rebasing: p[start..<i]), as: UTF8.self) : "")
    }

    /// Reads true, false or null, or says what else was found where a value
    /// was expected.
    mutating func literal() throws(JSONError) -> JSONValue {
        let start = i
        let b = p[i]
        if isLetter(b) {
            while i < end && isLetter(p[i]) { i += 1 }
            switch UnsafeBufferPointer(rebasing: p[start..<i]) {
            case let w where w.elementsEqual("true".utf8): return .bool(true)
            case let w where w.elementsEqual("false".utf8): return .bool(false)
            case let w where w.elementsEqual("null".utf8): return .null
            default: throw wordError(start: start)
            }
        }
        switch b {
        case UInt8(ascii: "+"):
            if i + 1 < end && isLetter(p[i + 1]) { throw wordError(start: start) }
            throw JSONError("numbers must not start with '+'", offset: i)
        case UInt8(ascii: "."):
            throw JSONError("numbers must start with a digit (0.5, not .5)", offset: i)
        case UInt8(ascii: "'"):
            throw JSONError("strings must be in double quotes", offset: i)
        case UInt8(ascii: "/"):
            throw JSONError("comments are not allowed in JSON", offset: i)
        default:
            throw unexpected("a value")
        }
    }

    /// The error for a word (after an optional sign) at `start` that is not
    /// a JSON literal.
    func wordError(start: Int) -> JSONError {
        var k = start
        if p[k] == UInt8(ascii: "-") || p[k] == UInt8(ascii: "+") { k += 1 }
        let from = k
        while k < end && isLetter(p[k]) && k - from < 32 { k += 1 }
        let word = String(decoding: UnsafeBufferPointer(rebasing: p[from..<k]), as: UTF8.self)
        switch word.lowercased() {
        case "nan", "inf", "infinity": return JSONError("NaN and Infinity are not JSON", offset: start)
        default: return JSONError("unknown word '\(word)'; JSON has only true, false and null", offset: start)
        }
    }

    // MARK: Helpers

    mutating func skipWhitespace() {
        while i < end {
            switch p[i] {
            case 0x20, 0x0A, 0x0D, 0x09: i += 1
            default: return
            }
        }
    }

    func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }
    func isLetter(_ b: UInt8) -> Bool { (b | 0x20) &- UInt8(ascii: "a") < 26 }

    /// "expected X, found Y" at `i` (or invalid UTF-8, or the end).
    func unexpected(_ expected: String) -> JSONError {
        guard i < end else { return JSONError("unexpected end of input; expected \(expected)", offset: i) }
        if p[i] >= 0x80 && utf8Length(at: i) == nil { return JSONError("invalid UTF-8", offset: i) }
        return JSONError("expected \(expected), found \(describe(p[i], at: i))", offset: i)
    }

    /// A byte for messages: 'x', a character, or "byte 0x01".
    func describe(_ b: UInt8, at: Int) -> String {
        if b >= 0x20 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        if b >= 0x80, let n = utf8Length(at: at) {
            return "'" + String(decoding: UnsafeBufferPointer(rebasing: p[at..<at + n]), as: UTF8.self) + "'"
        }
        return "byte 0x\(hex(UInt32(b)).suffix(2))"
    }

    func hex(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    /// A key as shown in messages: at most 40 characters, controls as '?'.
    func shown(_ key: String) -> String {
        var out = ""
        for (n, u) in key.unicodeScalars.enumerated() {
            if n == 40 { out += "…"; break }
            out.unicodeScalars.append(u.value < 0x20 || u.value == 0x7F ? "?" : u)
        }
        return out
    }
}
