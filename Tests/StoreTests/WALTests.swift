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
        #expect(try store.accept(pay("T1"), now: t0) == .queued(seq: 1))
    }

    @Test func aCommitNotYetFlushedIsReadAtOnce() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0, flush: false)
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
            _ = try store.accept(pay("W\(i)"), now: t0, flush: false)
            i += 1
        }
        #expect(store.checkpointer?.waitForCheckpoints(1, timeout: 30) == true)
        // What the background one could not copy (nothing was writing: all of it).
        let (log, copied) = try store.checkpoint()
        #expect(log == copied)
        _ = try store.accept(pay("AFTER"), now: t0)
        #expect(store.walFrames < 50, "the WAL did not start again")
        #expect(try Store(path: tmp.path).pendingCount() == i + 1)
    }
}

extension WALTests {
    /// `close` lets go of the file at once, whoever still holds the store:
    /// the last connection's close removes the -wal, and later calls throw.
    @Test func closeLetsGoAtOnce() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0)
        let held = store   // as a flush under way would hold it
        store.close()
        #expect(access(tmp.path + "-wal", F_OK) != 0, "the -wal is still there")
        #expect(throws: StoreError.self) { try held.pendingCount() }
        #expect(throws: StoreError.self) { _ = try held.accept(pay("T2"), now: t0) }
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
            guard case .queued(let seq) = try store.accept(pay("S\(i)"), now: t0 + Int64(i)) else {
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

/// The check of the -wal file before SQLite reads it (`WALCheck`): damage
/// with whole transactions after it is found; what a crash or a power cut
/// leaves (a torn tail, frames of an older log past the end of a newer
/// one) is not damage.
extension WALTests {
    /// The files as a crash would leave them now (the store still open),
    /// copied to a folder of their own: the database's path there.
    private func crashImage(_ n: Int, of store: Store) throws -> String {
        try store.checkpointer!.paused { try copyFiles(n) }
    }

    private func copyFiles(_ n: Int) throws -> String {
        let dir = tmp.dir + "/crash\(n)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: tmp.path + suffix) {
            try FileManager.default.copyItem(atPath: tmp.path + suffix, toPath: dir + "/soundbox.db" + suffix)
        }
        return dir + "/soundbox.db"
    }

    private func overwrite(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        #expect(pwrite(fd, bytes, bytes.count, off_t(offset)) == bytes.count)
        close(fd)
    }

    private func size(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : -1
    }

    @Test func damageInTheMiddleOfTheWALIsFoundAndTheWALKeptAside() throws {
        let store = try Store(path: tmp.path)
        for i in 0..<40 { _ = try store.accept(pay("D\(i)"), now: t0) }
        let whole = try crashImage(0, of: store)
        #expect(WALCheck.inspect(whole + "-wal") == nil, "an intact WAL")
        let image = try crashImage(1, of: store)
        let wal = image + "-wal"
        try overwrite(wal, at: size(wal) / 2, with: (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
        let before = try Data(contentsOf: URL(fileURLWithPath: wal))
        let damaged = try Store(path: image)
        let damage = try #require(damaged.walDamage)
        #expect(damage.lostCommits > 5 && damage.badFrame != nil && damage.replayed > 0, "\(damage)")
        #expect(damage.copy == wal + ".damaged")
        #expect(try Data(contentsOf: URL(fileURLWithPath: wal + ".damaged")) == before)
        #expect(try damaged.pendingCount() < 40, "SQLite replayed it all: the damage cost nothing")
        #expect(Store.damagedWALCopies(of: image) == [wal + ".damaged"])
        // A second damage (another start) gets a copy of its own.
        #expect(WALCheck.keep(wal) == wal + ".damaged.2")
    }

    @Test func aDamagedHeaderWithTransactionsAfterItIsFound() throws {
        let store = try Store(path: tmp.path)
        for i in 0..<10 { _ = try store.accept(pay("H\(i)"), now: t0) }
        let image = try crashImage(0, of: store)
        try overwrite(image + "-wal", at: 16, with: [1, 2, 3, 4])   // the salts
        let damage = try #require(WALCheck.inspect(image + "-wal"))
        #expect(damage.badFrame == nil && damage.lostCommits >= 9, "\(damage)")
    }

    /// A power cut while frames were being written, never flushed: the tail
    /// is cut short or holds garbage, nothing whole after it.
    @Test func aTornTailIsNotDamage() throws {
        let store = try Store(path: tmp.path)
        for i in 0..<20 { _ = try store.accept(pay("T\(i)"), now: t0) }
        let frame = 24 + Store.pageSize
        let cut = try crashImage(0, of: store)
        #expect(truncate(cut + "-wal", off_t(size(cut + "-wal") - frame / 2)) == 0)
        #expect(WALCheck.inspect(cut + "-wal") == nil)
        let garbled = try crashImage(1, of: store)
        let wal = garbled + "-wal"
        let frames = (size(wal) - 32) / frame
        try overwrite(wal, at: 32 + (frames - 1) * frame + 100, with: [UInt8](repeating: 0xA5, count: 300))
        #expect(WALCheck.inspect(wal) == nil)
        #expect(try Store(path: garbled).walDamage == nil)
    }

    /// A sustained stream with checkpoints that start the WAL again: crash
    /// images taken at every moment hold a newer log over the frames of
    /// older ones. None of them is damage, and every one opens with
    /// everything committed before it.
    @Test func framesOfAnOlderLogAreNotDamage() throws {
        let store = try Store(path: tmp.path)
        var images = 0
        for i in 0..<1500 {
            _ = try store.accept(pay("S\(i)"), now: t0)
            guard i % 97 == 0 else { continue }
            let image = try crashImage(i, of: store)
            images += 1
            #expect(WALCheck.inspect(image + "-wal") == nil, "a false alarm at payment \(i)")
            #expect(try Store(path: image).pendingCount() == i + 1)
        }
        #expect(store.checkpointer?.waitForCheckpoints(1, timeout: 0) == true, "no checkpoint ran: no older log to find")
        #expect(images > 10)
    }
}
