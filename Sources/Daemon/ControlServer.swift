import Glibc
import Soundbox
import SoundboxThreads

struct DaemonError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
    static func errno(_ call: String) -> DaemonError { DaemonError("\(call) failed: \(String(cString: strerror(Glibc.errno)))") }
}

/// The control socket (docs/control-protocol.md): accepts connections on
/// its own thread, one thread per client, peer credentials checked.
final class ControlServer: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let groupID: gid_t?
    private let commands: Commands
    private let log = Log("control")

    /// Binds the socket (mode 0660, group `group` if it exists). A live
    /// socket at `path` means another soundboxd: refused. A stale one is
    /// replaced.
    init(path: String, group: String, commands: Commands) throws(DaemonError) {
        self.path = path
        self.commands = commands
        groupID = getgrnam(group).map { $0.pointee.gr_gid }
        if access(path, F_OK) == 0 {
            if let probe = try? UnixSocket.connect(path) {
                _ = probe
                throw DaemonError("another soundboxd is already listening on \(path)")
            }
            unlink(path)
        }
        let dir = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !dir.isEmpty { mkdir(dir, 0o755) }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .errno("socket") }
        guard var addr = UnixSocket.address(path) else { close(fd); throw DaemonError("socket path too long: \(path)") }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { let e = DaemonError.errno("bind(\(path))"); close(fd); throw e }
        chmod(path, 0o660)
        if let groupID { chown(path, uid_t.max, groupID) }   // uid_t.max = (uid_t)-1: keep the owner
        guard listen(fd, 16) == 0 else { let e = DaemonError.errno("listen"); close(fd); throw e }
    }

    /// Accept loop; returns after `stop`.
    func run() {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                break   // shut down
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            ServiceThread.detached { [self] in serve(client) }
        }
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        unlink(path)
    }

    private func serve(_ client: Int32) {
        let conn = LineConnection(fd: client)
        guard let peer = peerCredentials(client), allowed(peer) else {
            conn.write(ControlAck(.permission, command: "", "permission denied").line)
            log.warning("refused", ["uid": peerCredentials(client).map { "\($0.uid)" } ?? "?"])
            return
        }
        conn.write(ControlProtocol.greetingPrefix + soundboxVersion + "\n")
        while let line = conn.readLine(max: ControlProtocol.maxLine) {
            switch line {
            case .tooLong:
                conn.write(ControlAck(.arg, command: "", "line longer than \(ControlProtocol.maxLine) bytes").line)
                return
            case .line(let text):
                conn.write(commands.execute(text))
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

/// A connected socket read line by line; closed in deinit.
final class LineConnection {
    enum Line { case line(String), tooLong }
    let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }
    deinit { close(fd) }

    /// The next line without its newline; nil at end of stream.
    func readLine(max: Int) -> Line? {
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return nl > max ? .tooLong : .line(line.hasSuffix("\r") ? String(line.dropLast()) : line)
            }
            if buffer.count > max { return .tooLong }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer += chunk[..<n]
        }
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}

enum UnixSocket {
    static func address(_ path: String) -> sockaddr_un? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        return addr
    }

    /// A connected client socket, or nil.
    static func connect(_ path: String) throws(DaemonError) -> LineConnection {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .errno("socket") }
        let conn = LineConnection(fd: fd)
        guard var addr = address(path) else { throw DaemonError("socket path too long") }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw .errno("connect(\(path))") }
        return conn
    }
}
