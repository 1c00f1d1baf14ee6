// ~430 lines: one TCP proxy that breaks the link on command (drop, stall, cut mid-packet, refuse), its poll loop kept whole so its states read together.
import Foundation
#if canImport(Glibc)
import Glibc
import TestSupport
import TestRig
#endif

/// A TCP proxy in the test process, between a device and the broker, that
/// breaks the link on command. Listens on 127.0.0.1 with its own random
/// port (`endpoint`), connects each accepted connection to
/// 127.0.0.1:`upstreamPort`, and forwards bytes both ways: one thread per
/// connection, non-blocking raw sockets, poll/recv/send (Glibc only).
///
/// Controls, each safe from any thread at any time:
/// - `dropAll()`: shutdown + close every current connection (both sides);
///   new connections are still accepted. Returns once they are closed
///   (true), or false after 5 s.
/// - `stall(true)`: no byte passes either way, but the TCP connections stay
///   open (a silent, half-open link: keepalive must notice). New
///   connections are accepted, connected upstream, and stalled too. Bytes
///   that arrive meanwhile are held (up to 1 MiB per direction per
///   connection, then TCP flow control) and a close by either peer is not
///   passed on; `stall(false)` delivers what was held, in order, then
///   passes on any close. `stats.pendingDown > 0` shows a held packet.
/// - `cutMidPacket()`: the next chunk read from the broker (on any
///   connection) is forwarded only in its first half (`n/2` bytes), then
///   both sides of that connection are closed. `stats.cuts` counts them.
/// - `refuse(true)`: new connections are accepted and closed at once
///   (counted in `connectionsAccepted` and `connectionsRefused`).
///
/// Counters (`stats`): connections accepted/refused/open, bytes forwarded
/// up (device → broker) and down, bytes held, cuts. `waitUntil` waits on
/// them as events (every change wakes it). Bytes are counted under the
/// same lock hold as their send, so a test that has seen a peer react to
/// bytes always finds them counted. deinit closes everything and joins
/// every thread.
final class FaultProxy: @unchecked Sendable {
    struct Stats: Sendable, CustomStringConvertible {
        var connectionsAccepted = 0
        var connectionsRefused = 0
        var connectionsOpen = 0
        var bytesUp = 0
        var bytesDown = 0
        var pendingUp = 0
        var pendingDown = 0
        var cuts = 0
        var description: String {
            "accepted=\(connectionsAccepted) refused=\(connectionsRefused) open=\(connectionsOpen) up=\(bytesUp) down=\(bytesDown) pendingUp=\(pendingUp) pendingDown=\(pendingDown) cuts=\(cuts)"
        }
    }

    let port: Int
    let upstreamPort: Int
    var endpoint: MQTTEndpoint { MQTTEndpoint(port: port) }

    /// Bytes held per direction per connection before reading pauses.
    static let holdLimit = 1 << 20

    // The threads hold the core, not the proxy: the proxy's deinit can then
    // stop and join them.
    private let core: FaultProxyCore

    /// A proxy to 127.0.0.1:upstreamPort (e.g. `broker.port`).
    init(upstreamPort: Int) throws {
        core = try FaultProxyCore(upstreamPort: upstreamPort)
        port = core.port
        self.upstreamPort = upstreamPort
    }

    deinit { core.terminate() }

    var stats: Stats { core.stats }
    var connectionsAccepted: Int { stats.connectionsAccepted }
    var bytesUp: Int { stats.bytesUp }
    var bytesDown: Int { stats.bytesDown }

    /// Waits until `condition(stats)` holds (re-checked on every change) or
    /// `timeout` passes; returns whether it held.
    @discardableResult
    func waitUntil(timeout: Double = 10, _ condition: (Stats) -> Bool) -> Bool { core.waitUntil(timeout: timeout, condition) }
    /// True once every connection open at the call is closed (both sides).
    @discardableResult
    func dropAll() -> Bool { core.dropAll() }
    func stall(_ on: Bool) { core.stall(on) }
    func cutMidPacket() { core.cutMidPacket() }
    func refuse(_ on: Bool) { core.refuse(on) }
}

private final class FaultProxyCore: @unchecked Sendable {
    typealias Stats = FaultProxy.Stats
    let port: Int
    let upstreamPort: Int

    // Everything below is guarded by `cond`.
    private let cond = NSCondition()
    private var _stats = Stats()
    private var stalled = false
    private var refusing = false
    private var cutArmed = false
    private var closing = false
    private var connections: [Int: Connection] = [:]
    private var nextID = 0
    private var threads: [JoinableThread] = []

