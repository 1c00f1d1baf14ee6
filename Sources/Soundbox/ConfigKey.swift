// What a configuration key is: its kinds of value and who may change it;
// the catalogue of every key is in ConfigKeys.swift.

/// A validated value.
public enum ConfigValue: Sendable, Equatable {
    case text(String)
    case integer(Int)
    case bool(Bool)
    case amount(Amount)

    /// As a file would write it.
    public var text: String {
        switch self {
        case .text(let s): s
        case .integer(let n): "\(n)"
        case .bool(let b): b ? "true" : "false"
        case .amount(let a): a.description
        }
    }
}

/// One configuration key: its name, default, allowed values, who may change
/// it, and meaning. Read its value through its typed key (`TextKey`,
/// `IntKey`, `BoolKey`, `AmountKey`).
public struct ConfigKey: Sendable, Hashable {
    public let name: String
    public let defaultValue: String
    public let kind: Kind
    public let scope: Scope
    /// Shown as "********" by `config get`, status and logs.
    public let secret: Bool
    public let help: String

    public init(name: String, defaultValue: String, kind: Kind, scope: Scope, secret: Bool = false, help: String) {
        self.name = name; self.defaultValue = defaultValue; self.kind = kind; self.scope = scope
        self.secret = secret; self.help = help
    }

    /// Who may change a key, and when it takes effect.
    public enum Scope: Int, Sendable, Hashable, Comparable, CaseIterable {
        /// Only the settings file; read at start (paths, devices, outputs,
        /// the broker): `config set` and remote config refuse it, and a
        /// SIGHUP that changes it is logged as needing a restart.
        case file
        /// Also `soundboxctl config set` on the box (the technician), at once.
        case local
        /// Also the backend's remote config over MQTT (the allow-list of
        /// DESIGN §2: volume, mute, language, queue policy, prompts).
        case remote

        public static func < (a: Scope, b: Scope) -> Bool { a.rawValue < b.rawValue }

        /// For docs/config.md: "file (restart)", "config set", "remote".
        public var label: String {
            switch self {
            case .file: "file only (restart)"
            case .local: "file, config set"
            case .remote: "file, config set, remote"
            }
        }
    }

    /// Every kind bounds its value's length (and a text's characters), so
    /// that no value is unbounded anywhere it goes: a file, `config set`,
    /// remote config (the same `parse`).
    public enum Kind: Sendable, Hashable {
        /// At most `maxText` bytes, no control character (a lone CR of an
        /// old Mac file is a mistake, not part of a name).
        case text
        /// Text that may be empty: empty means "not set". Anything but NUL
        /// (values go to C as strings): a password may hold any character.
        case optionalText
        /// A file or folder: at most PATH_MAX (4096) bytes, no control character.
        case path
        /// A path that may be empty: empty means "not set".
        case optionalPath
        /// `mqtt.host`: one broker or several, tried in turn
        /// (`BrokerAddress.list`): `host`, `host:port`, `[v6]:port`, comma-separated.
        case host
        /// `device.id`: empty (= the hostname) or one MQTT topic level and
        /// client id: at most 64 bytes, none of '/', '+', '#', NUL or a
        /// control character (MQTT 3.1.1 §4.7: '/' separates levels, '+'
        /// and '#' are wildcards, NUL is forbidden).
        case topicLevel
        /// `mqtt.prefix`: MQTT topic levels, at most 128 bytes, none of
        /// '+', '#', NUL or a control character.
        case topicPrefix
        case integer(ClosedRange<Int>)
        /// 0 (off), or an integer in the range: a small value that is not
        /// off would do harm (`mqtt.dead_link_s` 1: a link reconnected
        /// every second, a TLS handshake each).
        case integerOrOff(ClosedRange<Int>)
        case bool
        case choice([String])
        case amount
        /// A voice pack's folder name: letters, digits, '-' and '_' (no
        /// path). Whether it is installed is checked where packs are known.
        case packName

        /// The value, or nil if `text` is not allowed.
        public func parse(_ text: String) -> ConfigValue? {
            switch self {
            case .text: return !text.isEmpty && Self.fits(text, Self.maxText, refusing: "") ? .text(text) : nil
            case .optionalText: return Self.fits(text, Self.maxText) ? .text(text) : nil
            case .path: return !text.isEmpty && Self.fits(text, Self.maxPath, refusing: "") ? .text(text) : nil
            case .optionalPath: return Self.fits(text, Self.maxPath, refusing: "") ? .text(text) : nil
            case .host: return BrokerAddress.list(text) != nil ? .text(text) : nil
            case .topicLevel: return Self.fits(text, Self.maxTopicLevel, refusing: "/+#") ? .text(text) : nil
            case .topicPrefix: return !text.isEmpty && Self.fits(text, Self.maxTopicPrefix, refusing: "+#") ? .text(text) : nil
            case .integer(let range):
                guard let n = Int(text), range.contains(n) else { return nil }
                return .integer(n)
            case .integerOrOff(let range):
                guard let n = Int(text), n == 0 || range.contains(n) else { return nil }
                return .integer(n)
            case .bool:
                switch text { case "true": return .bool(true); case "false": return .bool(false); default: return nil }
            case .choice(let options): return options.contains(text) ? .text(text) : nil
            case .amount: return (try? Amount.parse(text, max: .wordsMax)).map { .amount($0) }
            case .packName: return Self.isPackName(text) ? .text(text) : nil
            }
        }

