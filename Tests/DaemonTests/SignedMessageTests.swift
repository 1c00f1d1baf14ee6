import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxCrypto
import SoundboxStore

/// doctor's `signing` check: its status and detail.
func signingCheck(_ daemon: Daemon) throws -> (status: String, detail: String) {
    let records = try daemon.request("doctor").pairs.records(startingWith: "check")
    let r = try #require(records.first { $0.first?.value == "signing" })
    func field(_ k: String) -> String { r.first { $0.key == k }?.value ?? "" }
    return (field("status"), field("detail"))
}

@Suite struct SignedMessageTests {
    /// The broker is the attacker's: it can publish anything on the
    /// device's topics. Forged, tampered, replayed, unsigned, mis-addressed
    /// payments, configs and commands change nothing and are each refused
    /// with a reason, while genuine signed payments flow, in order, each
    /// played once.
    @Test func aCompromisedBrokerCannotSpeakMuteConfigureOrCommand() throws {
        let (link, keys) = try signedLink()
        let backend = keys[0]
        let attacker = try BackendKey(dir: link.scratch.path + "/attacker", name: "attacker")
        try link.start()
        let d = link.device
        let genuine = (1...20).map { "G\($0)" }

        // A genuine config and command first: what the attacker will replay.
        let unmute = try backend.sign(#"{"audio":{"mute":false,"volume":7}}"#, device: d)
        try link.backend.publish(link.backend.topics.config, unmute)
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.contains { $0["ok"] as? Bool == true } })
        let oldMute = try backend.sign(#"{"audio.mute":true}"#, device: d, now: Int64(Date().timeIntervalSince1970) - 3600)
        let summary = try backend.sign(#"{"cmd":"summary"}"#, device: d)
        try link.backend.publish(link.backend.topics.cmd, summary)

        let forged = try attacker.sign(#"{"id":"A-OWNKEY","amount":"999"}"#, device: d)
        let realSig = try backend.sign(#"{"id":"A-TAMPER","amount":"1.00"}"#, device: d)
        let tampered = realSig.replacingOccurrences(of: #""amount":"1.00""#, with: #""amount":"9999.00""#)
        let otherDevice = try backend.sign(#"{"id":"A-OTHER","amount":"5"}"#, device: "shop-2")
        let addressed = try backend.sign(#"{"id":"A-ADDR","amount":"5","device":"shop-2"}"#, device: "shop-2")
        // Signed with the attacker's key but naming the backend's key id.
        let wrongKey = forged.replacingOccurrences(of: attacker.id, with: backend.id)
        let attacks: [(topic: String, payload: String)] = [
            (link.backend.topics.payment, #"{"id":"A-UNSIGNED","amount":"500"}"#),
            (link.backend.topics.payment, forged),
            (link.backend.topics.payment, wrongKey),
            (link.backend.topics.payment, tampered),
            (link.backend.topics.payment, otherDevice),
            (link.backend.topics.payment, addressed),
            (link.backend.topics.config, #"{"audio":{"mute":true}}"#),
            (link.backend.topics.config, try attacker.sign(#"{"audio":{"mute":true}}"#, device: d)),
            (link.backend.topics.config, oldMute),                        // genuine, but older than the one in effect
            (link.backend.topics.cmd, #"{"cmd":"say","amount":"888","id":"A-SAY"}"#),
            (link.backend.topics.cmd, #"{"cmd":"test"}"#),
            (link.backend.topics.cmd, try attacker.sign(#"{"cmd":"say","amount":"777","id":"A-SAY2"}"#, device: d)),
            (link.backend.topics.cmd, summary),                           // genuine, replayed: its nonce is used
        ]
        for (i, id) in genuine.enumerated() {
            try link.backend.pay(try backend.sign(#"{"id":"\#(id)","amount":"\#(i + 1).50","currency":"CNY","channel":"alipay"}"#, device: d))
            if i < attacks.count { try link.backend.publish(attacks[i].topic, attacks[i].payload) }
            if i == 5 { try link.backend.pay(try backend.sign(#"{"id":"G1","amount":"1.50","currency":"CNY","channel":"alipay"}"#, device: d)) }
        }
        #expect(link.backend.waitForReceipts(genuine, ["played"], timeout: 90))
        let attackReceipts = ["A-UNSIGNED", "A-OWNKEY", "A-TAMPER", "A-OTHER", "A-ADDR"]
        #expect(link.backend.waitForReceipts(attackReceipts, ["rejected"], timeout: 20))
        // The config and cmd refusals: receipts of their kind, no id.
        #expect(link.backend.waitUntil(timeout: 20) {
            link.backend.receipts.filter { ($0["kind"] as? String) != nil && $0["status"] as? String == "rejected" }.count >= 7
        })
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.receipts(for: "G1").contains("duplicate") })

        let reasons = Dictionary(link.backend.receipts.compactMap { r in (r["id"] as? String).map { ($0, r["reason"] as? String ?? "") } }) { a, _ in a }
        #expect(reasons["A-UNSIGNED"] == "signature: missing")
        #expect(reasons["A-OWNKEY"]?.hasPrefix("signature: unknown key") == true, "\(reasons["A-OWNKEY"] ?? "-")")
        #expect(reasons["A-TAMPER"]?.hasPrefix("signature: bad") == true, "\(reasons["A-TAMPER"] ?? "-")")
        #expect(reasons["A-OTHER"]?.hasPrefix("signature: bad") == true)
        #expect(reasons["A-ADDR"]?.hasPrefix("signature: wrong device") == true)
        let kinds = link.backend.receipts.filter { $0["kind"] != nil }.map { "\($0["kind"]!) \($0["reason"] as? String ?? "")" }
        #expect(kinds.filter { $0.hasPrefix("config signature: missing") }.count == 1, "\(kinds)")
        #expect(kinds.filter { $0.hasPrefix("config signature: unknown key") }.count == 1, "\(kinds)")
        #expect(kinds.filter { $0.hasPrefix("config signature: stale") }.count == 1, "\(kinds)")
        #expect(kinds.filter { $0.hasPrefix("cmd signature: missing") }.count == 2, "\(kinds)")
        #expect(kinds.filter { $0.hasPrefix("cmd signature: unknown key") }.count == 1, "\(kinds)")
        #expect(kinds.filter { $0.hasPrefix("cmd signature: stale") }.count == 1, "\(kinds)")

        // Nothing the attacker sent took effect: not muted, the genuine
        // volume, no attacker payment or say in the history, the summary
        // (a genuine command) spoken once.
        #expect(try link.daemon.request("config", "get", "audio.mute")["audio.mute"] == "false")
        #expect(try link.daemon.request("config", "get", "audio.volume")["audio.volume"] == "7")
        _ = link.daemon.stop()
        let entries = try link.entries()
        #expect(entries.map(\.payment.id) == Array(genuine.reversed()), "history: \(entries.map(\.payment.id))")
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
        let log = LogEvents(link.daemon.log(run: 1))
        #expect(log.ids("speaking") == genuine, "spoken: \(log.ids("speaking"))")
        #expect(log.events.filter { $0.event == "summary" }.count == 1)
        #expect(!log.events.contains { $0.event == "cmd" && $0.fields["cmd"] != "summary" })
    }

    /// Rotation without a flag day: two keys accepted at once; after the
    /// old key's file is removed and SIGHUP, the old key is refused.
    @Test func keyRotationWithSIGHUP() throws {
        let (link, keys) = try signedLink(keys: ["old", "new"])
        let (old, new) = (keys[0], keys[1])
        try link.start()
        try link.backend.pay(try old.sign(#"{"id":"R1","amount":"1"}"#, device: link.device))
        try link.backend.pay(try new.sign(#"{"id":"R2","amount":"2"}"#, device: link.device))
        #expect(link.backend.waitForReceipts(["R1", "R2"], ["played"]))
        let detail = try signingCheck(link.daemon).detail
        #expect(detail.contains(old.id) && detail.contains(new.id), "\(detail)")

        try FileManager.default.removeItem(atPath: link.daemon.settings["payment.keys"]! + "/old.pem")
        kill(link.daemon.process!.processIdentifier, SIGHUP)
        try link.daemon.until("status") { _ in link.daemon.log(run: 1).components(separatedBy: "signing: keys ").count == 3 }
        try link.backend.pay(try old.sign(#"{"id":"R3","amount":"3"}"#, device: link.device))
        try link.backend.pay(try new.sign(#"{"id":"R4","amount":"4"}"#, device: link.device))
        #expect(link.backend.waitForReceipts(["R3"], ["rejected"]))
        #expect(link.backend.waitForReceipts(["R4"], ["played"]))
        let r3 = link.backend.receipts.first { $0["id"] as? String == "R3" && $0["status"] as? String == "rejected" }
        #expect((r3?["reason"] as? String)?.hasPrefix("signature: unknown key") == true)
        #expect(link.daemon.stop().0 == 0)
    }

    /// Hostile sig and kid values: each rejected with a reason; nothing
    /// crashes and the queue keeps flowing.
    @Test func hostileSignatureValuesAreRejectedWithReasons() throws {
        let (link, keys) = try signedLink()
        try link.start()
        let good = try keys[0].sign(#"{"id":"H-TEMPLATE","amount":"1"}"#, device: link.device)
        let sig = try #require(good.range(of: #""sig":"[^"]*""#, options: .regularExpression))
        let withSig = { (value: String) in good.replacingCharacters(in: sig, with: #""sig":\#(value)"#) }
        let kidRange = try #require(good.range(of: #""kid":"[^"]*""#, options: .regularExpression))
        let withKid = { (value: String) in good.replacingCharacters(in: kidRange, with: #""kid":\#(value)"#) }
        let cases: [(String, String)] = [
            (withSig(#""short""#), "signature: bad: sig must be 88 characters"),
            (withSig("\"" + String(repeating: "A", count: 3800) + "\""), "signature: bad: sig must be 88 characters"),   // 4 KiB payloads are refused before: too big
            (withSig("\"" + String(repeating: "é", count: 88) + "\""), "signature: bad: sig must be 88 characters"),
            (withSig("\"" + String(repeating: "-", count: 86) + "==\""), "signature: bad: sig is not standard base64"),
            (withSig("\"" + String(repeating: "A", count: 88) + "\""), "signature: bad: sig is not standard base64"),
            (withSig("12345"), "signature: bad: sig must be a string"),
            (withSig("null"), "signature: missing"),
            (withSig("\"" + String(repeating: "A", count: 86) + "==\""), "signature: bad: does not verify"),
            (withKid(#""ZZZZ""#), "signature: bad: kid must be a key id"),
            (withKid("\"" + String(repeating: "界", count: 16) + "\""), "signature: bad: kid must be a key id"),
            (withKid(#""0123456789abcdef""#), "signature: unknown key"),
            (withKid("[1,2]"), "signature: bad: kid must be a string"),
        ]
        var ids: [String] = []
        for (i, (payload, _)) in cases.enumerated() {
            let id = "H\(i)"
            ids.append(id)
            try link.backend.pay(payload.replacingOccurrences(of: "H-TEMPLATE", with: id))
        }
        try link.backend.pay(try keys[0].sign(#"{"id":"H-OK","amount":"2"}"#, device: link.device))
        #expect(link.backend.waitForReceipts(ids, ["rejected"]))
        #expect(link.backend.waitForReceipts(["H-OK"], ["played"]))
        for (i, (_, reason)) in cases.enumerated() {
            let got = link.backend.receipts.first { $0["id"] as? String == "H\(i)" }?["reason"] as? String ?? ""
            #expect(got.hasPrefix(reason), "H\(i): \(got)")
        }
        #expect(try link.daemon.request("status")["faults"] == "none")
        #expect(link.daemon.stop().0 == 0)
    }

    /// Old messages: with a synchronised clock, a genuine payment older
    /// than the window is stale; without one, the newest signed message
    /// seen is the device's idea of now.
    @Test func staleSignedPaymentsAreRefused() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let (link, keys) = try signedLink()
        /// One run of the daemon with `clock`: `old` (made `ageDays` ago) refused as stale, `fresh` played.
        func run(clock: String, old: String, ageDays: Int64, fresh: String, freshAgeDays: Int64) throws {
            link.daemon.environment["SOUNDBOX_TEST_CLOCK"] = clock
            try link.start()
            try link.backend.pay(try keys[0].sign(#"{"id":"\#(old)","amount":"1","ts":\#(now - ageDays * 86_400)}"#, device: link.device))
            try link.backend.pay(try keys[0].sign(#"{"id":"\#(fresh)","amount":"1","ts":\#(now - freshAgeDays * 86_400)}"#, device: link.device))
            #expect(link.backend.waitForReceipts([old], ["rejected"]))
            #expect(link.backend.waitForReceipts([fresh], ["played"]))
            let reason = link.backend.receipts.first { $0["id"] as? String == old }?["reason"] as? String ?? ""
            #expect(reason.hasPrefix("signature: stale"), "\(reason)")
            #expect(link.daemon.stop().0 == 0)
        }
        try run(clock: "synced", old: "S-OLD", ageDays: 8, fresh: "S-NOW", freshAgeDays: 0)
        // Unsynchronised, after a restart: the device trusts no clock but
        // the newest signed ts it saw (S-NOW's, kept in its database).
        try run(clock: "unsynced", old: "S-OLD2", ageDays: 8, fresh: "S-OLD3", freshAgeDays: 2)
    }

    /// doctor: the mode, the keys with their ids and files; `required`
    /// without a key is a failure, not OK.
    @Test func doctorReportsSigning() throws {
        let scratch = Scratch()
        let key = try BackendKey(dir: scratch.path + "/k", name: "backend")
        try "not a key\n".write(toFile: scratch.path + "/k/junk.pem", atomically: true, encoding: .utf8)
        for (config, status, words) in [
            (["payment.signing": "off"], "ok", ["off"]),
            (["payment.signing": "required", "payment.keys": scratch.path + "/empty"], "fail", ["no key", "every payment is refused"]),
            (["payment.signing": "required", "payment.keys": scratch.path + "/k"], "warn", [key.id, key.publicPath, "junk.pem"]),
        ] {
            let dir = scratch.path + "/d\(status)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let daemon = try Daemon(dir: dir, config: config)
            try daemon.start()
            let check = try signingCheck(daemon)
            #expect(check.status == status, "\(config): \(check.detail)")
            for w in words { #expect(check.detail.contains(w), "\(config): \(check.detail)") }
            _ = daemon.stop()
        }
    }

    /// A say typed on the box is never mistaken for a payment: it opens
    /// with the test words, whatever the signing mode.
    @Test func aLocalSayOpensWithTheTestWords() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["log.level": "debug"])
        try daemon.start()
        #expect(try daemon.request("say", "12.50", "--id", "L1")["status"] == "queued")
        try daemon.until("queue") { _ in LogEvents(daemon.log(run: 1)).ids("played").contains("L1") }
        let clips = LogEvents(daemon.log(run: 1)).events.first { $0.event == "clips" && $0.fields["id"] == "L1" }?.fields["clips"]
        #expect(clips == "测试 十 二 点 五 元", "\(clips ?? "no clips line")")
        #expect(try daemon.request("history")["channel"] == "local")
        _ = daemon.stop()
    }

    /// docs/signing.md's reference signer (Python's `cryptography`, from
    /// the page itself) and its openssl recipe make messages the device
    /// plays: the page cannot drift from what the device checks.
    @Test func theDocumentedSignersMakeWhatTheDeviceAccepts() throws {
        let (link, keys) = try signedLink()
        let page = try String(contentsOfFile: Build.root + "/docs/signing.md", encoding: .utf8)
        let python = try #require(page.components(separatedBy: "```python\n").dropFirst().first?.components(separatedBy: "```").first)
        let script = python.replacingOccurrences(of: #"open("backend.key", "rb")"#, with: #"open("\#(keys[0].privatePath)", "rb")"#)
            .replacingOccurrences(of: #"print(sign({"id": "T1", "amount": "12.50", "currency": "CNY", "channel": "alipay"}, "payment", "shop-1", key))"#,
                                  with: """
                                  print(sign({"id": "PY1", "amount": "12.50", "currency": "CNY", "channel": "alipay"}, "payment", "shop-1", key))
                                  print(sign({"id": "PY2", "amount_minor": 99, "lang": "zh-CN"}, "payment", "shop-1", key))
                                  print(sign({"audio": {"volume": 3}, "queue.stale_after_s": "900"}, "config", "shop-1", key))
                                  print(sign({"cmd": "replay", "id": "PY1"}, "cmd", "shop-1", key))
                                  """)
        #expect(script != python, "the page's example call changed: update this test")
        let run = try CommandRun(["/usr/bin/python3", "-c", script])
        let lines = run.stdout.split(separator: "\n").map(String.init)
        try #require(run.status == 0 && lines.count == 4, "\(run.stderr)")

        // The openssl recipe, with the page's own canonical text for PY3.
        let recipe = try #require(page.components(separatedBy: "printf '").dropFirst().first?.components(separatedBy: "' \\\n").first)
        let canonical = recipe.replacingOccurrences(of: "%s", with: keys[0].id).replacingOccurrences(of: "\\n", with: "\n")
            .replacingOccurrences(of: "id=T1\n", with: "id=PY3\n").replacingOccurrences(of: "ts=1764415000", with: "ts=\(Int(Date().timeIntervalSince1970))")
        try canonical.write(toFile: link.scratch.path + "/canonical.txt", atomically: true, encoding: .utf8)
        let sig = try CommandRun(["/usr/bin/env", "sh", "-c", "openssl pkeyutl -sign -rawin -inkey \(keys[0].privatePath) -in \(link.scratch.path)/canonical.txt | base64 -w0"])
        let ts = try #require(canonical.components(separatedBy: "ts=").dropFirst().first?.prefix { $0.isNumber })
        let py3 = #"{"channel":"alipay","currency":"CNY","amount":"12.5","id":"PY3","ts":\#(ts),"kid":"\#(keys[0].id)","sig":"\#(sig.stdout)"}"#

        try link.start()
        try link.backend.pay(lines[0])
        try link.backend.pay(lines[1])
        try link.backend.pay(py3)
        #expect(link.backend.waitForReceipts(["PY1", "PY2", "PY3"], ["played"]), "\(link.backend.receipts)")
        try link.backend.publish(link.backend.topics.config, lines[2])
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.contains { $0["ok"] as? Bool == true } }, "\(link.backend.receipts)")
        #expect(try link.daemon.request("config", "get", "audio.volume")["audio.volume"] == "3")
        try link.backend.publish(link.backend.topics.cmd, lines[3])
        try link.daemon.until("status") { _ in LogEvents(link.daemon.log(run: 1)).ids("replaying").contains("PY1") }
        #expect(link.daemon.stop().0 == 0)
    }
}
