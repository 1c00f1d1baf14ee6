/// A receipt waiting for the broker: a row of the durable outbox, or one
/// held in memory while storage fails.
public enum ReceiptRef: Hashable, Sendable {
    case outbox(Int64)
    case memory(Int64)
}

/// The receipts in flight to the broker (DESIGN §1, step 5), as a plain
/// state machine: the uplink performs what it says, and it is unit-tested
/// over scripted sequences without a broker.
///
/// A receipt goes `published(mid)` → `acknowledged` (PUBACK) → forgotten
/// (deleted from the outbox). At most `capacity` are in flight. When the
/// link drops, what was in flight on it is sent again on the next one
/// (at-least-once: the backend keys on id and status); what was already
/// acknowledged is not, even if deleting it has not happened yet.
///
/// The caller records `published` under the same lock that its PUBACK
/// handler takes, held across the publish call, so an acknowledgement can
/// never arrive for a mid the window does not know yet. A PUBACK for any
/// other mid (status, config/applied, a message of an earlier connection)
/// is not a receipt's and changes nothing.
public struct ReceiptWindow: Sendable {
    public let capacity: Int
    public private(set) var isConnected = false
    private var inFlight: [Int32: ReceiptRef] = [:]
    private var inFlightRefs: Set<ReceiptRef> = []
    /// Acknowledged, not yet forgotten, in acknowledgement order.
    public private(set) var acknowledged: [ReceiptRef] = []
    private var acknowledgedSet: Set<ReceiptRef> = []

    public init(capacity: Int) { self.capacity = capacity }

    /// The link is up (CONNACK): nothing is in flight on it yet.
    public mutating func connected() {
        isConnected = true
        clearInFlight()
    }

    /// The link is down: what was in flight will be sent again.
    public mutating func disconnected() {
        isConnected = false
        clearInFlight()
    }

    /// How many receipts may be published now.
    public var room: Int { isConnected ? max(0, capacity - inFlight.count) : 0 }

    /// Receipts in flight on this connection.
    public var inFlightCount: Int { inFlight.count }

    /// Whether `ref` is to be published now: connected, and neither in
    /// flight on this connection nor acknowledged.
    public func needsSending(_ ref: ReceiptRef) -> Bool {
        isConnected && !inFlightRefs.contains(ref) && !acknowledgedSet.contains(ref)
    }

    /// The receipts not to publish now: in flight on this connection or
    /// acknowledged (everything else waiting is `needsSending` while connected).
    public var busy: Set<ReceiptRef> { inFlightRefs.union(acknowledgedSet) }

    /// `ref` was handed to the client as message `mid`. A mid still held by
    /// an older message (16-bit ids wrap) replaces it: that one is sent again.
    public mutating func published(_ ref: ReceiptRef, mid: Int32) {
        if let old = inFlight[mid] { inFlightRefs.remove(old) }
        inFlight[mid] = ref
        inFlightRefs.insert(ref)
    }

    /// The broker acknowledged `mid`. Returns the receipt it took, or nil if
    /// `mid` is not a receipt in flight.
    @discardableResult
    public mutating func acknowledge(mid: Int32) -> ReceiptRef? {
        guard let ref = inFlight.removeValue(forKey: mid) else { return nil }
        inFlightRefs.remove(ref)
        if acknowledgedSet.insert(ref).inserted { acknowledged.append(ref) }
        return ref
    }

    /// The caller deleted these acknowledged receipts: forget them.
    public mutating func forget(_ refs: [ReceiptRef]) {
        let gone = Set(refs)
        acknowledgedSet.subtract(gone)
        acknowledged.removeAll { gone.contains($0) }
    }

    private mutating func clearInFlight() {
        inFlight = [:]
        inFlightRefs = []
    }
}
