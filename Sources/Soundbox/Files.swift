import Glibc

/// The few file reads the core makes (settings, voice-pack manifests, key
/// files, the provisioning fault), through POSIX calls: the daemon links no
/// Foundation at all (its static binary ~12 MB smaller and ~3 MB less
/// resident; bench/README.md, "The device build").
///
/// Every file a user names is opened with `openRegular`: only a regular
/// file is read (a FIFO would block the reader forever, a device never
/// end), and why one cannot be is said in words (`FileError`).
public enum Files {
    /// Opens `path` for reading, as a descriptor the caller closes, if it is
    /// a regular file (symbolic links followed). Opened with O_NONBLOCK so
    /// that a FIFO or a device cannot block the open, then checked with
    /// fstat; O_NONBLOCK is cleared before it is returned.
    public static func openRegular(_ path: String) throws(FileError) -> Int32 {
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } while fd < 0 && errno == EINTR
        guard fd >= 0 else {
            let e = errno
            if e == ENOENT, let target = linkTarget(path) { throw FileError(path: path, reason: .danglingLink(target)) }
            throw FileError(path: path, errno: e)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = errno; close(fd); throw FileError(path: path, errno: e) }
        guard st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw FileError(path: path, reason: .notRegular(st.st_mode & S_IFMT))
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// Throws unless `path` is a regular file this process may open, for a
    /// C library that opens the path itself (libmosquitto's certificates).
    public static func checkRegular(_ path: String) throws(FileError) { close(try openRegular(path)) }

    /// The whole of the regular file `path`; at most `limit` bytes are read
    /// (a larger file is refused, by its size, before it is read).
    public static func contents(_ path: String, limit: Int) throws(FileError) -> [UInt8] {
        let fd = try openRegular(path)
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0 && Int(st.st_size) > limit { throw FileError(path: path, reason: .tooLarge(Int(st.st_size), limit: limit)) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return out }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, errno: errno)
            }
            out += chunk[..<n]
            // Grown since the fstat.
            if out.count > limit { throw FileError(path: path, reason: .tooLarge(out.count, limit: limit)) }
        }
    }

    /// The whole file, or nil if it cannot be read (see `contents`).
    public static func read(_ path: String, limit: Int = 16 << 20) -> [UInt8]? { try? contents(path, limit: limit) }

    /// At most the first `count` bytes of the regular file, or nil if it cannot be read.
    public static func prefix(_ path: String, _ count: Int) -> [UInt8]? {
        guard let fd = try? openRegular(path) else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, count - done) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            done += n
        }
        return Array(buf[..<done])
    }

    /// Whether something exists at `path` (a dangling symbolic link does not).
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// The names in a folder (without "." and ".."), unsorted; empty if it
    /// cannot be read.
    public static func list(_ directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// What a file with this `st_mode` is, for messages: "a regular file",
    /// "a directory", "a symbolic link (to X)" (X read from `path`), "a FIFO" ...
    public static func kind(mode: mode_t, path: String) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFLNK: linkTarget(path).map { "a symbolic link (to \($0))" } ?? "a symbolic link"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "a file of unknown type"
        }
    }

    /// Where the symbolic link at `path` points, or nil.
    public static func linkTarget(_ path: String) -> String? {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Why a file could not be opened or read, in words: "PATH: is a symbolic
/// link loop". `errno` keeps the code (ENOENT for a missing file).
public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// open, fstat or read failed with this errno.
        case errno(Int32)
        /// Not a regular file: its `st_mode & S_IFMT`.
        case notRegular(UInt32)
        /// Larger than the reader allows.
        case tooLarge(Int, limit: Int)
        /// A symbolic link to this target, which does not exist (ENOENT).
        case danglingLink(String)
    }
    public let path: String
    public let reason: Reason

    public init(path: String, reason: Reason) { self.path = path; self.reason = reason }
    public init(path: String, errno code: Int32) { self.init(path: path, reason: .errno(code)) }

    /// The errno of a failed call, or 0.
    public var errno: Int32 {
        switch reason {
        case .errno(let e): e
        case .danglingLink: ENOENT
        case .notRegular, .tooLarge: 0
        }
    }

    /// Nothing at the path (ENOENT).
    public var isMissing: Bool { errno == ENOENT }

    public var description: String { "\(path): \(phrase)" }

    /// What is wrong, without the path: "is a symbolic link loop".
    public var phrase: String {
        switch reason {
        case .errno(let e): Self.phrase(errno: e)
        case .notRegular(let type):
            switch type {
            case S_IFDIR: "is a folder, not a file"
            case S_IFIFO: "is a FIFO (named pipe), not a regular file"
            case S_IFCHR: "is a character device, not a regular file"
            case S_IFBLK: "is a block device, not a regular file"
            case S_IFSOCK: "is a socket, not a regular file"
            default: "is not a regular file"
            }
        case .tooLarge(let size, let limit): "is \(size) bytes, more than the \(limit) allowed"
        case .danglingLink(let target): "is a symbolic link to \(TextFile.excerpt(target, limit: 200)), which does not exist"
        }
    }

    /// The errno of opening or reading a file, in words.
    public static func phrase(errno e: Int32) -> String {
        switch e {
        case ENOENT: "does not exist"
        case EACCES: "permission denied"
        case EPERM: "operation not permitted"
        case ELOOP: "is a symbolic link loop"
        case EISDIR: "is a folder, not a file"
        case ENOTDIR: "a part of the path is not a folder"
        case ENAMETOOLONG: "the path is too long"
        case EMFILE, ENFILE: "too many open files"
        case ENXIO: "is a socket or a device that cannot be opened, not a regular file"
        case EIO: "input/output error (a failing disk or card?)"
        default: String(cString: strerror(e))
        }
    }
}
