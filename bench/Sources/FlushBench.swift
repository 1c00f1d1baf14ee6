import Foundation

/// An SD card's flushes on this machine's disk: soundboxd runs under the
/// flush shim (bench/flushdelay.c), which makes every fsync/fdatasync
/// `delay` ms slower and counts them. For each delay: publish → first
/// audible sample of `n` payments one at a time, flushes and bytes written
/// per payment in that stream; with the slowest, a backlog published while
/// soundboxd was down, timed until all are durable.
func flushBench(voices: String, shim: String, n: Int = 300, backlog: Int = 300) throws {
    guard FileManager.default.fileExists(atPath: shim) else { throw BenchError("no flush shim at \(shim) (bench/run builds it)") }
    let delays = [0, 10, 30]
    for delay in delays {
        let rig = try BenchRig(name: "flush\(delay)", voices: voices)
        let counter = rig.dir + "/flushes"
        rig.environment = ["LD_PRELOAD": shim, "SOUNDBOX_FLUSH_DELAY_MS": "\(delay)", "SOUNDBOX_FLUSH_COUNT": counter]
        try rig.startDaemon()
        _ = try rig.latencies(20, prefix: "W\(delay)-")   // warm: the pack's pages, the WAL's first growth
        let pid = rig.daemon!.processIdentifier
        let (f0, io0) = (flushCount(counter), ioCounters(pid))
        let latencies = try rig.latencies(n, prefix: "S\(delay)-")
        let (f1, io1) = (flushCount(counter), ioCounters(pid))
        let perPayment = Double(f1 - f0) / Double(n)
        let bytes = Double(io1.writeBytes - io0.writeBytes) / Double(n)
        let wchar = Double(io1.wchar - io0.wchar) / Double(n)
        print("flush +\(delay) ms: publish -> first audible sample (\(latencies.count)): \(percentiles(latencies))   (goal p50 <= 3 ms, p99 <= 10 ms)")
        print(String(format: "flush +%d ms: %.2f flushes per payment (goal <= 2); written per payment: %.1f KiB to the disk (write_bytes), %.1f KiB in write calls; a day of 2,000: %.1f MB",
                     delay, perPayment, bytes / 1024, wchar / 1024, bytes * 2000 / 1e6))
        guard delay == delays.last else { continue }

        // A backlog published while soundboxd was down.
        rig.stopDaemon()
        let ids = (0..<backlog).map { "B\($0)" }
        for id in ids { try rig.backend.pay(id: id, amount: "5.55") }
        let b0 = flushCount(counter)
        let t0 = nowUs()
        try rig.startDaemon(waitOnline: false)
        guard rig.backend.wait(timeout: 600, { ids.allSatisfy($0.queued.contains) }) else { throw BenchError("backlog not durable") }
        let seconds = Double(nowUs() - t0) / 1e6
        let flushes = flushCount(counter) - b0
        print(String(format: "flush +%d ms: backlog of %d while offline: all durable %.2f s after start = %.0f/s, %.2f flushes per message",
                     delay, backlog, seconds, Double(backlog) / seconds, Double(flushes) / Double(backlog)))
    }
}

/// The shim's counter: an 8-byte little-endian number (0 if absent).
func flushCount(_ path: String) -> UInt64 {
    guard let d = FileManager.default.contents(atPath: path), d.count >= 8 else { return 0 }
    return d.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
}

/// /proc/PID/io: bytes sent to the storage layer, and bytes passed to write calls.
func ioCounters(_ pid: Int32) -> (writeBytes: Int, wchar: Int) {
    let text = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
        text.split(separator: "\n").first { $0.hasPrefix(name + ":") }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }
    return (field("write_bytes"), field("wchar"))
}
