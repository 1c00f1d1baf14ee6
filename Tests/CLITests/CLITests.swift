// ~610 lines: the soundboxctl runner (Ctl) and signing-key helpers every CLI suite uses, beside the offline commands' suites (words, render, voice check, config keys).
import Foundation
import Soundbox
import SoundboxCrypto
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
        let ta = try Ctl("words", "120000.50", "--lang", "ta-IN")
        #expect(ta.stdout == "பணம்_பெறப்பட்டது ஒரு லட்சத்து இருபதா யிரம் ரூபாய் மற்றும் ஐம்பது பைசா\n")
    }

    /// `voice clips`: what a recording session for a grammar must make, one a line.
    @Test func voiceClipsListsWhatAPackNeeds() throws {
        for name in ["te-IN", "zh-CN"] {
            let r = try Ctl("voice", "clips", "--lang", name)
            #expect(r.status == 0)
            #expect(r.stdout == Array(Set(try #require(Grammars.named(name)).clipNames)).sorted().joined(separator: "\n") + "\n")
        }
        let bad = try Ctl("voice", "clips", "--lang", "fr-FR")
        #expect(bad.status != 0 && bad.stderr.contains("unknown language 'fr-FR'"))
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
        for word in ["words AMOUNT", "render AMOUNT", "voice check DIR", "--json", "Exit status"] + Grammars.all.map(\.name) {
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
        #expect(r.stdout.contains("| `audio.wav_file` | `soundbox.wav` | a path of at most 4096 bytes (PATH_MAX), without control characters | file only (restart) |"))
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

// MARK: - key id, sign (docs/signing.md)

/// An Ed25519 key pair (and an RSA key) made by the openssl CLI in a
/// temporary folder; `remove()` deletes it.
struct SigningKeys {
    private let scratch = Scratch("ctl-keys")
    var dir: String { scratch.path }
    var priv: String { dir + "/priv.pem" }
    var pub: String { dir + "/pub.pem" }

    init(rsa: Bool = false) throws {
        do {
            try Self.openssl(["genpkey", "-algorithm", "ed25519", "-out", dir + "/priv.pem"])
            try Self.openssl(["pkey", "-in", dir + "/priv.pem", "-pubout", "-out", dir + "/pub.pem"])
            if rsa {
                try Self.openssl(["genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024", "-out", dir + "/rsa.pem"])
                try Self.openssl(["pkey", "-in", dir + "/rsa.pem", "-pubout", "-out", dir + "/rsapub.pem"])
            }
        } catch { remove(); throw error }
    }

    func remove() { scratch.remove() }

    @discardableResult
    static func openssl(_ args: [String]) throws -> String { try sh(["/usr/bin/openssl"] + args) }

    /// Runs a command; throws unless it exits 0.
    @discardableResult
    static func sh(_ command: [String]) throws -> String {
        let r = try CommandRun(command, environment: ["PATH": "/usr/bin:/bin", "LC_ALL": "C"])
        guard r.status == 0 else { throw CocoaError(.fileReadUnknown, userInfo: [NSDebugDescriptionErrorKey: "\(command) exited \(r.status): \(r.stderr)"]) }
        return r.stdout
    }

    /// The key id as openssl computes it: SHA-256 of the raw 32 bytes (the
    /// DER's last 32), first 16 hex digits.
    func opensslID() throws -> String {
        String(try Self.sh(["/bin/sh", "-c", "openssl pkey -pubin -in \"$0\" -outform DER | tail -c 32 | sha256sum", pub]).prefix(16))
    }

    func publicKey() throws -> Ed25519PublicKey {
        try Ed25519PublicKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pub))))
    }
}

/// What a device with id `device` does with a signed message: reads the
/// envelope, rebuilds the canonical bytes, verifies with `key`. Throws when
/// the message is malformed; false when the signature does not verify.
func deviceVerifies(_ text: String, kind: Signature.Kind, device: String, key: Ed25519PublicKey) throws -> Bool {
    try deviceCanonical(text, kind: kind, device: device).map { key.verify($0.sig, of: $0.bytes) } ?? false
}


