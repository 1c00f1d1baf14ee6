// `config set KEY=VALUE… SELECTOR` and `cmd replay|test|summary SELECTOR`:
// one signed message per device, then each device's answer (docs/fleet.md).
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxCrypto
import SoundboxFleet
import SoundboxSystem
import FleetLink

/// The backend's Ed25519 private key (--key, or SOUNDBOX_FLEET_KEY).
func signingKey(_ args: Arguments) throws(Failure) -> Ed25519PrivateKey {
    guard let path = args.setting("--key") else {
        throw usageError("signing needs --key PRIVATE (the backend's Ed25519 private key, PEM; docs/signing.md)")
    }
    let text = try readSmallFile(path, limit: Ed25519PublicKey.maxFileBytes)
    do { return try Ed25519PrivateKey(pem: text) } catch { throw failure("\(path): \(error)", code: "key") }
}

/// Whole seconds from an option, within 1...max.
func seconds(_ args: Arguments, _ name: String, default value: Int, max: Int = 86_400) throws(Failure) -> Double {
    guard let t = args.options[name] else { return Double(value) }
    guard let n = Int(t), (1...max).contains(n) else { throw usageError("\(name) must be whole seconds 1-\(max), not '\(TextFile.excerpt(t))'") }
    return Double(n)
}

/// A line on standard error that rewrites itself, only on a terminal.
struct Progress {
    let on = isatty(2) == 1
    var last = 0.0
    mutating func show(_ text: String, force: Bool = false) {
        guard on else { return }
        let now = MonotonicClock.seconds()
        guard force || now - last >= 0.5 else { return }
        last = now
        let line = Array("\r\u{1b}[K\(text)".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
    func end() { if on { _ = write(2, "\r\u{1b}[K", 4) } }
}

func configCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    guard args.positional.first == "set" else { throw usageError("usage: config set KEY=VALUE... [SELECTOR] --key PRIVATE [--wait S]") }
    try args.allowOnly(selectorOptions.union(["--online", "--offline", "--wait"]), for: "config set")
    let words = Array(args.positional.dropFirst())
    let settings: ConfigPush
    do { settings = try ConfigPush(words.filter { $0.contains("=") }) } catch { throw usageError(error.description) }
    var names = args
    names.positional = words.filter { !$0.contains("=") }
    try push(names, out, kind: .config, document: settings.document, wait: try seconds(args, "--wait", default: 60))
}

/// The commands an operator sends a fleet (the update command is the rollout's).
let fleetCommands = ["replay", "test", "summary"]

func cmdCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    guard let name = args.positional.first, fleetCommands.contains(name) else {
        throw usageError("usage: cmd \(fleetCommands.joined(separator: "|")) [SELECTOR] --key PRIVATE [--wait S]")
    }
    try args.allowOnly(selectorOptions.union(["--online", "--offline", "--wait"]), for: "cmd")
    var names = args
    names.positional.removeFirst()
    try push(names, out, kind: .cmd, document: .object([("cmd", .string(name))]), wait: try seconds(args, "--wait", default: 10))
}

