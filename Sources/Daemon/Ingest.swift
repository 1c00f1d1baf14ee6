import Soundbox
import SoundboxStore

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

/// The one entry point for payments: MQTT, `soundboxctl say` and tests.
/// validate → dedup → insert → queued / duplicate / rejected. Durable
/// when it returns `.queued(durable: true)`; the scheduler may start
/// speaking it as soon as it is committed, while the flush runs (a power
/// cut before the flush ends loses it unacknowledged: the broker sends it
/// again, and it is the one spoken at the cut).
final class Ingest: Sendable {
    private let storage: Storage
    private let settings: Settings
    private let voices: Voices
    /// Wakes the scheduler: a payment is waiting.
    private let scheduler: Wakeup
    /// Told of each receipt: the uplink sends it.
    private let changes: Changes
    private let log = Log("ingest")

    init(storage: Storage, settings: Settings, voices: Voices, scheduler: Wakeup, changes: Changes) {
        self.storage = storage; self.settings = settings; self.voices = voices; self.scheduler = scheduler; self.changes = changes
    }

    /// A payment already validated where it came in (`Inbox` through
    /// `PaymentMessage`, `soundboxctl say` through `Commands.say`): its id
    /// and its amount within payment.max_amount are not checked again here.
    func accept(_ payment: Payment) -> IngestResult {
        defer { changes.post(.receipt) }
        let config = settings.current
        // Read in a currency a pack knows (else chimed), never with another currency's word.
        let reader = voices.catalog.reader(lang: payment.lang, currency: payment.currency, defaultPack: config[.voiceLang])
        if let missing = reader.missing { voices.noteMissing(missing) }
        let now = SystemClock.nowMs()
        let accepted = storage.accept(payment, now: now) { queued in
            if case .queued(durable: true, let seq) = queued {
                log.info("queued", ["id": payment.id, "seq": "\(seq ?? 0)"])
            } else {
                log.warning("queued_in_memory", ["id": payment.id])
            }
            log.debug("amount", ["id": payment.id, "amount": payment.amount.description])
            scheduler.paymentQueued()
        }
        switch accepted {
        case .queued(let durable, _):
            // Durable now (or held in memory); the PUBACK leaves when this returns.
            if durable { Failpoint.hit("after_commit") }
            return .queued(durable: durable)
        case .duplicate(let earlier):
            log.info("duplicate", ["id": payment.id, "earlier": earlier])
            return .duplicate
        }
    }

    /// A payment that could not be read (or is not acceptable): a
    /// `rejected` receipt with the reason, and a log line.
    @discardableResult
    func reject(_ id: String?, _ reason: String, kind: Signature.Kind = .payment) -> IngestResult {
        defer { changes.post(.receipt) }
        log.warning("rejected", ["id": id ?? "-", "reason": reason, "kind": kind.rawValue])
        let now = SystemClock.nowMs()
        storage.recordReceipt(.rejected(id: id, reason: reason, kind: kind == .payment ? nil : kind.rawValue, at: now), now: now)
        return .rejected(reason: reason)
    }
}
