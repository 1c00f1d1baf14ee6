
/// The technician's configuration: `key = value` lines with dotted keys,
/// `#` comments (whole lines, or after whitespace), blank lines allowed.
/// Every key, its default and its range: docs/config.md. An invalid file is
/// rejected as a whole, naming the file, line, key and allowed values.
///
/// Values are read through typed keys (`config[.audioVolume]` is an `Int`,
/// `config[.audioMute]` a `Bool`), checked when they are set, so reading
/// one can never fail.
public struct Config: Sendable, Equatable {
    public static let defaultPath = "/etc/soundbox/soundbox.conf"

    /// Validated values by key name; keys not set have their default.
    private var values: [String: ConfigValue] = [:]

    public init() {}

    public subscript(key: TextKey) -> String {
        guard case .text(let s) = value(key.key) else { preconditionFailure("\(key.key.name) holds a non-text value") }
        return s
    }
    public subscript(key: IntKey) -> Int {
        guard case .integer(let n) = value(key.key) else { preconditionFailure("\(key.key.name) holds a non-integer value") }
        return n
    }
    public subscript(key: BoolKey) -> Bool {
        guard case .bool(let b) = value(key.key) else { preconditionFailure("\(key.key.name) holds a non-boolean value") }
        return b
    }
    public subscript(key: AmountKey) -> Amount {
        guard case .amount(let a) = value(key.key) else { preconditionFailure("\(key.key.name) holds a non-amount value") }
        return a
    }

    /// The key's value as text (as a file would say it).
    public func text(_ key: ConfigKey) -> String { value(key).text }

    /// Whether the key was set (by a file, a flag or the overlay) rather than left at its default.
    public func isSet(_ key: ConfigKey) -> Bool { values[key.name] != nil }

    private func value(_ key: ConfigKey) -> ConfigValue {
        // A key's kind accepts its own default (ConfigTests.everyKeyDefaultIsValid).
        values[key.name] ?? key.kind.parse(key.defaultValue)!
    }

    /// Every key with its effective value, in `ConfigKey.all` order;
    /// secrets masked.
    public var effective: [(key: ConfigKey, value: String)] { ConfigKey.all.map { ($0, shown($0)) } }

    /// The value as it may be shown to people: a set secret is "********".
    public func shown(_ key: ConfigKey) -> String {
        let t = text(key)
        return key.secret && !t.isEmpty ? "********" : t
    }

    /// This config with `overlay` (remote config, `config set`) on top.
    /// Overlay entries that are no longer valid are skipped and returned.
    public func applying(_ overlay: [String: String]) -> (Config, rejected: [String: ConfigError]) {
        var c = self
        var rejected: [String: ConfigError] = [:]
        for (k, v) in overlay.sorted(by: { $0.key < $1.key }) {
            do { try c.set(k, v) } catch { rejected[k] = error }
        }
        return (c, rejected)
    }

    /// Sets a key after validating the value.
    public mutating func set(_ name: String, _ value: String) throws(ConfigError) {
        guard let key = ConfigKey.named(name) else { throw .unknownKey(name) }
        try set(key, value)
    }

    public mutating func set(_ key: ConfigKey, _ value: String) throws(ConfigError) {
        guard let parsed = key.kind.parse(value) else {
            throw .badValue(key: key.name, value: value, allowed: key.kind.allowed)
        }
        values[key.name] = parsed
    }

    /// Takes `key`'s value from `other` (set or default).
    public mutating func copy(_ key: ConfigKey, from other: Config) { values[key.name] = other.values[key.name] }

