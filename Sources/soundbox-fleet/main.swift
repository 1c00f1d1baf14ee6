// soundbox-fleet: the operator's tool for a fleet of boxes (docs/fleet.md).
// Thin wiring: statuses and selectors are SoundboxFleet's, the broker
// connection FleetLink's.
import Glibc
import MQTTBridge
import Soundbox
import SoundboxCLI
import SoundboxFleet
import FleetLink
import FleetState

let usage = """
    Usage: soundbox-fleet [--json] [CONNECTION] COMMAND [ARGS]

    Commands:
      devices [SELECTOR] [--csv]
                      the inventory, from the devices' retained statuses: id,
                      online, version, slot, update, volume, muted, voice,
                      queue depth, faults, uptime; statuses not believed (one
                      naming another device, oversized, malformed, a flood) are
                      counted and named on standard error (in --json: "anomalies")
      config set KEY=VALUE... [SELECTOR] --key PRIVATE [--wait S]
                      one signed, retained config per device (only the keys the
                      backend may set, each value checked first: refused here
                      with the device's reason), then each device's answer:
                      applied, refused (with its reason), offline (it applies
                      when it comes back), no answer within S seconds (60);
                      exit 1 unless every online device applied it
      cmd replay|test|summary [SELECTOR] --key PRIVATE [--wait S]
                      one signed command per device (its own nonce; not
                      retained): accepted unless the device refuses it within
                      S seconds (10; a refusal is a rejected receipt with its
                      reason); offline devices get it from their session when
                      they come back; exit 1 if any refused
      rollout URL --version V --sha256 HEX [--size N] [SELECTOR] --key PRIVATE
              [--canary N] [--batch N%|N] [--max-failures N%] [--wait S] [--id ID]
                      a system update in stages: the signed update command to
                      the canary's N devices (1) first, then to batches of N% (10%)
                      of the devices; each stage waited for until every device
                      committed, rolled back, failed or had no final answer in
                      S seconds (1800: counted as failed); halts by itself when
                      more than N% (5%) of the devices tried failed. Devices on
                      V or newer are left out, offline ones skipped. Kept in
                      the state file: exit 0 when done, 1 when halted
      rollout status [ID] | rollout halt [ID] | rollout resume [ID] --key PRIVATE
                      where the newest rollout (or ID) stands; stop it sending
                      (devices sent it carry on); go on after the tool was
                      stopped or killed, from the state file
      pay DEVICE AMOUNT [--id ID] [--currency C] [--channel C] [--lang L] [--wait S] [--resend S]
                      the reference backend client: one payment (signed with
                      --key, if given), re-sent with the same id every S
                      seconds (10) until the device answers, then followed
                      until its final receipt (played, duplicate, muted,
                      expired, rejected, failed) or --wait (120 s); each
                      receipt printed as it comes; exit 0 for played,
                      duplicate or muted
      receipts [--group G] [--count N] [--idle S]
                      the backend's receipt consumer: every device's receipts
                      as JSON lines {"device", "receipt"}, each written before
                      the broker is told it was received; through the shared
                      subscription $share/G/PREFIX/+/receipt (G: soundbox-fleet),
                      so consumers of one group never read a receipt twice;
                      with --client-id, a persistent session keeps receipts
                      while the consumer is away; until N receipts, or S
                      seconds without one, or for ever

    SELECTOR: device ids, globs (shop-12*), @FILE (one id per line, # comments);
    any of them matches (none: every device); and all of these attributes:
      --fault F       has fault F (storage, audio, voice, takeover, provisioning; any)
      --version EXPR  its version compares: '<0.3.0', '>=0.2.1', '0.3.0', '!=0.3.0'
      --online | --offline
      --voice L       its default voice pack (voice.lang)
      --slot A|B      the root slot it runs
      --offline-for D offline, and not seen online by this tool for D (90s, 15m, 1h,
                      2d; a device it never saw online counts from its first sighting)
      --update-state S
                      idle, downloading, installing, waiting to reboot, trying,
                      committed, rolled back, failed

    CONNECTION (also from the environment: SOUNDBOX_FLEET_HOST, _PORT, ...):
      --host H[,H2...] the broker (default 127.0.0.1), or a cluster's nodes
                      (host[:port], up to 8): connected in turn; the inventory
                      reads every node's retained statuses (docs/fleet.md)
      --port N        its port (default 1883, with --ca 8883)
      --ca FILE       TLS: the CA that signed the broker's certificate
      --cert FILE, --tls-key FILE
                      TLS: the operator's client certificate and its key
      --username U, --password-file FILE
      --client-id ID  the operator's own MQTT client id (default soundbox-fleet-<host>-<pid>)
      --prefix P      the topics' prefix (default soundbox/v1)
      --timeout S     how long to wait for the broker (default 10)
      --state FILE    the tool's memory of the devices it saw (SQLite; default
                      $SOUNDBOX_FLEET_STATE, else ~/.local/state/soundbox-fleet/fleet.db)
      --key PRIVATE   the backend's Ed25519 private key (PEM) that signs configs,
                      commands and payments (docs/signing.md); also SOUNDBOX_FLEET_KEY

    Options:
      --json          machine-readable output on stdout
      -h, --help      this help;  --version (alone)  the version

    What devices say (versions, voices, reasons, receipts) is shown with every
    control or invisible character escaped: \\u{202E}, \\n (docs/fleet.md).

    Exit status: 0 success, 1 failure (explained), 2 usage error.
    """

