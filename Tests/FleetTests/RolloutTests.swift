// The rollout's pure parts: stages, the threshold, what answers say, and
// its memory in the state file (docs/fleet.md "Rollout").
import Foundation
import Testing
import Soundbox
import SoundboxFleet
import FleetState

@Suite struct RolloutTests {
    @Test func stagesAreTheCanaryThenBatches() {
        let ids = (0..<25).map { "d\($0)" }
        let plan = RolloutPlan(canary: 2, batch: .percent(10), maxFailures: 5)
        let stages = plan.stages(ids)
        #expect(stages.map(\.count) == [2, 3, 3, 3, 3, 3, 3, 3, 2], "10% of 25 rounds up to 3")
        #expect(stages.flatMap { $0 } == ids, "every device once, in order")
        #expect(RolloutPlan(canary: 0, batch: .count(10)).stages(ids).map(\.count) == [10, 10, 5])
        #expect(RolloutPlan(canary: 50, batch: .count(10)).stages(ids).map(\.count) == [25], "a canary larger than the fleet is the fleet")
        #expect(plan.stages([]).isEmpty)
        #expect(RolloutPlan(canary: 1, batch: .percent(100)).stages(ids).map(\.count) == [1, 24])
    }

    @Test func theThresholdIsAShareOfTheDevicesTried() {
        let plan = RolloutPlan(canary: 1, batch: .percent(10), maxFailures: 5)
        #expect(!plan.exceeded(failures: 0, tried: 0))
        #expect(plan.exceeded(failures: 1, tried: 1), "a failed canary halts")
        #expect(!plan.exceeded(failures: 1, tried: 20), "5% exactly is allowed")
        #expect(plan.exceeded(failures: 2, tried: 32))
        #expect(!RolloutPlan(maxFailures: 100).exceeded(failures: 10, tried: 10))
        #expect(RolloutPlan(maxFailures: 0).exceeded(failures: 1, tried: 1000))
    }

    @Test(arguments: [("10%", RolloutPlan.Batch.percent(10)), ("100%", .percent(100)), ("1", .count(1)), ("500", .count(500))])
    func batchSizes(_ text: String, _ batch: RolloutPlan.Batch) throws {
        #expect(try RolloutPlan.batch(text) == batch)
    }

    @Test(arguments: ["0%", "101%", "0", "-3", "", "%", "ten", "5.5%", "9999999999"])
    func badBatchSizes(_ text: String) {
        #expect(throws: SelectorError.self) { try RolloutPlan.batch(text) }
    }

    @Test func failureSharesAreWholePercents() throws {
        #expect(try RolloutPlan.percent("5%", option: "--max-failures") == 5)
        #expect(try RolloutPlan.percent("0", option: "--max-failures") == 0)
        for bad in ["101", "-1%", "2.5%", "x", ""] {
            #expect(throws: SelectorError.self) { try RolloutPlan.percent(bad, option: "--max-failures") }
        }
    }

    /// Receipts: only an update receipt naming the rollout's request counts;
    /// hostile ones are nothing, never a crash.
    @Test func receiptsOfTheRequestOnly() {
        func e(_ json: String) -> RolloutEvidence? { RolloutEvidence.receipt(Array(json.utf8), id: "R1") }
        #expect(e(#"{"id":"R1","kind":"update","status":"downloading","progress":40}"#) == RolloutEvidence(state: .downloading, progress: 40))
        #expect(e(#"{"id":"R1","kind":"update","status":"rolled back","reason":"not healthy"}"#) == RolloutEvidence(state: .rolledBack, reason: "not healthy"))
        #expect(e(#"{"id":"R1","kind":"update","status":"committed"}"#)?.state == .committed)
        #expect(e(#"{"id":"R2","kind":"update","status":"committed"}"#) == nil, "another request")
        #expect(e(#"{"id":"R1","status":"played"}"#) == nil, "a payment's receipt")
        #expect(e(#"{"id":"R1","kind":"update","status":"exploded"}"#) == nil)
        #expect(e(#"{"id":"R1","kind":"update","status":"installing","progress":1e99}"#) == RolloutEvidence(state: .installing))
        #expect(e(#"[1,2"#) == nil)
        #expect(e("{\"id\":\"R1\",\"kind\":\"update\",\"status\":\"failed\",\"reason\":\"" + String(repeating: "x", count: 20_000) + "\"}") == nil, "oversized")
        let long = e("{\"id\":\"R1\",\"kind\":\"update\",\"status\":\"failed\",\"reason\":\"" + String(repeating: "x", count: 5000) + "\"}")
        #expect(long?.state == .failed && (long?.reason?.utf8.count ?? 0) < 330, "a long reason is cut")
    }

