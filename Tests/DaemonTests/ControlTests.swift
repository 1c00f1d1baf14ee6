import Foundation
import Testing
import Soundbox
import SoundboxStore
import TestSupport
import TestRig

/// Runs the real soundboxctl against a real daemon (bounded: a hung
/// soundboxctl is killed and the test fails, see `CommandRun`).
struct CtlRun {
    let status: Int32
    let stdout: String
    let stderr: String

    init(_ daemon: Daemon, _ args: [String], prefix: [String] = [],
         sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try CommandRun(prefix + [Build.soundboxctl, "--socket", daemon.socket] + args,
                               environment: ["PATH": "/usr/bin:/bin"], timeout: 120)
        #expect(!r.timedOut, "soundboxctl \(args) still running after 120 s (killed)", sourceLocation: sourceLocation)
        (status, stdout, stderr) = (r.status, r.stdout, r.stderr)
    }

    func json() throws -> [String: Any] {
        guard let j = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw TestFailure("not a JSON object: \(stdout)")
        }
        return j
    }
}

/// Every online command through soundboxctl --json, against soundboxd.
@Suite struct ControlTests {
    @Test func everyCommandAsJSON() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        func ctl(_ args: String...) throws -> (Int32, [String: Any]) {
            let r = try CtlRun(daemon, ["--json"] + args)
            return (r.status, try r.json())
        }

        var (rc, j) = try ctl("status")
        #expect(rc == 0)
        #expect(j["version"] as? String == soundboxVersion)
        #expect(j["queue_depth"] as? Int == 0)
        #expect(j["durable"] as? Bool == true)
        #expect(j["muted"] as? Bool == false)
        #expect(j["output"] as? String == "null")
        #expect(j["receipts_pending"] as? Int == 0)

        (rc, j) = try ctl("say", "120000.50", "--id", "J1")
        #expect(rc == 0 && j["status"] as? String == "queued" && j["durable"] as? Bool == true)
        (rc, j) = try ctl("say", "120000.50", "--id", "J1")
        #expect(rc == 0 && j["status"] as? String == "duplicate")
        (rc, j) = try ctl("say", "100000000", "--id", "J2")
        #expect(rc == 1 && j["status"] as? String == "rejected")
        #expect(j["reason"] as? String == "amount is above the limit of 99999999.99")

        (rc, j) = try ctl("wait", "--timeout", "30")
        #expect(rc == 0 && j["queue_depth"] as? Int == 0)
        (rc, j) = try ctl("queue")
        #expect(rc == 0 && (j["entries"] as? [Any])?.isEmpty == true)

        (rc, j) = try ctl("history", "--limit", "5")
        let entries = try #require(j["entries"] as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["id"] as? String == "J1")
        #expect(entries.first?["state"] as? String == "played")
        #expect(entries.first?["amount"] as? String == "120000.50")
        #expect(entries.first?["plays"] as? Int == 1)

        (rc, j) = try ctl("replay")
        #expect(rc == 0 && j["id"] as? String == "J1")
        (rc, j) = try ctl("replay", "nope")
        #expect(rc == 1 && j["code"] as? String == "ack_50")

        (rc, j) = try ctl("volume", "9")
        #expect(rc == 0 && j["volume"] as? Int == 9)
        (rc, j) = try ctl("volume", "up")
        #expect(j["volume"] as? Int == 10)
        (rc, j) = try ctl("volume", "up")
        #expect(j["volume"] as? Int == 10, "capped at 10")
        (rc, j) = try ctl("config", "get", "audio.volume")
        #expect(rc == 0 && j["audio.volume"] as? String == "10")
        (rc, j) = try ctl("config", "set", "queue.stale_after_s", "30")
        #expect(rc == 0 && j["queue.stale_after_s"] as? String == "30")
        (rc, j) = try ctl("config", "set", "queue.stale_after_s", "-1")
        #expect(rc == 1 && (j["error"] as? String)?.contains("expected an integer 0-604800") == true)
        (rc, j) = try ctl("config", "set", "state.dir", "/tmp")
        #expect(rc == 1 && (j["error"] as? String)?.contains("only takes effect at start") == true)
        (rc, j) = try ctl("config", "get")
        #expect(j.count == ConfigKey.all.count)

        (rc, j) = try ctl("test-audio")
        #expect(rc == 0 && j["output"] as? String == "null")
        #expect(j["duration_ms"] is Int)

        let doctor = try CtlRun(daemon, ["--json", "doctor"])
        let checks = try #require(try doctor.json()["checks"] as? [[String: Any]])
        #expect(checks.map { $0["check"] as? String } == ["audio", "voice", "broker", "gpio", "database", "disk", "clock", "signing", "provisioning", "update", "config"])
        #expect(checks.first { $0["check"] as? String == "database" }?["status"] as? String == "ok")
        // The clock is reported unsynchronised here (warn), which is not a failure.
        #expect(doctor.status == 0, "\(doctor.stdout)")

        // Settings survive a restart (persisted overlay).
        _ = daemon.stop()
        try daemon.start()
        (rc, j) = try ctl("status")
        #expect(j["volume"] as? Int == 10)
        #expect(daemon.stop().0 == 0)
    }

    @Test func socketIsGroupOnlyAndOtherUsersAreRefused() throws {
        let scratch = Scratch()
        chmod(scratch.path, 0o755)
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        var st = stat()
        #expect(stat(daemon.socket, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o660)
        #expect(getuid() == 0, "this test needs root, to act as another user")

        // Open the file permissions so only the peer-credential check stands.
        chmod(daemon.socket, 0o666)
        let other = try CtlRun(daemon, ["--json", "status"], prefix: ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        #expect(other.status == 1)
        #expect(try other.json()["code"] as? String == "ack_4")
        let mine = try CtlRun(daemon, ["status"])
        #expect(mine.status == 0)
        _ = daemon.stop()
        #expect(daemon.log(run: 1).contains("control: refused uid=65534"))
    }
}
