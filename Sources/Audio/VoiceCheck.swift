import Soundbox

/// `soundboxctl voice check DIR`: everything wrong with a voice pack,
/// each problem naming the clip it concerns.
public struct VoiceCheckReport: Sendable, Encodable {
    public struct Finding: Sendable, Encodable, Equatable {
        public var clip: String?
        public var problem: String
    }
    public var pack: String
    public var grammar: String?
    public var clips: Int
    public var errors: [Finding] = []
    public var warnings: [Finding] = []
    public var ok: Bool { errors.isEmpty }
    /// The pack as decoded for the check (not encoded), for what else a
    /// caller measures of it (soundboxctl's loudness).
    public var loaded: LoadedPack?

    enum CodingKeys: String, CodingKey { case pack, grammar, clips, errors, warnings, ok }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(pack, forKey: .pack)
        try c.encodeIfPresent(grammar, forKey: .grammar)
        try c.encode(clips, forKey: .clips)
        try c.encode(errors, forKey: .errors)
        try c.encode(warnings, forKey: .warnings)
        try c.encode(ok, forKey: .ok)
    }

    /// Decodes every clip of the pack in `directory` and checks the
    /// manifest, the grammar's clip list and the fallback pack.
    public static func check(directory: String) -> VoiceCheckReport {
        let trimmed = directory.hasSuffix("/") && directory.count > 1 ? String(directory.dropLast()) : directory
        let slash = trimmed.lastIndex(of: "/")
        let parent = slash.map { String(trimmed[..<$0]) } ?? "."
        let name = slash.map { String(trimmed[trimmed.index(after: $0)...]) } ?? trimmed
        var report = VoiceCheckReport(pack: trimmed, clips: 0)
        let manifest: VoicePackManifest
        do { manifest = try VoicePackManifest.load(directory: trimmed) } catch {
            report.errors.append(.init(clip: nil, problem: error.description))
            return report
        }
        report.grammar = manifest.grammar
        report.clips = manifest.clips.count
        if ConfigKey.Kind.packName.parse(name) == nil {
            report.warnings.append(.init(clip: nil, problem: "folder name '\(TextFile.excerpt(name))' is not a pack name soundboxd loads (1-32 letters, digits, '-' or '_')"))
        }
        // This folder alone, under its own name, whatever it is.
        let bank = VoiceBank(catalog: VoiceCatalog(directory: parent.isEmpty ? "/" : parent, packs: [name: manifest]),
                             format: PCMFormat(sampleRate: manifest.format.sampleRate, channels: manifest.format.channels))
        let pack: LoadedPack
        do { pack = try bank.load(name) } catch {
            report.errors.append(.init(clip: nil, problem: error.description))
            return report
        }
        report.loaded = pack
        for (clip, why) in pack.broken.sorted(by: { $0.key < $1.key }) {
            report.errors.append(.init(clip: clip, problem: why))
        }
        let used = Set(pack.grammar.clipNames)
        for clip in manifest.clips.keys.sorted() where !used.contains(clip) {
            report.warnings.append(.init(clip: clip, problem: "not used by grammar \(manifest.grammar)"))
        }
        for (clip, pcm) in pack.clips.sorted(by: { $0.key < $1.key }) {
            let seconds = bank.format.duration(samples: pcm.count)
            if seconds > 3 { report.warnings.append(.init(clip: clip, problem: "long clip (\(Int(seconds * 1000)) ms)")) }
        }
        if let fb = manifest.fallback {
            if fb == name {
                report.errors.append(.init(clip: nil, problem: "fallback names the pack itself"))
            } else if (try? VoicePackManifest.load(directory: bank.directory + "/" + fb)) == nil {
                report.errors.append(.init(clip: nil, problem: "fallback pack '\(TextFile.excerpt(fb))' not found or invalid next to this pack"))
            }
        }
        return report
    }
}
