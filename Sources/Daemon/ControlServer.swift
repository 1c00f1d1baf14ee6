import Glibc
import Synchronization
import Soundbox
import SoundboxSystem

struct DaemonError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
    static func errno(_ call: String) -> DaemonError { DaemonError("\(call) failed: \(String(cString: strerror(Glibc.errno)))") }
}

/// The control socket (docs/control-protocol.md): accepts connections on
/// its own thread, one thread per client, peer credentials checked.
///
/// Clients cannot exhaust the daemon: at most `maxClients` are served at
/// once (the next one gets a "busy" ACK and is closed), a client that sends
/// no complete request line within `idleTimeout` (or does not take its
/// reply within it) is closed, and the accept loop never ends on an error
/// other than `stop` (out of descriptors: it logs, waits, and goes on).
final class ControlServer: @unchecked Sendable {
    static let defaultMaxClients = 32
    static let defaultIdleTimeout = 30.0
    /// Test knob (environment only): the idle timeout in seconds, 0.1-3600.
    static let idleTimeoutVariable = "SOUNDBOX_CONTROL_IDLE_S"
    /// Descriptors left for everything but the control socket (database,
    /// audio output, voices, broker) when the descriptor limit is low.
    static let reservedDescriptors = 32
    /// Seconds between two log lines about the same recurring condition.
    static let logInterval = 60.0

    let path: String
    /// Clients served at once: `defaultMaxClients`, fewer when the
    /// descriptor limit at start leaves less than `reservedDescriptors`.
    let maxClients: Int
    /// Seconds a client may take to send a complete request line, or to
    /// take a reply.
    let idleTimeout: Double
    private let fd: Int32
    private let socketID: (dev: UInt, ino: UInt)
    private let groupID: gid_t?
    private let commands: Commands
    private let log = Log("control")
    private let slots = Condition()
    private var active = 0                       // guarded by slots
    private let stopping = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    private let dropLog = Mutex(LogThrottle(interval: ControlServer.logInterval))

    /// Binds the socket (mode 0660, group `group` if it exists). A live
    /// socket at `path` means another soundboxd: refused. A stale socket is
    /// replaced; anything else at `path` (a file, a symbolic link, a
    /// directory) is left alone and the server refuses to start.
    init(path: String, group: String, commands: Commands,
         maxClients: Int = ControlServer.defaultMaxClients, idleTimeout: Double? = nil) throws(DaemonError) {
        self.path = path
        self.commands = commands
        groupID = getgrnam(group).map { $0.pointee.gr_gid }
        var limit = rlimit()
        var room = Int.max
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur < rlim_t(Int.max) {
            room = Int(limit.rlim_cur) - Self.reservedDescriptors
        }
        self.maxClients = max(1, min(maxClients, room))
        self.idleTimeout = idleTimeout ?? Self.configuredIdleTimeout(Log("control"))
        if self.maxClients < maxClients {
            Log("control").warning("clients_limited", ["max": "\(self.maxClients)", "descriptors": "\(limit.rlim_cur)"])
        }

        try Self.clearPath(path)
        let address: UnixSocketAddress
        do { address = try UnixSocketAddress(path) } catch { throw DaemonError("socket path too long: \(path)") }
        let sock: FileDescriptor
        do { sock = try .unixSocket(.stream) } catch { throw DaemonError("socket failed: \(error)") }
        do { try sock.bind(to: address) } catch { sock.close(); throw DaemonError("bind(\(path)) failed: \(error)") }
        var st = stat()
        lstat(path, &st)
        chmod(path, 0o660)
        if let groupID { chown(path, uid_t.max, groupID) }   // uid_t.max = (uid_t)-1: keep the owner
        guard listen(sock.rawValue, 64) == 0 else { let e = DaemonError.errno("listen"); sock.close(); unlink(path); throw e }
        fd = sock.rawValue
        socketID = (UInt(st.st_dev), UInt(st.st_ino))
    }

    deinit { closeListener() }

