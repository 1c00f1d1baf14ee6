// The fleet tool's reading of statuses and its selectors (docs/fleet.md):
// hostile statuses refused with the reason and counted, never believed;
// selectors by id, glob, file and attribute.
import Testing
import Soundbox
import SoundboxFleet

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
private let good = #"{"online":true,"id":"shop-1","version":"0.2.0","slot":"B","update":{"state":"committed","version":"0.2.0"},"boot_reason":"update","volume":6,"muted":false,"queue_depth":0,"voice":"hi-IN","last_id":"T1","durable":true,"faults":["audio"],"voices_missing":[],"uptime_s":12}"#

@Suite struct StatusTests {
    @Test func aDeviceStatusIsRead() throws {
        let r = try DeviceRecord.parse(id: "shop-1", payload: bytes(good)).get()
        #expect(r.online == true && r.version == "0.2.0" && r.slot == "B" && r.updateState == "committed")
        #expect(r.volume == 6 && r.muted == false && r.voice == "hi-IN" && r.queueDepth == 0 && r.uptime == 12)
        #expect(r.faults == ["audio"] && r.bootReason == "update" && r.updateVersion == "0.2.0")
    }

    @Test func theWillIsOffline() throws {
        let r = try DeviceRecord.parse(id: "shop-1", payload: bytes(#"{"online":false,"id":"shop-1"}"#)).get()
        #expect(r.online == false && r.version == nil)
        // An older device's will names no id: believed (it names no other either).
        #expect(try DeviceRecord.parse(id: "shop-1", payload: bytes(#"{"online":false}"#)).get().online == false)
    }

    @Test(arguments: [
        (#"{"online":true,"id":"shop-2"}"#, "other_id"),
        (#"{"online":"yes"}"#, "bad_field"),
        (#"{"volume":11}"#, "bad_field"),
        (#"{"volume":-1}"#, "bad_field"),
        (#"{"volume":6.5}"#, "bad_field"),
        (#"{"volume":1e400}"#, "bad_field"),
        (#"{"queue_depth":99999999999999999999}"#, "bad_field"),
        (#"{"faults":"storage"}"#, "bad_field"),
        (#"{"faults":["storage",1]}"#, "bad_field"),
        (#"{"faults":["a b"]}"#, "bad_field"),
        (#"{"version":"0.1\u001b[2J"}"#, "bad_field"),
        (#"{"update":"committed"}"#, "bad_field"),
        (#"{"update":{"progress":101}}"#, "bad_field"),
        ("[1,2]", "not_object"),
        ("null", "not_object"),
        ("{", "not_json"),
        (#"{"online":true,"online":false}"#, "not_json"),
        ("\u{FEFF}{}", "not_json"),
        (#"{"a":[[[[[[1]]]]]]}"#, "not_json"),
    ])
    func hostileStatusesAreRefusedWithTheReason(payload: String, kind: String) {
        switch DeviceRecord.parse(id: "shop-1", payload: bytes(payload)) {
        case .success(let r): Issue.record("believed \(payload) as \(r)")
        case .failure(let p):
            #expect(p.kind == kind, "\(payload): \(p)")
            #expect(!p.description.isEmpty)
        }
    }

    @Test func anOversizedStatusIsNotParsed() {
        let big = bytes(#"{"online":true,"x":""# + String(repeating: "a", count: DeviceRecord.maxStatusBytes) + #""}"#)
        #expect(DeviceRecord.parse(id: "shop-1", payload: big) == .failure(.oversized(big.count)))
    }

    @Test func topicsAndIDs() {
        #expect(DeviceRecord.device(inStatusTopic: "soundbox/v1/shop-1/status", prefix: "soundbox/v1") == "shop-1")
        #expect(DeviceRecord.device(inStatusTopic: "soundbox/v1/shop\u{7}1/status", prefix: "soundbox/v1") == nil)
        #expect(DeviceRecord.device(inStatusTopic: "soundbox/v1/shop 1/status", prefix: "soundbox/v1") == "shop 1", "as device.id allows")
        #expect(DeviceRecord.device(inStatusTopic: "soundbox/v1//status", prefix: "soundbox/v1") == nil)
        #expect(DeviceRecord.device(inStatusTopic: "other/shop-1/status", prefix: "soundbox/v1") == nil)
        #expect(DeviceRecord.device(inStatusTopic: "soundbox/v1/" + String(repeating: "a", count: 65) + "/status", prefix: "soundbox/v1") == nil)
    }
}

@Suite struct InventoryTests {
    @Test func aLiarIsCountedAndNotBelieved() {
        var inv = Inventory(prefix: "soundbox/v1")
        inv.ingest(topic: "soundbox/v1/shop-1/status", payload: bytes(good))
        // shop-9 claims to be shop-1 (a misconfigured ACL let it publish there).
        inv.ingest(topic: "soundbox/v1/shop-9/status", payload: bytes(#"{"online":true,"id":"shop-1","volume":0}"#))
        #expect(inv.devices["shop-1"]?.volume == 6)
        #expect(inv.devices["shop-9"] == nil)
        #expect(inv.anomalies["other_id"]?.count == 1)
        #expect(inv.anomalies["other_id"]?.examples.first?.hasPrefix("shop-9:") == true)
    }

    @Test func aFloodIsCountedOnceAndTheLastStatusKept() {
        var inv = Inventory(prefix: "p", floodLimit: 10)
        for v in 0..<1000 { inv.ingest(topic: "p/loud/status", payload: bytes(#"{"online":true,"volume":\#(v % 11)}"#)) }
        #expect(inv.anomalies["flood"]?.count == 1)
        #expect(inv.devices["loud"]?.volume == 999 % 11)
    }

    @Test func capacityBoundsTheInventory() {
        var inv = Inventory(prefix: "p", capacity: 100)
        for i in 0..<1000 { inv.ingest(topic: "p/d\(i)/status", payload: bytes(#"{"online":true}"#)) }
        #expect(inv.devices.count == 100)
        #expect(inv.anomalies["capacity"]?.count == 900)
        #expect(inv.anomalies["capacity"]?.examples.count == 5)
    }

    @Test func anEmptyRetainedStatusForgetsTheDevice() {
        var inv = Inventory(prefix: "p")
        inv.ingest(topic: "p/a/status", payload: bytes(#"{"online":true}"#))
        inv.ingest(topic: "p/a/status", payload: [])
        #expect(inv.devices.isEmpty && inv.anomalies.isEmpty)
    }

    /// A cluster's nodes each keep their own retained status: read from all
    /// of them in any order, the newest connection's status is believed,
    /// and the end of a connection (its will) beats that connection's online.
    @Test func theNewestConnectionWinsAcrossNodes() {
        let t = "soundbox/v1/shop-1/status"
        let oldOnline = bytes(#"{"online":true,"id":"shop-1","since_ms":1000,"volume":3}"#)
        let oldWill = bytes(#"{"online":false,"id":"shop-1","since_ms":1000}"#)
        let newOnline = bytes(#"{"online":true,"id":"shop-1","since_ms":2000,"volume":5}"#)
        let newWill = bytes(#"{"online":false,"id":"shop-1","since_ms":2000}"#)
        for order in [[oldOnline, newOnline], [newOnline, oldOnline], [oldWill, newOnline], [newOnline, oldWill]] {
            var inv = Inventory(prefix: "soundbox/v1")
            for p in order { inv.ingest(topic: t, payload: p) }
            #expect(inv.devices["shop-1"]?.online == true && inv.devices["shop-1"]?.volume == 5, "moved to another node: online there")
        }
        for order in [[oldOnline, newWill], [newWill, oldOnline], [newOnline, newWill], [newWill, newOnline]] {
            var inv = Inventory(prefix: "soundbox/v1")
            for p in order { inv.ingest(topic: t, payload: p) }
            #expect(inv.devices["shop-1"]?.online == false, "its newest connection ended: offline, whatever a stale node says")
        }
        var old = Inventory(prefix: "soundbox/v1")
        old.ingest(topic: t, payload: newOnline)
        old.ingest(topic: t, payload: bytes(#"{"online":false,"id":"shop-1"}"#))
        #expect(old.devices["shop-1"]?.online == false, "without since_ms (an older device) the latest message wins")
        #expect(old.anomalies.isEmpty)
        var bad = Inventory(prefix: "soundbox/v1")
        bad.ingest(topic: t, payload: bytes(#"{"online":true,"id":"shop-1","since_ms":-5}"#))
        bad.ingest(topic: t, payload: bytes(#"{"online":true,"id":"shop-1","since_ms":"soon"}"#))
        #expect(bad.devices.isEmpty && bad.anomalies["bad_field"]?.count == 2)
    }
}

@Suite struct SelectorTests {
    private func fleet() -> [DeviceRecord] {
        var a = DeviceRecord(id: "shop-120"); a.online = true; a.version = "0.2.0"; a.voice = "hi-IN"; a.faults = ["storage"]
        var b = DeviceRecord(id: "shop-121"); b.online = false; b.version = "0.3.0"; b.lastSeen = 1000
        var c = DeviceRecord(id: "shop-2"); c.online = false; c.version = "0.1.0+update1"; c.voice = "zh-CN"
        var d = DeviceRecord(id: "kiosk.7"); d.online = true; d.version = "0.3.0~rc1"; d.slot = "B"; d.updateState = "trying"
        return [a, b, c, d]
    }
    private func pick(_ s: Selector, now: Int64 = 10_000) -> [String] { fleet().filter { s.matches($0, now: now) }.map(\.id) }
    private func noFile(_ p: String) throws(SelectorError) -> [UInt8] { throw SelectorError("\(p): no such file") }

    @Test func namesAreAlternatives() throws {
        var s = Selector()
        #expect(pick(s).count == 4, "no names: every device")
        try s.add(name: "shop-12*", readFile: noFile)
        #expect(pick(s) == ["shop-120", "shop-121"])
        try s.add(name: "kiosk.7", readFile: noFile)
        #expect(pick(s) == ["shop-120", "shop-121", "kiosk.7"])
    }

    @Test func aFileOfIDs() throws {
        var s = Selector()
        try s.add(name: "@ids.txt") { _ throws(SelectorError) in bytes("# the canary\nshop-2\r\n\n  kiosk.7  \n") }
        #expect(pick(s) == ["shop-2", "kiosk.7"])
        var empty = Selector()
        try empty.add(name: "@none") { _ throws(SelectorError) in [] }
        #expect(pick(empty).isEmpty, "an empty file selects nothing")
        var bad = Selector()
        #expect(throws: SelectorError("list:2: 'shop#3' is no device id (one MQTT topic level: 1-64 bytes without '/', '+', '#' or control characters)")) {
            try bad.add(name: "@list") { _ throws(SelectorError) in bytes("shop-1\nshop#3\n") }
        }
        #expect(throws: SelectorError("nope: no such file")) { try bad.add(name: "@nope", readFile: noFile) }
    }

    @Test func hostileNamesAreRefused() {
        var s = Selector()
        for name in ["shop/1", "shop+", "#", "a\u{1b}b", "", String(repeating: "x", count: 65), "sh*p/#", "*\u{200b}", "@"] {
            #expect(throws: SelectorError.self, "\(name)") { try s.add(name: name, readFile: noFile) }
        }
        #expect(s.names.isEmpty)
    }

    @Test func attributesMustAllHold() throws {
        var s = Selector()
        s.version = try .parse("<0.3.0")
        #expect(pick(s) == ["shop-120", "shop-2", "kiosk.7"], "0.3.0~rc1 is older than 0.3.0")
        s.version = try .parse(">=0.3.0")
        #expect(pick(s) == ["shop-121"])
        s.version = try .parse("0.1.0+update1")
        #expect(pick(s) == ["shop-2"])
        s = Selector(); s.fault = "storage"
        #expect(pick(s) == ["shop-120"])
        s = Selector(); s.fault = "any"
        #expect(pick(s) == ["shop-120"])
        s = Selector(); s.voice = "hi-IN"
        #expect(pick(s) == ["shop-120"])
        s = Selector(); s.updateState = "trying"; s.slot = "B"
        #expect(pick(s) == ["kiosk.7"])
        s = Selector(); s.online = false
        #expect(pick(s) == ["shop-121", "shop-2"])
        try s.add(name: "shop-2", readFile: noFile)
        #expect(pick(s) == ["shop-2"])
    }

    @Test func offlineFor() throws {
        var s = Selector()
        s.offlineFor = try Selector.duration("1h")
        // shop-121 last seen at 1000: offline for 9000 s at 10,000; shop-2 never seen online.
        #expect(pick(s, now: 10_000) == ["shop-121", "shop-2"])
        #expect(pick(s, now: 4_000) == ["shop-2"])
    }

    @Test func versionsAndDurations() throws {
        #expect(try Selector.VersionTest.parse("<=1.2").op == .le)
        #expect(try Selector.VersionTest.parse("!= 1.2").version == "1.2")
        for bad in ["<", "<abc", "0.3.0 extra", "=>0.3", ""] {
            #expect(throws: SelectorError.self, "\(bad)") { try Selector.VersionTest.parse(bad) }
        }
        #expect(try Selector.duration("90") == 90)
        #expect(try Selector.duration("15m") == 900)
        #expect(try Selector.duration("2d") == 172_800)
        for bad in ["", "h", "1w", "-1h", "1.5h", "99999999999d"] {
            #expect(throws: SelectorError.self, "\(bad)") { try Selector.duration(bad) }
        }
    }
}

@Suite struct GlobTests {
    @Test(arguments: [
        ("shop-12*", "shop-120", true), ("shop-12*", "shop-12", true), ("shop-12*", "shop-21", false),
        ("*", "", true), ("a?c", "abc", true), ("a?c", "ac", false), ("[ab]x", "bx", true),
        ("[!ab]x", "bx", false), ("[a-c]1", "b1", true), ("[a-c]1", "d1", false), ("*.7", "kiosk.7", true),
        ("*a*a*a*a*a*b", String(repeating: "a", count: 64), false), ("[", "[", true), ("a[", "a[", true),
    ])
    func globs(pattern: String, text: String, match: Bool) {
        #expect(Glob.matches(pattern, text) == match)
    }
}
