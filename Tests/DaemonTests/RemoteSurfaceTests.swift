import Foundation
import Testing
import Soundbox
import SoundboxStore
import TestSupport
import TestRig

/// The lines of a daemon log, parsed exactly (values may hold spaces and quotes).
func logLines(_ text: String) -> [LogLine.Parsed] { text.split(separator: "\n").compactMap(LogLine.parse) }

/// VmRSS of a process in kB.
func residentKB(_ pid: Int32) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// What a hostile backend (or a careless technician) may change remotely:
/// only the allow-list; never files, outputs, devices, or a voice pack
/// outside voice.dir (issue "Hardening", items 1, 2, 3, 8, 15, 16).
@Suite struct RemoteSurfaceTests {
    /// Remote config naming the database as the WAV file (or an ALSA
    /// `file:` device) is refused; nothing is written; the dedup records
    /// survive, so a redelivered payment is not announced again.
    @Test func remoteConfigCannotMakeTheDaemonWriteFiles() throws {
        let link = try Link()
        try link.start()
        let canary = link.scratch.path + "/canary.txt"
        try "keep me".write(toFile: canary, atomically: true, encoding: .utf8)
        try link.backend.pay(id: "R1", amount: "1.00")
        #expect(link.backend.waitForReceipts(["R1"], ["played"]))

        let topic = link.backend.topics.config
        try link.backend.publish(topic, #"{"audio.output":"wav","audio.wav_file":"\#(link.daemon.database)"}"#)
        try link.backend.publish(topic, #"{"audio":{"device":"file:'\#(canary)',raw"}}"#)
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.count == 2 })
        let first = try #require(link.backend.applied.first?["rejected"] as? [String: String])
        #expect(first.keys.sorted() == ["audio.output", "audio.wav_file"])
        #expect(first["audio.wav_file"]?.contains("only takes effect at start") == true)
        #expect((link.backend.applied.last?["rejected"] as? [String: String])?.keys.sorted() == ["audio.device"])

        // The technician's tool cannot either.
        for (key, value) in [("audio.wav_file", canary), ("audio.output", "wav"), ("audio.device", "file:'\(canary)',raw")] {
            let r = try link.daemon.request("config", "set", key, value)
            #expect(r.ack?.message.contains("only takes effect at start") == true, "\(key)")
        }

        try link.backend.pay(id: "R2", amount: "2.00")
        try link.backend.pay(id: "R1", amount: "1.00")
        #expect(link.backend.waitForReceipts(["R2"], ["played"]))
        #expect(link.backend.waitForReceipts(["R1"], ["duplicate"]))
        #expect(try link.daemon.request("status")["output"] == "null")
        #expect(try String(contentsOfFile: canary, encoding: .utf8) == "keep me")
        #expect(link.daemon.stop().0 == 0)
        #expect(try Store(path: link.daemon.database).quickCheck() == "ok")
        #expect(LogEvents(link.daemon.log(run: 1)).ids("played") == ["R1", "R2"])
    }