    private let listenFd: Int32
    private let wake: WakePipe
    private var acceptThread: JoinableThread?

    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        (listenFd, port) = try Net.listenLoopback(backlog: 128)
        wake = try WakePipe()
        acceptThread = JoinableThread { self.acceptLoop() }
    }

    /// Closes every connection and the listener, and joins every thread.
    func terminate() {
        cond.lock()
        closing = true
        let all = Array(connections.values)
        for c in all { c.shutdownLocked() }
        cond.unlock()
        wake.signal()
        for c in all { c.wake.signal() }
        acceptThread?.join()
        // Connection threads started by the accept loop are all in `threads`
        // now that it has ended.
        for t in cond.withLock({ threads }) { t.join() }
        close(listenFd)
    }

    var stats: Stats { cond.withLock { _stats } }

    /// Waits until `condition(stats)` holds (re-checked on every change) or
    /// `timeout` passes; returns whether it held.
    @discardableResult
    func waitUntil(timeout: Double = 10, _ condition: (Stats) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock()
        defer { cond.unlock() }
        while !condition(_stats) {
            if !cond.wait(until: deadline) { return condition(_stats) }
        }
        return true
    }

    /// Returns once every dropped connection's thread has closed it (true),
    /// or at the deadline (false).
    @discardableResult
    func dropAll(timeout: Double = 5) -> Bool {
        cond.lock()
        let victims = Array(connections.values)
        for c in victims { c.shutdownLocked() }
        cond.unlock()
        for c in victims { c.wake.signal() }
        // Return once their threads have closed them.
        let ids = Set(victims.map(\.id))
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock()
        defer { cond.unlock() }
        while !ids.isDisjoint(with: connections.keys) {
            if !cond.wait(until: deadline) { return ids.isDisjoint(with: connections.keys) }
        }
        return true
    }

    func stall(_ on: Bool) {
        let all = cond.withLock { () -> [Connection] in
            stalled = on
            return Array(connections.values)
        }
        for c in all { c.wake.signal() }
    }

    func cutMidPacket() { cond.withLock { cutArmed = true } }

    func refuse(_ on: Bool) { cond.withLock { refusing = on } }

    // MARK: - Threads

    private func acceptLoop() {
        while true {
            var fds = [pollfd(fd: listenFd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.readFd, events: Int16(POLLIN), revents: 0)]
            let rc = poll(&fds, 2, -1)
            if rc < 0 && errno == EINTR { continue }
            wake.drain()
            if cond.withLock({ closing }) { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listenFd, nil, nil)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            cond.lock()
            _stats.connectionsAccepted += 1
            if refusing || closing {
                _stats.connectionsRefused += 1
                shutdown(fd, Int32(SHUT_RDWR))
                close(fd)
                cond.broadcast()
                cond.unlock()
                continue
            }
            nextID += 1
            guard let c = try? Connection(id: nextID, client: fd) else {
                close(fd)
                cond.unlock()
                continue
            }
            connections[c.id] = c
            _stats.connectionsOpen += 1
            threads.append(JoinableThread { self.run(c) })
            cond.broadcast()
            cond.unlock()
        }
    }

    /// One connection: connect upstream, then forward until either side
    /// ends, a fault closes it, or the proxy shuts down.
    private func run(_ c: Connection) {
        defer {
            cond.lock()
            c.closeLocked()
            connections[c.id] = nil
            _stats.connectionsOpen -= 1
            _stats.pendingUp -= c.up.count
            _stats.pendingDown -= c.down.count
            cond.broadcast()
            cond.unlock()
        }
        let u = Net.connectLoopback(port: upstreamPort)
        guard u >= 0 else { return }  // broker down: the device sees accept, then close
        setNonBlocking(u)
        setNonBlocking(c.client)
        var one: Int32 = 1
        setsockopt(u, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(c.client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let attached = cond.withLock { () -> Bool in
            if c.dropped { close(u); return false }
            c.upstream = u
            return true
        }
        guard attached else { return }

        var eofClient = false, eofUpstream = false, cutting = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let (isStalled, dropped) = cond.withLock { (stalled, c.dropped) }
            if dropped { return }
            if !isStalled {
                if cutting && c.down.isEmpty { return }
                if eofClient && c.up.isEmpty { return }
                if eofUpstream && c.down.isEmpty { return }
            }
            let readClient = !eofClient && !cutting && c.up.count < FaultProxy.holdLimit
            let readUpstream = !eofUpstream && !cutting && c.down.count < FaultProxy.holdLimit
            let writeClient = !isStalled && !c.down.isEmpty
            let writeUpstream = !isStalled && !cutting && !c.up.isEmpty
            func entry(_ fd: Int32, _ r: Bool, _ w: Bool) -> pollfd {
                let ev = (r ? Int16(POLLIN) : 0) | (w ? Int16(POLLOUT) : 0)
                return pollfd(fd: ev == 0 ? -1 : fd, events: ev, revents: 0)
            }
            var fds = [entry(c.client, readClient, writeClient),
                       entry(c.upstream, readUpstream, writeUpstream),
                       pollfd(fd: c.wake.readFd, events: Int16(POLLIN), revents: 0)]
            let rc = poll(&fds, 3, -1)
            if rc < 0 { if errno == EINTR { continue } else { return } }
            c.wake.drain()
            let ready = Int16(POLLIN | POLLHUP | POLLERR)

            // device → broker
            if readClient && fds[0].revents & ready != 0 {
                let n = recv(c.client, &chunk, chunk.count, 0)
                if n > 0 {
                    c.up += chunk[..<n]
                    cond.withLock { _stats.pendingUp += n; cond.broadcast() }
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    eofClient = true
                }
            }
            // broker → device
            if readUpstream && fds[1].revents & ready != 0 {
                let n = recv(c.upstream, &chunk, chunk.count, 0)
                if n > 0 {
                    let cut = cond.withLock { () -> Bool in
                        let armed = cutArmed
                        cutArmed = false
                        if armed { _stats.cuts += 1 }
                        _stats.pendingDown += armed ? n / 2 : n
                        cond.broadcast()
                        return armed
                    }
                    if cut {
                        c.down += chunk[..<(n / 2)]
                        cutting = true
                        cond.withLock {
                            _stats.pendingUp -= c.up.count
                            c.up.removeAll()
                            c.closeUpstreamLocked()
                            cond.broadcast()
                        }
                    } else {
                        c.down += chunk[..<n]
                    }
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    eofUpstream = true
                }
            }
            // Send what is held (non-blocking; EAGAIN leaves it for POLLOUT;
            // `flush` sends nothing while stalled).
            if !c.down.isEmpty {
                guard flush(&c.down, to: c.client, down: true) else { return }
            }
            if !cutting && !c.up.isEmpty {
                guard flush(&c.up, to: c.upstream, down: false) else { return }
            }
        }
    }

    /// Sends as much of `buffer` as the socket takes now (nothing while
    /// stalled). False on a write error (the peer is gone).
    ///
    /// The send and the count happen under one hold of the lock (the send
    /// is non-blocking): the peer can react to the bytes as soon as they are
    /// sent, but whoever reads `stats` after seeing that reaction waits for
    /// the lock and so sees them counted. Counting after the send let a test
    /// read the count between the two. Checking `stalled` in the same hold
    /// means no byte passes once `stall(true)` has returned.
    private func flush(_ buffer: inout [UInt8], to fd: Int32, down: Bool) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        if stalled { return true }
        let n = buffer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n < 0 { return errno == EAGAIN || errno == EINTR }
        buffer.removeFirst(n)
        if down { _stats.bytesDown += n; _stats.pendingDown -= n } else { _stats.bytesUp += n; _stats.pendingUp -= n }
        cond.broadcast()
        return true
    }

    private func setNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// One proxied connection. `client`/`upstream` are closed only under
    /// the proxy's lock, so `shutdownLocked` never touches a reused fd.
    private final class Connection: @unchecked Sendable {
        let id: Int
        let client: Int32
        var upstream: Int32 = -1
        var dropped = false
        private var clientOpen = true
        let wake: WakePipe
        /// Held bytes: device → broker, broker → device (owned by the thread).
        var up: [UInt8] = []
        var down: [UInt8] = []

        init(id: Int, client: Int32) throws {
            self.id = id
            self.client = client
            wake = try WakePipe()
        }

        /// dropAll / deinit: shutdown both sockets now (the peers see it at
        /// once); the connection's thread then closes them.
        func shutdownLocked() {
            dropped = true
            if clientOpen { shutdown(client, Int32(SHUT_RDWR)) }
            if upstream >= 0 { shutdown(upstream, Int32(SHUT_RDWR)) }
        }

        func closeUpstreamLocked() {
            if upstream >= 0 {
                shutdown(upstream, Int32(SHUT_RDWR))
                close(upstream)
                upstream = -1
            }
        }

        func closeLocked() {
            closeUpstreamLocked()
            if clientOpen {
                shutdown(client, Int32(SHUT_RDWR))
                close(client)
                clientOpen = false
            }
        }
    }
}

/// A self-pipe to wake a thread blocked in poll.
final class WakePipe: @unchecked Sendable {
    let readFd: Int32
    let writeFd: Int32
    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw TestFailure("pipe: errno \(errno)") }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readFd = fds[0]
        writeFd = fds[1]
    }
    deinit { close(readFd); close(writeFd) }
    func signal() { var b: UInt8 = 1; _ = write(writeFd, &b, 1) }
    func drain() {
        var buf = [UInt8](repeating: 0, count: 64)
        while read(readFd, &buf, buf.count) > 0 {}
    }
}
