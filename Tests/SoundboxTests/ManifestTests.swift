import Glibc
@testable import Soundbox
import Testing
import TestSupport

/// `manifest.json` read without Foundation: every field checked, a hostile
/// file named with the key and what is wrong, never a crash.
@Suite struct ManifestTests {
    static let good = """
        {"format_version":1,"name":"zh-CN","language":"zh-CN","grammar":"zh-CN","currency":"CNY","fallback":null,
         "format":{"codec":"mp3","sample_rate":22050,"channels":1},"gap_ms":40,"source":"test","clips":{"一":"yi1.mp3"},
         "unknown":[1,2]}
        """

    private func parse(_ text: String) -> Result<VoicePackManifest, VoicePackError> {
        do throws(VoicePackError) {
            guard let json = try? JSONValue.parse(Array(text.utf8)) else { return .failure(VoicePackError(path: "", message: "not JSON")) }
            return .success(try VoicePackManifest(json: json))
        } catch { return .failure(error) }
    }

    @Test func aGoodManifestIsRead() throws {
        let m = try parse(Self.good).get()
        #expect(m.formatVersion == 1 && m.name == "zh-CN" && m.language == "zh-CN" && m.grammar == "zh-CN")
        #expect(m.currency == "CNY" && m.fallback == nil && m.gapMs == 40 && m.source == "test")
        #expect(m.format == .init(codec: "mp3", sampleRate: 22050, channels: 1))
        #expect(m.clips == ["一": "yi1.mp3"])
        #expect(m.problem == nil)
    }

    @Test(arguments: [
        (#""clips":{"一":"yi1.mp3"}"#, #""x":1"#, "key 'clips' is missing"),
        (#""sample_rate":22050"#, #""sample_rate":"22050""#, "'format.sample_rate' must be a whole number, not a string"),
        (#""sample_rate":22050"#, #""sample_rate":22050.5"#, "'format.sample_rate' must be a whole number, not 22050.5"),
        (#""sample_rate":22050"#, #""sample_rate":99999999999999999999999"#, "'format.sample_rate' must be a whole number, not 99999999999999999999999"),
        (#""format_version":1"#, #""format_version":null"#, "key 'format_version' is missing"),
        (#""name":"zh-CN""#, #""name":["zh-CN"]"#, "'name' must be a string, not an array"),
        (#""currency":"CNY""#, #""currency":7"#, "'currency' must be a string or null, not a number"),
        (#""format":{"codec":"mp3","sample_rate":22050,"channels":1}"#, #""format":"mp3""#, "'format' must be an object, not a string"),
        (#""codec":"mp3","#, "", "key 'format.codec' is missing"),
        (#""clips":{"一":"yi1.mp3"}"#, #""clips":["yi1.mp3"]"#, "'clips' must be an object of clip names and file names"),
        (#""clips":{"一":"yi1.mp3"}"#, #""clips":{"一":1}"#, "'clips.一' must be a string, not a number"),
        (#""gap_ms":40"#, #""gap_ms":true"#, "'gap_ms' must be a whole number, not a boolean"),
    ])
    func aBadFieldIsNamed(_ replace: String, _ with: String, _ message: String) {
        let text = Self.good.replacingFirst(replace, with: with)
        #expect(text != Self.good)
        guard case .failure(let e) = parse(text) else { Issue.record("accepted: \(text)"); return }
        #expect(e.message == message)
    }

    @Test func theTopLevelMustBeAnObject() {
        guard case .failure(let e) = parse("[]") else { Issue.record("accepted"); return }
        #expect(e.message == "the top level must be an object, not an array")
    }

    @Test func aFileThatIsNotAManifestIsRefusedWithItsPath() throws {
        let scratch = Scratch("sbx-manifest")
        let dir = scratch.path
        #expect(throws: VoicePackError(path: dir + "/manifest.json", message: "no manifest.json here: is this a voice pack folder?")) {
            try VoicePackManifest.load(directory: dir)
        }
        for (bytes, message) in [([UInt8](repeating: 0xFF, count: 10), "not valid JSON"), (Array("{".utf8), "not valid JSON"),
                                 ([UInt8](repeating: 0x20, count: 2 << 20), "is 2097152 bytes, more than the 1048576 allowed")] {
            let fd = open(dir + "/manifest.json", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            do { _ = try VoicePackManifest.load(directory: dir); Issue.record("accepted") } catch {
                #expect(error.path == dir + "/manifest.json")
                #expect(error.message.hasPrefix(message), "\(error.message)")
            }
        }
    }

    @Test func filesReadListAndBound() throws {
        let scratch = Scratch("sbx-files")
        let dir = scratch.path
        let fd = open(dir + "/a", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let content = [UInt8]((0..<40000).map { UInt8($0 % 251) })
        _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        #expect(Files.read(dir + "/a") == content)
        #expect(Files.read(dir + "/a", limit: 39999) == nil, "over the limit")
        #expect(Files.prefix(dir + "/a", 100) == Array(content.prefix(100)))
        #expect(Files.read(dir) == nil, "a folder")
        #expect(Files.read(dir + "/absent") == nil)
        #expect(Files.list(dir) == ["a"])
        #expect(Files.list(dir + "/absent").isEmpty)
        #expect(symlink("a", dir + "/link") == 0)
        #expect(Files.linkTarget(dir + "/link") == "a")
        #expect(Files.exists(dir + "/link") && !Files.exists(dir + "/absent"))
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let r = firstRange(of: target) else { return self }
        var s = self
        s.replaceSubrange(r, with: replacement)
        return s
    }
}
