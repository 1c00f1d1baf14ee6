// ~460 lines, one owner: every service reaches the queue through this one
// type (database or memory journal behind one lock); it shrinks as each
// service is given only what it uses.
import Soundbox
import SoundboxStore
import Synchronization

/// Where payments and receipts live (docs/soundboxd.md "When storage
/// fails"): the database when it can be written (`Database`, which owns
/// the file's life), memory when it cannot (`MemoryJournal`, a plain
/// value). This type only decides which, one call at a time: ingest, the
/// scheduler, the uplink, settings and the control commands all go through
/// it, so deciding "database or memory" and writing there cannot interleave
/// with another ingest (acceptance order is speaking order).
///
/// While the journal holds anything, new payments join it. Whenever the
/// database can be written again (checked at each write, and by `retry`
/// while faulted), the journal is written through in one transaction and
/// the fault clears. Flushes run without the lock.
final class Storage: Sendable {
    typealias Ref = EntryRef
    /// A payment for the scheduler.
    typealias Item = Entry

    enum Accepted: Sendable, Equatable {
        case queued(durable: Bool, seq: Int64?)
        case duplicate(earlier: String)
    }

    /// Finished payments, receipts and nonces held in memory are capped at
    /// this many each (`MemoryJournal`).
    static let memoryCap = 10_000

    let path: String
    private let log = Log("storage")
    private let state: Locked

    private struct State {
        var db: Database
        var journal = MemoryJournal(cap: Storage.memoryCap)
        /// `journal.receiptsDropped` already logged.
        var droppedLogged = 0
    }

    /// The state under its lock, which tells `faultChanged`, once the lock
    /// is released, each time the storage fault came or went: whichever
    /// call met it (status and the LED show it).
    private final class Locked: Sendable {
        private let mutex: Mutex<State>
        private let faultChanged: @Sendable () -> Void
        init(_ state: State, faultChanged: @escaping @Sendable () -> Void) {
            mutex = Mutex(state)
            self.faultChanged = faultChanged
        }
        func withLock<R>(_ body: (inout State) -> R) -> R {
            let (result, changed) = mutex.withLock { s in
                let faulted = s.db.fault != nil
                let result = body(&s)
                return (result, faulted != (s.db.fault != nil))
            }
            if changed { faultChanged() }
            return result
        }
    }

    /// Opens the database at `path` (creating its folder). A database that
    /// cannot be opened is a fault, not a crash: the daemon runs on memory.
    /// - Parameter faultChanged: told when the storage fault comes or goes.
    init(path: String, faultChanged: @escaping @Sendable () -> Void = {},
         clock: @escaping @Sendable () -> ClockReading = ClockReading.trusted) {
        self.path = path
        mayHoldDamagedWAL = !Store.damagedWALCopies(of: path).isEmpty
        state = Locked(State(db: Database(path: path, clock: clock)), faultChanged: faultChanged)
    }

    /// A damaged WAL (docs/soundboxd.md, "A damaged write-ahead log"): what
    /// an open of this run found, and the copies kept by this or an earlier
    /// start. A storage fault until the technician has deleted the copies
    /// (or, when no copy could be made, until a restart).
    var damagedWAL: (found: WALDamage?, copies: [String])? {
        let found = state.withLock { $0.db.walDamage }
        guard found != nil || mayHoldDamagedWAL else { return nil }
        let copies = Store.damagedWALCopies(of: path)
        guard !copies.isEmpty || (found != nil && found?.copy == nil) else { return nil }
        return (found, copies)
    }
    /// Copies of a damaged WAL were there at the start (else only an open of this run can make one).
    private let mayHoldDamagedWAL: Bool

    // MARK: - Payments

