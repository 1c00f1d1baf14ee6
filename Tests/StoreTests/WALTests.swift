import Foundation
import Glibc
import Soundbox
@testable import SoundboxStore
import Testing

/// How the store writes: small pages, commits that are read at once and
/// made durable by `flush()`, checkpoints in the background
/// (docs/soundboxd.md, "Flushes").
@Suite struct WALTests {
    let tmp = TempDB()

    private func pageSize(_ store: Store) throws -> Int64 {
        try store.connection.withLock { c throws(StoreError) in try c.rows("PRAGMA page_size") { $0.int64(0) }[0] }
    }

    @Test func aNewDatabaseHasOneKiBPagesAndAnOlderOneKeepsItsOwn() throws {
        #expect(try pageSize(Store(path: tmp.path)) == 1024)
        let old = tmp.dir + "/old.db"
        do {
            let c = try Connection(path: old)
            try c.exec("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; CREATE TABLE t (a)")
        }
        let store = try Store(path: old)
        #expect(try pageSize(store) == 4096)
        #expect(try store.accept(pay("T1"), now: t0, dedupSince: 0) == .queued(seq: 1))
    }

    @Test func aCommitNotYetFlushedIsReadAtOnce() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0, dedupSince: 0, flush: false)
        #expect(try store.next()?.payment.id == "T1")
        try store.markPlaying(seq: 1, now: t0 + 1, flush: false)
        #expect(try store.next()?.state == .playing)
        try store.flush()
        // Another connection (as after a restart) reads the same.
        #expect(try Store(path: tmp.path).next()?.state == .playing)
    }

    /// Past `checkpointFrames` a checkpoint runs by itself, not inside a
    /// commit; after it the WAL starts again from its beginning.
    @Test func aFullWALIsCheckpointedInTheBackgroundAndStartsAgain() throws {
        let store = try Store(path: tmp.path)
        var i = 0
        while store.walFrames < Store.checkpointFrames {
            _ = try store.accept(pay("W\(i)"), now: t0, dedupSince: 0, flush: false)
            i += 1
        }
        #expect(store.checkpointer?.waitForCheckpoints(1, timeout: 30) == true)
        // What the background one could not copy (nothing was writing: all of it).
        let (log, copied) = try store.checkpoint()
        #expect(log == copied)
        _ = try store.accept(pay("AFTER"), now: t0, dedupSince: 0)
        #expect(store.walFrames < 50, "the WAL did not start again")
        #expect(try Store(path: tmp.path).pendingCount() == i + 1)
    }
}

extension WALTests {
    /// `close` lets go of the file at once, whoever still holds the store:
    /// the last connection's close removes the -wal, and later calls throw.
    @Test func closeLetsGoAtOnce() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0, dedupSince: 0)
        let held = store   // as a flush under way would hold it
        store.close()
        #expect(access(tmp.path + "-wal", F_OK) != 0, "the -wal is still there")
        #expect(throws: StoreError.self) { try held.pendingCount() }
        #expect(throws: StoreError.self) { _ = try held.accept(pay("T2"), now: t0, dedupSince: 0) }
        #expect(try Store(path: tmp.path).pendingCount() == 1)
    }
}

extension WALTests {
    /// A sustained stream (a backlog taken back to back) commits during
    /// every background checkpoint: the WAL must still start again, and
    /// the -wal file stay bounded at every moment (it grew to 77 MB over a
    /// backlog of 5,000 when checkpoints were only PASSIVE).
    @Test func theWALStaysBoundedUnderASustainedStream() throws {
        let store = try Store(path: tmp.path)
        let bound = Store.checkpointBytes * 2
        var peak = 0
        for i in 0..<1500 {
            guard case .queued(let seq) = try store.accept(pay("S\(i)"), now: t0 + Int64(i), dedupSince: 0) else {
                Issue.record("S\(i) not queued"); return
            }
            try store.markPlaying(seq: seq, now: t0 + Int64(i), flush: false)
            try store.finish(seq: seq, state: .played, reason: nil, now: t0 + Int64(i))
            var st = stat()
            if stat(tmp.path + "-wal", &st) == 0 { peak = max(peak, Int(st.st_size)) }
        }
        #expect(store.checkpointer?.waitForCheckpoints(3, timeout: 30) == true, "fewer than 3 checkpoints over ~45,000 frames")
        #expect(peak <= bound, "the -wal file reached \(peak) bytes (bound \(bound))")
        #expect(try store.history(limit: 2000).count == 1500)
    }
}
