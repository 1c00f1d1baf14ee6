import Foundation
import Testing
import TestSupport
import TestRig
import MQTTBridge
import Soundbox
import SoundboxStore

extension Link {
    /// A link whose daemon reaches the broker through a FaultProxy.
    static func throughProxy(config: [String: String] = [:]) throws -> (Link, FaultProxy) {
        var proxy: FaultProxy?
        let link = try Link(config: config) { broker in
            let p = try FaultProxy(upstreamPort: broker.port)
            proxy = p
            return p.port
        }
        return (link, try #require(proxy))
    }
}

@Suite struct MQTTDaemonTests {
    /// Hundreds of payments with duplicates interleaved: each id played
    /// once, each duplicate answered `duplicate`, receipts for all.
    @Test func paymentsInReceiptsOut() throws {
        let link = try Link()
        try link.start()
        let ids = (1...300).map { "P\($0)" }
        var duplicates: [String] = []
        for (i, id) in ids.enumerated() {
            try link.backend.pay(id: id, amount: "\(i + 1).\(i % 100 < 10 ? "0" : "")\(i % 100)")
            if i % 7 == 6 { try link.backend.pay(id: ids[i - 3], amount: "1"); duplicates.append(ids[i - 3]) }
        }
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        #expect(link.backend.waitUntil(timeout: 20) {
            duplicates.allSatisfy { link.backend.receipts(for: $0).contains("duplicate") }
        })
        for id in ids {
            let r = link.backend.receipts(for: id)
            #expect(r.filter { $0 == "played" }.count == 1 && r.contains("queued"), "\(id): \(r)")
        }
        // Every receipt acknowledged by the broker and deleted from the outbox.
        #expect(try link.daemon.until("status") { $0["receipts_pending"] == "0" }["receipts_pending"] == "0")
        _ = link.daemon.stop()
        let entries = try link.entries()
        #expect(entries.count == 300)
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
        #expect(try Store(path: link.daemon.database).outbox(limit: 10).isEmpty)
    }

    /// The PUBACK leaves only after on_message made the payment durable: a
    /// crash inside on_message loses nothing, the broker redelivers.
    @Test func crashInsideOnMessageLosesNothing() throws {
        let link = try Link()
        try link.start(failpoint: "in_on_message")
        try link.backend.pay(id: "K1", amount: "8.88")
        #expect(link.daemon.waitExit() == 9)   // SIGKILL inside on_message
        #expect(try link.entries().isEmpty)
        try link.start()
        #expect(link.backend.waitForReceipts(["K1"], ["played"]))
        _ = link.daemon.stop()
        #expect(try link.entries().map(\.payment.id) == ["K1"])
    }

    /// Payments published while the daemon is down are played once it is up.
    @Test func offlinePaymentsArriveAfterStart() throws {
        let link = try Link()
        try link.start()
        _ = link.daemon.stop()
        let ids = (1...25).map { "O\($0)" }
        for id in ids { try link.backend.pay(id: id, amount: "3") }
        try link.start()
        #expect(link.backend.waitForReceipts(ids, ["played"]))
        _ = link.daemon.stop()
        #expect(try link.entries().count == 25)
    }

    /// A box that boots before its network (or broker) keeps trying.
    @Test func brokerDownAtStart() throws {
        let link = try Link()
        link.broker.stop()
        try link.daemon.start()
        try link.daemon.until("status", timeout: 100) { _ in link.daemon.log(run: 1).contains("Connection refused") }
        try link.broker.restart()
        #expect(link.backend.waitUntil(timeout: 30) { link.backend.status?["online"] as? Bool == true })
        try link.backend.pay(id: "LATE", amount: "1.50")
        #expect(link.backend.waitForReceipts(["LATE"], ["played"]))
        #expect(link.daemon.stop().0 == 0)
    }

    /// Link prompts: the merchant hears when the network goes and comes back.
    @Test func linkPrompts() throws {
        let link = try Link(config: ["mqtt.link_prompts": "true"])
        try link.start()
        link.broker.kill9()
        try link.daemon.until("status", timeout: 100) { _ in link.daemon.log(run: 1).contains("prompt name=network_disconnected") }
        try link.broker.restart()
        try link.daemon.until("status", timeout: 100) { _ in link.daemon.log(run: 1).contains("prompt name=network_connected") }
        #expect(link.daemon.stop().0 == 0)
    }

    /// Payments first: a payment waiting at the broker when the link comes
    /// back is spoken before 网络已连接 (the prompt waits for the backlog and
    /// gives way to it; it used to start at the CONNACK, a moment before
    /// the payment landed, and hold it for its whole length). The null
    /// output takes as long as real sound would.
    @Test func aPaymentWaitingAtTheReconnectGoesBeforeTheLinkPrompt() throws {
        let (link, faults) = try Link.throughProxy(config: ["mqtt.link_prompts": "true", "audio.null_realtime": "true"])
        try link.start()
        // The box's way to the broker is gone; the broker keeps its session.
        faults.refuse(true)
        _ = faults.dropAll()
        try link.daemon.until("status", timeout: 100) { _ in link.daemon.log(run: 1).contains("prompt name=network_disconnected") }
        try link.backend.pay(id: "FIRST", amount: "8.80")
        faults.refuse(false)
        #expect(link.backend.waitForReceipts(["FIRST"], ["played"], timeout: 60))
        let log = link.daemon.log(run: 1)
        let after = String(log[log.range(of: "prompt name=network_disconnected")!.upperBound...])
        // The payment before the prompt (which then follows it, or was
        // skipped), or the prompt cut when the payment came.
        let spoken = after.range(of: "speaking id=FIRST")!.lowerBound
        #expect(after.range(of: "prompt name=network_connected").map { spoken < $0.lowerBound } ?? true
                    || after.contains("prompt_cut name=network_connected"), "\(log)")
        #expect(link.daemon.stop().0 == 0)
    }

    /// Secrets never reach logs or `config get`.
    @Test func passwordIsNeverShown() throws {
        let link = try Link(config: ["mqtt.username": "shop", "mqtt.password": "s3cret-Pw!"])
        try link.start()
        #expect(try link.daemon.request("config", "get", "mqtt.password")["mqtt.password"] == "********")
        #expect(try link.daemon.request("config", "get")["mqtt.password"] == "********")
        #expect(link.daemon.stop().0 == 0)
        #expect(!link.daemon.log(run: 1).contains("s3cret"))
    }

    /// `mqtt.host` with two brokers (a cluster's nodes): the device uses
    /// the first; when it goes away, the second, where a payment published
    /// there is played; status and doctor name the broker in use.
    @Test func severalBrokersAreTriedInTurn() throws {
        let link = try Link()
        let second = try Broker(dir: link.scratch.path + "/broker2")
        try link.daemon.reconfigure(["mqtt.host": "127.0.0.1:\(link.broker.port), 127.0.0.1:\(second.port)"])
        try link.start()
        #expect(try link.daemon.request("doctor").pairs.records(startingWith: "check").contains { r in
            r.contains { $0.value.contains("connected to 127.0.0.1:\(link.broker.port)") } })
        link.broker.stop()
        let other = try Backend(port: second.port, device: "shop-1")
        #expect(other.waitUntil(timeout: 60) { other.status?["online"] as? Bool == true }, "\(link.daemon.log(run: 1))")
        try other.pay(id: "NODE2", amount: "2.00")
        #expect(other.waitForReceipts(["NODE2"], ["played"]))
        #expect(link.daemon.log(run: 1).contains("broker=127.0.0.1:\(second.port)"))
        #expect(link.daemon.stop().0 == 0)
    }

    /// The will: a device that vanishes is shown offline.
    @Test func willSaysOfflineWhenTheDaemonDies() throws {
        let link = try Link()
        try link.start()
        link.daemon.kill9()
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.status?["online"] as? Bool == false })
        #expect(link.backend.status?["id"] as? String == link.device, "the will names its device too")
    }

    /// Bad payloads: a `rejected` receipt with a reason each; the good
    /// payments around them are played; the daemon keeps running.
    @Test func hostilePayloadsAreRejectedAndTheQueueFlows() throws {
        let link = try Link()
        try link.start()
        var rng = SplitMix64(seed: 42)
        let good = (1...40).map { "G\($0)" }
        var hostileCount = 0
        var g = 0
        for i in 0..<10_000 {
            if i % 250 == 0 && g < good.count { try link.backend.pay(id: good[g], amount: "12.34"); g += 1 }
            try link.backend.pay(Hostile.payload(i, &rng))
            hostileCount += 1
        }
        while g < good.count { try link.backend.pay(id: good[g], amount: "12.34"); g += 1 }
        #expect(link.backend.waitForReceipts(good, ["played"], timeout: 120))
        #expect(link.backend.waitUntil(timeout: 120) { link.backend.count("rejected") >= hostileCount })
        let rejected = link.backend.receipts.filter { $0["status"] as? String == "rejected" }
        #expect(rejected.allSatisfy { ($0["reason"] as? String)?.isEmpty == false })
        #expect(try link.daemon.request("status")["faults"] == "none")
        #expect(link.daemon.stop().0 == 0)
        // Each payload rejected exactly once by the daemon; its receipt may
        // reach the backend more than once (at-least-once, e.g. after a
        // reconnect under load), never less.
        let log = link.daemon.log(run: 1)
        #expect(log.components(separatedBy: "ingest: rejected").count - 1 == hostileCount)
        #expect(rejected.count >= hostileCount)
    }

    /// Remote config: all-or-nothing, persisted, answered; the same again is a no-op.
    @Test func remoteConfig() throws {
        let link = try Link()
        try link.start()
        let topic = link.backend.topics.config
        try link.backend.publish(topic, #"{"audio": {"volume": 9}, "queue.stale_after_s": 120}"#, retain: true)
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.count == 1 })
        let ok = try #require(link.backend.applied.first)
        #expect(ok["ok"] as? Bool == true)
        #expect((ok["config"] as? [String: Any])?["audio.volume"] as? String == "9")
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.status?["volume"] as? Int == 9 })

        // The same config again (here: a restart redelivers the retained one) changes nothing.
        _ = link.daemon.stop()
        try link.start()
        try link.backend.pay(id: "SYNC", amount: "1")
        #expect(link.backend.waitForReceipts(["SYNC"], ["played"]))
        #expect(link.backend.applied.count == 1)
        #expect(link.daemon.log(run: 2).contains("config_unchanged"))

        try link.backend.publish(topic, #"{"audio.volume": 11, "state.dir": "/x", "audio.mute": true}"#, retain: true)
        #expect(link.backend.waitUntil(timeout: 20) { link.backend.applied.count == 2 })
        let bad = link.backend.applied[1]
        #expect(bad["ok"] as? Bool == false)
        let rejected = try #require(bad["rejected"] as? [String: String])
        #expect(rejected.keys.sorted() == ["audio.volume", "state.dir"])
        #expect(rejected["audio.volume"]?.contains("expected an integer 0-10") == true)
        #expect(try link.daemon.request("config", "get", "audio.mute")["audio.mute"] == "false", "all or nothing")
        #expect(try link.daemon.request("status")["volume"] == "9")
        #expect(link.daemon.stop().0 == 0)
    }

    /// cmd: say, replay, summary, test; a bad cmd is logged and ignored.
    @Test func commands() throws {
        let link = try Link()
        try link.start()
        let cmd = link.backend.topics.cmd
        try link.backend.publish(cmd, #"{"cmd": "say", "amount": "66.60", "id": "CMD1"}"#)
        #expect(link.backend.waitForReceipts(["CMD1"], ["played"]))
        for c in [#"{"cmd": "replay"}"#, #"{"cmd": "summary"}"#, #"{"cmd": "test"}"#, #"{"cmd": "dance"}"#, "[1,2"] {
            try link.backend.publish(cmd, c)
        }
        try link.backend.pay(id: "AFTER", amount: "1")   // commands are handled in order, before this
        #expect(link.backend.waitForReceipts(["AFTER"], ["played"]))
        try link.daemon.until("status") { _ in link.daemon.log(run: 1).contains("queue: summary") }
        #expect(try link.daemon.request("idle", "30").ack == nil)
        let log = LogEvents(link.daemon.log(run: 1))
        #expect(log.ids("replaying") == ["CMD1"])
        #expect(log.events.contains { $0.event == "summary" && ["1", "2"].contains($0.fields["count"]) })
        #expect(log.events.filter { $0.event == "cmd_rejected" }.count == 2)
        #expect(link.daemon.stop().0 == 0)
    }
}