let connectionOptions: Set<String> = ["--host", "--port", "--ca", "--cert", "--tls-key", "--username", "--password-file",
                                      "--client-id", "--prefix", "--timeout", "--key", "--state"]
let commandOptions: Set<String> = ["--wait", "--resend", "--id", "--currency", "--channel", "--lang", "--group", "--count", "--idle",
                                   "--sha256", "--size", "--canary", "--batch", "--max-failures"]
let selectorOptions: Set<String> = ["--fault", "--version", "--voice", "--slot", "--update-state", "--offline-for"]

extension Arguments {
    init(fleet args: [String]) throws(Failure) {
        try self.init(args, valued: connectionOptions.union(selectorOptions).union(commandOptions),
                      boolean: ["--json", "-h", "--help", "--csv", "--online", "--offline"],
                      global: connectionOptions.union(["--json", "--help"]))
    }

    /// An option, else its SOUNDBOX_FLEET_* variable (`--tls-key`: SOUNDBOX_FLEET_TLS_KEY).
    func setting(_ name: String) -> String? {
        if let v = options[name] { return v }
        let variable = "SOUNDBOX_FLEET_" + String(name.dropFirst(2).uppercased().map { $0 == "-" ? "_" : $0 })
        return getenv(variable).map { String(cString: $0) }
    }
}

/// Reads a small file (a password, a list of ids), naming it in the error.
func readSmallFile(_ path: String, limit: Int = 16 << 20) throws(Failure) -> [UInt8] {
    do { return try TextFile.read(path, limit: limit) } catch { throw failure("\(error)", code: "file") }
}

func prefix(_ args: Arguments) throws(Failure) -> String {
    let p = args.setting("--prefix") ?? "soundbox/v1"
    guard !p.isEmpty, p.utf8.count <= 128, !p.contains("+"), !p.contains("#"), !p.hasSuffix("/") else {
        throw usageError("--prefix '\(TextFile.excerpt(p))': MQTT topic levels, without '+', '#' or a trailing '/'")
    }
    return p
}

func timeout(_ args: Arguments) throws(Failure) -> Double {
    guard let t = args.setting("--timeout") else { return 10 }
    guard let n = Int(t), (1...3600).contains(n) else { throw usageError("--timeout must be whole seconds 1-3600, not '\(TextFile.excerpt(t))'") }
    return Double(n)
}

