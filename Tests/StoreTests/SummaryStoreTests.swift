import Foundation
import Soundbox
@testable import SoundboxStore
import Testing

/// The offline summary in the store: its payments `playing` together, then
/// `played` together with `"summary":true` receipts; resumable after a crash.
@Suite struct SummaryStoreTests {
    let tmp = TempDB()

    @Test func aSummaryBeginsAndFinishesItsQueuedPaymentsTogether() throws {
        let store = try Store(path: tmp.path)
        for i in 1...5 { _ = try store.accept(pay("S\(i)", Int64(i) * 100), now: t0 + Int64(i)) }
        try store.markPlaying(seq: 5, now: t0 + 10)   // not queued any more: left out
        #expect(try store.beginSummary([2, 3, 4, 5], now: t0 + 20) == 2)
        #expect(try store.summaryMembers(2).map(\.payment.id) == ["S2", "S3", "S4"])
        #expect(try store.summaryMembers(2).allSatisfy { $0.state == .playing && $0.plays == 1 && $0.summary == 2 })
        // next() resumes the summary first after a crash (the oldest playing one).
        let reopened = try Store(path: tmp.path)
        #expect(try reopened.next()?.summary == 2)
        #expect(try reopened.finishSummary(2, now: t0 + 30_000) == ["S2", "S3", "S4"])
        #expect(try reopened.summaryMembers(2).isEmpty)
        #expect(try reopened.entry(id: "S3")?.state == .played)
        #expect(try reopened.entry(id: "S1")?.summary == nil)
        let receipts = try reopened.outbox(limit: 100).map(\.payload).filter { $0.contains("summary") }
        #expect(receipts == ["S2", "S3", "S4"].map { #"{"id":"\#($0)","status":"played","ts":1700000030,"summary":true}"# })
        #expect(try reopened.finishSummary(2, now: t0 + 31_000).isEmpty, "finished once")
        #expect(try reopened.beginSummary([1], now: t0 + 40) == 1)
        #expect(try reopened.beginSummary([2, 3], now: t0 + 40) == nil, "nothing queued")
    }

    @Test func aVersion3DatabaseGainsTheColumn() throws {
        do {
            let store = try Store(path: tmp.path)
            _ = try store.accept(pay("OLD"), now: t0)
            try store.connection.withLock { c throws(StoreError) in
                // As version 3 wrote it: without v4's column, nor v5's.
                try c.exec("""
                    DROP INDEX dedup_n; ALTER TABLE dedup DROP COLUMN n;
                    ALTER TABLE payments DROP COLUMN summary; PRAGMA user_version = 3
                    """ + ["payments", "dedup", "nonces"].map { t in
                        ["boot", "mono", "dated"].map { "; ALTER TABLE \(t) DROP COLUMN \($0)" }.joined()
                    }.joined())
            }
        }
        let store = try Store(path: tmp.path)
        #expect(try store.entry(id: "OLD")?.summary == nil)
        #expect(try store.beginSummary([1], now: t0) == 1)
    }
}
