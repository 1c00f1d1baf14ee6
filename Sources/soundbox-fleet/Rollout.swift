// `rollout URL --version V --sha256 H [SELECTOR]`, `rollout status|halt|resume`:
// a system update in stages, driven from the tool's state file (docs/fleet.md "Rollout").
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxCrypto
import SoundboxFleet
import SoundboxSystem
import FleetLink
import FleetState

let rolloutOptions: Set<String> = ["--version", "--sha256", "--size", "--canary", "--batch", "--max-failures", "--wait", "--id"]

func rolloutCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    switch args.positional.first {
    case "status":
        try args.allowOnly([], for: "rollout status")
        let (state, record) = try storedRollout(args)
        report(record, try load(state, record), out)
    case "halt":
        try args.allowOnly([], for: "rollout halt")
        let (state, record) = try storedRollout(args)
        guard try stored({ try state.halt(record.id, reason: "halted by the operator") }) else {
            throw failure("rollout \(record.id) is \(record.phase.rawValue), not running", code: "not_running")
        }
        printError("rollout \(record.id) halted: no further device is sent the update (those already sent it carry on)")
    case "resume":
        try args.allowOnly([], for: "rollout resume")
        let (state, record) = try storedRollout(args)
        guard record.phase == .running else {
            throw failure("rollout \(record.id) is \(record.phase.rawValue)\(record.reason.map { ": " + $0 } ?? ""); start a new rollout to go on", code: "not_running")
        }
        try drive(args, out, state, record, key: try signingKey(args))
    case let url? where url.contains("://"):
        try startRollout(args, out, url: url)
    default:
        throw usageError("usage: rollout URL --version V --sha256 HEX [SELECTOR] --key PRIVATE [--canary N] [--batch N%|N] [--max-failures N%] [--wait S]; rollout status|halt|resume [ID]")
    }
}

/// The state file (--state, else the default), opened.
func fleetState(_ args: Arguments) throws(Failure) -> FleetState {
    let path = args.setting("--state") ?? FleetState.defaultPath()
    do { return try FleetState(path: path) } catch { throw failure("the state file \(path): \(error)", code: "state") }
}

func stored<T>(_ body: () throws -> T) throws(Failure) -> T {
    do { return try body() } catch { throw failure("the state file: \(error)", code: "state") }
}

/// `rollout status|halt|resume [ID]`: the rollout named, or the newest.
func storedRollout(_ args: Arguments) throws(Failure) -> (FleetState, RolloutRecord) {
    guard args.positional.count <= 2 else { throw usageError("usage: rollout \(args.positional[0]) [ID]") }
    let state = try fleetState(args)
    let id = args.positional.count == 2 ? args.positional[1] : nil
    guard let record = try stored({ try state.rollout(id) }) else {
        throw failure(id.map { "no rollout '\(TextFile.excerpt($0))' in \(state.path)" } ?? "no rollout in \(state.path)", code: "no_rollout")
    }
    return (state, record)
}

func load(_ state: FleetState, _ record: RolloutRecord) throws(Failure) -> [RolloutDevice] {
    try stored { try state.devices(of: record.id) }
}

