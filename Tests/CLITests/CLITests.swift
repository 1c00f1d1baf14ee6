import Foundation
import Testing
import TestSupport

/// Runs the built `soundboxctl` (it sits next to the test bundle).
struct Ctl {
    static let binary: String = {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("soundboxctl").path
    }()
    static let voices: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path + "/voices"
    }()

    let status: Int32
    let stdout: String
    let stderr: String

    init(_ args: String...) throws { try self.init(args) }

    /// Runs soundboxctl with `env` added to its environment; `whileRunning`
    /// runs once it has started (e.g. a peer serving its control socket).
    /// Bounded: if `whileRunning` throws, or soundboxctl is still running
    /// after `timeout` seconds (a failed test then), it is SIGKILLed; it is
    /// always reaped before this returns, so none outlives its test.
    init(_ args: [String], env: [String: String] = [:], timeout: Double = 60,
         sourceLocation: SourceLocation = #_sourceLocation, whileRunning: () throws -> Void = {}) throws {
        let run = try CommandRun([Self.binary] + args, environment: ["SOUNDBOX_VOICES": Self.voices, "PATH": "/usr/bin:/bin"].merging(env) { $1 },
                                 timeout: timeout, whileRunning: whileRunning)
        if run.timedOut { Issue.record("soundboxctl \(args) still running after \(timeout) s (killed)", sourceLocation: sourceLocation) }
        status = run.status
        stdout = run.stdout
        stderr = run.stderr
    }

    /// Throws (a failed test) rather than trapping: every test module runs
    /// in one process, and a trap would take the daemons of other suites'
    /// running tests with it before their cleanup runs.
    func json() throws -> [String: Any] {
        guard let j = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw CocoaError(.propertyListReadCorrupt, userInfo: [NSDebugDescriptionErrorKey: "not a JSON object: \(stdout)"])
        }
        return j
    }
}

@Suite struct WordsCommandTests {
    @Test func printsClipNamesOnOneLine() throws {
        let r = try Ctl("words", "123456789.12", "--channel", "wechat")
        #expect(r.status == 0)
        #expect(r.stdout == "微信收款 一 亿 二 千 三 百 四 十 五 万 六 千 七 百 八 十 九 点 一 二 元\n")
        let en = try Ctl("words", "120000.50", "--lang", "en-IN")
        #expect(en.stdout == "received rupees one lakh twenty thousand and fifty paise\n")
    }

    @Test func json() throws {
        let r = try Ctl("--json", "words", "0.1")
        #expect(r.status == 0)
        let j = try r.json()
        #expect(j["amount"] as? String == "0.10")
        #expect(j["minor_units"] as? Int == 10)
        #expect(j["clips"] as? [String] == ["收款到账", "零", "点", "一", "元"])
    }

    /// Each bad amount: exit 1, its own code, a message naming the problem.
    @Test(arguments: [
        ("-1", "negative"), ("0", "zero"), ("1.001", "too_many_decimals"), ("1e3", "exponent"),
        ("NaN", "not_finite"), ("+1", "leading_plus"), ("1 0", "whitespace"), ("１", "non_ascii_digit"),
        ("1000000000000", "above_limit"), ("", "empty"), ("12abc", "malformed"),
    ])
    func badAmounts(_ amount: String, _ code: String) throws {
        let r = try Ctl("words", amount, "--json")
        #expect(r.status == 1)
        #expect(try r.json()["code"] as? String == code)
        let text = try Ctl("words", amount)
        #expect(text.status == 1 && text.stdout.isEmpty)
        #expect(text.stderr.hasPrefix("soundboxctl: '\(amount)': amount "))
    }

    @Test(arguments: [["words"], ["words", "1", "2"], ["frobnicate"], ["words", "1", "--bogus"], ["words", "1", "--lang"], []])
    func usageErrorsExitTwo(_ args: [String]) throws {
        #expect(try Ctl(args).status == 2)
    }

    @Test func unknownLanguage() throws {
        let r = try Ctl("words", "1", "--lang", "fr-FR")
        #expect(r.status == 1)
        #expect(r.stderr.contains("unknown language 'fr-FR'"))
    }

    @Test func helpListsEveryCommand() throws {
        let r = try Ctl("--help")
        #expect(r.status == 0)
        for word in ["words AMOUNT", "render AMOUNT", "voice check DIR", "--json", "Exit status"] {
            #expect(r.stdout.contains(word))
        }
    }
}

