import CSQLite
import Glibc
import Soundbox
import Synchronization

/// One payment in the store.
public struct Entry: Sendable, Equatable {
    /// Acceptance order: increasing, never reused, even after pruning.
    public var seq: Int64
    public var payment: Payment
    public var state: PaymentState
    /// Unix milliseconds.
    public var acceptedAt: Int64
    /// Unix milliseconds of the last state change.
    public var updatedAt: Int64
    /// How many times speaking started: more than 1 after a crash or a retry.
    public var plays: Int
    /// Why the entry is `failed` (or another final state), if said.
    public var reason: String?
    /// The offline summary it is (or was) spoken in: that summary's first
    /// seq; nil when spoken on its own.
    public var summary: Int64?

    public init(seq: Int64, payment: Payment, state: PaymentState, acceptedAt: Int64, updatedAt: Int64,
                plays: Int, reason: String?, summary: Int64? = nil) {
        self.seq = seq; self.payment = payment; self.state = state; self.acceptedAt = acceptedAt
        self.updatedAt = updatedAt; self.plays = plays; self.reason = reason; self.summary = summary
    }
}

/// What `Store.accept` did with a payment.
public enum AcceptOutcome: Sendable, Equatable {
    /// Stored as a new entry, durably.
    case queued(seq: Int64)
    /// The id was accepted within the dedup window: nothing queued. The entry
    /// already holding that id, or nil when it has since been pruned from the
    /// history (its id is remembered longer than the entry may be kept).
    case duplicate(of: Entry?)
}

/// A receipt waiting for the broker to take it.
public struct OutboxItem: Sendable, Equatable {
    /// Order of writing; the key for `deleteOutbox`.
    public var n: Int64
    /// The receipt's JSON, as it goes on the wire.
    public var payload: String
    /// Unix milliseconds.
    public var createdAt: Int64

