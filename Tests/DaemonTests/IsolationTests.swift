import Foundation
import Testing
import Soundbox
import SoundboxStore
import TestSupport
import TestRig

/// What must stay apart: requests never starve payments; one shutdown deadline; one daemon per
/// state folder; a stolen session is noticed; logs cannot be forged
/// (issue "Hardening", items 5, 7, 10, 17).
@Suite struct IsolationTests {
    /// 20 replays asked for at once, then a payment: the payment is spoken
    /// after at most the one replay already speaking; the queue of requests
    /// is bounded (the rest are refused, said so); asking for the same
    /// replay again joins the one queued.
    @Test func replaysNeverHoldAPaymentBackMoreThanOne() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start()
        for i in 1...20 { _ = try daemon.request("say", "1", "--id", "P\(i)") }
        #expect(try daemon.request("idle", "30").ack == nil)
        _ = try daemon.request("config", "set", "audio.null_realtime", "true")   // now speech takes its time
        var refused = 0
        for i in 1...20 {
            let r = try daemon.request("replay", "P\(i)")
            if r.ack != nil { refused += 1; #expect(r.ack?.message.contains("too many requests") == true) }
        }
        #expect(try daemon.request("replay", "P5").ack == nil, "joins the queued replay of P5")
        #expect(refused >= 1 && refused <= 4, "at most 16 wait, one speaks: \(refused) refused")
        _ = try daemon.request("say", "2", "--id", "NEW")
        try daemon.until("status", timeout: 60) { _ in LogEvents(daemon.log(run: 1)).ids("played").contains("NEW") }
        _ = try daemon.request("config", "set", "audio.null_realtime", "false")
        #expect(try daemon.request("idle", "60").ack == nil)
        #expect(daemon.stop().0 == 0)

        let log = logLines(daemon.log(run: 1))
        let queued = try #require(log.firstIndex { $0.event == "queued" && $0["id"] == "NEW" })
        let speaking = try #require(log.firstIndex { $0.event == "speaking" && $0["id"] == "NEW" })
        let replaysBetween = log[queued..<speaking].filter { $0.event == "replaying" }.count
        #expect(replaysBetween <= 1, "NEW waited behind \(replaysBetween) replays")
        #expect(log.filter { $0.event == "replaying" && $0["id"] == "P5" }.count == 1)
        #expect(log.contains { $0.event == "request_joined" && $0["request"] == "replay:P5" })
        #expect(log.filter { $0.event == "replaying" }.count == 20 - refused)
    }