func startRollout(_ args: Arguments, _ out: Output, url: String) throws(Failure) {
    try args.allowOnly(selectorOptions.union(["--online", "--offline"]).union(rolloutOptions), for: "rollout")
    guard let version = args.options["--version"] else { throw usageError("rollout needs --version V (the bundle's version)") }
    guard let sha256 = args.options["--sha256"] else { throw usageError("rollout needs --sha256 HEX (sha256sum of the bundle)") }
    var size: Int64?
    if let s = args.options["--size"] {
        guard let n = Int64(s), n > 0, n <= UpdateRequest.maxSize else { throw usageError("--size must be the bundle's bytes, 1-\(UpdateRequest.maxSize)") }
        size = n
    }
    let id = args.options["--id"] ?? "R" + timestamp(time(nil))
    let request = UpdateRequest(source: .url(url), sha256: sha256, version: version, id: id, size: size)
    if let problem = request.problem { throw usageError(problem) }
    var plan = RolloutPlan()
    do throws(SelectorError) {
        if let c = args.options["--canary"] {
            guard let n = Int(c), (0...100_000).contains(n) else { throw SelectorError("--canary '\(TextFile.excerpt(c))': a number of devices 0-100000") }
            plan.canary = n
        }
        if let b = args.options["--batch"] { plan.batch = try RolloutPlan.batch(b) }
        if let m = args.options["--max-failures"] { plan.maxFailures = try RolloutPlan.percent(m, option: "--max-failures") }
    } catch { throw usageError(error.description) }
    let wait = Int(try seconds(args, "--wait", default: 1800))
    // --version is the bundle's here, not a selector.
    var names = args
    names.options["--version"] = nil
    names.positional.removeFirst()
    let select = try selector(names)
    let key = try signingKey(args)
    let p = try prefix(args)
    let state = try fleetState(args)
    if try stored({ try state.rollout(id) }) != nil {
        throw usageError("a rollout '\(id)' exists already in \(state.path) (rollout status \(id))")
    }
    let link = try connect(args)
    let (inv, complete) = try inventory(args, link, prefix: p, exact: select.named)
    link.close()
    if !complete { printError("note: the inventory may be incomplete (the tool's marker did not come back)") }
    let targets = inv.select(select, now: Int64(time(nil)))
    guard !targets.isEmpty else { throw failure("no device matches (\(inv.devices.count) known)", code: "no_device") }
    var devices: [RolloutDevice] = []
    var todo: [String] = []
    for d in targets {
        if case .committed? = RolloutEvidence.status(d, id: id, version: version)?.state {
            devices.append(RolloutDevice(id: d.id, stage: -1, state: .already))
        } else {
            todo.append(d.id)
        }
    }
    for (n, stage) in plan.stages(todo).enumerated() { devices += stage.map { RolloutDevice(id: $0, stage: n) } }
    let record = RolloutRecord(id: id, url: url, sha256: sha256, version: version, size: size, prefix: p,
                               plan: plan, timeout: wait, created: Int64(time(nil)))
    try stored { try state.begin(record, devices: devices) }
    printError("rollout \(id): \(version) to \(todo.count) devices in \(plan.stages(todo).count) stages (\(devices.count - todo.count) run it already); rollout status \(id) from another terminal")
    try drive(args, out, state, record, key: key)
}

