// The client side of soundboxd's control socket (docs/control-protocol.md),
// shared by soundboxctl, the tests and the benchmarks.
import Glibc
import Soundbox
import SoundboxSystem

/// Why a request did not get a reply: the message names the socket;
/// `code` is stable (`not_running`, `permission`, `timeout`, `protocol`,
/// `connect`, or `ack_<n>` for an ACK from soundboxd).
public struct ControlClientError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public let code: String
    /// The daemon's ACK, when that is what happened.
    public let ack: ControlAck?
    public var description: String { message }
}

private func failure(_ message: String, code: String) -> ControlClientError {
    ControlClientError(message: message, code: code, ack: nil)
}

/// One connection to soundboxd's control socket. `open` connects and checks
/// the greeting; `request` sends one request line and collects the reply's
/// `key: value` lines up to `OK`. An `ACK`, a timeout or a broken
/// connection is thrown as a `ControlClientError` that names the socket. The
/// descriptor is closed when the connection goes away.
public final class ControlConnection {
    public let path: String
    private let fd: Int32
    /// Bytes received after the last complete line.
    private var pending: [UInt8] = []
    private var timeout = 0

    /// Longest reply line accepted. Replies are meant to stay within
    /// `ControlProtocol.maxLine`; this only bounds memory.
    static let maxReplyLine = 64 * 1024

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    /// Connects to `path` and reads the greeting. `timeout` bounds the
    /// connect (a daemon whose backlog is full) and every wait for a reply.
    public static func open(_ path: String, timeout seconds: Int) throws(ControlClientError) -> ControlConnection {
        let room = UnixSocketAddress.maxPathBytes
        guard let address = try? UnixSocketAddress(path) else {
            throw failure("socket path '\(path)' must be 1-\(room) bytes", code: "connect")
        }
        let fd: FileDescriptor
        do { fd = try .unixSocket(.stream) } catch { throw failure("socket(): \(error)", code: "connect") }
        let connection = ControlConnection(path: path, fd: fd.rawValue)
        try connection.setTimeout(seconds)

        do throws(Errno) { try fd.connect(to: address) } catch {
            switch error {
            case .notFound, .connectionRefused:
                throw failure("cannot connect to \(path): \(error); is soundboxd running?", code: "not_running")
            case .permissionDenied, .notPermitted:
                throw failure("cannot connect to \(path): \(error); run as root or as a member of the socket's group (control.group)",
                              code: "permission")
            case .wouldBlock:
                throw failure("soundboxd at \(path) did not accept the connection within \(seconds) s", code: "timeout")
            default:
                throw failure("cannot connect to \(path): \(error)", code: "connect")
            }
        }

        // A client the daemon refuses gets an ACK instead of the greeting.
        let greeting = try connection.readLine()
        if let ack = ControlAck.parse(greeting) { throw ControlClientError(ack) }
        guard greeting.hasPrefix(ControlProtocol.greetingPrefix) else {
            throw failure("\(path) is not soundboxd's control socket: it greeted with '\(greeting)'", code: "protocol")
        }
        return connection
    }

    /// Sends one request and returns its reply; an `ACK` is thrown.
    public func request(_ args: [String]) throws(ControlClientError) -> ControlReply {
        try send(ControlProtocol.requestLine(args) + "\n")
        var reply = ControlReply()
        while true {
            let line = try readLine()
            if line == "OK" { return reply }
            if let ack = ControlAck.parse(line) { throw ControlClientError(ack) }
            guard let pair = ControlReply.pair(line) else {
                throw failure("unexpected line from soundboxd at \(path): '\(line)'", code: "protocol")
            }
            reply.pairs.append(pair)
        }
    }

    private func setTimeout(_ seconds: Int) throws(ControlClientError) {
        timeout = seconds
        // SO_SNDTIMEO also bounds connect() on a Unix socket.
        do { try FileDescriptor(rawValue: fd).setTimeouts(seconds: seconds) } catch {
            throw failure("setsockopt(): \(error)", code: "connect")
        }
    }

    private func send(_ text: String) throws(ControlClientError) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            // MSG_NOSIGNAL: a daemon that went away is an error, not SIGPIPE.
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw failure("sending to soundboxd at \(path): \(errorText())", code: "protocol") }
            sent += n
        }
    }

    /// The next line, without its "\n" (or "\r\n").
    private func readLine() throws(ControlClientError) -> String {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = TextFile.line(pending[..<newline])
                pending.removeSubrange(...newline)
                return line
            }
            guard pending.count <= Self.maxReplyLine else {
                throw failure("soundboxd at \(path) sent a line longer than \(Self.maxReplyLine) bytes", code: "protocol")
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                pending += chunk[..<n]
            } else if n == 0 {
                throw failure("soundboxd at \(path) closed the connection without finishing its reply", code: "protocol")
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                throw failure("soundboxd at \(path) did not answer within \(timeout) s", code: "timeout")
            } else if errno != EINTR {
                throw failure("reading from soundboxd at \(path): \(errorText())", code: "protocol")
            }
        }
    }
}

extension ControlClientError {
    /// An ACK from soundboxd: its message, code `ack_<n>`.
    public init(_ ack: ControlAck) {
        self.init(message: ack.message, code: "ack_\(ack.code.rawValue)", ack: ack)
    }
}

/// The C library's text for an errno value.
func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }
