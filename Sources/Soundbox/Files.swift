import Glibc

/// The few file reads the core makes (settings, voice-pack manifests, the
/// provisioning fault), through POSIX calls: the daemon links no Foundation
/// at all (its static binary ~12 MB smaller and ~3 MB less resident;
/// bench/README.md, "The device build").
public enum Files {
    /// The whole file, or nil if it cannot be read (missing, a folder, no
    /// permission) or is longer than `limit` bytes.
    public static func read(_ path: String, limit: Int = 16 << 20) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return out }
            if n < 0 {
                if errno == EINTR { continue }
                return nil   // EISDIR for a folder, EIO
            }
            out += chunk[..<n]
            if out.count > limit { return nil }
        }
    }

    /// At most the first `count` bytes of the file, or nil if it cannot be read.
    public static func prefix(_ path: String, _ count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
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

    /// Whether this process may read `path`.
    public static func isReadable(_ path: String) -> Bool { access(path, R_OK) == 0 }

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
