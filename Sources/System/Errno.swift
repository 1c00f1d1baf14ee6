import Glibc

/// A POSIX error number, typed: thrown by the system layer's calls and
/// compared by name (`.notFound`), never by magic numbers.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now.
    public static var current: Errno { Errno(Glibc.errno) }
    /// The C library's text: "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    public static let notFound = Errno(ENOENT)
    public static let permissionDenied = Errno(EACCES)
    public static let notPermitted = Errno(EPERM)
    public static let connectionRefused = Errno(ECONNREFUSED)
    public static let wouldBlock = Errno(EAGAIN)
    public static let interrupted = Errno(EINTR)
    public static let nameTooLong = Errno(ENAMETOOLONG)
    public static let invalidArgument = Errno(EINVAL)
    public static let noSpace = Errno(ENOSPC)
}