        /// What is allowed, for "expected …" messages and docs/config.md.
        public var allowed: String {
            switch self {
            case .text: "a non-empty value of at most \(Self.maxText) bytes, without control characters"
            case .optionalText: "any text of at most \(Self.maxText) bytes (empty = not set)"
            case .path: "a path of at most \(Self.maxPath) bytes (PATH_MAX), without control characters"
            case .optionalPath: "a path of at most \(Self.maxPath) bytes (PATH_MAX) without control characters, or empty = not set"
            case .host: "a broker's host name (at most \(Self.maxHost) bytes, no spaces or control characters) with an optional :port, or up to \(BrokerAddress.maxBrokers) of them separated by commas, tried in turn (e.g. mq1.example.com,mq2.example.com:8884)"
            case .topicLevel: "an MQTT topic level: at most \(Self.maxTopicLevel) bytes, without '/', '+', '#' or control characters (empty = the hostname)"
            case .topicPrefix: "MQTT topic levels: at most \(Self.maxTopicPrefix) bytes, without '+', '#' or control characters"
            case .integer(let range): "an integer \(range.lowerBound)-\(range.upperBound)"
            case .integerOrOff(let range): "0 (off) or an integer \(range.lowerBound)-\(range.upperBound)"
            case .bool: "one of true, false"
            case .choice(let options): "one of " + options.joined(separator: ", ")
            case .amount: "an amount 0.01-\(Amount.wordsMax) with at most two decimals"
            case .packName: "a voice pack's name (1-32 letters, digits, '-' or '_')"
            }
        }

        /// Texts: a device name, a user name, a password (brokers accept far
        /// less than MQTT's 65535). Paths: PATH_MAX. Hosts: DNS's 253.
        public static let maxText = 1024, maxPath = 4096, maxHost = 253, maxTopicLevel = 64, maxTopicPrefix = 128

        /// At most `max` bytes, no NUL; no control or invisible character
        /// either (`LogLine.isHidden`) when `refusing` is given, nor any of
        /// its characters.
        static func fits(_ s: String, _ max: Int, refusing: String? = nil) -> Bool {
            guard s.utf8.count <= max, !s.utf8.contains(0) else { return false }
            guard let refusing else { return true }
            return !s.unicodeScalars.contains { LogLine.isHidden($0) || refusing.unicodeScalars.contains($0) }
        }

        public static func isPackName(_ s: String) -> Bool {
            (1...32).contains(s.utf8.count) && s.utf8.allSatisfy { b in
                switch b {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"): true
                default: false
                }
            }
        }
    }

    /// Why `who` may not set this key, or nil (the device's answer, and a fleet tool's before it sends).
    public func refusal(_ who: Scope) -> String? {
        guard scope < who else { return nil }
        switch scope {
        case .file: return "\(name) only takes effect at start and is set only in the settings file: edit the file and restart soundboxd"
        case .local: return "\(name) cannot be set remotely; a technician sets it on the box (soundboxctl config set)"
        case .remote: return nil
        }
    }

    /// A device id as `device.id` takes it (one MQTT topic level, 1-64
    /// bytes, nothing hidden): what a fleet tool accepts from topics and operators.
    public static func isDeviceID(_ s: some StringProtocol) -> Bool {
        !s.isEmpty && Kind.fits(String(s), Kind.maxTopicLevel, refusing: "/+#")
    }

    public static func named(_ name: String) -> ConfigKey? { byName[name] }

    /// The key table of docs/config.md, as `soundboxctl config keys` prints it.
    public static var markdownTable: String {
        var lines = ["| key | default | allowed | who may change it | meaning |", "|---|---|---|---|---|"]
        for k in all {
            let d = k.defaultValue.isEmpty ? "(empty)" : "`\(k.defaultValue)`"
            lines.append("| `\(k.name)` | \(d) | \(k.kind.allowed) | \(k.scope.label) | \(k.help) |")
        }
        return lines.joined(separator: "\n")
    }
    private static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// Every key, in the order docs/config.md and `config get` list them.
    public static let all: [ConfigKey] = [
        TextKey.stateDir.key, TextKey.controlSocket.key, TextKey.controlGroup.key, TextKey.voiceDir.key, TextKey.voiceLang.key,
        TextKey.audioOutput.key, TextKey.audioDevice.key, TextKey.audioWavFile.key, BoolKey.audioNullRealtime.key,
        IntKey.audioVolume.key, IntKey.audioMinVolume.key, BoolKey.audioMute.key,
        IntKey.queueStaleAfter.key, IntKey.queueRetentionDays.key, IntKey.queueHistoryMax.key,
        IntKey.queueSummaryMin.key, IntKey.queueSummaryAfter.key, IntKey.voiceTargetLUFS.key, IntKey.voiceTruePeak.key,
        AmountKey.paymentMaxAmount.key, TextKey.paymentSigning.key, TextKey.paymentKeys.key,
        TextKey.deviceID.key, BoolKey.mqttEnabled.key, TextKey.mqttHost.key, IntKey.mqttPort.key, TextKey.mqttPrefix.key,
        IntKey.mqttKeepalive.key, IntKey.mqttDeadLink.key, TextKey.mqttTLSCA.key, TextKey.mqttTLSCert.key, TextKey.mqttTLSKey.key,
        TextKey.mqttUsername.key, TextKey.mqttPassword.key, IntKey.mqttReconnectMax.key, BoolKey.mqttLinkPrompts.key,
        BoolKey.gpioEnabled.key, TextKey.gpioChip.key, IntKey.gpioDebounce.key,
    ] + GPIOKeys.all.flatMap { [$0.line.key, $0.activeLow.key, $0.bias.key] } + [TextKey.updateHelper.key, IntKey.updateRebootDeadline.key, TextKey.logLevel.key]
}