    /// With a synchronised clock and a short stale limit: a payment that
    /// arrives while a long replay speaks is not expired for the wait.
    @Test func aPaymentHeldBackByAReplayIsNotExpiredForIt() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: ["queue.stale_after_s": "2"])
        try daemon.start(extraEnv: ["SOUNDBOX_TEST_CLOCK": "synced"])
        _ = try daemon.request("say", "12345678.90", "--id", "LONG")   // about 6 s of speech
        #expect(try daemon.request("idle", "30").ack == nil)
        _ = try daemon.request("config", "set", "audio.null_realtime", "true")
        #expect(try daemon.request("replay", "LONG").ack == nil)
        try daemon.until("status") { $0["state"] == "speaking" }
        _ = try daemon.request("say", "1", "--id", "HELD")
        #expect(try daemon.request("idle", "60").ack == nil)
        #expect(daemon.stop().0 == 0)
        let held = try #require(try Store(path: daemon.database).entry(id: "HELD"))
        #expect(held.state == .played, "\(held.reason ?? "")")
        let log = logLines(daemon.log(run: 1))
        let waited = try #require(log.firstIndex { $0.event == "replaying" }).distance(to: try #require(log.firstIndex { $0.event == "speaking" && $0["id"] == "HELD" }))
        #expect(waited > 0, "HELD did wait behind the replay")
    }

    /// One deadline for the whole shutdown, services stopped in reverse
    /// order of start — also when the broker does not answer (a listener
    /// whose queue is full: the connect hangs).
    @Test func stopKeepsOneDeadlineWhenTheBrokerDoesNotAnswer() throws {
        let hole = try SilentListener()
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "127.0.0.1", "mqtt.port": "\(hole.port)", "device.id": "shop-9",
        ])
        try daemon.start()
        try daemon.until("status") { _ in daemon.log(run: 1).contains("mqtt: connecting") }
        _ = try daemon.request("say", "1", "--id", "S1")
        #expect(try daemon.request("idle", "30").ack == nil)
        let (status, seconds) = daemon.stop()
        #expect(status == 0)
        #expect(seconds < 4, "the old shutdown joined the MQTT thread for 5 s first")
        let log = logLines(daemon.log(run: 1))
        let stopped = try #require(log.last { $0.event == "stopped" })
        #expect(Int(stopped["stop_ms"] ?? "") ?? 99_999 <= 2_200, "\(stopped)")
        let order = log.filter { $0.event == "service_stopped" || $0.event == "service_did_not_stop" }.compactMap { $0["service"] }
        #expect(order == ["control", "update", "mqtt", "scheduler"], "reverse order of start: \(order)")
    }

    /// A second soundboxd with the same state folder exits before it opens
    /// the database or contacts the broker (it would take the first one's
    /// MQTT session).
    @Test func aSecondDaemonOnTheSameStateFolderFailsBeforeConnecting() throws {
        let link = try Link()
        try link.start()
        let other = Scratch()
        let second = try Daemon(dir: other.path, config: [
            "state.dir": link.daemon.dir + "/state", "mqtt.enabled": "true", "mqtt.host": "127.0.0.1",
            "mqtt.port": "\(link.broker.port)", "device.id": link.device,
        ])
        #expect(throws: TestFailure.self) { try second.start() }
        #expect(second.log(run: 1).contains("another soundboxd is already running with state.dir"))
        #expect(link.broker.log.components(separatedBy: " as \(link.device) ").count - 1 == 1, "one connection as \(link.device)")
        try link.backend.pay(id: "STILL", amount: "1")
        #expect(link.backend.waitForReceipts(["STILL"], ["played"]))
        #expect(link.daemon.stop().0 == 0)
    }

    /// Two boxes with the same device.id (the default is the hostname):
    /// they take each other's session (mosquitto before 2.0.15 just closes
    /// the older link). Issue 18 item 10: both notice — also the one kicked
    /// only after the other's reconnect wait, which logged `takeover=no`
    /// every time — report it in status and doctor, and neither speaks
    /// 网络已断开 / 网络已连接 at the flips.
    @Test func twoBoxesWithTheSameDeviceIDBothReportATakeoverAndStayQuiet() throws {
        // Reconnect waits up to 11 s: a box held off is down longer than
        // the 10 s after which a loss is spoken, unless a conflict is suspected.
        let settings = ["mqtt.keepalive": "5", "mqtt.reconnect_max_s": "11", "mqtt.link_prompts": "true"]
        let link = try Link(config: settings)
        try link.start()
        let other = Scratch()
        let twin = try Daemon(dir: other.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "127.0.0.1", "mqtt.port": "\(link.broker.port)", "device.id": link.device,
        ].merging(settings) { $1 })
        try twin.start()
        let boxes = [link.daemon, twin]
        func takenOver(_ d: Daemon) -> Bool { ((try? d.request("status"))?["faults"] ?? "").contains("takeover") }
        func connects(_ d: Daemon) -> Int { logLines(d.log(run: 1)).filter { $0.subsystem == "mqtt" && $0.event == "connected" }.count }
        var deadline = Date().addingTimeInterval(40)
        while Date() < deadline && !boxes.allSatisfy(takenOver) { usleep(200_000) }
        for (i, box) in boxes.enumerated() {
            #expect(takenOver(box), "box \(i)")
            #expect(try box.request("status")["mqtt"] == "taken over", "box \(i)")
            let doctor = try box.request("doctor").pairs.records(startingWith: "check")
            let broker = try #require(doctor.first { $0.first?.value == "broker" })
            #expect(broker.first { $0.key == "status" }?.value == "fail")
            #expect(broker.first { $0.key == "hint" }?.value.contains("another box uses this device id") == true, "\(broker)")
        }
        // A box is held off (down 11 s) only once it suspects the conflict,
        // and it is kicked only when the other comes back: the box that
        // suspected first has been through a hold-off, the other has just
        // begun one. Once that one is back, both have been down past 10 s
        // while suspecting: silent.
        let before = boxes.map(connects).reduce(0, +)
        deadline = Date().addingTimeInterval(30)
        while Date() < deadline && boxes.map(connects).reduce(0, +) == before { usleep(200_000) }
        #expect(boxes.map(connects).reduce(0, +) > before, "the box held off came back")
        for (i, box) in boxes.enumerated() { #expect(takenOver(box), "box \(i) still reports the conflict") }
        #expect(twin.stop().0 == 0)
        #expect(link.daemon.stop().0 == 0)
        for (i, box) in boxes.enumerated() {
            let log = box.log(run: 1)
            #expect(logLines(log).contains { $0.event == "session_taken_over" }, "box \(i)")
            #expect(!log.contains("prompt name=network_"), "box \(i) spoke a link prompt:\n\(log)")
        }
    }

    /// Control bytes and quotes from payloads never reach the log raw, and
    /// every line reads back to the values written.
    @Test func payloadsCannotForgeLogLines() throws {
        let link = try Link()
        try link.start()
        try link.backend.pay(#"{"id":"Q\"1","amount":"1.00"}"#)
        try link.backend.pay(#"{"id":"Q'1","amount":"1.00"}"#)
        try link.backend.publish(link.backend.topics.cmd, #"{"cmd":"\u001b[2J\u0000<3>daemon: stopped\nx"}"#)
        try link.backend.pay(#"{"id":"X1","amount":"1.00","lang":"\u001b[31m"}"#)
        #expect(link.backend.waitForReceipts(["Q\"1", "Q'1"], ["played"]))
        #expect(link.backend.waitForReceipts(["X1"], ["rejected"]))
        #expect(link.daemon.stop().0 == 0)
        let raw = try Data(contentsOf: URL(fileURLWithPath: link.daemon.logPath))
        #expect(!raw.contains { $0 < 0x20 && $0 != 0x0A }, "no control byte but the line ends")
        let text = String(decoding: raw, as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.allSatisfy { LogLine.parse($0) != nil }, "every line is one well-formed line")
        let log = logLines(text)
        #expect(log.filter { $0.event == "played" }.compactMap { $0["id"] } == ["Q\"1", "Q'1"])
        let cmd = try #require(log.first { $0.event == "cmd_rejected" })
        #expect(cmd["reason"] == "unknown cmd '\u{1B}[2J\u{0}<3>daemon: stopped\nx'; known: replay, say, summary, test, update")
        #expect(!log.contains { $0.subsystem == "daemon" && $0.event == "stopped" && $0.fields.isEmpty })
    }
}

/// A TCP listener that never answers: its accept queue is full, so a
/// connect to it hangs (SYNs are dropped), like a broker behind a dead link.
final class SilentListener {
    let port: Int
    private let fd: Int32
    private var fillers: [Int32] = []

    init() throws {
        (fd, port) = try Net.listenLoopback(backlog: 0)
        // Fill the queue (a backlog of 0 holds one connection).
        for _ in 0..<2 {
            let c = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var to = Net.loopback(port: port)
            _ = Net.withSockaddr(&to) { connect(c, $0, $1) }
            fillers.append(c)
        }
    }
    deinit { for c in fillers { close(c) }; close(fd) }
}
