// ~500 lines: one suite, the control socket under abuse against the real soundboxd, with the descriptor and raw-client helpers only it uses.
import Foundation
import Testing
import Soundbox
import SoundboxControl
import SoundboxStore
import SoundboxSystem
import TestSupport
import TestRig

/// The control socket under abuse (Hardening items 6 and 13), against the
/// real soundboxd: a cap on clients with a "busy" ACK, idle / slow-loris /
/// non-reading clients cut after the timeout, an accept loop that survives
/// running out of descriptors, and a socket path that never replaces
/// anything but a stale socket.
@Suite struct ControlSocketHardeningTests {
    static let busy = "ACK [52@0] {} too many connections (32); try again"
    /// Connections stay open for the whole test unless a test shortens it.
    static let longIdle = ["SOUNDBOX_CONTROL_IDLE_S": "600"]

    init() { raiseOwnDescriptorLimit() }

    // MARK: - Item 6: exhaustion

    /// 200 idle connections: the first 32 are served, the rest get the busy
    /// ACK and are closed at once; a payment made meanwhile (on a connection
    /// opened before) plays; once the idle ones leave, the socket answers.
    @Test func capRefusesExtraClientsWithBusyAckAndPaymentsStillPlay() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let pid = try daemon.start(extraEnv: Self.longIdle).processIdentifier
        let before = descriptorCount(pid)

        var keeper: ControlConnection! = try ControlConnection.open(daemon.socket, timeout: 30)   // slot 1 of 32
        var idle: [HardeningClient] = []
        var greeted = 0, refused = 0
        for _ in 0..<199 {
            let c = try HardeningClient(daemon.socket)
            let first = c.readLine(timeout: 10)
            if first?.hasPrefix(ControlProtocol.greetingPrefix) == true {
                greeted += 1
                idle.append(c)
            } else {
                #expect(first == Self.busy)
                #expect(c.waitClosed(timeout: 10), "a refused client is closed at once")
                refused += 1
            }
        }
        #expect(greeted == 31 && refused == 168)
        let full = descriptorCount(pid)
        #expect(full - before <= 32, "one descriptor per served client: \(before) -> \(full)")

        let say = try keeper.request(["say", "12.34", "--id", "CAP1"])
        #expect(say["status"] == "queued")
        _ = try keeper.request(["idle", "30"])
        #expect(try keeper.request(["history", "1"])["state"] == "played")

        // soundboxctl says what happened.
        let ctl = try CtlRun(daemon, ["status"])
        #expect(ctl.status == 1 && ctl.stderr.contains("too many connections (32); try again"), "\(ctl.stderr)")

        idle.removeAll()   // closed
        keeper = nil
        _ = try untilServed(daemon)
        #expect(try daemon.request("say", "5.60", "--id", "CAP2")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        let after = descriptorsSettle(pid, atMost: before)
        #expect(after <= before, "every client's descriptor released: \(before) -> \(after)")
        print("hardening: 200 connections; daemon fds before \(before), cap full \(full), after \(after); served \(greeted + 1), refused \(refused)")
        #expect(daemon.stop().0 == 0)
        let store = try Store(path: daemon.database)
        #expect(try store.entry(id: "CAP1")?.state == .played)
        #expect(try store.entry(id: "CAP2")?.state == .played)
        let log = daemon.log(run: 1)
        #expect(log.components(separatedBy: "control: busy clients=32").count - 1 == 1, "rate-limited:\n\(log)")
    }

    /// Idle clients are closed after the idle timeout; their slots free up
    /// (a client that saw its connection end finds a free slot at once).
    @Test func idleClientsAreClosedAndTheirSlotsFreed() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start(extraEnv: ["SOUNDBOX_CONTROL_IDLE_S": "3"])
        let t0 = Date()
        var clients: [HardeningClient] = []
        for _ in 0..<32 {
            let c = try HardeningClient(daemon.socket)
            #expect(c.readLine(timeout: 10)?.hasPrefix(ControlProtocol.greetingPrefix) == true)
            clients.append(c)
        }
        let extra = try HardeningClient(daemon.socket)
        #expect(extra.readLine(timeout: 10) == Self.busy)
        let deadline = Date() + 20
        for c in clients { #expect(c.waitClosed(timeout: max(0.1, deadline.timeIntervalSinceNow))) }
        let elapsed = Date().timeIntervalSince(t0)
        #expect(elapsed >= 2.9, "closed after the timeout, not before: \(elapsed) s")
        #expect(try daemon.request("ping").ack == nil, "slots free once the clients saw the end")
        #expect(daemon.stop().0 == 0)
        #expect(daemon.log(run: 1).contains("control: client_dropped reason=idle"))
    }

    /// A request being executed (idle 3 while a long payment plays) is not
    /// idle time, even with a 1.5 s idle timeout; the connection goes on.
    @Test func aRequestBeingExecutedIsNotIdle() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.null_realtime": "true"])
        try daemon.start(extraEnv: ["SOUNDBOX_CONTROL_IDLE_S": "1.5"])
        let c = try ControlConnection.open(daemon.socket, timeout: 30)
        _ = try c.request(["say", "99999999.99", "--id", "LONG"])   // ~9 s of speech
        let t = Date()
        let error = #expect(throws: ControlClientError.self) { try c.request(["idle", "3"]) }
        #expect(error?.code == "ack_52" && error?.message.contains("still busy after 3 s") == true, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(t) >= 2.9)
        _ = try c.request(["ping"])
        #expect(daemon.stop().0 == 0)
    }

    /// A client sending a byte every 100 ms and never a newline is cut once
    /// the whole line has taken longer than the timeout.
    @Test func slowLorisIsCutAfterTheTimeout() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start(extraEnv: ["SOUNDBOX_CONTROL_IDLE_S": "1.5"])
        let c = try HardeningClient(daemon.socket)
        #expect(c.readLine(timeout: 10)?.hasPrefix(ControlProtocol.greetingPrefix) == true)
        let t = Date()
        var cut = false
        while !cut && Date().timeIntervalSince(t) < 15 {
            cut = !c.send("p") || c.waitClosed(timeout: 0.1)
        }
        let seconds = Date().timeIntervalSince(t)
        #expect(cut, "still connected after \(seconds) s")
        #expect(seconds >= 1.4 && seconds < 6, "\(seconds) s")
        #expect(try daemon.request("ping").ack == nil)
        #expect(daemon.stop().0 == 0)
        #expect(daemon.log(run: 1).contains("control: client_dropped reason=idle"))
    }

    /// A client that sends requests and never reads the replies does not
    /// hold a server thread: once its replies stop flowing for the timeout,
    /// it is closed.
    @Test func clientThatDoesNotReadIsDropped() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start(extraEnv: ["SOUNDBOX_CONTROL_IDLE_S": "1.5"])
        let c = try HardeningClient(daemon.socket)
        #expect(c.readLine(timeout: 10)?.hasPrefix(ControlProtocol.greetingPrefix) == true)
        // 5,000 requests in one write: their replies (~2 MB) outgrow the socket buffers.
        #expect(c.send(String(repeating: "status\n", count: 5000), wait: false))
        #expect(c.waitHangUp(timeout: 20), "the daemon still holds the non-reading client")
        #expect(try daemon.request("ping").ack == nil)
        #expect(daemon.stop().0 == 0)
        #expect(daemon.log(run: 1).contains("control: client_dropped reason=slow_reader"))
    }

    /// Under `prlimit --nofile=64:64`, 300 connections held open: the daemon
    /// serves 32, refuses the rest, keeps accepting, and payments play.
    @Test func hammeredUnderADescriptorLimitOf64() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        daemon.wrapper = ["/usr/bin/prlimit", "--nofile=64:64", "--"]
        let pid = try daemon.start(extraEnv: Self.longIdle).processIdentifier
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        #expect(limits.split(separator: "\n").contains { $0.hasPrefix("Max open files") && $0.contains(" 64 ") })
        let before = descriptorCount(pid)
        var keeper: ControlConnection! = try ControlConnection.open(daemon.socket, timeout: 30)
        var held: [HardeningClient] = []
        var answered = 0
        for _ in 0..<300 {
            let c = try HardeningClient(daemon.socket)
            guard let first = c.readLine(timeout: 10) else { break }   // the daemon stopped accepting
            #expect(first.hasPrefix(ControlProtocol.greetingPrefix) || first == Self.busy)
            if first == Self.busy { #expect(c.waitClosed(timeout: 10)) }
            answered += 1
            held.append(c)
        }
        #expect(answered == 300, "every connection got an answer")
        let full = descriptorCount(pid)
        #expect(full <= before + 32)
        _ = try keeper.request(["say", "7.70", "--id", "LIM1"])
        _ = try keeper.request(["idle", "30"])
        #expect(try keeper.request(["history", "1"])["state"] == "played")
        held.removeAll()
        keeper = nil
        _ = try untilServed(daemon)
        #expect(try daemon.request("say", "8.80", "--id", "LIM2")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        let after = descriptorsSettle(pid, atMost: before)
        #expect(after <= before, "\(before) -> \(after)")
        print("hardening: prlimit 64: 300 connections; daemon fds before \(before), during \(full), after \(after)")
        #expect(daemon.stop().0 == 0)
        let store = try Store(path: daemon.database)
        for id in ["LIM1", "LIM2"] { #expect(try store.entry(id: id)?.state == .played, "\(id)") }
    }

    /// Out of descriptors below the cap (the limit lowered under the running
    /// daemon): accept fails with EMFILE, the daemon says so once (not once
    /// per retry), keeps the pending clients waiting and serves them as soon
    /// as descriptors are back.
    @Test func acceptSurvivesRunningOutOfDescriptors() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let pid = try daemon.start(extraEnv: Self.longIdle).processIdentifier
        _ = try daemon.request("ping")
        let base = descriptorCount(pid)
        try prlimit(pid, soft: base + 6)
        var clients: [HardeningClient] = []
        for _ in 0..<20 { clients.append(try HardeningClient(daemon.socket)) }
        let failedLine = "control: accept_failed error=\"Too many open files\""
        let deadline = Date() + 20
        while !daemon.log(run: 1).contains(failedLine) && Date() < deadline { usleep(20_000) }
        #expect(daemon.log(run: 1).contains(failedLine))
        usleep(1_000_000)   // time passes at EMFILE: about 10 retries, which must not be 10 log lines
        try prlimit(pid, soft: 1024)
        let served = Date() + 20
        for c in clients {
            #expect(c.readLine(timeout: max(0.1, served.timeIntervalSinceNow))?.hasPrefix(ControlProtocol.greetingPrefix) == true, "a waiting client was served")
        }
        clients.removeAll()
        _ = try untilServed(daemon)
        #expect(try daemon.request("say", "9.90", "--id", "EMF1")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)
        let log = daemon.log(run: 1)
        #expect(log.components(separatedBy: failedLine).count - 1 == 1, "rate-limited:\n\(log)")
        // A descriptor freed meanwhile (the ping's session closing late)
        // lets one accept through: the retries are counted over every recovery.
        let retries = LogEvents(log).events.filter { $0.event == "accept_recovered" }
            .reduce(0) { $0 + (Int($1.fields["failures"] ?? "") ?? 0) }
        #expect(retries >= 5, "\(log)")
        #expect(try Store(path: daemon.database).entry(id: "EMF1")?.state == .played)
    }

    /// At start the daemon raises its soft descriptor limit to the hard one
    /// (at most 65536), so the audio output and the database find descriptors.
    @Test
    func softDescriptorLimitRaisedAtStart() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        daemon.wrapper = ["/usr/bin/prlimit", "--nofile=256:4096", "--"]
        let pid = try daemon.start().processIdentifier
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
        #expect(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).prefix(2) == ["4096", "4096"], "\(line)")
        #expect(daemon.stop().0 == 0)
        #expect(daemon.log(run: 1).contains("daemon: descriptors limit=4096 was=256"))
    }

    // MARK: - Item 13: what is at the socket's path

    /// Anything but a socket at control.socket is left alone: the daemon
    /// exits 1 naming the path and what is there.
    @Test(arguments: ["file", "symlink", "directory", "fifo"])
    func refusesToReplaceAnythingButASocket(_ kind: String) throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let content = Data("SQLite format 3\0 precious payments\n".utf8)
        let target = scratch.path + "/soundbox.db"
        try content.write(to: URL(fileURLWithPath: target))
        let expected: String
        switch kind {
        case "file":
            try content.write(to: URL(fileURLWithPath: daemon.socket))
            expected = "\(daemon.socket) is a regular file, not a socket; refusing to replace it"
        case "symlink":
            try FileManager.default.createSymbolicLink(atPath: daemon.socket, withDestinationPath: target)
            expected = "\(daemon.socket) is a symbolic link (to \(target)), not a socket; refusing to replace it"
        case "directory":
            try FileManager.default.createDirectory(atPath: daemon.socket, withIntermediateDirectories: false)
            expected = "\(daemon.socket) is a directory, not a socket; refusing to replace it"
        default:
            #expect(mkfifo(daemon.socket, 0o600) == 0)
            expected = "\(daemon.socket) is a FIFO, not a socket; refusing to replace it"
        }
        #expect(startRefused(daemon) == 1)
        let log = daemon.log(run: 1)
        #expect(log.contains("control_socket_failed") && log.contains(expected), "\(log)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == content)
        var st = stat()
        #expect(lstat(daemon.socket, &st) == 0)
        let types = ["file": S_IFREG, "symlink": S_IFLNK, "directory": S_IFDIR, "fifo": S_IFIFO]
        #expect(st.st_mode & S_IFMT == types[kind], "left as it was")
        if kind == "file" { #expect(try Data(contentsOf: URL(fileURLWithPath: daemon.socket)) == content) }
    }

    /// The socket's directory must be a directory; it is never replaced.
    @Test func socketDirectoryThatIsAFileIsAnError() throws {
        let scratch = Scratch()
        let file = scratch.path + "/run"
        try "keep me\n".write(toFile: file, atomically: false, encoding: .utf8)
        let daemon = try Daemon(dir: scratch.path, config: ["control.socket": file + "/control.sock"])
        #expect(startRefused(daemon) == 1)
        #expect(daemon.log(run: 1).contains("\(file) is a regular file, not a directory; cannot create the control socket \(file)/control.sock in it"))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me\n")

        // A missing directory (one level) is still created.
        try daemon.reconfigure(["control.socket": scratch.path + "/new/control.sock"])
        try daemon.start()
        _ = try ControlConnection.open(scratch.path + "/new/control.sock", timeout: 30).request(["ping"])
        #expect(daemon.stop().0 == 0)
    }

    /// A socket left by a killed daemon is replaced; a live one is not.
    @Test func staleSocketIsReplacedLiveOneIsNot() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        daemon.kill9()
        var st = stat()
        #expect(lstat(daemon.socket, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK, "the killed daemon left its socket")
        try daemon.start()
        #expect(try daemon.request("ping").ack == nil)

        let other = Scratch()
        let second = try Daemon(dir: other.path, config: ["control.socket": daemon.socket])
        #expect(startRefused(second) == 1)
        #expect(second.log(run: 1).contains("another soundboxd is already listening on \(daemon.socket)"))
        #expect(try daemon.request("ping").ack == nil)
        #expect(daemon.stop().0 == 0)
        #expect(lstat(daemon.socket, &st) != 0, "removed at a clean stop")
    }

    // MARK: - Issue 18 item 11: nothing a client sends comes back raw

    /// A raw client sends ESC, NUL, DEL and C1 controls in an id, a replay
    /// and a command name, and invalid UTF-8 in an id and a command name.
    /// Every reply line is printable text (the controls escaped as the log
    /// escapes them), invalid UTF-8 gets a clear error, the connection keeps
    /// working, and the log holds only escaped forms (no U+FFFD either).
    @Test func controlBytesAndInvalidUTF8AreNeverEchoedRaw() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        let c = try HardeningClient(daemon.socket)
        #expect(c.readLine(timeout: 10)?.hasPrefix(ControlProtocol.greetingPrefix) == true)
        let hostile = "A\u{1B}[2J\u{0}B\u{7F}\u{85}\u{9B}Z"
        let escaped = #"A\u{1B}[2J\u{0}B\u{7F}\u{85}\u{9B}Z"#
        let notUTF8 = "ACK [2@0] {} request is not valid UTF-8"
        let exchanges: [(request: [UInt8], reply: [String])] = [
            (Array("say 1 --id \(hostile)".utf8), ["id: \(escaped)", "status: rejected", "reason: id must be printable ASCII without spaces", "OK"]),
            (Array("replay \(hostile)".utf8), ["ACK [50@0] {replay} no payment with id '\(escaped)'"]),
            (Array(hostile.utf8), ["ACK [5@0] {\(escaped)} unknown command '\(escaped)'"]),
            (Array("say 1 --id BAD".utf8) + [0xFF, 0xFE], [notUTF8]),
            ([0x73, 0xC3, 0x28, 0x79] + Array(" 1".utf8), [notUTF8]),   // "s\xC3(y": a lead byte without its continuation
            ([0xED, 0xA0, 0x80], [notUTF8]),                             // a UTF-16 surrogate, encoded
            (Array("ping".utf8), ["OK"]),
        ]
        for (request, reply) in exchanges {
            #expect(c.send(request + [0x0A]))
            for expected in reply {
                let line = c.readRawLine(timeout: 10) ?? []
                #expect(String(decoding: line, as: UTF8.self) == expected, "reply to \(request)")
                #expect(String(validating: line, as: UTF8.self)?.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) } == false,
                        "a raw control byte in \(line)")
            }
        }
        #expect(daemon.stop().0 == 0)
        let log = daemon.log(run: 1)
        let bytes = Array(log.utf8)
        #expect(!bytes.contains { ($0 < 0x20 && $0 != 0x0A) || $0 == 0x7F }, "raw control bytes in the log")
        #expect(!log.unicodeScalars.contains { (0x80...0x9F).contains($0.value) || $0 == "\u{FFFD}" }, "\(log)")
        let rejected = LogEvents(log).events.filter { $0.event == "rejected" }
        #expect(rejected.map { $0.fields["id"] } == [hostile], "read back exactly")
        #expect(log.contains("id=\"\(escaped)\""))
    }

    // MARK: - Helpers

    /// The exit status of a daemon that must not start; nil (and stopped)
    /// if it did start.
    func startRefused(_ daemon: Daemon) -> Int32? {
        do { try daemon.start() } catch { return daemon.waitExit() }
        _ = daemon.stop()
        return nil
    }

    /// Retries `ping` until the daemon serves a new client (slots freed by
    /// clients that just left are released on the daemon's own threads).
    func untilServed(_ daemon: Daemon, timeout: Double = 20) throws -> Reply {
        let deadline = Date() + timeout
        while true {
            let r = try daemon.request("ping")
            if r.ack == nil || Date() > deadline { return r }
            usleep(10_000)
        }
    }
}

