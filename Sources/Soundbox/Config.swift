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

    public enum Kind: Sendable, Hashable {
        case text
        case integer(ClosedRange<Int>)
        case choice([String])

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
            }
        }
    }

    public static let voiceDir = ConfigKey(name: "voice.dir", defaultValue: "/usr/share/soundbox/voices", kind: .text,
                                           help: "folder holding one folder per voice pack")
    public static let voiceLang = ConfigKey(name: "voice.lang", defaultValue: "zh-CN", kind: .text,
                                            help: "voice pack used when a payment names none")
    public static let audioOutput = ConfigKey(name: "audio.output", defaultValue: "alsa", kind: .choice(["alsa", "wav", "null"]),
                                              help: "alsa: the sound card; wav: append to audio.wav_file; null: no sound, real-time pacing")
    public static let audioDevice = ConfigKey(name: "audio.device", defaultValue: "default", kind: .text,
                                              help: "ALSA PCM name, e.g. default, hw:0,0, plughw:1, file:'/tmp/o.raw',raw")
    public static let audioWavFile = ConfigKey(name: "audio.wav_file", defaultValue: "/tmp/soundbox.wav", kind: .text,
                                               help: "file written when audio.output = wav")
    public static let audioVolume = ConfigKey(name: "audio.volume", defaultValue: "6", kind: .integer(0...10),
                                              help: "volume 0-10, 2.5 dB a step (10 = full scale)")

    public static let all: [ConfigKey] = [voiceDir, voiceLang, audioOutput, audioDevice, audioWavFile, audioVolume]

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
