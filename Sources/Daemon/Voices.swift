import Soundbox
import SoundboxAudio
import Synchronization

/// The voice packs installed at start (the only names accepted anywhere)
/// and what is wrong with them, for ingest, the scheduler, status and doctor.
final class Voices: Sendable {
    let catalog: VoiceCatalog
    private let state = Mutex(State())
    private let log = Log("voice")

    private struct State {
        /// Pack → problem (broken clips, unreadable manifest).
        var problems: [String: String] = [:]
        /// Pack → clip count, for packs that loaded.
        var loaded: [String: Int] = [:]
        /// Packs payments asked for that are not installed (a few, newest last).
        var missing: [String] = []
    }

    /// At most this many missing names are remembered: hostile payments
    /// cannot grow the list.
    static let missingCap = 8

    init(catalog: VoiceCatalog) {
        self.catalog = catalog
        state.withLock { $0.problems = catalog.problems }
        for (name, why) in catalog.problems { log.error("voice_unavailable", ["pack": name, "error": why]) }
    }

    /// The pack `name` (installed), decoded on first use — each installed
    /// pack at most once, however it is asked for — with the clips it could
    /// not use logged and reported. Nil if it cannot be loaded. Called at
    /// start and from the scheduler thread (which owns `bank`).
    @discardableResult
    func pack(_ name: String, from bank: VoiceBank) -> LoadedPack? {
        let known = bank.packs[name] != nil
        do {
            let pack = try bank.load(name)
            if !known {
                for (clip, why) in pack.broken.sorted(by: { $0.key < $1.key }) {
                    log.warning("clip_broken", ["pack": name, "clip": clip, "error": why])
                }
                state.withLock { s in
                    s.loaded[name] = pack.clips.count
                    s.problems[name] = pack.broken.isEmpty ? nil
                        : "\(pack.broken.count) clips missing or broken (\(pack.broken.keys.sorted().joined(separator: " "))); they play from the fallback pack or as a chime"
                }
            }
            return pack
        } catch {
            if !known && state.withLock({ $0.problems[name] == nil }) {
                log.error("voice_unavailable", ["pack": name, "error": error.description])
                state.withLock { $0.problems[name] = error.description }
            }
            return nil
        }
    }

    /// A payment asked for `lang`, which is not installed: it is read by
    /// voice.lang or another pack (the fallback chain); status and doctor say so.
    func noteMissing(_ lang: String) {
        let new = state.withLock { s -> Bool in
            guard !s.missing.contains(lang) else { return false }
            s.missing.append(lang)
            if s.missing.count > Self.missingCap { s.missing.removeFirst() }
            return true
        }
        if new { log.warning("voice_missing", ["lang": lang, "hint": "read by voice.lang, else by a pack that reads its currency; install the pack to read it"]) }
    }

    var missing: [String] { state.withLock { $0.missing } }

    /// Whether the default pack `lang` is installed and whole, and a line about it.
    func health(default lang: String) -> (ok: Bool, detail: String) {
        state.withLock { s in
            guard catalog.packs[lang] != nil else {
                return (false, "voice.lang \(lang) is not installed in \(catalog.directory) (installed: \(catalog.names.isEmpty ? "none" : catalog.names.joined(separator: ", "))); payments play as a chime")
            }
            if let problem = s.problems[lang] { return (false, "\(lang): \(problem)") }
            let clips = s.loaded[lang].map { "\($0) clips" } ?? "not loaded yet"
            return (true, "\(lang): \(clips); installed: \(catalog.names.joined(separator: ", "))")
        }
    }
}