/// Connects to the broker as the operator.
/// `persistent`: a session the broker keeps for a week while the tool is
/// away (needs a fixed --client-id); `handler`: messages handed over before
/// their PUBACK (FleetLink).
func connect(_ args: Arguments, persistent: Bool = false, node: Int = 0, handler: (@Sendable (FleetLink.Message) -> Void)? = nil) throws(Failure) -> FleetLink {
    let nodes = try brokers(args)
    var port = 0
    if let p = args.setting("--port") {
        guard let n = Int(p), (1...65535).contains(n) else { throw usageError("--port must be 1-65535, not '\(TextFile.excerpt(p))'") }
        port = n
    }
    // The node asked for first, then the others in turn.
    let order = Array(nodes[node...] + nodes[..<node])
    let host = order[0].host
    port = order[0].port ?? port
    var hostname = [CChar](repeating: 0, count: 256)
    gethostname(&hostname, hostname.count - 1)
    let me = String(decoding: hostname.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let clientID = (args.setting("--client-id") ?? "soundbox-fleet-\(me)-\(getpid())") + (node > 0 ? "-n\(node)" : "")
    guard DeviceRecord.isValidID(clientID) else { throw usageError("--client-id '\(TextFile.excerpt(clientID))': one MQTT topic level, 1-64 bytes") }
    var o = MQTTClient.Options(clientID: clientID, host: host, port: port)
    o.alternates = order.dropFirst().map { BrokerAddress(host: $0.host, port: $0.port ?? (port == 0 ? nil : port)) }
    o.cleanStart = !persistent
    o.sessionExpiry = 7 * 86_400
    o.reconnectMax = 5
    if let ca = args.setting("--ca") {
        o.tls = .init(ca: ca, cert: args.setting("--cert"), key: args.setting("--tls-key"))
    } else if args.setting("--cert") != nil || args.setting("--tls-key") != nil {
        throw usageError("--cert and --tls-key need --ca (the broker's CA)")
    }
    o.username = args.setting("--username")
    if let file = args.setting("--password-file") {
        let text = String(decoding: try readSmallFile(file, limit: 4096), as: UTF8.self)
        o.password = String(text.prefix { $0 != "\n" && $0 != "\r" })
    }
    let link: FleetLink
    do {
        link = try FleetLink(o, handler: handler)
        try link.connect(timeout: try timeout(args))
    } catch {
        throw failure("\(host):\(port == 0 ? (o.tls == nil ? 1883 : 8883) : port): \(error)", code: "broker")
    }
    return link
}

func selector(_ args: Arguments) throws(Failure) -> Selector {
    var s = Selector()
    do {
        for name in args.positional {
            try s.add(name: name) { path throws(SelectorError) in
                do { return try TextFile.read(path, limit: 16 << 20) } catch { throw SelectorError("\(path): \(error)") }
            }
        }
        if let v = args.options["--version"] { s.version = try .parse(v) }
    } catch { throw usageError(error.description) }
    if let d = args.options["--offline-for"] {
        do { s.offlineFor = try Selector.duration(d) } catch { throw usageError("--offline-for \(error)") }
    }
    s.fault = args.options["--fault"]
    s.voice = args.options["--voice"]
    s.slot = args.options["--slot"]
    s.updateState = args.options["--update-state"]
    switch (args.flags.contains("--online"), args.flags.contains("--offline")) {
    case (true, true): throw usageError("--online and --offline exclude each other")
    case (true, false): s.online = true
    case (false, true): s.online = false
    default: break
    }
    return s
}

/// The brokers of --host: one, or a cluster's nodes (comma-separated, as mqtt.host).
func brokers(_ args: Arguments) throws(Failure) -> [BrokerAddress] {
    var host = args.setting("--host") ?? "127.0.0.1"
    if host.isEmpty { host = "127.0.0.1" }
    guard let list = BrokerAddress.list(host) else {
        throw usageError("--host '\(TextFile.excerpt(host))': a host[:port], or up to \(BrokerAddress.maxBrokers) of them separated by commas")
    }
    return list
}

/// Every retained status under the prefix, read up to a sync marker; with
/// several nodes in --host, from each of them (a cluster's nodes may each
/// keep their own retained statuses: the newest connection's wins). The
/// devices in `exact` are also asked for by their own topic (RabbitMQ 3.10
/// hands retained messages only to exact subscriptions).
func inventory(_ args: Arguments, _ link: FleetLink, prefix p: String, exact: [String] = []) throws(Failure) -> (Inventory, complete: Bool) {
    var inv = Inventory(prefix: p)
    let wait = try timeout(args)
    let topics = [p + "/+/status"] + exact.map { p + "/" + $0 + "/status" }
    do {
        // QoS 0: retained statuses come at once, outside the broker's in-flight and queue limits.
        try link.subscribe(topics, qos: 0, timeout: wait)
        var complete = try link.sync(timeout: wait) { inv.ingest(topic: $0.topic, payload: $0.payload) }
        let nodes = try brokers(args)
        for node in nodes.indices.dropFirst() {
            do {
                let other = try connect(args, node: node)
                defer { other.close() }
                try other.subscribe(topics, qos: 0, timeout: wait)
                complete = try other.sync(timeout: wait) { inv.ingest(topic: $0.topic, payload: $0.payload) } && complete
            } catch {
                printError("note: node \(nodes[node]) not read: \(error)")
                complete = false
            }
        }
        try remember(args, &inv)
        return (inv, complete)
    } catch let error as Failure {
        throw error
    } catch {
        throw failure("\(error)", code: "broker")
    }
}

/// The tool's memory of when it last saw each device online (docs/fleet.md
/// "State"); without a usable state file, --offline-for cannot be answered.
func remember(_ args: Arguments, _ inv: inout Inventory) throws(Failure) {
    let path = args.setting("--state") ?? FleetState.defaultPath()
    do {
        let state = try FleetState(path: path)
        let seen = try state.record(inv.devices.values.map { ($0.id, $0.online == true) }, now: Int64(time(nil)))
        inv.remember(lastSeen: seen)
    } catch {
        if args.options["--offline-for"] != nil { throw failure("--offline-for needs the state file: \(path): \(error)", code: "state") }
        printError("note: the state file \(path) cannot be used (\(error)): devices' last sightings are not kept")
    }
}

func devicesCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(selectorOptions.union(["--csv", "--online", "--offline"]), for: "devices")
    let select = try selector(args)
    let p = try prefix(args)
    let link = try connect(args)
    defer { link.close() }
    let (inv, complete) = try inventory(args, link, prefix: p, exact: select.named)
    let now = Int64(time(nil))
    // What the devices say, escaped for every output below (docs/fleet.md "What devices say, as shown").
    let picked = inv.select(select, now: now).map(\.shown)
    if !complete {
        printError("note: the broker did not return the tool's marker within the timeout: the list may be incomplete (may the account publish to \(link.syncTopic)?)")
    }
    if link.dropped > 0 { printError("note: \(link.dropped) messages dropped (more than \(link.capacity) waiting)") }
    let anomalies = inv.anomalies.sorted { $0.key < $1.key }
    if out.json {
        struct Device: Encodable {
            var id: String; var online: Bool?; var version, slot, update_state, update_version: String?
            var update_progress: Int?; var update_reason: String?; var volume: Int?; var muted: Bool?
            var voice: String?; var queue_depth: Int?; var faults: [String]; var uptime_s: Int?; var boot_reason: String?
            /// Unix seconds this tool last saw it online (or first saw it, if never online).
            var last_seen: Int64?
        }
        struct Anomaly: Encodable { var count: Int; var examples: [String] }
        struct Listing: Encodable { var devices: [Device]; var count: Int; var complete: Bool; var anomalies: [String: Anomaly] }
        let devices = picked.map {
            Device(id: $0.id, online: $0.online, version: $0.version, slot: $0.slot, update_state: $0.updateState,
                   update_version: $0.updateVersion, update_progress: $0.updateProgress, update_reason: $0.updateReason,
                   volume: $0.volume, muted: $0.muted, voice: $0.voice, queue_depth: $0.queueDepth, faults: $0.faults,
                   uptime_s: $0.uptime, boot_reason: $0.bootReason, last_seen: $0.lastSeen)
        }
        out.emit(Listing(devices: devices, count: devices.count, complete: complete,
                         anomalies: Dictionary(uniqueKeysWithValues: anomalies.map { ($0.key, Anomaly(count: $0.value.count, examples: $0.value.examples)) })),
                 text: "")
        return
    }
    let header = ["id", "online", "version", "slot", "update", "volume", "muted", "voice", "queue", "faults", "uptime_s"]
    let rows = picked.map { d -> [String] in
        var update = d.updateState ?? ""
        if let p = d.updateProgress, update == "downloading" || update == "installing" { update += " \(p)%" }
        if let v = d.updateVersion, !update.isEmpty, update != "idle" { update += " \(v)" }
        var online = d.online.map { $0 ? "yes" : "no" } ?? "?"
        if d.online != true, let seen = d.lastSeen { online += " ≥" + ago(now - seen) }   // offline at least that long
        return [d.id, online, d.version ?? "", d.slot ?? "", update,
                d.volume.map(String.init) ?? "", d.muted.map { $0 ? "yes" : "no" } ?? "", d.voice ?? "",
                d.queueDepth.map(String.init) ?? "", d.faults.joined(separator: ","), d.uptime.map(String.init) ?? ""]
    }
    if args.flags.contains("--csv") {
        print(csvLine(header))
        for r in rows { print(csvLine(r)) }
    } else {
        print(table([header.map { $0.uppercased() }] + rows))
        printError("\(picked.count) of \(inv.devices.count) devices")
    }
    for (kind, a) in anomalies {
        printError("\(a.count) statuses not believed (\(kind)), e.g. \(a.examples.joined(separator: "; "))")
    }
}

