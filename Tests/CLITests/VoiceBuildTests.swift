import Foundation
import Soundbox
import Testing
import TestSupport
@testable import VoiceBuild

/// `soundboxctl voice build` from recordings made here: tones of very
/// different levels, at several rates, mono and stereo, WAV and FLAC, with
/// silence around them — the pack comes out at one loudness, trimmed,
/// gapless, loadable; missing and hostile recordings are named.
@Suite struct VoiceBuildTests {
    let scratch = Scratch("sbx-vb")
    var dir: String { scratch.path }
    init() throws { try FileManager.default.createDirectory(atPath: dir + "/src", withIntermediateDirectories: true) }

    /// A 16-bit WAV of `seconds` of a sine at `hz` and `dBFS`, with
    /// `silence` seconds of digital silence before and after.
    static func wav(_ path: String, hz: Double = 440, dBFS: Double, seconds: Double = 0.5, rate: Int = 22050, channels: Int = 1,
                    silence: Double = 0.2, clicks: Bool = false) throws {
        let a = pow(10, dBFS / 20) * 32767
        let pad = [Int16](repeating: 0, count: Int(silence * Double(rate)) * channels)
        var tone: [Int16] = []
        for i in 0..<Int(seconds * Double(rate)) {
            // clicks: a quiet tone with a full-scale spike every 50 ms (a high crest factor).
            let v = clicks && i % (rate / 20) == 0 ? 32767 : a * sin(2 * .pi * hz * Double(i) / Double(rate))
            tone += [Int16](repeating: Int16(v), count: channels)
        }
        let samples = pad + tone + pad
        var data = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); u32(36 + samples.count * 2); data.append(contentsOf: Array("WAVEfmt ".utf8))
        u32(16); u16(1); u16(channels); u32(rate); u32(rate * channels * 2); u16(channels * 2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(samples.count * 2)
        samples.withUnsafeBytes { data.append(contentsOf: $0) }
        try data.write(to: URL(fileURLWithPath: path))
    }

    /// Recordings for every clip of en-IN: levels from -36 to -3 dBFS, four
    /// rates, every third stereo, one FLAC (made by the `flac` command).
    func recordings(skipping: Set<String> = [], clicks: String? = nil) throws -> [String] {
        let clips = Array(Set(IndianEnglishGrammar().clipNames)).sorted()
        let rates = [16000, 22050, 44100, 48000]
        for (i, clip) in clips.enumerated() where !skipping.contains(clip) {
            try Self.wav("\(dir)/src/\(clip).wav", hz: 300 + Double(i * 37 % 900), dBFS: -36 + Double(i * 7 % 34), rate: rates[i % 4],
                         channels: i % 3 == 0 ? 2 : 1, clicks: clip == clicks)
        }
        if !skipping.contains("seven") {
            let flac = try CommandRun(["/usr/bin/flac", "--silent", "--force", "--delete-input-file", "-o", "\(dir)/src/seven.flac", "\(dir)/src/seven.wav"])
            #expect(flac.status == 0, "flac: \(flac.stderr)")
        }
        return clips
    }

    @Test func recordingsOfAnyLevelRateAndLayoutBecomeOnePackAtOneLoudness() throws {
        let clips = try recordings()
        let r = try Ctl("--json", "voice", "build", dir + "/src", dir + "/en-IN", "--lang", "en-IN")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try r.json()
        let built = try #require(report["clips"] as? [[String: Any]])
        #expect(built.count == clips.count)
        #expect(report["level_lufs"] as? Double == -16, "pure tones have room under the ceiling")
        #expect((report["spread_before_lu"] as? Double ?? 0) > 25)
        #expect((report["spread_after_lu"] as? Double ?? 99) <= 0.3)
        for c in built {
            #expect(abs((c["lufs"] as? Double ?? 0) + 16) <= 0.3, "\(c)")
            #expect((c["true_peak_dbtp"] as? Double ?? 0) <= -1, "\(c)")
            // Trimmed to the tone (0.5 s) and a 10 ms margin on each side, gapless.
            #expect(abs((c["seconds"] as? Double ?? 0) - 0.52) <= 0.02, "\(c)")
        }
        // As soundboxd loads it; voice check measures the same.
        let check = try Ctl("--json", "voice", "check", dir + "/en-IN")
        let checked = try check.json()
        #expect(check.status == 0 && checked["ok"] as? Bool == true, "\(check.stdout)")
        #expect((checked["loudness"] as? [String: Any])?["spread_lu"] as? Double ?? 99 <= 0.3)
        let manifest = try VoicePackManifest.load(directory: dir + "/en-IN")
        #expect(manifest.format.sampleRate == 22050 && manifest.currency == "INR" && manifest.clips["seven"] == "seven.mp3")
        #expect(try Ctl("render", "123.45", "--lang", "en-IN", "--voices", dir, "-o", dir + "/a.wav").status == 0)
    }