/// Sends each stage its command and waits for its devices' final answers,
/// keeping every change in the state file; halts when failures pass the
/// threshold or the operator says so (`rollout halt`).
func drive(_ args: Arguments, _ out: Output, _ state: FleetState, _ start: RolloutRecord, key: Ed25519PrivateKey) throws(Failure) {
    guard let lock = state.driverLock() else {
        throw failure("another soundbox-fleet drives the rollouts of \(state.path) (rollout halt stops it)", code: "busy")
    }
    defer { close(lock) }
    var record = start
    var devices: [String: RolloutDevice] = [:]
    for d in try load(state, record) { devices[d.id] = d }
    let stages = (devices.values.map(\.stage).max() ?? -1) + 1
    let p = record.prefix
    var names = args
    names.options["--prefix"] = p
    let link = try connect(names)
    defer { link.close() }
    var (inv, _) = try inventory(names, link, prefix: p, exact: devices.keys.sorted())
    var dirty: Set<String> = []
    var progress = Progress()

    /// What a receipt or a status says, for a device that was sent the command.
    func take(_ id: String, _ evidence: RolloutEvidence?) {
        guard let e = evidence, var d = devices[id], d.state.wasTried, d.state == .timedOut || !d.state.isFinal, e.state != .sent else { return }
        guard d.state != e.state || d.progress != e.progress else { return }
        d.state = e.state
        d.progress = e.progress
        if e.reason != nil { d.reason = e.reason }
        devices[id] = d
        dirty.insert(id)
    }
    func save() throws(Failure) {
        guard !dirty.isEmpty else { return }
        let changed = dirty.compactMap { devices[$0] }
        try stored { try state.save(record.id, changed) }
        dirty.removeAll()
    }
    func tally() -> (tried: Int, failures: Int) {
        let tried = devices.values.filter { $0.state.wasTried }
        return (tried.count, tried.filter { $0.state.isFailure }.count)
    }

    // What the retained statuses say about devices sent the command before a restart.
    for d in inv.devices.values where devices[d.id] != nil { take(d.id, RolloutEvidence.status(d, id: record.id, version: record.version)) }
    do {
        try link.subscribe([p + "/+/receipt"], qos: 1, retained: false, timeout: try timeout(args))
    } catch { throw failure("\(error)", code: "broker") }

    stageLoop: while record.stage < stages {
        let members = devices.values.filter { $0.stage == record.stage }.map(\.id).sorted()
        // Send the stage's pending devices their command (a device now on the version needs none).
        var mids: [Int32] = []
        var sent: [String] = []
        let now = Int64(time(nil))
        for id in members where devices[id]?.state == .pending {
            let status = inv.devices[id]
            if let s = status, case .committed? = RolloutEvidence.status(s, id: record.id, version: record.version)?.state {
                devices[id]?.state = .already
            } else if status?.online != true {
                devices[id]?.state = .offline
            } else {
                var document: [(String, JSONValue)] = [("cmd", .string("update")), ("id", .string(record.id)), ("url", .string(record.url)),
                                                       ("sha256", .string(record.sha256)), ("version", .string(record.version))]
                if let size = record.size { document.append(("size", .number(String(size)))) }
                switch Signature.sign(.object(document), kind: .cmd, device: id, kid: key.publicKey.id, now: now, nonce: Crypto.nonce, sign: key.sign) {
                case .failure(let problem): throw failure(problem.description, code: "sign")
                case .success(let signed):
                    do { mids.append(try link.publish(p + "/" + id + "/cmd", signed.message.text, qos: 1)) } catch { throw failure("\(error)", code: "broker") }
                    sent.append(id)
                }
            }
            dirty.insert(id)
            progress.show("stage \(record.stage + 1) of \(stages): sending \(dirty.count) of \(members.count)")
        }
        let unsent = link.waitAcknowledged(mids, timeout: try timeout(args) * 3)
        if unsent > 0 { throw failure("the broker acknowledged \(mids.count - unsent) of \(mids.count) commands", code: "broker") }
        for id in sent { devices[id]?.state = .sent; devices[id]?.sentAt = now }
        try save()

        // Wait for every device of the stage (or the threshold, or the operator).
        var lastCheck = 0.0
        while true {
            if let m = link.next(timeout: 0.5) {
                if m.topic.hasSuffix("/receipt"), let id = device(m.topic, p, "/receipt") {
                    take(id, RolloutEvidence.receipt(m.payload, id: record.id))
                } else if m.topic.hasSuffix("/status") {
                    inv.ingest(topic: m.topic, payload: m.payload)
                    if let id = device(m.topic, p, "/status"), let d = inv.devices[id] {
                        take(id, RolloutEvidence.status(d, id: record.id, version: record.version))
                    }
                }
            }
            let clock = MonotonicClock.seconds()
            guard clock - lastCheck >= 0.5 else { continue }
            lastCheck = clock
            let wall = Int64(time(nil))
            for id in members {
                guard let d = devices[id], d.state.wasTried, !d.state.isFinal, let at = d.sentAt, wall - at >= Int64(record.timeout) else { continue }
                devices[id]!.state = .timedOut
                devices[id]!.reason = "no final answer within \(record.timeout) s (last: \(d.state.rawValue))"
                dirty.insert(id)
            }
            try save()
            let open = members.filter { devices[$0].map { !$0.state.isFinal } ?? false }.count
            let (tried, failures) = tally()
            progress.show("stage \(record.stage + 1) of \(stages): \(members.count - open) of \(members.count) done; \(failures) failed of \(tried) tried")
            if let now = try stored({ try state.rollout(record.id) }), now.phase != .running {
                record.phase = now.phase
                record.reason = now.reason
                break stageLoop
            }
            // Halt as soon as the threshold is passed: the stage's devices are
            // all counted as tried already and failures only grow, so it
            // could not end under it.
            if record.plan.exceeded(failures: failures, tried: tried) {
                record.phase = .halted
                record.reason = "\(failures) of \(tried) devices failed: more than \(record.plan.maxFailures)%"
                try stored { try state.set(record.id, phase: .halted, reason: record.reason, stage: record.stage) }
                break stageLoop
            }
            if open == 0 { break }
        }
        record.stage += 1
        try stored { try state.set(record.id, phase: record.phase, reason: record.reason, stage: record.stage) }
    }
    try save()
    if record.phase == .running && record.stage >= stages {
        record.phase = .done
        try stored { try state.set(record.id, phase: .done, reason: nil, stage: record.stage) }
    }
    progress.end()
    let final = try load(state, record)
    report(record, final, out)
    if record.phase != .done { throw Failure(message: "", code: "halted", status: 1) }
}