/// Deterministic generator of malformed payment payloads.
enum Hostile {
    static let valid = Array(#"{"id":"H","amount":"12.34","channel":"alipay","ts":1764415000}"#.utf8)

    static func payload(_ i: Int, _ rng: inout SplitMix64) -> String {
        let id = "X\(i)"
        switch i % 12 {
        case 0: return String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000)
        case 1: return #"{"id":"\#(id)","amount":1e308}"#
        case 2: return #"{"id":"\#(id)","amount":"NaN"}"#
        case 3: return #"{"id":"\#(id)","amount":-5}"#
        case 4: return #"{"amount":"5.00"}"#
        case 5: return #"{"id":"\#(id)","amount":"5","x":""# + String(repeating: "a", count: 5000) + #""}"#
        case 6: return #"{"id":"\#(id)","amount":["5"]}"#
        case 7: return #"{"id":"\#(id)","amount":"0.001"}"#
        case 8: return #"{"id":\#(i),"amount":"5"}"#
        case 9: return #"{"id":"\#(id)","amount":"5","ts":"yesterday"}"#
        case 10: return #"{"id":"\#(id)","amount":"100000000"}"#
        default:
            // A valid payload with random bytes flipped or cut short: a
            // mutation that happens to stay valid is replaced by a sure reject.
            var b = valid
            for _ in 0..<(1 + rng.below(4)) { b[rng.below(b.count)] = UInt8(rng.below(256)) }
            let s = String(decoding: b.prefix(1 + rng.below(b.count)), as: UTF8.self)
            return s.hasSuffix("}") ? s + "}" : s
        }
    }
}

