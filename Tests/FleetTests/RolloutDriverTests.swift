// The rollout's driver over scripted sequences: events in, actions out,
// no broker and no state file (docs/fleet.md "Rollout").
import Testing
import Soundbox
import SoundboxFleet

@Suite struct RolloutDriverTests {
    static let prefix = "soundbox/v1"

    static func record(canary: Int = 1, batch: RolloutPlan.Batch = .count(2), maxFailures: Int = 50, timeout: Int = 600) -> RolloutRecord {
        RolloutRecord(id: "R1", url: "https://u/b.raucb", sha256: String(repeating: "a", count: 64), version: "0.2.0", size: nil,
                      prefix: prefix, plan: RolloutPlan(canary: canary, batch: batch, maxFailures: maxFailures), timeout: timeout, created: 0)
    }

    /// An inventory of these devices' statuses: online on 0.1.0 unless said.
    static func inventory(online: [String], offline: [String] = [], on020: [String] = []) -> Inventory {
        var inv = Inventory(prefix: prefix)
        for id in online { inv.ingest(topic: "\(prefix)/\(id)/status", payload: Array(#"{"online":true,"id":"\#(id)","version":"0.1.0"}"#.utf8)) }
        for id in offline { inv.ingest(topic: "\(prefix)/\(id)/status", payload: Array(#"{"online":false,"id":"\#(id)"}"#.utf8)) }
        for id in on020 { inv.ingest(topic: "\(prefix)/\(id)/status", payload: Array(#"{"online":true,"id":"\#(id)","version":"0.2.0"}"#.utf8)) }
        return inv
    }

    /// The stages of `ids` by the record's plan, as `rollout` stores them.
    static func driver(_ ids: [String], _ record: RolloutRecord = record(), inventory: Inventory) -> RolloutDriver {
        let devices = record.plan.stages(ids).enumerated().flatMap { n, stage in stage.map { RolloutDevice(id: $0, stage: n) } }
        return RolloutDriver(record: record, devices: devices, inventory: inventory)
    }

    static func receipt(_ device: String, _ status: String, reason: String? = nil) -> RolloutDriver.Event {
        let why = reason.map { #","reason":"\#($0)""# } ?? ""
        return .message(topic: "\(prefix)/\(device)/receipt", payload: Array(#"{"id":"R1","kind":"update","status":"\#(status)"\#(why)}"#.utf8))
    }

    static func sends(_ actions: [RolloutDriver.Action]) -> [String]? {
        for case .send(let ids) in actions { return ids }
        return nil
    }

    static func records(_ actions: [RolloutDriver.Action]) -> [RolloutDriver.Action] {
        actions.filter { if case .record = $0 { true } else if case .finished = $0 { true } else { false } }
    }

    /// The canary first, then each batch only once the stage before it has
    /// all its final answers; done when the last stage is.
    @Test func stagesFollowOneAnother() {
        var d = Self.driver(["a", "b", "c"], inventory: Self.inventory(online: ["a", "b", "c"]))
        #expect(d.stages == 2)
        #expect(Self.sends(d.handle(.begin(wall: 100))) == ["a"], "the canary alone")
        let acked = d.handle(.acknowledged(wall: 100))
        #expect(acked.contains { if case .save(let s) = $0 { s.first?.state == .sent && s.first?.sentAt == 100 } else { false } })
        #expect(Self.sends(d.handle(.tick(wall: 101, stored: .running, reason: nil))) == nil, "no answer yet: the batch waits")
        _ = d.handle(Self.receipt("a", "downloading"))
        #expect(d.devices["a"]?.state == .downloading)
        #expect(Self.sends(d.handle(.tick(wall: 102, stored: .running, reason: nil))) == nil, "not final yet")
        _ = d.handle(Self.receipt("a", "committed"))
        let next = d.handle(.tick(wall: 103, stored: .running, reason: nil))
        #expect(Self.sends(next) == ["b", "c"])
        #expect(Self.records(next) == [.record(.running, reason: nil, stage: 1)])
        _ = d.handle(.acknowledged(wall: 103))
        _ = d.handle(Self.receipt("b", "committed"))
        _ = d.handle(Self.receipt("c", "committed"))
        let end = d.handle(.tick(wall: 104, stored: .running, reason: nil))
        #expect(Self.records(end) == [.record(.done, reason: nil, stage: 2), .finished])
        #expect(d.record.phase == .done)
        #expect(d.handle(.tick(wall: 105, stored: .running, reason: nil)).isEmpty, "nothing after the end")
    }

    /// A failed canary passes the threshold at once: the rollout halts and
    /// no batch is sent.
    @Test func aFailedCanaryHalts() {
        var d = Self.driver(["a", "b", "c"], Self.record(maxFailures: 5), inventory: Self.inventory(online: ["a", "b", "c"]))
        _ = d.handle(.begin(wall: 0))
        _ = d.handle(.acknowledged(wall: 0))
        _ = d.handle(Self.receipt("a", "rolled back", reason: "not healthy"))
        let actions = d.handle(.tick(wall: 1, stored: .running, reason: nil))
        #expect(Self.sends(actions) == nil)
        #expect(Self.records(actions) == [.record(.halted, reason: "1 of 1 devices failed: more than 5%", stage: 0), .finished])
        #expect(d.devices["a"]?.reason == "not healthy" && d.devices["b"]?.state == .pending)
    }

    /// Offline devices are not sent the command and not counted; a device
    /// already on the version needs nothing; a stage of only those ends at
    /// the next tick.
    @Test func offlineAndAlreadyAreNotSent() {
        var d = Self.driver(["a", "b", "c"], Self.record(canary: 2), inventory: Self.inventory(online: ["c"], offline: ["a"], on020: ["b"]))
        let begin = d.handle(.begin(wall: 0))
        #expect(Self.sends(begin) == nil)
        #expect(d.devices["a"]?.state == .offline && d.devices["b"]?.state == .already)
        #expect(begin.contains { if case .save(let s) = $0 { s.map(\.id) == ["a", "b"] } else { false } }, "kept at once")
        #expect(Self.sends(d.handle(.tick(wall: 1, stored: .running, reason: nil))) == ["c"])
        #expect(d.tally == (tried: 0, failures: 0), "not tried until acknowledged")
    }

    /// A device that gives no final answer in time is timed out (a failure,
    /// with its last state); a late answer still counts.
    @Test func silenceTimesOut() {
        var d = Self.driver(["a"], Self.record(maxFailures: 100, timeout: 60), inventory: Self.inventory(online: ["a"]))
        _ = d.handle(.begin(wall: 1000))
        _ = d.handle(.acknowledged(wall: 1000))
        _ = d.handle(Self.receipt("a", "installing"))
        #expect(Self.records(d.handle(.tick(wall: 1059, stored: .running, reason: nil))).isEmpty)
        let late = d.handle(.tick(wall: 1060, stored: .running, reason: nil))
        #expect(d.devices["a"]?.state == .timedOut && d.devices["a"]?.reason == "no final answer within 60 s (last: installing)")
        #expect(Self.records(late) == [.record(.done, reason: nil, stage: 1), .finished], "100% allowed: the rollout ends")
        var e = Self.driver(["a", "b", "c"], Self.record(canary: 2, maxFailures: 100, timeout: 60), inventory: Self.inventory(online: ["a", "b", "c"]))
        _ = e.handle(.begin(wall: 0)); _ = e.handle(.acknowledged(wall: 0))
        #expect(Self.sends(e.handle(.tick(wall: 60, stored: .running, reason: nil))) == ["c"], "both timed out, within 100%: the next stage")
        _ = e.handle(Self.receipt("a", "committed"))
        #expect(e.devices["a"]?.state == .committed, "a timed-out device's late answer is taken")
    }

    /// `rollout halt` from another terminal: the driver stops at its next
    /// tick with the operator's reason and records nothing over it.
    @Test func theOperatorHalts() {
        var d = Self.driver(["a", "b"], inventory: Self.inventory(online: ["a", "b"]))
        _ = d.handle(.begin(wall: 0)); _ = d.handle(.acknowledged(wall: 0))
        let actions = d.handle(.tick(wall: 1, stored: .halted, reason: "halted by the operator"))
        #expect(Self.records(actions) == [.finished])
        #expect(d.record.phase == .halted && d.record.reason == "halted by the operator")
    }

    /// Resumed after the tool was killed: a device sent the command before
    /// is updated from its retained status, and the stage under way goes on
    /// without sending it again.
    @Test func aResumeReadsRetainedStatuses() {
        var record = Self.record()
        record.stage = 0
        var a = RolloutDevice(id: "a", stage: 0, state: .sent); a.sentAt = 0
        var inv = Inventory(prefix: Self.prefix)
        inv.ingest(topic: "\(Self.prefix)/a/status",
                   payload: Array(#"{"online":true,"id":"a","version":"0.1.0","update":{"state":"trying","id":"R1","version":"0.2.0"}}"#.utf8))
        var d = RolloutDriver(record: record, devices: [a, RolloutDevice(id: "b", stage: 1)], inventory: inv)
        #expect(d.devices["a"]?.state == .trying)
        #expect(Self.sends(d.handle(.begin(wall: 10))) == nil, "a was sent it before the restart")
        _ = d.handle(.message(topic: "\(Self.prefix)/b/status", payload: Array(#"{"online":true,"id":"b","version":"0.1.0"}"#.utf8)))
        _ = d.handle(.message(topic: "\(Self.prefix)/a/status", payload: Array(#"{"online":true,"id":"a","version":"0.2.0","since_ms":5}"#.utf8)))
        #expect(d.devices["a"]?.state == .committed, "now running the version")
        #expect(Self.sends(d.handle(.tick(wall: 11, stored: .running, reason: nil))) == ["b"], "b came online: sent")
    }

    /// Hostile or stray messages change nothing: another rollout's receipt,
    /// a device outside the rollout, a topic outside the prefix, garbage.
    @Test func strayMessagesChangeNothing() {
        var d = Self.driver(["a"], inventory: Self.inventory(online: ["a"]))
        _ = d.handle(.begin(wall: 0)); _ = d.handle(.acknowledged(wall: 0))
        let before = d.devices
        let stray: [RolloutDriver.Event] = [
            .message(topic: "\(Self.prefix)/a/receipt", payload: Array(#"{"id":"R2","kind":"update","status":"failed"}"#.utf8)),
            .message(topic: "\(Self.prefix)/zz/receipt", payload: Array(#"{"id":"R1","kind":"update","status":"failed"}"#.utf8)),
            .message(topic: "other/a/receipt", payload: Array(#"{"id":"R1","kind":"update","status":"failed"}"#.utf8)),
            .message(topic: "\(Self.prefix)/a/receipt", payload: [0xff, 0xfe, 0x00]),
            .message(topic: "\(Self.prefix)/../receipt", payload: Array(#"{"id":"R1","kind":"update","status":"failed"}"#.utf8)),
            .message(topic: "\(Self.prefix)/a/status", payload: Array(#"{"online":true,"id":"b"}"#.utf8)),
        ]
        for e in stray { #expect(d.handle(e).isEmpty) }
        #expect(d.devices == before)
        #expect(d.tally == (tried: 1, failures: 0))
    }
}
