import Soundbox
import SoundboxStore
import Synchronization

/// The effective configuration (docs/config.md "Layers"): the file with the
/// persisted overlay (`config set`, `volume`, the buttons, remote config) on
/// top. Keys of scope `file` keep the values read at start until a restart,
/// whatever SIGHUP re-reads or the overlay holds; who may change which key
/// is the key's scope (technician: `local`, backend: `remote`).
final class Settings: Sendable {
    private struct State {
        /// The file (and flags) as read at start: what `file`-scope keys use.
        var start: Config
        /// The file as last read.
        var file: Config
        var overlay: [String: String]
        var current: Config
        /// `file`-scope keys changed in the file since start: key → value in the file.
        var restartNeeded: [String: String] = [:]
        /// Overlay changes not yet persisted (storage failing): written with the next change.
        var unsaved: [String: String] = [:]
    }
    private let state: Mutex<State>
    private let storage: Storage
    let voices: VoiceCatalog
    private let log = Log("config")

    /// The hardware mute switch (GPIO), on top of `audio.mute`.
    let switchMuted = Atomic<Bool>(false)

    init(file: Config, storage: Storage, voices: VoiceCatalog) {
        self.storage = storage
        self.voices = voices
        var overlay = storage.overlay()
        // Entries the overlay may no longer hold (a key now file-only, a
        // pack no longer installed) are dropped, and said so.
        var dropped: [String: String?] = [:]
        for (k, v) in overlay {
            let why: String?
            if let key = ConfigKey.named(k) {
                why = key.scope == .file ? "only the settings file may set it" : Self.problem(key, v, voices)
            } else {
                why = "unknown key"
            }
            if let why {
                log.warning("overlay_ignored", ["key": k, "value": v, "reason": why])
                overlay[k] = nil
                dropped[k] = .some(nil)
            }
        }
        if !dropped.isEmpty { try? storage.updateOverlay(dropped) }
        let current = file.applying(overlay).0
        state = Mutex(State(start: file, file: file, overlay: overlay, current: current))
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
    }

    var current: Config { state.withLock { $0.current } }

    /// Muted by the setting or the switch: payments are recorded, not spoken.
    var muted: Bool { current[.audioMute] || switchMuted.load(ordering: .relaxed) }

    /// `file`-scope keys whose new value in the file waits for a restart,
    /// with the value in use and the one in the file.
    var restartNeeded: [(key: String, inUse: String, inFile: String)] {
        state.withLock { s in
            s.restartNeeded.sorted { $0.key < $1.key }.map { k, v in (k, s.current.shown(ConfigKey.named(k)!), v) }
        }
    }

    /// Replaces the file layer (SIGHUP); the overlay stays on top, and
    /// `file`-scope keys keep their values from start (logged).
    func reload(file: Config) {
        let (current, waiting) = state.withLock { s -> (Config, [String]) in
            var layered = file
            s.restartNeeded = [:]
            for key in ConfigKey.all where key.scope == .file {
                if file.text(key) != s.start.text(key) { s.restartNeeded[key.name] = file.shown(key) }
                layered.copy(key, from: s.start)
            }
            s.file = layered
            s.current = layered.applying(s.overlay.merging(s.unsaved) { $1 }).0
            return (s.current, s.restartNeeded.keys.sorted())
        }
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
        if !waiting.isEmpty {
            log.warning("restart_needed", ["keys": waiting.joined(separator: ","),
                                           "hint": "these take effect when soundboxd restarts; the old values stay in use"])
        }
    }

    /// Why each of `changes` cannot be applied by `who` (unknown key, bad
    /// value, a key `who` may not set); empty when all can.
    func problems(_ changes: [String: String], from who: ConfigKey.Scope) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in changes {
            guard let key = ConfigKey.named(k) else { out[k] = "unknown key"; continue }
            if let why = key.refusal(who) { out[k] = why; continue }
            if let why = Self.problem(key, v, voices) { out[k] = why }
        }
        return out
    }

    /// Validates and persists `changes` all-or-nothing, then applies them.
    /// `meta` is persisted in the same transaction. When storage fails the
    /// changes still apply (and are persisted with a later change), except
    /// that an error is thrown for the caller to report.
    @discardableResult
    func set(_ changes: [String: String], from who: ConfigKey.Scope, meta: [String: String] = [:]) throws(ConfigSetError) -> Config {
        var normalized: [String: String] = [:]
        for (k, v) in changes.sorted(by: { $0.key < $1.key }) {
            guard let key = ConfigKey.named(k) else { throw .invalid(.unknownKey(k)) }
            if let why = key.refusal(who) { throw .refused(k, why) }
            if let why = Self.problem(key, v, voices) { throw .refused(k, why) }
            // A pack by its installed name (zh-cn → zh-CN).
            normalized[k] = key == TextKey.voiceLang.key ? voices.canonical(v) ?? v : v
        }
        var persistError: String?
        let toSave = state.withLock { $0.unsaved.merging(normalized) { $1 } }
        do { try storage.updateOverlay(toSave.mapValues { Optional($0) }, meta: meta) } catch {
            persistError = error.description
        }
        let current = state.withLock { s -> Config in
            if persistError == nil { s.overlay.merge(toSave) { $1 }; s.unsaved = [:] } else { s.unsaved = toSave }
            s.current = s.file.applying(s.overlay.merging(s.unsaved) { $1 }).0
            return s.current
        }
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
        log.info("set", ["keys": normalized.keys.sorted().joined(separator: ","), "by": "\(who)"])
        if let persistError {
            log.warning("not_persisted", ["keys": normalized.keys.sorted().joined(separator: ","), "error": persistError])
            throw .storage(persistError)
        }
        return current
    }

    /// Why `value` is not allowed for `key` on this box, or nil.
    static func problem(_ key: ConfigKey, _ value: String, _ voices: VoiceCatalog) -> String? {
        guard key.kind.parse(value) != nil else {
            return ConfigError.badValue(key: key.name, value: value, allowed: key.kind.allowed).description
        }
        if key == TextKey.voiceLang.key, voices.canonical(value) == nil {
            return installedPackProblem(value, voices)
        }
        return nil
    }

    static func installedPackProblem(_ value: String, _ voices: VoiceCatalog) -> String {
        ConfigError.badValue(key: TextKey.voiceLang.key.name, value: value,
                             allowed: "an installed voice pack (" + (voices.names.isEmpty ? "none installed" : voices.names.joined(separator: ", ")) + ")").description
    }
}

enum ConfigSetError: Error, CustomStringConvertible {
    case invalid(ConfigError)
    case refused(String, String)
    case storage(String)

    var description: String {
        switch self {
        case .invalid(let e): e.description
        case .refused(_, let why): why
        case .storage(let why): "applied, but not saved (it is lost at a restart): \(why)"
        }
    }
}