    /// Ingest's transaction: dedup (an id known to the database or to memory), then store the
    /// payment durably, or hold it in memory when that fails. `committed`
    /// runs once a new payment can be read (by the scheduler), with where
    /// it is, before the flush that makes it durable, which runs without
    /// the lock. (A duplicate's receipt is committed without a flush of its
    /// own: `receipts` flushes it.)
    func accept(_ p: Payment, now: Int64, committed: (Accepted) -> Void = { _ in }) -> Accepted {
        let (result, written) = state.withLock { s -> (Accepted, (Store, Int)?) in
            let stored = onStore(&s, "accept", now: now) { store throws(StoreError) in
                (try store.accept(p, now: now, flush: false), store, store.lastCommit)
            }
            switch stored {
            case (.queued(let seq), let store, let commit)?: return (.queued(durable: true, seq: seq), (store, commit))
            case (.duplicate(let earlier), _, _)?: return (.duplicate(earlier: earlier.map(Self.describe) ?? "pruned"), nil)
            case nil:
                let known = (try? s.db.store?.entry(id: p.id)).flatMap { $0 }
                let (entry, earlier) = s.journal.accept(p, now: now, earlier: known.map(Self.describe))
                noteDropped(&s)
                return entry == nil ? (.duplicate(earlier: earlier ?? ""), nil) : (.queued(durable: false, seq: nil), nil)
            }
        }
        guard case .queued(_, let seq) = result else { return result }
        committed(result)
        guard let (store, commit) = written else { return result }
        return flushed("accept", store, commit) ? result : .queued(durable: false, seq: seq)
    }

    private static func describe(_ e: Entry) -> String { "seq \(e.seq) \(e.state.rawValue)" }

    /// The payment to speak next: the oldest stored one left `playing` by a
    /// crash, else the oldest stored `queued`, else the oldest held in
    /// memory (all newer than any stored one).
    func next() -> Item? {
        state.withLock { s in
            if let store = s.db.store {
                do throws(StoreError) {
                    let skip = s.journal.unrecorded
                    let entry = skip.isEmpty ? try store.next()
                        : try store.pending().filter { skip[$0.seq] == nil }.min { a, b in
                            a.state == b.state || (a.state != .playing && b.state != .playing) ? a.seq < b.seq : a.state == .playing
                        }
                    if let entry { return entry }
                } catch {
                    s.db.failed(error, "next")
                }
            }
            return s.journal.next
        }
    }

    /// Speaking starts: `playing`, plays + 1 (committed, not flushed: after
    /// a power cut an entry still `queued` is spoken again all the same).
    func markPlaying(_ item: Item, now: Int64) {
        state.withLock { s in
            switch s.journal.resolve(item.ref) {
            case .stored(let seq): _ = onStore(&s, "markPlaying", now: now) { store throws(StoreError) in try store.markPlaying(seq: seq, now: now, flush: false) }
            case .memory(let token): s.journal.markPlaying(token: token, now: now)
            }
        }
    }

    /// The final state and its receipt, durable when this returns (the
    /// flush without the lock). If it cannot be stored it is
    /// remembered (so the payment is not spoken again in this run), its
    /// receipt is sent from memory, and it is written when storage returns.
    func finish(_ item: Item, _ final: PaymentState, reason: String?, now: Int64) {
        let written = state.withLock { s -> (Store, Int)? in
            if case .stored(let seq) = s.journal.resolve(item.ref),
               let done = onStore(&s, "finish", now: now, { store throws(StoreError) in
                   try store.finish(seq: seq, state: final, reason: reason, now: now, flush: false)
                   return (store, store.lastCommit)
               }) {
                return done
            }
            s.journal.finish(item, final, reason: reason, now: now)
            noteDropped(&s)
            return nil
        }
        // Before the next payment starts: a power cut then repeats only that one.
        if let (store, commit) = written { _ = flushed("finish", store, commit) }
    }

    /// A receipt that belongs to no state change (e.g. `rejected`); not
    /// flushed: the next payment's flush carries it.
    func recordReceipt(_ receipt: Receipt, now: Int64) {
        state.withLock { s in
            if onStore(&s, "appendReceipt", now: now, { store throws(StoreError) in try store.appendReceipt(receipt, now: now, flush: false) }) != nil { return }
            var r = receipt
            r.durable = r.status == .rejected ? nil : false
            s.journal.hold(r)
            noteDropped(&s)
        }
    }