    public init(n: Int64, payload: String, createdAt: Int64) {
        self.n = n; self.payload = payload; self.createdAt = createdAt
    }
}

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
    private let lastOutbox = Atomic<Int64>(0)
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

    /// Opens or creates the database: WAL (flushed by `flush()`), busy_timeout
    /// 5000 ms, schema migrated to the current version. Throws a StoreError
    /// with `isCorrupt` for a damaged or non-database file (`PRAGMA
    /// quick_check` runs at every open), and refuses, with a message saying
    /// "newer", a database written by a newer schema.
    public convenience init(path: String, clock: @escaping @Sendable () -> ClockReading = ClockReading.trusted) throws(StoreError) {
        try self.init(path: path, maxPageCount: nil, clock: clock)
    }

    /// The clock's state when a row is written (`ClockReading`).
    private let clock: @Sendable () -> ClockReading

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
        // Reading the file in WAL mode has made the -wal file (if it was not left by a crash).
        wal = WALFile(database: path)
        try c.run(wal == nil ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        try Schema.migrate(c)
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
    /// The ingest transaction, durable when it returns. If `payment.id` has
    /// a dedup record (kept for the retention window: `prune`): `.duplicate`
    /// and a `duplicate` receipt in the outbox, whatever the clock says now. Otherwise the payment is stored (queued, plays
    /// 0), its id remembered for dedup, a `queued` receipt put in the outbox:
    /// `.queued(seq:)`. `now` is Unix ms; receipts carry `now / 1000`.
    /// Failpoint "after_insert": a new payment written, not yet committed.
    public func accept(_ payment: Payment, now: Int64, flush: Bool = true) throws(StoreError) -> AcceptOutcome {
        let clock = self.clock()
        return try write(flush: flush) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> AcceptOutcome in
                if try !c.rows("SELECT 1 FROM dedup WHERE id = ?", payment.id, row: { $0.int64(0) }).isEmpty {
                    let earlier = try c.rows("SELECT \(Entry.columns) FROM payments WHERE id = ? ORDER BY seq DESC LIMIT 1",
                                             payment.id, row: Entry.init(row:))
                    try append(Receipt(id: payment.id, status: .duplicate, ts: now / 1000), now: now, c)
                    return .duplicate(of: earlier.first)
                }
                try c.run("""
                    INSERT INTO payments (id, amount_minor, currency, channel, lang, ts, accepted_at, updated_at, state, plays, boot, mono, dated)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)
                    """, payment.id, payment.amount.minorUnits, payment.currency, payment.channel.rawValue,
                    payment.lang, payment.ts, now, now, clock.boot, clock.sinceBoot, clock.synced)
                let seq = sqlite3_last_insert_rowid(c.db)
                try c.run("INSERT OR REPLACE INTO dedup (id, accepted_at, boot, mono, dated, n) VALUES (?, ?, ?, ?, ?, ?)",
                          payment.id, now, clock.boot, clock.sinceBoot, clock.synced, seq)
                try append(Receipt(id: payment.id, status: .queued, ts: now / 1000), now: now, c)
                Failpoint.hit("after_insert")
                return .queued(seq: seq)
            }
        }
    }

    /// The entry to speak next: the oldest `playing` one (a crash interrupted
    /// it: it is spoken again), else the oldest `queued` one; nil when none.
    public func next() throws(StoreError) -> Entry? {
        try locked { c throws(StoreError) in
            try c.rows("SELECT \(Entry.columns) FROM payments WHERE \(Self.isPending) ORDER BY state <> 'playing', seq LIMIT 1",
                       row: Entry.init(row:)).first
        }
    }

    /// All pending (queued and playing) entries, oldest first.
    public func pending() throws(StoreError) -> [Entry] {
        try locked { c throws(StoreError) in
            try c.rows("SELECT \(Entry.columns) FROM payments WHERE \(Self.isPending) ORDER BY seq", row: Entry.init(row:))
        }
    }

    /// How many entries are queued or playing.
    public func pendingCount() throws(StoreError) -> Int {
        try locked { c throws(StoreError) in
            try c.rows("SELECT count(*) FROM payments WHERE \(Self.isPending)") { Int($0.int64(0)) }[0]
        }
    }

    /// Speaking starts: a queued or playing entry becomes `playing`, `plays`
    /// + 1. Throws (SQLITE_NOTFOUND) when `seq` is not pending.
    public func markPlaying(seq: Int64, now: Int64, flush: Bool = true) throws(StoreError) {
        try write(flush: flush) { c throws(StoreError) in
            try c.run("UPDATE payments SET state = 'playing', plays = plays + 1, updated_at = ? WHERE seq = ? AND \(Self.isPending)",
                      now, seq)
            if c.changes == 0 { throw Self.notPending(seq, "markPlaying") }
        }
    }

    /// The final transition of a pending entry (`state` is played, muted,
    /// expired or failed) and its receipt {"id","status","ts"[,"reason"]},
    /// in one transaction. Throws (SQLITE_NOTFOUND) when `seq` is not
    /// pending, so no entry is finished, and receipted, twice.
    /// Failpoint "before_mark_played": `played` written, not yet committed.
    public func finish(seq: Int64, state: PaymentState, reason: String?, now: Int64, flush: Bool = true) throws(StoreError) {
        precondition(!state.isPending, "finish(seq:state:) needs a final state, not \(state)")
        try write(flush: flush) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) in
                let ids = try c.rows("""
                    UPDATE payments SET state = ?, reason = ?, updated_at = ? WHERE seq = ? AND \(Self.isPending) RETURNING id
                    """, state.rawValue, reason, now, seq) { $0.text(0) ?? "" }
                guard let id = ids.first else { throw Self.notPending(seq, "finish") }
                // Every final PaymentState is also a Receipt.Status.
                try append(Receipt(id: id, status: Receipt.Status(rawValue: state.rawValue)!, ts: now / 1000, reason: reason),
                           now: now, c)
                if state == .played { Failpoint.hit("before_mark_played") }
            }
        }
    }

    /// An offline summary starts: the queued entries `seqs` become
    /// `playing` (plays + 1) in summary `seqs.min()`, in one transaction;
    /// entries no longer queued are left out. Returns the summary's number
    /// (nil if none was queued). Resumed after a crash by `summaryMembers`.
    public func beginSummary(_ seqs: [Int64], now: Int64, flush: Bool = true) throws(StoreError) -> Int64? {
        guard let group = seqs.min() else { return nil }
        let list = "[" + seqs.map(String.init).joined(separator: ",") + "]"
        return try write(flush: flush) { c throws(StoreError) -> Int64? in
            try c.run("""
                UPDATE payments SET state = 'playing', plays = plays + 1, summary = ?, updated_at = ?
                WHERE state = 'queued' AND seq IN (SELECT value FROM json_each(?))
                """, group, now, list)
            return c.changes > 0 ? group : nil
        }
    }

    /// Summary `group`, left `playing` by a crash, starts again: plays + 1
    /// for each of its pending entries.
    public func restartSummary(_ group: Int64, now: Int64, flush: Bool = true) throws(StoreError) {
        try write(flush: flush) { c throws(StoreError) in
            try c.run("UPDATE payments SET plays = plays + 1, updated_at = ? WHERE summary = ? AND \(Self.isPending)", now, group)
        }
    }

    /// The pending entries of summary `group`, oldest first.
    public func summaryMembers(_ group: Int64) throws(StoreError) -> [Entry] {
        try locked { c throws(StoreError) in
            try c.rows("SELECT \(Entry.columns) FROM payments WHERE summary = ? AND \(Self.isPending) ORDER BY seq", group,
                       row: Entry.init(row:))
        }
    }

    /// The summary was spoken: every pending entry of it becomes `played`,
    /// each with its receipt {"id","status":"played","ts","summary":true},
    /// in one transaction. Returns their ids.
    public func finishSummary(_ group: Int64, now: Int64, flush: Bool = true) throws(StoreError) -> [String] {
        try write(flush: flush) { c throws(StoreError) -> [String] in
            try c.transaction { () throws(StoreError) -> [String] in
                let ids = try c.rows("""
                    UPDATE payments SET state = 'played', updated_at = ? WHERE summary = ? AND \(Self.isPending) RETURNING id
                    """, now, group) { $0.text(0) ?? "" }
                for id in ids { try append(Receipt(id: id, status: .played, ts: now / 1000, summary: true), now: now, c) }
                return ids
            }
        }
    }

    /// The newest entry with this id, or nil.
    public func entry(id: String) throws(StoreError) -> Entry? {
        try locked { c throws(StoreError) in
            try c.rows("SELECT \(Entry.columns) FROM payments WHERE id = ? ORDER BY seq DESC LIMIT 1", id,
                       row: Entry.init(row:)).first
        }
    }

    /// Entries newest first, at most `limit`.
    public func history(limit: Int) throws(StoreError) -> [Entry] {
        try locked { c throws(StoreError) in
            try c.rows("SELECT \(Entry.columns) FROM payments ORDER BY seq DESC LIMIT ?", Int64(limit), row: Entry.init(row:))
        }
    }

    /// Count and sum (minor units) of the entries accepted at or after
    /// `since` (ms), whatever their state.
    public func summary(since: Int64) throws(StoreError) -> (count: Int, totalMinor: Int64) {
        let row = try locked { c throws(StoreError) in
            try c.rows("SELECT count(*), coalesce(sum(amount_minor), 0) FROM payments WHERE accepted_at >= ?", since) {
                [$0.int64(0), $0.int64(1)]
            }[0]
        }
        return (Int(row[0]), row[1])
    }

    /// Appends a receipt that belongs to no state change here (e.g. `rejected`) to the outbox.
    public func appendReceipt(_ receipt: Receipt, now: Int64, flush: Bool = true) throws(StoreError) {
        try write(flush: flush) { c throws(StoreError) in try append(receipt, now: now, c) }
    }

    /// Receipts waiting for the broker, oldest first, at most `limit`.
    public func outbox(limit: Int) throws(StoreError) -> [OutboxItem] {
        try locked { c throws(StoreError) in
            try c.rows("SELECT n, payload, created_at FROM outbox ORDER BY n LIMIT ?", Int64(limit)) {
                OutboxItem(n: $0.int64(0), payload: $0.text(1) ?? "", createdAt: $0.int64(2))
            }
        }
    }

    /// How many receipts wait for the broker.
    public func outboxCount() throws(StoreError) -> Int {
        try locked { c throws(StoreError) in
            try c.rows("SELECT count(*) FROM outbox") { Int($0.int64(0)) }[0]
        }
    }

    /// Forgets receipts the broker has taken (PUBACK). Unknown numbers are ignored.
    public func deleteOutbox(_ n: [Int64], flush: Bool = true) throws(StoreError) {
        guard !n.isEmpty else { return }
        // One statement (so one commit) for any number of rows: the numbers go in as a JSON array.
        let list = "[" + n.map(String.init).joined(separator: ",") + "]"
        try write(flush: flush) { c throws(StoreError) in
            try c.run("DELETE FROM outbox WHERE n IN (SELECT value FROM json_each(?))", list)
        }
    }

    /// The remote-config overlay (key → value).
    public func overlay() throws(StoreError) -> [String: String] {
        let pairs = try locked { c throws(StoreError) in
            try c.rows("SELECT key, value FROM config_overlay") { [$0.text(0) ?? "", $0.text(1) ?? ""] }
        }
        return Dictionary(uniqueKeysWithValues: pairs.map { ($0[0], $0[1]) })
    }

    /// Sets (value non-nil) or removes (nil) keys of the overlay, and sets
    /// `meta` keys, all or none.
    public func updateOverlay(_ changes: [String: String?], meta: [String: String] = [:]) throws(StoreError) {
        try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) in
                // In key order, so that a failure happens at the same place every time.
                for (key, value) in changes.sorted(by: { $0.key < $1.key }) {
                    if let value {
                        try c.run("INSERT OR REPLACE INTO config_overlay (key, value) VALUES (?, ?)", key, value)
                    } else {
                        try c.run("DELETE FROM config_overlay WHERE key = ?", key)
                    }
                }
                for (key, value) in meta.sorted(by: { $0.key < $1.key }) {
                    try c.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key, value)
                }
            }
        }
    }

    /// A `meta` value, or nil.
    public func meta(_ key: String) throws(StoreError) -> String? {
        try locked { c throws(StoreError) in
            try c.rows("SELECT value FROM meta WHERE key = ?", key) { $0.text(0) }.first ?? nil
        }
    }

    /// Records a signed command's nonce: true the first time it is seen
    /// (within the retention window: `prune`), false for a replay.
    public func useNonce(_ nonce: String, now: Int64) throws(StoreError) -> Bool {
        let clock = self.clock()
        return try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> Bool in
                guard try c.rows("SELECT 1 FROM nonces WHERE nonce = ?", nonce, row: { $0.int64(0) }).isEmpty else { return false }
                try c.run("INSERT INTO nonces (nonce, seen_at, boot, mono, dated) VALUES (?, ?, ?, ?, ?)",
                          nonce, now, clock.boot, clock.sinceBoot, clock.synced)
                return true
            }
        }
    }

    /// A payment decided while storage failed, to be written through.
    public struct Adopted: Sendable, Equatable {
        public var payment: Payment
        public var state: PaymentState
        public var acceptedAt: Int64
        public var updatedAt: Int64
        public var plays: Int
        public var reason: String?
        public init(payment: Payment, state: PaymentState, acceptedAt: Int64, updatedAt: Int64, plays: Int, reason: String?) {
            self.payment = payment; self.state = state; self.acceptedAt = acceptedAt; self.updatedAt = updatedAt
            self.plays = plays; self.reason = reason
        }
    }

    /// Storage works again: writes what was held in memory, in one
    /// transaction — the entries in their order and states (new seqs, so
    /// acceptance order is kept after everything already stored), their
    /// dedup records, and `receipts` into the outbox. Returns the seqs.
    public func adopt(_ entries: [Adopted], receipts: [Receipt], now: Int64) throws(StoreError) -> [Int64] {
        let clock = self.clock()
        return try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> [Int64] in
                var seqs: [Int64] = []
                for e in entries {
                    let p = e.payment
                    // Held in memory, so accepted in this boot, this long ago.
                    let mono = clock.sinceBoot - max(0, now - e.acceptedAt)
                    try c.run("""
                        INSERT INTO payments (id, amount_minor, currency, channel, lang, ts, accepted_at, updated_at, state, plays, reason, boot, mono, dated)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """, p.id, p.amount.minorUnits, p.currency, p.channel.rawValue, p.lang, p.ts, e.acceptedAt, e.updatedAt,
                        e.state.rawValue, Int64(e.plays), e.reason, clock.boot, mono, clock.synced)
                    let seq = sqlite3_last_insert_rowid(c.db)
                    seqs.append(seq)
                    try c.run("""
                        INSERT INTO dedup (id, accepted_at, boot, mono, dated, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                        ON CONFLICT (id) DO UPDATE SET accepted_at = max(accepted_at, ?2), boot = ?3, mono = ?4, dated = ?5, n = ?6
                        """, p.id, e.acceptedAt, clock.boot, mono, clock.synced, seq)
                }
                for r in receipts { try append(r, now: now, c) }
                return seqs
            }
        }
    }

    /// The dedup records kept at most, whatever the clock: the newest (by
    /// seq). Bounds the database of a box whose clock is never set.
    public static let dedupCap = 200_000

    /// Deletes final-state entries older than `retention` (ms) and all but
    /// the newest `keep` final-state entries, and dedup records and nonces
    /// older than `retention` (and dedup records past `dedupCap`). Pending
    /// entries and the outbox are never touched. Dedup records go by age
    /// only, so a count-pruned entry's id is still a duplicate within the
    /// window. Returns the entries deleted.
    ///
    /// Ages hold for real elapsed time however the wall clock jumped
    /// (docs/soundboxd.md, "Dedup and a clock that jumps"): rows written
    /// while the clock was not synchronised are dated once it is (exactly,
    /// by the boot's own clock, if written in this boot; else as of this
    /// boot's start, the latest they can have been written); a row of this
    /// boot goes only once the boot's own clock says it is old too; while
    /// the clock is not synchronised only rows of this boot can be aged at all.
    public func prune(now: Int64, retention: Int64, keep: Int, flush: Bool = true) throws(StoreError) -> Int {
        precondition(keep >= 0, "prune(keep:) must not be negative")
        let clock = self.clock()
        return try write(flush: flush) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> Int in
                // ?1 now, ?2 retention, ?3 this boot, ?4 ms since it began, ?5 synchronised.
                let args: [any Bindable] = [now, retention, clock.boot, clock.sinceBoot, clock.synced]
                for (table, at) in [("payments", "accepted_at"), ("dedup", "accepted_at"), ("nonces", "seen_at")] where clock.synced {
                    try c.run("""
                        UPDATE \(table) SET \(at) = CASE WHEN boot = ?3 AND mono <= ?4 THEN ?1 - (?4 - mono) ELSE ?1 - ?4 END, dated = 1
                        WHERE dated = 0
                        """, Array(args.prefix(4)))
                    // A time ahead of a synchronised clock: it was set wrong then.
                    try c.run("UPDATE \(table) SET \(at) = ?1 WHERE \(at) > ?1", now)
                }
                let old = { (at: String) in
                    "(?5 AND dated = 1 AND \(at) < ?1 - ?2 AND (boot IS NOT ?3 OR ?4 - mono >= ?2) OR NOT ?5 AND boot = ?3 AND ?4 - mono >= ?2)"
                }
                try c.run("""
                    DELETE FROM payments WHERE NOT \(Self.isPending) AND (\(old("accepted_at")) OR seq NOT IN
                        (SELECT seq FROM payments WHERE NOT \(Self.isPending) ORDER BY seq DESC LIMIT ?6))
                    """, args + [Int64(keep)])
                let deleted = c.changes
                try c.run("DELETE FROM dedup WHERE \(old("accepted_at"))", args)
                try c.run("DELETE FROM nonces WHERE \(old("seen_at"))", args)
                try c.run("DELETE FROM dedup WHERE id IN (SELECT id FROM dedup ORDER BY n LIMIT max(0, (SELECT count(*) FROM dedup) - ?))",
                          Int64(Self.dedupCap))
                return deleted
            }
        }
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

    /// The condition that matches the partial index `payments_pending` (it must be written exactly so).
    private static let isPending = "state IN ('queued', 'playing')"

    private static func notPending(_ seq: Int64, _ call: String) -> StoreError {
        StoreError(call: "\(call)(seq: \(seq))", code: SQLITE_NOTFOUND, message: "no queued or playing entry with seq \(seq)")
    }

    private func append(_ receipt: Receipt, now: Int64, _ c: Connection) throws(StoreError) {
        try c.run("INSERT INTO outbox (payload, created_at) VALUES (?, ?)", receipt.json, now)
        lastOutbox.store(sqlite3_last_insert_rowid(c.db), ordering: .relaxed)
    }

    /// Runs `body` with the connection, holding the lock.
    private func locked<T: Sendable>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
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
    private func write<T: Sendable>(flush: Bool, _ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
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

extension Entry {
    /// The columns `init(row:)` reads, in order.
    static let columns = "seq, id, amount_minor, currency, channel, lang, ts, accepted_at, updated_at, state, plays, reason, summary"

    init(row s: Statement) throws(StoreError) {
        let state = s.text(9) ?? ""
        guard let known = PaymentState(rawValue: state) else {
            throw StoreError(call: "reading payments", code: SQLITE_CORRUPT, message: "entry \(s.int64(0)) has unknown state '\(state)'")
        }
        let payment = Payment(id: s.text(1) ?? "", amount: Amount(minorUnits: s.int64(2)), currency: s.text(3),
                              channel: Channel(rawValue: s.text(4) ?? "") ?? .other, ts: s.optionalInt64(6), lang: s.text(5))
        self.init(seq: s.int64(0), payment: payment, state: known, acceptedAt: s.int64(7), updatedAt: s.int64(8),
                  plays: Int(s.int64(10)), reason: s.text(11), summary: s.optionalInt64(12))
    }
}
