/// `soundbox-fleet rollout`: a system update over a fleet in stages (the
/// canary, then batches), each waited for, halted when failures pass the
/// threshold (docs/fleet.md "Rollout"). Pure: the stages, what a device's
/// receipts and statuses say about it, and the threshold; the tool keeps
/// the state in its SQLite file and does the talking.
import Soundbox

public struct RolloutPlan: Sendable, Equatable {
    public enum Batch: Sendable, Equatable {
        case percent(Int)
        case count(Int)
    }
    /// Devices in the first stage.
    public var canary: Int
    /// The size of each later stage: a share of all the rollout's devices, or a number.
    public var batch: Batch
    /// Failures allowed, in percent of the devices tried so far (0-100).
    public var maxFailures: Int

    public init(canary: Int = 1, batch: Batch = .percent(10), maxFailures: Int = 5) {
        self.canary = canary; self.batch = batch; self.maxFailures = maxFailures
    }

    /// `--batch 10%` or `--batch 200`.
    public static func batch(_ text: String) throws(SelectorError) -> Batch {
        if text.hasSuffix("%") {
            guard let n = Int(text.dropLast()), (1...100).contains(n) else {
                throw SelectorError("--batch '\(TextFile.excerpt(text))': a share 1%-100% or a number of devices")
            }
            return .percent(n)
        }
        guard let n = Int(text), (1...1_000_000).contains(n) else {
            throw SelectorError("--batch '\(TextFile.excerpt(text))': a share 1%-100% or a number of devices")
        }
        return .count(n)
    }

    /// `--max-failures 5%` (the % may be left out): 0-100.
    public static func percent(_ text: String, option: String) throws(SelectorError) -> Int {
        guard let n = Int(text.hasSuffix("%") ? String(text.dropLast()) : text), (0...100).contains(n) else {
            throw SelectorError("\(option) '\(TextFile.excerpt(text))': a share 0%-100%")
        }
        return n
    }

    /// The stages, in order: the first `canary` ids, then batches of the rest.
    public func stages(_ ids: [String]) -> [[String]] {
        guard !ids.isEmpty else { return [] }
        let size: Int
        switch batch {
        case .percent(let p): size = max(1, (ids.count * p + 99) / 100)
        case .count(let n): size = n
        }
        var out: [[String]] = []
        let first = min(max(canary, 0), ids.count)
        if first > 0 { out.append(Array(ids[..<first])) }
        var i = first
        while i < ids.count {
            out.append(Array(ids[i..<min(i + size, ids.count)]))
            i += size
        }
        return out
    }

    /// True when `failures` among `tried` devices pass the threshold.
    public func exceeded(failures: Int, tried: Int) -> Bool {
        failures > 0 && failures * 100 > maxFailures * max(tried, 1)
    }
}

/// A rollout as the state file keeps it (FleetState): its request, plan,
/// phase and the stage under way.
public struct RolloutRecord: Sendable, Equatable {
    public enum Phase: String, Sendable { case running, halted, done }
    public var id: String
    public var url: String
    public var sha256: String
    public var version: String
    public var size: Int64?
    public var prefix: String
    public var plan: RolloutPlan
    /// Seconds a device has for a final answer once sent the command.
    public var timeout: Int
    public var phase: Phase = .running
    public var reason: String?
    /// The stage under way (0: the canary, when there is one).
    public var stage = 0
    public var created: Int64

    public init(id: String, url: String, sha256: String, version: String, size: Int64?, prefix: String,
                plan: RolloutPlan, timeout: Int, created: Int64) {
        self.id = id; self.url = url; self.sha256 = sha256; self.version = version; self.size = size
        self.prefix = prefix; self.plan = plan; self.timeout = timeout; self.created = created
    }
}

public struct RolloutDevice: Sendable, Equatable {
    public var id: String
    public var stage: Int
    public var state: RolloutState
    public var progress: Int?
    public var reason: String?
    /// Unix seconds when the command was acknowledged by the broker.
    public var sentAt: Int64?

    public init(id: String, stage: Int, state: RolloutState = .pending) {
        self.id = id; self.stage = stage; self.state = state
    }
}

/// Where one device of a rollout stands.
public enum RolloutState: String, Sendable, CaseIterable {
    /// Not sent yet (its stage has not come).
    case pending
    /// The command was acknowledged by the broker; no answer yet.
    case sent
    case downloading, installing
    case waiting = "waiting to reboot"
    case trying
    case committed
    /// Refused or failed before anything was installed (the device's reason).
    case failed
    case rolledBack = "rolled back"
    /// No final answer within the rollout's timeout.
    case timedOut = "timed out"
    /// Offline when its stage came: not sent, not counted as a failure.
    case offline
    /// Already ran the version (or a newer one) when the rollout began.
    case already

    /// The device needs nothing more from this rollout.
    public var isFinal: Bool { [.committed, .failed, .rolledBack, .timedOut, .offline, .already].contains(self) }
    /// Counts against the threshold.
    public var isFailure: Bool { [.failed, .rolledBack, .timedOut].contains(self) }
    /// Was sent the command.
    public var wasTried: Bool { ![.pending, .offline, .already].contains(self) }
}

/// What an answer says about a device in the rollout `id` for `version`.
public struct RolloutEvidence: Sendable, Equatable {
    public var state: RolloutState
    public var progress: Int?
    public var reason: String?

    public init(state: RolloutState, progress: Int? = nil, reason: String? = nil) {
        self.state = state; self.progress = progress; self.reason = reason
    }

    /// An `update` receipt (docs/mqtt.md) naming the rollout's request id;
    /// anything else (a payment's receipt, another request's) is nil.
    public static func receipt(_ payload: [UInt8], id: String) -> RolloutEvidence? {
        guard payload.count <= 16 << 10, let v = try? JSONValue.parse(payload, maxDepth: 4),
              case .string("update")? = v["kind"], case .string(id)? = v["id"], case .string(let status)? = v["status"] else { return nil }
        var progress: Int?
        if case .number(let n)? = v["progress"], let p = Int(n), (0...100).contains(p) { progress = p }
        var reason: String?
        if case .string(let r)? = v["reason"] { reason = TextFile.excerpt(r, limit: 300) }
        return evidence(status, progress: progress, reason: reason)
    }

    /// A status: its `update` when it names the request, else the running
    /// version (a device already on `version` or newer has it).
    public static func status(_ d: DeviceRecord, id: String, version: String) -> RolloutEvidence? {
        if d.updateID == id, let state = d.updateState, let e = evidence(state, progress: d.updateProgress, reason: d.updateReason), e.state != .sent {
            return e
        }
        if let running = d.version, DebianVersion.isValid(running), DebianVersion.compare(running, version) >= 0 {
            return RolloutEvidence(state: .committed)
        }
        return nil
    }

    private static func evidence(_ status: String, progress: Int?, reason: String?) -> RolloutEvidence? {
        let state: RolloutState
        switch status {
        case "downloading": state = .downloading
        case "installing": state = .installing
        case "waiting to reboot": state = .waiting
        case "trying": state = .trying
        case "committed": state = .committed
        case "rolled back": state = .rolledBack
        case "failed": state = .failed
        case "idle": state = .sent
        default: return nil
        }
        return RolloutEvidence(state: state, progress: progress, reason: reason)
    }
}
