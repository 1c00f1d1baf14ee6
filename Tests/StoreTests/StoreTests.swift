import Foundation
import Soundbox
@testable import SoundboxStore
import Synchronization
import Testing
import TestSupport

/// 2023-11-14 22:13:20 UTC in Unix ms: receipts made at `t0` carry ts 1700000000.
let t0: Int64 = 1_700_000_000_000
let day: Int64 = 86_400_000

func pay(_ id: String, _ minor: Int64 = 100) -> Payment {
    Payment(id: id, amount: Amount(minorUnits: minor))
}

/// A database path in a fresh folder, removed (with -wal and -shm) when the value dies.
/// The clock as the store sees it, moved by the test: synchronised, in a
/// boot of its own that began at 0.
final class FakeClock: @unchecked Sendable {
    private let lock = NSLock()
    private var reading = ClockReading(synced: true, boot: "boot-1", sinceBoot: 0)
    private var boots = 1

    var read: @Sendable () -> ClockReading { { [self] in lock.withLock { reading } } }

    func set(synced: Bool? = nil, sinceBoot: Int64? = nil) {
        lock.withLock {
            if let synced { reading.synced = synced }
            if let sinceBoot { reading.sinceBoot = sinceBoot }
        }
    }

    /// A new boot, its own clock at 0 again.
    func reboot(synced: Bool = true) {
        lock.withLock {
            boots += 1
            reading = ClockReading(synced: synced, boot: "boot-\(boots)", sinceBoot: 0)
        }
    }
}

final class TempDB {
    private let scratch = Scratch("sbs")
    var dir: String { scratch.path }
    var path: String { dir + "/soundbox.db" }
}

@Suite struct StoreTests {
    let tmp = TempDB()

