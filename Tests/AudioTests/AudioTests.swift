import Foundation
import Testing
import Soundbox
@testable import SoundboxAudio
import TestSupport
import Synchronization

private let zh = ChineseGrammar()
private func amount(_ s: String) -> Amount { try! Amount.parse(s, max: .wordsMax) }

@Suite struct ALSAOutputTests {
    /// What reaches ALSA (its `file` plugin) is byte for byte what render produced,
    /// and the device stays open across announcements (the file holds both).
    @Test func alsaFilePluginReceivesExactlyTheRenderedPCM() throws {
        let tmp = Scratch()
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
        let tmp = Scratch()
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
        let tmp = Scratch()
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

    /// Issue 18 item 9: the WAV output writes only a regular file of its own.
    /// A symbolic link (planted in a world-writable folder, it made the root
    /// daemon overwrite what it pointed at) is refused and its target stays.
    @Test func wavOutputRefusesASymbolicLinkAndLeavesItsTarget() throws {
        let tmp = Scratch()
        let target = tmp.path + "/shadow", link = tmp.path + "/soundbox.wav"
        let precious = Data("root:x:0:0\n".utf8)
        try precious.write(to: URL(fileURLWithPath: target))
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let error = #expect(throws: AudioError.self) { _ = try WAVFileOutput(path: link).play([1, 2], format: .standard, shouldStop: { false }) }
        #expect(error?.message == "\(link) is a symbolic link (to \(target)), not a regular file; refusing to write through it", "\(String(describing: error))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == precious)
    }

    /// A FIFO, a folder or a device is refused at once (a FIFO nobody reads
    /// must not hang the player); a file with a second hard link is refused
    /// (it may be another file's name). Each error names the path and what is there.
    @Test(arguments: ["fifo", "directory", "device", "hardlink"])
    func wavOutputRefusesAnythingButAFileOfItsOwn(_ kind: String) throws {
        let tmp = Scratch()
        var path = tmp.path + "/soundbox.wav"
        let other = tmp.path + "/other"
        let expected: String
        switch kind {
        case "fifo":
            #expect(mkfifo(path, 0o600) == 0)
            expected = "\(path) is a FIFO, not a regular file; refusing to write to it"
        case "directory":
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            expected = "\(path) is a directory, not a regular file; refusing to write to it"
        case "device":
            path = "/dev/null"
            expected = "/dev/null is a character device, not a regular file; refusing to write to it"
        default:
            try Data("keep".utf8).write(to: URL(fileURLWithPath: other))
            #expect(link(other, path) == 0)
            expected = "\(path) has 2 hard links (it may be another file's name); refusing to write to it"
        }
        let outcome = opened(path)
        #expect(outcome.done, "opening \(kind) hung")
        #expect(outcome.error?.message == expected, "\(String(describing: outcome.error))")
        if kind == "hardlink" { #expect(try Data(contentsOf: URL(fileURLWithPath: other)) == Data("keep".utf8)) }
    }

    /// The docs say "append": a second output on the same file (the daemon
    /// restarted) continues it; the header's RIFF and data sizes count both.
    @Test func wavOutputAppendsAcrossReopens() throws {
        let tmp = Scratch()
        let path = tmp.path + "/soundbox.wav"
        _ = try WAVFileOutput(path: path).play([1, 2, 3], format: .standard, shouldStop: { false })
        let second = try WAVFileOutput(path: path)
        _ = try second.play([4, 5], format: .standard, shouldStop: { false })
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.count == 44 + 10)
        #expect(Data(data.prefix(44)) == Data(WAV.header(format: .standard, dataBytes: 10)))
        #expect(data.suffix(10) == [Int16]([1, 2, 3, 4, 5]).bytes)

        // A crash between writing samples and the header: the tail the header
        // does not count is written over, not kept as a click.
        FileManager.default.createFile(atPath: path, contents: Data(WAV.header(format: .standard, dataBytes: 4)) + [Int16]([1, 2, 9]).bytes)
        _ = try WAVFileOutput(path: path).play([3], format: .standard, shouldStop: { false })
        data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data == Data(WAV.header(format: .standard, dataBytes: 6)) + [Int16]([1, 2, 3]).bytes)
    }

