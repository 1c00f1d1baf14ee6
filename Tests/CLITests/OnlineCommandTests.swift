import Foundation
import Testing
import SoundboxSystem

/// The online commands without a daemon: where they look for the socket,
/// what they say when nothing listens, and the argument checks made before
/// connecting. Then the client side of the protocol against `ScriptedPeer`.
@Suite struct OnlineWithoutDaemonTests {
    static let nowhere = "/tmp/soundboxctl-test-no-daemon.sock"

    @Test func statusWithNoDaemonNamesTheSocket() throws {
        let r = try Ctl(["status", "--socket", Self.nowhere])
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "soundboxctl: cannot connect to \(Self.nowhere): No such file or directory; is soundboxd running?\n")
        let j = try Ctl(["--json", "status", "--socket", Self.nowhere])
        #expect(j.status == 1)
        #expect(try j.json()["code"] as? String == "not_running")
        #expect((try j.json()["error"] as? String)?.contains(Self.nowhere) == true)
    }

    /// A file that is not a listening socket: refused, same advice.
    @Test func refusedConnection() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        try Data().write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let r = try Ctl(["--json", "queue", "--socket", file])
        #expect(r.status == 1)
        #expect(try r.json()["code"] as? String == "not_running")
    }

    /// --socket, then $SOUNDBOX_SOCKET, then control.socket in the config file.
    @Test func socketPathPrecedence() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "control.socket = \(dir)/from-config.sock\n".write(toFile: dir + "/s.conf", atomically: true, encoding: .utf8)
        let config = ["--config", dir + "/s.conf"]

        let fromConfig = try Ctl(config + ["status"])
        #expect(fromConfig.stderr.contains("\(dir)/from-config.sock:"), "\(fromConfig.stderr)")
        let fromEnv = try Ctl(config + ["status"], env: ["SOUNDBOX_SOCKET": dir + "/from-env.sock"])
        #expect(fromEnv.stderr.contains("\(dir)/from-env.sock:"), "\(fromEnv.stderr)")
        let fromFlag = try Ctl(config + ["--socket", dir + "/from-flag.sock", "status"], env: ["SOUNDBOX_SOCKET": dir + "/from-env.sock"])
        #expect(fromFlag.stderr.contains("\(dir)/from-flag.sock:"), "\(fromFlag.stderr)")
        for r in [fromConfig, fromEnv, fromFlag] { #expect(r.status == 1) }
    }

    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/run/soundbox/control.sock")))
    func defaultSocket() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "".write(toFile: dir + "/empty.conf", atomically: true, encoding: .utf8)
        let r = try Ctl(["--config", dir + "/empty.conf", "doctor"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("/run/soundbox/control.sock"))
    }

    /// Argument errors exit 2 before any connection is tried.
    @Test(arguments: [
        ["volume", "11"], ["volume", "-1"], ["volume", "loud"], ["volume", "1", "2"],
        ["history", "--limit", "0"], ["history", "--limit", "1001"], ["history", "--limit", "ten"], ["history", "5"],
        ["config", "set", "onlyonearg"], ["config"], ["config", "get", "a", "b"], ["config", "frob", "x"],
        ["say"], ["say", "1", "2"], ["say", "1", "--id", "has space"], ["say", "1", "--limit", "3"],
        ["status", "now"], ["status", "--limit", "3"], ["queue", "--lang", "en-IN"], ["replay", "a", "b"],
        ["wait", "--timeout", "0"], ["wait", "--timeout", "1.5"], ["say", "1", "--id", "two\nlines"], ["say", "1", "--channel", "alipay"],
        ["config", "set", "audio.device", String(repeating: "x", count: 4096)],
    ])
    func usageErrorsExitTwo(_ args: [String]) throws {
        let r = try Ctl(["--socket", Self.nowhere] + args)
        #expect(r.status == 2, "\(args): \(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("soundboxctl: ") && !r.stderr.contains("cannot connect"))
    }

    /// `say` checks its amount as `words` does: same code, exit 1, no connection.
    @Test(arguments: [("1e3", "exponent"), ("0", "zero"), ("1.001", "too_many_decimals"), ("-5", "negative"), ("1000000000000", "above_limit")])
    func sayChecksTheAmountLikeWords(_ amount: String, _ code: String) throws {
        let say = try Ctl(["--json", "--socket", Self.nowhere, "say", amount])
        let words = try Ctl(["--json", "words", amount])
        #expect(say.status == 1)
        #expect(try say.json()["code"] as? String == code)
        #expect(say.stdout == words.stdout)
    }

    @Test func helpListsTheOnlineCommands() throws {
        let r = try Ctl("--help")
        for word in ["Online commands", "status", "queue", "history [--limit N]", "replay [ID]",
                     "say AMOUNT [--lang L] [--id ID]", "volume [N|up|down]", "config get [KEY]",
                     "config set KEY VALUE", "test-audio", "doctor", "wait [--timeout S]", "--socket PATH",
                     "SOUNDBOX_SOCKET", "/run/soundbox/control.sock"] {
            #expect(r.stdout.contains(word), "\(word)")
        }
    }
}

