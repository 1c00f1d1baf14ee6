import Foundation
@testable import SoundboxStore
import Soundbox
import Testing

/// Dedup holds for the retention window of real elapsed time however the
/// wall clock jumped (docs/soundboxd.md, "Dedup and a clock that jumps"):
/// a Pi has no real-time clock, so before time sync its clock may say 1970
/// or years ahead.
@Suite struct ClockTests {
    let tmp = TempDB()
    let week = 7 * day
    /// 1970-01-02: a Pi's clock before time sync.
    let behind: Int64 = 86_400_000
    /// Twenty years ahead.
    var ahead: Int64 { t0 + 20 * 365 * day }

    private func accept(_ store: Store, _ ids: [String], now: Int64) throws {
        for id in ids {
            guard case .queued(let seq) = try store.accept(pay(id), now: now) else { Issue.record("\(id) not queued"); continue }
            try store.finish(seq: seq, state: .played, reason: nil, now: now)
        }
    }

    private func isDuplicate(_ store: Store, _ id: String, now: Int64) throws -> Bool {
        if case .duplicate = try store.accept(pay(id), now: now) { return true }
        return false
    }

    /// Accepted while the clock said 1970, then restarted with the right
    /// time: nothing is pruned (the rows are dated as of the new boot's
    /// start), a re-sent payment is a duplicate, the history is kept; a
    /// week of real time later they go.
    @Test func acceptedUnderAClockFarBehindThenRebootedWithTheRightTime() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(synced: false, sinceBoot: 20_000)
        try accept(store, ["B1", "B2", "B3"], now: behind)
        clock.reboot()
        clock.set(sinceBoot: 30_000)
        #expect(try store.prune(now: t0, retention: week, keep: 100) == 0)
        #expect(try store.history(limit: 10).count == 3)
        #expect(try isDuplicate(store, "B1", now: t0))
        // Dated as of this boot's start: t0 - 30 s.
        #expect(try store.entry(id: "B2")?.acceptedAt == t0 - 30_000)
        clock.reboot()
        #expect(try store.prune(now: t0 + week - day, retention: week, keep: 100) == 0)
        #expect(try isDuplicate(store, "B2", now: t0 + week - day))
        #expect(try store.prune(now: t0 + week + day, retention: week, keep: 100) == 3)
        #expect(!(try isDuplicate(store, "B3", now: t0 + week + day)))
    }

    /// Accepted unsynchronised and synchronised later in the same boot:
    /// dated exactly by the boot's own clock.
    @Test func timeSyncInTheSameBootDatesExactly() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(synced: false, sinceBoot: 5_000)
        try accept(store, ["S1"], now: behind)
        clock.set(synced: true, sinceBoot: 65_000)
        #expect(try store.prune(now: t0, retention: week, keep: 100) == 0)
        #expect(try store.entry(id: "S1")?.acceptedAt == t0 - 60_000)
        #expect(try isDuplicate(store, "S1", now: t0))
    }

    /// Accepted while the clock was twenty years ahead (unsynchronised),
    /// then corrected: still duplicates, history kept.
    @Test func acceptedUnderAClockFarAheadThenCorrected() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(synced: false, sinceBoot: 1_000)
        try accept(store, ["A1", "A2"], now: ahead)
        clock.reboot()
        #expect(try store.prune(now: t0, retention: week, keep: 100) == 0)
        #expect(try isDuplicate(store, "A1", now: t0))
        #expect(try store.prune(now: t0 + day, retention: week, keep: 100) == 0)
        #expect(try store.history(limit: 10).count == 2)
    }

    /// Accepted under the right time, then the clock jumps twenty years
    /// ahead without being synchronised (set by hand, a bad RTC): nothing
    /// is pruned by that clock; corrected, still duplicates.
    @Test func aJumpAheadOfAnUnsynchronisedClockPrunesNothing() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        try accept(store, ["J1", "J2"], now: t0)
        clock.reboot(synced: false)
        #expect(try store.prune(now: ahead, retention: week, keep: 100) == 0)
        clock.set(synced: true)
        #expect(try isDuplicate(store, "J1", now: t0 + 60_000))
        #expect(try store.history(limit: 10).count == 2)
    }

    /// A synchronised clock that was wrong (a bad time server) and is
    /// corrected: a time ahead of it is brought back to now, not kept in
    /// the future for twenty years nor lost.
    @Test func aTimeAheadOfASynchronisedClockIsBroughtBack() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        try accept(store, ["F1"], now: ahead)
        clock.reboot()
        #expect(try store.prune(now: t0, retention: week, keep: 100) == 0)
        #expect(try store.entry(id: "F1")?.acceptedAt == t0)
        #expect(try isDuplicate(store, "F1", now: t0))
        clock.reboot()
        #expect(try store.prune(now: t0 + week + day, retention: week, keep: 100) == 1)
    }

    /// The wall clock jumped ahead while synchronised, within this boot: a
    /// row of this boot goes only once the boot's own clock says it is old too.
    @Test func aRowOfThisBootIsAgedByTheBootsOwnClockToo() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(sinceBoot: 1_000)
        try accept(store, ["M1"], now: t0)
        clock.set(sinceBoot: 2_000)
        #expect(try store.prune(now: t0 + 30 * day, retention: week, keep: 100) == 0)
        clock.set(sinceBoot: 1_000 + week)
        #expect(try store.prune(now: t0 + 30 * day, retention: week, keep: 100) == 1)
    }

    /// A box whose clock is never set still prunes what this boot has held
    /// past the window by its own clock: the database does not grow for ever.
    @Test func neverSynchronisedStillAgesThisBootsRows() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(synced: false, sinceBoot: 0)
        try accept(store, ["N1"], now: behind)
        clock.set(sinceBoot: week - 1)
        #expect(try store.prune(now: behind + week, retention: week, keep: 100) == 0)
        clock.set(sinceBoot: week)
        #expect(try store.prune(now: behind, retention: week, keep: 100) == 1)
        #expect(!(try isDuplicate(store, "N1", now: behind)))
    }

    /// Whatever the clock, at most `dedupCap` dedup records are kept: the newest.
    @Test func dedupRecordsAreCappedByCount() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        let extra = 10
        try store.connection.withLock { c throws(StoreError) in
            try c.exec("""
                WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < \(Store.dedupCap + extra))
                INSERT INTO dedup (id, accepted_at, boot, mono, dated, n) SELECT 'C' || n, \(t0), 'boot-1', 0, 0, n FROM k
                """)
        }
        clock.set(synced: false)
        _ = try store.prune(now: t0, retention: week, keep: 100)
        let (count, oldest) = try store.connection.withLock { c throws(StoreError) in
            try c.rows("SELECT count(*), min(n) FROM dedup") { ($0.int64(0), $0.int64(1)) }[0]
        }
        #expect(count == Int64(Store.dedupCap) && oldest == Int64(extra + 1))
    }

    /// Nonces of signed commands are kept the same way.
    @Test func noncesSurviveAClockFarBehind() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        clock.set(synced: false, sinceBoot: 1_000)
        #expect(try store.useNonce("n-1", now: behind))
        clock.reboot()
        _ = try store.prune(now: t0, retention: week, keep: 100)
        #expect(!(try store.useNonce("n-1", now: t0)), "a replayed command after the clock was set")
    }
}
