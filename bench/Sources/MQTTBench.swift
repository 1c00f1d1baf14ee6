import Foundation
import MQTTBridge

/// Publish → first PCM frame to ALSA (the `null` PCM), over a loopback
/// mosquitto, one payment at a time; then a backlog of 5,000 published
/// while soundboxd is down, timed from its start until all are durable
/// (their `queued` receipts have reached the backend).
func mqttBench(voices: String) throws {
    let dir = "/tmp/sbx-mqtt-bench-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir + "/state", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }

    // A loopback broker of our own.
    let port = Int.random(in: 20000...60000)
    try """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence false
        set_tcp_nodelay true
        max_queued_messages 100000
        user root
        """.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
    let broker = Process()
    broker.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
    broker.arguments = ["-c", dir + "/mosquitto.conf"]
    broker.standardError = FileHandle.nullDevice
    try broker.run()
    defer { broker.terminate(); broker.waitUntilExit() }

    try """
        state.dir = \(dir)/state
        control.socket = \(dir)/control.sock
        voice.dir = \(voices)
        audio.output = alsa
        audio.device = null
        log.level = debug
        device.id = bench
        mqtt.host = 127.0.0.1
        mqtt.port = \(port)
        mqtt.link_prompts = false
        """.write(toFile: dir + "/soundbox.conf", atomically: true, encoding: .utf8)
    var logNumber = 0
    func startDaemon() throws -> (Process, String) {
        logNumber += 1
        let log = "\(dir)/soundboxd-\(logNumber).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binDir + "/soundboxd")
        p.arguments = ["--config", dir + "/soundbox.conf"]
        p.standardError = FileHandle(forWritingAtPath: log)
        try p.run()
        return (p, log)
    }

    let backend = try BenchBackend(port: port, device: "bench")
    var (daemon, log) = try startDaemon()
    guard backend.wait(timeout: 30, { $0.online }) else { throw BenchError("soundboxd did not come online") }

    // 1. Latency, one payment at a time.
    let n = 1000
    var sentAt: [String: Int64] = [:]
    for i in 0..<n {
        let id = "L\(i)"
        sentAt[id] = nowUs()
        try backend.pay(id: id, amount: "\(i % 900 + 1).\(i % 10)0")
        guard backend.wait(timeout: 30, { $0.played.contains(id) }) else { throw BenchError("no played receipt for \(id)") }
    }
    var latencies: [Double] = []
    var lastID: String?
    for line in (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n") {
        // <7>queue: speaking id=L12 ... then <7>queue: audio_start t_us=...
        if line.contains("queue: speaking id=L") { lastID = line.split(separator: " ")[2].dropFirst(3).description }
        if line.contains("audio_start"), let id = lastID, let t0 = sentAt[id],
           let t = line.split(separator: " ").first(where: { $0.hasPrefix("t_us=") }).flatMap({ Int64($0.dropFirst(5)) }) {
            latencies.append(Double(t - t0) / 1000)
            lastID = nil
        }
    }
    latencies.sort()

    // 2. Backlog: 5,000 while soundboxd is down (its session keeps them).
    daemon.terminate(); daemon.waitUntilExit()
    let backlog = (0..<5000).map { "Q\($0)" }
    for id in backlog { try backend.pay(id: id, amount: "5.55") }
    let t0 = nowUs()
    (daemon, log) = try startDaemon()
    guard backend.wait(timeout: 300, { backlog.allSatisfy($0.queued.contains) }) else { throw BenchError("backlog not durable") }
    let drain = Double(nowUs() - t0) / 1e6
    daemon.terminate(); daemon.waitUntilExit()

    func pct(_ p: Double) -> String { String(format: "%.2f ms", latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) }
    print("publish -> first PCM frame (\(latencies.count) payments): p50 \(pct(0.5)), p99 \(pct(0.99)), max \(pct(1))   (goal p50 <= 5 ms, p99 <= 20 ms)")
    print("backlog of 5000 while offline: all durable \(String(format: "%.2f", drain)) s after start = \(Int(5000 / drain))/s   (goal >= 500/s)")
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
        try client!.publish(topics.payment, #"{"id":"\#(id)","amount":"\#(amount)"}"#)
    }
    func wait(timeout: Double, _ done: (Seen) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock(); defer { cond.unlock() }
        while !done(seen) { if !cond.wait(until: deadline) { return done(seen) } }
        return true
    }
}
