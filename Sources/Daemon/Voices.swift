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

    init(catalog: VoiceCatalog) { self.catalog = catalog }

    /// Decodes every installed pack once (the scheduler then never decodes),
    /// logging each clip that cannot be used.
    func loadAll(into bank: VoiceBank) {
        var problems = catalog.problems, loaded: [String: Int] = [:]
        for name in catalog.names {
            do {
                let pack = try bank.load(name)
                loaded[name] = pack.clips.count
                for (clip, why) in pack.broken.sorted(by: { $0.key < $1.key }) {
                    log.warning("clip_broken", ["pack": name, "clip": clip, "error": why])
                }
                if !pack.broken.isEmpty {
                    problems[name] = "\(pack.broken.count) clips missing or broken (\(pack.broken.keys.sorted().joined(separator: " "))); they play from the fallback pack or as a chime"
                }
            } catch {
                log.error("voice_unavailable", ["pack": name, "error": error.description])
                problems[name] = error.description
            }
        }
        for (name, why) in catalog.problems { log.error("voice_unavailable", ["pack": name, "error": why]) }
        state.withLock { $0.problems = problems; $0.loaded = loaded }
    }

    /// A payment asked for `lang`, which is not installed: it is read by
    /// the default pack; status and doctor say so.
    func noteMissing(_ lang: String) {
        let new = state.withLock { s -> Bool in
            guard !s.missing.contains(lang) else { return false }
            s.missing.append(lang)
            if s.missing.count > Self.missingCap { s.missing.removeFirst() }
            return true
        }
        if new { log.warning("voice_missing", ["lang": lang, "hint": "read by voice.lang instead; install the pack to read it"]) }
    }

    var missing: [String] { state.withLock { $0.missing } }

    /// Whether the default pack `lang` is installed and whole, and a line about it.
    func health(default lang: String) -> (ok: Bool, detail: String) {
        state.withLock { s in
            guard catalog.packs[lang] != nil else {
                return (false, "voice.lang \(lang) is not installed in \(catalog.directory) (installed: \(catalog.names.isEmpty ? "none" : catalog.names.joined(separator: ", "))); payments play as a chime")
            }
            if let problem = s.problems[lang] { return (false, "\(lang): \(problem)") }
            return (true, "\(lang): \(s.loaded[lang] ?? 0) clips; installed: \(catalog.names.joined(separator: ", "))")
        }
    }
}