/// Signs `document` for each selected device (a cmd with its own nonce),
/// publishes it (a config retained, a cmd not: a retained cmd is ignored),
/// and tallies the answers until `wait` seconds have passed or every
/// online device answered.
func push(_ args: Arguments, _ out: Output, kind: PushTally.Kind, document: JSONValue, wait: Double) throws(Failure) {
    let select = try selector(args)
    let key = try signingKey(args)
    let p = try prefix(args)
    let link = try connect(args)
    defer { link.close() }
    let (inv, complete) = try inventory(args, link, prefix: p, exact: select.named)
    if !complete { printError("note: the inventory may be incomplete (the tool's marker did not come back)") }
    let targets = inv.select(select, now: Int64(time(nil)))
    guard !targets.isEmpty else { throw failure("no device matches (\(inv.devices.count) known)", code: "no_device") }
    var tally = PushTally(prefix: p, kind: kind, targets: targets)
    var progress = Progress()
    do {
        // The answers' topics before anything is sent, without the stored (older) answers.
        let answers = kind == .config ? [p + "/+/config/applied", p + "/+/receipt"] : [p + "/+/receipt"]
        try link.subscribe(answers, qos: 0, retained: false, timeout: try timeout(args))
        var mids: [Int32] = []
        let now = Int64(time(nil))
        for (n, d) in targets.enumerated() {
            switch Signature.sign(document, kind: kind == .config ? .config : .cmd, device: d.id, kid: key.publicKey.id, now: now,
                                  nonce: Crypto.nonce, sign: key.sign) {
            case .failure(let problem): throw failure(problem.detail ?? problem.description, code: "sign")
            case .success(let signed):
                mids.append(try link.publish(p + "/" + d.id + "/" + kind.rawValue, signed.message.text, qos: 1, retain: kind == .config))
            }
            progress.show("sending \(n + 1) of \(targets.count)")
        }
        let unsent = link.waitAcknowledged(mids, timeout: wait)
        if unsent > 0 { throw failure("the broker acknowledged \(mids.count - unsent) of \(mids.count) messages within \(Int(wait)) s", code: "broker") }
        let deadline = MonotonicClock.seconds() + wait
        // A config: until every online device answered. A command: the whole wait (only a refusal answers).
        while kind == .cmd || tally.waiting > 0 {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0, let m = link.next(timeout: left) else { break }
            tally.take(topic: m.topic, payload: m.payload, retained: m.retained)
            progress.show("answered \(targets.count - tally.waiting) of \(targets.count)")
        }
        progress.end()
    } catch {
        if let f = error as? Failure { throw f }
        throw failure("\(error)", code: "broker")
    }
    tally.finish()
    report(tally, out)
    if !tally.ids("refused").isEmpty || !tally.ids("no_answer").isEmpty {
        throw Failure(message: "", code: "not_all_applied", status: 1)
    }
}

/// The tally: counts and ids (the device's reason for each refusal).
func report(_ tally: PushTally, _ out: Output) {
    let refused = tally.outcomes.compactMap { id, o -> (String, String)? in
        if case .refused(let why) = o { return (id, why) } else { return nil }
    }.sorted { $0.0 < $1.0 }
    struct Summary: Encodable {
        var applied: [String]; var refused: [String: String]; var offline: [String]; var no_answer: [String]
        var counts: [String: Int]
    }
    let kinds = ["applied", "refused", "offline", "no_answer"]
    let summary = Summary(applied: tally.ids("applied"), refused: Dictionary(uniqueKeysWithValues: refused),
                          offline: tally.ids("offline"), no_answer: tally.ids("no_answer"),
                          counts: Dictionary(uniqueKeysWithValues: kinds.map { ($0, tally.ids($0).count) }))
    func few(_ ids: [String]) -> String {
        ids.isEmpty ? "" : "  " + ids.prefix(20).joined(separator: " ") + (ids.count > 20 ? " … and \(ids.count - 20) more" : "")
    }
    let done = tally.kind == .config ? "applied:  " : "accepted: "
    var lines = ["\(done) \(summary.applied.count)\(few(summary.applied))",
                 "refused:   \(refused.count)"]
    lines += refused.prefix(20).map { "  \($0.0): \($0.1)" }
    if refused.count > 20 { lines.append("  … and \(refused.count - 20) more (--json lists them all)") }
    lines += ["offline:   \(summary.offline.count)\(few(summary.offline))\(summary.offline.isEmpty ? "" : tally.kind == .config ? " (applies when it comes back: the config is retained)" : " (the broker keeps it in the device's session until it comes back)")",
              "no answer: \(summary.no_answer.count)\(few(summary.no_answer))"]
    out.emit(summary, text: lines.joined(separator: "\n"))
}
