/// System updates (image/README.md "Updates", docs/mqtt.md `cmd update`):
/// what a request says, where an update stands, and the versions it
/// compares. Pure, so every hostile shape is tested without a box.

/// An update asked for by the backend's signed `cmd` or by a technician.
public struct UpdateRequest: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// Downloaded (http or https) into the update folder, then verified.
        case url(String)
        /// A bundle already in the update folder (soundboxctl update install FILE put it there).
        case file(String)
    }
    public var source: Source
    /// Lowercase hex SHA-256 of the bundle: required for a URL.
    public var sha256: String?
    /// The bundle's version (a Debian version): required for a URL, so an
    /// older one is refused before anything is downloaded.
    public var version: String?
    /// The backend's name for this request, echoed in its receipts.
    public var id: String?
    /// The bundle's size in bytes, if the backend knows it (else the server's Content-Length).
    public var size: Int64?
    /// A technician's downgrade (never from the broker).
    public var force: Bool

    public init(source: Source, sha256: String? = nil, version: String? = nil, id: String? = nil, size: Int64? = nil, force: Bool = false) {
        self.source = source; self.sha256 = sha256; self.version = version; self.id = id; self.size = size; self.force = force
    }

    /// A bundle is at most this big (the root slot is 1536 MiB).
    public static let maxSize: Int64 = 1536 << 20

    /// `{"cmd":"update","url":"https://…/soundbox-0.2.0-rpi-arm64.raucb","sha256":"…","version":"0.2.0"}`
    /// plus optional `id` and `size`. Every field checked; the URL is http
    /// or https, printable, without spaces, credentials or fragments.
    public static func parse(_ value: JSONValue) -> Result<UpdateRequest, RemoteMessageError> {
        func text(_ key: String, required: Bool) -> Result<String?, RemoteMessageError> {
            switch value[key] {
            case nil, .null?: return required ? .failure(.init("update needs \"\(key)\"")) : .success(nil)
            case .string(let s)?: return .success(s)
            case let other?: return .failure(.init("\(key) must be a string, not \(other.kindDescription)"))
            }
        }
        return text("url", required: true).flatMap { url in
            text("sha256", required: true).flatMap { sha in
                text("version", required: true).flatMap { version in
                    text("id", required: false).flatMap { id in
                        var size: Int64?
                        switch value["size"] {
                        case nil, .null?: break
                        case .number(let n)?:
                            guard let s = Int64(n), s > 0, s <= maxSize else {
                                return .failure(.init("size must be a whole number of bytes 1-\(maxSize), not \(TextFile.excerpt(n))"))
                            }
                            size = s
                        case let other?: return .failure(.init("size must be a number, not \(other.kindDescription)"))
                        }
                        let request = UpdateRequest(source: .url(url!), sha256: sha, version: version, id: id, size: size)
                        if let problem = request.problem { return .failure(.init(problem)) }
                        return .success(request)
                    }
                }
            }
        }
    }

    /// What is wrong with the request, if anything.
    public var problem: String? {
        switch source {
        case .url(let url):
            if let p = Self.urlProblem(url) { return p }
            guard sha256 != nil else { return "a URL needs its sha256" }
            guard version != nil else { return "a URL needs its version" }
        case .file(let name):
            guard Self.isBundleName(name) else {
                return "'\(TextFile.excerpt(name))' is not a bundle's file name in the update folder (letters, digits, '.', '_', '+', '~', '-', ending in .raucb)"
            }
        }
        if let sha256, !(sha256.utf8.count == 64 && sha256.utf8.allSatisfy(Self.isLowerHex)) {
            return "sha256 must be 64 lowercase hex digits, not '\(TextFile.excerpt(sha256))'"
        }
        if let version, !DebianVersion.isValid(version) {
            return "version '\(TextFile.excerpt(version))' is not a Debian version (a digit first, then letters, digits and . + ~ - :, at most 64)"
        }
        if let id, id.isEmpty || id.utf8.count > 64 || !id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) {
            return "id must be 1-64 printable ASCII characters without spaces"
        }
        return nil
    }

    static func urlProblem(_ url: String) -> String? {
        let shown = TextFile.excerpt(url, limit: 80)
        guard url.utf8.count <= 2048 else { return "url is longer than 2048 bytes" }
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return "url '\(shown)' has spaces, control or non-ASCII characters" }
        guard url.hasPrefix("http://") || url.hasPrefix("https://") else { return "url '\(shown)' is not http:// or https://" }
        let rest = url.drop(while: { $0 != ":" }).dropFirst(3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        guard !authority.isEmpty else { return "url '\(shown)' has no host" }
        guard !authority.contains("@") else { return "url '\(shown)' carries credentials; they do not belong in a command" }
        guard !url.contains("#") else { return "url '\(shown)' has a fragment" }
        return nil
    }

    /// soundbox-0.2.0-rpi-arm64.raucb: one file name, no path.
    public static func isBundleName(_ name: String) -> Bool {
        name.hasSuffix(".raucb") && name.utf8.count <= 200 && !name.hasPrefix(".") &&
            name.utf8.allSatisfy { isAlnum($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "+") ||
                $0 == UInt8(ascii: "~") || $0 == UInt8(ascii: "-") }
    }

    static func isLowerHex(_ c: UInt8) -> Bool { (0x30...0x39).contains(c) || (0x61...0x66).contains(c) }
    static func isAlnum(_ c: UInt8) -> Bool { (0x30...0x39).contains(c) || (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c) }
}

