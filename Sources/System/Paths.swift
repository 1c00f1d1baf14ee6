import Glibc

/// Path helpers: the folder a file is in, and making a file's name durable.
public enum Paths {
    /// The folder `path` is in ("/" for a file at the root), or nil for a bare name.
    public static func parent(of path: String) -> String? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// fsync of `path` itself (a file or a folder).
    public static func sync(_ path: String) throws(Errno) {
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        try fd.sync()
    }

    /// fsync of the folder holding `path` ("." for a bare name), so that a
    /// file created, renamed or removed there keeps its name after a power
    /// cut. Best effort: a folder that cannot be opened is left.
    public static func syncFolder(containing path: String) {
        try? sync(parent(of: path) ?? ".")
    }

    /// Replaces `path` with `text` as one step that survives a power cut:
    /// written to a new `path.tmp` (whatever was there, a link too, is
    /// removed first), fsynced, renamed over it, the folder synced. False
    /// (errno set) when it could not be.
    public static func replace(_ path: String, with text: String, mode: mode_t = 0o640) -> Bool {
        let tmp = path + ".tmp"
        unlink(tmp)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        guard fd >= 0 else { return false }
        let bytes = Array(text.utf8)
        let ok = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count && fsync(fd) == 0
        let e = errno
        close(fd)
        guard ok, rename(tmp, path) == 0 else { let e2 = ok ? errno : e; unlink(tmp); errno = e2; return false }
        syncFolder(containing: path)
        return true
    }

    /// Bytes an unprivileged writer may still use on the file system
    /// holding `path`; nil (errno set) when it cannot be asked.
    public static func freeBytes(_ path: String) -> Int64? {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return nil }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }
}