    /// Raises the soft RLIMIT_NOFILE to the hard limit (at most `ceiling`),
    /// so that the audio output, the database and the broker link find
    /// descriptors whatever else happens. Called once at start. Returns the
    /// soft limit now in force.
    @discardableResult
    static func reserveDescriptors(ceiling: rlim_t = 65536) -> rlim_t {
        let log = Log("daemon")
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 0 }
        let target = min(limit.rlim_max, ceiling)
        if limit.rlim_cur < target {
            let was = limit.rlim_cur
            limit.rlim_cur = target
            if setrlimit(resource, &limit) == 0 {
                log.info("descriptors", ["limit": "\(target)", "was": "\(was)"])
                return target
            }
            log.warning("descriptors_not_raised", ["limit": "\(was)", "error": String(cString: strerror(errno))])
            return was
        }
        return limit.rlim_cur
    }

    static func configuredIdleTimeout(_ log: Log) -> Double {
        guard let raw = getenv(idleTimeoutVariable) else { return defaultIdleTimeout }
        let text = String(cString: raw)
        guard let seconds = Double(text), seconds >= 0.1, seconds <= 3600 else {
            log.warning("ignored", ["variable": idleTimeoutVariable, "value": text, "expected": "seconds 0.1-3600"])
            return defaultIdleTimeout
        }
        return seconds
    }

    // MARK: - The socket's path

    /// Makes room for the socket at `path`: creates its directory (one
    /// level, mkdir only) when missing, removes a stale socket, and refuses
    /// anything else. Never follows a symbolic link at `path`.
    static func clearPath(_ path: String) throws(DaemonError) {
        if let dir = Paths.parent(of: path), dir != "/" {
            var st = stat()
            if stat(dir, &st) != 0 {
                guard errno == ENOENT else { throw DaemonError("cannot use \(dir) for the control socket: \(errorText())") }
                if lstat(dir, &st) == 0 {
                    throw DaemonError("\(dir) is \(Files.kind(mode: st.st_mode, path: dir)), not a directory; cannot create the control socket \(path) in it")
                }
                guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
                    throw DaemonError("cannot create the directory \(dir) for the control socket: \(errorText())")
                }
                guard stat(dir, &st) == 0 else { throw DaemonError("cannot use \(dir) for the control socket: \(errorText())") }
            }
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw DaemonError("\(dir) is \(Files.kind(mode: st.st_mode, path: dir)), not a directory; cannot create the control socket \(path) in it")
            }
        }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT { return }
            throw DaemonError("cannot use \(path) for the control socket: \(errorText())")
        }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw DaemonError("\(path) is \(Files.kind(mode: st.st_mode, path: path)), not a socket; refusing to replace it")
        }
        switch UnixSocket.probe(path) {
        case 0:
            throw DaemonError("another soundboxd is already listening on \(path)")
        case ECONNREFUSED:
            // Stale: nobody listens. Remove it only if it is still that socket.
            var again = stat()
            if lstat(path, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino {
                guard unlink(path) == 0 else { throw DaemonError("cannot remove the stale socket \(path): \(errorText())") }
            }
        case let e:
            throw DaemonError("cannot tell whether something listens on \(path): \(errorText(e)); refusing to replace it")
        }
    }

    // MARK: - Accepting

    /// Accept loop; returns after `stop`, and only then.
    func run() {
        defer { closeListener() }
        var outOfDescriptors = LogThrottle(interval: Self.logInterval)
        var otherErrors = LogThrottle(interval: Self.logInterval)
        var busy = LogThrottle(interval: Self.logInterval)
        var failures = 0
        while !stopping.load(ordering: .acquiring) {
            let client = accept(fd, nil, nil)
            if client < 0 {
                let e = errno
                if stopping.load(ordering: .acquiring) { break }
                switch e {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOMEM, ENOBUFS:
                    // Out of descriptors or memory: the pending client waits
                    // in the backlog until a client leaves (or 100 ms pass).
                    failures += 1
                    if let skipped = outOfDescriptors.admit() {
                        log.error("accept_failed", ["error": errorText(e), "clients": "\(clients)",
                                                    "action": "waiting", "repeats_not_logged": "\(skipped)"])
                    }
                    waitForSlot(timeout: 0.1)
                default:
                    failures += 1
                    if let skipped = otherErrors.admit() {
                        log.error("accept_failed", ["error": errorText(e), "action": "retrying", "repeats_not_logged": "\(skipped)"])
                    }
                    waitForSlot(timeout: 0.1)
                }
                continue
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            if failures > 0 {
                log.info("accept_recovered", ["failures": "\(failures)"])
                failures = 0
            }
            guard acquireSlot() else {
                let ack = ControlAck(.system, command: "", "too many connections (\(maxClients)); try again").line
                _ = Array(ack.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                close(client)
                if let skipped = busy.admit() {
                    log.warning("busy", ["clients": "\(maxClients)", "refused_not_logged": "\(skipped)"])
                }
                continue
            }
            if !ServiceThread.detached({ [self] in serve(client) }) {
                releaseSlot()
                close(client)
                if let skipped = otherErrors.admit() {
                    log.error("thread_failed", ["action": "client closed", "repeats_not_logged": "\(skipped)"])
                }
            }
        }
    }

    /// Stops accepting (the accept loop returns) and removes the socket.
    /// Clients being served finish on their own threads.
    func stop() {
        stopping.store(true, ordering: .releasing)
        shutdown(fd, Int32(SHUT_RDWR))   // wakes accept(): EINVAL
        slots.broadcast {}
        var st = stat()
        if lstat(path, &st) == 0 && UInt(st.st_dev) == socketID.dev && UInt(st.st_ino) == socketID.ino { unlink(path) }
    }

    private func closeListener() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { close(fd) }
    }

    /// Clients being served now.
    var clients: Int { slots.broadcast { active } }

    private func acquireSlot() -> Bool {
        slots.broadcast {
            guard active < maxClients else { return false }
            active += 1
            return true
        }
    }

    private func releaseSlot() { slots.broadcast { active -= 1 } }

    /// Waits until a client leaves, `stop`, or `timeout` seconds.
    private func waitForSlot(timeout: Double) {
        let now = clients
        slots.wait(timeout: timeout) { active < now || stopping.load(ordering: .relaxed) }
    }

    // MARK: - One client

    private func serve(_ client: Int32) {
        let conn = LineConnection(fd: client)
        let reason = session(conn)
        // Logged, and the slot freed, before the close: a client that sees
        // the end finds its slot free, and the reason already in the log.
        if let reason, let skipped = dropLog.withLock({ $0.admit() }) {
            log.info("client_dropped", ["reason": reason, "timeout_s": "\(idleTimeout)", "others_not_logged": "\(skipped)"])
        }
        releaseSlot()
        conn.close()
    }

    /// Serves requests until the client leaves (nil) or is dropped (why).
    private func session(_ conn: LineConnection) -> String? {
        let deadline = { [idleTimeout] in SystemClock.monotonic() + idleTimeout }
        guard let peer = peerCredentials(conn.fd), allowed(peer) else {
            _ = conn.write(ControlAck(.permission, command: "", "permission denied").line, until: deadline())
            log.warning("refused", ["uid": peerCredentials(conn.fd).map { "\($0.uid)" } ?? "?"])
            return nil
        }
        guard conn.write(ControlProtocol.greetingPrefix + soundboxVersion + "\n", until: deadline()) else { return "slow_reader" }
        while true {
            switch conn.readLine(max: ControlProtocol.maxLine, until: deadline()) {
            case .end:
                return nil
            case .timeout:
                return "idle"
            case .tooLong:
                _ = conn.write(ControlAck(.arg, command: "", "line longer than \(ControlProtocol.maxLine) bytes").line, until: deadline())
                return nil
            case .notUTF8:
                guard conn.write(ControlProtocol.notUTF8.line, until: deadline()) else { return "slow_reader" }
            case .line(let text):
                // The time a request takes (idle 60) is not idle time.
                let reply = commands.execute(text)
                guard conn.write(reply, until: deadline()) else { return "slow_reader" }
            }
        }
    }

    /// `struct ucred` of <sys/socket.h>, which Swift's Glibc module hides
    /// (it needs _GNU_SOURCE): pid, uid, gid.
    struct PeerCredentials { var pid: pid_t = 0; var uid: uid_t = 0; var gid: gid_t = 0 }

    private func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var cred = PeerCredentials()
        var len = socklen_t(MemoryLayout<PeerCredentials>.size)
        return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred : nil
    }

    /// uid 0, our own uid, or a member of the socket's group.
    private func allowed(_ peer: PeerCredentials) -> Bool {
        if peer.uid == 0 || peer.uid == geteuid() { return true }
        guard let groupID else { return false }
        if peer.gid == groupID { return true }
        guard let pw = getpwuid(peer.uid) else { return false }
        var groups = [gid_t](repeating: 0, count: 64)
        var n = Int32(groups.count)
        guard getgrouplist(pw.pointee.pw_name, peer.gid, &groups, &n) >= 0 else { return false }
        return groups.prefix(Int(n)).contains(groupID)
    }
}

/// At most one log line per `interval` seconds for a condition that may
/// recur thousands of times a second; the line says how many it stands for.
struct LogThrottle {
    let interval: Double
    private var next = -Double.infinity
    private var skipped = 0

    init(interval: Double) { self.interval = interval }

    /// nil: stay quiet. Otherwise log, saying how many went unlogged before.
    mutating func admit(now: Double = SystemClock.monotonic()) -> Int? {
        guard now >= next else { skipped += 1; return nil }
        defer { skipped = 0; next = now + interval }
        return skipped
    }
}

enum UnixSocket {
    /// Connects to `path` and hangs up: 0 when something listens, else the
    /// errno (ECONNREFUSED: nobody does). Bounded to 2 s (a full backlog).
    static func probe(_ path: String) -> Int32 {
        do throws(Errno) {
            let address = try UnixSocketAddress(path)
            let fd = try FileDescriptor.unixSocket(.stream)
            defer { fd.close() }
            try fd.setTimeouts(seconds: 2)
            try fd.connect(to: address)
            return 0
        } catch { return error.rawValue }
    }
}

/// The C library's text for an errno value.
private func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }
