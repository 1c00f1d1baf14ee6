import Foundation
import Testing
import Soundbox
@testable import SoundboxAudio
import TestSupport

private let zh = ChineseGrammar()
private func amount(_ s: String) -> Amount { try! Amount.parse(s, max: .wordsMax) }

@Suite struct ALSAOutputTests {
    /// What reaches ALSA (its `file` plugin) is byte for byte what render produced,
    /// and the device stays open across announcements (the file holds both).
    @Test func alsaFilePluginReceivesExactlyTheRenderedPCM() throws {
        let tmp = TempDir()
        let bank = VoiceBank(directory: repoVoices)
        let a = try bank.render(zh.announcement(amount("123456789.12"), channel: .alipay), pack: "zh-CN", volume: 10)
        let b = try bank.render(zh.announcement(amount("0.05")), pack: "zh-CN", volume: 4)
        #expect(a.substitutions.isEmpty && b.substitutions.isEmpty)
        let raw = tmp.path + "/out.raw"
        let out = ALSAOutput(device: "file:'\(raw)',raw", retryDelays: [])
        #expect(try out.play(a.samples, format: a.format, shouldStop: { false }) == .completed)
        #expect(try out.play(b.samples, format: b.format, shouldStop: { false }) == .completed)
        out.close()
        let written = try Data(contentsOf: URL(fileURLWithPath: raw))
        #expect(written.count == (a.samples.count + b.samples.count) * 2)
        #expect(written == a.samples.bytes + b.samples.bytes)
    }

    /// A stop request (mute, shutdown) ends the write within one period.
    @Test func stopInterruptsWithinAPeriod() throws {
        let tmp = TempDir()
        let bank = VoiceBank(directory: repoVoices)
        let r = try bank.render(zh.announcement(amount("99999999.99")), pack: "zh-CN", volume: 10)
        let raw = tmp.path + "/out.raw"
        let out = ALSAOutput(device: "file:'\(raw)',raw", retryDelays: [])
        var polls = 0
        let outcome = try out.play(r.samples, format: r.format, shouldStop: { polls += 1; return polls > 2 })
        out.close()
        #expect(outcome == .interrupted)
        let written = try Data(contentsOf: URL(fileURLWithPath: raw)).count
        #expect(written > 0 && written < r.samples.count * 2)
    }

    /// A device that cannot be opened is retried a bounded number of times,
    /// then reported with the failing call.
    @Test func unopenableDeviceFailsAfterBoundedRetries() throws {
        let out = ALSAOutput(device: "hw:CARD=NoSuchCard,DEV=0", retryDelays: [0.01, 0.01])
        var polls = 0
        let error = #expect(throws: AudioError.self) {
            try out.play([1, 2, 3], format: .standard, shouldStop: { polls += 1; return false })
        }
        #expect(error?.call.hasPrefix("snd_pcm_open") == true)
        #expect(error?.code ?? 0 < 0)
        #expect(polls == 2, "one stop check before each of the two retries")
    }
}

@Suite struct OutputTests {
    @Test func wavFileOutputAppendsAndKeepsHeaderValid() throws {
        let tmp = TempDir()
        let path = tmp.path + "/demo.wav"
        let out = try WAVFileOutput(path: path)
        _ = try out.play([1, 2, 3], format: .standard, shouldStop: { false })
        _ = try out.play([4, 5], format: .standard, shouldStop: { false })
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.count == 44 + 10)
        #expect(Data(data.prefix(44)) == Data(WAV.header(format: .standard, dataBytes: 10)))
        #expect(data.suffix(10) == [Int16]([1, 2, 3, 4, 5]).bytes)
        #expect(throws: AudioError.self) { try out.play([1], format: PCMFormat(sampleRate: 48000), shouldStop: { false }) }
    }

    @Test func nullOutputCountsFramesAndStops() throws {
        let out = NullOutput(realtime: false)
        #expect(try out.play(Array(repeating: 0, count: 22050), format: .standard, shouldStop: { false }) == .completed)
        #expect(out.framesPlayed == 22050)
        var polls = 0
        #expect(try out.play(Array(repeating: 0, count: 22050), format: .standard, shouldStop: { polls += 1; return polls > 3 }) == .interrupted)
        #expect(out.framesPlayed == 22050 + 3 * PCMFormat.standard.frames(milliseconds: 20))
    }

    @Test func outputChoiceBuildsEachKind() throws {
        let tmp = TempDir()
        #expect(try OutputChoice.alsa(device: "default").make().name == "alsa:default")
        #expect(try OutputChoice.wav(path: tmp.path + "/x.wav").make().name == "wav:\(tmp.path)/x.wav")
        #expect(try OutputChoice.null(realtime: false).make().name == "null")
        #expect(throws: AudioError.self) { try OutputChoice.wav(path: "/nonexistent-dir/x.wav").make() }
    }
}

