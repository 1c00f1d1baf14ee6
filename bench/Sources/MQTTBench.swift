import Foundation
import MQTTBridge

/// A loopback mosquitto of our own and the release soundboxd against it
/// (ALSA output on the `null` PCM, debug log for the audio_start lines).
final class BenchRig {
    let dir: String
    let port = Int.random(in: 20000...60000)
    private let broker = Process()
    private var logNumber = 0
    private(set) var daemon: Process?
    private(set) var log = ""
    let backend: BenchBackend
    /// Added to soundboxd's environment (e.g. the flush shim, FlushBench).
    var environment: [String: String] = [:]

    private let voices: String

    init(name: String, voices: String, extraConfig: String = "") throws {
        self.voices = voices
        dir = "/tmp/sbx-\(name)-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
        try """
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            set_tcp_nodelay true
            max_queued_messages 100000
            user root
            """.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        broker.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
        broker.arguments = ["-c", dir + "/mosquitto.conf"]
        broker.standardError = FileHandle.nullDevice
        try broker.run()
        backend = try BenchBackend(port: port, device: "bench")
        try configure(extraConfig)
    }

    deinit {
        stopDaemon()
        broker.terminate(); broker.waitUntilExit()
        if getenv("BENCH_KEEP") == nil { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// The daemon's settings file (read at its next start).
    func configure(_ extra: String) throws {
        try benchSettings(home: dir, voices: voices, id: "bench", port: port, extra: "log.level = debug\n" + extra)
    }

    /// Starts soundboxd (a fresh log) and waits until the backend sees it online.
    func startDaemon(waitOnline: Bool = true) throws {
        logNumber += 1
        log = "\(dir)/soundboxd-\(logNumber).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binDir + "/soundboxd")
        p.arguments = ["--config", dir + "/soundbox.conf"]
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardError = FileHandle(forWritingAtPath: log)
        try p.run()
        daemon = p
        if waitOnline { guard backend.wait(timeout: 30, { $0.online }) else { throw BenchError("soundboxd did not come online") } }
    }

    func stopDaemon() {
        guard let p = daemon, p.isRunning else { return }
        p.terminate(); p.waitUntilExit()
        backend.wait(timeout: 5) { !$0.online }
    }

    /// Publish → first audible sample handed to ALSA, one payment at a time: `n`
    /// payments named PREFIX0…, each message made by `message(id, amount)`.
    /// Sorted latencies in ms.
    func latencies(_ n: Int, prefix: String,
                   message: (String, String) -> String = { id, amount in #"{"id":"\#(id)","amount":"\#(amount)"}"# }) throws -> [Double] {
        var sentAt: [String: Int64] = [:]
        for i in 0..<n {
            let id = "\(prefix)\(i)"
            let payload = message(id, "\(i % 900 + 1).\(i % 10)0")
            sentAt[id] = nowUs()
            try backend.publish(backend.topics.payment, payload)
            guard backend.wait(timeout: 30, { $0.played.contains(id) }) else { throw BenchError("no played receipt for \(id)") }
        }
        var latencies: [Double] = []
        var lastID: String?
        for line in (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n") {
            // <7>queue: speaking id=L12 ... then <7>queue: audio_start t_us=...
            if line.contains("queue: speaking id=\(prefix)") { lastID = line.split(separator: " ")[2].dropFirst(3).description }
            if line.contains("audio_start"), let id = lastID, let t0 = sentAt[id],
               let t = line.split(separator: " ").first(where: { $0.hasPrefix("t_us=") }).flatMap({ Int64($0.dropFirst(5)) }) {
                latencies.append(Double(t - t0) / 1000)
                lastID = nil
            }
        }
        return latencies.sorted()
    }
}

/// A soundboxd settings file in `home` (its state and control socket there),
/// ALSA's null output, the loopback broker at `port`.
func benchSettings(home: String, voices: String, id: String, port: Int, extra: String) throws {
    try """
        state.dir = \(home)/state
        control.socket = \(home)/control.sock
        voice.dir = \(voices)
        audio.output = alsa
        audio.device = null
        device.id = \(id)
        mqtt.host = 127.0.0.1
        mqtt.port = \(port)
        mqtt.link_prompts = false
        \(extra)
        """.write(toFile: home + "/soundbox.conf", atomically: true, encoding: .utf8)
}

/// "p50 0.87 ms, p99 1.35 ms, max 2.34 ms" of sorted latencies in ms.
func percentiles(_ sorted: [Double]) -> String {
    func pct(_ p: Double) -> String { String(format: "%.2f ms", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) }
    return "p50 \(pct(0.5)), p99 \(pct(0.99)), max \(pct(1))"
}

/// Publish → first audible sample handed to ALSA (the `null` PCM), over a loopback
/// mosquitto, one payment at a time; then a backlog of 5,000 published
/// while soundboxd is down, timed from its start until all are durable
/// (their `queued` receipts have reached the backend).
func mqttBench(voices: String) throws {
    let rig = try BenchRig(name: "mqtt", voices: voices)
    try rig.startDaemon()
    // 1. Latency, one payment at a time.
    let latencies = try rig.latencies(1000, prefix: "L") { id, amount in #"{"id":"\#(id)","amount":"\#(amount)"}"# }

    // Idle while connected (keep-alive 60 s): context switches of all its threads over 20 s.
    Thread.sleep(forTimeInterval: 2)
    let idle0 = contextSwitches(rig.daemon!.processIdentifier)
    Thread.sleep(forTimeInterval: 20)
    let idleSwitches = contextSwitches(rig.daemon!.processIdentifier) - idle0

    // 2. Backlog: 5,000 while soundboxd is down (its session keeps them).
    rig.stopDaemon()
    let backlog = (0..<5000).map { "Q\($0)" }
    for id in backlog { try rig.backend.pay(id: id, amount: "5.55") }
    let t0 = nowUs()
    try rig.startDaemon(waitOnline: false)
    guard rig.backend.wait(timeout: 300, { backlog.allSatisfy($0.queued.contains) }) else { throw BenchError("backlog not durable") }
    let drain = Double(nowUs() - t0) / 1e6
    rig.stopDaemon()

    print("publish -> first audible sample (\(latencies.count) payments): \(percentiles(latencies))   (goal p50 <= 5 ms, p99 <= 20 ms)")
    print("idle, connected (keep-alive 60 s): \(idleSwitches) context switches of all threads over 20 s")
    print("backlog of 5000 while offline: all durable \(String(format: "%.2f", drain)) s after start = \(Int(5000 / drain))/s   (goal >= 500/s)")
}

/// Context switches (voluntary and not) of all threads of `pid`.
func contextSwitches(_ pid: Int32) -> Int {
    let base = "/proc/\(pid)/task"
    var n = 0
    for task in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
        let status = (try? String(contentsOfFile: "\(base)/\(task)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.contains("ctxt_switches") {
            n += Int(line.split(separator: "\t").last ?? "") ?? 0
        }
    }
    return n
}

func nowUs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}

struct BenchError: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

/// The backend side: publishes payments, collects receipts and status.
final class BenchBackend: MQTTClientDelegate, @unchecked Sendable {
    struct Seen { var online = false; var queued: Set<String> = []; var played: Set<String> = [] }
    private let cond = NSCondition()
    private var seen = Seen()
    private var client: MQTTClient?
    let topics: Topics

    init(port: Int, device: String) throws {
        topics = Topics(prefix: "soundbox/v1", device: device)
        let c = try MQTTClient(MQTTClient.Options(clientID: "bench-backend", host: "127.0.0.1", port: port), delegate: self)
        client = c
        try c.start()
    }
    func mqttConnected(rc: Int32) {
        try? client?.subscribe(topics.receipt)
        try? client?.subscribe(topics.status)
    }
    func mqttDisconnected(rc: Int32) {}
    func mqttPublished(mid: Int32) {}
    func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        let text = String(decoding: payload, as: UTF8.self)
        cond.lock()
        if topic == topics.status { seen.online = text.contains(#""online":true"#) }
        if let r = text.range(of: #"{"id":""#), let end = text[r.upperBound...].firstIndex(of: "\"") {
            let id = String(text[r.upperBound..<end])
            if text.contains(#""status":"queued""#) { seen.queued.insert(id) }
            if text.contains(#""status":"played""#) { seen.played.insert(id) }
        }
        cond.broadcast()
        cond.unlock()
    }
    func pay(id: String, amount: String) throws {
        try publish(topics.payment, #"{"id":"\#(id)","amount":"\#(amount)"}"#)
    }
    func publish(_ topic: String, _ payload: String) throws { try client!.publish(topic, payload) }
    @discardableResult
    func wait(timeout: Double, _ done: (Seen) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock(); defer { cond.unlock() }
        while !done(seen) { if !cond.wait(until: deadline) { return done(seen) } }
        return true
    }
}
