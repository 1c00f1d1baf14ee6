/// The fleet as its retained statuses show it: one record per device, and
/// every status that was not believed counted by kind (docs/fleet.md "A
/// device cannot lie about another"). Fed by the caller's MQTT client in
/// arrival order; pure, bounded whatever arrives.
import Soundbox

public struct Inventory: Sendable {
    public struct Anomaly: Sendable, Equatable {
        public var count = 0
        /// The first few topics' device ids (or topics) and why, for the operator.
        public var examples: [String] = []
    }

    public let prefix: String
    /// At most this many devices are kept; statuses of more are counted as `capacity`.
    public let capacity: Int
    /// A device publishing more statuses than this during one inventory is a `flood`.
    public let floodLimit: Int
    public private(set) var devices: [String: DeviceRecord] = [:]
    public private(set) var anomalies: [String: Anomaly] = [:]
    /// Status messages per device in this inventory.
    private var messages: [String: Int] = [:]

    public init(prefix: String, capacity: Int = 200_000, floodLimit: Int = 50) {
        self.prefix = prefix; self.capacity = capacity; self.floodLimit = floodLimit
    }

    /// Takes one message from `prefix/+/status`. An empty payload (a
    /// retained status deleted) forgets the device.
    public mutating func ingest(topic: String, payload: [UInt8]) {
        guard let id = DeviceRecord.device(inStatusTopic: topic, prefix: prefix) else {
            note(.badTopic, TextFile.excerpt(topic, limit: 120)); return
        }
        let seen = messages[id, default: 0] + 1
        if messages.count < capacity || messages[id] != nil { messages[id] = seen }
        if seen == floodLimit + 1 { note("flood", "\(id): more than \(floodLimit) statuses") }
        if payload.isEmpty { devices[id] = nil; return }
        switch DeviceRecord.parse(id: id, payload: payload) {
        case .failure(let problem):
            note(problem, id)
        case .success(var record):
            guard devices.count < capacity || devices[id] != nil else { note("capacity", "\(id): more than \(capacity) devices"); return }
            if let old = devices[id], !Self.supersedes(record, old) { return }
            record.lastSeen = devices[id]?.lastSeen
            devices[id] = record
        }
    }

    /// Whether `new` says more recent things than `old`: a later connection
    /// (`since`), or the end of the same one (its will or clean stop). On one
    /// broker statuses come in order and always do; across a cluster's nodes
    /// (each keeping its own retained copy) an older connection's status
    /// from another node does not undo a newer one. Without `since` (an
    /// older device), the latest message read wins.
    public static func supersedes(_ new: DeviceRecord, _ old: DeviceRecord) -> Bool {
        guard let a = old.since, let b = new.since else { return true }
        if b != a { return b > a }
        return !(old.online == false && new.online == true)
    }

    /// Sets when each device was last seen online (the tool's own memory).
    public mutating func remember(lastSeen: [String: Int64]) {
        for (id, t) in lastSeen where devices[id] != nil { devices[id]!.lastSeen = t }
    }

    /// The devices a selector picks, by id.
    public func select(_ selector: Selector, now: Int64) -> [DeviceRecord] {
        devices.values.filter { selector.matches($0, now: now) }.sorted { $0.id < $1.id }
    }

    private mutating func note(_ problem: StatusProblem, _ who: String) {
        note(problem.kind, "\(who): \(problem)")
    }

    private mutating func note(_ kind: String, _ example: String) {
        var a = anomalies[kind, default: Anomaly()]
        a.count += 1
        if a.examples.count < 5 { a.examples.append(TextFile.excerpt(example, limit: 200)) }
        anomalies[kind] = a
    }
}