    // MARK: - Offline summaries (docs/soundboxd.md)

    /// Stored payments still `queued`, oldest first: who may go into an
    /// offline summary (none while storage is failing: they are read one
    /// by one then).
    func queuedForSummary() -> [Entry] {
        state.withLock { s in
            guard s.db.fault == nil, s.journal.isEmpty, let store = s.db.store else { return [] }
            return ((try? store.pending()) ?? []).filter { $0.state == .queued }
        }
    }

    /// A summary of `seqs` starts (committed, not flushed, as `playing`);
    /// its number, or nil if none of them is queued any more.
    func beginSummary(_ seqs: [Int64], now: Int64) -> Int64? {
        state.withLock { s in
            onStore(&s, "beginSummary", now: now) { store throws(StoreError) in try store.beginSummary(seqs, now: now, flush: false) } ?? nil
        }
    }

    /// Summary `group` is spoken again after a crash (committed, not flushed).
    func restartSummary(_ group: Int64, now: Int64) {
        state.withLock { s in
            _ = onStore(&s, "restartSummary", now: now) { store throws(StoreError) in try store.restartSummary(group, now: now, flush: false) }
        }
    }

    /// The payments of summary `group` still pending.
    func summaryMembers(_ group: Int64) -> [Item] {
        state.withLock { s in (try? s.db.store?.summaryMembers(group)) ?? [] }
    }

    /// The summary was spoken: all its payments `played` with their
    /// receipts, durable when this returns. Their ids (empty if it could
    /// not be written: then they are spoken again, one by one or in a
    /// summary, as after a crash).
    func finishSummary(_ group: Int64, now: Int64) -> [String] {
        let written = state.withLock { s in
            onStore(&s, "finishSummary", now: now) { store throws(StoreError) in
                (try store.finishSummary(group, now: now, flush: false), store, store.lastCommit)
            }
        }
        guard let (ids, store, commit) = written else { return [] }
        _ = flushed("finishSummary", store, commit)
        return ids
    }

    /// Pending payments, oldest first, for `queue`.
    func pending() -> [Item] {
        state.withLock { s in
            let stored = ((try? s.db.store?.pending()) ?? []).filter { s.journal.unrecorded[$0.seq] == nil }
            return stored + s.journal.pending
        }
    }

    var pendingCount: Int {
        state.withLock { s in
            let stored = (try? s.db.store?.pendingCount()) ?? 0
            return max(0, stored - s.journal.unrecorded.count) + s.journal.pending.count
        }
    }

    /// Entries newest first (memory ones first: they are the newest).
    func history(limit: Int) throws(StoreError) -> [Entry] {
        let (store, held) = state.withLock { s in (s.db.store, Array(s.journal.entries.reversed().prefix(limit))) }
        guard held.count < limit, let store else { return held }
        return held + (try store.history(limit: limit - held.count))
    }

    /// The newest entry with this id, in memory or stored.
    func entry(id: String) throws(StoreError) -> Entry? {
        let (store, held) = state.withLock { s in (s.db.store, s.journal.entry(id: id)) }
        if let held { return held }
        return try store?.entry(id: id)
    }

    /// Count and sum of the payments accepted since `since` (ms).
    func summary(since: Int64) -> (count: Int, totalMinor: Int64) {
        let (store, held) = state.withLock { s in (s.db.store, s.journal.summary(since: since)) }
        let stored = (try? store?.summary(since: since)) ?? (count: 0, totalMinor: 0)
        return (stored.count + held.count, stored.totalMinor + held.totalMinor)
    }

    /// Prunes history (Store.prune); the database only.
    /// Nothing is pruned (0) while the database cannot be written: the fault already says so.
    func prune(now: Int64, retention: Int64, keep: Int) throws(StoreError) -> Int {
        try state.withLock { s in
            s.db.writable(monotonic: SystemClock.monotonic()) == nil ? .success(0)
                : stored(&s, "prune", now: now) { store throws(StoreError) in try store.prune(now: now, retention: retention, keep: keep, flush: false) }
        }.get()
    }

