// Threads and waiting, for the daemon and the MQTT client: POSIX threads
// (the only place that makes one) and condition variables (Synchronization.Mutex has no condition variable,
// and Foundation is too big for the device).
import CLinux
import Glibc

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

/// A joinable POSIX thread running `body`; `join` waits for it, bounded.
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

extension ServiceThread {
    /// Runs `body` on a new detached thread (per-connection work); false
    /// if none could be made (`body` is then not run).
    @discardableResult
    public static func detached(_ body: @escaping @Sendable () -> Void) -> Bool {
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
        return rc == 0
    }
}


/// An eventfd(2) for waking a thread that sleeps in poll(2): `ring` from
/// any thread, `fd` in its poll set, `drain` once it woke. Owns the fd.
public final class Doorbell: @unchecked Sendable {
    public let fd: Int32

    public init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(fd >= 0, "eventfd failed: \(Errno.current)")
    }
    deinit { close(fd) }

    public func ring() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    public func drain() {
        var count: UInt64 = 0
        _ = read(fd, &count, 8)
    }
}
