// What boxes say about themselves, as soundbox-fleet shows it: a hostile
// box's bidirectional overrides, isolates, zero-width characters, line
// separators and terminal escapes reach the operator's table, CSV and JSON
// only escaped (`\u{202E}`: docs/fleet.md "What devices say, as shown"),
// over a real mosquitto; Chinese text as it is.
import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxFleet

@Suite struct HostileTextTests {
    /// The characters no output may carry raw (a line feed only between
    /// lines), as "U+XXXX".
    static func raw(_ text: String) -> [String] {
        text.unicodeScalars.filter { u in
            switch u.value {
            case 0x0A: false
            case 0..<0x20, 0x7F...0x9F, 0x061C, 0x200B...0x200F, 0x2028...0x202E, 0x2060...0x2069, 0xFEFF: true
            default: false
            }
        }.map { "U+" + String($0.value, radix: 16, uppercase: true) }
    }

    static func expectClean(_ run: FleetRun, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let found = raw(run.stdout + run.stderr)
        #expect(found.isEmpty, "\(what): raw \(found) in \(run.stdout.debugDescription) \(run.stderr.debugDescription)", sourceLocation: sourceLocation)
    }

    /// The one escaper: every hidden character as `\u{XXXX}` (newline,
    /// return, tab as `\n`, `\r`, `\t`), any script as it is; escaping
    /// what is escaped changes nothing (reasons are escaped on the way in).
    /// (A joiner is escaped too: an emoji sequence with U+200D shows it.)
    @Test func theEscaperShowsEveryHiddenCharacterAndNothingElse() throws {
        let hidden: [UInt32] = Array(0x00...0x1F) + [0x7F] + Array(0x80...0x9F) + [0x061C] + Array(0x200B...0x200F)
            + Array(0x2028...0x202E) + [0x2060] + Array(0x2066...0x2069) + [0xFEFF]
        for v in hidden {
            let shown = TextFile.visible("a" + String(Unicode.Scalar(v)!) + "b")
            let expected: String = switch v {
            case 0x0A: #"\n"#
            case 0x0D: #"\r"#
            case 0x09: #"\t"#
            default: "\\u{\(String(v, radix: 16, uppercase: true))}"
            }
            #expect(shown == "a" + expected + "b", "U+\(String(v, radix: 16, uppercase: true))")
            #expect(Self.raw(shown).isEmpty && TextFile.visible(shown) == shown)
        }
        for plain in ["普通话 看门狗重启", "Crème brûlée", "नमस्ते", "🔊👍🏽", "मराठी", "a\\u{202E}b", "shop-1 0.3.0~rc1"] {
            #expect(TextFile.visible(plain) == plain)
        }
        let receipt = JSONValue.object([("st\u{202E}atus", .array([.string("x\u{1B}[2J"), .number("1"), .null])), ("reason", .string("已播放"))])
        #expect(receipt.shown.text == #"{"st\\u{202E}atus":["x\\u{1B}[2J",1,null],"reason":"已播放"}"#)
    }