/// "40s", "12m", "3h", "5d": how long ago, roughly (the state's "at least").
func ago(_ seconds: Int64) -> String {
    switch max(0, seconds) {
    case ..<120: "\(max(0, seconds))s"
    case ..<7200: "\(seconds / 60)m"
    case ..<172_800: "\(seconds / 3600)h"
    default: "\(seconds / 86_400)d"
    }
}

/// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
func csvLine(_ fields: [String]) -> String {
    fields.map { f in
        f.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
            ? "\"" + f.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\"" : f
    }.joined(separator: ",")
}

/// Columns padded to their widest cell (in characters).
func table(_ rows: [[String]]) -> String {
    var widths: [Int] = []
    for r in rows { for (i, c) in r.enumerated() { if i >= widths.count { widths.append(0) }; widths[i] = max(widths[i], c.count) } }
    return rows.map { r in
        r.enumerated().map { i, c in i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count) }.joined(separator: "  ")
    }.joined(separator: "\n")
}

func run(_ argv: [String]) throws(Failure) {
    if argv == ["--version"] { print("soundbox-fleet \(soundboxVersion)"); return }
    let args = try Arguments(fleet: argv)
    let out = Output(json: args.flags.contains("--json"))
    guard let (command, rest) = try args.command(usage: usage) else { return }
    switch command {
    case "devices": try devicesCommand(rest, out)
    case "config": try configCommand(rest, out)
    case "cmd": try cmdCommand(rest, out)
    case "pay": try payCommand(rest, out)
    case "receipts": try receiptsCommand(rest, out)
    case "rollout": try rolloutCommand(rest, out)
    case "help": print(usage)
    default: throw usageError("unknown command '\(command)' (see --help)")
    }
}

runMain(Array(CommandLine.arguments.dropFirst())) { argv throws(Failure) in try run(argv) }
