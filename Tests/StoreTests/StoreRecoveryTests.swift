import Foundation
import Soundbox
@testable import SoundboxStore
import Testing

/// What storage recovery needs from the store: writing through what was
/// held in memory, noticing a file deleted or replaced under it, and
/// copying itself back.
@Suite struct StoreRecoveryTests {
    let tmp = TempDB()

    /// Entries held in memory are written in their order and states, with
    /// their dedup records and receipts, after everything already stored.
    @Test func adoptWritesEntriesDedupAndReceiptsInOneGo() throws {
        let store = try Store(path: tmp.path)
        #expect(try store.accept(pay("S1"), now: t0) == .queued(seq: 1))
        let held = [
            Entry(ref: .memory(1), payment: pay("M1", 250), state: .played, acceptedAt: t0 + 10, updatedAt: t0 + 20, plays: 1, reason: nil),
            Entry(ref: .memory(2), payment: pay("M2"), state: .queued, acceptedAt: t0 + 30, updatedAt: t0 + 30, plays: 0, reason: nil),
        ]
        let receipts = [Receipt(id: "M1", status: .queued, ts: 1, durable: false), Receipt(id: "M1", status: .played, ts: 2, durable: false)]
        #expect(try store.adopt(held, receipts: receipts, now: t0 + 40) == [2, 3])
        #expect(try store.pending().map(\.payment.id) == ["S1", "M2"])
        #expect(try store.entry(id: "M1")?.state == .played)
        #expect(try store.entry(id: "M1")?.plays == 1)
        #expect(try store.accept(pay("M1"), now: t0 + 50) == .duplicate(of: try store.entry(id: "M1")),
                "dedup covers what was spoken from memory")
        #expect(try store.outbox(limit: 10).map(\.payload).contains(#"{"id":"M1","status":"played","ts":2,"durable":false}"#))
    }

    @Test func metaIsPersistedWithTheOverlayAllOrNothing() throws {
        let store = try Store(path: tmp.path)
        #expect(try store.meta("remote_config") == nil)
        try store.updateOverlay(["audio.volume": "4"], meta: ["remote_config": "audio.volume=4"])
        let reopened = try Store(path: tmp.path)
        #expect(try reopened.meta("remote_config") == "audio.volume=4")
        #expect(try reopened.overlay() == ["audio.volume": "4"])
    }

    /// rm of the file, or another file put in its place, is noticed; a
    /// copy made through the open connection has everything.
    @Test func aDeletedOrReplacedFileIsNoticedAndTheCopyHasEverything() throws {
        let store = try Store(path: tmp.path)
        #expect(store.fileProblem() == nil)
        _ = try store.accept(pay("A"), now: t0)
        #expect(unlink(tmp.path) == 0)
        #expect(store.fileProblem()?.contains("was deleted") == true)
        _ = try store.accept(pay("B"), now: t0 + 1)   // into the unlinked file
        let copy = tmp.dir + "/copy.db"
        try store.copy(to: copy)
        #expect(try Store(path: copy).history(limit: 10).map(\.payment.id) == ["B", "A"])

        try Data("not this".utf8).write(to: URL(fileURLWithPath: tmp.path))
        #expect(store.fileProblem()?.contains("replaced by another file") == true)
    }
}
