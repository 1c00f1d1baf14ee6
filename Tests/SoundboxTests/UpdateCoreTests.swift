import Foundation
import Testing
import TestSupport
@testable import Soundbox

/// The update's pure parts: the cmd's fields with hostile values, the
/// record that survives power cuts, and Debian's version order checked
/// against dpkg itself.
@Suite struct UpdateCoreTests {
    static let sha = String(repeating: "0123456789abcdef", count: 4)

    func parse(_ json: String) -> Result<RemoteCommand, RemoteMessageError> {
        RemoteCommand.parse(Array(json.utf8), maxAmount: Amount(minorUnits: 100), now: 0)
    }

    @Test func aGoodCommand() throws {
        let r = parse(#"{"cmd":"update","id":"U1","url":"https://updates.example.com/soundbox-0.2.0-rpi-arm64.raucb","sha256":"\#(Self.sha)","version":"0.2.0","size":1234}"#)
        guard case .success(.update(let u)) = r else { Issue.record("\(r)"); return }
        #expect(u.source == .url("https://updates.example.com/soundbox-0.2.0-rpi-arm64.raucb"))
        #expect(u.sha256 == Self.sha && u.version == "0.2.0" && u.id == "U1" && u.size == 1234 && !u.force)
    }

    /// Every field refused with a reason that names it.
    @Test(arguments: [
        (#"{"cmd":"update","sha256":"S","version":"0.2.0"}"#, "update needs \"url\""),
        (#"{"cmd":"update","url":"http://h/x","version":"0.2.0"}"#, "update needs \"sha256\""),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S"}"#, "update needs \"version\""),
        (#"{"cmd":"update","url":5,"sha256":"S","version":"0.2.0"}"#, "url must be a string"),
        (#"{"cmd":"update","url":"file:///etc/shadow","sha256":"S","version":"0.2.0"}"#, "is not http:// or https://"),
        (#"{"cmd":"update","url":"ftp://h/x","sha256":"S","version":"0.2.0"}"#, "is not http:// or https://"),
        (#"{"cmd":"update","url":"http://user:pw@h/x","sha256":"S","version":"0.2.0"}"#, "carries credentials"),
        (#"{"cmd":"update","url":"http:///x","sha256":"S","version":"0.2.0"}"#, "has no host"),
        (#"{"cmd":"update","url":"http://h/a b","sha256":"S","version":"0.2.0"}"#, "has spaces"),
        (#"{"cmd":"update","url":"http://h/x\n","sha256":"S","version":"0.2.0"}"#, "control or non-ASCII"),
        (#"{"cmd":"update","url":"http://h/x#frag","sha256":"S","version":"0.2.0"}"#, "has a fragment"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"abc","version":"0.2.0"}"#, "sha256 must be 64 lowercase hex digits"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"\#(String(repeating: "A", count: 64))","version":"0.2.0"}"#, "sha256 must be 64 lowercase hex digits"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"latest"}"#, "is not a Debian version"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"0.2.0;reboot"}"#, "is not a Debian version"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"0.2.0","size":-1}"#, "size must be a whole number"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"0.2.0","size":1.5}"#, "size must be a whole number"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"0.2.0","size":"9"}"#, "size must be a number"),
        (#"{"cmd":"update","url":"http://h/x","sha256":"S","version":"0.2.0","id":"a b"}"#, "id must be 1-64 printable"),
    ])
    func hostileFields(json: String, reason: String) {
        let text = json.replacingOccurrences(of: #""S""#, with: "\"\(Self.sha)\"")
        guard case .failure(let e) = parse(text) else { Issue.record("accepted: \(json)"); return }
        #expect(e.description.contains(reason), "\(e.description)")
    }

    @Test func aLongURLIsRefusedWithoutEchoingIt() {
        let url = "http://h/" + String(repeating: "a", count: 3000)
        guard case .failure(let e) = parse(#"{"cmd":"update","url":"\#(url)","sha256":"\#(Self.sha)","version":"1"}"#) else {
            Issue.record("accepted"); return
        }
        #expect(e.description.contains("longer than 2048") && e.description.utf8.count < 200)
    }

    /// Only a bundle's own file name, never a path.
    @Test(arguments: ["../x.raucb", "/etc/x.raucb", "a/b.raucb", ".hidden.raucb", "x.raucb\n", "x.img", "", "x raucb.raucb"])
    func fileNames(name: String) {
        #expect(!UpdateRequest.isBundleName(name))
        #expect(UpdateRequest(source: .file(name)).problem != nil)
    }

    @Test func recordRoundTrip() {
        var r = UpdateRecord()
        r.phase = .waitingToReboot; r.progress = 100; r.version = "0.2.0"; r.reason = "line one\nline two"; r.id = "U1"
        r.url = "http://h/x"; r.sha256 = Self.sha; r.size = 42; r.file = "download.raucb"; r.force = true
        r.fromSlot = "A"; r.toSlot = "B"; r.rebootBoot = "b1"; r.ts = 7
        let back = UpdateRecord.parse(r.text)
        #expect(back.reason == "line one\\nline two", "a reason stays on one line")
        var expected = r
        expected.reason = back.reason
        #expect(back == expected)
        #expect(r.json.text.contains(#""state":"waiting to reboot""#))
    }

    @Test func aDamagedRecordReadsAsWhatCanBeRead() {
        let r = UpdateRecord.parse("phase=exploding\nprogress=900\nfile=../../etc/passwd\n\u{0}garbage\nversion=0.2.0")
        #expect(r.phase == .idle && r.progress == 100 && r.file == nil && r.version == "0.2.0")
    }

    @Test func installProgressLines() {
        #expect(InstallProgress.percent("  40% Copying image") == 40)
        #expect(InstallProgress.percent("100% Installing done.") == 100)
        #expect(InstallProgress.percent("140% x") == nil)
        #expect(InstallProgress.percent("installing `x' succeeded") == nil)
    }

    /// The same order as `dpkg --compare-versions`, for hand-picked pairs
    /// (epochs, tildes, revisions, leading zeros) and 300 random ones.
    @Test func debianVersionOrderIsDpkgs() throws {
        var pairs = [("0.1.0", "0.2.0"), ("0.2.0", "0.10.0"), ("1.0~rc1", "1.0"), ("1.0", "1.0+update1"), ("1:0.1", "2.0"),
                     ("0.1.0-1", "0.1.0-2"), ("0.1.0", "0.1.0-0"), ("1.01", "1.1"), ("1.0a", "1.0+"), ("1.0~~", "1.0~"),
                     ("0.1.0+update1", "0.1.0+update2"), ("2.0", "10.0"), ("1.0.0", "1.0"), ("9", "9")]
        var rng = SplitMix64(seed: 20)
        let pieces = ["0", "1", "2", "10", "01", ".", "~", "+", "-", "a", "b", "rc", ":"]
        func random() -> String {
            var s = String(Int(rng.next() % 10))
            for _ in 0..<Int(rng.next() % 6) { s += pieces[Int(rng.next() % UInt64(pieces.count))] }
            return s
        }
        var candidates: [String] = []
        for _ in 0..<600 { candidates.append(random()) }
        // Valid as dpkg says, for every candidate.
        let check = candidates.map { "dpkg --validate-version '\($0)' 2>/dev/null && echo ok || echo bad" }.joined(separator: "\n")
        let verdicts = try CommandRun(["/bin/bash", "-c", check], timeout: 120).stdout.split(separator: "\n")
        try #require(verdicts.count == candidates.count)
        for (v, verdict) in zip(candidates, verdicts) { #expect(DebianVersion.isValid(v) == (verdict == "ok"), "\(v): dpkg says \(verdict)") }
        let valid = candidates.filter(DebianVersion.isValid)
        for i in stride(from: 0, to: valid.count - 1, by: 2) { pairs.append((valid[i], valid[i + 1])) }
        var script = ""
        for (a, b) in pairs { script += "if dpkg --compare-versions '\(a)' lt '\(b)' 2>/dev/null; then echo lt; elif dpkg --compare-versions '\(a)' eq '\(b)' 2>/dev/null; then echo eq; else echo gt; fi\n" }
        let run = try CommandRun(["/bin/bash", "-c", script], timeout: 120)
        let dpkg = run.stdout.split(separator: "\n").map(String.init)
        try #require(dpkg.count == pairs.count)
        for ((a, b), want) in zip(pairs, dpkg) {
            let c = DebianVersion.compare(a, b)
            let got = c < 0 ? "lt" : c == 0 ? "eq" : "gt"
            #expect(got == want, "\(a) vs \(b): dpkg says \(want)")
        }
    }
}