/// Faults on the way: the broker dies, the link drops, stalls or is cut.
@Suite struct MQTTFaultTests {
    /// Broker SIGKILLed and restarted mid-stream: the backend re-sends what
    /// it has no receipt for; every payment is played exactly once.
    @Test func brokerKilledAndRestartedMidStream() throws {
        let link = try Link()
        try link.start()
        let ids = (1...200).map { "B\($0)" }
        for id in ids.prefix(100) { try link.backend.pay(id: id, amount: "2.22") }
        link.broker.kill9()
        try link.broker.restart()
        #expect(link.backend.waitUntil(timeout: 30) { link.backend.isConnected })
        for id in ids.dropFirst(100) { try? link.backend.pay(id: id, amount: "2.22") }
        #expect(link.backend.payUntilAcknowledged(ids, amount: "2.22"))
        #expect(link.daemon.log(run: 1).contains("mqtt: disconnected"))
        #expect(try link.daemon.request("idle", "60").ack == nil)
        _ = link.daemon.stop()
        let entries = try link.entries()
        #expect(entries.count == 200)
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
    }

    /// Through a proxy that drops connections, cuts a packet in half and
    /// goes silent (half-open: only keepalive notices): nothing is lost and
    /// every receipt arrives.
    @Test func droppedCutAndStalledLinks() throws {
        let (link, faults) = try Link.throughProxy()
        try link.start()
        let ids = (1...160).map { "F\($0)" }
        func disconnects() -> Int { link.daemon.log(run: 1).components(separatedBy: "mqtt: disconnected").count - 1 }

        for id in ids[0..<40] { try link.backend.pay(id: id, amount: "4.44") }
        faults.dropAll()
        for id in ids[40..<80] { try link.backend.pay(id: id, amount: "4.44") }
        try link.daemon.until("status", timeout: 100) { _ in disconnects() >= 1 }
        faults.cutMidPacket()
        for id in ids[80..<120] { try link.backend.pay(id: id, amount: "4.44") }
        #expect(link.backend.waitForReceipts(Array(ids[0..<120]), ["played"], timeout: 60))

        faults.stall(true)
        let before = disconnects()
        for id in ids[120..<160] { try link.backend.pay(id: id, amount: "4.44") }
        // keepalive 5 s: a silent link is given up after 1.5 × 5 s.
        try link.daemon.until("status", timeout: 200) { _ in disconnects() > before }
        faults.stall(false)
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        #expect(try link.daemon.until("status") { $0["receipts_pending"] == "0" }["receipts_pending"] == "0")
        _ = link.daemon.stop()
        let entries = try link.entries()
        #expect(entries.count == 160)
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
        #expect(faults.connectionsAccepted >= 3)
    }
}