    @Test func thePeakiestClipHoldsEveryClipDownTogether() throws {
        _ = try recordings(clicks: "one")
        let r = try Ctl("--json", "voice", "build", dir + "/src", dir + "/en-IN", "--lang", "en-IN")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try r.json()
        let level = try #require(report["level_lufs"] as? Double)
        #expect(level < -17, "held down: \(level)")
        #expect((report["spread_after_lu"] as? Double ?? 99) <= 0.3)
        let one = try #require((report["clips"] as? [[String: Any]])?.first { $0["clip"] as? String == "one" })
        #expect(one["peak_limited"] as? Bool == true && (one["true_peak_dbtp"] as? Double ?? 0) <= -0.9)
        #expect(try Ctl("voice", "build", dir + "/src", dir + "/x", "--lang", "en-IN", "--lufs", "-30").stdout.contains("at -30.0 LUFS (target -30)"))
    }

    @Test func missingRecordingsAreNamedAndNothingIsWritten() throws {
        _ = try recordings(skipping: ["crore", "paise"])
        let r = try Ctl("voice", "build", dir + "/src", dir + "/en-IN", "--lang", "en-IN")
        #expect(r.status == 1)
        #expect(r.stderr.contains("2 clip(s) of grammar en-IN have no recording: crore, paise"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/en-IN") && !FileManager.default.fileExists(atPath: dir + "/en-IN.building"))
    }

    @Test func hostileRecordingsAndArgumentsAreRefusedWithReasons() throws {
        _ = try recordings()
        func build(_ extra: String...) throws -> Ctl { try Ctl(["voice", "build", dir + "/src", dir + "/out"] + extra) }
        #expect(try build("--lang", "xx-XX").stderr.contains("unknown language 'xx-XX'"))
        #expect(try build().stderr.contains("needs --lang"))
        #expect(try build("--lang", "en-IN", "--lufs", "-90").stderr.contains("--lufs -90: expected an integer -40--5"))
        try "not audio".write(toFile: dir + "/src/two.wav", atomically: true, encoding: .utf8)
        #expect(try build("--lang", "en-IN").stderr.contains("src/two.wav:"), "a file that is not audio is named")
        try Self.wav(dir + "/src/two.wav", dBFS: -200)
        #expect(try build("--lang", "en-IN").stderr.contains("src/two.wav: silent"))
        try Self.wav(dir + "/src/two.wav", dBFS: -20)
        try Self.wav(dir + "/src/two.aiff", dBFS: -20)
        #expect(try build("--lang", "en-IN").stderr.contains("two recordings of clip 'two'"))
        try FileManager.default.removeItem(atPath: dir + "/src/two.aiff")
        try FileManager.default.createDirectory(atPath: dir + "/out", withIntermediateDirectories: true)
        try "keep".write(toFile: dir + "/out/mine.txt", atomically: true, encoding: .utf8)
        #expect(try build("--lang", "en-IN").stderr.contains("exists and is not empty"))
        #expect(try String(contentsOfFile: dir + "/out/mine.txt", encoding: .utf8) == "keep")
        #expect(try Ctl(["voice", "build", dir + "/src", dir + "/bad name", "--lang", "en-IN"]).stderr.contains("the folder's name is the pack's name"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/out.building"))
    }

    /// The clarity EQ: below 150 Hz cut (a small speaker cannot play it),
    /// a 3 dB lift around 3 kHz, speech's own band left alone.
    @Test func theClarityEQ() throws {
        func gain(_ hz: Double) -> Double {
            var x = (0..<22050).map { Float(0.5 * sin(2 * Double.pi * hz * Double($0) / 22050)) }
            VoiceBuilder.equalise(&x, rate: 22050)
            let rms = { (s: ArraySlice<Float>) in (s.reduce(0.0) { $0 + Double($1 * $1) } / Double(s.count)).squareRoot() }
            return 20 * log10(rms(x[11025...]) / rms(ArraySlice((0..<11025).map { Float(0.5 * sin(2 * Double.pi * hz * Double($0) / 22050)) })))
        }
        #expect(gain(50) < -15)
        #expect(abs(gain(1000)) < 0.8)
        #expect(abs(gain(3000) - 3) < 0.6)
        _ = try recordings()
        #expect(try Ctl("voice", "build", dir + "/src", dir + "/en-IN", "--lang", "en-IN", "--eq").status == 0)
        let manifest = try String(contentsOfFile: dir + "/en-IN/manifest.json", encoding: .utf8)
        #expect(manifest.contains(#""eq":{"highpass_hz":150,"presence_hz":3000,"presence_db":3,"presence_q":1}"#), "\(manifest)")
    }
}
