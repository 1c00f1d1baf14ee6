import Foundation
import Testing
import SoundboxStore
import TestSupport
import TestRig

/// An LD_PRELOAD shim built from the checkout's C source `source` for the
/// tests (once per run; a C compiler: scripts/test installs gcc).
enum CShim {
    static func build(_ source: String) -> Result<String, TestFailure> {
        let name = source.split(separator: "/").last!.split(separator: ".").first!
        let out = "/tmp/sbx-\(name)-\(getpid()).so"
        let cc = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let cc else { return .failure(TestFailure("no C compiler for \(source) (scripts/test installs gcc)")) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: cc)
        p.arguments = ["-shared", "-fPIC", "-O2", "-o", out, Build.root + "/" + source, "-ldl"]
        do { try p.run() } catch { return .failure(TestFailure("\(cc): \(error)")) }
        p.waitUntilExit()
        return p.terminationStatus == 0 ? .success(out) : .failure(TestFailure("\(cc) failed on \(source)"))
    }
}

/// bench/flushdelay.c built for the tests: soundboxd's fsync/fdatasync
/// calls counted, and slowed down on demand (docs/soundboxd.md, "Flushes").
enum FlushShim {
    static let library = CShim.build("bench/flushdelay.c")

    /// The environment that runs soundboxd under the shim, counting into
    /// `counter` and sleeping as many ms as `delayFile` says (if given).
    static func environment(counter: String, delayFile: String? = nil) throws -> [String: String] {
        var env = ["LD_PRELOAD": try library.get(), "SOUNDBOX_FLUSH_COUNT": counter]
        if let delayFile { env["SOUNDBOX_FLUSH_DELAY_FILE"] = delayFile }
        return env
    }

    /// The shim's counter (0 before the first flush).
    static func count(_ counter: String) -> UInt64 {
        guard let d = FileManager.default.contents(atPath: counter), d.count >= 8 else { return 0 }
        return d.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }
}

@Suite struct FlushTests {
    /// One flush makes the payment durable before its PUBACK, one its final
    /// state before the next starts: nothing else flushes (receipts taken
    /// by the broker, `playing`, the checkpoint at 4000 frames not reached).
    @Test func atMostTwoFlushesPerPayment() throws {
        let link = try Link()
        let counter = link.scratch.path + "/flushes"
        link.daemon.environment = try FlushShim.environment(counter: counter)
        try link.start()
        try link.backend.pay(id: "WARM", amount: "1")
        #expect(link.backend.waitForReceipts(["WARM"], ["played"]))
        let before = FlushShim.count(counter)
        let ids = (1...40).map { "F\($0)" }
        for id in ids {
            try link.backend.pay(id: id, amount: "12.34")
            #expect(link.backend.waitForReceipts([id], ["played"]))
        }
        // Every receipt taken by the broker (their deletion is not flushed).
        #expect(try link.daemon.until("status") { $0["receipts_pending"] == "0" }["receipts_pending"] == "0")
        let flushes = FlushShim.count(counter) - before
        #expect(flushes <= 2 * UInt64(ids.count), "\(flushes) flushes for \(ids.count) payments")
        #expect(flushes >= UInt64(ids.count), "\(flushes) flushes for \(ids.count) payments: is the shim loaded?")
        _ = link.daemon.stop()
        #expect(try link.entries().filter { ids.contains($0.payment.id) }.allSatisfy { $0.state == .played && $0.plays == 1 })
    }

