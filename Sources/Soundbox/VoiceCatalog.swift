/// The voice packs installed in `voice.dir`, found once at start: the only
/// names the daemon accepts for `voice.lang`, a payment's `lang` or
/// `say --lang`, so no name can make it read outside `voice.dir` or load a
/// pack twice under two spellings. Immutable: shared by every thread.
public struct VoiceCatalog: Sendable {
    public let directory: String
    /// Valid packs by folder name.
    public let packs: [String: VoicePackManifest]
    /// Folders that look like packs (they hold a manifest.json) but are
    /// not usable, and why.
    public let problems: [String: String]

    public init(directory: String, packs: [String: VoicePackManifest], problems: [String: String] = [:]) {
        self.directory = directory; self.packs = packs; self.problems = problems
    }

    /// Reads every `<directory>/<name>/manifest.json` whose folder name is a
    /// valid pack name (letters, digits, '-', '_').
    public static func scan(directory: String) -> VoiceCatalog {
        var packs: [String: VoicePackManifest] = [:], problems: [String: String] = [:]
        for name in Files.list(directory).sorted() where ConfigKey.Kind.isPackName(name) {
            let dir = directory + "/" + name
            // A manifest that is a broken or looping link is a problem to report, not no pack.
            guard Files.exists(dir + "/manifest.json") || Files.linkTarget(dir + "/manifest.json") != nil else { continue }
            do { packs[name] = try VoicePackManifest.load(directory: dir) } catch { problems[name] = error.message }
        }
        return VoiceCatalog(directory: directory, packs: packs, problems: problems)
    }

    /// Installed pack names, sorted.
    public var names: [String] { packs.keys.sorted() }

    /// The installed pack called `name`, exactly or but for case (`zh-cn`
    /// is `zh-CN`); nil for anything else, paths included.
    public func canonical(_ name: String) -> String? {
        if packs[name] != nil { return name }
        let lower = name.lowercased()
        return packs.keys.first { $0.lowercased() == lower }
    }

    /// The currency a pack reads: its manifest's, else its grammar's default.
    public func currency(of pack: String) -> String? {
        packs[pack].map { $0.currency ?? $0.grammarImplementation.defaultCurrency }
    }

    /// Which pack reads a payment, and why it is not the one asked for.
    public struct Reader: Sendable, Equatable {
        /// The pack that speaks it (the chime's words around it: none).
        public var pack: String
        /// The `lang` the payment asked for when it is not installed (it is
        /// then read by the default pack): for status and doctor.
        public var missing: String?
        /// No installed pack reads the payment's currency: it is announced
        /// with the chime, never with another currency's word.
        public var chime: Bool

        public init(pack: String, missing: String? = nil, chime: Bool = false) {
            self.pack = pack; self.missing = missing; self.chime = chime
        }
    }

    /// The pack for a payment in `lang` (nil: `defaultPack`, voice.lang) and
    /// `currency` (nil: the pack's own), along the fallback chain
    /// (docs/grammars.md): the payment's `lang` if installed, else
    /// voice.lang — each with the packs its manifest falls back to — as
    /// long as it reads the currency; else any installed pack that reads it
    /// (English first, then by name: an INR payment on a zh-CN box is read
    /// by en-IN, not by whichever of the Indic packs sorts first); else the
    /// chime.
    public func reader(lang: String?, currency: String?, defaultPack: String) -> Reader {
        var missing: String?
        var first = defaultPack
        if let lang {
            if let found = canonical(lang) { first = found } else { missing = lang }
        }
        guard let currency else { return Reader(pack: first, missing: missing) }
        for start in [first, defaultPack] {
            var seen: Set<String> = []
            var current: String? = start
            while let pack = current, seen.insert(pack).inserted {
                if self.currency(of: pack) == currency { return Reader(pack: pack, missing: missing) }
                current = packs[pack]?.fallback
            }
        }
        let reads = { (name: String) in self.currency(of: name) == currency }
        if let any = names.first(where: { $0.hasPrefix("en-") && reads($0) }) ?? names.first(where: reads) {
            return Reader(pack: any, missing: missing)
        }
        return Reader(pack: first, missing: missing, chime: true)
    }

    /// Why a payment in `currency` is announced with the chime (no pack reads it).
    public func chimeReason(_ currency: String) -> String {
        // By currency, so that fourteen packs still make a short line: "INR: as-IN en-IN …; CNY: zh-CN".
        var byCurrency: [(currency: String, packs: [String])] = []
        for name in names {
            guard let c = self.currency(of: name) else { continue }
            if let i = byCurrency.firstIndex(where: { $0.currency == c }) { byCurrency[i].packs.append(name) } else { byCurrency.append((c, [name])) }
        }
        let readers = byCurrency.map { "\($0.currency): \($0.packs.joined(separator: " "))" }
        return "chime: no installed voice pack reads \(currency) (\(readers.isEmpty ? "none installed" : readers.joined(separator: "; ")))"
    }
}

extension VoiceCatalog {
    /// Where the voice packs are when `voice.dir` is not set: beside the
    /// running executable first — `<prefix>/share/soundbox/voices` for a
    /// binary in `<prefix>/bin` (so /usr/bin/soundboxctl finds
    /// /usr/share/soundbox/voices, and an unpacked package finds its own),
    /// then the `voices/` of the source checkout a binary was built in
    /// (`.build/release/soundboxctl`) — and else the installed default.
    public static func defaultDirectory(executable: String? = nil) -> String {
        let exe = executable ?? Files.linkTarget("/proc/self/exe") ?? ""
        func parent(_ p: String) -> String {
            guard let slash = p.lastIndex(of: "/") else { return "" }
            return slash == p.startIndex ? "/" : String(p[..<slash])
        }
        func holdsPacks(_ dir: String) -> Bool {
            Files.list(dir).contains { Files.exists(dir + "/" + $0 + "/manifest.json") }
        }
        var dir = parent(exe)
        let installed = parent(dir) + "/share/soundbox/voices"
        if !dir.isEmpty && holdsPacks(installed) { return installed }
        for _ in 0..<6 where dir.count > 1 {
            if Files.exists(dir + "/Package.swift") && holdsPacks(dir + "/voices") { return dir + "/voices" }
            dir = parent(dir)
        }
        return TextKey.voiceDir.key.defaultValue
    }
}
