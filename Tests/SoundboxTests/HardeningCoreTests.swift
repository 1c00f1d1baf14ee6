// ~410 lines: the core's pure decisions (receipt window, request queue, takeover, link prompts, …), one short suite each over scripted sequences.
import Foundation
import Testing
import TestSupport
@testable import Soundbox

/// The receipt window over scripted sequences of publishes, PUBACKs and
/// link changes (docs/mqtt.md "Session and delivery").
@Suite struct ReceiptWindowTests {
    @Test func publishedThenAcknowledgedThenForgotten() {
        var w = ReceiptWindow(capacity: 3)
        #expect(w.room == 0 && !w.needsSending(.outbox(1)), "nothing is sent before the link is up")
        w.connected()
        #expect(w.room == 3)
        w.published(.outbox(1), mid: 10)
        w.published(.outbox(2), mid: 11)
        #expect(w.room == 1)
        #expect(!w.needsSending(.outbox(1)) && w.needsSending(.outbox(3)))
        #expect(w.acknowledge(mid: 11) == .outbox(2))
        #expect(w.acknowledged == [.outbox(2)])
        #expect(!w.needsSending(.outbox(2)), "acknowledged, not yet deleted: not sent again")
        w.forget([.outbox(2)])
        #expect(w.acknowledged.isEmpty && w.room == 2)
    }

    @Test func aPUBACKForAnotherMessageChangesNothing() {
        var w = ReceiptWindow(capacity: 20)
        w.connected()
        w.published(.outbox(7), mid: 1)
        #expect(w.acknowledge(mid: 2) == nil, "a status or config/applied PUBACK")
        #expect(w.acknowledge(mid: 1) == .outbox(7))
        #expect(w.acknowledge(mid: 1) == nil, "a second PUBACK for the same mid")
        #expect(w.acknowledged == [.outbox(7)])
    }

    @Test func whatWasInFlightIsSentAgainAfterAReconnectButNotWhatWasAcknowledged() {
        var w = ReceiptWindow(capacity: 20)
        w.connected()
        w.published(.outbox(1), mid: 1)
        w.published(.memory(5), mid: 2)
        w.published(.outbox(2), mid: 3)
        _ = w.acknowledge(mid: 3)
        w.disconnected()
        #expect(w.room == 0 && !w.needsSending(.outbox(1)))
        #expect(w.acknowledge(mid: 1) == nil, "a PUBACK of the old link after it dropped")
        w.connected()
        #expect(w.needsSending(.outbox(1)) && w.needsSending(.memory(5)))
        #expect(!w.needsSending(.outbox(2)))
        #expect(w.inFlightCount == 0)
    }

    @Test func aReusedMidSupersedesTheOlderMessage() {
        var w = ReceiptWindow(capacity: 20)
        w.connected()
        w.published(.outbox(1), mid: 65535)
        w.published(.outbox(9), mid: 65535)   // ids wrapped around
        #expect(w.needsSending(.outbox(1)), "the older one will be sent again")
        #expect(w.acknowledge(mid: 65535) == .outbox(9))
    }

    /// A random script against a simple model: every receipt ends
    /// acknowledged exactly when the model says so; room never negative.
    @Test func randomScriptsMatchAModel() {
        var rng = SplitMix64(seed: 0x5EED)
        for _ in 0..<200 {
            var w = ReceiptWindow(capacity: 5)
            var inFlight: [Int32: ReceiptRef] = [:], acked: Set<ReceiptRef> = [], connected = false
            var mid: Int32 = 0
            for _ in 0..<100 {
                switch rng.below(5) {
                case 0: w.connected(); connected = true; inFlight = [:]
                case 1: w.disconnected(); connected = false; inFlight = [:]
                case 2:
                    let ref = ReceiptRef.outbox(Int64(rng.below(12)))
                    #expect(w.needsSending(ref) == (connected && !inFlight.values.contains(ref) && !acked.contains(ref)))
                    if w.needsSending(ref) && w.room > 0 { mid += 1; w.published(ref, mid: mid); inFlight[mid] = ref }
                case 3:
                    let m = Int32(rng.below(Int(mid) + 2))
                    #expect(w.acknowledge(mid: m) == inFlight[m])
                    if let r = inFlight.removeValue(forKey: m) { acked.insert(r) }
                default:
                    w.forget(Array(acked)); acked = []
                }
                #expect(w.room >= 0 && w.room <= 5)
                #expect(Set(w.acknowledged) == acked)
            }
        }
    }
}

@Suite struct RequestQueueTests {
    final class Job { let key: String; init(_ k: String) { key = k } }

    @Test func paymentsComeFirst() {
        var q = RequestQueue<Job>(capacity: 4)
        _ = q.submit(key: "replay:T1") { Job("replay:T1") }
        #expect(q.next(paymentsWaiting: true) == nil)
        #expect(q.next(paymentsWaiting: false)?.key == "replay:T1")
        #expect(q.next(paymentsWaiting: false) == nil)
    }

    @Test func theSameRequestCoalescesAndTheQueueIsBounded() {
        var q = RequestQueue<Job>(capacity: 2)
        guard case .queued(let first) = q.submit(key: "replay:T1", { Job("replay:T1") }) else { Issue.record("not queued"); return }
        guard case .joined(let same) = q.submit(key: "replay:T1", { Job("x") }) else { Issue.record("not joined"); return }
        #expect(first === same)
        guard case .queued = q.submit(key: "test", { Job("test") }) else { Issue.record("not queued"); return }
        guard case .refused = q.submit(key: "summary", { Job("summary") }) else { Issue.record("not refused"); return }
        #expect(q.count == 2)
        #expect(q.drain().map(\.key) == ["replay:T1", "test"] && q.isEmpty)
    }
}

@Suite struct AnnouncePolicyHeldBackTests {
    /// A payment that waited behind a replay is not expired for it.
    @Test func timeHeldBackByARequestDoesNotCount() {
        let busy: ClosedRange<Int64> = 1_000...9_000
        let held = AnnouncePolicy.overlap(from: 2_000, to: 10_000, busy: busy)
        #expect(held == 7_000)
        #expect(AnnouncePolicy.decide(happenedAt: 2, now: 10, staleAfter: 5, clockSynchronized: true, muted: false)
            == .expire(reason: "stale: 8 s old, limit 5 s"))
        #expect(AnnouncePolicy.decide(happenedAt: 2, now: 10, heldBack: held / 1000, staleAfter: 5, clockSynchronized: true, muted: false) == .speak)
        #expect(AnnouncePolicy.overlap(from: 9_500, to: 10_000, busy: busy) == 0, "arrived after the request")
        #expect(AnnouncePolicy.overlap(from: 0, to: 500, busy: busy) == 0)
        #expect(AnnouncePolicy.overlap(from: 0, to: 500, busy: nil) == 0)
    }
}

@Suite struct TakeoverWatchTests {
    @Test func threeCertainTakeoversInARowAreAFaultWithGrowingBackoff() {
        var w = TakeoverWatch()
        var t = 0.0
        var waits: [Double] = []
        for _ in 0..<5 {
            w.connected(at: t); t += 100
            waits.append(w.disconnected(at: t, certain: true, lost: true)); t += 1
        }
        #expect(waits == [0, 0, 15, 30, 60])
        #expect(w.isTakenOver)
    }

    /// MQTT 3.1.1: a link lost soon after it came up, again and again.
    @Test func quickLossesAreSuspectedButALongLinkIsNot() {
        var w = TakeoverWatch()
        w.connected(at: 0)
        #expect(w.disconnected(at: 3600, certain: false, lost: true) == 0)
        #expect(w.inARow == 0, "a link that was up for an hour dropped: the network")
        for i in 0..<3 { w.connected(at: Double(10 * i)); _ = w.disconnected(at: Double(10 * i + 2), certain: false, lost: true) }
        #expect(w.isTakenOver)
        w.connected(at: 100)
        #expect(w.disconnected(at: 101, certain: false, lost: false) == 0, "a clean disconnect we asked for")
        #expect(!w.isTakenOver)
    }

    /// Issue 18 item 10: two boxes with one id over MQTT 3.1.1 (or
    /// mosquitto before 2.0.15). Once one box holds off, the other is kicked
    /// only when it comes back: up to the longest reconnect wait
    /// (mqtt.reconnect_max_s, 60 s) after its own connect. That is a loss
    /// soon after a connect too: it logged `takeover=no` every time.
    @Test func theBoxKickedAfterTheOthersHoldOffSuspectsItToo() {
        var w = TakeoverWatch()
        var t = 0.0
        for up in [2.0, 16, 31, 61, 62, 61] {
            w.connected(at: t); t += up
            _ = w.disconnected(at: t, certain: false, lost: true); t += 1.5
        }
        #expect(w.isTakenOver && w.inARow == 6)
        w.connected(at: t)
        #expect(!w.check(at: t + 90) && w.isTakenOver, "up as long as the other box's longest wait proves nothing")
        #expect(w.check(at: t + 180) && !w.isTakenOver, "twice that clears it")
    }

