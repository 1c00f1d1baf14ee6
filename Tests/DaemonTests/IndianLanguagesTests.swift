import Foundation
import Soundbox
import Testing
import TestSupport
import TestRig

/// The Indian packs end to end (docs/grammars.md): rupee payments over MQTT
/// with `lang`, each spoken into the WAV file by its own language's pack
/// from that pack's clips (none substituted); and a box whose voice.lang is
/// one of them says the offline summary and today's total in it.
@Suite struct IndianLanguagesTests {
    static let languages = ["as-IN", "bn-IN", "gu-IN", "hi-IN", "kn-IN", "ml-IN", "mr-IN", "or-IN", "pa-IN", "ta-IN", "te-IN", "ur-IN"]

    private func wavSeconds(_ path: String) -> Double {
        Double((FileManager.default.contents(atPath: path)?.count ?? 44) - 44) / 2 / 22050
    }

    @Test func aRupeePaymentInEachLanguage() throws {
        let wav = "/tmp/sbx-indian-\(getpid())-\(UUID().uuidString.prefix(6)).wav"
        defer { unlink(wav) }
        let link = try Link(config: ["audio.output": "wav", "audio.wav_file": wav, "log.level": "debug"])
        try link.start()
        let ids = Self.languages.map { "IN-\($0)" }
        for (id, lang) in zip(ids, Self.languages) {
            try link.backend.pay(#"{"id":"\#(id)","amount":"1234.56","currency":"INR","lang":"\#(lang)"}"#)
        }
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 120))
        #expect(link.daemon.stop().0 == 0)
        let log = logLines(link.daemon.log(run: 1))
        for (id, lang) in zip(ids, Self.languages) {
            let said = log.first { $0.event == "clips" && $0["id"] == id }
            let words = try #require(Grammars.named(lang)).clips(for: Amount(minorUnits: 1234_56)).joined(separator: " ")
            #expect(said?["pack"] == lang, "\(id): \(String(describing: said))")
            #expect(said?["clips"]?.hasSuffix(words) == true, "\(id): \(said?["clips"] ?? "nothing") does not end in \(words)")
        }
        #expect(!log.contains { $0.event == "clip_substituted" || $0.event == "voice_unavailable" }, "every clip from its own pack")
        #expect(wavSeconds(wav) > 2 * Double(ids.count), "\(wavSeconds(wav)) s of sound for \(ids.count) payments")
    }

    /// A box with only the zh-CN and en-IN packs (a technician removed the
    /// others): a rupee payment in each Indian language is read, as
    /// docs/grammars.md's chain says, by the English pack (voice.lang zh-CN
    /// reads CNY, so step 4), never in Mandarin nor as a chime, and status
    /// names the languages it lacked (at most Voices.missingCap).
    @Test func aLanguageWhosePackIsNotInstalledFallsBackToAPackThatReadsRupees() throws {
        let scratch = Scratch()
        for pack in ["zh-CN", "en-IN"] {
            try FileManager.default.copyItem(atPath: Build.root + "/voices/" + pack, toPath: scratch.path + "/" + pack)
        }
        let link = try Link(config: ["voice.dir": scratch.path, "log.level": "debug"])
        try link.start()
        let ids = Self.languages.map { "NO-\($0)" }
        for (id, lang) in zip(ids, Self.languages) {
            try link.backend.pay(#"{"id":"\#(id)","amount":"12.50","currency":"INR","lang":"\#(lang)"}"#)
        }
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 120))
        for id in ids {
            let played = link.backend.receipts.first { $0["id"] as? String == id && $0["status"] as? String == "played" }
            #expect(played?["reason"] == nil, "\(id): spoken, not chimed: \(String(describing: played))")
        }
        let status = try link.daemon.request("status")
        #expect(status["voices"] == "en-IN,zh-CN")
        // Which 8 depends on how ingest and the scheduler interleave (each notes the name).
        let missing = status["voices_missing"]?.split(separator: ",").map(String.init) ?? []
        #expect(missing.count == 8 && Set(missing).isSubset(of: Self.languages), "\(missing)")
        #expect(link.daemon.stop().0 == 0)
        let clips = logLines(link.daemon.log(run: 1)).filter { $0.event == "clips" }
        let english = try #require(Grammars.named("en-IN")).clips(for: Amount(minorUnits: 12_50)).joined(separator: " ")
        for id in ids {
            let said = clips.first { $0["id"] == id }
            #expect(said?["pack"] == "en-IN" && said?["clips"]?.hasSuffix(english) == true, "\(id): \(String(describing: said))")
        }
    }

    /// Tamil as voice.lang: the payments published while the box was off are
    /// one summary in Tamil, and today's total (cmd summary) too.
    @Test func theOfflineSummaryAndTodaysTotalInTamil() throws {
        let link = try Link(config: ["voice.lang": "ta-IN", "log.level": "debug"])
        try link.start()
        _ = link.daemon.stop()
        let ids = (1...6).map { "TA\($0)" }
        let paidAt = Int(Date().timeIntervalSince1970) - 120
        for (i, id) in ids.enumerated() {
            try link.backend.pay(#"{"id":"\#(id)","amount":"\#(i + 1)00.50","currency":"INR","ts":\#(paidAt)}"#)
        }
        try link.start()
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        try link.backend.publish(link.backend.topics.cmd, #"{"cmd": "summary"}"#)
        try link.daemon.until("status") { _ in link.daemon.log(run: 2).contains("queue: summary") }
        #expect(try link.daemon.request("idle", "30").ack == nil)
        #expect(link.daemon.stop().0 == 0)
        let log = logLines(link.daemon.log(run: 2))
        let offline = log.first { $0.event == "offline_summary" }
        #expect(offline?["count"] == "6" && offline?["pack"] == "ta-IN", "\(String(describing: offline))")
        #expect(log.contains { $0.event == "summary" && $0["count"] == "6" })
        #expect(!log.contains { $0.event == "clip_substituted" || $0.event == "voice_unavailable" }, "every clip from the Tamil pack")
    }
}
