import Glibc
import Synchronization

/// Named crash points for tests: the environment variable SOUNDBOX_FAILPOINT
/// holds "name" or "name:N"; the N-th (default first) time `hit(name)` is
/// called with that name, the process kills itself with SIGKILL (no cleanup,
/// like a power cut). Crash tests run the real binary with it set and check
/// what survived.
public enum Failpoint {
    /// Read once, on the first `hit`; nil (the usual case) costs one load per hit.
    private static let armed: Armed? = getenv("SOUNDBOX_FAILPOINT").map { Armed(String(cString: $0)) }

    /// Dies here if SOUNDBOX_FAILPOINT names this point and this is its N-th
    /// hit. The store's points: "after_insert" (an accepted payment written,
    /// not committed), "before_mark_played" (played written, not committed).
    public static func hit(_ name: String) {
        guard let armed, armed.name == name else { return }
        if armed.remaining.wrappingSubtract(1, ordering: .relaxed).newValue == 0 { kill(getpid(), SIGKILL) }
    }
}

/// The failpoint named by SOUNDBOX_FAILPOINT and how many hits are left until it fires.
private final class Armed: Sendable {
    let name: String
    let remaining: Atomic<Int>

    init(_ value: String) {
        let parts = value.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let count = parts.count == 2 ? Int(parts[1]) : 1
        // A misspelt count would silently never fire: say so at once instead.
        guard let count, count >= 1, !parts[0].isEmpty else {
            fatalError("SOUNDBOX_FAILPOINT=\(value): expected NAME or NAME:N with N >= 1")
        }
        name = String(parts[0])
        remaining = Atomic(count)
    }
}
