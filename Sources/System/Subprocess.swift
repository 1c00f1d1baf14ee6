// Running another program (the update's helper and its download) with
// posix_spawn: its output read line by line, its exit awaited, and a way to
// stop it from another thread.
import CLinux
import Glibc

public final class Subprocess: @unchecked Sendable {
    public enum Outcome: Sendable, Equatable {
        case exited(Int32)
        case signaled(Int32)
        /// It could not be started (errno).
        case notStarted(Int32)
    }

    private let lock = Condition()
    private var pid: pid_t = 0          // guarded by lock
    private var stopped = false         // guarded by lock

    public init() {}

    /// Runs `argv` (argv[0] a path) with `environment`, stdin from
    /// /dev/null, stdout and stderr into one pipe read line by line (each at
    /// most 4 KiB; longer lines are cut) and handed to `line`. The child gets
    /// an empty signal mask and default dispositions (the daemon blocks
    /// SIGTERM and ignores SIGPIPE). Blocks until the child is gone.
    public func run(_ argv: [String], environment: [String: String] = [:], line: (String) -> Void = { _ in }) -> Outcome {
        var fds: [Int32] = [-1, -1]
        guard pipe2(&fds, O_CLOEXEC) == 0 else { return .notStarted(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setsigdefault(&attr, &all)
        // Its own process group: stopping it stops what it started (curl under a shell).
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let env = environment.map { "\($0.key)=\($0.value)" }
        var child: pid_t = 0
        let rc: Int32 = lock.broadcast {
            if stopped { return ECANCELED }
            let r = withCStrings(argv) { a in withCStrings(env) { e in posix_spawn(&child, argv[0], &actions, &attr, a, e) } }
            if r == 0 { pid = child }
            return r
        }
        close(fds[1])
        guard rc == 0 else { close(fds[0]); return .notStarted(rc) }

        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            for b in buffer[..<n] {
                if b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r") {
                    if !pending.isEmpty { line(String(decoding: pending, as: UTF8.self)) }
                    pending.removeAll(keepingCapacity: true)
                } else if pending.count < 4096 {
                    pending.append(b)
                }
            }
        }
        if !pending.isEmpty { line(String(decoding: pending, as: UTF8.self)) }
        close(fds[0])
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        lock.broadcast { pid = 0 }
        let low = status & 0x7f
        return low == 0 ? .exited((status >> 8) & 0xff) : .signaled(low)
    }

    /// Ends the running child's process group (SIGTERM, then SIGKILL after
    /// `grace` seconds if it is still there), and any started later.
    public func stop(grace: Double = 2) {
        let target: pid_t = lock.broadcast { stopped = true; return pid }
        guard target > 0 else { return }
        kill(-target, SIGTERM)
        if !lock.wait(timeout: grace, until: { pid == 0 }) { kill(-target, SIGKILL) }
    }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
