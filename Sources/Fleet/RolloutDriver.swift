/// A rollout's decisions without I/O (docs/fleet.md "Rollout"): which
/// devices of the stage under way are sent the update command, what each
/// receipt and status says about a device, when a device has timed out,
/// when the failures pass the threshold, when the operator has halted it,
/// and when a stage is over and the next begins. Events in (the start, the
/// broker's acknowledgements, messages, a tick every half second), actions
/// out (send, save, record, progress, finished); `soundbox-fleet rollout`
/// does the talking: it signs and publishes, keeps what it is told to in
/// its state file, and reads the operator's `rollout halt` from there.
import Soundbox

public struct RolloutDriver: Sendable {
    public enum Event: Sendable, Equatable {
        /// The rollout starts or resumes at `wall` (Unix seconds): the stage
        /// under way begins.
        case begin(wall: Int64)
        /// The broker acknowledged the commands of the last `.send` at `wall`
        /// (Unix seconds, taken before they were published).
        case acknowledged(wall: Int64)
        /// A message on `prefix/+/receipt` or `prefix/+/status`.
        case message(topic: String, payload: [UInt8])
        /// Every half second: `wall` (Unix seconds) for the timeouts, and the
        /// phase and reason the state file holds now (the operator may have
        /// halted the rollout from another terminal).
        case tick(wall: Int64, stored: RolloutRecord.Phase, reason: String?)
    }

    public enum Action: Sendable, Equatable {
        /// Sign and publish the update command to each of these devices, wait
        /// for the broker's acknowledgements, then say `.acknowledged`.
        case send([String])
        /// Keep these devices' states in the state file.
        case save([RolloutDevice])
        /// Keep the rollout's phase, reason and stage in the state file.
        case record(RolloutRecord.Phase, reason: String?, stage: Int)
        /// A line for the operator's terminal.
        case progress(String)
        /// Nothing more to do: `record.phase` says how it ended.
        case finished
    }

    public private(set) var record: RolloutRecord
    public private(set) var devices: [String: RolloutDevice]
    /// What the devices' statuses say (retained ones at the start, live ones since).
    public private(set) var inventory: Inventory
    public let stages: Int
    private var dirty: Set<String> = []
    /// Sent the command, not acknowledged yet.
    private var sending: [String] = []
    private var done = false

    /// The rollout as the state file has it, and the inventory read at the
    /// start: a device sent the command before a restart is updated from
    /// its retained status.
    public init(record: RolloutRecord, devices: [RolloutDevice], inventory: Inventory) {
        self.record = record
        self.inventory = inventory
        var byID: [String: RolloutDevice] = [:]
        for d in devices { byID[d.id] = d }
        self.devices = byID
        stages = (devices.map(\.stage).max() ?? -1) + 1
        for d in inventory.devices.values where byID[d.id] != nil {
            take(d.id, RolloutEvidence.status(d, id: record.id, version: record.version))
        }
    }

    public mutating func handle(_ event: Event) -> [Action] {
        guard !done else { return [] }
        switch event {
        case .begin(let wall):
            return beginStage(wall: wall)
        case .acknowledged(let wall):
            for id in sending { devices[id]?.state = .sent; devices[id]?.sentAt = wall }
            sending = []
            return save()
        case .message(let topic, let payload):
            if let id = Self.device(topic, record.prefix, "/receipt") {
                take(id, RolloutEvidence.receipt(payload, id: record.id))
            } else if topic.hasSuffix("/status") {
                inventory.ingest(topic: topic, payload: payload)
                if let id = Self.device(topic, record.prefix, "/status"), let d = inventory.devices[id] {
                    take(id, RolloutEvidence.status(d, id: record.id, version: record.version))
                }
            }
            return []
        case .tick(let wall, let stored, let reason):
            return tick(wall: wall, stored: stored, reason: reason)
        }
    }

    /// Devices tried so far (sent the command) and how many of them failed.
    public var tally: (tried: Int, failures: Int) {
        let tried = devices.values.filter { $0.state.wasTried }
        return (tried.count, tried.filter { $0.state.isFailure }.count)
    }