    // MARK: - Receipts

    /// Receipts to publish, oldest first: those held in memory, then the
    /// outbox's, at most `limit`, leaving out `excluding` (in flight or
    /// acknowledged). Only durable outbox rows: a receipt committed without
    /// a flush of its own (`rejected`, `duplicate`) is flushed here first,
    /// without the lock, in one flush for all waiting (or the end of one under way).
    func receipts(limit: Int, excluding busy: Set<ReceiptRef>) -> [(ref: ReceiptRef, json: String)] {
        if let store = state.withLock({ $0.db.store }), store.receiptsWaitForFlush {
            do throws(StoreError) { try store.flushReceipts() } catch { state.withLock { $0.db.failed(error, "flush receipts") } }
        }
        let (held, store) = state.withLock { s in (s.journal.receipts, s.db.store) }
        var out: [(ReceiptRef, String)] = []
        for (token, r) in held where out.count < limit && !busy.contains(.memory(token)) { out.append((.memory(token), r.json)) }
        guard out.count < limit, let store else { return out }
        do throws(StoreError) {
            // Enough rows to find `limit` new ones past those in flight or acknowledged.
            let durable = store.durableOutbox
            for item in try store.outbox(limit: limit + busy.count) where item.n <= durable && out.count < limit && !busy.contains(.outbox(item.n)) {
                out.append((.outbox(item.n), item.payload))
            }
        } catch {
            log.error("outbox_read_failed", ["error": error.description])
        }
        return out
    }

    /// The broker took these receipts: delete them. Returns those deleted
    /// (an outbox row whose delete fails is tried again later). Not
    /// flushed: a receipt whose deletion a power cut undoes is sent again
    /// (at least once).
    func forget(_ refs: [ReceiptRef], now: Int64) -> [ReceiptRef] {
        guard !refs.isEmpty else { return [] }
        var tokens = Set<Int64>(), rows: [Int64] = []
        for ref in refs {
            switch ref {
            case .memory(let token): tokens.insert(token)
            case .outbox(let n): rows.append(n)
            }
        }
        return state.withLock { s in
            s.journal.forget(tokens: tokens)
            let deleted = rows.isEmpty ? false
                : onStore(&s, "deleteOutbox", now: now) { store throws(StoreError) in try store.deleteOutbox(rows, flush: false) } != nil
            return tokens.map { .memory($0) } + (deleted ? rows.map { .outbox($0) } : [])
        }
    }

    /// Receipts not yet taken by the broker.
    var receiptsPending: Int {
        state.withLock { s in ((try? s.db.store?.outboxCount()) ?? 0) + s.journal.receipts.count }
    }

    /// A signed command's nonce: true the first time it is seen since
    /// `since` (ms), false for a replay. When the database cannot be
    /// written the nonce is remembered in memory until the restart.
    func useNonce(_ nonce: String, now: Int64, since: Int64) -> Bool {
        state.withLock { s in
            if s.journal.seen(nonce: nonce, since: since) { return false }
            if let fresh = onStore(&s, "useNonce", now: now, { store throws(StoreError) in try store.useNonce(nonce, now: now) }) { return fresh }
            s.journal.remember(nonce: nonce, now: now, since: since)
            return true
        }
    }

    // MARK: - Settings

    func overlay() -> [String: String] { state.withLock { s in (try? s.db.store?.overlay()) ?? [:] } }
    func meta(_ key: String) -> String? { state.withLock { s in (try? s.db.store?.meta(key)) ?? nil } }

    /// Persists overlay changes (and meta), all or none.
    func updateOverlay(_ changes: [String: String?], meta: [String: String] = [:]) throws(StoreError) {
        try state.withLock { s in
            stored(&s, "updateOverlay", now: SystemClock.nowMs()) { store throws(StoreError) in try store.updateOverlay(changes, meta: meta) }
        }.get()
    }

    // MARK: - Health

    /// What is wrong now, or nil (no I/O: the LED reads it every turn).
    var fault: StorageFault? { state.withLock { $0.db.fault } }

