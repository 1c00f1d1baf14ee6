import Soundbox

/// A voice pack decoded into memory: every clip as trimmed PCM, plus the
/// clips that could not be decoded and why.
public struct LoadedPack: Sendable {
    public let name: String
    public let directory: String
    public let manifest: VoicePackManifest
    public let clips: [String: [Int16]]
    /// Clip name → why it is unusable (file missing, corrupt, silent).
    public let broken: [String: String]

    public var grammar: any Grammar { manifest.grammarImplementation }
}

/// What `VoiceBank.render` produced: the PCM of one sentence and, for each
/// clip the requested pack could not supply, where it came from instead.
public struct Rendition: Sendable {
    public var samples: [Int16]
    public var format: PCMFormat
    public var substitutions: [Substitution]

    public struct Substitution: Sendable, Equatable {
        public var clip: String
        /// The fallback pack's name, or nil for the built-in chime.
        public var pack: String?
    }
    public var duration: Double { format.duration(samples: samples.count) }
}

/// All voice packs of one folder, decoded once into one PCM format. Turning
/// clip names into a sentence is then only copying (see bench/). Use
/// from one thread at a time.
///
/// Packs are known by their folder names in the bank's catalog (found when
/// the bank is made): a name is looked up there — exactly, or ignoring case
/// — and anything else (a path, `zh-CN/.`) is not a pack. So each
/// installed pack is decoded at most once, whatever spellings are asked for.
public final class VoiceBank {
    public let directory: String
    public let format: PCMFormat
    /// The installed packs (rescanned once when a name is not found, for
    /// tools that create packs after making the bank).
    public private(set) var catalog: VoiceCatalog
    /// Packs by canonical name, each with its fallback chain, loaded on demand.
    public private(set) var packs: [String: LoadedPack] = [:]
    /// The built-in chime in this bank's format.
    public let chime: [Int16]

    public convenience init(directory: String, format: PCMFormat = .standard) {
        self.init(catalog: VoiceCatalog.scan(directory: directory), format: format)
    }

    public init(catalog: VoiceCatalog, format: PCMFormat = .standard) {
        self.catalog = catalog
        directory = catalog.directory
        self.format = format
        chime = Chime.samples(format: format)
    }

    /// The canonical name of an installed pack, or nil.
    public func canonical(_ name: String) -> String? {
        if let found = catalog.canonical(name) { return found }
        guard ConfigKey.Kind.packName.parse(name) != nil else { return nil }
        let rescanned = VoiceCatalog.scan(directory: directory)
        guard rescanned.canonical(name) != nil else { return nil }
        catalog = rescanned
        return rescanned.canonical(name)
    }

    /// Loads a pack and its fallback chain (cycles are cut). A clip that
    /// fails to decode does not fail the pack: it is listed in `broken`
    /// and rendering falls back. Throws for a name that is not an installed
    /// pack and for an unreadable manifest.
    @discardableResult
    public func load(_ requested: String) throws(VoicePackError) -> LoadedPack {
        guard let name = canonical(requested) else {
            if let why = catalog.problems[requested] { throw VoicePackError(path: directory + "/" + requested, message: why) }
            let installed = catalog.names.isEmpty ? "none" : catalog.names.joined(separator: ", ")
            throw VoicePackError(path: directory, message: "no voice pack named '\(requested)' is installed (installed: \(installed))")
        }
        if let p = packs[name] { return p }
        let dir = directory + "/" + name
        let manifest = try VoicePackManifest.load(directory: dir)
        let decoder: MP3Decoder
        do { decoder = try MP3Decoder() } catch {
            throw VoicePackError(path: dir, message: error.description)
        }
        var clips: [String: [Int16]] = [:], broken: [String: String] = [:]
        for (clip, file) in manifest.clips {
            do {
                let pcm = Silence.trim(try decoder.decode(path: dir + "/" + file, to: format), format: format)
                if pcm.isEmpty { broken[clip] = "\(file): silent" } else { clips[clip] = pcm }
            } catch {
                broken[clip] = "\(file): \(error.message)"
            }
        }
        for clip in manifest.missingClips { broken[clip] = "not in manifest.json" }
        let pack = LoadedPack(name: name, directory: dir, manifest: manifest, clips: clips, broken: broken)
        packs[name] = pack
        if let fb = manifest.fallback, fb != name, canonical(fb).map({ packs[$0] == nil }) ?? false {
            _ = try? load(fb)   // a missing fallback pack only means more chimes; `voice check` reports it
        }
        return pack
    }

    /// The PCM for a sentence in a pack's voice, at a volume 0...10: clips
    /// joined with the pack's gap. A clip the pack lacks comes from its
    /// fallback chain, else the built-in chime.
    public func render(_ clips: [String], pack requested: String, volume: Int) throws(VoicePackError) -> Rendition {
        let pack = try load(requested)
        let name = pack.name
        let gap = format.frames(milliseconds: pack.manifest.gap) * format.channels
        var parts: [[Int16]] = []
        var substitutions: [Rendition.Substitution] = []
        parts.reserveCapacity(clips.count)
        for clip in clips {
            let (pcm, from) = lookup(clip, in: pack)
            parts.append(pcm)
            if from != name { substitutions.append(.init(clip: clip, pack: from)) }
        }
        var out: [Int16] = []
        out.reserveCapacity(parts.reduce(0) { $0 + $1.count } + gap * max(0, parts.count - 1))
        for (i, p) in parts.enumerated() {
            if i > 0 { out.append(contentsOf: repeatElement(0, count: gap)) }
            out.append(contentsOf: p)
        }
        Volume.apply(volume, to: &out)
        return Rendition(samples: out, format: format, substitutions: substitutions)
    }

    /// A clip from the pack or the first pack along its fallback chain that
    /// has it; else the chime (pack name nil).
    private func lookup(_ clip: String, in pack: LoadedPack) -> ([Int16], String?) {
        var seen: Set<String> = []
        var current: LoadedPack? = pack
        while let p = current, seen.insert(p.name).inserted {
            if let pcm = p.clips[clip] { return (pcm, p.name) }
            current = p.manifest.fallback.flatMap { catalog.canonical($0) }.flatMap { packs[$0] }
        }
        return (chime, nil)
    }
}