/// TLS with client certificates; each device may use only its own topics.
@Suite struct MQTTTLSTests {
    @Test func deviceWorksOverTLSAndCannotReadAnotherDevicesPayments() throws {
        let scratch = Scratch()
        let certs = try Certificates.make(in: scratch.path + "/certs", devices: ["shop-1", "shop-2"])
        let acl = scratch.path + "/acl"
        try "pattern readwrite soundbox/v1/%u/#\n".write(toFile: acl, atomically: true, encoding: .utf8)
        let broker = try Broker(dir: scratch.path + "/broker",
                                tls: TLSListener(caFile: certs.ca, certFile: certs.serverCert, keyFile: certs.serverKey, aclFile: acl))
        let tlsPort = try #require(broker.tlsPort)
        let shop1 = certs.client("shop-1"), shop2 = certs.client("shop-2")
        let daemon = try Daemon(dir: scratch.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "localhost", "mqtt.port": "\(tlsPort)", "device.id": "shop-1",
            "mqtt.tls.ca": certs.ca, "mqtt.tls.cert": shop1.cert, "mqtt.tls.key": shop1.key,
            "mqtt.keepalive": "5", "mqtt.reconnect_max_s": "2",
        ])
        // The backend on the broker's plain (unrestricted) listener; shop-2 over TLS, trying to read shop-1.
        let backend = try Backend(port: broker.port, device: "shop-1")
        let spy = try Backend(port: tlsPort, device: "shop-2", tls: .init(ca: certs.ca, cert: shop2.cert, key: shop2.key),
                              host: "localhost", clientID: "shop-2", subscribe: ["soundbox/v1/shop-1/payment", "soundbox/v1/shop-1/#"])
        try daemon.start()
        #expect(backend.waitUntil(timeout: 20) { backend.status?["online"] as? Bool == true })
        try backend.pay(id: "TLS1", amount: "99.00")
        #expect(backend.waitForReceipts(["TLS1"], ["played"]))
        // Anything the broker would give shop-2 from shop-1's topics came
        // before this message to shop-2's own topic.
        try backend.publish("soundbox/v1/shop-2/receipt", #"{"sentinel":true}"#)
        #expect(spy.waitUntil(timeout: 20) { !spy.receipts.isEmpty })
        #expect(spy.messages(on: "soundbox/v1/shop-1/payment").isEmpty)
        #expect(daemon.log(run: 1).contains("tls=on"))
        #expect(daemon.stop().0 == 0)
        #expect(!daemon.log(run: 1).contains(shop1.key), "no secret paths or keys in logs beyond the config")
    }

