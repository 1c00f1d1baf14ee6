import CSQLite
import Glibc
import SoundboxSystem
import Synchronization

/// What the WAL hook learns after each commit of the store's connection
/// (it replaces SQLite's automatic checkpoint, which would run inside the
/// commit): that frames were written, how many the WAL holds, and so when
/// a checkpoint is due.
final class CommitWatch: Sendable {
    let checkpointer: Checkpointer
    /// WAL frames after the last commit.
    let frames = Atomic<Int>(0)
    /// The transaction just committed wrote frames (read and cleared under the connection's lock).
    let wroteFrames = Atomic<Bool>(false)

    init(checkpointer: Checkpointer) { self.checkpointer = checkpointer }

    func install(on c: Connection) {
        c.hook = self
        sqlite3_wal_hook(c.db, { context, _, _, frames in
            Unmanaged<CommitWatch>.fromOpaque(context!).takeUnretainedValue().committed(frames: Int(frames))
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private func committed(frames count: Int) {
        wroteFrames.store(true, ordering: .relaxed)
        frames.store(count, ordering: .relaxed)
        checkpointer.committed(walFrames: count)
    }
}

/// Checkpoints the WAL into the database on a connection of its own, on a
/// short-lived thread, so that no commit (and no reader) waits for the
/// checkpoint's two flushes. At most one runs at a time; none after `close`.
///
/// SQLite starts the WAL again from its beginning at the first write after
/// a checkpoint that copied every frame. Commits made while a checkpoint
/// runs stay in the WAL, so it may not start again at once: another
/// checkpoint waits until a quarter of `frames` more have been written,
/// rather than run (two flushes) after every commit.
final class Checkpointer: @unchecked Sendable {
    let path: String
    /// When the WAL holds this many frames, a checkpoint starts.
    let frames: Int
    private let state = Condition()
    private var running = false      // guarded by state
    private var closed = false       // guarded by state
    /// The WAL's frames when the last checkpoint started.
    private var startedAt = 0        // guarded by state
    /// Checkpoints that have ended (for tests).
    private var ended = 0            // guarded by state
    /// Opened by the first checkpoint; used only by the one running.
    private var connection: Connection?

    /// Made again after a checkpoint, if it was given up.
    let reserve: Reserve?

    init(path: String, frames: Int, reserve: Reserve? = nil) { self.path = path; self.frames = frames; self.reserve = reserve }

    /// After a commit that left `walFrames` in the WAL: starts a checkpoint
    /// in the background if one is due and none is running.
    func committed(walFrames: Int) {
        guard walFrames >= frames else { return }
        let due = state.broadcast { () -> Bool in
            guard !running, !closed, walFrames < startedAt || walFrames >= startedAt + frames / 4 else { return false }
            running = true
            startedAt = walFrames
            return true
        }
        guard due else { return }
        ServiceThread.detached { [self] in
            _ = try? work()
            state.broadcast { running = false; ended += 1 }
        }
    }

    /// Waits until `count` checkpoints have ended; false on timeout.
    func waitForCheckpoints(_ count: Int, timeout: Double) -> Bool { state.wait(timeout: timeout) { ended >= count } }

    /// A checkpoint now, on this thread (after one running has ended).
    func run() throws(StoreError) -> (log: Int, checkpointed: Int) {
        var claimed = false
        state.wait {
            if !running && !closed { running = true; claimed = true }
            return claimed || closed
        }
        guard claimed else { return (0, 0) }
        defer { state.broadcast { running = false; ended += 1 } }
        return try work()
    }

    /// Runs `body` with no checkpoint running (tests: a copy of the files as
    /// a crash would leave them, not one torn by a checkpoint under way).
    func paused<T>(_ body: () throws -> T) rethrows -> T {
        var claimed = false
        state.wait {
            if !running { running = true; claimed = true }
            return claimed
        }
        defer { state.broadcast { running = false } }
        return try body()
    }

    /// Waits for a running checkpoint and closes the connection.
    func close() {
        state.wait { !running }
        state.broadcast { closed = true }
        connection = nil
    }


    private func work() throws(StoreError) -> (log: Int, checkpointed: Int) {
        if connection == nil {
            let c = try Connection(path: path, create: false)
            sqlite3_busy_timeout(c.db, 1000)
            // NORMAL: the checkpoint syncs the WAL before and the database after copying.
            try c.run("PRAGMA synchronous = NORMAL")
            connection = c
        }
        // PASSIVE first: it copies while the store goes on committing. But
        // SQLite starts the WAL again from its beginning only at a commit
        // that finds every frame copied, and under a sustained stream
        // commits land during every checkpoint: the WAL would grow without
        // bound (77 MB for a backlog of 5,000). So then RESTART: it holds
        // off writers (they wait, busy_timeout) while it copies what came
        // meanwhile, a few frames, and waits for readers, so that the next
        // commit starts the WAL again (cut to `journal_size_limit`).
        _ = try checkpoint("PASSIVE")
        let done = try checkpoint("RESTART")
        reserve?.make()
        return done
    }

    /// `PRAGMA wal_checkpoint(mode)`: the WAL's frames and how many are in the
    /// database; SQLITE_BUSY (a writer or a reader held it off) as an error.
    private func checkpoint(_ mode: String) throws(StoreError) -> (log: Int, checkpointed: Int) {
        let row = try connection!.rows("PRAGMA wal_checkpoint(\(mode))") { [Int($0.int64(0)), Int($0.int64(1)), Int($0.int64(2))] }.first ?? [0, 0, 0]
        guard row[0] == 0 else { throw StoreError(call: "PRAGMA wal_checkpoint(\(mode))", code: SQLITE_BUSY, message: "held off by another connection") }
        return (row[1], row[2])
    }
}
