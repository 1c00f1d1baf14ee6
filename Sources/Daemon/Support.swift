import CLinux
import Glibc
import Soundbox
import Synchronization
import SoundboxSystem

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
        guard let path = socketPath, let address = try? UnixSocketAddress(path, abstractNamespace: true),
              let fd = try? FileDescriptor.unixSocket(.datagram) else { return }
        defer { fd.close() }
        _ = try? fd.send(Array(message.utf8), to: address)
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

    /// Unix microseconds.
    public static func nowUs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
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
    public static func monotonic() -> Double { MonotonicClock.seconds() }
}

/// Wakes the scheduler when work arrives, and lets others wait until it
/// is idle (nothing queued, nothing speaking). No polling: both sides block.
public final class Wakeup: @unchecked Sendable {
    private let cond = Condition()
    private var signaled = false     // guarded by cond
    private var idle = false         // guarded by cond
    private var payments = 0         // guarded by cond

    /// Work arrived (or stop was asked): the scheduler looks again.
    public func notify() {
        cond.broadcast { signaled = true; idle = false }
    }

    /// A payment was queued: the scheduler looks again, and a link prompt
    /// waiting or being spoken gives way (`paymentsQueued`).
    public func paymentQueued() {
        cond.broadcast { signaled = true; idle = false; payments += 1 }
    }

    /// Payments queued since the start: a change says one came.
    var paymentsQueued: Int { cond.broadcast { payments } }

    /// Scheduler: block until notified (or `timeout` passes). If nothing
    /// was signalled since the last look, the scheduler is idle — unless
    /// `idle` is false: it waits with work in hand (the offline summary
    /// letting a backlog land), and `waitIdle` must not return meanwhile.
    func waitForWork(timeout: Double? = nil, idle becomingIdle: Bool = true) {
        cond.broadcast { if !signaled && becomingIdle { idle = true } }
        cond.wait(timeout: timeout) { signaled }
        cond.broadcast { signaled = false }
    }

    /// Waits until the scheduler has found nothing to do; false on timeout.
    public func waitIdle(timeout: Double) -> Bool { cond.wait(timeout: timeout) { idle } }
}

extension Wakeup {
    /// Whether the scheduler is waiting with nothing to do.
    var isIdle: Bool { waitIdle(timeout: 0) }
}