    /// Checks that the file is still the one open, restoring a deleted one
    /// (and writing through what memory holds) — for status and doctor;
    /// then what is wrong now, or nil.
    func checkFile() -> StorageFault? {
        state.withLock { s in
            if !s.db.fileIsInPlace { _ = writable(&s, now: SystemClock.nowMs()) }
            return s.db.fault
        }
    }

    /// Every accepted payment and receipt is in the database.
    var durable: Bool { state.withLock { s in s.db.store != nil && s.db.fault == nil && s.journal.isEmpty } }

    /// `PRAGMA quick_check` of the open database ("ok"), or nil without one.
    func quickCheck() -> String? { state.withLock { s in s.db.store?.quickCheck() } }

    /// While faulted: tries to reach the database again and write through
    /// what memory holds. Returns whether it still needs retrying.
    @discardableResult
    func retry() -> Bool {
        state.withLock { s in
            guard s.db.fault != nil || !s.journal.isEmpty else { return false }
            _ = writable(&s, now: SystemClock.nowMs())
            return s.db.fault != nil || !s.journal.isEmpty
        }
    }

    // MARK: - Inside (all with the lock held)

    /// Runs `body` on the store when it can be written now; nil when it
    /// cannot, or when `body` failed (then the fault says why).
    private func onStore<T>(_ s: inout State, _ what: String, now: Int64, _ body: (Store) throws(StoreError) -> T) -> T? {
        try? stored(&s, what, now: now, body).get()
    }

    /// `onStore` for a caller that must say why: `body`'s error (also the
    /// fault), or `unavailable` with the fault's message.
    private func stored<T>(_ s: inout State, _ what: String, now: Int64, _ body: (Store) throws(StoreError) -> T) -> Result<T, StoreError> {
        guard let store = writable(&s, now: now) else {
            return .failure(.unavailable(what, s.db.fault?.message ?? "database unavailable"))
        }
        do throws(StoreError) { return .success(try body(store)) } catch {
            s.db.failed(error, what)
            return .failure(error)
        }
    }

    /// The store, if it can be written now (`Database.writable`), with
    /// nothing left in memory (written through first).
    private func writable(_ s: inout State, now: Int64) -> Store? {
        guard let store = s.db.writable(monotonic: SystemClock.monotonic()) else { return nil }
        if !s.journal.isEmpty {
            guard writeThrough(&s, store, now: now) else { return nil }
        }
        s.db.succeeded()
        return store
    }

    /// Writes what the journal holds to the store in one transaction, then
    /// the final states it could not record.
    private func writeThrough(_ s: inout State, _ store: Store, now: Int64) -> Bool {
        let (entries, receipts) = s.journal.forWriting
        do throws(StoreError) {
            s.journal.written(seqs: try store.adopt(entries, receipts: receipts, now: now))
        } catch {
            s.db.failed(error, "writeThrough")
            return false
        }
        for (seq, final) in s.journal.unrecorded.sorted(by: { $0.key < $1.key }) {
            do throws(StoreError) { try store.finish(seq: seq, state: final.state, reason: final.reason, now: now) } catch {
                // No longer pending: nothing to record; anything else: try again later.
                guard error.isNotFound else { s.db.failed(error, "finish"); return false }
            }
            s.journal.recorded(seq: seq)
        }
        if entries.count + receipts.count > 0 {
            log.info("written_through", ["payments": "\(entries.count)", "receipts": "\(receipts.count)"])
        }
        return true
    }

    /// Runs a flush of the store without the lock: false (and a fault) if it failed.
    private func flushed(_ what: String, _ store: Store, _ commit: Int) -> Bool {
        do throws(StoreError) {
            try store.flush(upTo: commit)
            return true
        } catch {
            state.withLock { $0.db.failed(error, what) }
            return false
        }
    }

    private func noteDropped(_ s: inout State) {
        guard s.journal.receiptsDropped > s.droppedLogged else { return }
        s.droppedLogged = s.journal.receiptsDropped
        log.warning("receipts_dropped", ["kept": "\(Self.memoryCap)"])
    }
}
