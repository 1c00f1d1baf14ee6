/// The control socket's line protocol, in the spirit of MPD's
/// (docs/control-protocol.md):
///
///     S: OK SOUNDBOX 0.1.0
///     C: say 12.50 --id "T 1"
///     S: id: T 1
///     S: status: queued
///     S: OK
///     C: replay nope
///     S: ACK [50@0] {replay} no payment with id 'nope'
///
/// A request is one line of space-separated arguments; an argument with
/// spaces or quotes is double-quoted with `\"` and `\\` escapes. A reply is
/// `key: value` lines then `OK`, or one `ACK` line. Lists repeat a record's
/// first key (`id`, `check`) at the start of each record. Values and the
/// ACK's command and message are escaped (`value`): a reply never holds a
/// control character. A request line must be UTF-8 (the server says
/// `notUTF8` otherwise).
public enum ControlProtocol {
    public static let greetingPrefix = "OK SOUNDBOX "
    /// Longest request line accepted, in bytes.
    public static let maxLine = 4096
    /// The reply to a request line that is not valid UTF-8 (the connection stays).
    public static let notUTF8 = ControlAck(.arg, command: "", "request is not valid UTF-8")

    // The codec works on Unicode scalars, not Characters: a space or quote
    // followed by a combining mark is one Character, and "\r\n" is one too.

    /// Splits a request line into arguments.
    public static func tokenize(_ line: String) throws(ControlAck) -> [String] {
        var args: [String] = []
        var current = String.UnicodeScalarView()
        var inQuotes = false, escaped = false, started = false
        for c in line.unicodeScalars {
            if escaped { current.append(c); escaped = false; continue }
            switch c {
            case "\\" where inQuotes: escaped = true
            case "\"":
                inQuotes.toggle()
                started = true
            // (`where` binds to one pattern only, so each needs its own.)
            case " " where !inQuotes, "\t" where !inQuotes:
                if started { args.append(String(current)) }
                current = String.UnicodeScalarView()
                started = false
            default:
                current.append(c)
                started = true
            }
        }
        if inQuotes || escaped { throw ControlAck(.arg, command: "", "unterminated quoted argument") }
        if started { args.append(String(current)) }
        return args
    }

    /// One argument as it must be written on a request line.
    public static func quote(_ arg: String) -> String {
        let plain = !arg.isEmpty && !arg.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "\\" || $0 == "\t" }
        if plain { return arg }
        var out = String.UnicodeScalarView()
        out.append("\"")
        for c in arg.unicodeScalars {
            if c == "\"" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        out.append("\"")
        return String(out)
    }

    public static func requestLine(_ args: [String]) -> String { args.map(quote).joined(separator: " ") }

    /// A reply value as sent: on one line, with no control or invisible
    /// character raw (a raw client's terminal must not run an id's ESC [2J),
    /// escaped as log values are (`LogLine.escaped`: `\\`, `\n`, `\u{1B}` ...).
    public static func value(_ s: String) -> String { LogLine.escaped(s) }
}

/// A reply's `key: value` pairs, in order.
public struct ControlReply: Sendable, Equatable {
    public var pairs: [(key: String, value: String)] = []
    public init() {}

    public mutating func add(_ key: String, _ value: String) { pairs.append((key, ControlProtocol.value(value))) }
    public mutating func add(_ key: String, _ value: some CustomStringConvertible) { add(key, value.description) }

    public subscript(key: String) -> String? { pairs.first { $0.key == key }?.value }

    /// Splits a list reply into records, each starting at `first`.
    public func records(startingWith first: String) -> [[(key: String, value: String)]] {
        var out: [[(key: String, value: String)]] = []
        for p in pairs {
            if p.key == first || out.isEmpty { out.append([]) }
            out[out.count - 1].append(p)
        }
        return out
    }

    /// The text of the reply, ending with "OK\n".
    public var text: String { pairs.map { "\($0.key): \($0.value)\n" }.joined() + "OK\n" }

    /// Parses one `key: value` line.
    public static func pair(_ line: String) -> (key: String, value: String)? {
        let s = line.unicodeScalars  // a value may start with a combining mark
        guard let colon = s.firstIndex(of: ":"), s[s.index(after: colon)...].first == " " else { return nil }
        return (String(s[..<colon]), String(s[s.index(colon, offsetBy: 2)...]))
    }

    public static func == (a: ControlReply, b: ControlReply) -> Bool {
        a.pairs.map(\.key) == b.pairs.map(\.key) && a.pairs.map(\.value) == b.pairs.map(\.value)
    }
}

/// An error reply: `ACK [code@0] {command} message`.
public struct ControlAck: Error, Sendable, Equatable, CustomStringConvertible {
    /// MPD's codes where one fits.
    public enum Code: Int, Sendable {
        case arg = 2, permission = 4, unknown = 5, noExist = 50, system = 52
    }
    public var code: Code
    public var command: String
    public var message: String

    public init(_ code: Code, command: String, _ message: String) {
        self.code = code; self.command = command; self.message = message
    }

    public var line: String { "ACK [\(code.rawValue)@0] {\(ControlProtocol.value(command))} \(ControlProtocol.value(message))\n" }
    public var description: String { message }

    /// Parses an ACK line, or nil if it is not one.
    public static func parse(_ line: String) -> ControlAck? {
        guard line.hasPrefix("ACK ["), let at = line.firstIndex(of: "@"),
              let code = Int(line[line.index(line.startIndex, offsetBy: 5)..<at]),
              let open = line.firstIndex(of: "{"), let close = line.firstIndex(of: "}") else { return nil }
        let message = line[line.index(after: close)...].drop { $0 == " " }
        return ControlAck(Code(rawValue: code) ?? .system, command: String(line[line.index(after: open)..<close]), String(message))
    }
}
