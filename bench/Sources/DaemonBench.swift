import Foundation
import Soundbox
import SoundboxControl
import SoundboxSystem

/// soundboxd (release build) in a scratch folder: start to READY, idle RSS,
/// idle CPU and wakeups, durable ingest rate, RSS with 5,000 queued.
func daemonBench(voices: String) throws {
    let dir = "/tmp/sbx-bench-\(getpid())"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let socket = dir + "/control.sock"
    func configure(realtime: Bool) throws {
        try """
            state.dir = \(dir)/state
            control.socket = \(socket)
            voice.dir = \(voices)
            audio.output = null
            audio.null_realtime = \(realtime)
            # The core daemon alone: `soundbox-bench mqtt` measures the broker link.
            # (Connected, it adds one keep-alive exchange per mqtt.keepalive, 60 s.)
            mqtt.enabled = false
            gpio.enabled = false
            """.write(toFile: dir + "/soundbox.conf", atomically: true, encoding: .utf8)
    }

    /// Starts soundboxd; returns it and the seconds until READY=1.
    func start() throws -> (Process, Double) {
        let notifyPath = dir + "/notify.sock"
        unlink(notifyPath)
        let socket = try FileDescriptor.unixSocket(.datagram)
        let fd = socket.rawValue
        defer { socket.close(); unlink(notifyPath) }
        try socket.bind(to: UnixSocketAddress(notifyPath))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binDir + "/soundboxd")
        p.arguments = ["--config", dir + "/soundbox.conf"]
        p.environment = ["NOTIFY_SOCKET": notifyPath]
        p.standardError = FileHandle.nullDevice
        let t = now()
        try p.run()
        var buf = [UInt8](repeating: 0, count: 512)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 && String(decoding: buf[..<n], as: UTF8.self).contains("READY=1") { break }
        }
        return (p, Double(now() - t) / 1e9)
    }
    func stop(_ p: Process) { p.terminate(); p.waitUntilExit() }
    func rssKiB(_ p: Process) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(p.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    /// Context switches (wakeups) of all threads, and CPU ticks.
    func activity(_ p: Process) -> (switches: Int, ticks: Int) {
        let base = "/proc/\(p.processIdentifier)"
        var switches = 0
        for task in (try? FileManager.default.contentsOfDirectory(atPath: base + "/task")) ?? [] {
            let s = (try? String(contentsOfFile: "\(base)/task/\(task)/status", encoding: .utf8)) ?? ""
            for line in s.split(separator: "\n") where line.contains("ctxt_switches") {
                switches += Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        let stat = ((try? String(contentsOfFile: base + "/stat", encoding: .utf8)) ?? "").split(separator: ")").last?.split(separator: " ") ?? []
        let ticks = (Int(stat.count > 12 ? stat[11] : "") ?? 0) + (Int(stat.count > 13 ? stat[12] : "") ?? 0)
        return (switches, ticks)
    }

    // Start to READY: median of 10 cold-ish starts (fresh database each time).
    try configure(realtime: false)
    var starts: [Double] = []
    for _ in 0..<10 {
        try? FileManager.default.removeItem(atPath: dir + "/state")
        let (p, t) = try start()
        starts.append(t)
        stop(p)
    }

    // Idle: RSS with packs loaded, then 10 s of idleness.
    let (p, _) = try start()
    let idleRSS = rssKiB(p)
    let a0 = activity(p)
    Thread.sleep(forTimeInterval: 10)
    let a1 = activity(p)

    // Durable ingest over the control socket, one flushed transaction each
    // (the scheduler speaks them meanwhile on the instant null output).
    let connection = try ControlConnection.open(socket, timeout: 30)
    let n = 2000
    let t0 = now()
    for i in 0..<n { _ = try connection.request(["say", "\(i % 500 + 1).25", "--id", "B\(i)"]) }
    let rate = Double(n) / (Double(now() - t0) / 1e9)
    _ = try connection.request(["idle", "60"])
    stop(p)

    // 5,000 queued: the first payment speaks in real time while the rest wait.
    try configure(realtime: true)
    let (q, _) = try start()
    let c2 = try ControlConnection.open(socket, timeout: 30)
    for i in 0..<5000 { _ = try c2.request(["say", "99999999.99", "--id", "Q\(i)"]) }
    let depth = try c2.request(["status"])["queue_depth"] ?? "?"
    let queuedRSS = rssKiB(q)
    stop(q)

    print("soundboxd start to READY:       median \(String(format: "%.1f", median(starts) * 1000)) ms, max \(String(format: "%.1f", starts.max()! * 1000)) ms   (goal < 300 ms)")
    print("RSS idle, packs loaded:         \(String(format: "%.1f", Double(idleRSS) / 1024)) MB   (goal <= 20 MB)")
    print("idle over 10 s:                 \(String(format: "%.1f", Double(a1.switches - a0.switches) / 10)) wakeups/s, \(a1.ticks - a0.ticks) CPU ticks   (goal < 1 wakeup/s)")
    print("durable ingest (say, flushed):  \(Int(rate)) payments/s over \(n)   (goal >= 500/s)")
    print("RSS with \(depth) queued:         \(String(format: "%.1f", Double(queuedRSS) / 1024)) MB")
}
