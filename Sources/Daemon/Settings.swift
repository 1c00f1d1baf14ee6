import Soundbox
import SoundboxStore
import Synchronization

/// The effective configuration: the file (re-read on SIGHUP) with the
/// persisted overlay (`config set`, `volume`, remote config) on top.
final class Settings: Sendable {
    private struct State {
        var file: Config
        var overlay: [String: String]
        var current: Config
    }
    private let state: Mutex<State>
    let store: Store?
    private let log = Log("config")

    init(file: Config, store: Store?) {
        let overlay = (try? store?.overlay()) ?? [:]
        let (current, rejected) = file.applying(overlay)
        state = Mutex(State(file: file, overlay: overlay, current: current))
        self.store = store
        for (k, e) in rejected { log.warning("overlay_ignored", ["key": k, "error": e.description]) }
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
    }

    var current: Config { state.withLock { $0.current } }

    /// The hardware mute switch (GPIO), on top of `audio.mute`.
    let switchMuted = Atomic<Bool>(false)
    /// Muted by the setting or the switch: payments are recorded, not spoken.
    var muted: Bool { current.bool(.audioMute) || switchMuted.load(ordering: .relaxed) }

    /// Replaces the file layer (SIGHUP); the overlay stays on top.
    func reload(file: Config) {
        let current = state.withLock { s -> Config in
            s.file = file
            s.current = file.applying(s.overlay).0
            return s.current
        }
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
    }

    /// Why each of `changes` cannot be applied (unknown key, bad value, or a
    /// key that only takes effect at start); empty when all can.
    func problems(_ changes: [String: String]) -> [String: String] {
        var out: [String: String] = [:]
        var probe = current
        for (k, v) in changes {
            guard let key = ConfigKey.named(k) else { out[k] = "unknown key"; continue }
            guard key.runtime else { out[k] = ConfigSetError.needsRestart(k).description; continue }
            do { try probe.set(k, v) } catch { out[k] = error.description }
        }
        return out
    }

    /// Validates and persists `changes` all-or-nothing, then applies them.
    /// Keys that only take effect at start are refused.
    func set(_ changes: [String: String]) throws(ConfigSetError) -> Config {
        var probe = current
        for (k, v) in changes.sorted(by: { $0.key < $1.key }) {
            guard let key = ConfigKey.named(k) else { throw .invalid(.unknownKey(k)) }
            guard key.runtime else { throw .needsRestart(k) }
            do { try probe.set(k, v) } catch { throw .invalid(error) }
        }
        do { try store?.updateOverlay(changes.mapValues { Optional($0) }) } catch {
            throw .storage(error.description)
        }
        let current = state.withLock { s -> Config in
            s.overlay.merge(changes) { $1 }
            s.current = s.file.applying(s.overlay).0
            return s.current
        }
        Log.debugEnabled.store(current[.logLevel] == "debug", ordering: .relaxed)
        log.info("set", ["keys": changes.keys.sorted().joined(separator: ",")])
        return current
    }
}

enum ConfigSetError: Error, CustomStringConvertible {
    case invalid(ConfigError)
    case needsRestart(String)
    case storage(String)

    var description: String {
        switch self {
        case .invalid(let e): e.description
        case .needsRestart(let k): "\(k) only takes effect at start: set it in the config file and restart soundboxd"
        case .storage(let why): "cannot persist the setting: \(why)"
        }
    }
}