    /// One box whose every text field hides something, one that says
    /// everything in Chinese, one with a terminal escape (not believed at
    /// all) and two topics whose device id hides something (no device's):
    /// the table, the CSV and the JSON show the first escaped, the second as
    /// it is, and the rest only escaped among the statuses not believed.
    @Test func devicesShowWhatTheBoxesSayEscaped() throws {
        let scratch = Scratch()
        let broker = try Broker(dir: scratch.path + "/broker")
        let endpoint = MQTTEndpoint(port: broker.port)
        // JSON escapes in the payloads: the statuses hold the characters themselves.
        for (device, status) in [
            ("hx-1", #"{"online":true,"id":"hx-1","version":"0.3.0\u202Egnp.exe","slot":"A\u200B","voice":"粤语\u2066zh\u2069\u2028FAKE-ROW","boot_reason":"掉电\u2028hx-9  yes\u2029","uptime_s":5,"update":{"state":"failed\u200D","version":"0.4.0\u200F","reason":"安装失败\u202Dx\uFEFF\u061C\u2060\u200E\u200C\u202A\u202B\u202C\u2067\u2068"}}"#),
            ("hx-2", #"{"online":true,"id":"hx-2","version":"0.3.0","voice":"普通话","boot_reason":"看门狗重启","update":{"state":"idle","reason":"无"}}"#),
            ("hx-esc", #"{"online":true,"id":"hx-esc","version":"\u001b[31mred","voice":"\u0085x"}"#),
            ("ar\u{061C}id", #"{"online":true}"#),
            ("rtl\u{202E}di", #"{"online":true}"#),
        ] {
            try mosquittoPub(endpoint, topic: "soundbox/v1/\(device)/status", message: status, retain: true)
        }

        let json = try FleetRun(broker, ["--json", "devices"])
        #expect(json.status == 0, "\(json.stderr)")
        Self.expectClean(json, "devices --json")
        let devices = try json.devices()
        #expect(Set(devices.keys) == ["hx-1", "hx-2"], "\(devices.keys)")
        let hx1 = devices["hx-1"] ?? [:]
        #expect(hx1["version"] as? String == #"0.3.0\u{202E}gnp.exe"#)
        #expect(hx1["slot"] as? String == #"A\u{200B}"#)
        #expect(hx1["voice"] as? String == #"粤语\u{2066}zh\u{2069}\u{2028}FAKE-ROW"#)
        #expect(hx1["boot_reason"] as? String == #"掉电\u{2028}hx-9  yes\u{2029}"#)
        #expect(hx1["update_state"] as? String == #"failed\u{200D}"#)
        #expect(hx1["update_version"] as? String == #"0.4.0\u{200F}"#)
        #expect(hx1["update_reason"] as? String
                == #"安装失败\u{202D}x\u{FEFF}\u{61C}\u{2060}\u{200E}\u{200C}\u{202A}\u{202B}\u{202C}\u{2067}\u{2068}"#)
        let hx2 = devices["hx-2"] ?? [:]
        #expect(hx2["voice"] as? String == "普通话" && hx2["boot_reason"] as? String == "看门狗重启" && hx2["update_reason"] as? String == "无", "\(hx2)")
        let anomalies = try json.json()["anomalies"] as? [String: [String: Any]] ?? [:]
        #expect(anomalies["bad_field"]?["count"] as? Int == 1, "the terminal escape: not believed")
        let topics = anomalies["bad_topic"]?["examples"] as? [String] ?? []
        #expect(topics.count == 2 && topics.contains { $0.contains(#"ar\u{61C}id"#) } && topics.contains { $0.contains(#"rtl\u{202E}di"#) }, "\(topics)")

        let table = try FleetRun(broker, ["devices"])
        #expect(table.status == 0, "\(table.stderr)")
        Self.expectClean(table, "devices")
        let rows = table.stdout.split(separator: "\n").map(String.init)
        #expect(rows.count == 3, "a header and two rows, none faked: \(rows)")
        let row1 = rows.first { $0.hasPrefix("hx-1 ") } ?? ""
        for cell in [#"0.3.0\u{202E}gnp.exe"#, #"A\u{200B}"#, #"failed\u{200D} 0.4.0\u{200F}"#, #"粤语\u{2066}zh\u{2069}\u{2028}FAKE-ROW"#] {
            #expect(row1.contains(cell), "\(cell) in \(row1)")
        }
        #expect(rows.contains { $0.hasPrefix("hx-2 ") && $0.contains(" 普通话") }, "\(rows)")
        #expect(table.stderr.contains(#"ar\u{61C}id"#) && table.stderr.contains(#"rtl\u{202E}di"#), "\(table.stderr)")

        let csv = try FleetRun(broker, ["devices", "--csv"])
        #expect(csv.status == 0, "\(csv.stderr)")
        Self.expectClean(csv, "devices --csv")
        #expect(csv.stdout.split(separator: "\n").map(String.init) == [
            "id,online,version,slot,update,volume,muted,voice,queue,faults,uptime_s",
            #"hx-1,yes,0.3.0\u{202E}gnp.exe,A\u{200B},failed\u{200D} 0.4.0\u{200F},,,粤语\u{2066}zh\u{2069}\u{2028}FAKE-ROW,,,5"#,
            "hx-2,yes,0.3.0,,idle,,,普通话,,,",
        ], "\(csv.stdout)")
    }

    /// A box's answers hide things too: a refused command's and config's
    /// reasons, a payment's receipts, an update's failure in its status.
    /// `cmd`, `config set`, `pay`, `receipts` and `rollout` (text and JSON)
    /// show them escaped.
    @Test func answersShowWhatTheBoxSaysEscaped() throws {
        let scratch = Scratch()
        let broker = try Broker(dir: scratch.path + "/broker")
        let key = try BackendKey(dir: scratch.path + "/keys", name: "backend")
        let online = #"{"online":true,"id":"hx-1","version":"0.1.0"}"#
        try mosquittoPub(MQTTEndpoint(port: broker.port), topic: "soundbox/v1/hx-1/status", message: online, retain: true)
        // The box, played by the test: it answers what the tool sends it.
        let box = try Backend(port: broker.port, device: "hx-1", subscribe: ["soundbox/v1/hx-1/cmd", "soundbox/v1/hx-1/config", "soundbox/v1/hx-1/payment"])
        func answer(_ topic: String, _ replies: [(topic: String, payload: String)]) -> () throws -> Void {
            let before = box.messages(on: "soundbox/v1/hx-1/" + topic).count
            return {
                #expect(box.waitUntil(timeout: 30) { box.messages(on: "soundbox/v1/hx-1/" + topic).count > before }, "the tool sent no \(topic)")
                for r in replies { try box.publish("soundbox/v1/hx-1/" + r.topic, r.payload) }
            }
        }

        // A command refused, with a reason that clears the screen and fakes a line.
        let refusal = #"{"kind":"cmd","status":"rejected","reason":"拒绝\u202Eevil\u001b[2J\u0085\r\nhx-2: ok\t\u200B"}"#
        let refused = #"拒绝\u{202E}evil\u{1B}[2J\u{85}\r\nhx-2: ok\t\u{200B}"#
        let cmd = try FleetRun(broker, ["cmd", "test", "--key", key.privatePath, "--wait", "5"], whileRunning: answer("cmd", [("receipt", refusal)]))
        #expect(cmd.status == 1 && cmd.stdout.contains("\n  hx-1: " + refused + "\n"), "\(cmd.stdout) \(cmd.stderr)")
        Self.expectClean(cmd, "cmd")
        let cmdJSON = try FleetRun(broker, ["--json", "cmd", "test", "--key", key.privatePath, "--wait", "5"], whileRunning: answer("cmd", [("receipt", refusal)]))
        #expect((try cmdJSON.json()["refused"] as? [String: String])?["hx-1"] == refused, "\(cmdJSON.stdout)")
        Self.expectClean(cmdJSON, "cmd --json")

        // A config refused: the reasons, and the names of the settings refused without one.
        let applied = #"{"ok":false,"rejected":{"audio.volume\u2067":"音量\u2028FAKE","x\u200B":5}}"#
        let why = #"音量\u{2028}FAKE; x\u{200B}"#
        for asJSON in [false, true] {
            let r = try FleetRun(broker, (asJSON ? ["--json"] : []) + ["config", "set", "audio.volume=8", "--key", key.privatePath, "--wait", "15"],
                                 whileRunning: answer("config", [("config/applied", applied)]))
            #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
            if asJSON {
                #expect((try r.json()["refused"] as? [String: String])?["hx-1"] == why, "\(r.stdout)")
            } else {
                #expect(r.stdout.contains("\n  hx-1: " + why + "\n"), "\(r.stdout)")
            }
            Self.expectClean(r, "config set")
        }

        // A payment: its receipts' statuses and reason, to `pay` and to a `receipts` consumer.
        let consumer = try CLIProcess([Build.fleet, "--port", "\(broker.port)", "receipts", "--count", "2", "--idle", "30"])
        #expect(consumer.waitFor("receipts: subscribed to", timeout: 20), "\(consumer.output)")
        func receipts(_ id: String) -> [(topic: String, payload: String)] {
            [("receipt", #"{"id":"\#(id)","status":"queued\u001b[31m\u2066"}"#),
             ("receipt", #"{"id":"\#(id)","status":"played","reason":"已播放\u200B\u2028\u001b]0;pwned\u0007"}"#)]
        }
        let queued = #"queued\u{1B}[31m\u{2066}"#, reason = #"已播放\u{200B}\u{2028}\u{1B}]0;pwned\u{7}"#
        let pay = try FleetRun(broker, ["pay", "hx-1", "1.00", "--id", "H-1", "--wait", "30"], whileRunning: answer("payment", receipts("H-1")))
        #expect(pay.status == 0 && pay.stdout == queued + "\nplayed: " + reason + "\n", "\(pay.stdout) \(pay.stderr)")
        Self.expectClean(pay, "pay")
        #expect(consumer.waitExit(timeout: 30) == 0, "\(consumer.output)")
        #expect(Self.raw(consumer.output).isEmpty, "receipts: raw \(Self.raw(consumer.output))")
        let lines = try consumer.output.split(separator: "\n").filter { $0.hasPrefix("{") }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["receipt"] as? [String: Any]
        }
        #expect(lines.map { $0?["status"] as? String } == [queued, "played"] && lines.last??["reason"] as? String == reason, "\(consumer.output)")
        let payJSON = try FleetRun(broker, ["--json", "pay", "hx-1", "1.00", "--id", "H-2", "--wait", "30"], whileRunning: answer("payment", receipts("H-2")))
        let paid = try payJSON.json()
        #expect(paid["receipts"] as? [String] == [queued, "played"] && paid["reason"] as? String == reason, "\(payJSON.stdout)")
        Self.expectClean(payJSON, "pay --json")

        // An update that failed, said in the box's status (update.reason).
        let failed = #"{"online":true,"id":"hx-1","version":"0.1.0","update":{"state":"failed","id":"R-h","version":"0.2.0","reason":"下载失败\u202E\u2028x\u061C"}}"#
        let failure = #"下载失败\u{202E}\u{2028}x\u{61C}"#
        let rollout = try FleetRun(broker, ["--json", "rollout", "http://u.example/b.raucb", "--version", "0.2.0", "--sha256", String(repeating: "ab", count: 32),
                                            "--key", key.privatePath, "--canary", "1", "--wait", "60", "--id", "R-h", "hx-1"],
                                   whileRunning: answer("cmd", [("status", failed)]))
        #expect(rollout.status == 1, "halted: \(rollout.stdout) \(rollout.stderr)")
        let devices = try rollout.json()["devices"] as? [[String: Any]] ?? []
        #expect(devices.first?["state"] as? String == "failed" && devices.first?["reason"] as? String == failure, "\(rollout.stdout)")
        Self.expectClean(rollout, "rollout --json")
        let status = try FleetRun(broker, ["rollout", "status", "R-h"])
        #expect(status.stdout.contains("\n  hx-1: " + failure + "\n"), "\(status.stdout) \(status.stderr)")
        Self.expectClean(status, "rollout status")
    }
}
