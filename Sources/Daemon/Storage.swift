import Glibc
import Soundbox
import SoundboxStore
import Synchronization

/// What is wrong with the database, for status, doctor and the LED.
struct StorageFault: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// Disk full (or a file-size limit).
        case full
        /// A read-only file, folder or file system, or permissions.
        case permission
        /// The file is damaged or is not a database.
        case corrupt
        /// The file was deleted or replaced while open.
        case replaced
        /// An I/O error, or anything else.
        case other
    }
    var kind: Kind
    var message: String

    init(kind: Kind, message: String) { self.kind = kind; self.message = message }

    init(_ error: StoreError) {
        kind = error.isFull ? .full : error.isPermission ? .permission : error.isCorrupt ? .corrupt : .other
        message = error.description
    }
}

/// The one owner of where payments and receipts live (docs/soundboxd.md
/// "When storage fails"): the database when it can be written, memory when
/// it cannot. Ingest, the scheduler, the uplink, settings and the control
/// commands all go through it; each call is one critical section, so
/// deciding "database or memory" and writing there cannot interleave with
/// another ingest (acceptance order is speaking order).
///
/// While anything is held in memory, new payments join it there. Whenever
/// the database can be written again (checked at each write, and by
/// `retry` while faulted), everything held in memory is written through in
/// one transaction — pending and already spoken payments with their dedup
/// records, and unsent receipts — and the fault clears. A database file
/// deleted while open is restored from the open connection; one replaced by
/// another file is left alone and reported.
final class Storage: Sendable {
    /// Where a payment is held.
    enum Ref: Hashable, Sendable {
        case stored(Int64)
        case memory(Int64)
    }

    /// A payment for the scheduler.
    struct Item: Sendable {
        var ref: Ref
        var payment: Payment
        var acceptedAt: Int64
        var plays: Int
        /// The offline summary it is being spoken in (left `playing` by a crash).
        var summary: Int64? = nil

        init(ref: Ref, payment: Payment, acceptedAt: Int64, plays: Int, summary: Int64? = nil) {
            self.ref = ref; self.payment = payment; self.acceptedAt = acceptedAt; self.plays = plays; self.summary = summary
        }

        init(_ e: Entry) { self.init(ref: .stored(e.seq), payment: e.payment, acceptedAt: e.acceptedAt, plays: e.plays, summary: e.summary) }
    }

    enum Accepted: Sendable, Equatable {
        case queued(durable: Bool, seq: Int64?)
        case duplicate(earlier: String)
    }

    /// Finished payments and receipts held in memory are capped (oldest
    /// finished ones go first; pending payments are never dropped), so a
    /// long storage outage cannot grow memory without bound.
    static let memoryCap = 10_000

    let path: String
    /// The clock's state for every row written (`ClockReading`).
    private let clock: @Sendable () -> ClockReading
    private let log = Log("storage")
    private let state: Mutex<State>

    private struct MemoryEntry {
        var token: Int64
        var payment: Payment
        var acceptedAt: Int64
        var updatedAt: Int64
        var state: PaymentState
        var plays: Int
        var reason: String?
    }

    private struct State {
        var store: Store?
        var fault: StorageFault?
        var entries: [MemoryEntry] = []
        var receipts: [(token: Int64, receipt: Receipt)] = []
        /// Stored entries whose final state could not be written.
        var unrecorded: [Int64: (state: PaymentState, reason: String?)] = [:]
        /// Memory tokens written through, and their seqs.
        var adopted: [Int64: Int64] = [:]
        var nextToken: Int64 = 1
        var lastReopen = -1e9
        /// What the last open that found a damaged WAL found.
        var walDamage: WALDamage?
        /// The store's `diskFullRecoveries` already logged.
        var diskFullsLogged = 0
        /// Signed commands' nonces seen while the database could not be
        /// written (nonce → ms), capped like the rest.
        var nonces: [String: Int64] = [:]
        var heldInMemory: Bool { !entries.isEmpty || !receipts.isEmpty || !unrecorded.isEmpty }
    }

