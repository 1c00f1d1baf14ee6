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

    /// Bytes an unprivileged writer may still use on the file system
    /// holding `path`; nil (errno set) when it cannot be asked.
    public static func freeBytes(_ path: String) -> Int64? {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return nil }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }
}
