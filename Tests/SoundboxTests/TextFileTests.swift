import Glibc
import Soundbox
import Testing
import TestSupport

/// Issue 18, field defects: settings written on Windows (CRLF, a byte order
/// mark), hostile values (10 MB, invisible characters), and files that are
/// not what they seem (a symbolic link loop, a folder, too large).
@Suite final class TextFileTests {
    let scratch = Scratch("sbx-text")
    var dir: String { scratch.path }

    func write(_ name: String, _ bytes: [UInt8]) -> String {
        let path = dir + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        return path
    }

    /// Swift's "\r\n" is one Character: a file saved on Windows must still
    /// be read line by line, with a comment or a key first.
    @Test func crlfSettingsAreReadLineByLine() throws {
        let commentFirst = try Config.parse("# the shop's box\r\naudio.volume = 9\r\naudio.output = wav\r\n", source: "s.conf")
        #expect(commentFirst[.audioVolume] == 9)
        #expect(commentFirst[.audioOutput] == "wav")
        let keyFirst = try Config.parse("audio.volume = 9\r\naudio.output = wav\r\n\r\nvoice.lang = en-IN", source: "s.conf")
        #expect(keyFirst[.audioVolume] == 9)
        #expect(keyFirst[.audioOutput] == "wav")
        #expect(keyFirst[.voiceLang] == "en-IN")
    }