    /// soundboxctl render -o replaces its file, with the same care: never
    /// through a symbolic link, never a FIFO.
    @Test func replaceModeEmptiesTheFileButRefusesWhatAppendRefuses() throws {
        let tmp = Scratch()
        let path = tmp.path + "/a.wav", target = tmp.path + "/shadow", link = tmp.path + "/link.wav"
        _ = try WAVFileOutput(path: path).play([1, 2, 3], format: .standard, shouldStop: { false })
        _ = try WAVFileOutput(path: path, mode: .replace).play([7], format: .standard, shouldStop: { false })
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(WAV.header(format: .standard, dataBytes: 2)) + [Int16]([7]).bytes)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(throws: AudioError.self) { _ = try OutputChoice.wav(path: link, mode: .replace).make() }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("keep".utf8))
    }

    /// An existing file that is not a WAV this output can continue is
    /// refused, never overwritten: text, a WAV of another format.
    @Test func wavOutputRefusesToOverwriteAnotherFile() throws {
        let tmp = Scratch()
        let text = tmp.path + "/notes.wav", stereo = tmp.path + "/stereo.wav"
        let notes = Data("not a recording, but longer than a RIFF header would be, 44 bytes\n".utf8)
        try notes.write(to: URL(fileURLWithPath: text))
        let e1 = #expect(throws: AudioError.self) { _ = try WAVFileOutput(path: text) }
        #expect(e1?.message == "\(text) is not a WAV file (no RIFF/WAVE header); refusing to overwrite it", "\(String(describing: e1))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: text)) == notes)

        let other = PCMFormat(sampleRate: 48000, channels: 2)
        _ = try WAVFileOutput(path: stereo).play([1, 2], format: other, shouldStop: { false })
        let before = try Data(contentsOf: URL(fileURLWithPath: stereo))
        let e2 = #expect(throws: AudioError.self) { _ = try WAVFileOutput(path: stereo).play([1], format: .standard, shouldStop: { false }) }
        #expect(e2?.message == "\(stereo) holds S16_LE 48000 Hz 2 ch, not S16_LE 22050 Hz mono; refusing to mix them (move it away or set another audio.wav_file)", "\(String(describing: e2))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: stereo)) == before)
    }

    /// RIFF sizes are 32 bits: a file at 4 GiB stops growing with a clear
    /// error, its header still valid, rather than wrapping its sizes.
    @Test func wavOutputStopsAtFourGiB() throws {
        let tmp = Scratch()
        let path = tmp.path + "/full.wav"
        let limit = WAV.maxDataBytes
        #expect(limit <= Int(UInt32.max) - 36 && limit > Int(UInt32.max) - 36 - 8, "RIFF size = 36 + data size, 32 bits")
        let full = limit - 4
        FileManager.default.createFile(atPath: path, contents: Data(WAV.header(format: .standard, dataBytes: full)))
        #expect(truncate(path, off_t(44 + full)) == 0)   // sparse
        let out = try WAVFileOutput(path: path)
        #expect(try out.play([1, 2], format: .standard, shouldStop: { false }) == .completed, "4 bytes still fit")
        let error = #expect(throws: AudioError.self) { _ = try out.play([3], format: .standard, shouldStop: { false }) }
        #expect(error?.code == EFBIG && error?.message.contains("\(path) is full: a WAV file holds at most 4 GiB") == true, "\(String(describing: error))")
        let header = try #require(Files.prefix(path, 44))
        #expect(header == WAV.header(format: .standard, dataBytes: limit))
        var st = stat()
        #expect(stat(path, &st) == 0 && Int(st.st_size) == 44 + limit)
    }

    /// The file (by default beside the queue's database) never takes the
    /// disk's last `keepFree` bytes: the announcement that would is refused.
    @Test func wavOutputLeavesRoomOnItsDisk() throws {
        let tmp = Scratch()
        let path = tmp.path + "/room.wav"
        var fs = statvfs()
        #expect(statvfs(tmp.path, &fs) == 0)
        let free = Int(fs.f_bavail) * Int(fs.f_frsize)
        // 20 MiB of room above what it keeps; one announcement of 40 MiB does not fit.
        let out = try WAVFileOutput(path: path, keepFree: max(0, free - (20 << 20)))
        let error = #expect(throws: AudioError.self) {
            _ = try out.play([Int16](repeating: 1, count: 20 << 20), format: .standard, shouldStop: { false })
        }
        #expect(error?.code == ENOSPC && error?.message.contains("MiB for the queue") == true, "\(String(describing: error))")
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_size == 0, "nothing written")
        #expect(WAVFileOutput.defaultKeepFree == 64 << 20)
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
        let tmp = Scratch()
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
        let tmp = Scratch()
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
        let tmp = Scratch()
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
        let tmp = Scratch()
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
        let tmp = Scratch()
        try tmp.copyPacks("zh-CN")
        try tmp.editManifest("zh-CN") { $0["grammar"] = "klingon" }
        #expect(VoiceCheckReport.check(directory: tmp.path + "/zh-CN").errors.first?.problem
            .hasSuffix("grammar 'klingon' is unknown; known: \(Grammars.all.map(\.name).joined(separator: ", "))") == true)
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

/// Opens a WAV output on another thread, so that one that blocks (a FIFO
/// opened for writing waits for a reader) is reported, not a hung suite:
/// after 5 s the FIFO is opened for reading, which lets the open return.
private func opened(_ path: String) -> (done: Bool, error: AudioError?) {
    let result = Mutex<AudioError?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        do throws(AudioError) { _ = try WAVFileOutput(path: path) } catch { result.withLock { $0 = error } }
        done.signal()
    }
    guard done.wait(timeout: .now() + 5) == .success else {
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        done.wait()
        close(reader)
        return (false, result.withLock { $0 })
    }
    return (true, result.withLock { $0 })
}