/// Where an update stands, as `status` shows it (`update`) and its
/// receipts say it.
public enum UpdatePhase: String, Sendable {
    case idle
    case downloading
    case installing
    case waitingToReboot = "waiting to reboot"
    /// Running on the new slot, not yet committed.
    case trying
    case committed
    case rolledBack = "rolled back"
    case failed

    /// Work in progress: a new request is refused (unless it is the same one).
    public var busy: Bool { [.downloading, .installing, .waitingToReboot, .trying].contains(self) }
}

/// The update's record, kept in the update folder (`state`) so that a
/// power cut resumes it: `key=value` lines, values on one line.
public struct UpdateRecord: Sendable, Equatable {
    public var phase: UpdatePhase = .idle
    public var progress = 0
    public var version: String?
    public var reason: String?
    public var id: String?
    public var url: String?
    public var sha256: String?
    public var size: Int64?
    /// The bundle's file name in the update folder.
    public var file: String?
    public var force = false
    /// The slot it was asked on, and the slot it installed to.
    public var fromSlot: String?
    public var toSlot: String?
    /// The boot during which the reboot into `toSlot` was asked for: a
    /// later boot on the old slot means the try happened and failed.
    public var rebootBoot: String?
    /// Boots of `toSlot` that ended without a verdict (a power cut, a
    /// reset before the health check spoke): each is tried again, up to 3.
    public var tries = 0
    /// Unix seconds of the last change.
    public var ts: Int64 = 0

    public init() {}

