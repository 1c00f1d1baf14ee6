import Foundation
import Soundbox
@testable import SoundboxDaemon
import SoundboxStore
import Testing
import TestSupport
import TestRig

/// `Storage` in process: the database while it can be written, the memory
/// journal while it cannot, and back (the daemon-level tests in
/// StorageFaultTests drive the same through a real soundboxd).
@Suite struct StorageFallbackTests {
    func pay(_ id: String, _ minor: Int64 = 100) -> Payment { Payment(id: id, amount: Amount(minorUnits: minor)) }

    /// A file put in the database's place: refused and reported, payments
    /// held in memory, newest first in history, spoken after the stored
    /// ones, with receipts that say they are not durable.
    @Test func aReplacedFileSendsPaymentsToMemory() throws {
        let scratch = Scratch()
        let path = scratch.path + "/state/soundbox.db"
        let storage = Storage(path: path)
        #expect(storage.accept(pay("A"), now: 1_000) == .queued(durable: true, seq: 1))
        #expect(storage.fault == nil && storage.durable)

        try Data("not ours".utf8).write(to: URL(fileURLWithPath: path + ".other"))
        #expect(rename(path + ".other", path) == 0)
        #expect(storage.accept(pay("B"), now: 2_000) == .queued(durable: false, seq: nil))
        #expect(storage.fault?.kind == .replaced)
        #expect(!storage.durable)
        #expect(storage.accept(pay("B"), now: 2_500) == .duplicate(earlier: "in memory, queued"))
        #expect(storage.accept(pay("A"), now: 2_600) == .duplicate(earlier: "seq 1 queued"), "what the open file holds still counts")
        #expect(try storage.history(limit: 5).map(\.payment.id) == ["B", "A"])
        #expect(storage.pendingCount == 2)

        let first = try #require(storage.next())
        #expect(first.payment.id == "A" && first.ref == .stored(1))
        storage.markPlaying(first, now: 3_000)
        storage.finish(first, .played, reason: nil, now: 3_100)
        let second = try #require(storage.next())
        #expect(second.payment.id == "B", "A's final state is remembered though it could not be written")
        storage.finish(second, .played, reason: nil, now: 3_200)
        #expect(storage.next() == nil && storage.pendingCount == 0)

        let held = storage.receipts(limit: 10, excluding: []).map(\.json)
        #expect(held.contains(#"{"id":"B","status":"queued","ts":2,"durable":false}"#))
        #expect(held.contains(#"{"id":"A","status":"played","ts":3,"durable":false}"#))
        #expect(held.contains(#"{"id":"B","status":"played","ts":3,"durable":false}"#))
    }

    /// The file deleted while open: restored from the open connection at the
    /// next write (or at `checkFile`), with everything it held.
    @Test func aDeletedFileIsRestoredWithEverything() throws {
        let scratch = Scratch()
        let path = scratch.path + "/state/soundbox.db"
        let storage = Storage(path: path)
        #expect(storage.accept(pay("A"), now: 1_000) == .queued(durable: true, seq: 1))
        #expect(unlink(path) == 0)
        #expect(storage.fault == nil, "reading the fault does no I/O")
        #expect(storage.checkFile() == nil, "restored, so nothing is wrong")
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(storage.accept(pay("B"), now: 2_000) == .queued(durable: true, seq: 2))
        let reopened = try Store(path: path)
        #expect(try reopened.pending().map(\.payment.id) == ["A", "B"])
    }
}
