import Glibc

/// The address of a Unix-domain socket: a path of 1-107 bytes, or a name
/// in Linux's abstract namespace. Built here only: nothing else fills a `sockaddr_un`.
public struct UnixSocketAddress: Sendable {
    public let path: String
    private let address: sockaddr_un
    private let length: socklen_t

    /// The longest path: `sun_path` less its terminating NUL.
    public static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// Throws `.invalidArgument` for an empty path or one with a NUL byte,
    /// `.nameTooLong` past `maxPathBytes`. With `abstractNamespace`, a
    /// leading "@" names the abstract namespace (as systemd writes
    /// $NOTIFY_SOCKET); otherwise "@" is a file name's first letter.
    public init(_ path: String, abstractNamespace: Bool = false) throws(Errno) {
        var bytes = Array(path.utf8)
        guard !bytes.isEmpty, !bytes.contains(0) else { throw .invalidArgument }
        guard bytes.count <= Self.maxPathBytes else { throw .nameTooLong }
        let abstract = abstractNamespace && bytes[0] == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        self.path = path
        self.address = address
        // An abstract name is exactly its bytes; a path may be NUL-padded.
        length = abstract ? socklen_t(MemoryLayout<sa_family_t>.size + bytes.count) : socklen_t(MemoryLayout<sockaddr_un>.size)
    }

    /// Calls `body` with the address as the socket calls take it.
    public func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }
}
