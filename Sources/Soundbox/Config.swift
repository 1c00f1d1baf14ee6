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

    /// Every key with its effective value, in `ConfigKey.all` order.
    public var effective: [(key: ConfigKey, value: String)] { ConfigKey.all.map { ($0, self[$0]) } }

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
    /// false for keys that only take effect at start (paths, sockets):
    /// `config set` refuses them.
    public let runtime: Bool

    public init(name: String, defaultValue: String, kind: Kind, runtime: Bool = true, help: String) {
        self.name = name; self.defaultValue = defaultValue; self.kind = kind; self.runtime = runtime; self.help = help
    }

    public enum Kind: Sendable, Hashable {
        case text
        case integer(ClosedRange<Int>)
        case choice([String])
        case amount

        /// Why `value` is not allowed, phrased as what is allowed; nil if fine.
        func problem(with value: String) -> String? {
            switch self {
            case .text:
                return value.isEmpty ? "a non-empty value" : nil
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
    public static let logLevel = ConfigKey(name: "log.level", defaultValue: "info", kind: .choice(["info", "debug"]),
                                           help: "debug adds amounts and per-clip detail")

    public static let all: [ConfigKey] = [
        stateDir, controlSocket, controlGroup, voiceDir, voiceLang, audioOutput, audioDevice, audioWavFile,
        audioNullRealtime, audioVolume, audioMute, queueStaleAfter, queueRetentionDays, queueHistoryMax,
        paymentMaxAmount, logLevel,
    ]

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
