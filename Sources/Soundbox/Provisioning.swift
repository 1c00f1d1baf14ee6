/// The checks of a provisioning folder (image/README.md "Provisioning"):
/// the files a vendor writes into `soundbox/` on the boot partition, each
/// read as a careless or hostile person may have written it. Pure: the
/// bytes in, the first problem out, named by file and line as the
/// technician reads it ("soundbox/wifi.conf:2: ..."). `soundboxctl
/// provision check` runs them on the box at every boot that finds files;
/// the image's `provision` script only stages, places and deletes.
public enum Provisioning {
    /// The files it applies, in the order they are checked.
    public static let files = ["soundbox.conf", "ca.crt", "device.crt", "device.key", "authorized_keys", "wifi.conf", "hostname", "signing.pem"]
    /// No provisioning file may be larger (a settings file's limit).
    public static let maxFileBytes = 65536

    /// A refusal: the file (and line), and why.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int?
        public var message: String
        public init(_ file: String, line: Int? = nil, _ message: String) { self.file = file; self.line = line; self.message = message }
        public var description: String { "soundbox/\(file)\(line.map { ":\($0)" } ?? ""): \(message)" }
    }

    /// A file as written on Windows reads as written on Linux: a leading
    /// UTF-8 byte order mark and every carriage return are dropped.
    public static func normalized(_ bytes: [UInt8]) -> [UInt8] {
        TextFile.droppingBOM(bytes).filter { $0 != 13 }
    }

    /// A text file: no NUL bytes.
    public static func checkText(_ file: String, _ bytes: [UInt8]) throws(Problem) {
        if bytes.contains(0) { throw Problem(file, "contains NUL bytes; not a text file") }
    }

    /// Lines split at "\n" (a last line without one counts).
    static func lines(_ text: String) -> [Substring] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// Every line inside or between PEM blocks of one of `kinds` (the first
    /// is the one named when none is found).
    public static func checkPEM(_ file: String, _ text: String, kinds: [String]) throws(Problem) {
        var inside: String?
        var begun = false
        let lines = lines(text)
        for (i, line) in lines.enumerated() {
            let n = i + 1
            if let kind = inside {
                if line == "-----END \(kind)-----" { inside = nil; continue }
                guard (1...76).contains(line.utf8.count), line.utf8.allSatisfy(isBase64) else {
                    throw Problem(file, line: n, "not base64 inside the '\(kind)' block")
                }
            } else if line.isEmpty {
                continue
            } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----"), line.utf8.count > 16 {
                let kind = String(line.dropFirst(11).dropLast(5))
                guard kinds.contains(kind) else {
                    throw Problem(file, line: n, "a '\(kind)' block; expected \(kinds.joined(separator: " or "))")
                }
                inside = kind
                begun = true
            } else {
                throw Problem(file, line: n, "not PEM: expected '-----BEGIN \(kinds[0])-----'")
            }
        }
        if let kind = inside { throw Problem(file, line: lines.count, "the '\(kind)' block has no END line") }
        if !begun { throw Problem(file, "empty: expected a PEM '\(kinds[0])' block") }
    }

    static func isBase64(_ b: UInt8) -> Bool {
        (65...90).contains(b) || (97...122).contains(b) || (48...57).contains(b) || b == 43 || b == 47 || b == 61
    }

    /// The line of `payment.signing = required` in a settings file (the last
    /// one that says so), if any.
    public static func signingRequiredLine(_ settings: String) -> Int? {
        var found: Int?
        for (i, line) in lines(settings).enumerated() {
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmed == "payment.signing", parts[1].trimmed.hasPrefix("required") else { continue }
            found = i + 1
        }
        return found
    }

    /// The key types OpenSSH accepts in authorized_keys.
    static let sshKeyTypes: Set<String> = ["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                                           "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com"]

    /// authorized_keys: every line that is not blank or a comment is an
    /// SSH public key (`[options] type base64 [comment]`: the base64 is a
    /// key blob that names the same type), and there is at least one.
    public static func checkAuthorizedKeys(_ text: String) throws(Problem) {
        var keys = 0
        for (i, line) in lines(text).enumerated() {
            let trimmed = line.trimmed
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard isSSHKey(line) else {
                throw Problem("authorized_keys", line: i + 1, "not an SSH public key (expected 'ssh-ed25519 AAAA... comment')")
            }
            keys += 1
        }
        if keys == 0 { throw Problem("authorized_keys", "no key in it") }
    }

    /// One authorized_keys line: the first field naming a key type (options
    /// may come before it), then its blob.
    static func isSSHKey(_ line: Substring) -> Bool {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let at = fields.firstIndex(where: { sshKeyTypes.contains(String($0)) }), at + 1 < fields.count,
              let blob = Base64.decode(String(fields[at + 1])), blob.count >= 4 + fields[at].utf8.count + 4 else { return false }
        let length = blob[0..<4].reduce(0) { $0 << 8 | Int($1) }
        return length == fields[at].utf8.count && Array(blob[4..<(4 + length)]) == Array(fields[at].utf8)
    }

    /// A Wi-Fi network as wifi.conf gives it.
    public struct Wifi: Sendable, Equatable {
        public var ssid: String
        /// Nil: an open network. 64 hex digits, or a passphrase of 8-63 printable ASCII characters.
        public var psk: String?
        public var country: String
        public init(ssid: String, psk: String?, country: String) { self.ssid = ssid; self.psk = psk; self.country = country }
        public var pskIsHex: Bool { psk.map { $0.utf8.count == 64 && $0.utf8.allSatisfy(isHex) } ?? false }
    }

    static func isHex(_ b: UInt8) -> Bool { (48...57).contains(b) || (65...70).contains(b) || (97...102).contains(b) }

    /// wifi.conf: `ssid=`, `psk=` (unless the network is open) and
    /// `country=` lines, comments and blank lines.
    public static func wifi(_ text: String) throws(Problem) -> Wifi {
        var ssid: String?, psk: String?, country: String?
        for (i, line) in lines(text).enumerated() {
            let n = i + 1
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else {
                throw Problem("wifi.conf", line: n, "expected key=value (keys: ssid, psk, country)")
            }
            let key = String(line[..<eq]), value = String(line[line.index(after: eq)...])
            switch key {
            case "ssid":
                guard (1...32).contains(value.utf8.count) else { throw Problem("wifi.conf", line: n, "ssid must be 1-32 bytes") }
                ssid = value
            case "psk":
                let hex = value.utf8.count == 64 && value.utf8.allSatisfy(isHex)
                let phrase = (8...63).contains(value.utf8.count) && value.utf8.allSatisfy { (32...126).contains($0) }
                guard hex || phrase else {
                    throw Problem("wifi.conf", line: n, "psk must be 8-63 printable ASCII characters or 64 hex digits")
                }
                psk = value
            case "country":
                guard value.utf8.count == 2, value.utf8.allSatisfy({ (65...90).contains($0) }) else {
                    throw Problem("wifi.conf", line: n, "country must be two capital letters (ISO 3166-1, e.g. IN)")
                }
                country = value
            default:
                throw Problem("wifi.conf", line: n, "unknown key '\(TextFile.excerpt(key))'; allowed: ssid, psk, country")
            }
        }
        guard let ssid, let country else { throw Problem("wifi.conf", "needs ssid= and country= (psk= too unless the network is open)") }
        return Wifi(ssid: ssid, psk: psk, country: country)
    }

    /// wpa_supplicant.conf for `wifi`: the SSID in hex (any bytes), and the
    /// key as 64 hex digits (`derivedKey`: the passphrase's PBKDF2, as
    /// wpa_passphrase makes it), or none for an open network.
    public static func wpaSupplicant(_ wifi: Wifi, derivedKey: String?) -> String {
        let hexSSID = wifi.ssid.utf8.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        var lines = ["# Written by soundbox-provision from soundbox/wifi.conf.",
                     "ctrl_interface=DIR=/run/wpa_supplicant GROUP=netdev", "update_config=0", "country=\(wifi.country)",
                     "network={", "    ssid=\(hexSSID)"]
        if let key = wifi.pskIsHex ? wifi.psk : derivedKey { lines.append("    psk=\(key)") } else { lines.append("    key_mgmt=NONE") }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// A hostname: one line of 1-63 lowercase letters, digits and '-', not
    /// starting or ending with '-'.
    public static func isHostname(_ name: some StringProtocol) -> Bool {
        let b = Array(name.utf8)
        guard (1...63).contains(b.count), b.first != 45, b.last != 45 else { return false }
        return b.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
    }

    /// The hostname file: its first line is the name, and it has no other.
    public static func hostname(_ text: String) throws(Problem) -> String {
        let lines = lines(text)
        let name = lines.first.map(String.init) ?? ""
        guard isHostname(name), lines.count <= 1 else {
            throw Problem("hostname", line: 1, "'\(TextFile.excerpt(name, limit: 80))' is not a hostname: one line of 1-63 lowercase letters, digits and '-', not starting or ending with '-'")
        }
        return name
    }
}
