/// Which devices a fleet command acts on (docs/fleet.md "Selectors").
/// Names (ids, globs such as `shop-12*`, `@FILE` with one id per line) are
/// alternatives: a device matches when any name does (no names: every
/// device). Attributes (`--fault`, `--version`, `--offline-for`, …) must
/// all hold. Pure: the file is read by the caller's closure.
import Soundbox

public struct Selector: Sendable, Equatable {
    public enum Name: Sendable, Equatable {
        case id(String)
        case glob(String)
        /// `@FILE`: its ids are in `ids`.
        case file(String)
    }
    public var names: [Name] = []
    /// Ids read from `@FILE` names (a Set: 10,000 of them are looked up per device).
    public var ids: Set<String> = []
    public var fault: String?
    public var version: VersionTest?
    public var offlineFor: Int64?
    public var online: Bool?
    public var voice: String?
    public var slot: String?
    public var updateState: String?

    public init() {}

    /// The ids named one by one (plain and from files): a broker that keeps
    /// retained messages only for exact subscriptions (RabbitMQ 3.10) shows
    /// these devices' statuses to a subscription of each own topic.
    public var named: [String] {
        var out = ids
        for case .id(let id) in names { out.insert(id) }
        return out.sorted()
    }

    /// `<0.3.0`, `<=0.3.0`, `>0.3.0`, `>=0.3.0`, `=0.3.0` (or just `0.3.0`), `!=0.3.0`.
    public struct VersionTest: Sendable, Equatable {
        public enum Op: String, Sendable { case lt = "<", le = "<=", gt = ">", ge = ">=", eq = "=", ne = "!=" }
        public var op: Op
        public var version: String

        public static func parse(_ text: String) throws(SelectorError) -> VersionTest {
            for op in [Op.le, .ge, .ne, .lt, .gt, .eq] where text.hasPrefix(op.rawValue) {
                return try make(op, String(text.dropFirst(op.rawValue.count)), text)
            }
            return try make(.eq, text, text)
        }

        private static func make(_ op: Op, _ v: String, _ text: String) throws(SelectorError) -> VersionTest {
            let v = v.trimmingSpaces
            guard DebianVersion.isValid(v) else {
                throw SelectorError("--version '\(TextFile.excerpt(text))': expected a comparison and a version, e.g. '<0.3.0', '>=0.2.1', '0.3.0'")
            }
            return VersionTest(op: op, version: v)
        }

        public func holds(for running: String) -> Bool {
            let c = DebianVersion.compare(running, version)
            switch op {
            case .lt: return c < 0
            case .le: return c <= 0
            case .gt: return c > 0
            case .ge: return c >= 0
            case .eq: return c == 0
            case .ne: return c != 0
            }
        }
    }

    /// A name as given on the command line: an id, a glob, or `@FILE`.
    /// `readFile` returns the file's bytes (or throws with the reason).
    public mutating func add(name: String, readFile: (String) throws(SelectorError) -> [UInt8]) throws(SelectorError) {
        if name.hasPrefix("@") {
            let path = String(name.dropFirst())
            let text = String(decoding: try readFile(path), as: UTF8.self)
            for (n, raw) in TextFile.lines(text).enumerated() {
                let line = raw.trimmingSpaces
                if line.isEmpty || line.hasPrefix("#") { continue }
                guard DeviceRecord.isValidID(line) else {
                    throw SelectorError("\(path):\(n + 1): '\(TextFile.excerpt(line))' is no device id (one MQTT topic level: 1-64 bytes without '/', '+', '#' or control characters)")
                }
                ids.insert(line)
            }
            // An empty file selects nothing, not everything.
            names.append(.file(path))
        } else if name.contains(where: { "*?[".contains($0) }) {
            guard DeviceRecord.isValidID(name) else {
                throw SelectorError("'\(TextFile.excerpt(name))': a glob is at most 64 bytes, without '/', '+', '#' or control characters")
            }
            names.append(.glob(name))
        } else {
            guard DeviceRecord.isValidID(name) else {
                throw SelectorError("'\(TextFile.excerpt(name))' is no device id (1-64 bytes without '/', '+', '#' or control characters), glob (shop-12*) or @FILE")
            }
            names.append(.id(name))
        }
    }

    /// Whether the device matches; `now` in Unix seconds (for --offline-for).
    public func matches(_ d: DeviceRecord, now: Int64) -> Bool {
        if !names.isEmpty {
            let named = names.contains { name in
                switch name {
                case .id(let id): return id == d.id
                case .glob(let g): return Glob.matches(g, d.id)
                case .file: return ids.contains(d.id)
                }
            }
            guard named else { return false }
        }
        if let f = fault, !(f == "any" ? !d.faults.isEmpty : d.faults.contains(f)) { return false }
        if let v = version {
            guard let running = d.version, v.holds(for: running) else { return false }
        }
        if let o = online, (d.online ?? false) != o { return false }
        if let span = offlineFor {
            // Offline, and not seen online by this tool for `span` (never seen: as long as it knows).
            guard d.online != true else { return false }
            if let seen = d.lastSeen, now - seen < span { return false }
        }
        if let l = voice, d.voice != l { return false }
        if let s = slot, d.slot != s { return false }
        if let u = updateState, d.updateState != u { return false }
        return true
    }

    /// `90`, `90s`, `15m`, `1h`, `2d`: seconds.
    public static func duration(_ text: String) throws(SelectorError) -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text), unit: Int64 = 1
        if let last = text.last, let u = units[last] { digits = text.dropLast(); unit = u }
        guard !digits.isEmpty, digits.utf8.count <= 9, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let n = Int64(digits) else {
            throw SelectorError("'\(TextFile.excerpt(text))' is no duration: a whole number with s, m, h or d (90s, 15m, 1h, 2d)")
        }
        return n * unit
    }
}

public struct SelectorError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Shell-style globs over device ids: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`.
public enum Glob {
    public static func matches(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.utf8), t = Array(text.utf8)
        // Iterative, with one backtrack point for the last `*`: linear-ish, no recursion to exhaust.
        var pi = 0, ti = 0, star = -1, mark = 0
        while ti < t.count {
            if pi < p.count, p[pi] == 0x2a {
                star = pi; mark = ti; pi += 1
            } else if pi < p.count, let next = single(p, pi, t[ti]) {
                pi = next; ti += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; ti = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == 0x2a { pi += 1 }
        return pi == p.count
    }

    /// If `p[i...]` starts with a one-character pattern that matches `c`, the index after it.
    private static func single(_ p: [UInt8], _ i: Int, _ c: UInt8) -> Int? {
        switch p[i] {
        case 0x3f: return i + 1
        case 0x5b:
            var j = i + 1
            let negate = j < p.count && p[j] == 0x21
            if negate { j += 1 }
            var hit = false, first = true
            while j < p.count, p[j] != 0x5d || first {
                first = false
                if j + 2 < p.count, p[j + 1] == 0x2d, p[j + 2] != 0x5d {
                    if (p[j]...max(p[j], p[j + 2])).contains(c) { hit = true }
                    j += 3
                } else {
                    if p[j] == c { hit = true }
                    j += 1
                }
            }
            guard j < p.count else { return p[i] == c ? i + 1 : nil }   // no closing ']': a literal '['
            return hit != negate ? j + 1 : nil
        default: return p[i] == c ? i + 1 : nil
        }
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }
}