func deviceCanonical(_ text: String, kind: Signature.Kind, device: String) throws -> (sig: [UInt8], bytes: [UInt8])? {
    let document: JSONValue, content: [(String, String)]
    switch kind {
    case .payment:
        switch PaymentMessage.parseKeepingDocument(Array(text.utf8), maxAmount: .wordsMax) {
        case .failure(let r): throw TestFailure("payment refused: \(r.reason)")
        case .success(let (p, d)): (document, content) = (d, Signature.paymentContent(p, document: d))
        }
    case .cmd, .config:
        document = try JSONValue.parse(Array(text.utf8))
        content = try Signature.content(document).get()
    }
    let envelope = try Signature.envelope(document, kind: kind, device: device).get()
    let bytes = try Signature.canonical(kind: kind, device: device, envelope: envelope, content: content).get()
    return (envelope.sig, bytes)
}

/// The members of a one-line JSON object on stdout.
func members(_ text: String) throws -> [String: Any] {
    guard let o = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw TestFailure("not a JSON object: \(text)")
    }
    return o
}

@Suite struct KeyCommandTests {
    /// The public and the private PEM of one key give one id, openssl's.
    @Test func publicAndPrivateKeysGiveOpensslsID() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let id = try keys.opensslID()
        #expect(id.utf8.count == 16)
        for (file, type) in [(keys.pub, "public"), (keys.priv, "private")] {
            let r = try Ctl("key", "id", file)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout == id + "\n")
            #expect(r.stderr.isEmpty)
            let j = try Ctl("--json", "key", "id", file)
            #expect(j.status == 0)
            let o = try j.json()
            #expect(o["id"] as? String == id)
            #expect(o["type"] as? String == type)
            #expect(o["file"] as? String == file)
        }
        #expect(try keys.publicKey().id == id)
    }

    /// RFC 8032 TEST 1's public key, as a PEM written here by hand: its id
    /// is the first 8 bytes of SHA-256 over the 32 raw bytes.
    @Test func knownKeyKnownID() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let raw: [UInt8] = [0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
                            0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a]
        let der: [UInt8] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00] + raw
        let file = keys.dir + "/rfc.pem"
        try "-----BEGIN PUBLIC KEY-----\n\(Base64.encode(der))\n-----END PUBLIC KEY-----\n".write(toFile: file, atomically: true, encoding: .utf8)
        let r = try Ctl("key", "id", file)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == Crypto.keyID(raw: raw) + "\n")
        let sha = try SigningKeys.sh(["/bin/sh", "-c", "openssl pkey -pubin -in \"$0\" -outform DER | tail -c 32 | sha256sum", file])
        #expect(r.stdout == sha.prefix(16) + "\n")
    }

    /// Each file that is not an Ed25519 key: exit 1, nothing on stdout, the
    /// file named with the reason; code "key" with --json.
    @Test(arguments: [
        ("text", "not PEM"), ("empty", "not PEM"), ("garbage-pem", "not a PEM key OpenSSL can read"),
        ("missing", "does not exist"), ("rsa", "not an Ed25519 key"), ("rsapub", "not an Ed25519 key"),
        ("big", "is 20000 bytes, more than the 16384 allowed"), ("big-pem", "more than the 16384 allowed"), ("dir", "is a folder, not a file"),
    ])
    func refusedFiles(_ name: String, _ reason: String) throws {
        let keys = try SigningKeys(rsa: name.hasPrefix("rsa"))
        defer { keys.remove() }
        let path: String
        switch name {
        case "missing": path = keys.dir + "/no-such.pem"
        case "rsa": path = keys.dir + "/rsa.pem"
        case "rsapub": path = keys.dir + "/rsapub.pem"
        case "dir": path = keys.dir
        default:
            path = keys.dir + "/" + name
            let valid = try Data(contentsOf: URL(fileURLWithPath: keys.pub))
            let content: Data = switch name {
            case "text": Data("this is not a key\n".utf8)
            case "garbage-pem": Data("-----BEGIN PUBLIC KEY-----\nAAAAAAAA\n-----END PUBLIC KEY-----\n".utf8)
            case "big": Data(repeating: UInt8(ascii: "A"), count: 20_000)
            // A valid key followed by 20 KB: still not read.
            case "big-pem": valid + Data(String(repeating: "# padding padding padding\n", count: 800).utf8)
            default: Data()
            }
            try content.write(to: URL(fileURLWithPath: path))
        }
        let r = try Ctl("key", "id", path)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("soundboxctl: \(path): "), "\(r.stderr)")
        #expect(r.stderr.contains(reason), "\(r.stderr)")
        #expect(r.stderr.utf8.count < 300)
        let j = try Ctl("--json", "key", "id", path)
        #expect(j.status == 1)
        #expect(try j.json()["code"] as? String == "key")
        #expect((try j.json()["error"] as? String)?.contains(path) == true)
    }

    @Test(arguments: [["key"], ["key", "id"], ["key", "id", "a", "b"], ["key", "list"], ["key", "show", "x"],
                      ["key", "id", "x", "--kind", "cmd"], ["key", "id", "x", "--frob"]])
    func usageErrorsExitTwo(_ args: [String]) throws {
        let r = try Ctl(args)
        #expect(r.status == 2)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("soundboxctl: "))
        #expect(try Ctl(["--json"] + args).json()["code"] as? String == "usage")
    }
}

