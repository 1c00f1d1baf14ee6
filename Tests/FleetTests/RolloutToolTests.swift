// soundbox-fleet rollout against a real mosquitto and simulated boxes
// (FleetSim: each its own connection, answering the update command with
// receipts and a reboot onto the new version, or a rollback).
import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxCrypto
import FleetSim

@Suite struct RolloutToolTests {
    static let sha = String(repeating: "ab", count: 32)

    struct Fleet {
        let scratch = Scratch()
        let broker: Broker
        let key: BackendKey
        let sims: SimulatedFleet
        var state: String { scratch.path + "/fleet.db" }

        init(_ ids: [String], failing: Set<String> = [], step: Double = 0.3) throws {
            broker = try Broker(dir: scratch.path + "/broker")
            key = try BackendKey(dir: scratch.path + "/keys", name: "backend")
            var o = SimulatedFleet.Options(port: broker.port, ids: ids)
            o.backendKey = key.key.publicKey
            o.failing = failing
            o.step = step
            sims = SimulatedFleet(o)
            try sims.start()
            #expect(sims.wait(timeout: 30) { $0.connected == ids.count }, "\(sims.snapshot)")
        }

        func argv(_ args: [String]) -> [String] {
            [Build.fleet, "--port", "\(broker.port)", "--timeout", "20", "--state", state] + args
        }

        func run(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> (status: Int32, json: [String: Any], stderr: String) {
            let r = try CommandRun(argv(["--json"] + args), environment: ["PATH": "/usr/bin:/bin"], timeout: 120)
            #expect(!r.timedOut, "\(args) still running after 120 s", sourceLocation: sourceLocation)
            let j = ((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any]) ?? [:]
            // With --json, an error is {"error", "code"} on stdout.
            return (r.status, j, r.stderr + ((j["error"] as? String) ?? ""))
        }

        func rollout(_ version: String, _ extra: [String]) -> [String] {
            ["rollout", "http://updates.example/soundbox-\(version).raucb", "--version", version, "--sha256", RolloutToolTests.sha,
             "--key", key.privatePath] + extra
        }
    }

    static func ids(_ range: Range<Int>) -> [String] { range.map { "r-" + ($0 < 10 ? "0\($0)" : "\($0)") } }

    /// A rollout killed with SIGKILL in its second stage is still "running"
    /// in the state file; `rollout resume` carries on from there: every
    /// device updated, none sent the update a second time.
    @Test func resumesAfterKill9() throws {
        let fleet = try Fleet(Self.ids(0..<30))
        let tool = try CLIProcess(fleet.argv(fleet.rollout("0.2.0", ["--canary", "2", "--batch", "7", "--id", "R-kill"])))
        #expect(fleet.sims.wait(timeout: 60) { $0.updatesTaken >= 5 }, "the second stage began: \(fleet.sims.snapshot)")
        tool.kill9()
        let status = try fleet.run(["rollout", "status"])
        #expect(status.status == 0 && status.json["phase"] as? String == "running" && status.json["id"] as? String == "R-kill", "\(status)")
        #expect((status.json["stage"] as? Int ?? 0) >= 1, "past the canary: \(status.json)")
        let busyCheck = try fleet.run(["rollout", "resume", "R-kill"])
        #expect(busyCheck.status == 2 || busyCheck.stderr.contains("--key"), "resume signs: it needs the key")

        let resumed = try fleet.run(["rollout", "resume", "--key", fleet.key.privatePath])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.json["phase"] as? String == "done")
        #expect((resumed.json["counts"] as? [String: Int])?["committed"] == 30, "\(resumed.json["counts"] ?? "")")
        #expect(fleet.sims.snapshot.updatesTaken == 30 && fleet.sims.snapshot.updatesRefused == 0, "each device took it once: \(fleet.sims.snapshot)")
        #expect(Self.ids(0..<30).allSatisfy { fleet.sims.version(of: $0) == "0.2.0" })
        let again = try fleet.run(["rollout", "resume", "--key", fleet.key.privatePath])
        #expect(again.status == 1 && again.stderr.contains("R-kill is done"), "\(again.stderr)")
    }

    /// Failures past the threshold halt the rollout in the stage where they
    /// happen: later devices are never sent it. The operator's `rollout
    /// halt` stops a running one from another terminal.
    @Test func haltsAtTheThresholdAndByTheOperator() throws {
        let fleet = try Fleet(Self.ids(0..<60), failing: Set(Self.ids(30..<40)), step: 0.1)
        // Stages: 2, then 6 each (10% of 60): r-30 and r-31 fail in the sixth (r-26…r-31): 2 of 32 > 5%.
        let halted = try fleet.run(fleet.rollout("0.3.0", ["--canary", "2", "--batch", "10%", "--max-failures", "5%", "--wait", "60", "r-*"]))
        #expect(halted.status == 1, "\(halted.stderr)")
        #expect(halted.json["phase"] as? String == "halted")
        #expect((halted.json["reason"] as? String)?.contains("2 of 32 devices failed") == true, "\(halted.json["reason"] ?? "")")
        let counts = halted.json["counts"] as? [String: Int] ?? [:]
        #expect(counts["committed"] == 30 && counts["rolled back"] == 2 && counts["pending"] == 28, "\(counts)")
        let devices = halted.json["devices"] as? [[String: Any]] ?? []
        let back = devices.first { $0["id"] as? String == "r-30" }
        #expect(back?["state"] as? String == "rolled back" && (back?["reason"] as? String)?.contains("not healthy") == true, "\(back ?? [:])")
        #expect(fleet.sims.version(of: "r-45") == "0.1.0" && fleet.sims.snapshot.updatesTaken == 32, "never sent past the stage: \(fleet.sims.snapshot)")
        let resume = try fleet.run(["rollout", "resume", "--key", fleet.key.privatePath])
        #expect(resume.status == 1 && resume.stderr.contains("halted"), "a halted rollout is not resumed: \(resume.stderr)")

        // The operator halts one in progress: the tool stops within its next check.
        let tool = try CLIProcess(fleet.argv(["--json"] + fleet.rollout("0.3.0", ["--canary", "1", "--batch", "1", "--id", "R-stop", "r-4*", "r-5*"])))
        #expect(fleet.sims.wait(timeout: 60) { $0.updatesTaken >= 34 }, "\(fleet.sims.snapshot)")
        let stop = try fleet.run(["rollout", "halt"])
        #expect(stop.status == 0, "\(stop.stderr)")
        #expect(tool.waitExit(timeout: 30) == 1, "\(tool.output)")
        let after = try fleet.run(["rollout", "status", "R-stop"])
        #expect(after.json["phase"] as? String == "halted" && after.json["reason"] as? String == "halted by the operator")
        #expect(((after.json["counts"] as? [String: Int])?["pending"] ?? 0) >= 15, "\(after.json["counts"] ?? "")")
        let twice = try fleet.run(["rollout", "halt", "R-stop"])
        #expect(twice.status == 1 && twice.stderr.contains("not running"))
    }

    /// Bad rollouts are refused before anything is sent or stored.
    @Test func badRolloutsAreRefused() throws {
        let fleet = try Fleet(Self.ids(0..<2))
        let url = "http://u.example/b.raucb"
        for (args, status, words) in [
            (["rollout", url, "--sha256", Self.sha], 2, "--version"),
            (["rollout", url, "--version", "0.2.0"], 2, "--sha256"),
            (["rollout", "ftp://u.example/b.raucb", "--version", "0.2.0", "--sha256", Self.sha], 2, "is not http"),
            (["rollout", url, "--version", "new", "--sha256", Self.sha], 2, "not a Debian version"),
            (["rollout", url, "--version", "0.2.0", "--sha256", "ABC"], 2, "64 lowercase hex"),
            (["rollout", url, "--version", "0.2.0", "--sha256", Self.sha, "--batch", "0%"], 2, "--batch"),
            (["rollout", url, "--version", "0.2.0", "--sha256", Self.sha, "--max-failures", "101%"], 2, "--max-failures"),
            (["rollout", url, "--version", "0.2.0", "--sha256", Self.sha, "--canary", "-1"], 2, "--canary"),
            (["rollout", url, "--version", "0.2.0", "--sha256", Self.sha], 2, "--key"),
            (["rollout", url, "--version", "0.2.0", "--sha256", Self.sha, "--key", fleet.key.privatePath, "nobody-*"], 1, "no device matches"),
            (["rollout", "status"], 1, "no rollout in"),
            (["rollout", "frob"], 2, "usage: rollout URL"),
        ] {
            let r = try fleet.run(args)
            #expect(r.status == Int32(status) && r.stderr.contains(words), "\(args): \(r.status) \(r.stderr)")
        }
        #expect(fleet.sims.snapshot.updatesTaken == 0)
        // Devices already on the version (or newer) are left out.
        let same = try fleet.run(fleet.rollout("0.1.0", []))
        #expect(same.status == 0 && (same.json["counts"] as? [String: Int])?["already"] == 2, "\(same.json) \(same.stderr)")
        #expect(fleet.sims.snapshot.updatesTaken == 0)
    }
}
