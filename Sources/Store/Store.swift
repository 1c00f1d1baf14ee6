import CSQLite
import Glibc
import Soundbox
import Synchronization

/// The durable queue, history, receipts outbox and remote-config overlay:
/// one SQLite database (docs/DESIGN.md §1, §4, by default
/// /var/lib/soundbox/soundbox.db).
///
/// Every method may be called from any thread; they run one at a time on
/// one connection. A method that writes does all of its writing in one
/// transaction or none of it, and has committed durably when it returns —
/// unless it was called with `flush: false`: then it has committed (every
/// later read sees it) but is durable only after the next `flush()`, by
/// anyone. Times are passed in by the caller (Unix ms), so the store never
/// reads a clock.
///
/// How: WAL with `synchronous=NORMAL`, so a commit writes the WAL without
/// waiting for the disk, and `flush()` is one fdatasync of the WAL, made
/// after the connection's lock is released: other threads read and write
/// meanwhile, and one flush makes durable everything committed before it
/// (an SD card's flush takes 5–50 ms; docs/soundboxd.md, "Flushes").
/// Checkpoints run on a second connection of their own, on a short-lived
/// thread, when the WAL holds `checkpointFrames` frames, never inside a
/// commit.
public final class Store: Sendable {
    /// The database file.
    public let path: String
    let connection: Mutex<Connection>
    /// Device and inode of the file when it was opened.
    private let identity: (dev: UInt64, ino: UInt64)?
    /// The WAL, opened by us for `flush()`; nil when read-only (or when the
    /// WAL could not be opened: then every commit is synchronous=FULL).
    private let wal: WALFile?
    /// Told of every commit (nil when read-only).
    private let watch: CommitWatch?
    var checkpointer: Checkpointer? { watch?.checkpointer }
    /// WAL frames after the last commit.
    public var walFrames: Int { watch?.frames.load(ordering: .relaxed) ?? 0 }
    /// The newest outbox row written (under the connection's lock).
    let lastOutbox = Atomic<Int64>(0)
    /// A checkpoint starts (in the background) when the WAL holds this many
    /// bytes of pages (4,000 frames with 1 KiB pages; a payment writes about 15).
    public static let checkpointBytes = 4000 * 1024
    /// The frames that make `checkpointBytes` with 1 KiB pages.
    public static let checkpointFrames = checkpointBytes / pageSize
    /// The room kept on the state disk for when it fills (`Reserve`): more
    /// than the WAL can hold (`journal_size_limit`), what a checkpoint may
    /// need to copy it.
    public static let reserveBytes = 2 * checkpointBytes
    private let reserve: Reserve?
    /// Whether the reserve is there at its full size (false: given up, or
    /// the disk never had room for it).
    public var holdsReserve: Bool { reserve?.isHeld ?? false }
    /// How many times a write found the disk full and made room for itself.
    public var diskFullRecoveries: Int { disksFull.load(ordering: .relaxed) }
    private let disksFull = Atomic<Int>(0)
    /// The page size of a new database.
    public static let pageSize = 1024
    /// The database's schema version: this program's (`programSchema`), or
    /// a newer one it can use (Schema: one database, two versions).
    public let schemaVersion: Int
    /// The schema version this program writes.
    public static var programSchema: Int { Schema.version }

    /// Opens or creates the database: WAL (flushed by `flush()`), busy_timeout
    /// 5000 ms, schema migrated to the current version. Throws a StoreError
    /// with `isCorrupt` for a damaged or non-database file (`PRAGMA
    /// quick_check` runs at every open), and refuses, with a message saying
    /// "newer", a database written by a newer schema.
    public convenience init(path: String, clock: @escaping @Sendable () -> ClockReading = ClockReading.trusted) throws(StoreError) {
        try self.init(path: path, maxPageCount: nil, clock: clock)
    }

    /// The clock's state when a row is written (`ClockReading`).
    let clock: @Sendable () -> ClockReading

    /// Opens an existing database for reading only, when it cannot be
    /// written (a read-only file system or folder): dedup, history and the
    /// overlay can still be read; every write throws. Without a -wal file
    /// left by a crash the file is read as immutable (a WAL database needs
    /// to create its -shm otherwise, which a read-only folder forbids).
    public init(readingOnly path: String) throws(StoreError) {
        var st = stat()
        let hasWAL = stat(path + "-wal", &st) == 0 && st.st_size > 0
        let uri = "file:" + path.utf8.map { b in
            // Percent-encode what a URI path cannot hold as is.
            b == UInt8(ascii: "%") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") || b < 0x21 || b > 0x7E
                ? "%" + String(b, radix: 16, uppercase: true).leftPadded(2) : String(UnicodeScalar(b))
        }.joined() + (hasWAL ? "?mode=ro" : "?immutable=1")
        let c = try Connection(path: uri, readOnly: true)
        sqlite3_busy_timeout(c.db, 5000)
        let check = try c.rows("PRAGMA quick_check") { $0.text(0) ?? "" }
        guard check == ["ok"] else {
            throw StoreError(call: "PRAGMA quick_check", code: SQLITE_CORRUPT, message: check.joined(separator: "; "))
        }
        schemaVersion = try c.userVersion()
        self.path = path
        identity = Self.identity(of: path)
        isReadOnly = true
        clock = ClockReading.trusted
        wal = nil
        watch = nil
        reserve = nil
        walDamage = nil
        connection = Mutex(c)
    }