@Suite struct EngineTests {
    @Test func volumeScalesExactly() {
        var s: [Int16] = [32767, -32768, 1000, -1000, 0]
        Volume.apply(10, to: &s)
        #expect(s == [32767, -32768, 1000, -1000, 0])
        var quieter = s, quietest = s, silent = s
        Volume.apply(6, to: &quieter)
        Volume.apply(1, to: &quietest)
        Volume.apply(0, to: &silent)
        #expect(quieter == [10362, -10362, 316, -316, 0])
        #expect(quietest.enumerated().allSatisfy { abs(Int($1)) < abs(Int(quieter[$0])) || $1 == 0 })
        #expect(silent.allSatisfy { $0 == 0 })
    }

    @Test func trimCutsSilenceButKeepsAMargin() {
        let f = PCMFormat.standard
        let margin = f.frames(milliseconds: Silence.marginMs)
        let s = [Int16](repeating: 0, count: 5000) + [3000, -3000, 3000] + [Int16](repeating: 5, count: 5000)
        let t = Silence.trim(s, format: f)
        #expect(t.count == 3 + 2 * margin)
        #expect(Array(t[margin..<(margin + 3)]) == [3000, -3000, 3000])
        #expect(Silence.trim([Int16](repeating: 100, count: 1000), format: f).isEmpty)
    }

    /// Clips are trimmed and joined with the manifest's gap: the sentence is
    /// exactly the clips and gaps, nothing else.
    @Test func renditionIsClipsJoinedByTheGap() throws {
        let bank = VoiceBank(directory: repoVoices)
        let pack = try bank.load("zh-CN")
        let clips = ["收款到账", "十", "元"]
        let r = try bank.render(clips, pack: "zh-CN", volume: 10)
        let gap = [Int16](repeating: 0, count: bank.format.frames(milliseconds: pack.manifest.gap))
        #expect(r.samples == pack.clips["收款到账"]! + gap + pack.clips["十"]! + gap + pack.clips["元"]!)
        // Decoded clips are trimmed: trimming again changes nothing.
        for (name, pcm) in pack.clips {
            #expect(Silence.trim(pcm, format: bank.format) == pcm, "\(name)")
            #expect(bank.format.duration(samples: pcm.count) < 2.5, "\(name)")
        }
    }

    @Test func everyShippedPackLoadsCompletely() throws {
        let bank = VoiceBank(directory: repoVoices)
        for name in ["zh-CN", "en-IN"] {
            let pack = try bank.load(name)
            #expect(pack.broken.isEmpty, "\(name): \(pack.broken)")
            #expect(Set(pack.grammar.clipNames).isSubset(of: Set(pack.clips.keys)))
        }
    }
}

@Suite struct FallbackTests {
    /// A studio pack missing a clip still announces: the clip comes from the
    /// fallback pack, so the sentence is the same as the fallback's own.
    @Test func deletedClipComesFromTheFallbackPack() throws {
        let tmp = TempDir()
        try tmp.copyPacks("zh-CN")
        try FileManager.default.copyItem(atPath: repoVoices + "/zh-CN", toPath: tmp.path + "/studio")
        try tmp.editManifest("studio") { $0["name"] = "studio"; $0["fallback"] = "zh-CN" }
        try FileManager.default.removeItem(atPath: tmp.path + "/studio/五.mp3")
        let bank = VoiceBank(directory: tmp.path)
        let clips = zh.announcement(amount("5.55"))
        let r = try bank.render(clips, pack: "studio", volume: 10)
        #expect(r.substitutions == Array(repeating: .init(clip: "五", pack: "zh-CN"), count: 3))
        #expect(r.samples == (try bank.render(clips, pack: "zh-CN", volume: 10)).samples)
        #expect(bank.packs["studio"]!.broken["五"]?.contains("五.mp3") == true)
    }

