import CSQLite
import Glibc
import SoundboxThreads
import Synchronization

/// A failed SQLite call: which call, its extended result code and what
/// `sqlite3_errmsg` said. The few checks that are not one C call (the schema
/// version, a state guard) use the closest SQLite code and say so in `call`.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// The C call, with its argument: "sqlite3_step(INSERT INTO outbox ...)".
    public let call: String
    /// The extended result code, e.g. 778 (SQLITE_IOERR_WRITE); `code & 0xFF` is the primary code.
    public let code: Int32
    /// What SQLite (or the check) said, for logs and people.
    public let message: String

    public init(call: String, code: Int32, message: String) {
        self.call = call; self.code = code; self.message = message
    }

    /// The error `rc` of `call` on connection `db`.
    init(call: String, rc: Int32, db: OpaquePointer?) {
        self.init(call: call, code: rc, message: String(cString: db.map { sqlite3_errmsg($0) } ?? sqlite3_errstr(rc)))
    }

    private var primary: Int32 { code & 0xFF }
    /// The file is damaged or is not a database: restore or recreate it, retrying will not help.
    public var isCorrupt: Bool { primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB }
    /// The disk (or `max_page_count`) is full.
    public var isFull: Bool { primary == SQLITE_FULL }
    /// Nothing could be written: disk full or an I/O error. The transaction
    /// was rolled back; reads may still work.
    public var isWriteFailure: Bool { primary == SQLITE_FULL || primary == SQLITE_IOERR }
    /// Writing is not allowed: a read-only file, folder or file system, or
    /// permissions (SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH).
    public var isPermission: Bool {
        primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM || primary == SQLITE_AUTH
    }
    public var description: String { "\(call) failed: \(message) (\(code))" }
}

/// The one sqlite3 connection of a `Store`, used only under its lock
/// (opened with SQLITE_OPEN_NOMUTEX: SQLite does no locking of its own).
final class Connection {
    let db: OpaquePointer
    /// Kept alive as long as the connection (its WAL hook's context).
    fileprivate var hook: CommitWatch?

    /// - Parameter readOnly: open `path` (a file: URI) for reading only.
    /// - Parameter create: create the file if it does not exist.
    init(path: String, readOnly: Bool = false, create: Bool = true) throws(StoreError) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            // A handle is returned even on failure, for its message; it must still be closed.
            let error = StoreError(call: "sqlite3_open_v2(\(path))", rc: rc, db: handle)
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
    }
    deinit { if !isClosed { sqlite3_close_v2(db) } }

    /// Closed by `close()`: `db` must not be used any more.
    private(set) var isClosed = false

    func close() {
        guard !isClosed else { return }
        sqlite3_close_v2(db)
        isClosed = true
    }

    /// Runs one statement with `args` bound to its `?` parameters, in order,
    /// to the end (its rows, if any, are ignored).
    func run(_ sql: String, _ args: any Bindable...) throws(StoreError) { try run(sql, args) }

    func run(_ sql: String, _ args: [any Bindable]) throws(StoreError) {
        let statement = try Statement(db: db, sql: sql, args)
        while try statement.step() {}
    }

    /// Every row of `sql` (with `args` bound), each read by `row`.
    func rows<T>(_ sql: String, _ args: any Bindable..., row: (Statement) throws(StoreError) -> T) throws(StoreError) -> [T] {
        let statement = try Statement(db: db, sql: sql, args)
        var out: [T] = []
        while try statement.step() { out.append(try row(statement)) }
        return out
    }

    /// Runs several statements separated by semicolons, with no parameters.
    func exec(_ sql: String) throws(StoreError) {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw StoreError(call: "sqlite3_exec(\(sql))", rc: rc, db: db) }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(db)) }

    /// Runs `body` in BEGIN IMMEDIATE ... COMMIT (committed, not yet
    /// flushed: `Store.flush`); on any error rolls back and rethrows.
    /// IMMEDIATE takes the write lock at once, so a transaction that reads
    /// before it writes never fails half-way with SQLITE_BUSY.
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try exec("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try exec("COMMIT")
            return result
        } catch {
            // After some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled back.
            if sqlite3_get_autocommit(db) == 0 { sqlite3_exec(db, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }
}

/// One prepared statement, finalized in deinit.
final class Statement {
    private let db: OpaquePointer
    private let handle: OpaquePointer
    let sql: String

    /// Prepares `sql` and binds `args` to its parameters 1, 2, ...
    init(db: OpaquePointer, sql: String, _ args: [any Bindable]) throws(StoreError) {
        var handle: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &handle, nil)
        guard rc == SQLITE_OK, let handle else { throw StoreError(call: "sqlite3_prepare_v2(\(sql))", rc: rc, db: db) }
        self.db = db; self.handle = handle; self.sql = sql
        for (i, value) in args.enumerated() {
            let rc = value.bind(to: handle, at: Int32(i + 1))
            if rc != SQLITE_OK { throw StoreError(call: "sqlite3_bind(\(sql), \(i + 1))", rc: rc, db: db) }
        }
    }
    deinit { sqlite3_finalize(handle) }

    /// Steps once: true when a row is ready, false when the statement is done.
    func step() throws(StoreError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let rc: throw StoreError(call: "sqlite3_step(\(sql))", rc: rc, db: db)
        }
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func optionalInt64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : int64(column)
    }
    /// The column's text, nil for NULL.
    func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, column))), as: UTF8.self)
    }
}

/// A value that can be bound to a `?` parameter.
protocol Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32
}

extension Int64: Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, self) }
}

extension Bool: Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, self ? 1 : 0) }
}

extension String: Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        // SQLITE_TRANSIENT (the C macro is not importable): SQLite copies the bytes before returning.
        sqlite3_bind_text(statement, index, self, Int32(utf8.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    }
}

extension Optional: Bindable where Wrapped: Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        self?.bind(to: statement, at: index) ?? sqlite3_bind_null(statement, index)
    }
}

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
        let slash = database.lastIndex(of: "/")
        let folder = slash.map { $0 == database.startIndex ? "/" : String(database[..<$0]) } ?? "."
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
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
