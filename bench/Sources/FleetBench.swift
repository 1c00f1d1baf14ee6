import Foundation
import FleetLink
import FleetSim
import MQTTBridge
import Soundbox
import SoundboxCrypto
import SoundboxSystem

/// The fleet at scale (bench/README.md "Fleet"): `n` simulated boxes
/// (FleetSim, one process, 3% of them failing their updates on purpose)
/// and `real` soundboxd against one loopback mosquitto whose descriptor
/// limit is raised; soundbox-fleet's inventory, a signed config to every
/// box until each confirmed, publish → receipts for the real daemons while
/// all are connected, a rollout that must halt at its threshold, and the
/// broker's memory per connected device.
func fleetBench(voices: String, n: Int, real: Int) throws {
    let dir = "/tmp/sbx-fleet-bench-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir + "/keys", withIntermediateDirectories: true)
    defer { if getenv("BENCH_KEEP") == nil { try? FileManager.default.removeItem(atPath: dir) } }
    // Our limit, inherited by the broker and the tool: the broker takes one
    // descriptor per connection, the simulator one per box.
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    guard limit.rlim_cur >= rlim_t(n + real + 512) else { throw BenchError("the descriptor limit \(limit.rlim_cur) is too low for \(n) devices") }
    for command in [["genpkey", "-algorithm", "ed25519", "-out", dir + "/backend.key"],
                    ["pkey", "-in", dir + "/backend.key", "-pubout", "-out", dir + "/keys/backend.pem"]] {
        guard try run("/usr/bin/openssl", command).status == 0 else { throw BenchError("openssl \(command.joined(separator: " ")) failed") }
    }
    let key = try Ed25519PrivateKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/backend.key"))))

    let port = Int.random(in: 20000...60000)
    try """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence false
        set_tcp_nodelay true
        max_connections -1
        max_queued_messages 1000
        user root
        """.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
    let broker = Process()
    broker.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
    broker.arguments = ["-c", dir + "/mosquitto.conf"]
    broker.standardError = FileHandle.nullDevice
    try broker.run()
    defer { broker.terminate(); broker.waitUntilExit() }
    Thread.sleep(forTimeInterval: 0.5)
    let idleKiB = rssKiB(broker.processIdentifier)

    // The real daemons: signatures required, ALSA's null output.
    var daemons: [Process] = []
    defer { for p in daemons { p.terminate(); p.waitUntilExit() } }
    let realIDs = (0..<real).map { "real-\($0 < 10 ? "0" : "")\($0)" }
    for id in realIDs {
        let home = dir + "/" + id
        try FileManager.default.createDirectory(atPath: home + "/state", withIntermediateDirectories: true)
        try benchSettings(home: home, voices: voices, id: id, port: port, extra: "payment.signing = required\npayment.keys = \(dir)/keys")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binDir + "/soundboxd")
        p.arguments = ["--config", home + "/soundbox.conf"]
        p.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try p.run()
        daemons.append(p)
    }

    // The backend's connection, before the simulated boxes: libmosquitto's
    // own loop uses select(2), which takes no descriptor past 1023.
    let link = try FleetLink(MQTTClient.Options(clientID: "fleet-bench", host: "127.0.0.1", port: port))
    try link.connect(timeout: 10)
    try link.subscribe(["soundbox/v1/+/receipt", "soundbox/v1/+/status"], qos: 1, timeout: 10)

    // The simulated boxes.
    let ids = (0..<n).map { String(format: "sim-%05d", $0) }
    var o = SimulatedFleet.Options(port: port, ids: ids)
    o.backendKey = key.publicKey
    o.failing = Set(ids.enumerated().filter { $0.offset % 33 == 16 }.map(\.element))
    o.step = 1
    o.reboot = 2
    let sims = SimulatedFleet(o)
    var t0 = Date()
    try sims.start()
    guard sims.wait(timeout: 600, until: { $0.connected == n }) else { throw BenchError("only \(sims.snapshot.connected) of \(n) simulated devices connected") }
    print(String(format: "fleet: %d simulated devices connected in %.1f s (one process, one thread)", n, Date().timeIntervalSince(t0)))
    var online = Set<String>()
    for id in realIDs {
        // Each real daemon's status says online once it is connected.
        let deadline = Date().addingTimeInterval(60)
        while !online.contains(id), Date() < deadline, let m = link.next(timeout: 1) {
            if m.topic.hasSuffix("/status"), String(decoding: m.payload, as: UTF8.self).contains(#""online":true"#) {
                online.insert(String(m.topic.split(separator: "/")[2]))
            }
        }
    }
    guard online.isSuperset(of: realIDs) else { throw BenchError("real daemons online: \(online.intersection(realIDs).count) of \(real)") }
    let fullKiB = rssKiB(broker.processIdentifier)
    print(String(format: "fleet: broker RSS %.1f MB idle, %.1f MB with %d devices: %.1f KiB per connected device",
                 Double(idleKiB) / 1024, Double(fullKiB) / 1024, n + real, Double(fullKiB - idleKiB) / Double(n + real)))

    let fleet = binDir + "/soundbox-fleet"
    let common = ["--port", "\(port)", "--timeout", "30", "--state", dir + "/fleet.db", "--key", dir + "/backend.key"]

    // 1. The inventory, three times.
    var inventory: [Double] = []
    for _ in 0..<3 {
        t0 = Date()
        let r = try run(fleet, common + ["--json", "devices"])
        inventory.append(Date().timeIntervalSince(t0))
        let count = (try? JSONSerialization.jsonObject(with: Data(r.output.utf8)) as? [String: Any])?["count"] as? Int
        guard count == n + real else { throw BenchError("the inventory listed \(count ?? -1) of \(n + real): \(r.output.prefix(300))") }
    }
    print(String(format: "fleet: inventory of %d devices (soundbox-fleet devices, the whole process): %.2f s median (%@)",
                 n + real, median(inventory), inventory.map { String(format: "%.2f", $0) }.joined(separator: ", ")))

    // 2. A signed config to every device until each confirmed.
    t0 = Date()
    let config = try run(fleet, common + ["--json", "config", "set", "audio.volume=7", "--wait", "120"])
    let pushed = (try? JSONSerialization.jsonObject(with: Data(config.output.utf8)) as? [String: Any])?["counts"] as? [String: Int] ?? [:]
    print(String(format: "fleet: a signed config to %d devices until every confirmation: %.2f s (applied %d, refused %d, no answer %d; exit %d)",
                 n + real, Date().timeIntervalSince(t0), pushed["applied"] ?? -1, pushed["refused"] ?? -1, pushed["no_answer"] ?? -1, config.status))

    // 3. Payments to the real daemons while every device is connected: publish → queued and → played receipts.
    var sentAt: [String: Double] = [:], queued: [Double] = [], played: [Double] = []
    let payments = 200
    for i in 0..<payments {
        let device = realIDs[i % real]
        let id = "F\(i)"
        let document = try JSONValue.parse(Array(#"{"id":"\#(id)","amount":"\#(i % 900 + 1).50","currency":"CNY"}"#.utf8))
        guard case .success(let signed) = Signature.sign(document, device: device, kid: key.publicKey.id, now: Int64(Date().timeIntervalSince1970),
                                                        nonce: { "" }, sign: key.sign) else { throw BenchError("cannot sign") }
        sentAt[id] = MonotonicClock.seconds()
        _ = try link.publish("soundbox/v1/\(device)/payment", signed.message.text, qos: 1)
        // One at a time: wait for this one's played receipt.
        let deadline = MonotonicClock.seconds() + 30
        var done = false
        while !done, MonotonicClock.seconds() < deadline, let m = link.next(timeout: 1) {
            guard m.topic.hasSuffix("/receipt"), let r = try? JSONValue.parse(m.payload), case .string(let rid)? = r["id"],
                  let t = sentAt[rid], case .string(let status)? = r["status"] else { continue }
            let ms = (MonotonicClock.seconds() - t) * 1000
            if status == "queued" { queued.append(ms) }
            if status == "played" { played.append(ms); done = rid == id }
        }
        guard done else { throw BenchError("no played receipt for \(id) on \(device)") }
    }
    print("fleet: publish → queued receipt, \(payments) signed payments to \(real) real soundboxd among \(n) connected: \(percentiles(queued.sorted()))")
    print("fleet: publish → played receipt (the announcement spoken in full on ALSA's null device): \(percentiles(played.sorted()))")
    link.close()

    // 4. A rollout over the simulated devices, 3% failing: canary 10, batches of 10%, at most 2% failures.
    t0 = Date()
    let rollout = try run(fleet, common + ["--json", "rollout", "http://updates.example/soundbox-0.2.0.raucb", "--version", "0.2.0",
                                           "--sha256", String(repeating: "ab", count: 32), "sim-*", "--canary", "10", "--batch", "10%",
                                           "--max-failures", "2%", "--wait", "300"])
    let r = (try? JSONSerialization.jsonObject(with: Data(rollout.output.utf8)) as? [String: Any]) ?? [:]
    let counts = r["counts"] as? [String: Int] ?? [:]
    print(String(format: "fleet: rollout over %d (3%% failing; canary 10, batches of 10%%, max 2%%): %@ after %.1f s in stage %d of %d (%@): %@; exit %d",
                 n, r["phase"] as? String ?? "?", Date().timeIntervalSince(t0), (r["stage"] as? Int ?? -2) + 1, r["stages"] as? Int ?? -1,
                 r["reason"] as? String ?? "-", counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "), rollout.status))
    print("fleet: simulated devices that took the update: \(sims.snapshot.updatesTaken) (none past the halting stage)")
    sims.stop()
}

/// A process run to its end: its status and standard output.
func run(_ path: String, _ args: [String]) throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

func rssKiB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ")[1]) ?? 0
}
