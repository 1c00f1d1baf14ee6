import CSQLite

/// The database schema as a list of migration steps: step `i` takes
/// `PRAGMA user_version` from `i` to `i + 1`. Append steps; never edit one
/// that has shipped.
enum Schema {
    static let migrations = [
        // v1. `payments` is the queue and the history (`seq` is never reused,
        // so acceptance order survives pruning); `dedup` remembers ids for the
        // retention window even after their entries are pruned; `outbox` holds
        // receipts until the broker has taken them; `config_overlay` is the
        // remote config.
        """
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
        """,
        // v2. `meta`: the daemon's own small facts that are not settings
        // (e.g. the last remote config applied from the broker).
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        """,
        // v3. `nonces`: the nonces of signed commands seen within the
        // retention window (docs/signing.md), so a replayed one is refused.
        """
        CREATE TABLE nonces (nonce TEXT PRIMARY KEY, seen_at INTEGER NOT NULL) WITHOUT ROWID;
        """,
        // v4. `payments.summary`: the offline summary a payment was spoken in
        // (docs/soundboxd.md): the seq of the summary's first payment, the
        // same for every payment of it; NULL for one spoken on its own.
        """
        ALTER TABLE payments ADD COLUMN summary INTEGER;
        """,
        // v5. Dating under a clock that jumps (docs/soundboxd.md, "Dedup and
        // a clock that jumps"): for payments, dedup records and nonces, the
        // boot they were written in, the ms since that boot began, and
        // whether the wall clock was synchronised (`dated`; rows written
        // before have only their wall time, as before: dated). `dedup.n`:
        // the payment's seq, the order the count cap deletes in.
        """
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
        """,
    ]
    /// The version this program writes.
    static var version: Int { migrations.count }

    /// Brings the database up to `version`, one step per transaction, so a
    /// crash mid-way leaves a database at some whole version. Refuses a
    /// database written by a newer program rather than guess at its tables.
    static func migrate(_ c: Connection) throws(StoreError) {
        while try c.transaction({ () throws(StoreError) -> Bool in
            let found = try c.userVersion()
            guard found <= version else {
                throw StoreError(call: "schema version check", code: SQLITE_ERROR,
                                 message: "the database has schema version \(found), newer than this program's \(version); "
                                     + "it was written by a newer soundboxd: upgrade, or move the file away")
            }
            guard found < version else { return false }
            try c.exec(migrations[found])
            try c.exec("PRAGMA user_version = \(found + 1)")
            return true
        }) {}
    }
}

extension Connection {
    /// `PRAGMA user_version`: the schema version of the file.
    func userVersion() throws(StoreError) -> Int {
        try rows("PRAGMA user_version") { Int($0.int64(0)) }.first ?? 0
    }
}