    /// Parses a whole file's text; `source` names it in errors.
    public static func parse(_ text: String, source: String) throws(ConfigFileError) -> Config {
        var config = Config()
        var firstLine: [String: Int] = [:]
        for (i, raw) in TextFile.lines(text).enumerated() {
            let line = i + 1
            var body = raw
            if let hash = body.indices.first(where: { body[$0] == "#" && ($0 == body.startIndex || body[body.index(before: $0)].isWhitespace) }) {
                body = body[..<hash]
            }
            let trimmed = body.trimmed
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw ConfigFileError(source: source, line: line, error: .syntax("expected 'key = value', got '\(TextFile.excerpt(trimmed))'"))
            }
            let key = trimmed[..<eq].trimmed
            let value = trimmed[trimmed.index(after: eq)...].trimmed
            if let earlier = firstLine[key] {
                throw ConfigFileError(source: source, line: line, error: .syntax("\(key) is already set on line \(earlier)"))
            }
            firstLine[key] = line
            do { try config.set(key, value) } catch {
                throw ConfigFileError(source: source, line: line, error: error)
            }
        }
        return config
    }

    /// A settings file is a page of `key = value` lines: a larger one is
    /// refused (by its size, before it is read), not read into memory.
    public static let maxFileBytes = 64 << 10

    /// Reads `path` (a regular file: a FIFO or a device is refused at once).
    /// A missing file at the default path means all defaults; a missing
    /// file the user named is an error.
    public static func load(path: String?) throws(ConfigFileError) -> Config {
        let file = path ?? defaultPath
        let data: [UInt8]
        do { data = try TextFile.read(file, limit: maxFileBytes) } catch {
            if path == nil && error.isMissing { return Config() }
            throw ConfigFileError(source: file, line: nil, error: .syntax(error.phrase))
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw ConfigFileError(source: file, line: nil, error: .syntax("is not UTF-8 text"))
        }
        return try parse(text, source: file)
    }

    /// `audio.wav_file` as a path: a relative one is inside `state.dir`
    /// (the default, soundbox.wav there: not a folder others may write).
    public var wavFile: String {
        let file = self[.audioWavFile]
        return file.hasPrefix("/") ? file : self[.stateDir] + "/" + file
    }

    /// The line of `path` that sets `key`, for messages about a value that
    /// is valid on its own but not on this box (e.g. a voice pack that is
    /// not installed); nil if the file does not set it.
    public static func line(of key: ConfigKey, in path: String) -> Int? {
        guard let data = Files.read(path, limit: maxFileBytes) else { return nil }
        for (i, raw) in TextFile.lines(String(decoding: data, as: UTF8.self)).enumerated() {
            if let eq = raw.firstIndex(of: "="), raw[..<eq].trimmed == key.name { return i + 1 }
        }
        return nil
    }
}

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
        /// A host name: at most 253 bytes (DNS), no space or control character.
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
            case .host: return !text.isEmpty && Self.fits(text, Self.maxHost, refusing: " ") ? .text(text) : nil
            case .topicLevel: return Self.fits(text, Self.maxTopicLevel, refusing: "/+#") ? .text(text) : nil
            case .topicPrefix: return !text.isEmpty && Self.fits(text, Self.maxTopicPrefix, refusing: "+#") ? .text(text) : nil
            case .integer(let range):
                guard let n = Int(text), range.contains(n) else { return nil }
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
            case .host: "a host name of at most \(Self.maxHost) bytes (DNS), without spaces or control characters"
            case .topicLevel: "an MQTT topic level: at most \(Self.maxTopicLevel) bytes, without '/', '+', '#' or control characters (empty = the hostname)"
            case .topicPrefix: "MQTT topic levels: at most \(Self.maxTopicPrefix) bytes, without '+', '#' or control characters"
            case .integer(let range): "an integer \(range.lowerBound)-\(range.upperBound)"
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
        IntKey.mqttKeepalive.key, TextKey.mqttTLSCA.key, TextKey.mqttTLSCert.key, TextKey.mqttTLSKey.key,
        TextKey.mqttUsername.key, TextKey.mqttPassword.key, IntKey.mqttReconnectMax.key, BoolKey.mqttLinkPrompts.key,
        BoolKey.gpioEnabled.key, TextKey.gpioChip.key, IntKey.gpioDebounce.key,
    ] + GPIOKeys.all.flatMap { [$0.line.key, $0.activeLow.key, $0.bias.key] } + [TextKey.logLevel.key]
}

/// A key whose value is text (`config[.voiceLang]` is a `String`).
public struct TextKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: String, _ scope: ConfigKey.Scope, kind: ConfigKey.Kind = .text,
         secret: Bool = false, help: String) {
        key = ConfigKey(name: name, defaultValue: defaultValue, kind: kind, scope: scope, secret: secret, help: help)
    }
}

/// A key whose value is an integer in a range.
public struct IntKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: Int, _ range: ClosedRange<Int>, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: "\(defaultValue)", kind: .integer(range), scope: scope, help: help)
    }
}

/// A key whose value is `true` or `false`.
public struct BoolKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: Bool, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: "\(defaultValue)", kind: .bool, scope: scope, help: help)
    }
}

/// A key whose value is an exact amount of money.
public struct AmountKey: Sendable, Hashable {
    public let key: ConfigKey
    init(_ name: String, _ defaultValue: String, _ scope: ConfigKey.Scope, help: String) {
        key = ConfigKey(name: name, defaultValue: defaultValue, kind: .amount, scope: scope, help: help)
    }
}

