import Foundation
import Testing
import Soundbox
import SoundboxStore
import TestSupport
import TestRig

@Suite struct LifecycleTests {
    /// SIGTERM while speaking: exits 0, soon, leaving the payment being
    /// spoken `playing` (it was cut, not finished: ~9 s of speech); it is
    /// spoken again at the next start and ends `played`.
    @Test func sigtermStopsQuicklyAndKeepsTheEntryBeingSpoken() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.null_realtime": "true"])
        try daemon.start()
        #expect(try daemon.request("say", "99999999.99", "--id", "LONG")["status"] == "queued")
        _ = try daemon.until("status") { $0["state"] == "speaking" }
        let (status, seconds) = daemon.stop()
        #expect(status == 0)
        // Generous on purpose (a loaded machine): the daemon's own 2 s stop
        // deadline is checked by a dedicated test. `playing` below is the
        // evidence that the speech was cut rather than waited for.
        #expect(seconds < 4, "\(seconds) s")
        #expect(try Store(path: daemon.database).entry(id: "LONG")?.state == .playing)

        try daemon.reconfigure(["audio.null_realtime": "false"])
        try daemon.start()
        #expect(try daemon.request("idle", "30").ack == nil)
        _ = daemon.stop()
        let entry = try #require(try Store(path: daemon.database).entry(id: "LONG"))
        #expect(entry.state == .played)
        #expect(entry.plays == 2)
        #expect(LogEvents(daemon.log(run: 2)).ids("speaking") == ["LONG"])
    }

    /// With WATCHDOG_USEC set, the daemon sends keep-alives while healthy,
    /// and STOPPING=1 on SIGTERM.
    @Test func watchdogKeepAlivesAndStopping() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start(extraEnv: ["WATCHDOG_USEC": "200000"])
        let notify = try #require(daemon.notify)
        #expect(notify.receive(timeout: 5) == "WATCHDOG=1")
        #expect(notify.receive(timeout: 5) == "WATCHDOG=1")
        daemon.process?.terminate()
        var seen: [String] = []
        while let m = notify.receive(timeout: 5) {
            seen.append(m)
            if m == "STOPPING=1" { break }
        }
        #expect(seen.last == "STOPPING=1")
        #expect(daemon.waitExit() == 0)
    }

    @Test func invalidConfigExits78NamingFileLineAndValues() throws {
        let scratch = Scratch()
        let conf = scratch.path + "/bad.conf"
        try "# comment\naudio.volume = 12\n".write(toFile: conf, atomically: true, encoding: .utf8)
        for args in [["--config", conf], ["--config", conf, "--check-config"]] {
            // Bounded: a daemon that accepted the file would run on; it is killed.
            let r = try CommandRun([Build.soundboxd] + args, timeout: 30)
            #expect(!r.timedOut, "soundboxd kept running with a bad config")
            #expect(r.status == 78)
            #expect(r.stderr == "soundboxd: \(conf):2: audio.volume = '12' is not allowed; expected an integer 0-10\n")
        }
    }

    /// SIGHUP re-reads the file; a broken file on reload keeps the old settings.
    @Test func sighupReloads() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.volume": "3"])
        let p = try daemon.start()
        #expect(try daemon.request("status")["volume"] == "3")
        try daemon.reconfigure(["audio.volume": "9"])
        kill(p.processIdentifier, SIGHUP)
        _ = try daemon.until("status") { $0["volume"] == "9" }
        try "audio.volume = loud\n".write(toFile: daemon.dir + "/soundbox.conf", atomically: true, encoding: .utf8)
        kill(p.processIdentifier, SIGHUP)
        _ = try daemon.until("status") { _ in daemon.log(run: 1).contains("reload_failed") }
        #expect(try daemon.request("status")["volume"] == "9")
        #expect(daemon.stop().0 == 0)
    }

    /// A garbage database: the daemon runs (no crash loop), announces from
    /// memory, and status and doctor say what is wrong and what to do.
    @Test func corruptDatabaseRunsFromMemoryAndDoctorSaysWhatToDo() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try FileManager.default.createDirectory(atPath: daemon.dir + "/state", withIntermediateDirectories: true)
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: daemon.database))
        try daemon.start()
        let say = try daemon.request("say", "12.30", "--id", "C1")
        #expect(say["status"] == "queued")
        #expect(say["durable"] == "false")
        #expect(try daemon.request("idle", "30").ack == nil)
        let status = try daemon.request("status")
        #expect(status["durable"] == "false")
        #expect(status["faults"]?.contains("storage") == true)
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let db = try #require(doctor.first { $0.first?.value == "database" })
        #expect(db.first { $0.key == "status" }?.value == "fail")
        #expect(db.first { $0.key == "hint" }?.value.contains("mv \(daemon.database) \(daemon.database).broken") == true)
        #expect(daemon.stop().0 == 0)
        #expect(LogEvents(daemon.log(run: 1)).ids("played") == ["C1"])
    }

    /// A WAL cut short (power cut mid-write): SQLite drops the torn tail;
    /// the daemon starts and what was committed before is there.
    @Test func truncatedWALStartsCleanly() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.mute": "true"])
        try daemon.start()
        for i in 1...30 { _ = try daemon.request("say", "\(i)", "--id", "W\(i)") }
        #expect(try daemon.request("idle", "30").ack == nil)
        daemon.kill9()   // no checkpoint: the entries live in the WAL
        let wal = daemon.database + "-wal"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int)
        #expect(size > 0)
        #expect(truncate(wal, off_t(size / 2)) == 0)
        try daemon.start()
        #expect(try daemon.request("status")["faults"] == "none")
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        #expect(doctor.first { $0.first?.value == "database" }?.first { $0.key == "status" }?.value == "ok")
        _ = daemon.stop()
        let entries = try Store(path: daemon.database).history(limit: 100)
        #expect(try Store(path: daemon.database).quickCheck() == "ok")
        #expect(entries.map(\.seq) == Array((1...Int64(entries.count)).reversed()), "a prefix survives")
    }

    /// Disk full (a file-size limit): announcements still happen, receipts
    /// say durable false, status and doctor report the fault.
    @Test func diskFullStillAnnounces() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        daemon.wrapper = ["/usr/bin/prlimit", "--fsize=196608", "--"]
        try daemon.start()
        var durable: [String] = []
        for i in 1...60 {
            let r = try daemon.request("say", "\(i).50", "--id", "F\(i)")
            #expect(r["status"] == "queued")
            durable.append(r["durable"] ?? "?")
        }
        #expect(durable.first == "true")
        #expect(durable.last == "false", "the limit was never reached")
        #expect(try daemon.request("idle", "60").ack == nil)
        let status = try daemon.request("status")
        #expect(status["durable"] == "false")
        #expect(status["faults"]?.contains("storage") == true)
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let db = try #require(doctor.first { $0.first?.value == "database" })
        #expect(db.first { $0.key == "detail" }?.value.contains("writes fail") == true)
        #expect(daemon.stop().0 == 0)
        let played = LogEvents(daemon.log(run: 1)).ids("played")
        #expect(played == (1...60).map { "F\($0)" }, "every payment announced, in order")
    }

    /// The stale rule applies only with a synchronised clock.
    @Test(arguments: [("synced", "expired"), ("unsynced", "played")])
    func staleRuleNeedsASynchronisedClock(_ clock: String, _ expected: String) throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.null_realtime": "true", "queue.stale_after_s": "1"])
        try daemon.start(extraEnv: ["SOUNDBOX_TEST_CLOCK": clock])
        _ = try daemon.request("say", "11.11", "--id", "FIRST")         // ~3 s of speech
        _ = try daemon.request("say", "1", "--id", "SECOND")            // waits its turn, > 1 s
        _ = try daemon.until("status") { $0["state"] == "speaking" }
        _ = try daemon.request("config", "set", "audio.null_realtime", "false")
        #expect(try daemon.request("idle", "60").ack == nil)
        _ = daemon.stop()
        let second = try #require(try Store(path: daemon.database).entry(id: "SECOND"))
        #expect(second.state.rawValue == expected)
        let receipts = try Store(path: daemon.database).outbox(limit: 100).map(\.payload)
        #expect(receipts.contains { $0.hasPrefix("{\"id\":\"SECOND\",\"status\":\"\(expected)\"") })
    }

    /// audio.min_volume: a payment is spoken at least that loud, whatever
    /// the user's level, which stays as it was. What reached the WAV output
    /// equals `soundboxctl render` at the minimum level, byte for byte.
    @Test func paymentsNeverQuieterThanTheMinimum() throws {
        let scratch = Scratch()
        let wav = scratch.path + "/out.wav", reference = scratch.path + "/ref.wav"
        let daemon = try Daemon(dir: scratch.path, config: ["audio.output": "wav", "audio.wav_file": wav,
                                                            "audio.volume": "1", "audio.min_volume": "8"])
        try daemon.start()
        _ = try daemon.request("say", "42.10", "--id", "V1")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(try daemon.request("status")["volume"] == "1")
        #expect(daemon.stop().0 == 0)
        let render = try CtlRun(daemon, ["--voices", Build.root + "/voices", "render", "42.10", "-o", reference, "--volume", "8", "--channel", "local"])
        #expect(render.status == 0)
        let spoken = try Data(contentsOf: URL(fileURLWithPath: wav)), expected = try Data(contentsOf: URL(fileURLWithPath: reference))
        #expect(spoken.count > 44 && spoken == expected)
    }

    /// Issue 18 item 9: by default the WAV output is soundbox.wav in
    /// state.dir (not /tmp, where anyone may plant a link), and a restarted
    /// daemon appends to it, as documented: the file holds both runs'
    /// announcements exactly as render makes them, its header counting both.
    @Test func wavOutputDefaultsToTheStateFolderAndAppendsAcrossRuns() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.output": "wav"])
        let wav = daemon.dir + "/state/soundbox.wav"
        var sizes: [Int] = []
        var expected = Data()
        for (run, amount) in ["1.00", "23.45"].enumerated() {
            try daemon.start()
            #expect(try daemon.request("status")["output"] == "wav:\(wav)")
            _ = try daemon.request("say", amount, "--id", "W\(run)")
            #expect(try daemon.request("idle", "30").ack == nil)
            #expect(daemon.stop().0 == 0)
            sizes.append((try? Data(contentsOf: URL(fileURLWithPath: wav)).count) ?? 0)
            let reference = scratch.path + "/ref\(run).wav"
            #expect(try CtlRun(daemon, ["--voices", Build.root + "/voices", "render", amount, "-o", reference, "--channel", "local"]).status == 0)
            expected += try Data(contentsOf: URL(fileURLWithPath: reference)).dropFirst(44)
        }
        #expect(sizes[0] > 44 && sizes[1] > sizes[0], "the second run appended: \(sizes)")
        let data = try Data(contentsOf: URL(fileURLWithPath: wav))
        func le32(_ at: Int) -> Int { data.dropFirst(at).prefix(4).reversed().reduce(0) { $0 << 8 | Int($1) } }
        #expect(le32(4) == data.count - 8 && le32(40) == data.count - 44, "RIFF and data sizes")
        #expect(data.dropFirst(44) == expected)
    }

    /// Issue 18 item 9, in the daemon: audio.wav_file that is a symbolic
    /// link, a FIFO or a second hard link of another file is never written;
    /// the payment fails with the reason (audio fault), the player is not
    /// stuck, and the other file is unchanged.
    @Test(arguments: ["symlink", "fifo", "hardlink"])
    func wavOutputNeverWritesThroughALinkOrIntoAFIFO(_ kind: String) throws {
        let scratch = Scratch()
        let folder = scratch.path + "/public", target = scratch.path + "/shadow", wav = folder + "/soundbox.wav"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let precious = Data("root:x:0:0:root:/root:/bin/sh\n".utf8)
        try precious.write(to: URL(fileURLWithPath: target))
        let what: String
        switch kind {
        case "symlink":
            try FileManager.default.createSymbolicLink(atPath: wav, withDestinationPath: target)
            what = "is a symbolic link (to \(target)), not a regular file"
        case "fifo":
            #expect(mkfifo(wav, 0o600) == 0)
            what = "is a FIFO, not a regular file"
        default:
            #expect(link(target, wav) == 0)
            what = "has 2 hard links"
        }
        let daemon = try Daemon(dir: scratch.path, config: ["audio.output": "wav", "audio.wav_file": wav])
        try daemon.start()
        _ = try daemon.request("say", "5", "--id", "L1")
        #expect(try daemon.request("idle", "30").ack == nil, "the player is not stuck")
        #expect(try daemon.request("history", "1")["state"] == "failed")
        #expect(try daemon.request("status")["faults"]?.contains("audio") == true)
        #expect(daemon.stop().0 == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == precious)
        let failed = logLines(daemon.log(run: 1)).first { $0.event == "audio_failed" }
        #expect(failed?["error"]?.contains("\(wav) \(what)") == true, "\(daemon.log(run: 1))")
    }

    /// No GPIO chip: the daemon runs without buttons, says so once per
    /// line at start, and doctor names each line and why.
    @Test func missingGPIOChipIsReportedNotFatal() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["gpio.enabled": "true", "gpio.chip": "no-such-chip", "gpio.led.line": "-1"])
        try daemon.start()
        _ = try daemon.request("say", "3", "--id", "G1")
        #expect(try daemon.request("idle", "30").ack == nil)
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let gpio = try #require(doctor.first { $0.first?.value == "gpio" })
        #expect(gpio.first { $0.key == "status" }?.value == "fail")
        let detail = gpio.first { $0.key == "detail" }?.value ?? ""
        for fn in ["mute: no-such-chip line 17", "vol_up: no-such-chip line 27", "vol_down: no-such-chip line 22"] {
            #expect(detail.contains(fn), "\(detail)")
        }
        #expect(!detail.contains("led: no-such-chip"), "a line set to -1 is not fitted, not a fault")
        #expect(daemon.stop().0 == 0)
        let log = daemon.log(run: 1)
        #expect(log.components(separatedBy: "gpio: line_unavailable").count - 1 == 3)
        #expect(LogEvents(log).ids("played") == ["G1"])
    }

    /// Muting in the middle of an announcement cuts it and records the
    /// payment `muted`, with its receipt. The evidence is the outcome, not a
    /// stopwatch: a payment that had started (`plays` 1, `speaking` logged)
    /// and finished its speech would end `played`.
    @Test func muteMidAnnouncementCutsIt() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.null_realtime": "true"])
        try daemon.start()
        _ = try daemon.request("say", "99999999.99", "--id", "CUT")   // ~9 s of speech
        try daemon.until("status") { $0["state"] == "speaking" }
        _ = try daemon.request("config", "set", "audio.mute", "true")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)
        let entry = try #require(try Store(path: daemon.database).entry(id: "CUT"))
        #expect(entry.state == .muted, "cut, not finished")
        #expect(entry.plays == 1, "it had started")
        let events = LogEvents(daemon.log(run: 1)).events.filter { $0.fields["id"] == "CUT" }.map(\.event)
        #expect(events == ["queued", "speaking", "muted"], "\(events)")
        #expect(try Store(path: daemon.database).outbox(limit: 10).map(\.payload).contains { $0.hasPrefix(#"{"id":"CUT","status":"muted""#) })
    }

    /// Mute records payments as `muted`, not spoken; they stay replayable.
    @Test func muteRecordsWithoutSpeaking() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["audio.mute": "true"])
        try daemon.start()
        _ = try daemon.request("say", "5", "--id", "M1")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(try daemon.request("replay", "M1")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        _ = daemon.stop()
        #expect(try Store(path: daemon.database).entry(id: "M1")?.state == .muted)
        let log = LogEvents(daemon.log(run: 1))
        #expect(log.ids("speaking").isEmpty)
        #expect(log.ids("muted") == ["M1"])
        #expect(log.ids("replaying") == ["M1"])
    }
}