/// The client against a scripted peer that answers as docs/control-protocol.md
/// says soundboxd does: the request line soundboxctl sends, and how it shows
/// each kind of reply.
@Suite struct OnlineProtocolTests {
    /// Runs soundboxctl against a peer that greets, reads one request and
    /// answers `reply`; returns the result and the request line.
    func exchange(_ args: [String], reply: String?, greeting: String = "OK SOUNDBOX 0.1.0\n") throws -> (Ctl, String?) {
        let peer = try ScriptedPeer()
        var request: String?
        let r = try Ctl(["--socket", peer.path] + args) {
            request = try peer.serve(greeting: greeting, reply: reply)
        }
        return (r, request)
    }

    static let status = """
        version: 0.1.0
        state: idle
        volume: 6
        muted: false
        queue_depth: 0
        voice: zh-CN
        last_id: 12345
        uptime_s: 12
        output: alsa:default
        durable: true
        clock_synced: true
        faults: none
        OK

        """

    @Test func statusAsAlignedText() throws {
        let (r, request) = try exchange(["status"], reply: Self.status)
        #expect(request == "status")
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("version:      0.1.0\nstate:        idle\nvolume:       6\n"))
        #expect(r.stdout.hasSuffix("clock_synced: true\nfaults:       none\n"))
    }

    /// Typed by key, never by look: last_id "12345" stays a string.
    @Test func statusAsTypedJSON() throws {
        let (r, _) = try exchange(["--json", "status"], reply: Self.status)
        #expect(r.status == 0)
        #expect(r.stdout == #"{"clock_synced":true,"durable":true,"faults":"none","last_id":"12345","muted":false,"#
            + #""output":"alsa:default","queue_depth":0,"state":"idle","uptime_s":12,"version":"0.1.0","voice":"zh-CN","volume":6}"#
            + "\n")
    }

    static let history = """
        id: T1
        seq: 12
        state: played
        amount: 12.50
        channel: alipay
        lang: zh-CN
        accepted_at: 1764415001
        updated_at: 1764415003
        plays: 1
        id: 007
        seq: 13
        state: failed
        amount: 123456.00
        channel: other
        lang: en-IN
        accepted_at: 1764415101
        updated_at: 1764415201
        plays: 0
        reason: audio device busy
        OK

        """

    @Test func historyEntries() throws {
        let (r, request) = try exchange(["history", "--limit", "5"], reply: Self.history)
        #expect(request == "history 5")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("#12  T1   played  12.50      alipay  zh-CN  "))
        #expect(lines[0].hasSuffix("  1 play"))
        #expect(lines[1].hasPrefix("#13  007  failed  123456.00  other   en-IN  "))
        #expect(lines[1].hasSuffix("  0 plays  reason: audio device busy"))

        let (j, plain) = try exchange(["--json", "history"], reply: Self.history)
        #expect(plain == "history")
        let entries = try #require(try j.json()["entries"] as? [[String: Any]])
        #expect(entries.count == 2)
        #expect(entries[1]["id"] as? String == "007")
        #expect(entries[1]["seq"] as? Int == 13)
        #expect(entries[1]["accepted_at"] as? Int == 1764415101)
        #expect(entries[1]["reason"] as? String == "audio device busy")
        #expect(entries[0]["reason"] == nil)
    }

    @Test func emptyQueue() throws {
        let (r, request) = try exchange(["queue"], reply: "OK\n")
        #expect(request == "queue")
        #expect(r.status == 0 && r.stdout == "no payments waiting\n")
        let (j, _) = try exchange(["--json", "queue"], reply: "OK\n")
        #expect(j.stdout == #"{"entries":[]}"# + "\n")
    }

    static let doctor = """
        check: audio
        status: ok
        detail: alsa default
        check: database
        status: fail
        detail: /var/lib/soundbox/soundbox.db is read-only
        hint: check the disk (dmesg)
        check: clock
        status: warn
        detail: not synchronised
        hint: enable systemd-timesyncd
        OK

        """

    @Test func doctorFailureExitsOne() throws {
        let (r, request) = try exchange(["doctor"], reply: Self.doctor)
        #expect(request == "doctor")
        #expect(r.status == 1)
        #expect(r.stdout == """
            OK   audio    alsa default
            FAIL database /var/lib/soundbox/soundbox.db is read-only
                 hint: check the disk (dmesg)
            WARN clock    not synchronised
                 hint: enable systemd-timesyncd

            """)
        let (j, _) = try exchange(["doctor", "--json"], reply: Self.doctor)
        #expect(j.status == 1)
        #expect(try j.json()["ok"] as? Bool == false)
        #expect((try j.json()["checks"] as? [[String: String]])?[1] ==
                ["check": "database", "status": "fail", "detail": "/var/lib/soundbox/soundbox.db is read-only", "hint": "check the disk (dmesg)"])

        let (ok, _) = try exchange(["--json", "doctor"], reply: "check: clock\nstatus: warn\ndetail: not synchronised\nhint: h\nOK\n")
        #expect(ok.status == 0, "a warning is not a failure")
        #expect(try ok.json()["ok"] as? Bool == true)
    }

    @Test func ackExitsOneWithItsMessage() throws {
        let ack = "ACK [50@0] {replay} no payment with id 'nope'\n"
        let (r, request) = try exchange(["replay", "nope"], reply: ack)
        #expect(request == "replay nope")
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "soundboxctl: no payment with id 'nope'\n")
        let (j, _) = try exchange(["--json", "replay"], reply: ack)
        #expect(j.status == 1)
        #expect(try j.json() as? [String: String] == ["error": "no payment with id 'nope'", "code": "ack_50"])
    }

    /// A client the daemon refuses gets an ACK instead of the greeting.
    @Test func refusedByTheDaemon() throws {
        let (r, request) = try exchange(["--json", "status"], reply: nil, greeting: "ACK [4@0] {} permission denied\n")
        #expect(request == nil)
        #expect(r.status == 1)
        #expect(try r.json() as? [String: String] == ["error": "permission denied", "code": "ack_4"])
    }

    @Test func somethingElseOnTheSocket() throws {
        let (r, _) = try exchange(["status"], reply: nil, greeting: "220 smtp.example ESMTP\n")
        #expect(r.status == 1)
        #expect(r.stderr.contains("is not soundboxd's control socket: it greeted with '220 smtp.example ESMTP'"))
    }

    @Test func hangUpMidReply() throws {
        let (r, _) = try exchange(["--json", "status"], reply: "version: 0.1.0\n")
        #expect(r.status == 1)
        #expect(try r.json()["code"] as? String == "protocol")
        #expect((try r.json()["error"] as? String)?.contains("closed the connection") == true)
    }

    /// The request is quoted as the protocol says; `rejected` exits 1, `duplicate` 0.
    @Test func say() throws {
        let (r, request) = try exchange(["say", "0.5", "--lang", "en-IN", "--id", "T1"],
                                        reply: "id: T1\nstatus: rejected\nreason: amount above payment.max_amount\nOK\n")
        #expect(request == "say 0.50 --lang en-IN --id T1")
        #expect(r.status == 1)
        #expect(r.stdout == "id:     T1\nstatus: rejected\nreason: amount above payment.max_amount\n")

        let (d, _) = try exchange(["--json", "say", "12.5", "--id", "T1"], reply: "id: T1\nstatus: duplicate\ndurable: true\nOK\n")
        #expect(d.status == 0)
        #expect(d.stdout == #"{"durable":true,"id":"T1","status":"duplicate"}"# + "\n")
    }

    @Test func configSetQuotesItsValue() throws {
        let value = "file:'/tmp/o 1.raw',raw"
        let (r, request) = try exchange(["config", "set", "audio.device", value], reply: "audio.device: \(value)\nOK\n")
        #expect(request == #"config set audio.device "file:'/tmp/o 1.raw',raw""#)
        #expect(r.status == 0 && r.stdout == "audio.device: \(value)\n")
    }

    @Test func volume() throws {
        let (r, request) = try exchange(["--json", "volume", "up"], reply: "volume: 7\nOK\n")
        #expect(request == "volume up")
        #expect(r.stdout == #"{"volume":7}"# + "\n")
        let (bad, _) = try exchange(["--json", "volume"], reply: "volume: loud\nOK\n")
        #expect(bad.status == 1)
        #expect(try bad.json() as? [String: String] == ["error": "soundboxd sent volume: 'loud', expected an integer", "code": "protocol"])
    }

    /// `wait` sends `idle S` and gives up S + 5 seconds later, by itself.
    /// The evidence: the peer never answers and saw soundboxctl hang up
    /// (had the peer's own 20 s read timeout come first, soundboxctl would
    /// report the closed connection, `protocol`, not `timeout`); and not
    /// before S + 5 s, a lower bound that load cannot break (no upper
    /// bound on elapsed time: that would measure the machine).
    @Test func waitTimesOut() throws {
        let (ok, request) = try exchange(["wait", "--timeout", "30"], reply: "queue_depth: 0\nOK\n")
        #expect(request == "idle 30")
        #expect(ok.status == 0 && ok.stdout == "queue_depth: 0\n")

        let peer = try ScriptedPeer()
        var sent: String?
        let clock = ContinuousClock(), start = clock.now
        let r = try Ctl(["--socket", peer.path, "--json", "wait", "--timeout", "1"]) {
            sent = try peer.serve(greeting: "OK SOUNDBOX 0.1.0\n", reply: nil)
        }
        let waited = clock.now - start
        #expect(sent == "idle 1")
        #expect(r.status == 1)
        #expect(try r.json()["code"] as? String == "timeout", "\(r.stdout)")
        #expect(peer.clientHungUp == true, "the client did not give up by itself")
        #expect(waited > .milliseconds(5500), "\(waited)")
    }
}

/// A scripted stand-in for soundboxd's end of the control socket: it
/// listens on a fresh path, greets one client, reads one request line and
/// answers with a canned reply (or, with none, waits for the client to give
/// up). Tests the client side only; the daemon's own tests cover the server.
final class ScriptedPeer {
    let path: String
    private let listener: Int32
    /// With no reply: whether the client hung up (true) or the peer's read
    /// timeout ended the wait (false).
    private(set) var clientHungUp: Bool?

    init() throws {
        let path = "/tmp/sbctl-\(UUID().uuidString.prefix(8)).sock"
        let socket = try FileDescriptor.unixSocket(.stream)
        let fd = socket.rawValue
        (self.path, listener) = (path, fd)
        try socket.bind(to: UnixSocketAddress(path))
        guard listen(fd, 1) == 0 else { throw Errno.current }
        Self.timeout(fd, seconds: 20)  // accept() too: a client that never comes fails the test
    }

    deinit {
        close(listener)
        unlink(path)
    }

    /// Serves one client; returns its request line, nil if it sent none.
    func serve(greeting: String, reply: String?) throws -> String? {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        defer { close(fd) }
        Self.timeout(fd, seconds: 20)
        send(fd, greeting)
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 && byte != UInt8(ascii: "\n") { received.append(byte) }
        let request = received.isEmpty ? nil : String(decoding: received, as: UTF8.self)
        if let reply {
            send(fd, reply)
        } else {
            var n = 0
            repeat { n = read(fd, &byte, 1) } while n == 1  // until the client hangs up
            clientHungUp = n == 0
        }
        return request
    }

    private func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private static func timeout(_ fd: Int32, seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
}
