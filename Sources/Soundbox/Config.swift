import FoundationEssentials

/// The technician's configuration: `key = value` lines with dotted keys,
/// `#` comments (whole lines, or after whitespace), blank lines allowed.
/// Every key, its default and its range: docs/config.md. An invalid file is
/// rejected as a whole, naming the file, line, key and allowed values.
public struct Config: Sendable, Equatable {
    public static let defaultPath = "/etc/soundbox/soundbox.conf"

    /// Validated values by key; keys not set have their default.
    private var values: [String: String] = [:]

    public init() {}

    public subscript(key: ConfigKey) -> String { values[key.name] ?? key.defaultValue }

    public func integer(_ key: ConfigKey) -> Int { Int(self[key])! }
    public func bool(_ key: ConfigKey) -> Bool { self[key] == "true" }
    public func amount(_ key: ConfigKey) -> Amount { try! Amount.parse(self[key], max: .wordsMax) }

    /// Every key with its effective value, in `ConfigKey.all` order;
    /// secrets masked.
    public var effective: [(key: ConfigKey, value: String)] { ConfigKey.all.map { ($0, shown($0)) } }

    /// The value as it may be shown to people: a set secret is "********".
    public func shown(_ key: ConfigKey) -> String { key.secret && !self[key].isEmpty ? "********" : self[key] }

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

    /// Sets a key after validating the value (remote config, `config set`).
    public mutating func set(_ name: String, _ value: String) throws(ConfigError) {
        guard let key = ConfigKey.named(name) else { throw .unknownKey(name) }
        if let why = key.kind.problem(with: value) { throw .badValue(key: name, value: value, allowed: why) }
        values[name] = value
    }

    /// Parses a whole file's text; `source` names it in errors.
    public static func parse(_ text: String, source: String) throws(ConfigFileError) -> Config {
        var config = Config()
        var firstLine: [String: Int] = [:]
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = i + 1
            var body = Substring(raw)
            if let hash = body.indices.first(where: { body[$0] == "#" && ($0 == body.startIndex || body[body.index(before: $0)].isWhitespace) }) {
                body = body[..<hash]
            }
            let trimmed = body.trimmed
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw ConfigFileError(source: source, line: line, error: .syntax("expected 'key = value', got '\(trimmed)'"))
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

    /// Reads `path`. A missing file at the default path means all defaults;
    /// a missing file the user named is an error.
    public static func load(path: String?) throws(ConfigFileError) -> Config {
        let file = path ?? defaultPath
        guard let data = FileManager.default.contents(atPath: file) else {
            if path == nil && !FileManager.default.fileExists(atPath: file) { return Config() }
            throw ConfigFileError(source: file, line: nil, error: .syntax("cannot be read"))
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw ConfigFileError(source: file, line: nil, error: .syntax("is not UTF-8 text"))
        }
        return try parse(text, source: file)
    }
}

/// One configuration key: its name, default, allowed values and meaning.
public struct ConfigKey: Sendable, Hashable {
    public let name: String
    public let defaultValue: String
    public let kind: Kind
    public let help: String
    /// false for keys that only take effect at start (paths, sockets, the
    /// broker): `config set` and remote config refuse them.
    public let runtime: Bool
    /// Shown as "********" by `config get`, status and logs.
    public let secret: Bool

    public init(name: String, defaultValue: String, kind: Kind, runtime: Bool = true, secret: Bool = false, help: String) {
        self.name = name; self.defaultValue = defaultValue; self.kind = kind; self.runtime = runtime
        self.secret = secret; self.help = help
    }

    public enum Kind: Sendable, Hashable {
        case text
        /// Text that may be empty: empty means "not set".
        case optionalText
        case integer(ClosedRange<Int>)
        case choice([String])
        case amount

        /// Why `value` is not allowed, phrased as what is allowed; nil if fine.
        func problem(with value: String) -> String? {
            switch self {
            case .text:
                return value.isEmpty ? "a non-empty value" : nil
            case .optionalText:
                return nil
            case .integer(let range):
                guard let n = Int(value), range.contains(n) else {
                    return "an integer \(range.lowerBound)-\(range.upperBound)"
                }
                return nil
            case .choice(let options):
                return options.contains(value) ? nil : "one of " + options.joined(separator: ", ")
            case .amount:
                do { _ = try Amount.parse(value, max: .wordsMax) } catch {
                    return "an amount 0.01-\(Amount.wordsMax) with at most two decimals (\(error))"
                }
                return nil
            }
        }
    }