    @Test func aLinkThatStaysUpClearsTheFault() {
        var w = TakeoverWatch(threshold: 1, reconnectMax: 30)
        #expect(w.quickLoss == 60 && w.stableAfter == 120)
        w.connected(at: 0)
        _ = w.disconnected(at: 1, certain: true, lost: true)
        #expect(w.isTakenOver)
        w.connected(at: 10)
        #expect(w.nextCheck == 130)
        #expect(!w.check(at: 100) && w.isTakenOver)
        #expect(w.check(at: 130) && !w.isTakenOver)
        #expect(w.nextCheck == nil)
    }
}

extension TakeoverWatchTests {
    /// The hold-off grows from 15 s but never past mqtt.reconnect_max_s (a
    /// longer wait would make the other box's losses look slow), and
    /// "soon after a connect" follows that setting.
    @Test func holdOffsAreCappedByTheLongestReconnectWait() {
        for (max, expected) in [(20, [0.0, 0, 15, 20, 20]), (2, [0, 0, 2, 2, 2]), (600, [0, 0, 15, 30, 60])] {
            var w = TakeoverWatch(reconnectMax: max)
            #expect(w.quickLoss == Double(max) + 30 && w.stableAfter == 2 * w.quickLoss)
            var t = 0.0, waits: [Double] = []
            for _ in 0..<5 {
                w.connected(at: t); t += w.quickLoss - 1
                waits.append(w.disconnected(at: t, certain: false, lost: true)); t += 1
            }
            #expect(waits == expected, "reconnect_max_s \(max)")
        }
        var w = TakeoverWatch(reconnectMax: 20)
        w.connected(at: 0)
        _ = w.disconnected(at: 50, certain: false, lost: true)
        #expect(w.inARow == 0, "up for longer than 20 + 30 s: the network")
    }
}

/// Issue 18 item 10: when 网络已断开 / 网络已连接 are spoken, over scripted
/// links (monotonic seconds, no clock).
@Suite struct LinkPromptsTests {
    @Test func aLossIsSpokenAfterTenSecondsAndTheReconnectAnswersIt() {
        var p = LinkPrompts()
        #expect(p.nextCheck == nil)
        p.disconnected(at: 100)
        #expect(p.nextCheck == 110)
        #expect(p.check(at: 109.9, conflict: false) == nil)
        #expect(p.check(at: 110, conflict: false) == .networkDisconnected)
        #expect(p.check(at: 111, conflict: false) == nil, "once per loss")
        #expect(p.nextCheck == nil)
        #expect(p.connected(at: 130) == .networkConnected)
    }

    @Test func aShortLossIsNotSpokenNorItsReconnect() {
        var p = LinkPrompts()
        p.disconnected(at: 0)
        #expect(p.check(at: 3, conflict: false) == nil)
        #expect(p.connected(at: 4) == nil)
        #expect(p.nextCheck == nil)
        #expect(p.check(at: 20, conflict: false) == nil, "the link is up")
    }

    @Test func nothingIsSpokenWhileATakeoverIsSuspected() {
        var p = LinkPrompts()
        p.disconnected(at: 0)
        #expect(p.check(at: 15, conflict: true) == nil)
        #expect(p.check(at: 30, conflict: false) == nil, "that loss was decided")
        #expect(p.connected(at: 40) == nil, "no loss was spoken")
    }

    @Test func aLossAtMostOnceAMinute() {
        var p = LinkPrompts()
        p.disconnected(at: 0)
        #expect(p.check(at: 10, conflict: false) == .networkDisconnected)
        #expect(p.connected(at: 20) == .networkConnected)
        p.disconnected(at: 30)
        #expect(p.check(at: 40, conflict: false) == nil, "30 s after the last loss prompt")
        #expect(p.connected(at: 45) == nil, "that loss was not spoken")
        p.disconnected(at: 60)
        #expect(p.check(at: 70, conflict: false) == .networkDisconnected)
        #expect(p.connected(at: 75) == .networkConnected, "a spoken loss is always answered")
    }

    /// The field report: two boxes with one id, each flipping every few
    /// seconds for 15 minutes, spoke 10 prompts each. Driven through
    /// TakeoverWatch as the daemon does: not one prompt.
    @Test func twoBoxesWithOneIDSpeakNothing() {
        var watch = TakeoverWatch(), prompts = LinkPrompts()
        var t = 0.0, spoken: [Prompt] = []
        func tick(until end: Double) {
            while t < end {
                if let p = prompts.check(at: t, conflict: watch.isTakenOver) { spoken.append(p) }
                t += 0.5
            }
        }
        while t < 900 {
            watch.connected(at: t)
            if let p = prompts.connected(at: t) { spoken.append(p) }
            tick(until: t + 1.5)   // kicked by the other box soon after
            let holdOff = watch.disconnected(at: t, certain: false, lost: true)
            prompts.disconnected(at: t)
            tick(until: t + max(1.5, holdOff))
        }
        #expect(watch.isTakenOver)
        #expect(spoken.isEmpty, "\(spoken)")
    }
}

