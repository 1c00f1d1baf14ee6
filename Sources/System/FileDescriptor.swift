import Glibc

/// An open file descriptor. A value, like swift-system's: whoever opens it
/// closes it (`close()`), once.
public struct FileDescriptor: Hashable, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Opens `path` (O_CLOEXEC is added), retrying on EINTR.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> FileDescriptor {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return FileDescriptor(rawValue: fd) }
            if errno != EINTR { throw .current }
        }
    }

    public enum SocketKind: Sendable { case stream, datagram }

    /// A new Unix-domain socket (close-on-exec).
    public static func unixSocket(_ kind: SocketKind) throws(Errno) -> FileDescriptor {
        let type = kind == .stream ? SOCK_STREAM.rawValue : SOCK_DGRAM.rawValue
        let fd = socket(AF_UNIX, Int32(type) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .current }
        return FileDescriptor(rawValue: fd)
    }

    public func close() { _ = Glibc.close(rawValue) }

    public func bind(to address: UnixSocketAddress) throws(Errno) {
        guard address.withSockaddr({ Glibc.bind(rawValue, $0, $1) }) == 0 else { throw .current }
    }

    public func connect(to address: UnixSocketAddress) throws(Errno) {
        guard address.withSockaddr({ Glibc.connect(rawValue, $0, $1) }) == 0 else { throw .current }
    }

    /// One datagram to `address` (no SIGPIPE); the bytes sent.
    @discardableResult
    public func send(_ bytes: [UInt8], to address: UnixSocketAddress) throws(Errno) -> Int {
        let n = bytes.withUnsafeBytes { buffer in
            address.withSockaddr { sendto(rawValue, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), $0, $1) }
        }
        guard n >= 0 else { throw .current }
        return n
    }

    /// Bounds every send (and a Unix socket's connect) and receive to `seconds`.
    public func setTimeouts(seconds: Int) throws(Errno) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            guard setsockopt(rawValue, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size)) == 0 else { throw .current }
        }
    }

    /// fsync(2): the file's data and metadata are on the disk.
    public func sync() throws(Errno) { guard fsync(rawValue) == 0 else { throw .current } }
    /// fdatasync(2): the file's data (and its size) are on the disk.
    public func syncData() throws(Errno) { guard fdatasync(rawValue) == 0 else { throw .current } }
}