    @Test func statusesSayWhereADeviceStands() {
        var d = DeviceRecord(id: "a")
        d.version = "0.1.0"
        #expect(RolloutEvidence.status(d, id: "R1", version: "0.2.0") == nil)
        d.updateState = "installing"; d.updateProgress = 30; d.updateID = "R1"
        #expect(RolloutEvidence.status(d, id: "R1", version: "0.2.0") == RolloutEvidence(state: .installing, progress: 30))
        d.updateState = "rolled back"; d.updateReason = "bad"; d.updateProgress = nil
        #expect(RolloutEvidence.status(d, id: "R1", version: "0.2.0") == RolloutEvidence(state: .rolledBack, reason: "bad"))
        #expect(RolloutEvidence.status(d, id: "R0", version: "0.2.0") == nil, "another request's rollback is not this one's")
        d.updateID = nil; d.version = "0.2.1"
        #expect(RolloutEvidence.status(d, id: "R1", version: "0.2.0")?.state == .committed, "newer already")
        d.version = "not a version"
        #expect(RolloutEvidence.status(d, id: "R1", version: "0.2.0") == nil)
    }

    /// The state file keeps a rollout and its devices across processes;
    /// one process at a time drives it.
    @Test func theStateFileKeepsARollout() throws {
        let dir = "/tmp/sbx-rollout-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state/fleet.db"
        var r = RolloutRecord(id: "R1", url: "http://u/b.raucb", sha256: String(repeating: "a", count: 64), version: "0.2.0", size: 42,
                              prefix: "soundbox/v1", plan: RolloutPlan(canary: 3, batch: .count(7), maxFailures: 4), timeout: 600, created: 100)
        do {
            let state = try FleetState(path: path)
            try state.begin(r, devices: [RolloutDevice(id: "a", stage: 0), RolloutDevice(id: "b", stage: 1), RolloutDevice(id: "c", stage: -1, state: .already)])
            #expect(throws: (any Error).self) { try state.begin(r, devices: []) }
            var a = RolloutDevice(id: "a", stage: 0, state: .rolledBack)
            a.reason = "not healthy"; a.sentAt = 123
            try state.save("R1", [a])
            try state.set("R1", phase: .running, reason: nil, stage: 1)
            guard let lock = state.driverLock() else { Issue.record("no lock"); return }
            #expect(FleetStateTestPeer(path).lockTaken, "a second driver is refused")
            close(lock)
        }
        let again = try FleetState(path: path)
        r.stage = 1
        #expect(try again.rollout(nil) == r)
        #expect(try again.rollout("R1") == r)
        #expect(try again.rollout("R9") == nil)
        let devices = try again.devices(of: "R1")
        #expect(devices.map(\.id) == ["c", "a", "b"])
        #expect(devices[1].state == .rolledBack && devices[1].reason == "not healthy" && devices[1].sentAt == 123)
        #expect(try again.halt("R1", reason: "halted by the operator"))
        #expect(try !again.halt("R1", reason: "again"), "halting twice changes nothing")
        #expect(try again.rollout("R1")?.phase == .halted)
        let lock = again.driverLock()
        #expect(lock != nil, "the lock went with the first process's descriptor")
        if let lock { close(lock) }
    }
}

/// Another handle on the same state file, as a second process would open it.
struct FleetStateTestPeer {
    let lockTaken: Bool
    init(_ path: String) {
        // flock locks belong to the open file description: a new open() is another owner.
        let fd = open(path + ".rollout.lock", O_RDWR)
        lockTaken = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0
        if fd >= 0 { close(fd) }
    }
}
