import Foundation
import Soundbox
import Testing
import TestSupport
import TestRig

/// Issue 18, field defects: settings saved on Windows, huge values, and
/// files that are not regular files (a FIFO blocks a reader forever) must
/// give a prompt, exact error, never a hang or a silent misreading. Every
/// run is bounded: a regression fails, it does not hang the suite.
@Suite struct HostileFileTests {
    @Test func checkConfigOfACRLFFileFindsTheBadLine() throws {
        let scratch = Scratch()
        let conf = scratch.path + "/win.conf"
        try "# saved by Notepad\r\naudio.volume = 99\r\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let r = try CommandRun([Build.soundboxd, "--config", conf, "--check-config"], timeout: 30)
        #expect(r.status == 78)
        #expect(r.stderr == "soundboxd: \(conf):2: audio.volume = '99' is not allowed; expected an integer 0-10\n")
    }

    /// A FIFO as the settings file: an error at once, not a reader blocked
    /// until a writer comes.
    @Test func checkConfigOfAFIFOReturnsAtOnce() throws {
        let scratch = Scratch()
        let fifo = scratch.path + "/fifo.conf"
        #expect(mkfifo(fifo, 0o644) == 0)
        let r = try CommandRun([Build.soundboxd, "--config", fifo, "--check-config"], timeout: 15)
        #expect(!r.timedOut, "soundboxd --check-config hangs on a FIFO")
        #expect(r.status == 78)
        #expect(r.stderr == "soundboxd: \(fifo): is a FIFO (named pipe), not a regular file\n")
    }

    /// A 10 MB value: refused by the file's size, and not echoed.
    @Test func aTenMegabyteSettingIsRefusedShortly() throws {
        let scratch = Scratch()
        let conf = scratch.path + "/big.conf"
        try ("device.id = " + String(repeating: "x", count: 10_000_000) + "\n").write(toFile: conf, atomically: true, encoding: .utf8)
        let r = try CommandRun([Build.soundboxd, "--config", conf, "--check-config"], timeout: 30)
        #expect(r.status == 78)
        #expect(r.stderr == "soundboxd: \(conf): is 10000013 bytes, more than the 65536 allowed\n")
    }

    /// A raw client ending its lines with CRLF is understood.
    @Test func aRawClientSendingCRLFIsAnswered() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        let c = try HardeningClient(daemon.socket)
        #expect(c.readLine(timeout: 10)?.hasPrefix(ControlProtocol.greetingPrefix) == true)
        #expect(c.send("status\r\n"))
        var lines: [String] = []
        while let line = c.readLine(timeout: 10) {
            lines.append(line)
            if line == "OK" || line.hasPrefix("ACK") { break }
        }
        #expect(lines.last == "OK", "\(lines)")
        #expect(lines.contains { $0.hasPrefix("volume: ") })
        #expect(daemon.stop().0 == 0)
    }

    /// A FIFO as a pack's clip: the daemon starts, says which clip is
    /// broken, speaks (the clip is skipped) and stops on SIGTERM.
    @Test func aFIFOAsAClipDoesNotHangTheDaemon() throws {
        let scratch = Scratch()
        let voices = scratch.path + "/voices"
        try FileManager.default.createDirectory(atPath: voices, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Build.root + "/voices/zh-CN", toPath: voices + "/zh-CN")
        try FileManager.default.removeItem(atPath: voices + "/zh-CN/一.mp3")
        #expect(mkfifo(voices + "/zh-CN/一.mp3", 0o644) == 0)
        let daemon = try Daemon(dir: scratch.path, config: ["voice.dir": voices])
        try daemon.start(timeout: 30)
        #expect(try daemon.request("say", "2", "--id", "F1")["status"] == "queued")
        #expect(try daemon.request("idle", "20").ack == nil)
        #expect(daemon.stop().0 == 0)
        let log = daemon.log(run: 1)
        #expect(log.contains("clip_broken") && log.contains("FIFO"), "\(log)")
    }

    /// A FIFO as the broker's CA file (libmosquitto's fopen would block
    /// for ever): the daemon says so and exits.
    @Test func aFIFOAsTheCAFileIsRefusedAtOnce() throws {
        let scratch = Scratch()
        #expect(mkfifo(scratch.path + "/ca.crt", 0o644) == 0)
        let daemon = try Daemon(dir: scratch.path, config: ["mqtt.enabled": "true", "mqtt.host": "127.0.0.1", "mqtt.port": "1",
                                                            "mqtt.tls.ca": scratch.path + "/ca.crt"])
        let error = #expect(throws: TestFailure.self) { try daemon.start(timeout: 20) }
        #expect(error?.description.contains("exited") == true, "\(String(describing: error))")
        #expect(daemon.log(run: 1).contains("\(scratch.path)/ca.crt) failed: is a FIFO (named pipe), not a regular file"), "\(daemon.log(run: 1))")
    }

    /// A FIFO among the signing keys is ignored with its reason, not read.
    @Test func aFIFOAmongTheKeysIsIgnoredWithItsReason() throws {
        let scratch = Scratch()
        let keys = scratch.path + "/keys"
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        #expect(mkfifo(keys + "/backend.pem", 0o644) == 0)
        let daemon = try Daemon(dir: scratch.path, config: ["payment.signing": "required", "payment.keys": keys])
        try daemon.start(timeout: 30)
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let signing = try #require(doctor.first { $0.first?.value == "signing" })
        #expect(signing.first { $0.key == "detail" }?.value.contains("\(keys)/backend.pem: is a FIFO (named pipe), not a regular file") == true, "\(signing)")
        #expect(daemon.stop().0 == 0)
    }
}