    /// With no fallback, a missing clip becomes the chime: never silence.
    @Test func missingClipWithoutFallbackBecomesTheChime() throws {
        let tmp = TempDir()
        try tmp.copyPacks("zh-CN")
        try tmp.editManifest("zh-CN") { m in
            var clips = m["clips"] as! [String: String]
            clips["五"] = nil
            m["clips"] = clips
        }
        let bank = VoiceBank(directory: tmp.path)
        let r = try bank.render(["五"], pack: "zh-CN", volume: 10)
        #expect(r.substitutions == [.init(clip: "五", pack: nil)])
        #expect(r.samples == Chime.samples(format: bank.format))
        #expect(r.samples.contains { abs(Int($0)) > 5000 })
    }

    /// A corrupt mp3 is caught at load, named by its clip, and replaced.
    @Test(arguments: ["garbage", "truncated"])
    func corruptClipIsReportedAndReplaced(_ damage: String) throws {
        let tmp = TempDir()
        try tmp.copyPacks("zh-CN")
        let file = tmp.path + "/zh-CN/九.mp3"
        var data = try Data(contentsOf: URL(fileURLWithPath: file))
        if damage == "garbage" {
            // Seeded: the same garbage on every run, so a failure reproduces.
            var rng = SplitMix64(seed: 0x6A75_3333)
            for i in 600..<min(data.count, 2600) { data[i] = UInt8.random(in: 0...255, using: &rng) }
        } else {
            data = data.prefix(300)
        }
        try data.write(to: URL(fileURLWithPath: file))
        let report = VoiceCheckReport.check(directory: tmp.path + "/zh-CN")
        #expect(!report.ok)
        #expect(report.errors.map(\.clip) == ["九"])
        #expect(report.errors.first?.problem.contains("九.mp3") == true)
        let r = try VoiceBank(directory: tmp.path).render(["九"], pack: "zh-CN", volume: 10)
        #expect(r.substitutions == [.init(clip: "九", pack: nil)])
    }
}

@Suite struct VoiceCheckTests {
    @Test func shippedPacksPass() {
        for name in ["zh-CN", "en-IN"] {
            let r = VoiceCheckReport.check(directory: repoVoices + "/" + name)
            #expect(r.ok, "\(name): \(r.errors)")
            #expect(r.clips >= 28)
        }
    }

    @Test func manifestProblemsAreNamed() throws {
        let tmp = TempDir()
        try tmp.copyPacks("zh-CN")
        try tmp.editManifest("zh-CN") { $0["grammar"] = "klingon" }
        #expect(VoiceCheckReport.check(directory: tmp.path + "/zh-CN").errors.first?.problem
            .hasSuffix("grammar 'klingon' is unknown; known: zh-CN, en-IN, hi-IN") == true)
        try tmp.editManifest("zh-CN") { $0["grammar"] = "zh-CN"; $0["clips"] = nil }
        #expect(VoiceCheckReport.check(directory: tmp.path + "/zh-CN").errors.first?.problem
            .hasSuffix("key 'clips' is missing") == true)
        try tmp.editManifest("zh-CN") { m in
            m["clips"] = ["一": "yi1.mp3"]; m["fallback"] = "nope"
        }
        let r = VoiceCheckReport.check(directory: tmp.path + "/zh-CN")
        #expect(r.errors.contains { $0.clip == "五" && $0.problem == "not in manifest.json" })
        #expect(r.errors.contains { $0.problem.contains("fallback pack 'nope'") })
        #expect(VoiceCheckReport.check(directory: tmp.path + "/absent").errors.first?.problem.contains("no manifest.json") == true)
    }
}