@Suite struct RenderCommandTests {
    /// `render --device` through ALSA's file plugin writes exactly the PCM
    /// that `render -o` puts in the WAV's data chunk.
    @Test func alsaBytesEqualTheWAVData() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let wav = try Ctl("render", "99999999.99", "-o", dir + "/a.wav", "--volume", "7", "--channel", "alipay", "--json")
        #expect(wav.status == 0, "\(wav.stderr)")
        let alsa = try Ctl("render", "99999999.99", "--device", "file:'\(dir)/a.raw',raw", "--volume", "7", "--channel", "alipay")
        #expect(alsa.status == 0, "\(alsa.stderr)")
        let wavData = try Data(contentsOf: URL(fileURLWithPath: dir + "/a.wav"))
        let raw = try Data(contentsOf: URL(fileURLWithPath: dir + "/a.raw"))
        #expect(raw.count > 100_000)
        #expect(wavData.count == raw.count + 44)
        #expect(wavData.dropFirst(44) == raw)
        let j = try wav.json()
        #expect(j["duration_ms"] as? Int == raw.count / 2 * 1000 / 22050)
        #expect((j["clips"] as? [String])?.first == "支付宝到账")
    }

    /// With no -o/--device, render plays on the configured output at the
    /// configured volume; a bad config file is named with its line.
    @Test func followsTheConfigFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "audio.output = wav\naudio.wav_file = \(dir)/c.wav\naudio.volume = 3\n".write(toFile: dir + "/s.conf", atomically: true, encoding: .utf8)
        let r = try Ctl("render", "8", "--config", dir + "/s.conf", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try r.json()["output"] as? String == "wav:\(dir)/c.wav")
        #expect(try r.json()["volume"] as? Int == 3)
        let explicit = try Ctl("render", "8", "-o", dir + "/e.wav", "--volume", "3")
        #expect(explicit.status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/c.wav")) == Data(contentsOf: URL(fileURLWithPath: dir + "/e.wav")))

        try "audio.volume = 12\n".write(toFile: dir + "/bad.conf", atomically: true, encoding: .utf8)
        let bad = try Ctl("render", "8", "--config", dir + "/bad.conf")
        #expect(bad.status == 1)
        #expect(bad.stderr == "soundboxctl: \(dir)/bad.conf:1: audio.volume = '12' is not allowed; expected an integer 0-10\n")
    }

    @Test func renderErrors() throws {
        #expect(try Ctl("render", "1", "-o", "/tmp/x.wav", "--device", "default").status == 2)
        #expect(try Ctl("render", "1", "-o", "/tmp/x.wav", "--volume", "11").status == 2)
        let r = try Ctl("render", "1", "-o", "/nonexistent/x.wav")
        #expect(r.status == 1)
        #expect(r.stderr.contains("open(/nonexistent/x.wav) failed"))
        let dev = try Ctl("render", "1", "--device", "hw:CARD=NoSuchCard,DEV=0", "--json")
        #expect(dev.status == 1)
        #expect(try dev.json()["code"] as? String == "audio")
    }
}

@Suite struct VoiceCheckCommandTests {
    @Test func goodPack() throws {
        let r = try Ctl("voice", "check", Ctl.voices + "/zh-CN", "--json")
        #expect(r.status == 0)
        #expect(try r.json()["ok"] as? Bool == true)
    }

    @Test func corruptClipIsNamed() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.copyItem(atPath: Ctl.voices + "/en-IN", toPath: dir)
        try Data(repeating: 0x55, count: 4000).write(to: URL(fileURLWithPath: dir + "/seven.mp3"))
        let r = try Ctl("voice", "check", dir)
        #expect(r.status == 1)
        #expect(r.stdout.contains("error: clip 'seven': seven.mp3:"))
    }
}

/// docs/config.md lists exactly the keys the code has, with their defaults,
/// allowed values and who may change them.
@Suite struct ConfigKeysCommandTests {
    @Test func docsConfigTableIsTheCommandsOutput() throws {
        let r = try Ctl("config", "keys")
        #expect(r.status == 0)
        let docs = try String(contentsOfFile: Ctl.voices.replacingOccurrences(of: "/voices", with: "/docs/config.md"), encoding: .utf8)
        #expect(docs.contains(r.stdout), "docs/config.md is stale: replace its table with `soundboxctl config keys`")
        #expect(r.stdout.contains("| `audio.wav_file` | `/tmp/soundbox.wav` | a non-empty value | file only (restart) |"))
        let json = try Ctl("--json", "config", "keys")
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: String]])
        #expect(keys.first { $0["key"] == "audio.volume" }?["scope"] == "remote")
    }
}

/// A binary finds its voice packs without being told: an unpacked package
/// its own share/soundbox/voices, a build in the checkout the checkout's.
@Suite struct VoiceDirectoryTests {
    @Test func aBuildInTheCheckoutFindsTheCheckoutsVoices() throws {
        let wav = FileManager.default.temporaryDirectory.appendingPathComponent("sb-\(UUID().uuidString.prefix(8)).wav").path
        defer { try? FileManager.default.removeItem(atPath: wav) }
        let r = try CommandRun([Ctl.binary, "render", "1", "--lang", "en-IN", "-o", wav], environment: ["PATH": "/usr/bin:/bin"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("received rupee one"))
    }

    @Test func anUnpackedPackageFindsItsOwnShareFolder() throws {
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("sbprefix-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: prefix + "/share/soundbox/voices", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Ctl.binary, toPath: prefix + "/bin/soundboxctl")
        // Only one pack there, so the checkout's two are not what it found.
        try FileManager.default.copyItem(atPath: Ctl.voices + "/zh-CN", toPath: prefix + "/share/soundbox/voices/zh-CN")
        let zh = try CommandRun([prefix + "/bin/soundboxctl", "render", "10", "-o", prefix + "/a.wav"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(zh.status == 0 && zh.stdout.contains("收款到账 十 元"), "\(zh.stderr)")
        let en = try CommandRun([prefix + "/bin/soundboxctl", "render", "10", "--lang", "en-IN", "-o", prefix + "/b.wav"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(en.status == 1 && en.stderr.contains(prefix + "/share/soundbox/voices: no voice pack named 'en-IN'"), "\(en.stderr)")
    }
}
