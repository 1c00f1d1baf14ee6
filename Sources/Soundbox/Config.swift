
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
