import CSQLite
import Glibc
import Soundbox

/// The queue and its history (table `payments`, with `dedup`).
extension Store {
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
                    try append(PaymentTransition.duplicate.receipt(id: payment.id, at: now), now: now, c)
                    return .duplicate(of: earlier.first)
                }
                let seq = try insert(Entry(seq: 0, payment: payment, state: .queued, acceptedAt: now, updatedAt: now, plays: 0, reason: nil),
                                     mono: clock.sinceBoot, clock, c)
                try append(PaymentTransition.accepted.receipt(id: payment.id, at: now), now: now, c)
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
                try append(PaymentTransition.finished(state, reason: reason).receipt(id: id, at: now), now: now, c)
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
                for id in ids { try append(PaymentTransition.finished(.played, reason: nil, summary: true).receipt(id: id, at: now), now: now, c) }
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


    /// Storage works again: writes what was held in memory, in one
    /// transaction — the entries in their order and states (new seqs, so
    /// acceptance order is kept after everything already stored; their
    /// `ref` is ignored), their dedup records, and `receipts` into the
    /// outbox. Returns the seqs.
    public func adopt(_ entries: [Entry], receipts: [Receipt], now: Int64) throws(StoreError) -> [Int64] {
        let clock = self.clock()
        return try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> [Int64] in
                // Held in memory, so accepted in this boot, this long ago.
                let seqs = try entries.map { e throws(StoreError) in try insert(e, mono: clock.sinceBoot - max(0, now - e.acceptedAt), clock, c) }
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


    /// The condition that matches the partial index `payments_pending` (it must be written exactly so).
    /// The one INSERT of a payment (and its dedup record): accepted now, or
    /// written through from memory. `mono` is when it was accepted on this
    /// boot's clock. Returns its seq.
    private func insert(_ e: Entry, mono: Int64, _ clock: ClockReading, _ c: Connection) throws(StoreError) -> Int64 {
        let p = e.payment
        try c.run("""
            INSERT INTO payments (id, amount_minor, currency, channel, lang, ts, accepted_at, updated_at, state, plays, reason, boot, mono, dated)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, p.id, p.amount.minorUnits, p.currency, p.channel.rawValue, p.lang, p.ts, e.acceptedAt, e.updatedAt,
            e.state.rawValue, Int64(e.plays), e.reason, clock.boot, mono, clock.synced)
        let seq = sqlite3_last_insert_rowid(c.db)
        try c.run("""
            INSERT INTO dedup (id, accepted_at, boot, mono, dated, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT (id) DO UPDATE SET accepted_at = max(accepted_at, ?2), boot = ?3, mono = ?4, dated = ?5, n = ?6
            """, p.id, e.acceptedAt, clock.boot, mono, clock.synced, seq)
        return seq
    }

    private static let isPending = "state IN ('queued', 'playing')"

    private static func notPending(_ seq: Int64, _ call: String) -> StoreError {
        StoreError(call: "\(call)(seq: \(seq))", code: SQLITE_NOTFOUND, message: "no queued or playing entry with seq \(seq)")
    }
}