    /// Opens the database at `path` (creating its folder). A database that
    /// cannot be opened is a fault, not a crash: the daemon runs on memory.
    init(path: String, clock: @escaping @Sendable () -> ClockReading = ClockReading.trusted) {
        self.path = path
        self.clock = clock
        var s = State()
        mayHoldDamagedWAL = !Store.damagedWALCopies(of: path).isEmpty
        do throws(StoreError) { s.store = try Self.open(path, clock) } catch {
            s.fault = StorageFault(error)
            Log("storage").error("database_unavailable", ["path": path, "error": error.description])
            if error.isPermission, let readable = try? Store(readingOnly: path) {
                // Still answer for what it holds: dedup, history, settings.
                s.store = readable
                Log("storage").warning("database_read_only", ["path": path])
            }
        }
        s.walDamage = s.store?.walDamage
        state = Mutex(s)
    }

    private static func open(_ path: String, _ clock: @escaping @Sendable () -> ClockReading) throws(StoreError) -> Store {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { mkdir(String(path[..<slash]), 0o750) }
        let store = try Store(path: path, clock: clock)
        if let damage = store.walDamage {
            Log("storage").error("wal_damaged", ["path": path + "-wal", "damage": damage.description, "copy": damage.copy ?? "none (it could not be copied)"])
        }
        return store
    }