    private var members: [String] { devices.values.filter { $0.stage == record.stage }.map(\.id).sorted() }

    /// The stage's pending devices: one now on the version needs nothing,
    /// one offline is not sent it (and not counted), the rest are sent it.
    private mutating func beginStage(wall: Int64) -> [Action] {
        guard record.stage < stages else { return finish(.done, reason: nil) }
        let members = members
        var send: [String] = []
        for id in members where devices[id]?.state == .pending {
            let status = inventory.devices[id]
            if let s = status, case .committed? = RolloutEvidence.status(s, id: record.id, version: record.version)?.state {
                devices[id]?.state = .already
            } else if status?.online != true {
                devices[id]?.state = .offline
            } else {
                send.append(id)
            }
            dirty.insert(id)
        }
        let progress = Action.progress("stage \(record.stage + 1) of \(stages): sending \(send.count) of \(members.count)")
        guard send.isEmpty else { sending = send; return [progress, .send(send)] }
        return [progress] + save()
    }

    private mutating func tick(wall: Int64, stored: RolloutRecord.Phase, reason: String?) -> [Action] {
        let members = members
        for id in members {
            guard let d = devices[id], d.state.wasTried, !d.state.isFinal, let at = d.sentAt, wall - at >= Int64(record.timeout) else { continue }
            devices[id]!.state = .timedOut
            devices[id]!.reason = "no final answer within \(record.timeout) s (last: \(d.state.rawValue))"
            dirty.insert(id)
        }
        var actions = save()
        let open = members.filter { devices[$0].map { !$0.state.isFinal } ?? false }.count
        let (tried, failures) = tally
        actions.append(.progress("stage \(record.stage + 1) of \(stages): \(members.count - open) of \(members.count) done; \(failures) failed of \(tried) tried"))
        if stored != .running {
            // The operator's word, already in the state file.
            record.phase = stored
            record.reason = reason
            done = true
            return actions + [.finished]
        }
        // Halt as soon as the threshold is passed: the stage's devices are
        // all counted as tried already and failures only grow, so it could
        // not end under it.
        if record.plan.exceeded(failures: failures, tried: tried) {
            return actions + finish(.halted, reason: "\(failures) of \(tried) devices failed: more than \(record.plan.maxFailures)%")
        }
        guard open == 0 else { return actions }
        record.stage += 1
        guard record.stage < stages else { return actions + finish(.done, reason: nil) }
        return actions + [.record(.running, reason: nil, stage: record.stage)] + beginStage(wall: wall)
    }

    private mutating func finish(_ phase: RolloutRecord.Phase, reason: String?) -> [Action] {
        record.phase = phase
        record.reason = reason
        done = true
        return save() + [.record(phase, reason: reason, stage: record.stage), .finished]
    }

    /// What a receipt or a status says, for a device that was sent the command.
    private mutating func take(_ id: String, _ evidence: RolloutEvidence?) {
        guard let e = evidence, var d = devices[id], d.state.wasTried, d.state == .timedOut || !d.state.isFinal, e.state != .sent else { return }
        guard d.state != e.state || d.progress != e.progress else { return }
        d.state = e.state
        d.progress = e.progress
        if e.reason != nil { d.reason = e.reason }
        devices[id] = d
        dirty.insert(id)
    }

    private mutating func save() -> [Action] {
        guard !dirty.isEmpty else { return [] }
        let changed = dirty.sorted().compactMap { devices[$0] }
        dirty.removeAll()
        return [.save(changed)]
    }

    /// The device id in `prefix/<id><suffix>`.
    static func device(_ topic: String, _ prefix: String, _ suffix: String) -> String? {
        guard topic.hasPrefix(prefix + "/"), topic.hasSuffix(suffix) else { return nil }
        let id = String(topic.dropFirst(prefix.count + 1).dropLast(suffix.count))
        return DeviceRecord.isValidID(id) ? id : nil
    }
}