/// The device id in `prefix/<id><suffix>`.
func device(_ topic: String, _ prefix: String, _ suffix: String) -> String? {
    guard topic.hasPrefix(prefix + "/"), topic.hasSuffix(suffix) else { return nil }
    let id = String(topic.dropFirst(prefix.count + 1).dropLast(suffix.count))
    return DeviceRecord.isValidID(id) ? id : nil
}

/// "20261205-113005" (UTC).
func timestamp(_ t: time_t) -> String {
    var tm = Glibc.tm()
    var clock = t
    gmtime_r(&clock, &tm)
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(tm.tm_year + 1900)\(two(tm.tm_mon + 1))\(two(tm.tm_mday))-\(two(tm.tm_hour))\(two(tm.tm_min))\(two(tm.tm_sec))"
}

/// Where a rollout stands: its phase, stage, and the devices by state.
func report(_ record: RolloutRecord, _ devices: [RolloutDevice], _ out: Output) {
    let stages = (devices.map(\.stage).max() ?? -1) + 1
    var counts: [String: Int] = [:]
    for d in devices { counts[d.state.rawValue, default: 0] += 1 }
    struct Device: Encodable { var id: String; var stage: Int; var state: String; var progress: Int?; var reason: String? }
    struct Summary: Encodable {
        var id, version, url, sha256, phase: String; var reason: String?; var stage, stages: Int
        var counts: [String: Int]; var devices: [Device]
    }
    let summary = Summary(id: record.id, version: record.version, url: record.url, sha256: record.sha256, phase: record.phase.rawValue,
                          reason: record.reason, stage: min(record.stage, stages), stages: stages, counts: counts,
                          devices: devices.map { Device(id: $0.id, stage: $0.stage, state: $0.state.rawValue, progress: $0.progress, reason: $0.reason) })
    var lines = ["rollout \(record.id): \(record.version), \(record.phase.rawValue)\(record.reason.map { " (" + $0 + ")" } ?? ""); stage \(min(record.stage + 1, stages)) of \(stages)"]
    for state in RolloutState.allCases {
        let these = devices.filter { $0.state == state }
        guard !these.isEmpty else { continue }
        lines.append("\(state.rawValue):" + String(repeating: " ", count: max(1, 19 - state.rawValue.count)) + "\(these.count)")
        if state.isFailure || state == .offline {
            for d in these.prefix(20) { lines.append("  \(d.id)\(d.reason.map { ": " + $0 } ?? "")") }
            if these.count > 20 { lines.append("  … and \(these.count - 20) more (--json lists them all)") }
        }
    }
    out.emit(summary, text: lines.joined(separator: "\n"))
}
