/// One log line as soundboxd writes it (docs/soundboxd.md "Logs"):
/// `<6>queue: played id=T1 seq=4`. The `<N>` prefix is the syslog priority
/// journald reads; the event and keys are fixed words from the code; values
/// come from anywhere (a payment's id, a broker's error) and are written so
/// that no value can forge a line, hide text or be read two ways:
///
/// - a value of printable characters without space, `"`, `=` or `\` is
///   written as is;
/// - anything else is quoted: `"` + the value + `"`, with `\"` and `\\`,
///   `\n`, `\r`, `\t`, and every other control or invisible formatting
///   character (C0, DEL, C1, zero-width characters, line/paragraph
///   separators, bidirectional overrides, isolates and marks, the byte
///   order mark) as `\u{XXXX}`; the empty value is `""`.
///
/// `parse` reads a line back exactly (tests rely on it).
public enum LogLine {
    public static func format(priority: Int, subsystem: String, event: String, fields: KeyValuePairs<String, String>) -> String {
        var line = "<\(priority)>\(subsystem): \(event)"
        for (k, v) in fields { line += " " + k + "=" + quoted(v) }
        return line
    }

    /// The value as written in a line.
    public static func quoted(_ value: String) -> String {
        if !value.isEmpty && value.unicodeScalars.allSatisfy(isPlain) { return value }
        return "\"" + escaped(value, quotes: true) + "\""
    }

    /// The one escaper of text from elsewhere shown to people (log values,
    /// control socket replies): `\` as `\\`, newline, return and tab as
    /// `\n`, `\r`, `\t`, every other hidden character (`isHidden`) as
    /// `\u{XXXX}`; with `quotes` (a quoted log value), `"` as `\"`.
    /// Everything else, spaces and any script, stays as it is.
    public static func escaped(_ value: String, quotes: Bool = false) -> String {
        var out = ""
        for u in value.unicodeScalars {
            switch u {
            case "\"" where quotes: out += "\\\""
            case "\\": out += "\\\\"
            default: appendVisible(u, to: &out)
            }
        }
        return out
    }

    /// `u` as a reader can see it: `\n`, `\r`, `\t`, `\u{XXXX}` for every
    /// other hidden character (`isHidden`), else `u` itself. For any
    /// message that quotes user text (`TextFile.excerpt`).
    public static func appendVisible(_ u: Unicode.Scalar, to out: inout String) {
        switch u {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where isHidden(u): out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
        default: out.unicodeScalars.append(u)
        }
    }

    /// Characters that must never reach a log raw: controls (C0, DEL, C1),
    /// and the invisible ones that reorder or break what a reader sees:
    /// the Arabic letter mark U+061C, zero-width spaces and joiners and the
    /// LRM/RLM marks U+200B-200F, line and paragraph separators and the
    /// embeddings and overrides U+2028-202E, the word joiner, invisible
    /// operators and the isolates U+2060-206F, the byte order mark U+FEFF
    /// and the interlinear annotations U+FFF9-FFFB.
    static func isHidden(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200B...0x200F, 0x2028...0x202E, 0x2060...0x206F, 0xFEFF, 0xFFF9...0xFFFB: true
        default: false
        }
    }

    private static func isPlain(_ u: Unicode.Scalar) -> Bool {
        !isHidden(u) && u != " " && u != "\"" && u != "=" && u != "\\" && u.properties.generalCategory != .spaceSeparator
    }

    /// A parsed line.
    public struct Parsed: Equatable, Sendable {
        public var priority: Int
        public var subsystem: String
        public var event: String
        public var fields: [(key: String, value: String)]

        public subscript(key: String) -> String? { fields.first { $0.key == key }?.value }

        public static func == (a: Parsed, b: Parsed) -> Bool {
            a.priority == b.priority && a.subsystem == b.subsystem && a.event == b.event
                && a.fields.map(\.key) == b.fields.map(\.key) && a.fields.map(\.value) == b.fields.map(\.value)
        }
    }

    /// Reads a line written by `format`; nil if it is not one.
    public static func parse(_ line: Substring) -> Parsed? {
        var s = line.unicodeScalars[...]
        guard s.first == "<", let close = s.firstIndex(of: ">"), let priority = Int(String(s[s.index(after: s.startIndex)..<close])) else { return nil }
        s = s[s.index(after: close)...]
        guard let colon = s.firstIndex(of: ":") else { return nil }
        let subsystem = String(s[..<colon])
        s = s[s.index(after: colon)...]
        guard s.first == " " else { return nil }
        s = s.dropFirst()
        let eventEnd = s.firstIndex(of: " ") ?? s.endIndex
        let event = String(s[..<eventEnd])
        s = s[eventEnd...]
        var fields: [(String, String)] = []
        while !s.isEmpty {
            guard s.first == " " else { return nil }
            s = s.dropFirst()
            guard let eq = s.firstIndex(of: "=") else { return nil }
            let key = String(s[..<eq])
            s = s[s.index(after: eq)...]
            var value = ""
            if s.first == "\"" {
                s = s.dropFirst()
                var closed = false
                while let u = s.popFirst() {
                    if u == "\"" { closed = true; break }
                    guard u == "\\" else { value.unicodeScalars.append(u); continue }
                    switch s.popFirst() {
                    case "\""?: value += "\""
                    case "\\"?: value += "\\"
                    case "n"?: value += "\n"
                    case "r"?: value += "\r"
                    case "t"?: value += "\t"
                    case "u"?:
                        guard s.popFirst() == "{", let end = s.firstIndex(of: "}"),
                              let n = UInt32(String(s[..<end]), radix: 16), let scalar = Unicode.Scalar(n) else { return nil }
                        value.unicodeScalars.append(scalar)
                        s = s[s.index(after: end)...]
                    default: return nil
                    }
                }
                guard closed else { return nil }
            } else {
                let end = s.firstIndex(of: " ") ?? s.endIndex
                value = String(s[..<end])
                s = s[end...]
            }
            fields.append((key, value))
        }
        return Parsed(priority: priority, subsystem: subsystem, event: event, fields: fields)
    }
}