@Suite struct SignCommandTests {
    static let payment = #"{"id":"T1","amount":"12.50","currency":"CNY","channel":"alipay"}"#

    /// The printed message is one a device verifies: rebuilt in-process
    /// from the message alone, and by openssl over the same bytes.
    @Test func aSignedPaymentVerifies() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let key = try keys.publicKey()
        let before = Int(Date().timeIntervalSince1970)
        let r = try Ctl("sign", "--key", keys.priv, "--device", "shop-1", Self.payment)
        let after = Int(Date().timeIntervalSince1970) + 1
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
        #expect(r.stdout.hasSuffix("}\n") && r.stdout.filter { $0 == "\n" }.count == 1)
        let text = String(r.stdout.dropLast())
        let m = try members(text)
        #expect(Set(m.keys) == ["id", "amount", "currency", "channel", "kid", "ts", "sig"])
        #expect(m["kid"] as? String == (try keys.opensslID()))
        let ts = try #require(m["ts"] as? Int)
        #expect(ts >= before && ts <= after)
        #expect((m["sig"] as? String)?.utf8.count == 88)
        #expect(m["amount"] as? String == "12.50")

        #expect(try deviceVerifies(text, kind: .payment, device: "shop-1", key: key))
        #expect(try !deviceVerifies(text, kind: .payment, device: "shop-2", key: key))
        #expect(try !deviceVerifies(text.replacingOccurrences(of: "12.50", with: "12.51"), kind: .payment, device: "shop-1", key: key))
        #expect(try !deviceVerifies(text.replacingOccurrences(of: "alipay", with: "wechat"), kind: .payment, device: "shop-1", key: key))
        #expect(try !deviceVerifies(text.replacingOccurrences(of: "\"ts\":\(ts)", with: "\"ts\":\(ts + 1)"), kind: .payment, device: "shop-1", key: key))
        // Another key does not verify it.
        let other = try SigningKeys()
        defer { other.remove() }
        #expect(try !deviceVerifies(text, kind: .payment, device: "shop-1", key: other.publicKey()))

        // openssl agrees, over the bytes the device builds.
        let (sig, bytes) = try #require(try deviceCanonical(text, kind: .payment, device: "shop-1"))
        try Data(bytes).write(to: URL(fileURLWithPath: keys.dir + "/msg"))
        try Data(sig).write(to: URL(fileURLWithPath: keys.dir + "/sig"))
        let verified = try SigningKeys.openssl(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", keys.pub, "-in", keys.dir + "/msg", "-sigfile", keys.dir + "/sig"])
        #expect(verified.contains("Signature Verified Successfully"))
    }

