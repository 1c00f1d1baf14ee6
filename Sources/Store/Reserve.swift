import Glibc
import SoundboxSystem

/// Room kept on the state disk for the day it fills: a file of
/// `bytes` beside the database (`soundbox.db-reserve`). When a write fails
/// because the disk is full and a checkpoint cannot make room either (it
/// copies the WAL's pages into the database before it may cut the WAL, and
/// the database must grow for that), the reserve is deleted: the checkpoint
/// then has room, the WAL is cut to nothing and the write goes on. It is
/// made again after a checkpoint once the disk has room for it and more.
struct Reserve: Sendable {
    let database: String
    let path: String
    let bytes: Int

    init(database: String, bytes: Int) { self.database = database; path = database + "-reserve"; self.bytes = bytes }

    /// The reserve exists at its full size.
    var isHeld: Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && Int(st.st_size) >= bytes
    }

    /// Makes the reserve if it is missing and the disk has room for it and
    /// a quarter as much again besides. Never follows a link; a partial file is deleted.
    func make() {
        guard !isHeld else { return }
        guard let free = Paths.freeBytes(database), free >= Int64(bytes + bytes / 4) else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else { return }
        var st = stat()
        let ok = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink == 1
            && posix_fallocate(fd, 0, off_t(bytes)) == 0
        close(fd)
        if !ok { _ = unlink(path) }
    }

    /// Deletes the reserve: whether there was one to give up.
    func release() -> Bool { isHeld && unlink(path) == 0 }
}
