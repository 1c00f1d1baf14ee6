import CSQLite
import Glibc

/// The database schema as a list of migration steps: step `i` takes
/// `PRAGMA user_version` from `i` to `i + 1`. Append steps; never edit one
/// that has shipped.
///
/// Both system slots read the same database, so after an update is rolled
/// back the previous version opens what the new one wrote (docs/soundboxd.md,
/// "One database, two versions"). The rule: **a step must leave a database
/// that the previous version's program can still use**: new tables, new
/// columns that are NULL or have a DEFAULT, new indexes; never a rename, a
/// drop, a retyped column or a new constraint on old columns, nor a new
/// meaning under an old name. Each step says the oldest schema whose program
/// can use the database after it (`oldestReader`, kept in `meta` as
/// `schema_oldest_reader`); a program opens a database of a newer schema as
/// it is (no step undone, none applied) when it is at least that reader, and
/// refuses it otherwise. A change that would break the previous version
/// takes two releases: the new shape beside the old one (both written),
/// then, a version later, the step that stops keeping the old one.
enum Schema {
    struct Step: Sendable {
        let sql: String
        /// The oldest schema version whose program can still read and write the database after this step.
        let oldestReader: Int
    }

    /// v1–v5 predate the rule (their programs refuse any newer database): each names itself.
    static let steps: [Step] = [
        // v1. `payments` is the queue and the history (`seq` is never reused,
        // so acceptance order survives pruning); `dedup` remembers ids for the
        // retention window even after their entries are pruned; `outbox` holds
        // receipts until the broker has taken them; `config_overlay` is the
        // remote config.
        Step(sql: """
        CREATE TABLE payments (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            amount_minor INTEGER NOT NULL,
            currency TEXT,
            channel TEXT NOT NULL,
            lang TEXT,
            ts INTEGER,
            accepted_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('queued', 'playing', 'played', 'muted', 'expired', 'failed')),
            plays INTEGER NOT NULL DEFAULT 0,
            reason TEXT
        );
        CREATE INDEX payments_pending ON payments (seq) WHERE state IN ('queued', 'playing');
        CREATE INDEX payments_id ON payments (id);
        CREATE TABLE dedup (id TEXT PRIMARY KEY, accepted_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE outbox (n INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE TABLE config_overlay (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """, oldestReader: 1),
        // v2. `meta`: the daemon's own small facts that are not settings
        // (e.g. the last remote config applied from the broker).
        Step(sql: """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """, oldestReader: 2),
        // v3. `nonces`: the nonces of signed commands seen within the
        // retention window (docs/signing.md), so a replayed one is refused.
        Step(sql: """
        CREATE TABLE nonces (nonce TEXT PRIMARY KEY, seen_at INTEGER NOT NULL) WITHOUT ROWID;
        """, oldestReader: 3),
        // v4. `payments.summary`: the offline summary a payment was spoken in
        // (docs/soundboxd.md): the seq of the summary's first payment, the
        // same for every payment of it; NULL for one spoken on its own.
        Step(sql: """
        ALTER TABLE payments ADD COLUMN summary INTEGER;
        """, oldestReader: 4),
        // v5. Dating under a clock that jumps (docs/soundboxd.md, "Dedup and
        // a clock that jumps"): for payments, dedup records and nonces, the
        // boot they were written in, the ms since that boot began, and
        // whether the wall clock was synchronised (`dated`; rows written
        // before have only their wall time, as before: dated). `dedup.n`:
        // the payment's seq, the order the count cap deletes in.
        Step(sql: """
        ALTER TABLE payments ADD COLUMN boot TEXT;
        ALTER TABLE payments ADD COLUMN mono INTEGER;
        ALTER TABLE payments ADD COLUMN dated INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE dedup ADD COLUMN boot TEXT;
        ALTER TABLE dedup ADD COLUMN mono INTEGER;
        ALTER TABLE dedup ADD COLUMN dated INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE dedup ADD COLUMN n INTEGER;
        CREATE INDEX dedup_n ON dedup (n);
        ALTER TABLE nonces ADD COLUMN boot TEXT;
        ALTER TABLE nonces ADD COLUMN mono INTEGER;
        ALTER TABLE nonces ADD COLUMN dated INTEGER NOT NULL DEFAULT 1;
        """, oldestReader: 5),
    ]
    /// The next version's step, rehearsed by the tests of the rule (a new
    /// column and a new table, as the rule allows): applied only when the
    /// environment says SOUNDBOX_TEST_SCHEMA_NEXT=1 (the update tests'
    /// bundle, docs/soundboxd.md), so that the program that runs today can be
    /// shown to open what its successor writes.
    static let rehearsal = Step(sql: """
        ALTER TABLE payments ADD COLUMN rehearsal TEXT;
        CREATE TABLE rehearsal (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO rehearsal (key, value) VALUES ('written_by', 'the rehearsed next schema');
        """, oldestReader: 5)

    /// The steps this program applies.
    static var current: [Step] {
        guard let v = getenv("SOUNDBOX_TEST_SCHEMA_NEXT"), String(cString: v) == "1" else { return steps }
        return steps + [rehearsal]
    }
    /// The version this program writes.
    static var version: Int { current.count }

    /// Brings the database up to `steps.count`, one step per transaction, so
    /// a crash mid-way leaves a database at some whole version. A database of
    /// a newer schema is left as it is when this program is at least its
    /// oldest reader (the rule above), refused otherwise. Returns the
    /// database's schema version.
    @discardableResult
    static func migrate(_ c: Connection, steps: [Step] = current) throws(StoreError) -> Int {
        var found = 0
        while try c.transaction({ () throws(StoreError) -> Bool in
            found = try c.userVersion()
            if found > steps.count {
                let oldest = try c.rows("SELECT value FROM meta WHERE key = 'schema_oldest_reader'") { $0.text(0) ?? "" }
                    .first.flatMap { Int($0) } ?? found
                guard oldest <= steps.count else {
                    throw StoreError(call: "schema version check", code: SQLITE_ERROR,
                                     message: "the database has schema version \(found), written by a newer soundboxd that this one "
                                         + "(schema \(steps.count)) cannot use: it needs schema \(oldest) or newer; upgrade, or move the file away")
                }
                return false
            }
            guard found < steps.count else { return false }
            try c.exec(steps[found].sql)
            try c.exec("PRAGMA user_version = \(found + 1)")
            if found + 1 >= 2 {   // (meta exists from v2)
                try c.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_oldest_reader', ?)", "\(steps[found].oldestReader)")
            }
            return true
        }) {}
        return found
    }
}

extension Connection {
    /// `PRAGMA user_version`: the schema version of the file.
    func userVersion() throws(StoreError) -> Int {
        try rows("PRAGMA user_version") { Int($0.int64(0)) }.first ?? 0
    }
}