extension TextKey {
    public static let stateDir = TextKey("state.dir", "/var/lib/soundbox", .file, kind: .path, help: "folder of the database soundbox.db")
    public static let controlSocket = TextKey("control.socket", "/run/soundbox/control.sock", .file, kind: .path, help: "Unix socket for soundboxctl")
    public static let controlGroup = TextKey("control.group", "soundbox", .file,
                                             help: "group owning the control socket (mode 0660); ignored if it does not exist")
    public static let voiceDir = TextKey("voice.dir", "/usr/share/soundbox/voices", .file, kind: .path,
                                         help: "folder holding one folder per voice pack; unset: beside the program (../share/soundbox/voices, or the source checkout's voices/) if there, else this default")
    public static let voiceLang = TextKey("voice.lang", "zh-CN", .remote, kind: .packName,
                                          help: "voice pack used when a payment names none; must be installed in voice.dir")
    public static let audioOutput = TextKey("audio.output", "alsa", .file, kind: .choice(["alsa", "wav", "null"]),
                                            help: "alsa: the sound card; wav: append to audio.wav_file; null: no sound")
    public static let audioDevice = TextKey("audio.device", "default", .file,
                                            help: "ALSA PCM name, e.g. default, hw:0,0, plughw:1, file:'/tmp/o.raw',raw")
    public static let audioWavFile = TextKey("audio.wav_file", "soundbox.wav", .file, kind: .path,
                                             help: "with audio.output = wav, announcements are appended to this WAV file (relative: in state.dir); never written through a symbolic link, nor a FIFO, device or hard-linked file; an existing file must be a WAV of the same format")
    public static let deviceID = TextKey("device.id", "", .file, kind: .topicLevel, help: "MQTT client id and topic segment; empty = the hostname")
    public static let mqttHost = TextKey("mqtt.host", "localhost", .file, kind: .host, help: "broker host name (checked against its TLS certificate)")
    public static let mqttPrefix = TextKey("mqtt.prefix", "soundbox/v1", .file, kind: .topicPrefix, help: "topic prefix: PREFIX/DEVICE/payment ...")
    public static let mqttTLSCA = TextKey("mqtt.tls.ca", "", .file, kind: .optionalPath,
                                          help: "CA file; set = TLS 1.2+ with hostname verification (there is no insecure mode)")
    public static let mqttTLSCert = TextKey("mqtt.tls.cert", "", .file, kind: .optionalPath, help: "client certificate file (with mqtt.tls.key)")
    public static let mqttTLSKey = TextKey("mqtt.tls.key", "", .file, kind: .optionalPath, help: "client private key file")
    public static let mqttUsername = TextKey("mqtt.username", "", .file, kind: .optionalText, help: "broker user name, optional")
    public static let mqttPassword = TextKey("mqtt.password", "", .file, kind: .optionalText, secret: true,
                                             help: "broker password, optional; never shown or logged")
    public static let gpioChip = TextKey("gpio.chip", "gpiochip0", .file,
                                         help: "GPIO chip by name, path, label or number (Raspberry Pi 5 header: pinctrl-rp1)")
    public static let paymentSigning = TextKey("payment.signing", "off", .file, kind: .choice(Signature.Mode.allCases.map(\.rawValue)),
                                               help: "required: payments, cmd and config messages must carry a valid Ed25519 signature by a key in payment.keys (docs/signing.md)")
    public static let paymentKeys = TextKey("payment.keys", "/etc/soundbox/keys", .file, kind: .path,
                                            help: "folder of the backend's Ed25519 public keys (*.pem, *.pub); re-read on SIGHUP")
    public static let logLevel = TextKey("log.level", "info", .local, kind: .choice(["info", "debug"]), help: "debug adds amounts and per-clip detail")
}

extension IntKey {
    public static let audioVolume = IntKey("audio.volume", 6, 0...10, .remote, help: "volume 0-10, 2.5 dB a step (10 = full scale)")
    public static let audioMinVolume = IntKey("audio.min_volume", 0, 0...10, .remote,
                                              help: "payments are never spoken quieter than this, whatever audio.volume (which it does not change)")
    public static let queueStaleAfter = IntKey("queue.stale_after_s", 600, 0...604_800, .remote,
                                               help: "a payment older than this when its turn comes is expired, not spoken, if the clock is synchronised (0 = never)")
    public static let queueRetentionDays = IntKey("queue.retention_days", 7, 1...365, .remote, help: "duplicate window and age of history kept")
    public static let queueHistoryMax = IntKey("queue.history_max", 10000, 100...1_000_000, .remote, help: "finished payments kept at most")
    public static let voiceTargetLUFS = IntKey("voice.target_lufs", -16, -40 ... -5, .file,
                                               help: "soundboxctl voice build: the loudness (LUFS, ITU-R BS.1770) every clip is brought to")
    public static let voiceTruePeak = IntKey("voice.true_peak_dbtp", -1, -12...0, .file,
                                             help: "soundboxctl voice build: no clip's true peak above this (dBTP)")
    public static let queueSummaryMin = IntKey("queue.summary_min", 3, 0...100_000, .remote,
                                               help: "at start and after a reconnect, this many waiting payments older than queue.summary_after_s are spoken as one offline summary, not one by one (0 = never)")
    public static let queueSummaryAfter = IntKey("queue.summary_after_s", 60, 0...604_800, .remote,
                                                 help: "how old (by its ts, else its acceptance) a waiting payment must be to go into the offline summary")
    public static let mqttPort = IntKey("mqtt.port", 0, 0...65535, .file, help: "broker port; 0 = 1883, or 8883 with TLS")
    public static let mqttKeepalive = IntKey("mqtt.keepalive", 30, 5...3600, .file,
                                             help: "seconds between keep-alive pings; a silent link is noticed after 1.5 times this")
    public static let mqttReconnectMax = IntKey("mqtt.reconnect_max_s", 60, 2...3600, .file,
                                                help: "longest wait between reconnect attempts (exponential from 1 s, with jitter), also after a takeover; a link lost within this + 30 s of coming up counts towards one")
    public static let gpioDebounce = IntKey("gpio.debounce_ms", 30, 1...500, .file, help: "software debounce of the buttons and the switch")
}