    @Test func aBadValueInACRLFFileIsReportedOnItsLine() {
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("# comment\r\naudio.volume = 99\r\n", source: "s.conf") }
        #expect(error?.description == "s.conf:2: audio.volume = '99' is not allowed; expected an integer 0-10")
    }

    /// An old Mac file (CR only) is one line: refused with its CRs shown,
    /// not read as a path holding a CR.
    @Test func aCROnlyFileIsRefusedNotMisread() {
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("audio.wav_file = /tmp/a.wav\raudio.volume = 3\r", source: "s.conf") }
        #expect(error?.description == "s.conf:1: audio.wav_file = '/tmp/a.wav\\raudio.volume = 3' is not allowed; expected a path of at most 4096 bytes (PATH_MAX), without control characters")
    }

    /// A manifest saved by Notepad (a byte order mark, CRLF) is read.
    @Test func aManifestWithAByteOrderMarkIsRead() throws {
        let manifest = #"{"format_version":1,"name":"x","language":"zh-CN","grammar":"zh-CN",\#r\#n"format":{"codec":"mp3","sample_rate":22050,"channels":1},"clips":{}}\#r\#n"#
        _ = write("manifest.json", [0xEF, 0xBB, 0xBF] + Array(manifest.utf8))
        #expect(try VoicePackManifest.load(directory: dir).name == "x")
    }

    /// A manifest's own text in its errors is escaped and short too.
    @Test func aManifestsTextIsQuotedVisibly() {
        let manifest = #"{"format_version":1,"name":"x","language":"zh-CN","grammar":"zh\u202eCN","format":{"codec":"mp3","sample_rate":22050,"channels":1},"clips":{}}"#
        _ = write("manifest.json", Array(manifest.utf8))
        #expect(throws: VoicePackError(path: dir + "/manifest.json", message: "grammar 'zh\\u{202E}CN' is unknown; known: " + Grammars.all.map(\.name).joined(separator: ", "))) {
            try VoicePackManifest.load(directory: dir)
        }
    }

    /// A pack whose manifest is a looping link is reported, not skipped.
    @Test func aLoopingManifestIsAPackProblem() {
        mkdir(dir + "/xx", 0o755)
        symlink(dir + "/xx/manifest.json", dir + "/xx/manifest.json")
        defer { unlink(dir + "/xx/manifest.json"); rmdir(dir + "/xx") }
        #expect(VoiceCatalog.scan(directory: dir).problems == ["xx": "is a symbolic link loop"])
    }

    /// Notepad's byte order mark is not part of the first key.
    @Test func aByteOrderMarkIsNotPartOfTheFirstKey() throws {
        let path = write("bom.conf", [0xEF, 0xBB, 0xBF] + Array("state.dir = /srv/sb\r\naudio.volume = 2\r\n".utf8))
        let c = try Config.load(path: path)
        #expect(c[.stateDir] == "/srv/sb")
        #expect(c[.audioVolume] == 2)
    }

    /// An error quoting user text shows invisible characters escaped.
    @Test func invisibleCharactersInAnErrorAreEscaped() {
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("audio.volume = 9\nstate\u{200B}.dir = /x\n", source: "s.conf") }
        #expect(error?.description.hasPrefix("s.conf:2: unknown key 'state\\u{200B}.dir'; known keys: ") == true)
        let bad = #expect(throws: ConfigFileError.self) { try Config.parse("audio.output = wav\u{202E}x\n", source: "s.conf") }
        #expect(bad?.description == "s.conf:1: audio.output = 'wav\\u{202E}x' is not allowed; expected one of alsa, wav, null")
        let syntax = #expect(throws: ConfigFileError.self) { try Config.parse("volume\u{1B}[2J 3\n", source: "s.conf") }
        #expect(syntax?.description == "s.conf:1: expected 'key = value', got 'volume\\u{1B}[2J 3'")
    }

    /// A huge value is quoted by a short prefix and its size, never whole.
    @Test func aHugeValueIsQuotedShort() {
        let huge = String(repeating: "9", count: 1_000_000)
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("audio.volume = " + huge + "\n", source: "s.conf") }
        #expect(error?.description == "s.conf:1: audio.volume = '" + String(repeating: "9", count: 40) + "… (1000000 bytes)' is not allowed; expected an integer 0-10")
        let line = #expect(throws: ConfigFileError.self) { try Config.parse(huge + "\n", source: "s.conf") }
        #expect((line?.description.utf8.count ?? .max) < 200)
    }

    /// device.id is an MQTT topic level and the client id.
    @Test(arguments: [String(repeating: "a", count: 65), "shop/1", "shop+", "shop#", "a\u{0}b", "a\tb", "a\u{7F}"])
    func aDeviceIDThatCannotBeATopicLevelIsRefused(_ id: String) {
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("device.id = \(id)\n", source: "s.conf") }
        #expect(error?.description.hasPrefix("s.conf:1: device.id = '") == true)
        #expect(error?.description.contains("expected an MQTT topic level: at most 64 bytes") == true, "\(String(describing: error))")
    }

    @Test func aDeviceIDOf64BytesIsFine() throws {
        let id = String(repeating: "a", count: 64)
        #expect(try Config.parse("device.id = \(id)\n", source: "s.conf")[.deviceID] == id)
    }

    /// Every text value has a length limit; so has the file.
    @Test func valuesAndTheFileHaveLimits() {
        let path = String(repeating: "p", count: 4097)
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("state.dir = /\(path)\n", source: "s.conf") }
        #expect(error?.description.contains("(4098 bytes)' is not allowed; expected a path of at most 4096 bytes") == true, "\(String(describing: error))")
        let host = #expect(throws: ConfigFileError.self) { try Config.parse("mqtt.host = \(String(repeating: "h", count: 254))\n", source: "s.conf") }
        #expect(host?.description.contains("expected a broker's host name (at most 253 bytes") == true, "\(String(describing: host))")
        let big = write("big.conf", [UInt8](repeating: UInt8(ascii: "#"), count: 65537))
        let file = #expect(throws: ConfigFileError.self) { try Config.load(path: big) }
        #expect(file?.description == "\(big): is 65537 bytes, more than the 65536 allowed")
    }

    /// The error says what the path is, not "permission denied".
    @Test func fileErrorsSayWhatThePathIs() {
        symlink(dir + "/loop", dir + "/loop")
        let loop = #expect(throws: ConfigFileError.self) { try Config.load(path: dir + "/loop") }
        #expect(loop?.description == "\(dir)/loop: is a symbolic link loop")
        symlink(dir + "/gone", dir + "/dangling")
        let dangling = #expect(throws: ConfigFileError.self) { try Config.load(path: dir + "/dangling") }
        #expect(dangling?.description == "\(dir)/dangling: is a symbolic link to \(dir)/gone, which does not exist")
        let missing = #expect(throws: ConfigFileError.self) { try Config.load(path: dir + "/nope.conf") }
        #expect(missing?.description == "\(dir)/nope.conf: does not exist")
        let folder = #expect(throws: ConfigFileError.self) { try Config.load(path: dir) }
        #expect(folder?.description == "\(dir): is a folder, not a file")
        let notDir = write("plain", [])
        let under = #expect(throws: ConfigFileError.self) { try Config.load(path: notDir + "/s.conf") }
        #expect(under?.description == "\(notDir)/s.conf: a part of the path is not a folder")
    }

    /// Only a regular file is opened for reading: a FIFO, a device or a
    /// folder is refused at once, each in its own words.
    @Test func onlyRegularFilesAreRead() throws {
        let fifo = dir + "/fifo"
        #expect(mkfifo(fifo, 0o644) == 0)
        #expect(throws: FileError(path: fifo, reason: .notRegular(S_IFIFO))) { try Files.contents(fifo, limit: 100) }
        #expect((try? Files.contents("/dev/null", limit: 100)) == nil)
        #expect(FileError(path: "/dev/null", reason: .notRegular(S_IFCHR)).description == "/dev/null: is a character device, not a regular file")
        #expect(throws: FileError(path: dir, reason: .notRegular(S_IFDIR))) { try Files.checkRegular(dir) }
        let long = dir + "/" + String(repeating: "n", count: 300)
        #expect(throws: FileError(path: long, errno: ENAMETOOLONG)) { try Files.contents(long, limit: 100) }
        #expect(FileError(path: long, errno: ENAMETOOLONG).phrase == "the path is too long")
        let fine = write("fine", Array("abc".utf8))
        #expect(try Files.contents(fine, limit: 3) == Array("abc".utf8))
        #expect(throws: FileError(path: fine, reason: .tooLarge(3, limit: 2))) { try Files.contents(fine, limit: 2) }
        // The descriptor it returns blocks again (O_NONBLOCK cleared).
        let fd = try Files.openRegular(fine)
        #expect(fcntl(fd, F_GETFL) & O_NONBLOCK == 0)
        close(fd)
    }

    /// The same limits for `config set` and remote config (Config.set, the
    /// overlay): a huge value is refused and quoted short.
    @Test func theOverlayHasTheSameLimits() {
        let huge = String(repeating: "z", count: 100_000)
        let (_, rejected) = Config().applying(["voice.lang": huge, "device.id": "a/b", "audio.volume": "3"])
        #expect(rejected.keys.sorted() == ["device.id", "voice.lang"])
        #expect(rejected["voice.lang"]?.description == "voice.lang = '" + String(repeating: "z", count: 40) + "… (100000 bytes)' is not allowed; expected a voice pack's name (1-32 letters, digits, '-' or '_')")
    }

    @Test func linesSplitOnScalars() {
        #expect(TextFile.lines("a\r\nb\nc\r\n").map(String.init) == ["a", "b", "c", ""])
        #expect(TextFile.lines("\u{FEFF}a").map(String.init) == ["a"])
        #expect(TextFile.lines("a\r\r\n\u{301}b").map(String.init) == ["a\r", "\u{301}b"], "only one CR is the line end's")
        #expect(TextFile.excerpt("a\u{FEFF}\u{0}b") == "a\\u{FEFF}\\u{0}b")
        #expect(TextFile.excerpt(String(repeating: "é", count: 41)) == String(repeating: "é", count: 40) + "… (82 bytes)")
    }
}
