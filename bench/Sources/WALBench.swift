import Foundation

/// The write-ahead log under a sustained stream: a backlog of `backlog`
/// payments published while soundboxd was down, taken with every flush
/// `delay` ms slower (bench/flushdelay.c, an SD card's flushes). The -wal
/// file's size is sampled every 20 ms from the daemon's start until every
/// payment is durable (its `queued` receipt reached the backend) and then
/// until every one was spoken: its peak, its size at the end, the rate.
func walBench(voices: String, shim: String, backlog: Int, delays: [Int]) throws {
    guard FileManager.default.fileExists(atPath: shim) else { throw BenchError("no flush shim at \(shim) (bench/run builds it)") }
    for delay in delays {
        let rig = try BenchRig(name: "wal\(delay)", voices: voices)
        rig.environment = ["LD_PRELOAD": shim, "SOUNDBOX_FLUSH_DELAY_MS": "\(delay)"]
        // The session exists (and holds what is published while the daemon is down).
        try rig.startDaemon()
        rig.stopDaemon()
        let ids = (0..<backlog).map { "W\($0)" }
        for id in ids { try rig.backend.pay(id: id, amount: "5.55") }
        let wal = rig.dir + "/state/soundbox.db-wal"
        let sampler = SizeSampler(path: wal)
        let t0 = nowUs()
        try rig.startDaemon(waitOnline: false)
        guard rig.backend.wait(timeout: 3600, { ids.allSatisfy($0.queued.contains) }) else { throw BenchError("backlog not durable") }
        let seconds = Double(nowUs() - t0) / 1e6
        let atDurable = sampler.snapshot()
        guard rig.backend.wait(timeout: 3600, { ids.allSatisfy($0.played.contains) }) else { throw BenchError("backlog not spoken") }
        let atPlayed = sampler.stop()
        let db = (try? FileManager.default.attributesOfItem(atPath: rig.dir + "/state/soundbox.db")[.size] as? Int) ?? 0
        print(String(format: "wal, flush +%d ms: backlog of %d: all durable in %.1f s = %.0f/s; -wal peak %.1f MB while taking it, %.1f MB until all spoken; at the end %.1f MB (database %.1f MB)",
                     delay, backlog, seconds, Double(backlog) / seconds, Double(atDurable.peak) / 1e6,
                     Double(atPlayed.peak) / 1e6, Double(atPlayed.last) / 1e6, Double(db) / 1e6))
    }
}

/// Samples a file's size every 20 ms on a thread of its own.
final class SizeSampler: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = 0
    private var last = 0
    private var running = true

    init(path: String) {
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                var st = stat()
                let size = stat(path, &st) == 0 ? Int(st.st_size) : 0
                lock.withLock { peak = max(peak, size); last = size }
                usleep(20_000)
            }
        }
    }

    func snapshot() -> (peak: Int, last: Int) { lock.withLock { (peak, last) } }

    func stop() -> (peak: Int, last: Int) {
        lock.withLock { running = false }
        return snapshot()
    }
}
