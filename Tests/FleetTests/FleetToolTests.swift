// soundbox-fleet against a real mosquitto, real soundboxd and devices
// simulated by their retained statuses (docs/fleet.md).
import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxStore

/// One run of soundbox-fleet (connection options for `broker` added).
struct FleetRun {
    let status: Int32
    let stdout: String
    let stderr: String

    /// `whileRunning`: runs once the tool has started (a device answering it).
    init(_ broker: Broker, _ args: [String], whileRunning: () throws -> Void = {}, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try CommandRun([Build.fleet, "--host", "127.0.0.1", "--port", "\(broker.port)", "--timeout", "20"] + args,
                               environment: ["PATH": "/usr/bin:/bin", "SOUNDBOX_FLEET_STATE": broker.dir + "/fleet-state/fleet.db"], timeout: 120,
                               whileRunning: whileRunning)
        #expect(!r.timedOut, "soundbox-fleet \(args) still running after 120 s (killed)", sourceLocation: sourceLocation)
        (status, stdout, stderr) = (r.status, r.stdout, r.stderr)
    }

    func json() throws -> [String: Any] {
        guard let j = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw TestFailure("not a JSON object: \(stdout)\n\(stderr)")
        }
        return j
    }

    /// `devices --json`: id → device.
    func devices() throws -> [String: [String: Any]] {
        let list = try json()["devices"] as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: list.map { ($0["id"] as? String ?? "?", $0) })
    }
}

