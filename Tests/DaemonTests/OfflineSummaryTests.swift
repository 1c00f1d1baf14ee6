import TestRig
import Foundation
import Testing
import SoundboxStore

/// The offline summary end to end (docs/soundboxd.md): the broker keeps
/// what was published while the box was off; at start, one summary instead
/// of forty announcements, then fresh payments one by one.
@Suite struct OfflineSummaryTests {
    /// `n` payments paid two minutes ago (older than queue.summary_after_s),
    /// published while soundboxd is down.
    private func publishWhileDown(_ link: Link, _ ids: [String], currency: String? = nil) throws {
        let paidAt = Int(Date().timeIntervalSince1970) - 120
        for (i, id) in ids.enumerated() {
            let c = currency.map { #","currency":"\#($0)""# } ?? ""
            try link.backend.pay(#"{"id":"\#(id)","amount":"\#(i + 1).50","ts":\#(paidAt)\#(c)}"#)
        }
    }

    private func summaries(_ log: String) -> [[String: String]] {
        logLines(log).filter { $0.event == "offline_summary" }.map { Dictionary($0.fields, uniquingKeysWith: { a, _ in a }) }
    }
    /// Ids spoken on their own (a summary logs `speaking … summary=N` for each of its payments).
    private func spoken(_ log: String) -> [String] {
        logLines(log).filter { $0.event == "speaking" && $0["summary"] == nil }.compactMap { $0["id"] }
    }
    private func inSummary(_ log: String) -> [String] {
        logLines(log).filter { $0.event == "speaking" && $0["summary"] != nil }.compactMap { $0["id"] }
    }

    @Test func fortyWaitingAreOneSummaryThenFreshOnesOneByOne() throws {
        let scratchWAV = "/tmp/sbx-summary-\(getpid())-\(UUID().uuidString.prefix(6)).wav"
        defer { unlink(scratchWAV) }
        let link = try Link(config: ["audio.output": "wav", "audio.wav_file": scratchWAV])
        try link.start()
        _ = link.daemon.stop()
        let ids = (1...40).map { "OFF\($0)" }
        try publishWhileDown(link, ids)
        try link.start()
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        // What was heard: one sentence of a few seconds, not forty announcements.
        let wav = try #require(FileManager.default.contents(atPath: scratchWAV))
        let samples = wav.dropFirst(44).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let seconds = Double(samples.count) / 22050
        #expect(seconds > 2 && seconds < 12, "\(seconds) s of sound")
        #expect(samples.map { abs(Int32($0)) }.max() ?? 0 > 3000, "audible")
        try link.backend.pay(id: "FRESH1", amount: "7.00")
        try link.backend.pay(id: "FRESH2", amount: "8.00")
        #expect(link.backend.waitForReceipts(["FRESH1", "FRESH2"], ["played"]))
        #expect(link.daemon.stop().0 == 0)

        let log = link.daemon.log(run: 2)
        let s = summaries(log)
        #expect(s.count == 1 && s.first?["count"] == "40" && s.first?["first"] == "OFF1" && s.first?["last"] == "OFF40", "\(s)")
        #expect(spoken(log) == ["FRESH1", "FRESH2"], "only the fresh ones on their own")
        #expect(inSummary(log) == ids, "each logged as spoken in the summary, in order")
        for id in ids {
            let played = link.backend.receipts.filter { $0["id"] as? String == id && $0["status"] as? String == "played" }
            #expect(!played.isEmpty && played.allSatisfy { $0["summary"] as? Bool == true }, "\(id): \(played)")
        }
        #expect(link.backend.receipts.first { $0["id"] as? String == "FRESH1" && $0["status"] as? String == "played" }?["summary"] == nil)
        let entries = try link.entries()
        #expect(entries.filter { ids.contains($0.payment.id) }.allSatisfy { $0.state == .played && $0.plays == 1 && $0.summary != nil })
        // history says so
        try link.daemon.start()
        let history = try link.daemon.request("history", "50").pairs.records(startingWith: "id")
        #expect(history.first { $0.first?.value == "OFF7" }?.contains { $0.key == "summary" && $0.value == "true" } == true)
        #expect(history.first { $0.first?.value == "FRESH1" }?.contains { $0.key == "summary" } == false)
    }

    @Test(arguments: ["in_summary", "after_summary"])
    func aCrashInTheSummarySpeaksItAgainWhole(_ failpoint: String) throws {
        let link = try Link()
        try link.start()
        _ = link.daemon.stop()
        let ids = (1...12).map { "K\($0)" }
        try publishWhileDown(link, ids)
        try link.daemon.start(failpoint: failpoint)   // killed in its summary
        #expect(link.daemon.waitExit() == 9)
        try link.start()
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        #expect(link.daemon.stop().0 == 0)
        let first = summaries(link.daemon.log(run: 2)), again = summaries(link.daemon.log(run: 3))
        #expect(first.count == 1 && first.first?["count"] == "12")
        #expect(again.count == 1 && again.first?["count"] == "12" && again.first?["summary"] == first.first?["summary"],
                "the same summary, whole, once more: \(again)")
        #expect(spoken(link.daemon.log(run: 3)).isEmpty, "none on its own")
        let entries = try link.entries().filter { ids.contains($0.payment.id) }
        #expect(entries.count == 12 && entries.allSatisfy { $0.state == .played && $0.plays == 2 })
    }

    @Test func oneSummaryPerCurrencyAndOffTurnsItOff() throws {
        let link = try Link()
        try link.start()
        _ = link.daemon.stop()
        let yuan = (1...4).map { "Y\($0)" }, rupees = (1...4).map { "R\($0)" }, few = ["Z1", "Z2"]
        try publishWhileDown(link, yuan, currency: "CNY")
        try publishWhileDown(link, rupees, currency: "INR")
        try link.start()
        #expect(link.backend.waitForReceipts(yuan + rupees, ["played"], timeout: 60))
        _ = link.daemon.stop()
        let s = summaries(link.daemon.log(run: 2))
        #expect(s.map { $0["count"] } == ["4", "4"] && s.map { $0["pack"] } == ["zh-CN", "en-IN"], "\(s)")

        // queue.summary_min = 0: read one by one.
        try link.daemon.reconfigure(["queue.summary_min": "0"])
        try link.start()
        _ = link.daemon.stop()
        try publishWhileDown(link, few + ["Z3"])
        try link.start()
        #expect(link.backend.waitForReceipts(few + ["Z3"], ["played"], timeout: 60))
        _ = link.daemon.stop()
        #expect(summaries(link.daemon.log(run: 4)).isEmpty)
        #expect(spoken(link.daemon.log(run: 4)) == ["Z1", "Z2", "Z3"])
    }
}