    /// A damaged WAL (docs/soundboxd.md, "A damaged write-ahead log"): what
    /// an open of this run found, and the copies kept by this or an earlier
    /// start. A storage fault until the technician has deleted the copies
    /// (or, when no copy could be made, until a restart).
    var damagedWAL: (found: WALDamage?, copies: [String])? {
        let found = state.withLock { $0.walDamage }
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
            if let store = writable(&s, now: now) {
                do throws(StoreError) {
                    switch try store.accept(p, now: now, flush: false) {
                    case .queued(let seq): return (.queued(durable: true, seq: seq), (store, store.lastCommit))
                    case .duplicate(let earlier): return (.duplicate(earlier: earlier.map { "seq \($0.seq) \($0.state.rawValue)" } ?? "pruned"), nil)
                    }
                } catch {
                    fail(&s, error, "accept")
                }
            }
            return (acceptInMemory(&s, p, now: now), nil)
        }
        guard case .queued(_, let seq) = result else { return result }
        committed(result)
        guard let (store, commit) = written else { return result }
        return flushed("accept", { () throws(StoreError) in try store.flush(upTo: commit) }) ? result : .queued(durable: false, seq: seq)
    }

    /// Runs a flush of the store without the lock: false (and a fault) if it failed.
    private func flushed(_ what: String, _ flush: () throws(StoreError) -> Void) -> Bool {
        do throws(StoreError) {
            try flush()
            return true
        } catch {
            state.withLock { fail(&$0, error, what) }
            return false
        }
    }

    private func acceptInMemory(_ s: inout State, _ p: Payment, now: Int64) -> Accepted {
        // Memory: a duplicate of anything held here, or of what the database can still read.
        if let held = s.entries.last(where: { $0.payment.id == p.id }) {
            holdReceipt(&s, Receipt(id: p.id, status: .duplicate, ts: now / 1000, durable: false))
            return .duplicate(earlier: "in memory, \(held.state.rawValue)")
        }
        if let earlier = try? s.store?.entry(id: p.id) {
            holdReceipt(&s, Receipt(id: p.id, status: .duplicate, ts: now / 1000, durable: false))
            return .duplicate(earlier: "seq \(earlier.seq) \(earlier.state.rawValue)")
        }
        let token = s.nextToken
        s.nextToken += 1
        s.entries.append(MemoryEntry(token: token, payment: p, acceptedAt: now, updatedAt: now, state: .queued, plays: 0, reason: nil))
        holdReceipt(&s, Receipt(id: p.id, status: .queued, ts: now / 1000, durable: false))
        trimFinished(&s)
        return .queued(durable: false, seq: nil)
    }

    /// The payment to speak next: the oldest stored one left `playing` by a
    /// crash, else the oldest stored `queued`, else the oldest held in
    /// memory (all newer than any stored one).
    func next() -> Item? {
        state.withLock { s in
            if let store = s.store {
                do throws(StoreError) {
                    let skip = s.unrecorded
                    let entry = skip.isEmpty ? try store.next()
                        : try store.pending().filter { skip[$0.seq] == nil }.min { a, b in
                            a.state == b.state || (a.state != .playing && b.state != .playing) ? a.seq < b.seq : a.state == .playing
                        }
                    if let e = entry { return Item(e) }
                } catch {
                    fail(&s, error, "next")
                }
            }
            guard let m = s.entries.first(where: { $0.state.isPending }) else { return nil }
            return Item(ref: .memory(m.token), payment: m.payment, acceptedAt: m.acceptedAt, plays: m.plays)
        }
    }

    /// Speaking starts: `playing`, plays + 1 (committed, not flushed).
    func markPlaying(_ item: Item, now: Int64) {
        state.withLock { s in
            switch resolve(&s, item.ref) {
            case .stored(let seq):
                // Not flushed: after a power cut an entry still `queued` is spoken again all the same.
                guard let store = writable(&s, now: now) else { return }
                do throws(StoreError) { try store.markPlaying(seq: seq, now: now, flush: false) } catch { fail(&s, error, "markPlaying") }
            case .memory(let token):
                guard let i = s.entries.firstIndex(where: { $0.token == token }) else { return }
                s.entries[i].state = .playing
                s.entries[i].plays += 1
                s.entries[i].updatedAt = now
            }
        }
    }

    /// The final state and its receipt, durable when this returns (the
    /// flush without the lock). If it cannot be stored it is
    /// remembered (so the payment is not spoken again in this run), its
    /// receipt is sent from memory, and it is written when storage returns.
    func finish(_ item: Item, _ final: PaymentState, reason: String?, now: Int64) {
        let written = state.withLock { s -> (Store, Int)? in
            switch resolve(&s, item.ref) {
            case .stored(let seq):
                if let store = writable(&s, now: now) {
                    do throws(StoreError) {
                        try store.finish(seq: seq, state: final, reason: reason, now: now, flush: false)
                        return (store, store.lastCommit)
                    } catch {
                        fail(&s, error, "finish")
                    }
                }
                s.unrecorded[seq] = (final, reason)
                holdReceipt(&s, Receipt(id: item.payment.id, status: Receipt.Status(rawValue: final.rawValue)!, ts: now / 1000,
                                        reason: reason, durable: false))
            case .memory(let token):
                guard let i = s.entries.firstIndex(where: { $0.token == token }) else { return nil }
                s.entries[i].state = final
                s.entries[i].reason = reason
                s.entries[i].updatedAt = now
                holdReceipt(&s, Receipt(id: item.payment.id, status: Receipt.Status(rawValue: final.rawValue)!, ts: now / 1000,
                                        reason: reason, durable: false))
                trimFinished(&s)
            }
            return nil
        }
        // Before the next payment starts: a power cut then repeats only that one.
        if let (store, commit) = written { _ = flushed("finish", { () throws(StoreError) in try store.flush(upTo: commit) }) }
    }

    /// A receipt that belongs to no state change (e.g. `rejected`).
    func recordReceipt(_ receipt: Receipt, now: Int64) {
        state.withLock { s in
            if let store = writable(&s, now: now) {
                // Not flushed: the next payment's flush carries it.
                do throws(StoreError) { try store.appendReceipt(receipt, now: now, flush: false); return } catch { fail(&s, error, "appendReceipt") }
            }
            var r = receipt
            r.durable = r.status == .rejected ? nil : false
            holdReceipt(&s, r)
        }
    }

    // MARK: - Offline summaries (docs/soundboxd.md)

    /// Stored payments still `queued`, oldest first: who may go into an
    /// offline summary (none while storage is failing: they are read one
    /// by one then).
    func queuedForSummary() -> [Entry] {
        state.withLock { s in
            guard s.fault == nil, !s.heldInMemory, let store = s.store else { return [] }
            return ((try? store.pending()) ?? []).filter { $0.state == .queued }
        }
    }

    /// A summary of `seqs` starts (committed, not flushed, as `playing`);
    /// its number, or nil if none of them is queued any more.
    func beginSummary(_ seqs: [Int64], now: Int64) -> Int64? {
        state.withLock { s in
            guard let store = writable(&s, now: now) else { return nil }
            do throws(StoreError) { return try store.beginSummary(seqs, now: now, flush: false) } catch {
                fail(&s, error, "beginSummary")
                return nil
            }
        }
    }

    /// Summary `group` is spoken again after a crash (committed, not flushed).
    func restartSummary(_ group: Int64, now: Int64) {
        state.withLock { s in
            guard let store = writable(&s, now: now) else { return }
            do throws(StoreError) { try store.restartSummary(group, now: now, flush: false) } catch { fail(&s, error, "restartSummary") }
        }
    }

    /// The payments of summary `group` still pending.
    func summaryMembers(_ group: Int64) -> [Item] {
        state.withLock { s in ((try? s.store?.summaryMembers(group)) ?? []).map(Item.init) }
    }

    /// The summary was spoken: all its payments `played` with their
    /// receipts, durable when this returns. Their ids (empty if it could
    /// not be written: then they are spoken again, one by one or in a
    /// summary, as after a crash).
    func finishSummary(_ group: Int64, now: Int64) -> [String] {
        let written = state.withLock { s -> ([String], Store, Int)? in
            guard let store = writable(&s, now: now) else { return nil }
            do throws(StoreError) { return (try store.finishSummary(group, now: now, flush: false), store, store.lastCommit) } catch {
                fail(&s, error, "finishSummary")
                return nil
            }
        }
        guard let (ids, store, commit) = written else { return [] }
        _ = flushed("finishSummary", { () throws(StoreError) in try store.flush(upTo: commit) })
        return ids
    }

    /// Pending payments, oldest first, with their state, for `queue`.
    func pending() -> [(item: Item, state: PaymentState)] {
        state.withLock { s in
            var out: [(Item, PaymentState)] = []
            if let stored = try? s.store?.pending() {
                for e in stored where s.unrecorded[e.seq] == nil {
                    out.append((Item(e), e.state))
                }
            }
            for m in s.entries where m.state.isPending {
                out.append((Item(ref: .memory(m.token), payment: m.payment, acceptedAt: m.acceptedAt, plays: m.plays), m.state))
            }
            return out
        }
    }

    var pendingCount: Int {
        state.withLock { s in
            let stored = (try? s.store?.pendingCount()) ?? 0
            return max(0, stored - s.unrecorded.count) + s.entries.filter { $0.state.isPending }.count
        }
    }

    /// Entries newest first (memory ones first: they are the newest).
    func history(limit: Int) throws(StoreError) -> [Entry] {
        let (store, held) = state.withLock { s in (s.store, s.entries.reversed().prefix(limit).map(Self.entry)) }
        guard held.count < limit, let store else { return Array(held) }
        return held + (try store.history(limit: limit - held.count))
    }

    /// The newest entry with this id, in memory or stored.
    func entry(id: String) throws(StoreError) -> Entry? {
        let (store, held) = state.withLock { s in (s.store, s.entries.last { $0.payment.id == id }.map(Self.entry)) }
        if let held { return held }
        return try store?.entry(id: id)
    }

    /// Count and sum of the payments accepted since `since` (ms).
    func summary(since: Int64) -> (count: Int, totalMinor: Int64) {
        let (store, held) = state.withLock { s in (s.store, s.entries.filter { $0.acceptedAt >= since }) }
        let stored = (try? store?.summary(since: since)) ?? (count: 0, totalMinor: 0)
        return (stored.count + held.count, stored.totalMinor + held.reduce(0) { $0 + $1.payment.amount.minorUnits })
    }

    private static func entry(_ m: MemoryEntry) -> Entry {
        Entry(seq: 0, payment: m.payment, state: m.state, acceptedAt: m.acceptedAt, updatedAt: m.updatedAt, plays: m.plays, reason: m.reason)
    }

    /// Prunes history (Store.prune); the database only.
    func prune(now: Int64, retention: Int64, keep: Int) throws(StoreError) -> Int {
        let result: Result<Int, StoreError> = state.withLock { s in
            guard let store = writable(&s, now: SystemClock.nowMs()) else { return .success(0) }
            do throws(StoreError) { return .success(try store.prune(now: now, retention: retention, keep: keep, flush: false)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    // MARK: - Receipts

    /// Receipts to publish, oldest first: those held in memory, then the
    /// outbox's, at most `limit`, skipping what `skip` says is in flight.
    /// Only durable outbox rows: a receipt committed without a flush of its
    /// own (`rejected`, `duplicate`) is flushed here first, without the
    /// lock, in one flush for all waiting (or the end of one under way).
    func receipts(limit: Int, skip: (ReceiptRef) -> Bool) -> [(ref: ReceiptRef, json: String)] {
        if let store = state.withLock({ $0.store }), store.receiptsWaitForFlush { _ = flushed("flush receipts", store.flushReceipts) }
        return state.withLock { s in
            var out: [(ReceiptRef, String)] = []
            for (token, r) in s.receipts where out.count < limit && !skip(.memory(token)) { out.append((.memory(token), r.json)) }
            guard out.count < limit, let store = s.store else { return out }
            do throws(StoreError) {
                // Enough rows to find `limit` new ones past those in flight or acknowledged.
                let durable = store.durableOutbox
                for item in try store.outbox(limit: limit + 64) where item.n <= durable && out.count < limit && !skip(.outbox(item.n)) {
                    out.append((.outbox(item.n), item.payload))
                }
            } catch {
                log.error("outbox_read_failed", ["error": error.description])
            }
            return out
        }
    }

    /// The broker took these receipts: delete them. Returns those deleted
    /// (an outbox row whose delete fails is tried again later).
    func forget(_ refs: [ReceiptRef], now: Int64) -> [ReceiptRef] {
        guard !refs.isEmpty else { return [] }
        return state.withLock { s in
            var done: [ReceiptRef] = []
            var rows: [Int64] = []
            for ref in refs {
                switch ref {
                case .memory(let token):
                    s.receipts.removeAll { $0.token == token }
                    done.append(ref)
                case .outbox(let n): rows.append(n)
                }
            }
            if !rows.isEmpty, let store = writable(&s, now: now) {
                do throws(StoreError) {
                    // Not flushed: a receipt whose deletion a power cut undoes is sent again (at least once).
                    try store.deleteOutbox(rows, flush: false)
                    done += rows.map { .outbox($0) }
                } catch {
                    fail(&s, error, "deleteOutbox")
                }
            }
            return done
        }
    }

    /// Receipts not yet taken by the broker.
    var receiptsPending: Int {
        state.withLock { s in ((try? s.store?.outboxCount()) ?? 0) + s.receipts.count }
    }

    /// A signed command's nonce: true the first time it is seen since
    /// `since` (ms), false for a replay. When the database cannot be
    /// written the nonce is remembered in memory until the restart.
    func useNonce(_ nonce: String, now: Int64, since: Int64) -> Bool {
        state.withLock { s in
            if let seen = s.nonces[nonce], seen >= since { return false }
            if let store = writable(&s, now: now) {
                do throws(StoreError) { return try store.useNonce(nonce, now: now) } catch {
                    fail(&s, error, "useNonce")
                }
            }
            if s.nonces.count >= Self.memoryCap { s.nonces = s.nonces.filter { $0.value >= since } }
            if s.nonces.count >= Self.memoryCap, let oldest = s.nonces.min(by: { $0.value < $1.value }) { s.nonces[oldest.key] = nil }
            s.nonces[nonce] = now
            return true
        }
    }

    // MARK: - Settings

    func overlay() -> [String: String] { state.withLock { s in (try? s.store?.overlay()) ?? [:] } }
    func meta(_ key: String) -> String? { state.withLock { s in (try? s.store?.meta(key)) ?? nil } }

    /// Persists overlay changes (and meta), all or none.
    func updateOverlay(_ changes: [String: String?], meta: [String: String] = [:]) throws(StoreError) {
        let result: Result<Void, StoreError> = state.withLock { s in
            guard let store = writable(&s, now: SystemClock.nowMs()) else {
                return .failure(StoreError(call: "updateOverlay", code: 10, message: s.fault?.message ?? "database unavailable"))
            }
            do throws(StoreError) { try store.updateOverlay(changes, meta: meta); return .success(()) } catch {
                fail(&s, error, "updateOverlay")
                return .failure(error)
            }
        }
        try result.get()
    }

    // MARK: - Health

    /// What is wrong now, or nil. Checks that the file is still the one
    /// open (restoring a deleted one).
    var fault: StorageFault? {
        state.withLock { s in
            if let store = s.store, store.fileProblem() != nil { _ = writable(&s, now: SystemClock.nowMs()) }
            return s.fault
        }
    }

    /// Every accepted payment and receipt is in the database.
    var durable: Bool { state.withLock { s in s.store != nil && s.fault == nil && !s.heldInMemory } }

    /// `PRAGMA quick_check` of the open database ("ok"), or nil without one.
    func quickCheck() -> String? { state.withLock { s in s.store?.quickCheck() } }

    /// While faulted: tries to reach the database again and write through
    /// what memory holds. Returns whether it still needs retrying.
    @discardableResult
    func retry() -> Bool {
        state.withLock { s in
            guard s.fault != nil || s.heldInMemory else { return false }
            _ = writable(&s, now: SystemClock.nowMs())
            return s.fault != nil || s.heldInMemory
        }
    }

    // MARK: - Inside (all with the lock held)

    /// The store, if it can be written now: open (reopened if it could not
    /// be), still the file at `path` (restored if deleted), and nothing left
    /// in memory (written through first).
    private func writable(_ s: inout State, now: Int64) -> Store? {
        if s.store?.isReadOnly == true {
            // Perhaps writable again (remounted, owner fixed): try now and then.
            guard SystemClock.monotonic() - s.lastReopen >= 5 else { return nil }
            s.lastReopen = SystemClock.monotonic()
            guard let store = try? Self.open(path, clock) else { return nil }
            s.store = store
            s.walDamage = store.walDamage ?? s.walDamage
            log.info("database_reopened", ["path": path])
        }
        if s.store == nil {
            guard s.fault?.kind != .corrupt, SystemClock.monotonic() - s.lastReopen >= 5 else { return nil }
            s.lastReopen = SystemClock.monotonic()
            do throws(StoreError) { s.store = try Self.open(path, clock) } catch { fail(&s, error, "open"); return nil }
            s.walDamage = s.store?.walDamage ?? s.walDamage
            log.info("database_reopened", ["path": path])
        }
        if let problem = s.store?.fileProblem() {
            guard restore(&s, problem) else { return nil }
        }
        if s.heldInMemory {
            guard writeThrough(&s, now: now) else { return nil }
        }
        if s.fault != nil {
            log.info("storage_recovered", ["path": path])
            s.fault = nil
        }
        if let store = s.store, store.diskFullRecoveries != s.diskFullsLogged {
            s.diskFullsLogged = store.diskFullRecoveries
            log.warning("disk_full_recovered", ["path": path, "times": "\(s.diskFullsLogged)", "reserve": store.holdsReserve ? "held" : "used"])
        }
        return s.store
    }

    /// Writes what memory holds to the store in one transaction.
    private func writeThrough(_ s: inout State, now: Int64) -> Bool {
        guard let store = s.store else { return false }
        do throws(StoreError) {
            let entries = s.entries.map {
                Store.Adopted(payment: $0.payment, state: $0.state, acceptedAt: $0.acceptedAt, updatedAt: $0.updatedAt, plays: $0.plays, reason: $0.reason)
            }
            let seqs = try store.adopt(entries, receipts: s.receipts.map(\.receipt), now: now)
            for (m, seq) in zip(s.entries, seqs) { s.adopted[m.token] = seq }
            let written = (s.entries.count, s.receipts.count)
            s.entries = []
            s.receipts = []
            for (seq, final) in s.unrecorded.sorted(by: { $0.key < $1.key }) {
                do throws(StoreError) { try store.finish(seq: seq, state: final.state, reason: final.reason, now: now) } catch {
                    // SQLITE_NOTFOUND: no longer pending, nothing to record; anything else: try again later.
                    guard error.code & 0xFF == 12 else { fail(&s, error, "finish"); return false }
                }
                s.unrecorded[seq] = nil
            }
            if written.0 + written.1 > 0 {
                log.info("written_through", ["payments": "\(written.0)", "receipts": "\(written.1)"])
            }
            return true
        } catch {
            fail(&s, error, "writeThrough")
            return false
        }
    }

    /// The open file is no longer at `path`. Deleted: copy the open
    /// database back to `path` (nothing is lost) and reopen. Replaced by
    /// another file: someone's choice, left alone; a fault until restart.
    private func restore(_ s: inout State, _ problem: String) -> Bool {
        guard let store = s.store else { return false }
        guard access(path, F_OK) != 0 else {
            if s.fault?.kind != .replaced { log.error("database_replaced", ["path": path, "error": problem]) }
            s.fault = StorageFault(kind: .replaced, message: problem)
            return false
        }
        log.error("database_deleted", ["path": path])
        let temporary = path + ".restore"
        unlink(temporary)
        do throws(StoreError) {
            if let slash = path.lastIndex(of: "/"), slash != path.startIndex { mkdir(String(path[..<slash]), 0o750) }
            try store.copy(to: temporary)
            try Self.sync(temporary)
            // Close the old connection first: closing deletes its -wal/-shm by
            // name (at once, even if a flush or a reader still holds the store).
            store.close()
            s.store = nil
            guard rename(temporary, path) == 0 else { throw StoreError(call: "rename(\(temporary), \(path))", code: 10, message: String(cString: strerror(errno))) }
            if let slash = path.lastIndex(of: "/") { try? Self.sync(slash == path.startIndex ? "/" : String(path[..<slash])) }
            s.store = try Self.open(path, clock)
            log.info("database_restored", ["path": path])
            return true
        } catch {
            unlink(temporary)
            s.fault = StorageFault(kind: .replaced, message: "\(problem); restoring it failed: \(error.description)")
            return false
        }
    }

    private static func sync(_ path: String) throws(StoreError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError(call: "open(\(path))", code: 10, message: String(cString: strerror(errno))) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw StoreError(call: "fsync(\(path))", code: 10, message: String(cString: strerror(errno))) }
    }

    private func resolve(_ s: inout State, _ ref: Ref) -> Ref {
        if case .memory(let token) = ref, let seq = s.adopted[token] { return .stored(seq) }
        return ref
    }

    private func fail(_ s: inout State, _ error: StoreError, _ what: String) {
        let fault = StorageFault(error)
        if s.fault != fault { log.error("storage_failed", ["during": what, "error": error.description]) }
        s.fault = fault
    }

    private func holdReceipt(_ s: inout State, _ r: Receipt) {
        let token = s.nextToken
        s.nextToken += 1
        s.receipts.append((token, r))
        if s.receipts.count > Self.memoryCap {
            s.receipts.removeFirst(s.receipts.count - Self.memoryCap)
            log.warning("receipts_dropped", ["kept": "\(Self.memoryCap)"])
        }
    }

    private func trimFinished(_ s: inout State) {
        let finished = s.entries.filter { !$0.state.isPending }.count
        guard finished > Self.memoryCap, let i = s.entries.firstIndex(where: { !$0.state.isPending }) else { return }
        s.entries.remove(at: i)
    }
}
