/// A voice pack's `manifest.json` (docs/voice-packs.md). A pack is a folder
/// holding this file and one audio file per clip; the folder's name is the
/// pack's name, which `fallback` refers to.
public struct VoicePackManifest: Sendable, Equatable {
    public struct Format: Sendable, Equatable {
        public var codec: String
        public var sampleRate: Int
        public var channels: Int
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

    public static let defaultGapMs = 40
    public var gap: Int { gapMs ?? Self.defaultGapMs }

    /// Reads and validates `<directory>/manifest.json`.
    public static func load(directory: String) throws(VoicePackError) -> VoicePackManifest {
        let path = directory + "/manifest.json"
        let bytes: [UInt8]
        do { bytes = try TextFile.read(path, limit: 1 << 20) } catch {
            throw VoicePackError(path: path, message: error.isMissing ? "no manifest.json here: is this a voice pack folder?" : error.phrase)
        }
        let m: VoicePackManifest
        do { m = try VoicePackManifest(json: try JSONValue.parse(bytes)) } catch let e as JSONError {
            throw VoicePackError(path: path, message: "not valid JSON: \(e)")
        } catch let e as VoicePackError {
            throw VoicePackError(path: path, message: e.message)
        } catch {
            throw VoicePackError(path: path, message: "\(error)")
        }
        if let problem = m.problem { throw VoicePackError(path: path, message: problem) }
        return m
    }

    /// The manifest's fields from its JSON (keys as in docs/voice-packs.md;
    /// unknown keys are ignored, `null` is an absent optional).
    init(json: JSONValue) throws(VoicePackError) {
        guard case .object = json else { throw Self.problem("the top level must be an object, not \(json.kindDescription)") }
        let format = try Self.member(json, "format", "")
        guard case .object = format else { throw Self.problem("'format' must be an object, not \(format.kindDescription)") }
        formatVersion = try Self.int(json, "format_version")
        name = try Self.string(json, "name")
        language = try Self.string(json, "language")
        grammar = try Self.string(json, "grammar")
        currency = try Self.optionalString(json, "currency")
        fallback = try Self.optionalString(json, "fallback")
        self.format = Format(codec: try Self.string(format, "codec", "format."), sampleRate: try Self.int(format, "sample_rate", "format."),
                             channels: try Self.int(format, "channels", "format."))
        if let gap = json["gap_ms"], gap != .null { gapMs = try Self.int(json, "gap_ms") } else { gapMs = nil }
        source = try Self.optionalString(json, "source")
        guard case .object(let members) = try Self.member(json, "clips", "") else {
            throw Self.problem("'clips' must be an object of clip names and file names")
        }
        var clips: [String: String] = [:]
        for (clip, file) in members {
            guard case .string(let f) = file else { throw Self.problem("'clips.\(TextFile.excerpt(clip))' must be a string, not \(file.kindDescription)") }
            clips[clip] = f
        }
        self.clips = clips
    }

    private static func problem(_ message: String) -> VoicePackError { VoicePackError(path: "", message: message) }

    private static func member(_ object: JSONValue, _ key: String, _ prefix: String) throws(VoicePackError) -> JSONValue {
        guard let v = object[key], v != .null else { throw problem("key '\(prefix)\(key)' is missing") }
        return v
    }

    private static func string(_ object: JSONValue, _ key: String, _ prefix: String = "") throws(VoicePackError) -> String {
        let v = try member(object, key, prefix)
        guard case .string(let s) = v else { throw problem("'\(prefix)\(key)' must be a string, not \(v.kindDescription)") }
        return s
    }

    private static func optionalString(_ object: JSONValue, _ key: String) throws(VoicePackError) -> String? {
        guard let v = object[key], v != .null else { return nil }
        guard case .string(let s) = v else { throw problem("'\(key)' must be a string or null, not \(v.kindDescription)") }
        return s
    }

    private static func int(_ object: JSONValue, _ key: String, _ prefix: String = "") throws(VoicePackError) -> Int {
        let v = try member(object, key, prefix)
        guard case .number(let text) = v else { throw problem("'\(prefix)\(key)' must be a whole number, not \(v.kindDescription)") }
        guard let n = Int(text) else { throw problem("'\(prefix)\(key)' must be a whole number, not \(text)") }
        return n
    }

    /// The grammar this pack speaks; `load` guarantees it exists.
    public var grammarImplementation: any Grammar { Grammars.named(grammar)! }

    /// The first thing wrong with the manifest's own fields, if any.
    var problem: String? {
        if formatVersion != 1 { return "format_version \(formatVersion) is not supported (only 1)" }
        if Grammars.named(grammar) == nil {
            return "grammar '\(TextFile.excerpt(grammar))' is unknown; known: \(Grammars.all.map(\.name).joined(separator: ", "))"
        }
        if format.codec != "mp3" { return "format.codec '\(TextFile.excerpt(format.codec))' is not supported (only mp3)" }
        if !Self.sampleRates.contains(format.sampleRate) {
            return "format.sample_rate \(format.sampleRate) is not an mp3 rate (\(Self.sampleRates.map(String.init).joined(separator: ", ")))"
        }
        if format.channels != 1 && format.channels != 2 { return "format.channels must be 1 or 2" }
        if !(0...500).contains(gap) { return "gap_ms \(gap) is out of range 0...500" }
        if let bad = clips.first(where: { $0.value.isEmpty || $0.value.contains("/") || $0.value.hasPrefix(".") }) {
            return "clip '\(TextFile.excerpt(bad.key))': file name '\(TextFile.excerpt(bad.value))' must be a plain file name inside the pack folder"
        }
        return nil
    }

    /// Clips the grammar can ask for that the pack does not list.
    public var missingClips: [String] { grammarImplementation.clipNames.filter { clips[$0] == nil } }

    public static let sampleRates = [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000]

}

public struct VoicePackError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var message: String
    public init(path: String, message: String) { self.path = path; self.message = message }
    public var description: String { "\(path): \(message)" }
}