/// Open descriptors of a process.
private func descriptorCount(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

/// Open descriptors of a process once they have come down to `bound`
/// (server threads close a client's socket just after it left), or after
/// 10 s, whichever is first.
private func descriptorsSettle(_ pid: Int32, atMost bound: Int) -> Int {
    let deadline = Date() + 10
    var n = descriptorCount(pid)
    while n > bound && Date() < deadline {
        usleep(10_000)
        n = descriptorCount(pid)
    }
    return n
}

/// Sets a running process's soft RLIMIT_NOFILE (the hard one stays:
/// raising it back would need CAP_SYS_RESOURCE).
private func prlimit(_ pid: Int32, soft limit: Int) throws {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
    p.arguments = ["--pid", "\(pid)", "--nofile=\(limit):"]
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw TestFailure("prlimit --pid \(pid) failed") }
}

/// Hundreds of client sockets: the test process's soft limit up to its hard one.
private func raiseOwnDescriptorLimit() {
    var limit = rlimit()
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = min(limit.rlim_max, 65536)
    setrlimit(resource, &limit)
}

/// A bare client socket: no protocol, for holding, trickling and not reading.
final class HardeningClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(_ path: String) throws {
        let socket = try FileDescriptor.unixSocket(.stream)
        fd = socket.rawValue
        var tv = timeval(tv_sec: 10, tv_usec: 0)   // bounds connect() when the backlog is full
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        do { try socket.connect(to: UnixSocketAddress(path)) } catch { socket.close(); throw TestFailure("connect(\(path)): \(error)") }
    }
    deinit { close(fd) }

    /// The next line, or nil at end of stream or after `timeout` seconds.
    func readLine(timeout: Double) -> String? {
        readRawLine(timeout: timeout).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Reads (and drops) until the daemon closes; false if it has not
    /// within `timeout` seconds.
    func waitClosed(timeout: Double) -> Bool {
        let deadline = Date() + timeout
        while let chunk = receive(until: deadline) {
            if chunk.isEmpty { return true }
        }
        return false
    }

    /// Waits, without reading, until the daemon has closed its end.
    func waitHangUp(timeout: Double) -> Bool {
        var pfd = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&pfd, 1, Int32(timeout * 1000)) > 0 && pfd.revents & Int16(POLLHUP) != 0
    }

    /// The next line's bytes (without the newline), or nil at end of stream
    /// or after `timeout` seconds.
    func readRawLine(timeout: Double) -> [UInt8]? {
        let deadline = Date() + timeout
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                defer { buffer.removeSubrange(...nl) }
                return Array(buffer[..<nl])
            }
            guard let chunk = receive(until: deadline), !chunk.isEmpty else { return nil }
            buffer += chunk
        }
    }

    /// Sends `text`; false if the daemon has closed (or, without `wait`, if
    /// the socket buffer is full).
    func send(_ text: String, wait: Bool = true) -> Bool { send(Array(text.utf8), wait: wait) }

    func send(_ bytes: [UInt8], wait: Bool = true) -> Bool {
        let flags = Int32(MSG_NOSIGNAL) | (wait ? 0 : Int32(MSG_DONTWAIT))
        return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, flags) } == bytes.count
    }

    /// Bytes received by `deadline`: empty at end of stream, nil on timeout.
    private func receive(until deadline: Date) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let rc = poll(&pfd, 1, Int32(left * 1000) + 1)
            if rc < 0 && errno == EINTR { continue }
            guard rc > 0 else { return nil }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            return n > 0 ? Array(chunk[..<n]) : []   // an error (ECONNRESET) is an end too
        }
    }
}