    public static let stateDir = ConfigKey(name: "state.dir", defaultValue: "/var/lib/soundbox", kind: .text, runtime: false,
                                           help: "folder of the database soundbox.db")
    public static let controlSocket = ConfigKey(name: "control.socket", defaultValue: "/run/soundbox/control.sock", kind: .text,
                                                runtime: false, help: "Unix socket for soundboxctl")
    public static let controlGroup = ConfigKey(name: "control.group", defaultValue: "soundbox", kind: .text, runtime: false,
                                               help: "group owning the control socket (mode 0660); ignored if it does not exist")
    public static let voiceDir = ConfigKey(name: "voice.dir", defaultValue: "/usr/share/soundbox/voices", kind: .text, runtime: false,
                                           help: "folder holding one folder per voice pack")
    public static let voiceLang = ConfigKey(name: "voice.lang", defaultValue: "zh-CN", kind: .text,
                                            help: "voice pack used when a payment names none")
    public static let audioOutput = ConfigKey(name: "audio.output", defaultValue: "alsa", kind: .choice(["alsa", "wav", "null"]),
                                              help: "alsa: the sound card; wav: append to audio.wav_file; null: no sound")
    public static let audioDevice = ConfigKey(name: "audio.device", defaultValue: "default", kind: .text,
                                              help: "ALSA PCM name, e.g. default, hw:0,0, plughw:1, file:'/tmp/o.raw',raw")
    public static let audioWavFile = ConfigKey(name: "audio.wav_file", defaultValue: "/tmp/soundbox.wav", kind: .text,
                                               help: "file written when audio.output = wav")
    public static let audioNullRealtime = ConfigKey(name: "audio.null_realtime", defaultValue: "true", kind: .choice(["true", "false"]),
                                                    help: "with audio.output = null: take as long as the sound would (false: instant, for tests)")
    public static let audioVolume = ConfigKey(name: "audio.volume", defaultValue: "6", kind: .integer(0...10),
                                              help: "volume 0-10, 2.5 dB a step (10 = full scale)")
    public static let audioMinVolume = ConfigKey(name: "audio.min_volume", defaultValue: "0", kind: .integer(0...10),
                                                 help: "payments are never spoken quieter than this, whatever audio.volume (which it does not change)")
    public static let audioMute = ConfigKey(name: "audio.mute", defaultValue: "false", kind: .choice(["true", "false"]),
                                            help: "true: payments are recorded as muted, not spoken")
    public static let queueStaleAfter = ConfigKey(name: "queue.stale_after_s", defaultValue: "600", kind: .integer(0...604_800),
                                                  help: "a payment older than this when its turn comes is expired, not spoken, if the clock is synchronised (0 = never)")
    public static let queueRetentionDays = ConfigKey(name: "queue.retention_days", defaultValue: "7", kind: .integer(1...365),
                                                     help: "duplicate window and age of history kept")
    public static let queueHistoryMax = ConfigKey(name: "queue.history_max", defaultValue: "10000", kind: .integer(100...1_000_000),
                                                  help: "finished payments kept at most")
    public static let paymentMaxAmount = ConfigKey(name: "payment.max_amount", defaultValue: "99999999.99", kind: .amount,
                                                   help: "larger payments are rejected")
    public static let deviceID = ConfigKey(name: "device.id", defaultValue: "", kind: .optionalText, runtime: false,
                                           help: "MQTT client id and topic segment; empty = the hostname")
    public static let mqttEnabled = ConfigKey(name: "mqtt.enabled", defaultValue: "true", kind: .choice(["true", "false"]), runtime: false,
                                              help: "false: no broker connection (payments only through soundboxctl say)")
    public static let mqttHost = ConfigKey(name: "mqtt.host", defaultValue: "localhost", kind: .text, runtime: false,
                                           help: "broker host name (checked against its TLS certificate)")
    public static let mqttPort = ConfigKey(name: "mqtt.port", defaultValue: "0", kind: .integer(0...65535), runtime: false,
                                           help: "broker port; 0 = 1883, or 8883 with TLS")
    public static let mqttPrefix = ConfigKey(name: "mqtt.prefix", defaultValue: "soundbox/v1", kind: .text, runtime: false,
                                             help: "topic prefix: PREFIX/DEVICE/payment ...")
    public static let mqttKeepalive = ConfigKey(name: "mqtt.keepalive", defaultValue: "30", kind: .integer(5...3600), runtime: false,
                                                help: "seconds between keep-alive pings; a silent link is noticed after 1.5 times this")
    public static let mqttTLSCA = ConfigKey(name: "mqtt.tls.ca", defaultValue: "", kind: .optionalText, runtime: false,
                                            help: "CA file; set = TLS 1.2+ with hostname verification (there is no insecure mode)")
    public static let mqttTLSCert = ConfigKey(name: "mqtt.tls.cert", defaultValue: "", kind: .optionalText, runtime: false,
                                              help: "client certificate file (with mqtt.tls.key)")
    public static let mqttTLSKey = ConfigKey(name: "mqtt.tls.key", defaultValue: "", kind: .optionalText, runtime: false,
                                             help: "client private key file")
    public static let mqttUsername = ConfigKey(name: "mqtt.username", defaultValue: "", kind: .optionalText, runtime: false,
                                               help: "broker user name, optional")
    public static let mqttPassword = ConfigKey(name: "mqtt.password", defaultValue: "", kind: .optionalText, runtime: false, secret: true,
                                               help: "broker password, optional; never shown or logged")
    public static let mqttReconnectMax = ConfigKey(name: "mqtt.reconnect_max_s", defaultValue: "60", kind: .integer(2...3600), runtime: false,
                                                   help: "longest wait between reconnect attempts (exponential from 1 s, with jitter)")
    public static let mqttLinkPrompts = ConfigKey(name: "mqtt.link_prompts", defaultValue: "true", kind: .choice(["true", "false"]),
                                                  help: "speak 网络已断开 / 网络已连接 when the broker link goes down or comes back")
    public static let gpioEnabled = ConfigKey(name: "gpio.enabled", defaultValue: "true", kind: .choice(["true", "false"]), runtime: false,
                                              help: "false: no mute switch, buttons or LED")
    public static let gpioChip = ConfigKey(name: "gpio.chip", defaultValue: "gpiochip0", kind: .text, runtime: false,
                                           help: "GPIO chip by name, path, label or number (Raspberry Pi 5 header: pinctrl-rp1)")
    public static let gpioDebounce = ConfigKey(name: "gpio.debounce_ms", defaultValue: "30", kind: .integer(1...500), runtime: false,
                                               help: "software debounce of the buttons and the switch")
    /// Per function (mute, vol_up, vol_down, led): line offset (-1 = not
    /// fitted), active-low, bias. Defaults: a Raspberry Pi 4/5 header, BCM
    /// numbering, buttons and switch to ground with pull-ups (board/).
    public static let gpioFunctions: [(name: String, line: Int, activeLow: Bool, bias: String)] = [
        ("mute", 17, true, "pull-up"), ("vol_up", 27, true, "pull-up"), ("vol_down", 22, true, "pull-up"), ("led", 23, false, "as-is"),
    ]
    static let gpioKeys: [ConfigKey] = gpioFunctions.flatMap { f in [
        ConfigKey(name: "gpio.\(f.name).line", defaultValue: "\(f.line)", kind: .integer(-1...1023), runtime: false,
                  help: "line offset of the \(f.name) \(f.name == "led" ? "output" : "input") on gpio.chip; -1 = not fitted"),
        ConfigKey(name: "gpio.\(f.name).active_low", defaultValue: "\(f.activeLow)", kind: .choice(["true", "false"]), runtime: false,
                  help: "true: the \(f.name) is active when the line is low"),
        ConfigKey(name: "gpio.\(f.name).bias", defaultValue: f.bias, kind: .choice(["as-is", "disable", "pull-up", "pull-down"]), runtime: false,
                  help: "bias of the \(f.name) line"),
    ] }
    public static let logLevel = ConfigKey(name: "log.level", defaultValue: "info", kind: .choice(["info", "debug"]),
                                           help: "debug adds amounts and per-clip detail")

    public static let all: [ConfigKey] = [
        stateDir, controlSocket, controlGroup, voiceDir, voiceLang, audioOutput, audioDevice, audioWavFile,
        audioNullRealtime, audioVolume, audioMinVolume, audioMute, queueStaleAfter, queueRetentionDays, queueHistoryMax,
        paymentMaxAmount, deviceID, mqttEnabled, mqttHost, mqttPort, mqttPrefix, mqttKeepalive, mqttTLSCA, mqttTLSCert,
        mqttTLSKey, mqttUsername, mqttPassword, mqttReconnectMax, mqttLinkPrompts, gpioEnabled, gpioChip, gpioDebounce,
    ] + gpioKeys + [logLevel]

    public static func named(_ name: String) -> ConfigKey? { all.first { $0.name == name } }
}

public enum ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownKey(String)
    case badValue(key: String, value: String, allowed: String)
    case syntax(String)

    public var description: String {
        switch self {
        case .unknownKey(let k): "unknown key '\(k)'; known keys: \(ConfigKey.all.map(\.name).joined(separator: ", "))"
        case .badValue(let k, let v, let allowed): "\(k) = '\(v)' is not allowed; expected \(allowed)"
        case .syntax(let why): why
        }
    }
}

/// A `ConfigError` located in a file: "path:line: message".
public struct ConfigFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let source: String
    public let line: Int?
    public let error: ConfigError
    public var description: String { "\(source)\(line.map { ":\($0)" } ?? ""): \(error)" }
}

extension StringProtocol {
    /// Without leading and trailing whitespace.
    var trimmed: String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