    /// Speaking starts as soon as the payment is committed, while its flush
    /// runs; the PUBACK and the receipts wait for the flush. Killed while
    /// the flush is under way (the shim holds it for 30 s), the broker still
    /// has the message unacknowledged and delivers it again: `duplicate`,
    /// and one entry.
    @Test func speakingStartsBeforeTheFlushAndThePUBACKWaitsForIt() throws {
        let link = try Link()
        let counter = link.scratch.path + "/flushes", delay = link.scratch.path + "/delay-ms"
        try "0".write(toFile: delay, atomically: true, encoding: .utf8)
        link.daemon.environment = try FlushShim.environment(counter: counter, delayFile: delay)
        try link.start()
        let before = FlushShim.count(counter)
        try "30000".write(toFile: delay, atomically: true, encoding: .utf8)
        try link.backend.pay(id: "SLOW", amount: "4.56")
        // The payment's flush has begun (the shim counts, then sleeps 30 s) ...
        #expect(pollUntil(timeout: 20) { FlushShim.count(counter) > before })
        let flushing = Date()
        // ... and it is spoken meanwhile.
        #expect(pollUntil(timeout: 20) { link.daemon.log(run: 1).contains("speaking id=SLOW") })
        #expect(Date().timeIntervalSince(flushing) < 25, "spoken only after the flush?")
        // Its `queued` receipt waits for the flush too: a malformed payment
        // wakes the receipt sender, whose own flush waits for that one.
        try link.backend.pay(#"{"id":"BAD","amount":"x"}"#)
        #expect(!link.backend.waitUntil(timeout: 3) { !link.backend.receipts(for: "SLOW").isEmpty || !link.backend.receipts(for: "BAD").isEmpty },
                "a receipt left before the flush: \(link.backend.receipts(for: "SLOW")) \(link.backend.receipts(for: "BAD"))")
        link.daemon.kill9()
        try "0".write(toFile: delay, atomically: true, encoding: .utf8)
        try link.start()
        #expect(link.backend.waitForReceipts(["SLOW"], ["duplicate"]), "the broker did not deliver it again: a PUBACK left before the flush")
        _ = link.daemon.stop()
        #expect(try link.entries().filter { $0.payment.id == "SLOW" }.count == 1)
    }
}

/// Idle, connected to its broker: the daemon sleeps until something
/// happens. Over a quiet window far shorter than the keep-alive (60 s), no
/// thread of it runs at all (libmosquitto's loop woke every second before,
/// the panel every 5 s).
@Suite struct IdleTests {
    /// Context switches per thread (name: count) of `pid`.
    static func switches(_ pid: Int32) -> [String: Int] {
        var out: [String: Int] = [:]
        let base = "/proc/\(pid)/task"
        for task in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
            let text = (try? String(contentsOfFile: "\(base)/\(task)/status", encoding: .utf8)) ?? ""
            var name = task, n = 0
            for line in text.split(separator: "\n") {
                if line.hasPrefix("Name:") { name = "\(line.dropFirst(5).trimmingCharacters(in: .whitespaces))/\(task)" }
                if line.contains("ctxt_switches") { n += Int(line.split(separator: "\t").last ?? "") ?? 0 }
            }
            out[name] = n
        }
        return out
    }

    @Test func anIdleConnectedDaemonDoesNotWake() throws {
        let link = try Link(config: ["mqtt.keepalive": "60"])
        try link.start()
        try link.backend.pay(id: "I1", amount: "1")
        #expect(link.backend.waitForReceipts(["I1"], ["played"]))
        // Settled: the receipts taken, the last status published.
        #expect(try link.daemon.until("status") { $0["receipts_pending"] == "0" }["receipts_pending"] == "0")
        #expect(link.backend.waitUntil(timeout: 20) {
            link.backend.status?["last_id"] as? String == "I1" && link.backend.status?["queue_depth"] as? Int == 0
        })
        let pid = try #require(link.daemon.process?.processIdentifier)
        // Quiet windows of 4 s (measured, not waited for): one with no thread
        // running at all is the proof; three, so that one late event of a
        // loaded machine (a receipt, a reconnect) cannot fail the test,
        // while anything periodic (every 4 s or more often) fails all three.
        var windows: [String] = []
        for _ in 0..<3 {
            let before = Self.switches(pid)
            Thread.sleep(forTimeInterval: 4)
            let woke = Self.switches(pid).filter { thread, count in count > (before[thread] ?? -1) }
            if woke.isEmpty { return }
            windows.append(woke.map { "\($0.key) +\($0.value - (before[$0.key] ?? 0))" }.sorted().joined(separator: " "))
        }
        Issue.record("threads ran in every quiet window: \(windows); log: \(link.daemon.log(run: 1).split(separator: "\n").suffix(6))")
    }
}