    public var text: String {
        var lines = ["phase=\(phase.rawValue)", "progress=\(progress)", "force=\(force)", "tries=\(tries)", "ts=\(ts)"]
        for (k, v) in [("version", version), ("reason", reason), ("id", id), ("url", url), ("sha256", sha256),
                       ("size", size.map(String.init)), ("file", file), ("from_slot", fromSlot),
                       ("to_slot", toSlot), ("reboot_boot", rebootBoot)] {
            if let v { lines.append(k + "=" + Self.oneLine(v)) }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The record a file holds; unknown keys are ignored, a damaged file
    /// reads as what could be read (an unreadable phase as idle).
    public static func parse(_ text: String) -> UpdateRecord {
        var r = UpdateRecord()
        for line in TextFile.lines(text) {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let k = String(line[..<eq]), v = String(line[line.index(after: eq)...])
            switch k {
            case "phase": r.phase = UpdatePhase(rawValue: v) ?? .idle
            case "progress": r.progress = min(100, max(0, Int(v) ?? 0))
            case "force": r.force = v == "true"
            case "ts": r.ts = Int64(v) ?? 0
            case "tries": r.tries = min(100, max(0, Int(v) ?? 0))
            case "version": r.version = v
            case "reason": r.reason = v
            case "id": r.id = v
            case "url": r.url = v
            case "sha256": r.sha256 = v
            case "size": r.size = Int64(v)
            case "file": r.file = UpdateRequest.isBundleName(v) ? v : nil
            case "from_slot": r.fromSlot = v
            case "to_slot": r.toSlot = v
            case "reboot_boot": r.rebootBoot = v
            default: break
            }
        }
        return r
    }

    static func oneLine(_ s: String) -> String { TextFile.excerpt(s, limit: 600) }

    /// `status`'s `update` object: {"state":"downloading","progress":40,"version":"0.2.0"}.
    public var json: JSONObject {
        var o = JSONObject()
        o.add("state", phase.rawValue)
        if [.downloading, .installing].contains(phase) { o.add("progress", progress) }
        o.add("version", ifPresent: version)
        o.add("reason", ifPresent: reason)
        o.add("id", ifPresent: id)
        return o
    }

    /// One line for the control socket's status: "downloading 40% 0.2.0".
    public var summary: String {
        var s = phase.rawValue
        if [.downloading, .installing].contains(phase) { s += " \(progress)%" }
        if let version { s += " " + version }
        return s
    }
}

/// Debian version ordering (deb-version(7)), as dpkg --compare-versions.
public enum DebianVersion {
    /// What dpkg --validate-version takes ([epoch:]upstream[-revision],
    /// the upstream starting with a digit), at most 64 bytes.
    public static func isValid(_ v: String) -> Bool {
        guard !v.isEmpty, v.utf8.count <= 64 else { return false }
        var rest = Substring(v)
        let hasEpoch = rest.contains(":")
        if hasEpoch {
            let epoch = rest.prefix { $0 != ":" }
            guard !epoch.isEmpty, epoch.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return false }
            rest = rest.dropFirst(epoch.count + 1)
        }
        var upstream = rest
        if let dash = rest.lastIndex(of: "-") {
            let revision = rest[rest.index(after: dash)...]
            guard !revision.isEmpty, revision.utf8.allSatisfy({ UpdateRequest.isAlnum($0) || ".+~".utf8.contains($0) }) else { return false }
            upstream = rest[..<dash]
        }
        guard let first = upstream.utf8.first, (0x30...0x39).contains(first) else { return false }
        let allowed = ".+~" + (rest.contains("-") ? "-" : "") + (hasEpoch ? ":" : "")
        return upstream.utf8.allSatisfy { UpdateRequest.isAlnum($0) || allowed.utf8.contains($0) }
    }

    /// <0, 0, >0 as `a` is older than, the same as, or newer than `b`.
    public static func compare(_ a: String, _ b: String) -> Int {
        let (ea, ua, ra) = split(a), (eb, ub, rb) = split(b)
        if ea != eb { return ea < eb ? -1 : 1 }
        let u = part(ua, ub)
        return u != 0 ? u : part(ra, rb)
    }

    static func split(_ v: String) -> (Int, [UInt8], [UInt8]) {
        var bytes = Array(v.utf8)
        var epoch = 0
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            epoch = Int(String(decoding: bytes[..<colon], as: UTF8.self)) ?? 0
            bytes = Array(bytes[(colon + 1)...])
        }
        guard let dash = bytes.lastIndex(of: UInt8(ascii: "-")) else { return (epoch, bytes, []) }
        return (epoch, Array(bytes[..<dash]), Array(bytes[(dash + 1)...]))
    }

    /// dpkg's verrevcmp: alternating non-digit and digit runs.
    static func part(_ a: [UInt8], _ b: [UInt8]) -> Int {
        func order(_ c: UInt8?) -> Int {
            guard let c else { return 0 }
            if UpdateRequest.isAlnum(c) && !(0x30...0x39).contains(c) { return Int(c) }
            if c == UInt8(ascii: "~") { return -1 }
            return Int(c) + 256
        }
        func isDigit(_ c: UInt8) -> Bool { (0x30...0x39).contains(c) }
        var i = 0, j = 0
        while i < a.count || j < b.count {
            var diff = 0
            while (i < a.count && !isDigit(a[i])) || (j < b.count && !isDigit(b[j])) {
                let ac = order(i < a.count && !isDigit(a[i]) ? a[i] : nil)
                let bc = order(j < b.count && !isDigit(b[j]) ? b[j] : nil)
                if ac != bc { return ac - bc }
                i += 1; j += 1
            }
            while i < a.count && a[i] == UInt8(ascii: "0") { i += 1 }
            while j < b.count && b[j] == UInt8(ascii: "0") { j += 1 }
            while i < a.count && isDigit(a[i]) && j < b.count && isDigit(b[j]) {
                if diff == 0 { diff = Int(a[i]) - Int(b[j]) }
                i += 1; j += 1
            }
            if i < a.count && isDigit(a[i]) { return 1 }
            if j < b.count && isDigit(b[j]) { return -1 }
            if diff != 0 { return diff }
        }
        return 0
    }
}

/// A line of the update helper's output while it installs: "  40% Copying image".
public enum InstallProgress {
    public static func percent(_ line: some StringProtocol) -> Int? {
        let t = line.drop { $0 == " " }
        guard let pct = t.firstIndex(of: "%"), let n = Int(t[..<pct]), (0...100).contains(n) else { return nil }
        return n
    }
}
