import Soundbox
import SoundboxStore
import Testing

/// The journal of what could not be written: a plain value, scripted here
/// without a database.
@Suite struct MemoryJournalTests {
    let t0: Int64 = 1_764_415_000_000
    func pay(_ id: String, _ minor: Int64 = 100) -> Payment { Payment(id: id, amount: Amount(minorUnits: minor)) }

    @Test func acceptedPaymentsAreHeldInOrderWithTheirReceipts() {
        var j = MemoryJournal(cap: 10)
        #expect(j.isEmpty)
        let a = j.accept(pay("A"), now: t0, earlier: nil)
        let b = j.accept(pay("B", 250), now: t0 + 1000, earlier: nil)
        #expect(a.entry?.ref != b.entry?.ref)
        #expect(j.next?.payment.id == "A")
        #expect(j.pending.map(\.payment.id) == ["A", "B"])
        #expect(j.receipts.map(\.receipt.json) == [#"{"id":"A","status":"queued","ts":1764415000,"durable":false}"#,
                                                   #"{"id":"B","status":"queued","ts":1764415001,"durable":false}"#])
        #expect(j.summary(since: t0 + 1) == (count: 1, totalMinor: 250))
        #expect(!j.isEmpty)
    }

    @Test func anIDHeldHereOrKnownToTheDatabaseIsADuplicate() {
        var j = MemoryJournal(cap: 10)
        _ = j.accept(pay("A"), now: t0, earlier: nil)
        let again = j.accept(pay("A"), now: t0 + 5, earlier: nil)
        #expect(again.entry == nil && again.earlier == "in memory, queued")
        let stored = j.accept(pay("S"), now: t0 + 6, earlier: "seq 4 played")
        #expect(stored.entry == nil && stored.earlier == "seq 4 played")
        #expect(j.pending.count == 1)
        #expect(j.receipts.map(\.receipt.status) == [.queued, .duplicate, .duplicate])
    }

    @Test func playingAndFinishingAHeldPaymentChangesItAndReceiptsTheEnd() throws {
        var j = MemoryJournal(cap: 10)
        let e = try #require(j.accept(pay("A"), now: t0, earlier: nil).entry)
        guard case .memory(let token) = e.ref else { Issue.record("held in memory"); return }
        j.markPlaying(token: token, now: t0 + 10)
        #expect(j.next?.state == .playing && j.next?.plays == 1)
        j.finish(e, .failed, reason: "no sound card", now: t0 + 2000)
        #expect(j.next == nil)
        #expect(j.entry(id: "A")?.state == .failed)
        #expect(j.receipts.last?.receipt.json == #"{"id":"A","status":"failed","ts":1764415002,"reason":"no sound card","durable":false}"#)
    }

    /// A stored payment whose final state could not be written is
    /// remembered (not spoken again) until recorded.
    @Test func aStoredPaymentsFinalStateWaitsAsUnrecorded() {
        var j = MemoryJournal(cap: 10)
        let stored = Entry(seq: 7, payment: pay("S"), state: .playing, acceptedAt: t0, updatedAt: t0, plays: 1, reason: nil)
        j.finish(stored, .played, reason: nil, now: t0 + 1000)
        #expect(j.unrecorded[7]?.state == .played)
        #expect(!j.isEmpty)
        j.forget(tokens: Set(j.receipts.map(\.token)))
        j.recorded(seq: 7)
        #expect(j.isEmpty)
    }

    /// Written through: the held payments get seqs, and a reference the
    /// scheduler still holds resolves to the stored entry.
    @Test func writtenThroughEntriesResolveToTheirSeqs() throws {
        var j = MemoryJournal(cap: 10)
        let a = try #require(j.accept(pay("A"), now: t0, earlier: nil).entry)
        _ = j.accept(pay("B"), now: t0 + 1, earlier: nil)
        let (entries, receipts) = j.forWriting
        #expect(entries.map(\.payment.id) == ["A", "B"] && receipts.count == 2)
        j.written(seqs: [41, 42])
        #expect(j.isEmpty && j.next == nil)
        #expect(j.resolve(a.ref) == .stored(41))
        #expect(j.resolve(.stored(3)) == .stored(3))
    }

    /// A long outage cannot grow memory without bound: finished payments
    /// and receipts are capped, pending payments never dropped.
    @Test func finishedPaymentsAndReceiptsAreCappedPendingNever() throws {
        var j = MemoryJournal(cap: 3)
        for i in 0..<6 {
            let e = try #require(j.accept(pay("F\(i)"), now: t0 + Int64(i), earlier: nil).entry)
            j.finish(e, .played, reason: nil, now: t0 + Int64(i))
        }
        for i in 0..<5 { _ = j.accept(pay("P\(i)"), now: t0 + 100 + Int64(i), earlier: nil) }
        #expect(j.entries.filter { !$0.state.isPending }.count == 3)
        #expect(j.pending.count == 5)
        #expect(j.receipts.count == 3)
        #expect(j.receiptsDropped == 14)
    }

    @Test func aNonceIsAReplayOnlyWithinItsWindowAndTheyAreCapped() {
        var j = MemoryJournal(cap: 2)
        #expect(!j.seen(nonce: "n1", since: t0))
        j.remember(nonce: "n1", now: t0 + 10, since: t0)
        #expect(j.seen(nonce: "n1", since: t0))
        #expect(!j.seen(nonce: "n1", since: t0 + 11), "older than the window: not a replay")
        j.remember(nonce: "n2", now: t0 + 20, since: t0)
        j.remember(nonce: "n3", now: t0 + 30, since: t0)
        #expect(!j.seen(nonce: "n1", since: t0), "the oldest went first")
        #expect(j.seen(nonce: "n2", since: t0) && j.seen(nonce: "n3", since: t0))
        #expect(j.isEmpty, "nonces matter only until the restart: nothing to write through")
    }
}
