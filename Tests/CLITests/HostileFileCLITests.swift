import Foundation
import Soundbox
import Testing
import TestSupport

/// Issue 18, field defects, on the technician's tool: FIFOs among a pack's
/// clips, a build's recordings or key files are refused at once (bounded
/// runs: a hang fails the test); key files saved by Notepad are read.
@Suite struct HostileFileCLITests {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-hostile-\(UUID().uuidString.prefix(8))").path
    init() throws { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }

    @Test func voiceCheckNamesAFIFOClip() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.copyItem(atPath: Ctl.voices + "/en-IN", toPath: dir + "/en-IN")
        try FileManager.default.removeItem(atPath: dir + "/en-IN/seven.mp3")
        #expect(mkfifo(dir + "/en-IN/seven.mp3", 0o644) == 0)
        let r = try Ctl(["voice", "check", dir + "/en-IN"], timeout: 20)
        #expect(r.status == 1)
        #expect(r.stdout.contains("error: clip 'seven': seven.mp3: is a FIFO (named pipe), not a regular file"), "\(r.stdout)")
    }

    @Test func keyIdRefusesAFIFO() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(mkfifo(dir + "/key.pem", 0o644) == 0)
        let r = try Ctl(["key", "id", dir + "/key.pem"], timeout: 20)
        #expect(r.status == 1)
        #expect(r.stderr.contains("\(dir)/key.pem: is a FIFO (named pipe), not a regular file"), "\(r.stderr)")
    }

    /// A PEM saved on Windows: a byte order mark and CRLF line ends.
    @Test func keyIdReadsAKeySavedOnWindows() throws {
        let keys = try SigningKeys()
        defer { keys.remove(); try? FileManager.default.removeItem(atPath: dir) }
        let pem = try String(contentsOfFile: keys.pub, encoding: .utf8)
        let windows = Data([0xEF, 0xBB, 0xBF]) + Data(pem.replacingOccurrences(of: "\n", with: "\r\n").utf8)
        try windows.write(to: URL(fileURLWithPath: dir + "/win.pem"))
        let r = try Ctl("key", "id", dir + "/win.pem")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == (try Ctl("key", "id", keys.pub).stdout))
    }

    /// A payload saved by Notepad, on standard input, is signed as without its byte order mark.
    @Test func signReadsAPayloadSavedOnWindows() throws {
        let keys = try SigningKeys()
        defer { keys.remove(); try? FileManager.default.removeItem(atPath: dir) }
        let payload = "{\r\n  \"id\": \"T5\",\r\n  \"amount\": 88.8,\r\n  \"ts\": 1764415000\r\n}\r\n"
        try (Data([0xEF, 0xBB, 0xBF]) + Data(payload.utf8)).write(to: URL(fileURLWithPath: dir + "/payload.json"))
        let r = try CommandRun(["/bin/sh", "-c", "exec \"$0\" sign --key \"$1\" --device shop-1 - < \"$2\"", Ctl.binary, keys.priv, dir + "/payload.json"],
                               environment: ["PATH": "/usr/bin:/bin", "SOUNDBOX_VOICES": Ctl.voices])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try deviceVerifies(r.stdout, kind: .payment, device: "shop-1", key: keys.publicKey()))
    }

    @Test func keyErrorsSayWhatThePathIs() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        symlink(dir + "/loop.pem", dir + "/loop.pem")
        let r = try Ctl("key", "id", dir + "/loop.pem")
        #expect(r.stderr.contains("\(dir)/loop.pem: is a symbolic link loop"), "\(r.stderr)")
    }
}

extension VoiceBuildTests {
    @Test func aFIFOAsARecordingIsRefusedAtOnce() throws {
        _ = try recordings()
        try FileManager.default.removeItem(atPath: dir + "/src/two.wav")
        #expect(mkfifo(dir + "/src/two.wav", 0o644) == 0)
        let r = try Ctl(["voice", "build", dir + "/src", dir + "/out", "--lang", "en-IN"], timeout: 60)
        #expect(r.status == 1)
        #expect(r.stderr.contains("src/two.wav: is a FIFO (named pipe), not a regular file"), "\(r.stderr)")
    }
}