    /// An overlay written by an older soundboxd (when outputs and files
    /// could be set at runtime) is not obeyed: those entries are dropped
    /// at start, and said so.
    @Test func anOldOverlayCannotSetFileOnlyKeys() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let canary = scratch.path + "/canary.txt"
        try "keep me".write(toFile: canary, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: daemon.dir + "/state", withIntermediateDirectories: true)
        try Store(path: daemon.database).updateOverlay(["audio.output": "wav", "audio.wav_file": canary, "audio.volume": "3"])
        try daemon.start()
        _ = try daemon.request("say", "12.50", "--id", "O1")
        #expect(try daemon.request("idle", "30").ack == nil)
        let status = try daemon.request("status")
        #expect(status["output"] == "null" && status["volume"] == "3")
        #expect(daemon.stop().0 == 0)
        #expect(try String(contentsOfFile: canary, encoding: .utf8) == "keep me")
        let ignored = logLines(daemon.log(run: 1)).filter { $0.event == "overlay_ignored" }.compactMap { $0["key"] }
        #expect(ignored.sorted() == ["audio.output", "audio.wav_file"])
        #expect(try Store(path: daemon.database).overlay() == ["audio.volume": "3"])
    }

    /// voice.lang, `say --lang` and remote config accept only installed
    /// packs, by their names (any case); never a path.
    @Test func onlyInstalledVoicePacksByName() throws {
        let link = try Link()
        try link.start()
        let d = link.daemon
        for bad in ["xx", "../../etc", "zh-CN/./.", "/usr/share", ""] {
            let r = try d.request("config", "set", "voice.lang", bad)
            #expect(r.ack != nil, "\(bad)")
            if !bad.isEmpty && !bad.contains("/") {
                #expect(r.ack?.message.contains("an installed voice pack (as-IN, bn-IN, en-IN, gu-IN, hi-IN, kn-IN, ml-IN, mr-IN, or-IN, pa-IN, ta-IN, te-IN, ur-IN, zh-CN)") == true, "\(r.ack?.message ?? "")")
            }
            #expect(try d.request("say", "1", "--lang", bad).ack != nil, "\(bad)")
        }
        #expect(try d.request("config", "set", "voice.lang", "en-in")["voice.lang"] == "en-IN")
        #expect(try d.request("say", "2.50", "--lang", "ZH-cn", "--id", "V1")["status"] == "queued")

        try link.backend.publish(link.backend.topics.config, #"{"voice.lang":"../zh-CN"}"#)
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.count == 1 })
        #expect((link.backend.applied.first?["rejected"] as? [String: String])?["voice.lang"] != nil)

        // A payment asking for a pack that is not here is read by voice.lang, and status and doctor say so.
        try link.backend.pay(#"{"id":"V2","amount":"3.00","lang":"sw-KE"}"#)
        #expect(link.backend.waitForReceipts(["V1", "V2"], ["played"]))
        let status = try d.request("status")
        #expect(status["voices_missing"] == "sw-KE")
        #expect(status["voices"] == "as-IN,bn-IN,en-IN,gu-IN,hi-IN,kn-IN,ml-IN,mr-IN,or-IN,pa-IN,ta-IN,te-IN,ur-IN,zh-CN", "the installed packs")
        let doctor = try d.request("doctor").pairs.records(startingWith: "check")
        let voice = try #require(doctor.first { $0.first?.value == "voice" })
        #expect(voice.first { $0.key == "status" }?.value == "warn")
        #expect(voice.first { $0.key == "detail" }?.value.contains("sw-KE") == true)
        #expect(try d.request("config", "get", "voice.lang")["voice.lang"] == "en-IN")
        #expect(d.stop().0 == 0)
    }

    /// Each installed pack is decoded once: asking for it under many
    /// spellings does not grow memory (it grew 113 MB for 130 aliases).
    @Test func spellingsOfAPackDoNotGrowMemory() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let p = try daemon.start()
        _ = try daemon.request("say", "1", "--id", "warm-up")
        #expect(try daemon.request("idle", "30").ack == nil)
        let before = residentKB(p.processIdentifier)
        // en-IN, En-IN, eN-IN ...: every case pattern of its 4 letters, 4 times over.
        var spellings: [String] = []
        for mask in 0..<16 {
            var c = Array("en-in")
            for (bit, i) in [0, 1, 3, 4].enumerated() where (mask >> bit) & 1 == 1 { c[i] = Character(c[i].uppercased()) }
            spellings.append(String(c))
        }
        for i in 0..<64 {
            #expect(try daemon.request("say", "1.25", "--lang", spellings[i % 16], "--id", "A\(i)")["status"] == "queued")
        }
        #expect(try daemon.request("idle", "60").ack == nil)
        let grown = residentKB(p.processIdentifier) - before
        #expect(grown < 4096, "RSS grew \(grown) kB")
        #expect(daemon.stop().0 == 0)
        #expect(LogEvents(daemon.log(run: 1)).ids("played").count == 65)
    }

    /// A voice.lang that is not installed is a bad line in the file.
    @Test func aVoiceLangThatIsNotInstalledIsABadConfigLine() throws {
        let scratch = Scratch()
        let conf = scratch.path + "/s.conf"
        try "voice.dir = \(Build.root)/voices\nvoice.lang = xx\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let run = try CommandRun([Build.soundboxd, "--config", conf, "--check-config"])
        #expect(run.status == 78)
        #expect(run.stderr == "soundboxd: \(conf):2: voice.lang = 'xx' is not allowed; expected an installed voice pack (as-IN, bn-IN, en-IN, gu-IN, hi-IN, kn-IN, ml-IN, mr-IN, or-IN, pa-IN, ta-IN, te-IN, ur-IN, zh-CN in \(Build.root)/voices)\n")
    }

    /// A payment or command that arrives retained (the broker hands out
    /// retained messages again at every subscription: after a restart, a
    /// reconnect, a database reset) is refused; a retained config already
    /// applied is not applied again, so it does not undo what the merchant
    /// changed since. (Published while the device listens, a retained
    /// message is forwarded without the flag: that first one is a normal
    /// delivery.)
    @Test func retainedPaymentsAndCommandsAreRefusedAndARetainedConfigDoesNotUndoLocalChanges() throws {
        let link = try Link()
        try link.start()
        let b = link.backend
        try b.publish(b.topics.payment, #"{"id":"RET1","amount":"9.99"}"#, retain: true)
        try b.publish(b.topics.cmd, #"{"cmd":"say","id":"RET2","amount":"1"}"#, retain: true)
        try b.publish(b.topics.config, #"{"audio.volume":4}"#, retain: true)
        #expect(b.waitForReceipts(["RET1", "RET2"], ["played"]))
        #expect(b.waitUntil(timeout: 20) { b.status?["volume"] as? Int == 4 })
        #expect(try link.daemon.request("volume", "7")["volume"] == "7")

        // A restart: the broker delivers the retained messages again, flagged.
        _ = link.daemon.stop()
        try link.start()
        #expect(b.waitForReceipts(["RET1"], ["rejected"]))
        #expect(b.receipts.first { $0["id"] as? String == "RET1" && $0["status"] as? String == "rejected" }?["reason"] as? String
                == PaymentMessage.retainedReason)
        try b.pay(id: "SYNC", amount: "1")
        #expect(b.waitForReceipts(["SYNC"], ["played"]))
        #expect(try link.daemon.request("status")["volume"] == "7")
        let log = logLines(link.daemon.log(run: 2))
        #expect(log.contains { $0.event == "config_unchanged" })
        #expect(log.filter { $0.event == "cmd_rejected" && $0["reason"]?.hasPrefix("retained") == true }.count == 1)
        #expect(!log.contains { $0.event == "cmd" }, "the retained command did not run again")
        #expect(b.receipts(for: "RET1").filter { $0 == "played" }.count == 1)

        // A new retained config is applied.
        try b.publish(b.topics.config, #"{"audio.volume":5}"#, retain: true)
        #expect(b.waitUntil(timeout: 20) { b.status?["volume"] as? Int == 5 })
        #expect(link.daemon.stop().0 == 0)
    }

    /// SIGHUP with a key that needs a restart: the old value stays in use,
    /// and the log, `config get`, `status` and `doctor` say so.
    @Test func sighupWithRestartOnlyKeysSaysARestartIsNeeded() throws {
        let scratch = Scratch()
        let a = scratch.path + "/a.wav", b = scratch.path + "/b.wav"
        let daemon = try Daemon(dir: scratch.path, config: ["audio.output": "wav", "audio.wav_file": a])
        let p = try daemon.start()
        try daemon.reconfigure(["audio.wav_file": b, "audio.volume": "9"])
        kill(p.processIdentifier, SIGHUP)
        try daemon.until("status") { $0["volume"] == "9" }
        let status = try daemon.request("status")
        #expect(status["restart_needed"] == "audio.wav_file")
        let get = try daemon.request("config", "get", "audio.wav_file")
        #expect(get["audio.wav_file"] == a)
        #expect(get["restart_needed"] == "the file now says '\(b)'")
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let config = try #require(doctor.first { $0.first?.value == "config" })
        #expect(config.first { $0.key == "status" }?.value == "warn")
        #expect(config.first { $0.key == "detail" }?.value.contains("audio.wav_file (in use: '\(a)', file: '\(b)')") == true)
        _ = try daemon.request("say", "3", "--id", "H1")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)
        #expect(FileManager.default.fileExists(atPath: a) && !FileManager.default.fileExists(atPath: b))
        #expect(logLines(daemon.log(run: 1)).contains { $0.event == "restart_needed" && $0["keys"] == "audio.wav_file" })
    }

    /// The fallback chain end to end (docs/grammars.md): a payment's lang,
    /// else voice.lang, else any pack that reads its currency, else the
    /// chime — never another currency's word; `amount_minor` must be an
    /// integer.
    @Test func theFallbackChainEndToEnd() throws {
        let link = try Link(config: ["log.level": "debug"])
        try link.start()
        let b = link.backend
        try b.pay(#"{"id":"U1","amount":"5","currency":"INR","lang":"hi-IN"}"#)     // its lang
        try b.pay(#"{"id":"U2","amount":"5","lang":"sw-KE"}"#)                        // not installed: voice.lang
        try b.pay(#"{"id":"U3","amount":"5","currency":"CNY","lang":"en-IN"}"#)     // en-IN reads INR: voice.lang
        try b.pay(#"{"id":"U4","amount":"5","currency":"INR"}"#)                      // voice.lang reads CNY: any pack
        try b.pay(#"{"id":"U5","amount":"5","currency":"USD"}"#)                      // no pack: the chime
        try b.pay(#"{"id":"U6","amount_minor":"500"}"#)
        #expect(b.waitForReceipts(["U6"], ["rejected"]))
        #expect(b.waitForReceipts(["U1", "U2", "U3", "U4", "U5"], ["played"]))
        func receipt(_ id: String, _ status: String) -> [String: Any]? {
            b.receipts.first { $0["id"] as? String == id && $0["status"] as? String == status }
        }
        #expect((receipt("U6", "rejected")?["reason"] as? String)?.hasPrefix("amount_minor must be an integer") == true)
        #expect(receipt("U5", "played")?["reason"] as? String
                == "chime: no installed voice pack reads USD (INR: as-IN bn-IN en-IN gu-IN hi-IN kn-IN ml-IN mr-IN or-IN pa-IN ta-IN te-IN ur-IN; CNY: zh-CN)")
        #expect(receipt("U4", "played")?["reason"] == nil)
        #expect(link.daemon.stop().0 == 0)
        let clips = logLines(link.daemon.log(run: 1)).filter { $0.event == "clips" }
        func pack(_ id: String) -> String? { clips.first { $0["id"] == id }?["pack"] }
        #expect([pack("U1"), pack("U2"), pack("U3"), pack("U4")] == ["hi-IN", "zh-CN", "zh-CN", "en-IN"])
        #expect(pack("U5") == nil, "chimed, no clips")
        #expect(logLines(link.daemon.log(run: 1)).contains { $0.event == "currency_unreadable" && $0["id"] == "U5" })
    }
}


/// The image's first boot leaves `provisioning.fault` next to the settings
/// when it refused a provisioning file: the box says so (status, doctor,
/// the LED's fault) instead of running half-configured.
@Suite struct ProvisioningFaultTests {
    @Test func aRefusedProvisioningIsAFaultThatDoctorExplains() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        #expect(try daemon.request("status")["faults"] == "none")
        try "soundbox/soundbox.conf:3: audio.volume = '11' is not allowed; expected an integer 0-10\n"
            .write(toFile: daemon.dir + "/provisioning.fault", atomically: true, encoding: .utf8)
        #expect(try daemon.request("status")["faults"] == "provisioning")
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let check = try #require(doctor.first { $0.first?.value == "provisioning" })
        #expect(check.first { $0.key == "status" }?.value == "fail")
        #expect(check.first { $0.key == "detail" }?.value.hasPrefix("soundbox/soundbox.conf:3: audio.volume = '11'") == true)
        unlink(daemon.dir + "/provisioning.fault")
        #expect(try daemon.request("status")["faults"] == "none")
        #expect(daemon.stop().0 == 0)
    }
}