@Suite struct LogLineTests {
    @Test func plainValuesAreWrittenAsTheyAre() {
        #expect(LogLine.format(priority: 6, subsystem: "queue", event: "played", fields: ["id": "T1", "seq": "4"])
            == "<6>queue: played id=T1 seq=4")
        #expect(LogLine.format(priority: 4, subsystem: "voice", event: "clip", fields: ["clip": "元"]) == "<4>voice: clip clip=元")
    }

    /// Values quote unambiguously: `Q"1` is not confused with `Q'1`, and no
    /// control character reaches the log raw.
    @Test(arguments: [
        ("Q\"1", #""Q\"1""#), ("Q'1", "Q'1"), ("a b", #""a b""#), ("", #""""#), ("k=v", #""k=v""#),
        ("back\\slash", #""back\\slash""#), ("line\nfeed", #""line\nfeed""#), ("\u{1B}[31mred", #""\u{1B}[31mred""#),
        ("nul\u{0}", #""nul\u{0}""#), ("del\u{7F}", #""del\u{7F}""#), ("c1\u{85}", #""c1\u{85}""#),
        ("rtl\u{202E}gnp.exe", #""rtl\u{202E}gnp.exe""#), ("ls\u{2028}x", #""ls\u{2028}x""#),
    ])
    func hostileValuesAreQuotedAndEscaped(_ value: String, _ written: String) throws {
        let line = LogLine.format(priority: 4, subsystem: "ingest", event: "rejected", fields: ["id": value, "reason": "x"])
        #expect(line == "<4>ingest: rejected id=\(written) reason=x")
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        let parsed = try #require(LogLine.parse(Substring(line)))
        #expect(parsed["id"] == value && parsed["reason"] == "x")
    }

    /// Any value, written and read back, is itself; and a line never spans two.
    @Test func randomValuesRoundTrip() throws {
        var rng = SplitMix64(seed: 7)
        let alphabet: [Unicode.Scalar] = ["a", " ", "\"", "\\", "=", "\n", "\r", "\t", "\u{0}", "\u{1B}", "\u{7F}", "\u{85}",
                                          "\u{2028}", "\u{202E}", "\u{FEFF}", "元", "é", "u", "{", "}"]
        for _ in 0..<2000 {
            var v = String.UnicodeScalarView()
            for _ in 0..<rng.below(12) { v.append(alphabet[rng.below(alphabet.count)]) }
            let value = String(v)
            let line = LogLine.format(priority: 6, subsystem: "s", event: "e", fields: ["k": value, "z": "1"])
            #expect(!line.contains("\n") && !line.contains("\r"))
            let parsed = try #require(LogLine.parse(Substring(line)), "\(line)")
            #expect(parsed["k"] == value, "\(line)")
            #expect(parsed["z"] == "1")
        }
    }
}

@Suite struct JSONObjectTests {
    @Test func membersInOrderAndEscaped() throws {
        var o = JSONObject()
        o.add("id", "T\"1\u{1}")
        o.add("n", 3)
        o.add("ok", false)
        o.add("list", ["a", "b"])
        var inner = JSONObject()
        inner.add("k", "v")
        o.add("inner", inner)
        #expect(o.text == #"{"id":"T\"1\u0001","n":3,"ok":false,"list":["a","b"],"inner":{"k":"v"}}"#)
        let back = try JSONValue.parse(Array(o.text.utf8))
        #expect(back["id"] == .string("T\"1\u{1}"))
    }
}

@Suite struct VoiceCatalogTests {
    static let repoVoices: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path + "/voices"
    }()

    @Test func onlyInstalledPacksByTheirNames() {
        let c = VoiceCatalog.scan(directory: Self.repoVoices)
        #expect(c.names == ["as-IN", "bn-IN", "en-IN", "gu-IN", "hi-IN", "kn-IN", "ml-IN", "mr-IN", "or-IN", "pa-IN", "ta-IN", "te-IN", "ur-IN", "zh-CN"])
        #expect(c.canonical("zh-CN") == "zh-CN")
        #expect(c.canonical("zh-cn") == "zh-CN", "case does not make a second pack")
        for alias in ["zh-CN/.", "zh-CN/./.", "./zh-CN", "../voices/zh-CN", "../../etc", "/etc", "xx", ""] {
            #expect(c.canonical(alias) == nil, "\(alias)")
        }
    }

    /// The fallback chain (docs/grammars.md), step by step: the payment's
    /// `lang`, else voice.lang (each with its manifest's fallbacks), else
    /// any installed pack that reads the currency, else the chime.
    @Test func theFallbackChain() {
        let c = VoiceCatalog.scan(directory: Self.repoVoices)
        // 1. The payment's lang, when installed (and for its currency).
        #expect(c.reader(lang: "hi-IN", currency: "INR", defaultPack: "zh-CN") == .init(pack: "hi-IN"))
        #expect(c.reader(lang: "hi-in", currency: nil, defaultPack: "zh-CN") == .init(pack: "hi-IN"))
        // 2. Else voice.lang: the lang is not installed, or its pack does not read the currency.
        #expect(c.reader(lang: "sw-KE", currency: nil, defaultPack: "zh-CN") == .init(pack: "zh-CN", missing: "sw-KE"))
        #expect(c.reader(lang: "en-IN", currency: "CNY", defaultPack: "zh-CN") == .init(pack: "zh-CN"))
        #expect(c.reader(lang: nil, currency: "CNY", defaultPack: "zh-CN") == .init(pack: "zh-CN"))
        // 3. Else any installed pack that reads it (English first: en-IN before as-IN and hi-IN).
        #expect(c.reader(lang: nil, currency: "INR", defaultPack: "zh-CN") == .init(pack: "en-IN"))
        #expect(c.reader(lang: "sw-KE", currency: "INR", defaultPack: "zh-CN") == .init(pack: "en-IN", missing: "sw-KE"))
        // 4. Else the chime, never another currency's word.
        #expect(c.reader(lang: nil, currency: "USD", defaultPack: "zh-CN") == .init(pack: "zh-CN", chime: true))
        #expect(c.reader(lang: "hi-IN", currency: "USD", defaultPack: "zh-CN") == .init(pack: "hi-IN", chime: true))
        #expect(c.chimeReason("USD") == "chime: no installed voice pack reads USD (INR: as-IN bn-IN en-IN gu-IN hi-IN kn-IN ml-IN mr-IN or-IN pa-IN ta-IN te-IN ur-IN; CNY: zh-CN)")
        #expect(VoiceCatalog(directory: "/nowhere", packs: [:]).reader(lang: nil, currency: "CNY", defaultPack: "zh-CN").chime)

        // A manifest's fallback comes before voice.lang and before any other pack.
        var packs = c.packs
        packs["hi-IN"]?.fallback = "en-IN"
        packs["en-IN"]?.currency = "USD"
        let chained = VoiceCatalog(directory: c.directory, packs: packs)
        #expect(chained.reader(lang: "hi-IN", currency: "USD", defaultPack: "zh-CN") == .init(pack: "en-IN"))
        packs["en-IN"]?.fallback = "hi-IN"   // a loop ends
        #expect(VoiceCatalog(directory: c.directory, packs: packs).reader(lang: "en-IN", currency: "EUR", defaultPack: "zh-CN").chime)
    }
}

@Suite struct ConfigScopeTests {
    /// Outputs, paths and devices are only the settings file's (issue: a
    /// remote config could make the daemon write any file).
    @Test func filePathsOutputsAndDevicesAreFileOnly() {
        for name in ["audio.output", "audio.device", "audio.wav_file", "state.dir", "control.socket", "voice.dir",
                     "mqtt.host", "mqtt.tls.ca", "device.id", "gpio.chip"] {
            #expect(ConfigKey.named(name)?.scope == .file, "\(name)")
        }
        let remote = ConfigKey.all.filter { $0.scope == .remote }.map(\.name).sorted()
        #expect(remote == ["audio.min_volume", "audio.mute", "audio.volume", "mqtt.link_prompts", "queue.history_max",
                           "queue.retention_days", "queue.stale_after_s", "queue.summary_after_s", "queue.summary_min", "voice.lang"])
    }

    @Test func typedValues() throws {
        var c = Config()
        try c.set("audio.volume", "09")
        try c.set("audio.mute", "true")
        try c.set("payment.max_amount", "5")
        #expect(c[.audioVolume] == 9 && c.text(IntKey.audioVolume.key) == "9")
        #expect(c[.audioMute] == true)
        #expect(c[.paymentMaxAmount] == Amount(minorUnits: 500))
        #expect(throws: ConfigError.self) { try c.set("voice.lang", "../../etc") }
        #expect(throws: ConfigError.self) { try c.set("voice.lang", "zh-CN/.") }
    }
}