    /// No insecure mode: a broker whose certificate the CA did not sign is
    /// refused, and the daemon keeps running, retrying.
    @Test func untrustedBrokerIsRefused() throws {
        let scratch = Scratch()
        let certs = try Certificates.make(in: scratch.path + "/certs", devices: ["shop-1"])
        let other = try Certificates.make(in: scratch.path + "/other", devices: ["shop-1"])
        let broker = try Broker(dir: scratch.path + "/broker",
                                tls: TLSListener(caFile: certs.ca, certFile: certs.serverCert, keyFile: certs.serverKey))
        let shop1 = other.client("shop-1")
        let daemon = try Daemon(dir: scratch.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "localhost", "mqtt.port": "\(try #require(broker.tlsPort))", "device.id": "shop-1",
            "mqtt.tls.ca": other.ca, "mqtt.tls.cert": shop1.cert, "mqtt.tls.key": shop1.key, "mqtt.reconnect_max_s": "2",
        ])
        let backend = try Backend(port: broker.port, device: "shop-1")
        try daemon.start()
        try backend.pay(id: "NO", amount: "1")
        try daemon.until("status", timeout: 50) { _ in daemon.log(run: 1).contains("certificate verify failed") }
        #expect(backend.status == nil, "the device never came online")
        #expect(try daemon.request("status")["queue_depth"] == "0")
        let doctor = try daemon.request("doctor").pairs.records(startingWith: "check")
        let brokerCheck = try #require(doctor.first { $0.first?.value == "broker" })
        #expect(brokerCheck.first { $0.key == "status" }?.value == "fail")
        #expect(brokerCheck.first { $0.key == "detail" }?.value.contains("certificate verify failed") == true)
        #expect(daemon.stop().0 == 0)
    }
}
