import MQTTBridge
import Soundbox
import Synchronization

/// Sends receipts from storage to the broker at QoS 1 (DESIGN §1, step 5),
/// oldest first, through a `ReceiptWindow`: at most `capacity` in flight,
/// deleted only once the broker acknowledged them, in flight again after a
/// reconnect.
///
/// The window's lock is held across each publish call, and the PUBACK
/// handler takes it too: an acknowledgement therefore always finds its
/// message id recorded. (In threaded mode mosquitto_publish only queues the
/// packet, and libmosquitto calls on_publish holding nothing but its
/// callback mutex, which mosquitto_publish does not take: no deadlock.)
final class ReceiptSender: Sendable {
    static let capacity = 20
    private let window = Mutex(ReceiptWindow(capacity: ReceiptSender.capacity))
    private let storage: Storage

    init(storage: Storage) { self.storage = storage }

    func connected() { window.withLock { $0.connected() } }
    func disconnected() { window.withLock { $0.disconnected() } }

    /// A PUBACK (network thread): true if it was a receipt's.
    func acknowledged(mid: Int32) -> Bool { window.withLock { $0.acknowledge(mid: mid) } != nil }

    /// Deletes what the broker has taken, then publishes what waits, as far
    /// as the window allows (uplink thread).
    func pump(_ client: MQTTClient, topic: String) {
        let taken = window.withLock { $0.acknowledged }
        let deleted = storage.forget(taken, now: SystemClock.nowMs())
        if !deleted.isEmpty { window.withLock { $0.forget(deleted) } }
        while true {
            let snapshot = window.withLock { $0 }
            guard snapshot.room > 0 else { return }
            let waiting = storage.receipts(limit: snapshot.room, excluding: snapshot.busy)
            guard !waiting.isEmpty else { return }
            for (ref, json) in waiting {
                let sent = window.withLock { w -> Bool in
                    guard w.needsSending(ref), w.room > 0 else { return true }   // the link changed meanwhile
                    guard let mid = try? client.publish(topic, json) else { return false }
                    w.published(ref, mid: mid)
                    return true
                }
                if !sent { return }
            }
        }
    }
}