    /// --json: kind, device, kid, the canonical text and the message. With
    /// its own ts the output is the same every time (Ed25519 is
    /// deterministic), and the same as the text output.
    @Test func jsonOutput() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let id = try keys.opensslID()
        let payload = #"{"amount_minor":1250,"id":"T1","ts":1764415000,"channel":"alipay","currency":"CNY"}"#
        let r = try Ctl("--json", "sign", "--key", keys.priv, "--device", "shop-1", payload)
        #expect(r.status == 0, "\(r.stderr)")
        let j = try r.json()
        #expect(j["kind"] as? String == "payment")
        #expect(j["device"] as? String == "shop-1")
        #expect(j["kid"] as? String == id)
        #expect(j["canonical"] as? String == "soundbox-sig-v1\nkind=payment\ndevice=shop-1\nkid=\(id)\nts=1764415000\nnonce=\nid=T1\namount_minor=1250\ncurrency=CNY\nchannel=alipay\nlang=\n")
        let message = try #require(j["message"] as? String)
        let (_, bytes) = try #require(try deviceCanonical(message, kind: .payment, device: "shop-1"))
        #expect(String(decoding: bytes, as: UTF8.self) == j["canonical"] as? String)
        #expect(try deviceVerifies(message, kind: .payment, device: "shop-1", key: keys.publicKey()))
        #expect(try members(message)["ts"] as? Int == 1764415000)