    /// Opened with `init(readingOnly:)`.
    public let isReadOnly: Bool

    /// What the check of the -wal file found when this store opened it: a
    /// damaged log, of which SQLite replayed only the part before the damage
    /// (`WALDamage`; the file as it was is kept beside it).
    public let walDamage: WALDamage?

    /// The copies of damaged WALs kept beside the database at `path` (by
    /// this or an earlier start), until someone deletes them.
    public static func damagedWALCopies(of path: String) -> [String] { WALCheck.copies(of: path + "-wal") }

    /// `maxPageCount` caps the file (`PRAGMA max_page_count`): tests use it to
    /// make the disk "full".
    init(path: String, maxPageCount: Int?, clock: @escaping @Sendable () -> ClockReading = ClockReading.trusted) throws(StoreError) {
        self.clock = clock
        // Before SQLite reads the WAL (and then writes over what it could not read).
        var damage = WALCheck.inspect(path + "-wal")
        if damage != nil { damage?.copy = WALCheck.keep(path + "-wal") }
        walDamage = damage
        let c = try Connection(path: path)
        sqlite3_busy_timeout(c.db, 5000)
        // A new database gets 1 KiB pages: every commit writes whole pages
        // to the WAL, and ours touch a few rows in several tables, so small
        // pages write a quarter of the bytes (SD-card wear: docs/soundboxd.md,
        // "Flushes"). An existing file keeps its size (VACUUM would change it).
        try c.run("PRAGMA page_size = \(Self.pageSize)")
        // The first statement to read the file: a non-database fails here with SQLITE_NOTADB.
        let mode = try c.rows("PRAGMA journal_mode = WAL") { $0.text(0) ?? "" }
        guard mode == ["wal"] else {
            throw StoreError(call: "PRAGMA journal_mode = WAL", code: SQLITE_ERROR, message: "journal mode is \(mode.joined()), not wal")
        }
        if let maxPageCount { try c.run("PRAGMA max_page_count = \(maxPageCount)") }
        let pageSize = try c.rows("PRAGMA page_size") { Int($0.int64(0)) }.first ?? Self.pageSize
        // When the WAL starts again after a checkpoint, a file grown past this is cut back.
        try c.run("PRAGMA journal_size_limit = \(Self.checkpointBytes * 3 / 2)")
        let check = try c.rows("PRAGMA quick_check") { $0.text(0) ?? "" }
        guard check == ["ok"] else {
            throw StoreError(call: "PRAGMA quick_check", code: SQLITE_CORRUPT, message: check.joined(separator: "; "))
        }
        // A damaged log, kept aside: SQLite has replayed what it could; now
        // the rest goes, so that a crash later in this run cannot leave the
        // unreadable frames behind what this run appends, to be found and
        // reported again as new damage at the next start. (Without a copy
        // the file is left as it is: the only record of what was lost. A
        // checkpoint that fails, e.g. on a full disk, costs only that report
        // again, not the open.)
        if walDamage?.copy != nil { _ = try? c.rows("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int64(0) } }
        // Reading the file in WAL mode has made the -wal file (if it was not left by a crash).
        wal = WALFile(database: path)
        try c.run(wal == nil ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        schemaVersion = try Schema.migrate(c)
        // What the file holds now is made durable, receipts included.
        let newestOutbox = try c.rows("SELECT coalesce(max(n), 0) FROM outbox") { $0.int64(0) }[0]
        lastOutbox.store(newestOutbox, ordering: .relaxed)
        if let wal {
            _ = wal.committed(outbox: newestOutbox)
            try wal.sync()
        }
        self.path = path
        identity = Self.identity(of: path)
        isReadOnly = false
        let reserve = Reserve(database: path, bytes: Self.reserveBytes)
        reserve.make()
        self.reserve = reserve
        let watch = CommitWatch(checkpointer: Checkpointer(path: path, frames: Self.checkpointBytes / pageSize, reserve: reserve))
        watch.install(on: c)
        self.watch = watch
        connection = Mutex(c)
    }

    deinit {
        // Before the connection closes (closing the last one checkpoints and deletes the -wal by name).
        checkpointer?.close()
    }

    /// Closes both connections now, whoever still holds this store (a
    /// flush under way, a reader): every later call throws SQLITE_MISUSE.
    /// Before another file takes this path (Storage's restore): a
    /// connection left open on the old file could delete, or worse
    /// recover, a -wal of the same name.
    public func close() {
        checkpointer?.close()
        connection.withLock { (c: inout sending Connection) in c.close() }
    }

    /// Makes everything committed so far durable: one fdatasync of the WAL
    /// (or the end of one that started after the last commit), without the
    /// connection's lock.
    public func flush() throws(StoreError) {
        try wal?.sync()
    }

    /// The last commit that wrote something: `flush(upTo:)` that one only
    /// (flushing what others committed after it is their business).
    public var lastCommit: Int { wal?.lastCommit ?? 0 }

    /// Returns once commit `commit` is durable (see `flush`).
    public func flush(upTo commit: Int) throws(StoreError) { try wal?.sync(upTo: commit) }

    /// The newest outbox row that is durable: a receipt past it must not
    /// be sent yet (a `queued` receipt promises the payment survives a
    /// power cut). Everything, when commits are synchronous.
    public var durableOutbox: Int64 { wal?.durableOutbox ?? .max }

    /// An outbox row waits for a flush before it may be sent.
    public var receiptsWaitForFlush: Bool { wal?.outboxWaits ?? false }

    /// Makes every outbox row committed so far durable (see `flush`).
    public func flushReceipts() throws(StoreError) { try wal?.syncOutbox() }

    /// Copies what the WAL holds into the database file now, on this
    /// thread, through the checkpoint connection (tests; shutdown).
    /// Returns the WAL's frames and how many of them are in the database.
    @discardableResult
    public func checkpoint() throws(StoreError) -> (log: Int, checkpointed: Int) {
        guard let checkpointer else { return (0, 0) }
        return try checkpointer.run()
    }

    private static func identity(of path: String) -> (dev: UInt64, ino: UInt64)? {
        var st = stat()
        return stat(path, &st) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
    }

    /// Why the file at `path` is no longer the one this store writes to, or
    /// nil if it is. Someone deleted it (writes would go to a file nobody
    /// can open again: lost at the next start) or put another file in its
    /// place. Cheap (one stat): callers check before writing.
    public func fileProblem() -> String? {
        guard let identity else { return nil }
        var st = stat()
        guard stat(path, &st) == 0 else {
            return errno == ENOENT ? "\(path) was deleted while soundboxd had it open" : "\(path): \(String(cString: strerror(errno)))"
        }
        if UInt64(st.st_dev) != identity.dev || UInt64(st.st_ino) != identity.ino {
            return "\(path) was replaced by another file while soundboxd had it open"
        }
        return nil
    }

    /// Writes a consistent copy of everything committed to `target` (which
    /// must not exist), through this connection: it works even when the
    /// file itself has been deleted (VACUUM INTO).
    public func copy(to target: String) throws(StoreError) {
        try locked { c throws(StoreError) in try c.run("VACUUM INTO ?", target) }
    }

    /// "ok", or what `PRAGMA quick_check` said (or why it could not run).
    public func quickCheck() -> String {
        do {
            return try locked { c throws(StoreError) in try c.rows("PRAGMA quick_check") { $0.text(0) ?? "" } }
                .joined(separator: "\n")
        } catch {
            return error.description
        }
    }

    // MARK: - Inside

    /// Runs `body` with the connection, holding the lock.
    func locked<T: Sendable>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connection.withLock { (c: inout sending Connection) throws(StoreError) -> T in
            guard !c.isClosed else { throw StoreError(call: "store(\(path))", code: SQLITE_MISUSE, message: "the store was closed") }
            return try body(c)
        }
    }

    /// The disk is full: if the WAL holds frames, copies them into the
    /// database and truncates it to nothing (on this connection: it waits
    /// for a background checkpoint under way); if that needs room too (the
    /// database grows by what it copies), gives up the reserve first.
    /// Whether there is room now: then the write that failed may be tried again.
    private func makeRoom(_ c: Connection) -> Bool {
        let truncate = { () -> Bool in (try? c.rows("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int64(0) }.first) == 0 }
        guard walFrames > 0 && truncate() || reserve?.release() == true && (walFrames == 0 || truncate()) else { return false }
        watch?.frames.store(0, ordering: .relaxed)
        disksFull.add(1, ordering: .relaxed)
        return true
    }

    /// Runs `body` (which writes) holding the lock, then, unless `flush` is
    /// false, makes it durable without the lock.
    func write<T: Sendable>(flush: Bool, _ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        let (result, commit) = try locked { c throws(StoreError) in
            let result: T
            do throws(StoreError) {
                result = try body(c)
            } catch where error.isFull && makeRoom(c) {
                // Our own WAL filled the disk: copied into the database and cut to nothing, there is room again.
                result = try body(c)
            }
            // Numbered under the lock, so commits are numbered in order.
            guard watch?.wroteFrames.exchange(false, ordering: .relaxed) == true else { return (result, nil as Int?) }
            return (result, wal?.committed(outbox: lastOutbox.load(ordering: .relaxed)))
        }
        if flush, let commit { try wal?.sync(upTo: commit) }
        return result
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