@Suite struct FleetToolTests {
    /// A real soundboxd and 300 simulated boxes, some lying: the inventory
    /// lists every honest one with its fields, believes no liar, and says
    /// how many it refused and why.
    @Test func inventoryOfRealAndSimulatedDevicesRefusesLiars() throws {
        let link = try Link(device: "real-1")
        try link.start()
        let endpoint = MQTTEndpoint(port: link.broker.port)
        for i in 0..<300 {
            let voice = i % 3 == 0 ? "hi-IN" : "zh-CN"
            let faults = i % 50 == 7 ? #"["storage"]"# : "[]"
            try mosquittoPub(endpoint, topic: "soundbox/v1/shop-\(i)/status", message:
                #"{"online":\#(i % 10 != 9),"id":"shop-\#(i)","version":"0.\#(i % 4).0","slot":"A","update":{"state":"idle"},"volume":\#(i % 11),"muted":false,"queue_depth":0,"voice":"\#(voice)","faults":\#(faults),"uptime_s":\#(i)}"#,
                retain: true)
        }
        // Liars: one speaks for shop-1, one is malformed, one oversized, one with a terminal escape.
        try mosquittoPub(endpoint, topic: "soundbox/v1/evil-1/status", message: #"{"online":true,"id":"shop-1","volume":0}"#, retain: true)
        try mosquittoPub(endpoint, topic: "soundbox/v1/evil-2/status", message: #"{"online":tru"#, retain: true)
        try mosquittoPub(endpoint, topic: "soundbox/v1/evil-3/status", message: #"{"x":""# + String(repeating: "a", count: 9000) + #""}"#, retain: true)
        try mosquittoPub(endpoint, topic: "soundbox/v1/evil-4/status", message: #"{"version":"\u001b]0;pwned\u0007"}"#, retain: true)

        let all = try FleetRun(link.broker, ["--json", "devices"])
        #expect(all.status == 0, "\(all.stderr)")
        let devices = try all.devices()
        #expect(devices.count == 301, "300 simulated and the real one")
        #expect(devices["shop-1"]?["volume"] as? Int == 1, "the liar did not change shop-1")
        #expect(devices["real-1"]?["online"] as? Bool == true)
        #expect(devices["real-1"]?["version"] as? String == soundboxVersion)
        #expect(devices["real-1"]?["queue_depth"] as? Int == 0)
        #expect(devices.keys.allSatisfy { !$0.hasPrefix("evil") })
        let anomalies = try all.json()["anomalies"] as? [String: [String: Any]] ?? [:]
        #expect(anomalies["other_id"]?["count"] as? Int == 1)
        #expect(anomalies["not_json"]?["count"] as? Int == 1)
        #expect(anomalies["oversized"]?["count"] as? Int == 1)
        #expect(anomalies["bad_field"]?["count"] as? Int == 1)
        #expect(try all.json()["complete"] as? Bool == true)

        // Selectors: a glob and attributes, all of which must hold.
        let picked = try FleetRun(link.broker, ["--json", "devices", "shop-1*", "--voice", "hi-IN", "--version", "<0.2.0", "--online"]).devices()
        let expected = (0..<300).filter { i in
            "shop-\(i)".hasPrefix("shop-1") && i % 3 == 0 && i % 4 < 2 && i % 10 != 9
        }.map { "shop-\($0)" }
        #expect(Set(picked.keys) == Set(expected) && !expected.isEmpty)
        let broken = try FleetRun(link.broker, ["--json", "devices", "--fault", "storage"]).devices()
        #expect(Set(broken.keys) == Set((0..<300).filter { $0 % 50 == 7 }.map { "shop-\($0)" }))

        // A file of ids, as CSV.
        let ids = link.scratch.path + "/ids.txt"
        try "# canary\nshop-5\nreal-1\nshop-999\n".write(toFile: ids, atomically: true, encoding: .utf8)
        let csv = try FleetRun(link.broker, ["devices", "@" + ids, "--csv"])
        #expect(csv.status == 0)
        let lines = csv.stdout.split(separator: "\n")
        #expect(lines.first == "id,online,version,slot,update,volume,muted,voice,queue,faults,uptime_s")
        #expect(lines.dropFirst().map { String($0.split(separator: ",").first ?? "") }.sorted() == ["real-1", "shop-5"])

        // The real device's will: killed, it shows offline, named by id.
        link.daemon.kill9()
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.status?["online"] as? Bool == false })
        let after = try FleetRun(link.broker, ["--json", "devices", "real-1"]).devices()
        #expect(after["real-1"]?["online"] as? Bool == false)

        // --offline-for: the tool saw real-1 online a moment ago (its state file), so
        // not offline for an hour; shop-9 etc. it never saw online: counted from their
        // first sighting, also a moment ago. Made older in the file: then they are.
        #expect(try FleetRun(link.broker, ["--json", "devices", "--offline-for", "1h"]).devices().isEmpty)
        let state = link.broker.dir + "/fleet-state/fleet.db"
        try Connection(path: state, create: false).exec(
            "UPDATE seen SET last_online = last_online - 7200, first_seen = first_seen - 7200 WHERE device IN ('real-1', 'shop-9')")
        let lost = try FleetRun(link.broker, ["--json", "devices", "--offline-for", "1h"]).devices()
        #expect(Set(lost.keys) == ["real-1", "shop-9"], "\(lost.keys)")
        #expect(try FleetRun(link.broker, ["devices", "--offline-for", "1 hour"]).status == 2)
    }

    /// One signed config to four devices: the real one with the backend's
    /// key applies it; a real one that trusts another key refuses it (its
    /// `rejected` receipt's reason); an offline one is counted offline (the
    /// retained config waits for it); a silent one is "no answer". Keys the
    /// backend may not set and bad values are refused before anything is sent.
    @Test func configSetTalliesEveryAnswer() throws {
        let (link, keys) = try signedLink(device: "real-1")
        try link.start()
        let other = try BackendKey(dir: link.scratch.path + "/other", name: "other")
        try FileManager.default.createDirectory(atPath: link.scratch.path + "/other/keys", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: other.publicPath, toPath: link.scratch.path + "/other/keys/other.pem")
        try FileManager.default.createDirectory(atPath: link.scratch.path + "/second", withIntermediateDirectories: true)
        let second = try Daemon(dir: link.scratch.path + "/second", config: [
            "mqtt.enabled": "true", "mqtt.host": "127.0.0.1", "mqtt.port": "\(link.broker.port)", "device.id": "real-2",
            "mqtt.keepalive": "5", "mqtt.reconnect_max_s": "2", "mqtt.link_prompts": "false",
            "payment.signing": "required", "payment.keys": link.scratch.path + "/other/keys"])
        let watch2 = try Backend(port: link.broker.port, device: "real-2")
        try second.start()
        #expect(watch2.waitUntil(timeout: 20) { watch2.status?["online"] as? Bool == true })
        let endpoint = MQTTEndpoint(port: link.broker.port)
        try mosquittoPub(endpoint, topic: "soundbox/v1/sim-off/status", message: #"{"online":false,"id":"sim-off"}"#, retain: true)
        try mosquittoPub(endpoint, topic: "soundbox/v1/sim-mute/status", message: #"{"online":true,"id":"sim-mute"}"#, retain: true)
        let appliedBefore = link.backend.applied.count

        // Refused here: nothing reaches any device.
        for (setting, words) in [("state.dir=/tmp/x", "set only in the settings file"), ("audio.volume=11", "expected an integer 0-10"),
                                 ("mqtt.host=evil.example", "set only in the settings file"), ("no.such=1", "unknown key"),
                                 ("audio.volume", "needs KEY=VALUE")] {
            let r = try FleetRun(link.broker, ["config", "set", setting, "--key", keys[0].privatePath])
            #expect(r.status == 2 && r.stderr.contains(words), "\(setting): \(r.status) \(r.stderr)")
        }
        let nokey = try FleetRun(link.broker, ["config", "set", "audio.volume=8"])
        #expect(nokey.status == 2 && nokey.stderr.contains("--key"))

        let r = try FleetRun(link.broker, ["--json", "config", "set", "audio.volume=8", "--key", keys[0].privatePath, "--wait", "15"])
        #expect(r.status == 1, "one refused and one silent: not all applied")
        let j = try r.json()
        #expect(j["applied"] as? [String] == ["real-1"], "\(r.stdout) \(r.stderr)")
        #expect((j["refused"] as? [String: String])?["real-2"]?.contains("signature") == true)
        #expect(j["offline"] as? [String] == ["sim-off"])
        #expect(j["no_answer"] as? [String] == ["sim-mute"])
        #expect(link.backend.waitUntil(timeout: 10) { link.backend.status?["volume"] as? Int == 8 })
        #expect(link.backend.applied.count == appliedBefore + 1, "the refused attempts sent nothing")
        #expect(watch2.status?["volume"] as? Int == 6, "the device that trusts another key kept its volume")

        // A selector: only real-1, which applies it: exit 0.
        let one = try FleetRun(link.broker, ["config", "set", "audio.volume=5", "real-1", "--key", keys[0].privatePath])
        #expect(one.status == 0 && one.stdout.hasPrefix("applied:   1  real-1"), "\(one.stdout) \(one.stderr)")

        // A command: real-1 runs it; real-2 refuses it (another key); the
        // silent one is taken as accepted (only a refusal answers a command).
        let test = try FleetRun(link.broker, ["--json", "cmd", "test", "--key", keys[0].privatePath, "--wait", "5"])
        #expect(test.status == 1, "one refused")
        let t = try test.json()
        #expect(t["applied"] as? [String] == ["real-1", "sim-mute"], "\(test.stdout) \(test.stderr)")
        #expect((t["refused"] as? [String: String])?["real-2"]?.contains("signature") == true)
        #expect(t["offline"] as? [String] == ["sim-off"])
        #expect(pollUntil(timeout: 10) { link.daemon.log(run: 1).contains("cmd=test") }, "real-1 ran it")
        let bad = try FleetRun(link.broker, ["cmd", "update", "--key", keys[0].privatePath])
        #expect(bad.status == 2 && bad.stderr.contains("usage: cmd replay|test|summary"))

        // A payment to a device that demands signatures: unsigned, refused with the reason; signed, played.
        let unsigned = try FleetRun(link.broker, ["--json", "pay", "real-1", "1.00"])
        #expect(unsigned.status == 1)
        #expect(try unsigned.json()["final"] as? String == "rejected")
        #expect((try unsigned.json()["reason"] as? String)?.contains("signature") == true, "\(unsigned.stdout)")
        let signed = try FleetRun(link.broker, ["--json", "pay", "real-1", "2.00", "--key", keys[0].privatePath])
        let signedFinal = try signed.json()["final"] as? String
        #expect(signed.status == 0 && signedFinal == "played", "\(signed.stdout) \(signed.stderr)")
        #expect(second.stop().0 == 0)
    }

    /// The reference backend client: a payment followed to `played`; one
    /// sent while the device is down is re-sent until it answers, and is
    /// played once (the copies are duplicates, not new payments).
    @Test func payFollowsReceiptsAndResendsUntilAnswered() throws {
        let link = try Link()
        try link.start()
        let r = try FleetRun(link.broker, ["--json", "pay", "shop-1", "12.50", "--id", "P-1"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        let j = try r.json()
        #expect(j["receipts"] as? [String] == ["queued", "played"] && j["sent"] as? Int == 1)
        #expect(try FleetRun(link.broker, ["pay", "shop-1", "0.001"]).status == 2, "three decimals: refused before sending")

        let watcher = try Backend(port: link.broker.port, device: "watcher", subscribe: ["soundbox/v1/shop-1/payment"])
        #expect(link.daemon.stop().0 == 0)
        let pay = try CLIProcess([Build.fleet, "--port", "\(link.broker.port)", "--json", "pay", "shop-1", "3.00", "--id", "LATE-1", "--resend", "1", "--wait", "90"])
        #expect(watcher.waitUntil(timeout: 20) { watcher.messages(on: "soundbox/v1/shop-1/payment").count >= 2 }, "re-sent while nobody answers")
        try link.daemon.start()
        #expect(pay.waitExit(timeout: 90) == 0, "\(pay.output)")
        let last = pay.output.split(separator: "\n").last.map(String.init) ?? ""
        let late = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        #expect(late?["final"] as? String == "played" && (late?["sent"] as? Int ?? 0) >= 2, "\(pay.output)")
        #expect(try link.entries().filter { $0.payment.id == "LATE-1" }.count == 1)
    }

    /// Two consumers of one shared subscription: every receipt of 60
    /// payments read by exactly one of them, as JSON lines.
    @Test func sharedReceiptsAreConsumedOnce() throws {
        let link = try Link()
        try link.start()
        let consumers = try ["c1", "c2"].map { name in
            try CLIProcess([Build.fleet, "--port", "\(link.broker.port)", "--client-id", "test-\(name)", "receipts", "--group", "backend", "--idle", "15"])
        }
        for c in consumers { #expect(c.waitFor("receipts: subscribed to $share/backend/", timeout: 20), "\(c.output)") }
        for i in 0..<60 { try link.backend.pay(id: "R\(i)", amount: "1.\(i % 10)0") }
        #expect(link.backend.waitForReceipts((0..<60).map { "R\($0)" }, ["played"], timeout: 120))
        var lines: [[String]] = []
        for c in consumers {
            #expect(c.waitExit(timeout: 60) == 0, "\(c.output)")
            lines.append(c.output.split(separator: "\n").filter { $0.hasPrefix("{") }.map(String.init))
        }
        let pairs = try lines.map { try $0.map { line -> String in
            let j = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(j["device"] as? String == "shop-1")
            let r = try #require(j["receipt"] as? [String: Any])
            return "\(r["id"] as? String ?? "?")/\(r["status"] as? String ?? "?")"
        } }
        #expect(!pairs[0].isEmpty && !pairs[1].isEmpty, "both consumers got a share: \(pairs[0].count) + \(pairs[1].count)")
        #expect(Set(pairs[0]).isDisjoint(with: Set(pairs[1])), "no receipt read twice")
        let all = Set(pairs[0] + pairs[1])
        #expect((0..<60).allSatisfy { all.contains("R\($0)/queued") && all.contains("R\($0)/played") })
    }

    /// The operator over TLS with a client certificate: the inventory
    /// works; a broker certificate from another CA is refused, and said so.
    @Test func overTLSWithTheOperatorsCertificate() throws {
        let scratch = Scratch()
        let certs = try Certificates.make(in: scratch.path + "/pki", devices: ["operator"])
        let other = try Certificates.make(in: scratch.path + "/other", devices: [])
        let broker = try Broker(dir: scratch.path + "/broker", tls: TLSListener(caFile: certs.ca, certFile: certs.serverCert, keyFile: certs.serverKey))
        try mosquittoPub(MQTTEndpoint(port: broker.port), topic: "soundbox/v1/tls-1/status", message: #"{"online":true,"id":"tls-1"}"#, retain: true)
        let client = certs.client("operator")
        let tls = ["--host", "localhost", "--port", "\(broker.tlsPort!)", "--cert", client.cert, "--tls-key", client.key]
        let ok = try FleetRun(broker, tls + ["--ca", certs.ca, "--json", "devices"])
        let listed = try ok.devices()
        #expect(ok.status == 0 && listed["tls-1"]?["online"] as? Bool == true, "\(ok.stdout) \(ok.stderr)")
        let wrong = try FleetRun(broker, tls + ["--ca", other.ca, "--json", "devices"])
        let refused = try wrong.json()
        #expect(wrong.status == 1 && refused["code"] as? String == "broker", "\(wrong.stdout) \(wrong.stderr)")
        #expect((refused["error"] as? String)?.lowercased().contains("certificate") == true, "\(wrong.stdout)")
        let noCA = try FleetRun(broker, ["--cert", client.cert, "--tls-key", client.key, "devices"])
        #expect(noCA.status == 2 && noCA.stderr.contains("need --ca"))
    }

    /// Bad command lines and an unreachable broker: a clear error, exit 2 or 1, no hang.
    @Test func badInputIsRefusedWithTheReason() throws {
        let scratch = Scratch()
        let broker = try Broker(dir: scratch.path + "/broker")
        for (args, status, words) in [
            (["devices", "shop/1"], 2, "is no device id"),
            (["devices", "--version", "newest"], 2, "expected a comparison and a version"),
            (["devices", "--online", "--offline"], 2, "exclude each other"),
            (["devices", "@" + scratch.path + "/missing"], 2, "missing"),
            (["devices", "--prefix", "a/#"], 2, "--prefix"),
            (["devices", "--sign"], 2, "unknown option --sign"),
            (["frobnicate"], 2, "unknown command"),
        ] {
            let r = try FleetRun(broker, args)
            #expect(r.status == Int32(status) && r.stderr.contains(words), "\(args): \(r.status) \(r.stderr)")
        }
        broker.stop()
        let down = try FleetRun(broker, ["--json", "devices"])
        #expect(down.status == 1)
        #expect(try down.json()["code"] as? String == "broker")
        #expect((try down.json()["error"] as? String)?.contains("Connection refused") == true)
    }
}