        let text = try Ctl("sign", "--key", keys.priv, "--device", "shop-1", payload)
        #expect(text.stdout == message + "\n")
        let again = try Ctl("--json", "sign", "--key", keys.priv, "--device", "shop-1", payload)
        #expect(again.stdout == r.stdout)
    }

    /// A cmd gets a nonce (16 hex digits, new each time) unless it has one.
    @Test func aCmdGetsANonce() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let key = try keys.publicKey()
        var nonces: Set<String> = []
        for _ in 0..<2 {
            let r = try Ctl("--json", "sign", "--key", keys.priv, "--device", "shop-1", #"{"cmd":"say","amount":"3.20","ts":1764415000}"#)
            #expect(r.status == 0, "\(r.stderr)")
            let j = try r.json()
            #expect(j["kind"] as? String == "cmd")
            let message = try #require(j["message"] as? String)
            let nonce = try #require(try members(message)["nonce"] as? String)
            #expect(nonce.utf8.count == 16 && nonce.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }, "\(nonce)")
            #expect((j["canonical"] as? String)?.contains("\nnonce=\(nonce)\n") == true)
            #expect(try deviceVerifies(message, kind: .cmd, device: "shop-1", key: key))
            // Its nonce is covered.
            #expect(try !deviceVerifies(message.replacingOccurrences(of: nonce, with: String(nonce.reversed())), kind: .cmd, device: "shop-1", key: key))
            // Verified as another kind, it is other bytes.
            #expect(try !deviceVerifies(message, kind: .config, device: "shop-1", key: key))
            nonces.insert(nonce)
        }
        #expect(nonces.count == 2)

        let given = try Ctl("sign", "--key", keys.priv, "--device", "shop-1", #"{"cmd":"test","nonce":"n-0001"}"#)
        #expect(given.status == 0, "\(given.stderr)")
        let m = try members(given.stdout)
        #expect(m["nonce"] as? String == "n-0001")
        #expect(m["ts"] is Int)
        #expect(try deviceVerifies(given.stdout, kind: .cmd, device: "shop-1", key: key))
    }

    /// The kind: a cmd if it has "cmd", a payment if it has an amount, else
    /// a config; --kind overrides.
    @Test(arguments: [
        (#"{"audio":{"volume":8},"ts":5}"#, nil, "config"),
        (#"{"id":"T1","amount_minor":5,"ts":5}"#, nil, "payment"),
        (#"{"cmd":"summary","ts":5}"#, nil, "cmd"),
        (#"{"cmd":"summary","ts":5}"#, "config", "config"),
        (#"{"id":"T1","amount":"1","ts":5}"#, "cmd", "cmd"),
    ] as [(String, String?, String)])
    func kinds(_ payload: String, _ option: String?, _ expected: String) throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let r = try Ctl(["--json", "sign", "--key", keys.priv, "--device", "d1", payload] + (option.map { ["--kind", $0] } ?? []))
        #expect(r.status == 0, "\(r.stderr)")
        let j = try r.json()
        #expect(j["kind"] as? String == expected)
        let kind = try #require(Signature.Kind(rawValue: expected))
        let message = try #require(j["message"] as? String)
        #expect(try deviceVerifies(message, kind: kind, device: "d1", key: keys.publicKey()))
        #expect((try members(message)["nonce"] != nil) == (kind == .cmd))
    }

    /// An old kid and sig are replaced, not kept beside the new ones.
    @Test func replacesAnOldKidAndSig() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let payload = #"{"id":"T1","amount":"1","kid":"0000000000000000","sig":"junk","ts":7}"#
        let r = try Ctl("sign", "--key", keys.priv, "--device", "shop-1", payload)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.components(separatedBy: "\"kid\"").count == 2)
        #expect(r.stdout.components(separatedBy: "\"sig\"").count == 2)
        #expect(!r.stdout.contains("junk") && !r.stdout.contains("0000000000000000"))
        #expect(try members(r.stdout)["kid"] as? String == keys.opensslID())
        #expect(try deviceVerifies(r.stdout, kind: .payment, device: "shop-1", key: keys.publicKey()))
    }

    /// The device: --device, else the message's own, else device.id in the
    /// settings file.
    @Test func whereTheDeviceComesFrom() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        try "device.id = shop-9\n".write(toFile: keys.dir + "/s.conf", atomically: true, encoding: .utf8)
        let fromMessage = try Ctl("--json", "sign", "--key", keys.priv, "--config", keys.dir + "/s.conf", #"{"cmd":"test","device":"shop-7"}"#)
        #expect(fromMessage.status == 0, "\(fromMessage.stderr)")
        #expect(try fromMessage.json()["device"] as? String == "shop-7")
        let message = try #require(try fromMessage.json()["message"] as? String)
        #expect(try deviceVerifies(message, kind: .cmd, device: "shop-7", key: keys.publicKey()))
        let fromConfig = try Ctl("--json", "sign", "--key", keys.priv, "--config", keys.dir + "/s.conf", #"{"cmd":"test"}"#)
        #expect(fromConfig.status == 0, "\(fromConfig.stderr)")
        #expect(try fromConfig.json()["device"] as? String == "shop-9")
        #expect((try fromConfig.json()["canonical"] as? String)?.contains("\ndevice=shop-9\n") == true)
        let fromFlag = try Ctl("--json", "sign", "--key", keys.priv, "--config", keys.dir + "/s.conf", "--device", "shop-3", #"{"cmd":"test"}"#)
        #expect(try fromFlag.json()["device"] as? String == "shop-3")
    }

    /// PAYLOAD "-": the message from standard input, signed the same.
    @Test func readsStandardInput() throws {
        let keys = try SigningKeys()
        defer { keys.remove() }
        let payload = "{\n  \"id\": \"T5\",\n  \"amount\": 88.8,\n  \"ts\": 1764415000\n}\n"
        try payload.write(toFile: keys.dir + "/payload.json", atomically: true, encoding: .utf8)
        let r = try CommandRun(["/bin/sh", "-c", "exec \"$0\" sign --key \"$1\" --device shop-1 - < \"$2\"", Ctl.binary, keys.priv, keys.dir + "/payload.json"],
                               environment: ["PATH": "/usr/bin:/bin", "SOUNDBOX_VOICES": Ctl.voices])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try members(r.stdout)["id"] as? String == "T5")
        #expect(try deviceVerifies(r.stdout, kind: .payment, device: "shop-1", key: keys.publicKey()))
        let direct = try Ctl("sign", "--key", keys.priv, "--device", "shop-1", payload)
        #expect(direct.stdout == r.stdout)
        // Empty standard input is not a message.
        let empty = try CommandRun([Ctl.binary, "sign", "--key", keys.priv, "--device", "shop-1", "-"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(empty.status == 1)
        #expect(empty.stderr.contains("not valid JSON"), "\(empty.stderr)")
    }

    /// Each refusal: its exit status (1 failure, 2 usage), nothing on
    /// stdout, a message saying why. PRIV/PUB/RSA stand for key files.
    @Test(arguments: [
        (["PRIV", #"{"id":"#], 1, "PAYLOAD is not valid JSON"),
        (["PRIV", "[1]"], 1, "must be a JSON object"),
        (["PRIV", #""text""#], 1, "must be a JSON object"),
        (["PRIV", #"{"id":"T1","amount":"-1"}"#], 1, "amount is negative"),
        (["PRIV", #"{"id":"T1","amount":"1.001"}"#], 1, "amount"),
        (["PRIV", #"{"id":"T1","amount":"12.50","amount_minor":1250}"#], 1, "not both"),
        (["PRIV", #"{"amount":"1"}"#], 1, "id is missing"),
        (["PRIV", #"{"id":"T1","amount":"1","currency":"cny"}"#], 1, "currency"),
        (["PRIV", #"{"id":"T1","amount":"1","ts":"now"}"#], 1, "ts"),
        (["PRIV", #"{"cmd":"test","ts":1.5}"#], 1, "ts"),
        (["PRIV", #"{"cmd":"test","nonce":"a b"}"#], 1, "nonce"),
        (["PRIV", #"{"cmd":"say","x":[1]}"#], 1, "x must be"),
        (["PRIV", #"{"cmd":"say","x":"a\nkind=payment"}"#], 1, "control character"),
        (["PRIV", #"{"id":"T1","amount":"1","device":"shop-2"}"#], 1, "for device 'shop-2'"),
        (["PRIV", "--kind", "payment", #"{"cmd":"test"}"#], 1, "not a payment"),
        (["PUB", #"{"cmd":"test"}"#], 1, "pub.pem: "),
        (["RSA", #"{"cmd":"test"}"#], 1, "not an Ed25519 key"),
        (["MISSING", #"{"cmd":"test"}"#], 1, "does not exist"),
        ([#"{"cmd":"test"}"#], 2, "--key"),
        (["PRIV"], 2, "usage: sign"),
        (["PRIV", "{}", "{}"], 2, "usage: sign"),
        (["PRIV", "--kind", "receipt", "{}"], 2, "--kind must be payment, cmd or config"),
        (["PRIV", "--kind", "CMD", "{}"], 2, "--kind must be"),
        (["PRIV", "--lang", "en-IN", "{}"], 2, "sign does not take --lang"),
        (["PRIV", "{}", "--kind"], 2, "--kind needs a value"),
    ] as [([String], Int32, String)])
    func refusals(_ args: [String], _ status: Int32, _ reason: String) throws {
        let keys = try SigningKeys(rsa: args.contains("RSA"))
        defer { keys.remove() }
        let paths = ["PRIV": keys.priv, "PUB": keys.pub, "RSA": keys.dir + "/rsa.pem", "MISSING": keys.dir + "/none.pem"]
        var command = ["sign", "--device", "shop-1"]
        for a in args { if let p = paths[a] { command += ["--key", p] } else { command.append(a) } }
        let r = try Ctl(command)
        #expect(r.status == status, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("soundboxctl: "))
        #expect(r.stderr.contains(reason), "\(r.stderr)")
        #expect(r.stderr.filter { $0 == "\n" }.count == 1, "\(r.stderr)")
        let j = try Ctl(["--json"] + command)
        #expect(j.status == status)
        let code = try j.json()["code"] as? String
        #expect(status == 2 ? code == "usage" : code == "payload" || code == "key", "\(j.stdout)")
    }
}
