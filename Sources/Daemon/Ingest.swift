import Soundbox
import SoundboxStore
import Synchronization

/// What ingest answered for one payment.
public enum IngestResult: Sendable, Equatable {
    /// Accepted. `durable` is false when storage failed and the payment is
    /// held in memory only (it is still announced).
    case queued(durable: Bool)
    case duplicate
    case rejected(reason: String)

    public var status: Receipt.Status {
        switch self {
        case .queued: .queued
        case .duplicate: .duplicate
        case .rejected: .rejected
        }
    }
}

/// A payment held in memory because storage failed.
struct MemoryEntry: Sendable {
    var payment: Payment
    var acceptedAt: Int64
}

/// Shared state between ingest (MQTT thread, control threads) and the
/// scheduler: what storage could not hold.
final class Backlog: Sendable {
    struct State {
        var payments: [MemoryEntry] = []
        /// Receipts that could not be written to the outbox.
        var receipts: [Receipt] = []
        /// Seqs spoken (or decided) whose final state could not be stored.
        var unrecorded: [Int64: PaymentState] = [:]
        /// Last storage failure, for status and doctor.
        var storageFault: String?
    }
    let state = Mutex(State())
}

/// The one entry point for payments: MQTT, `soundboxctl say` and tests.
/// validate → dedup → durable insert → queued / duplicate / rejected.
/// Durable when it returns `.queued(durable: true)`.
public final class Ingest: Sendable {
    let store: Store?
    let backlog: Backlog
    let settings: Settings
    let wake: Wakeup
    /// Wakes the uplink: a receipt is waiting to be sent.
    let outbox: Wakeup
    private let log = Log("ingest")

    init(store: Store?, backlog: Backlog, settings: Settings, wake: Wakeup, outbox: Wakeup) {
        self.store = store; self.backlog = backlog; self.settings = settings; self.wake = wake; self.outbox = outbox
    }

    public func accept(_ payment: Payment) -> IngestResult {
        defer { outbox.notify() }
        let config = settings.current
        if let problem = Payment.problem(withID: payment.id) { return reject(payment.id, problem) }
        if payment.amount > config.amount(.paymentMaxAmount) {
            return reject(payment.id, AmountError.aboveLimit(config.amount(.paymentMaxAmount)).description)
        }
        let now = SystemClock.nowMs()
        let dedupSince = now - Int64(config.integer(.queueRetentionDays)) * 86_400_000
        // While anything waits in memory, new payments join it there, so
        // that speaking order stays acceptance order.
        let memoryFirst = backlog.state.withLock { !$0.payments.isEmpty }
        if let store, !memoryFirst {
            do {
                switch try store.accept(payment, now: now, dedupSince: dedupSince) {
                case .queued(let seq):
                    Failpoint.hit("after_commit")
                    log.info("queued", ["id": payment.id, "seq": "\(seq)"])
                    log.debug("amount", ["id": payment.id, "amount": payment.amount.description])
                    wake.notify()
                    return .queued(durable: true)
                case .duplicate(let earlier):
                    log.info("duplicate", ["id": payment.id, "seq": earlier.map { "\($0.seq)" } ?? "pruned",
                                           "state": earlier?.state.rawValue ?? "pruned"])
                    return .duplicate
                }
            } catch {
                log.error("storage_failed", ["id": payment.id, "error": error.description])
                backlog.state.withLock { $0.storageFault = error.description }
            }
        }
        return acceptInMemory(payment, now: now, dedupSince: dedupSince)
    }

    /// Storage failed (disk full, I/O error, corrupt database): announce
    /// from memory, tell the backend it is not durable.
    private func acceptInMemory(_ payment: Payment, now: Int64, dedupSince: Int64) -> IngestResult {
        let stored = try? store?.entry(id: payment.id)
        if let stored, stored.acceptedAt >= dedupSince { return .duplicate }
        let duplicate = backlog.state.withLock { s -> Bool in
            if s.payments.contains(where: { $0.payment.id == payment.id }) { return true }
            s.payments.append(MemoryEntry(payment: payment, acceptedAt: now))
            s.receipts.append(Receipt(id: payment.id, status: .queued, ts: now / 1000, durable: false))
            return false
        }
        if duplicate { return .duplicate }
        log.warning("queued_in_memory", ["id": payment.id])
        wake.notify()
        return .queued(durable: false)
    }

    /// A payment that could not be read (or is not acceptable): a
    /// `rejected` receipt with the reason, and a log line.
    @discardableResult
    func reject(_ id: String?, _ reason: String) -> IngestResult {
        defer { outbox.notify() }
        log.warning("rejected", ["id": id ?? "-", "reason": reason])
        let receipt = Receipt(id: id.flatMap { Payment.problem(withID: $0) == nil ? $0 : nil }, status: .rejected,
                              ts: SystemClock.nowMs() / 1000, reason: reason)
        recordReceipt(receipt)
        return .rejected(reason: reason)
    }

    /// Appends a receipt to the outbox, or keeps it in memory if storage fails.
    func recordReceipt(_ receipt: Receipt) {
        do {
            guard let store else { throw StoreUnavailable() }
            try store.appendReceipt(receipt, now: SystemClock.nowMs())
        } catch {
            backlog.state.withLock { $0.receipts.append(receipt) }
        }
    }
}

struct StoreUnavailable: Error {}
