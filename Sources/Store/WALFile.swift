import CSQLite
import Glibc
import SoundboxSystem
import Synchronization

/// The database's -wal file, opened by us only to flush it: fdatasync on
/// any descriptor of a file writes all of its dirty pages, whoever wrote
/// them. SQLite keeps the file (and its inode) while the connection is
/// open: a checkpoint rewrites it from the start, it is never replaced.
///
/// Flushes are shared (group commit): commits are numbered as they
/// happen, and a flush asked for commit n returns as soon as any flush
/// that started after commit n has ended, whichever thread made it. One
/// asked for a commit that no flush under way covers starts its own at
/// once, beside the others (never waits for one that does not help it).
final class WALFile: @unchecked Sendable {
    private let fd: Int32
    let path: String
    private let state = Condition()
    private var commits = 0       // guarded by state
    private var durable = 0       // guarded by state: commits a finished flush covered
    private var running = 0       // guarded by state: flushes under way
    private var runningCover = 0  // guarded by state: the newest commit one of them covers
    /// The newest outbox row committed, and the newest one durable.
    private var outboxCommitted: Int64 = 0   // guarded by state
    private var outboxDurable: Int64 = 0     // guarded by state
    /// The commit that wrote `outboxCommitted`.
    private var outboxCommit = 0             // guarded by state

    /// Opens `database`-wal, and syncs the folder once so that the files'
    /// names survive a power cut too; nil when there is no -wal file.
    init?(database: String) {
        path = database + "-wal"
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        Paths.syncFolder(containing: database)
    }
    deinit { close(fd) }

    /// A commit wrote frames, the newest outbox row being `outbox`;
    /// returns its number.
    func committed(outbox: Int64) -> Int {
        state.broadcast {
            commits += 1
            if outbox > outboxCommitted { outboxCommitted = outbox; outboxCommit = commits }
            return commits
        }
    }

    /// The number of the last commit that wrote frames.
    var lastCommit: Int { state.broadcast { commits } }

    /// Returns once the newest outbox row is durable (flushing only if no
    /// flush under way covers it).
    func syncOutbox() throws(StoreError) { try sync(upTo: state.broadcast { outboxCommit }) }

    /// The newest outbox row that a finished flush made durable.
    var durableOutbox: Int64 { state.broadcast { outboxDurable } }
    /// Whether an outbox row has been committed but not yet flushed.
    var outboxWaits: Bool { state.broadcast { outboxCommitted > outboxDurable } }

    /// Returns once commit `target` (default: the last) is on the disk.
    func sync(upTo target: Int? = nil) throws(StoreError) {
        var covering: (commit: Int, outbox: Int64)?
        var done = false
        state.wait {
            let goal = target ?? commits
            if durable >= goal {
                done = true
            } else if running == 0 || runningCover < goal {
                running += 1
                runningCover = max(runningCover, commits)
                covering = (commits, outboxCommitted)
            }
            return done || covering != nil
        }
        guard let covering else { return }
        let ok = fdatasync(fd) == 0
        let error = errno
        // Whichever flush ends first, everything committed before it started is on the disk.
        state.broadcast {
            running -= 1
            if ok {
                durable = max(durable, covering.commit)
                outboxDurable = max(outboxDurable, covering.outbox)
            }
        }
        guard ok else {
            throw StoreError(call: "fdatasync(\(path))", code: SQLITE_IOERR | 4 << 8 /* SQLITE_IOERR_FSYNC */, message: String(cString: strerror(error)))
        }
    }
}
