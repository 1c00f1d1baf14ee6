import CLinux
import Glibc
import Synchronization

/// Journald-friendly log lines on standard error, one per event:
/// `<6>queue: played id=T1 seq=4`. The `<N>` prefix is the syslog priority
/// journald reads; keys are fixed words, values quoted when they hold spaces.
/// Payment amounts are logged only at debug level.
public struct Log: Sendable {
    public let subsystem: String
    public init(_ subsystem: String) { self.subsystem = subsystem }

    /// Set once at start and on reload.
    public static let debugEnabled = Atomic<Bool>(false)

    public func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(6, event, fields) }
    public func warning(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(4, event, fields) }
    public func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(3, event, fields) }
    public func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        if Log.debugEnabled.load(ordering: .relaxed) { write(7, event, fields) }
    }

    private func write(_ priority: Int, _ event: String, _ fields: KeyValuePairs<String, String>) {
        var line = "<\(priority)>\(subsystem): \(event)"
        for (k, v) in fields {
            let plain = !v.isEmpty && !v.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\n" }
            line += " \(k)=" + (plain ? v : "\"" + v.replacingNewlines.replacing("\"", with: "'") + "\"")
        }
        line += "\n"
        // One write(2) per line so lines from threads never interleave.
        _ = line.utf8CString.withUnsafeBufferPointer { Glibc.write(2, $0.baseAddress, $0.count - 1) }
    }
}

extension String {
    var replacingNewlines: String { String(map { $0 == "\n" ? " " : $0 }) }
}

/// A mutex and condition variable (pthread) for waiting on a predicate;
/// Synchronization.Mutex has no condition variable.
public final class Condition: @unchecked Sendable {
    // The pthread objects must not move: they live in their own allocations.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }
    deinit {
        pthread_cond_destroy(cond); pthread_mutex_destroy(mutex)
        cond.deallocate(); mutex.deallocate()
    }

    /// Runs `body` under the lock and wakes every waiter.
    public func broadcast<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_cond_broadcast(cond); pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits until `ready()` (evaluated under the lock) is true or the
    /// timeout passes; returns whether it became true.
    @discardableResult
    public func wait(timeout seconds: Double? = nil, until ready: () -> Bool) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var deadline = timespec()
        if let seconds {
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let ns = deadline.tv_nsec + Int(seconds.truncatingRemainder(dividingBy: 1) * 1e9)
            deadline.tv_sec += Int(seconds) + ns / 1_000_000_000
            deadline.tv_nsec = ns % 1_000_000_000
        }
        while !ready() {
            if seconds == nil {
                pthread_cond_wait(cond, mutex)
            } else if pthread_cond_timedwait(cond, mutex, &deadline) == ETIMEDOUT {
                return ready()
            }
        }
        return true
    }
}

/// Starts a detached-free POSIX thread running `body`; `join` waits for it.
public final class ServiceThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let done = Condition()
    private var finished = false

    public init(name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box { [done] in
            body()
            done.broadcast { self.finishedFlag() }
        })
        let rc = pthread_create(&thread, nil, { ctx in
            let box = Unmanaged<Box>.fromOpaque(ctx!).takeRetainedValue()
            box.body()
            return nil
        }, box.toOpaque())
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_setname_np(thread, String(name.prefix(15)))   // the kernel allows 15 bytes
    }

    private func finishedFlag() { finished = true }

    /// Waits up to `timeout` seconds for the thread to end; true if it did.
    @discardableResult
    public func join(timeout: Double) -> Bool {
        guard done.wait(timeout: timeout, until: { finished }) else { return false }
        pthread_join(thread, nil)
        return true
    }

    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }
}

/// systemd's notification protocol (sd_notify(3)) without libsystemd:
/// datagrams to $NOTIFY_SOCKET. Silent when the variable is unset.
public struct ServiceNotifier: Sendable {
    public let socketPath: String?
    /// Half of $WATCHDOG_USEC, when systemd asks for keep-alives.
    public let watchdogInterval: Double?

    public init(environment: [String: String]) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogInterval = environment["WATCHDOG_USEC"].flatMap(Double.init).map { $0 / 2e6 }
    }

    public func send(_ message: String) {
        guard let path = socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }   // abstract namespace
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let payload = Array(message.utf8)
        _ = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                payload.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, len) }
            }
        }
    }
}

/// Whether the kernel believes the system clock is synchronised (NTP, or
/// chrony/timesyncd through adjtimex). A Pi has no RTC: until then, the
/// date may be 1970 and nothing may be called stale.
public enum SystemClock {
    public static func isSynchronized(environment: [String: String]) -> Bool {
        // Tests cannot change the kernel's state; they say what it is.
        switch environment["SOUNDBOX_TEST_CLOCK"] {
        case "synced": return true
        case "unsynced": return false
        default:
            // -1 (adjtimex refused, e.g. by a seccomp filter) is "unknown": not synchronised.
            let state = soundbox_clock_state()
            return state >= 0 && state != TIME_ERROR
        }
    }

    /// Unix milliseconds.
    public static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Unix milliseconds of the last local midnight ("today" for the summary).
    public static func localMidnightMs() -> Int64 {
        var t = time(nil)
        var tm = Glibc.tm()
        localtime_r(&t, &tm)
        tm.tm_hour = 0; tm.tm_min = 0; tm.tm_sec = 0
        return Int64(mktime(&tm)) * 1000
    }

    /// Monotonic seconds, for timeouts and uptime.
    public static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Wakes the scheduler when work arrives, and lets others wait until it
/// is idle (nothing queued, nothing speaking). No polling: both sides block.
public final class Wakeup: @unchecked Sendable {
    private let cond = Condition()
    private var signaled = false     // guarded by cond
    private var idle = false         // guarded by cond

    /// Work arrived (or stop was asked): the scheduler looks again.
    public func notify() { cond.broadcast { signaled = true; idle = false } }

    /// Scheduler: block until notified (or `timeout` passes). If nothing
    /// was signalled since the last look, the scheduler is idle.
    func waitForWork(timeout: Double? = nil) {
        cond.broadcast { if !signaled { idle = true } }
        cond.wait(timeout: timeout) { signaled }
        cond.broadcast { signaled = false }
    }

    /// Waits until the scheduler has found nothing to do; false on timeout.
    public func waitIdle(timeout: Double) -> Bool { cond.wait(timeout: timeout) { idle } }
}

extension ServiceThread {
    /// Runs `body` on a detached thread (per-connection work).
    static func detached(_ body: @escaping @Sendable () -> Void) {
        final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
        var t = pthread_t()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attr) }
        let ctx = Unmanaged.passRetained(Box(body)).toOpaque()
        let rc = pthread_create(&t, &attr, { ctx in
            Unmanaged<Box>.fromOpaque(ctx!).takeRetainedValue().body()
            return nil
        }, ctx)
        if rc != 0 { Unmanaged<Box>.fromOpaque(ctx).release() }
    }
}

extension Wakeup {
    /// Whether the scheduler is waiting with nothing to do.
    var isIdle: Bool { waitIdle(timeout: 0) }
}
