import FoundationEssentials

/// A voice pack's `manifest.json` (docs/voice-packs.md). A pack is a folder
/// holding this file and one audio file per clip; the folder's name is the
/// pack's name, which `fallback` refers to.
public struct VoicePackManifest: Codable, Sendable, Equatable {
    public struct Format: Codable, Sendable, Equatable {
        public var codec: String
        public var sampleRate: Int
        public var channels: Int
        enum CodingKeys: String, CodingKey { case codec, sampleRate = "sample_rate", channels }
    }
    public var formatVersion: Int
    public var name: String
    public var language: String
    /// A name from `Grammars.all`.
    public var grammar: String
    public var currency: String?
    /// The pack (a sibling folder) that supplies clips this one lacks.
    public var fallback: String?
    public var format: Format
    /// Silence between two clips, in milliseconds.
    public var gapMs: Int?
    public var source: String?
    /// Clip name → file name inside the pack folder.
    public var clips: [String: String]

    enum CodingKeys: String, CodingKey {
        case formatVersion = "format_version", name, language, grammar, currency, fallback, format
        case gapMs = "gap_ms", source, clips
    }

    public static let defaultGapMs = 40
    public var gap: Int { gapMs ?? Self.defaultGapMs }

    /// Reads and validates `<directory>/manifest.json`.
    public static func load(directory: String) throws(VoicePackError) -> VoicePackManifest {
        let path = directory + "/manifest.json"
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            let exists = FileManager.default.fileExists(atPath: path)
            throw VoicePackError(path: path, message: exists ? "cannot be read" : "no manifest.json here: is this a voice pack folder?")
        }
        let m: VoicePackManifest
        do { m = try JSONDecoder().decode(VoicePackManifest.self, from: data) } catch let e as DecodingError {
            throw VoicePackError(path: path, message: Self.explain(e))
        } catch {
            throw VoicePackError(path: path, message: "not valid JSON")
        }
        if let problem = m.problem { throw VoicePackError(path: path, message: problem) }
        return m
    }

    /// The grammar this pack speaks; `load` guarantees it exists.
    public var grammarImplementation: any Grammar { Grammars.named(grammar)! }

    /// The first thing wrong with the manifest's own fields, if any.
    var problem: String? {
        if formatVersion != 1 { return "format_version \(formatVersion) is not supported (only 1)" }
        if Grammars.named(grammar) == nil {
            return "grammar '\(grammar)' is unknown; known: \(Grammars.all.map(\.name).joined(separator: ", "))"
        }
        if format.codec != "mp3" { return "format.codec '\(format.codec)' is not supported (only mp3)" }
        if !Self.sampleRates.contains(format.sampleRate) {
            return "format.sample_rate \(format.sampleRate) is not an mp3 rate (\(Self.sampleRates.map(String.init).joined(separator: ", ")))"
        }
        if format.channels != 1 && format.channels != 2 { return "format.channels must be 1 or 2" }
        if !(0...500).contains(gap) { return "gap_ms \(gap) is out of range 0...500" }
        if let bad = clips.first(where: { $0.value.isEmpty || $0.value.contains("/") || $0.value.hasPrefix(".") }) {
            return "clip '\(bad.key)': file name '\(bad.value)' must be a plain file name inside the pack folder"
        }
        return nil
    }

    /// Clips the grammar can ask for that the pack does not list.
    public var missingClips: [String] { grammarImplementation.clipNames.filter { clips[$0] == nil } }

    static let sampleRates = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000]

    private static func explain(_ e: DecodingError) -> String {
        func at(_ path: [any CodingKey]) -> String {
            path.isEmpty ? "the top level" : "'" + path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") + "'"
        }
        switch e {
        case .keyNotFound(let key, let c): return "key \(at(c.codingPath + [key])) is missing"
        case .typeMismatch(let type, let c): return "\(at(c.codingPath)) must be a \(type)"
        case .valueNotFound(let type, let c): return "\(at(c.codingPath)) must be a \(type), not null"
        case .dataCorrupted(let c): return c.codingPath.isEmpty ? "not valid JSON" : "\(at(c.codingPath)) is invalid"
        @unknown default: return "not a valid manifest"
        }
    }
}

public struct VoicePackError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var message: String
    public init(path: String, message: String) { self.path = path; self.message = message }
    public var description: String { "\(path): \(message)" }
}