    @Test func acceptQueuesThenAnswersDuplicateWithinWindow() throws {
        let store = try Store(path: tmp.path)
        let p = Payment(id: "T1", amount: Amount(minorUnits: 12345), currency: "CNY", channel: .alipay,
                        ts: 1_699_999_990, lang: "zh-CN")
        #expect(try store.accept(p, now: t0) == .queued(seq: 1))
        let first = Entry(seq: 1, payment: p, state: .queued, acceptedAt: t0, updatedAt: t0, plays: 0, reason: nil)
        #expect(try store.accept(p, now: t0 + 1000) == .duplicate(of: first))
        #expect(try store.pending() == [first])
        #expect(try store.outbox(limit: 10).map(\.payload) == [
            #"{"id":"T1","status":"queued","ts":1700000000}"#,
            #"{"id":"T1","status":"duplicate","ts":1700000001}"#,
        ])
    }

    @Test func sameIDIsQueuedAgainOnlyOnceItsDedupRecordIsPruned() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        #expect(try store.accept(pay("T1"), now: t0) == .queued(seq: 1))
        try store.finish(seq: 1, state: .played, reason: nil, now: t0)
        let later = t0 + 8 * day
        // Past the window by the wall clock, but still known: a duplicate until pruned.
        #expect(try store.accept(pay("T1"), now: later) == .duplicate(of: try store.entry(id: "T1")))
        clock.reboot()
        _ = try store.prune(now: later, retention: 7 * day, keep: 100)
        #expect(try store.accept(pay("T1"), now: later) == .queued(seq: 2))
        #expect(try store.entry(id: "T1")?.seq == 2, "the newest entry with the id")
        // The window now runs from the second acceptance.
        guard case .duplicate(let of) = try store.accept(pay("T1"), now: later + 1) else {
            Issue.record("expected a duplicate"); return
        }
        #expect(of?.seq == 2)
        #expect(try store.pendingCount() == 1)
    }

    @Test func nextFollowsAcceptanceOrder() throws {
        let store = try Store(path: tmp.path)
        for (i, id) in ["C", "A", "B"].enumerated() {
            _ = try store.accept(pay(id), now: t0 + Int64(i))
        }
        var spoken: [String] = []
        while let e = try store.next() {
            spoken.append(e.payment.id)
            try store.markPlaying(seq: e.seq, now: t0 + 10)
            try store.finish(seq: e.seq, state: .played, reason: nil, now: t0 + 20)
        }
        #expect(spoken == ["C", "A", "B"])
        #expect(try store.pendingCount() == 0)
    }

    @Test func nextPrefersAnEntryLeftPlayingByACrash() throws {
        do {
            let store = try Store(path: tmp.path)
            for id in ["A", "B", "C"] { _ = try store.accept(pay(id), now: t0) }
            try store.markPlaying(seq: 2, now: t0 + 5)
        }   // "crash": the store is closed with B still playing
        let store = try Store(path: tmp.path)
        let next = try store.next()
        #expect(next?.payment.id == "B")
        #expect(next?.state == .playing)
        #expect(next?.plays == 1)
        #expect(try store.pending().map(\.payment.id) == ["A", "B", "C"])
    }

    @Test func markPlayingCountsPlaysAndOnlyPendingEntriesMove() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0)
        try store.markPlaying(seq: 1, now: t0 + 1)
        try store.markPlaying(seq: 1, now: t0 + 2)
        let e = try #require(try store.entry(id: "T1"))
        #expect(e.state == .playing && e.plays == 2 && e.updatedAt == t0 + 2)

        try store.finish(seq: 1, state: .played, reason: nil, now: t0 + 3)
        #expect(throws: StoreError.self) { try store.markPlaying(seq: 1, now: t0 + 4) }
        #expect(throws: StoreError.self) { try store.finish(seq: 1, state: .played, reason: nil, now: t0 + 4) }
        #expect(throws: StoreError.self) { try store.markPlaying(seq: 99, now: t0 + 4) }
        #expect(try store.entry(id: "T1")?.plays == 2)
        #expect(try store.outbox(limit: 10).filter { $0.payload.contains("played") }.count == 1, "one played receipt")
    }

    @Test func finishWritesItsReceiptInTheSameTransaction() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("T1"), now: t0 - 5000)
        _ = try store.accept(pay("T2"), now: t0 - 5000)
        let before = try store.outbox(limit: 10).count
        try store.finish(seq: 1, state: .played, reason: nil, now: t0 + 999)
        try store.finish(seq: 2, state: .failed, reason: "audio device \"default\" unavailable", now: t0 + 2000)
        #expect(try store.outbox(limit: 10).dropFirst(before).map(\.payload) == [
            #"{"id":"T1","status":"played","ts":1700000000}"#,
            #"{"id":"T2","status":"failed","ts":1700000002,"reason":"audio device \"default\" unavailable"}"#,
        ])
        let failed = try #require(try store.entry(id: "T2"))
        #expect(failed.state == .failed && failed.reason == "audio device \"default\" unavailable" && failed.updatedAt == t0 + 2000)
        #expect(try store.entry(id: "T1")?.state == .played)
    }

    @Test func outboxIsReadOldestFirstAndDeletedByNumber() throws {
        let store = try Store(path: tmp.path)
        for id in ["A", "B", "C"] { _ = try store.accept(pay(id), now: t0) }
        try store.appendReceipt(Receipt(id: nil, status: .rejected, ts: 1_700_000_000, reason: "not JSON"), now: t0)
        let all = try store.outbox(limit: 10)
        #expect(all.map(\.n) == all.map(\.n).sorted())
        #expect(all.map(\.payload).last == #"{"status":"rejected","ts":1700000000,"reason":"not JSON"}"#)
        #expect(try store.outbox(limit: 1) == [all[0]])
        try store.deleteOutbox([all[0].n, all[2].n, 12345])
        #expect(try store.outbox(limit: 10) == [all[1], all[3]])
        try store.deleteOutbox([])
        #expect(try store.outbox(limit: 10).count == 2)
    }

    @Test func overlayUpdateIsAllOrNothingAndPersists() throws {
        do {
            // Room for the schema and a little more: the big value cannot fit.
            let store = try Store(path: tmp.path, maxPageCount: 20)
            try store.updateOverlay(["audio.volume": "9", "voice.lang": "en-IN", "mqtt.port": "1884"])
            let error = #expect(throws: StoreError.self) {
                // Applied in key order: audio.volume and mqtt.host are written before zz.big fails.
                try store.updateOverlay(["audio.volume": nil, "mqtt.host": "broker", "zz.big": String(repeating: "x", count: 200_000)])
            }
            #expect(error?.isFull == true)
            #expect(try store.overlay() == ["audio.volume": "9", "voice.lang": "en-IN", "mqtt.port": "1884"])
            try store.updateOverlay(["mqtt.port": nil, "voice.lang": "zh-CN"])
        }
        #expect(try Store(path: tmp.path).overlay() == ["audio.volume": "9", "voice.lang": "zh-CN"])
    }

    @Test func pruneKeepsPendingDropsOldAndOverCountFinalEntriesAndKeepsDedupByAge() throws {
        let clock = FakeClock()
        let store = try Store(path: tmp.path, clock: clock.read)
        let old = t0 - 10 * day, recent = t0 - day
        _ = try store.accept(pay("A"), now: old)           // 1: final, old
        _ = try store.accept(pay("P"), now: old)           // 2: pending, old
        for id in ["B", "C", "D", "E", "F"] { _ = try store.accept(pay(id), now: recent) }  // 3...7
        _ = try store.accept(pay("Q"), now: t0)            // 8: pending
        for seq: Int64 in [1, 3, 4, 5, 6, 7] { try store.finish(seq: seq, state: .played, reason: nil, now: t0) }
        let outbox = try store.outbox(limit: 100)

        clock.reboot()   // the wall clock alone dates them (nothing of this boot)
        #expect(try store.prune(now: t0, retention: 7 * day, keep: 3) == 3)
        #expect(try store.history(limit: 100).map(\.payment.id) == ["Q", "F", "E", "D", "P"])
        #expect(try store.pending().map(\.payment.id) == ["P", "Q"])
        #expect(try store.outbox(limit: 100) == outbox, "prune never touches the outbox")
        // B's entry is gone but its dedup record (1 day old) is kept.
        #expect(try store.accept(pay("B"), now: t0) == .duplicate(of: nil))
        // A's dedup record (10 days old) is gone.
        #expect(try store.accept(pay("A"), now: t0) == .queued(seq: 9))
        #expect(try store.prune(now: t0, retention: 7 * day, keep: 3) == 0)
    }

    @Test func reopenKeepsEverythingAndNeverReusesASeq() throws {
        var snapshot: ([Entry], [Entry], [OutboxItem], [String: String])?
        do {
            let clock = FakeClock()
            let store = try Store(path: tmp.path, clock: clock.read)
            for id in ["A", "B", "C", "D"] { _ = try store.accept(pay(id, 250), now: t0) }
            try store.markPlaying(seq: 2, now: t0 + 1)
            try store.finish(seq: 1, state: .muted, reason: nil, now: t0 + 2)
            try store.finish(seq: 4, state: .expired, reason: "stale", now: t0 + 2)
            try store.updateOverlay(["audio.volume": "3"])
            // Prune both final entries, among them the newest (seq 4): its seq must still not come back.
            clock.reboot()
            #expect(try store.prune(now: t0 + 1 + day, retention: day, keep: 10) == 2)
            snapshot = (try store.pending(), try store.history(limit: 10), try store.outbox(limit: 100), try store.overlay())
        }
        let store = try Store(path: tmp.path)
        let (pending, history, outbox, overlay) = try #require(snapshot)
        #expect(try store.pending() == pending)
        #expect(try store.history(limit: 10) == history)
        #expect(try store.outbox(limit: 100) == outbox)
        #expect(try store.overlay() == overlay)
        #expect(try store.connection.withLock { c throws(StoreError) in try c.userVersion() } == Schema.version)
        #expect(Schema.version == 5)
        #expect(try store.accept(pay("E"), now: t0 + 3) == .queued(seq: 5))
        #expect(store.quickCheck() == "ok")
    }

    @Test func historyEntryAndSummary() throws {
        let store = try Store(path: tmp.path)
        _ = try store.accept(pay("A", 100), now: t0 - day)
        _ = try store.accept(pay("B", 2_000), now: t0)
        _ = try store.accept(pay("C", 30_000), now: t0 + 1)
        try store.finish(seq: 2, state: .played, reason: nil, now: t0 + 2)
        #expect(try store.history(limit: 2).map(\.payment.id) == ["C", "B"])
        #expect(try store.entry(id: "nope") == nil)
        let s = try store.summary(since: t0)
        #expect(s.count == 2 && s.totalMinor == 32_000)
        let none = try store.summary(since: t0 + day)
        #expect(none.count == 0 && none.totalMinor == 0)
    }

    @Test func aFileThatIsNotADatabaseIsCorrupt() throws {
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: tmp.path))
        let error = #expect(throws: StoreError.self) { try Store(path: tmp.path) }
        #expect(error?.isCorrupt == true, "\(String(describing: error))")
    }

    @Test func aDatabaseWithDamagedPagesIsCorrupt() throws {
        do {
            let store = try Store(path: tmp.path)
            for i in 0..<300 { _ = try store.accept(pay("T\(i)"), now: t0) }
        }   // closed: everything checkpointed into the main file
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: tmp.path))
        try file.seek(toOffset: 4 * 4096)   // page 1 (the header and schema) stays readable
        try file.write(contentsOf: Data(repeating: 0x42, count: 8 * 4096))
        try file.close()
        let error = #expect(throws: StoreError.self) { try Store(path: tmp.path) }
        #expect(error?.isCorrupt == true, "\(String(describing: error))")
    }

    @Test func aTornWALOpensConsistent() throws {
        do {
            let store = try Store(path: tmp.path)
            for i in 0..<20 { _ = try store.accept(pay("OLD\(i)"), now: t0) }
        }   // closed: the 20 are checkpointed into the main file
        let copy = tmp.dir + "/copy.db"
        do {
            let store = try Store(path: tmp.path)
            for i in 0..<40 { _ = try store.accept(pay("NEW\(i)"), now: t0) }
            // While it is open, the 40 live only in the WAL: copy the files
            // as a power cut would leave them, and tear the WAL in half.
            try FileManager.default.copyItem(atPath: tmp.path, toPath: copy)
            let wal = try Data(contentsOf: URL(fileURLWithPath: tmp.path + "-wal"))
            #expect(wal.count > 40 * 4096)
            try wal.prefix(wal.count / 2).write(to: URL(fileURLWithPath: copy + "-wal"))
        }
        let store = try Store(path: copy)
        #expect(store.quickCheck() == "ok")
        let ids = try store.pending().map(\.payment.id)
        #expect(Array(ids.prefix(20)) == (0..<20).map { "OLD\($0)" })
        // Some whole prefix of the later transactions survives, nothing else.
        let newer = ids.dropFirst(20)
        #expect(newer.count < 40)
        #expect(Array(newer) == (0..<newer.count).map { "NEW\($0)" })
        #expect(try store.outbox(limit: 1000).count == ids.count, "each entry with its receipt")
        #expect(try store.accept(pay("AFTER"), now: t0) == .queued(seq: Int64(ids.count + 1)))
    }

    @Test func aFullDiskFailsTheAcceptWholeAndReadsGoOn() throws {
        let store = try Store(path: tmp.path, maxPageCount: 16)
        var accepted = 0
        var failure: StoreError?
        while accepted < 10_000 {
            do {
                _ = try store.accept(pay(String(repeating: "x", count: 58) + "\(100_000 + accepted)"), now: t0)
                accepted += 1
            } catch {
                failure = error
                break
            }
        }
        let error = try #require(failure)
        #expect(error.isFull && error.isWriteFailure, "\(error)")
        #expect(accepted > 0)
        #expect(try store.pendingCount() == accepted)
        #expect(try store.outbox(limit: 100_000).count == accepted, "no receipt without its entry")
        #expect(try store.entry(id: String(repeating: "x", count: 58) + "\(100_000 + accepted)") == nil)
        #expect(try store.next()?.seq == 1)
        #expect(store.quickCheck() == "ok")
    }

    @Test func concurrentAcceptsFromFourThreads() throws {
        let store = try Store(path: tmp.path)
        let results = Mutex<[Result<AcceptOutcome, StoreError>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<250 {
                let r = Result { () throws(StoreError) in try store.accept(pay("T\(thread)-\(i)"), now: t0) }
                results.withLock { $0.append(r) }
            }
        }
        let seqs = try results.withLock { $0 }.map { r throws(StoreError) -> Int64 in
            guard case .queued(let seq) = try r.get() else { return -1 }
            return seq
        }
        #expect(Set(seqs) == Set(1...1000))
        #expect(try store.pendingCount() == 1000)
        #expect(Set(try store.pending().map(\.payment.id)).count == 1000)
    }
}