extension BoolKey {
    public static let audioNullRealtime = BoolKey("audio.null_realtime", true, .local,
                                                  help: "with audio.output = null: take as long as the sound would (false: instant, for tests)")
    public static let audioMute = BoolKey("audio.mute", false, .remote, help: "true: payments are recorded as muted, not spoken")
    public static let mqttEnabled = BoolKey("mqtt.enabled", true, .file,
                                            help: "false: no broker connection (payments only through soundboxctl say)")
    public static let mqttLinkPrompts = BoolKey("mqtt.link_prompts", true, .remote,
                                                help: "speak 网络已断开 when the broker link has been down 10 s (at most once a minute; never while a takeover is suspected), 网络已连接 when it comes back after that")
    public static let gpioEnabled = BoolKey("gpio.enabled", true, .file, help: "false: no mute switch, buttons or LED")
}

extension AmountKey {
    public static let paymentMaxAmount = AmountKey("payment.max_amount", "99999999.99", .local, help: "larger payments are rejected")
}

/// Per GPIO function (mute, vol_up, vol_down, led): line offset (-1 = not
/// fitted), active-low, bias. Defaults: a Raspberry Pi 4/5 header, BCM
/// numbering, buttons and switch to ground with pull-ups (board/).
public struct GPIOKeys: Sendable {
    public let function: String
    public let line: IntKey
    public let activeLow: BoolKey
    public let bias: TextKey

    init(_ fn: String, line: Int, activeLow: Bool, bias: String) {
        function = fn
        let what = fn == "led" ? "output" : "input"
        self.line = IntKey("gpio.\(fn).line", line, -1...1023, .file, help: "line offset of the \(fn) \(what) on gpio.chip; -1 = not fitted")
        self.activeLow = BoolKey("gpio.\(fn).active_low", activeLow, .file, help: "true: the \(fn) is active when the line is low")
        self.bias = TextKey("gpio.\(fn).bias", bias, .file, kind: .choice(["as-is", "disable", "pull-up", "pull-down"]), help: "bias of the \(fn) line")
    }

    public static let mute = GPIOKeys("mute", line: 17, activeLow: true, bias: "pull-up")
    public static let volumeUp = GPIOKeys("vol_up", line: 27, activeLow: true, bias: "pull-up")
    public static let volumeDown = GPIOKeys("vol_down", line: 22, activeLow: true, bias: "pull-up")
    public static let led = GPIOKeys("led", line: 23, activeLow: false, bias: "as-is")
    public static let all = [mute, volumeUp, volumeDown, led]
}

public enum ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownKey(String)
    case badValue(key: String, value: String, allowed: String)
    case syntax(String)

    public var description: String {
        switch self {
        case .unknownKey(let k): "unknown key '\(TextFile.excerpt(k))'; known keys: \(ConfigKey.all.map(\.name).joined(separator: ", "))"
        case .badValue(let k, let v, let allowed): "\(k) = '\(TextFile.excerpt(v))' is not allowed; expected \(allowed)"
        case .syntax(let why): why
        }
    }
}

/// A `ConfigError` located in a file: "path:line: message".
public struct ConfigFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let source: String
    public let line: Int?
    public let error: ConfigError
    public init(source: String, line: Int?, error: ConfigError) { self.source = source; self.line = line; self.error = error }
    public var description: String { "\(source)\(line.map { ":\($0)" } ?? ""): \(error)" }
}

extension StringProtocol {
    /// Without leading and trailing whitespace.
    var trimmed: String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
