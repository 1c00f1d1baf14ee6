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

/// Runs the rollout's `RolloutDriver` against the broker and the state
/// file: signs and publishes the commands it asks for, feeds it receipts,
/// statuses and a tick every half second, keeps what it says to keep; ends
/// when it is done or halted (by the threshold or `rollout halt`).
func drive(_ args: Arguments, _ out: Output, _ state: FleetState, _ start: RolloutRecord, key: Ed25519PrivateKey) throws(Failure) {
    guard let lock = state.driverLock() else {
        throw failure("another soundbox-fleet drives the rollouts of \(state.path) (rollout halt stops it)", code: "busy")
    }
    defer { close(lock) }
    let p = start.prefix
    var names = args
    names.options["--prefix"] = p
    let link = try connect(names)
    defer { link.close() }
    let loaded = try load(state, start)
    let (inv, _) = try inventory(names, link, prefix: p, exact: loaded.map(\.id).sorted())
    var driver = RolloutDriver(record: start, devices: loaded, inventory: inv)
    do {
        try link.subscribe([p + "/+/receipt"], qos: 1, retained: false, timeout: try timeout(args))
    } catch { throw failure("\(error)", code: "broker") }
    var progress = Progress()

    /// Carries out the driver's actions (and those its acknowledgements bring).
    func perform(_ actions: [RolloutDriver.Action]) throws(Failure) {
        for action in actions {
            switch action {
            case .send(let ids):
                let now = Int64(time(nil))
                var mids: [Int32] = []
                for id in ids {
                    var document: [(String, JSONValue)] = [("cmd", .string("update")), ("id", .string(start.id)), ("url", .string(start.url)),
                                                           ("sha256", .string(start.sha256)), ("version", .string(start.version))]
                    if let size = start.size { document.append(("size", .number(String(size)))) }
                    switch Signature.sign(.object(document), kind: .cmd, device: id, kid: key.publicKey.id, now: now, nonce: Crypto.nonce, sign: key.sign) {
                    case .failure(let problem): throw failure(problem.description, code: "sign")
                    case .success(let signed):
                        do { mids.append(try link.publish(p + "/" + id + "/cmd", signed.message.text, qos: 1)) } catch { throw failure("\(error)", code: "broker") }
                    }
                }
                let unsent = link.waitAcknowledged(mids, timeout: try timeout(args) * 3)
                if unsent > 0 { throw failure("the broker acknowledged \(mids.count - unsent) of \(mids.count) commands", code: "broker") }
                try perform(driver.handle(.acknowledged(wall: now)))
            case .save(let devices):
                try stored { try state.save(start.id, devices) }
            case .record(let phase, let reason, let stage):
                try stored { try state.set(start.id, phase: phase, reason: reason, stage: stage) }
            case .progress(let line):
                progress.show(line)
            case .finished:
                break
            }
        }
    }

    try perform(driver.handle(.begin(wall: Int64(time(nil)))))
    var lastCheck = 0.0
    while driver.record.phase == .running {
        if let m = link.next(timeout: 0.5) { try perform(driver.handle(.message(topic: m.topic, payload: m.payload))) }
        let clock = MonotonicClock.seconds()
        guard clock - lastCheck >= 0.5 else { continue }
        lastCheck = clock
        let now = try stored { try state.rollout(start.id) }
        try perform(driver.handle(.tick(wall: Int64(time(nil)), stored: now?.phase ?? .running, reason: now?.reason)))
    }
    progress.end()
    report(driver.record, try load(state, driver.record), out)
    if driver.record.phase != .done { throw Failure(message: "", code: "halted", status: 1) }
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
func report(_ record: RolloutRecord, _ stored: [RolloutDevice], _ out: Output) {
    // The devices' reasons as shown (escaped: docs/fleet.md "What devices say, as shown").
    let devices = stored.map(\.shown)
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
