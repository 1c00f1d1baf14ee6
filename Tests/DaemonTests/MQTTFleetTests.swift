// ~560 lines: the fleet's broker config as Debian runs it, with the peers and the protocol proxy its suite needs.
import Foundation
import TestSupport
import TestRig
import Testing
import MQTTBridge
import Soundbox
import SoundboxStore
#if canImport(Glibc)
import Glibc
#endif

// The broker settings for a fleet (board/mosquitto/soundbox-fleet.conf and
// soundbox.acl, docs/mqtt.md "Broker settings for a fleet") and the MQTT 5
// client (Maximum Packet Size, session takeover, 3.1.1 fallback), proved
// against a real mosquitto and the real soundboxd.

/// mosquitto run with the repository's fleet config, as Debian runs it: the
/// file goes into conf.d unchanged but for its listener's port and the
/// `/etc/mosquitto/` paths (password file, ACL, certificates), which point
/// into the test's folder. The ACL is the repository's file too.
final class FleetBroker {
    static let confFile = Build.root + "/board/mosquitto/soundbox-fleet.conf"
    static let aclFile = Build.root + "/board/mosquitto/soundbox.acl"

    let etc: String
    let certs: Certificates
    let broker: Broker
    /// user → password, made with mosquitto_passwd.
    let passwords: [String: String]
    var port: Int { broker.port }
    /// What a client needs to trust the broker (it connects to "localhost").
    var tls: MQTTClient.Options.TLS { .init(ca: certs.ca, cert: nil, key: nil) }

    /// - Parameters:
    ///   - users: logins to create.
    ///   - without: settings (by name) left out of the file.
    ///   - set: settings given another value.
    init(dir: String, users: [String], without: Set<String> = [], set: [String: String] = [:]) throws {
        etc = dir + "/etc"
        let fm = FileManager.default
        try fm.createDirectory(atPath: etc + "/certs", withIntermediateDirectories: true)
        certs = try Certificates.make(in: dir + "/pki", devices: [])
        for (from, to) in [(certs.ca, "ca.crt"), (certs.serverCert, "server.crt"), (certs.serverKey, "server.key")] {
            try fm.copyItem(atPath: from, toPath: etc + "/certs/" + to)
        }
        try fm.copyItem(atPath: Self.aclFile, toPath: etc + "/soundbox.acl")
        var passwords: [String: String] = [:]
        for (i, user) in users.enumerated() {
            let password = "pw-\(user)-" + UUID().uuidString.prefix(8)
            passwords[user] = password
            let cli = try CLIProcess(["/usr/bin/mosquitto_passwd"] + (i == 0 ? ["-c"] : []) + ["-b", etc + "/soundbox.passwd", user, password])
            guard cli.waitExit() == 0 else { throw TestFailure("mosquitto_passwd: \(cli.output)") }
        }
        self.passwords = passwords
        let template = try String(contentsOfFile: Self.confFile, encoding: .utf8)
        let settings = Self.settings(template)
        for name in without.union(set.keys) where !settings.contains(name) {
            throw TestFailure("\(Self.confFile) has no setting \(name)")
        }
        guard template.split(separator: "\n").contains("listener 8883") else {
            throw TestFailure("\(Self.confFile) has no line 'listener 8883'")
        }
        let etcPath = etc
        broker = try Broker(dir: dir + "/broker") { port in
            FleetBroker.render(template, port: port, etc: etcPath, without: without, set: set)
        }
    }

    /// The names of the settings the file sets (comments left out).
    static func settings(_ text: String) -> Set<String> {
        Set(text.split(separator: "\n").compactMap { line in
            line.hasPrefix("#") ? nil : line.split(separator: " ").first.map(String.init)
        })
    }

    static func render(_ template: String, port: Int, etc: String, without: Set<String>, set: [String: String]) -> String {
        template.split(separator: "\n", omittingEmptySubsequences: false).compactMap { raw -> String? in
            let line = String(raw)
            if line.hasPrefix("#") { return line }
            let name = line.split(separator: " ").first.map(String.init) ?? ""
            if without.contains(name) { return nil }
            if let value = set[name] { return name + " " + value }
            if line == "listener 8883" { return "listener \(port) 127.0.0.1" }
            return line.replacingOccurrences(of: "/etc/mosquitto/", with: etc + "/")
        }.joined(separator: "\n")
    }

    /// A client's login options for this broker (TLS to "localhost").
    func options(user: String, clientID: String) -> MQTTClient.Options {
        var o = MQTTClient.Options(clientID: clientID, host: "localhost", port: port)
        o.tls = tls
        o.username = user
        o.password = passwords[user]
        o.keepalive = 10
        o.reconnectMax = 2
        return o
    }
}

/// soundboxd as device shop-1 (user shop-1, TLS, password) and the backend
/// (user backend) on a `FleetBroker`.
final class FleetLink {
    let scratch = Scratch()
    let fleet: FleetBroker
    let daemon: Daemon
    let backend: Backend
    var broker: Broker { fleet.broker }

    init(users: [String] = [], without: Set<String> = [], set: [String: String] = [:]) throws {
        fleet = try FleetBroker(dir: scratch.path, users: ["shop-1", "backend"] + users, without: without, set: set)
        daemon = try Daemon(dir: scratch.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "localhost", "mqtt.port": "\(fleet.port)", "device.id": "shop-1",
            "mqtt.tls.ca": fleet.certs.ca, "mqtt.username": "shop-1", "mqtt.password": fleet.passwords["shop-1"]!,
            "mqtt.keepalive": "5", "mqtt.reconnect_max_s": "2", "mqtt.link_prompts": "false",
        ])
        backend = try Backend(port: fleet.port, device: "shop-1", tls: fleet.tls, host: "localhost",
                              username: "backend", password: fleet.passwords["backend"])
    }

    /// Starts the daemon; waits until the backend sees it online.
    func start() throws {
        try daemon.start()
        #expect(backend.waitUntil(timeout: 30) { self.backend.status?["online"] as? Bool == true }, "\(daemon.log(run: daemon.runs))")
    }

    func entries() throws -> [Entry] { try Store(path: daemon.database).history(limit: 1_000_000) }

    /// The daemon's peak resident set (VmHWM), in KiB.
    func peakRSS() -> Int? {
        guard let pid = daemon.process?.processIdentifier,
              let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        return Int(line.split(separator: " ")[1])
    }
}

/// A test-side MQTT client (an MQTTClient) that records what happens to it.
final class Peer: MQTTClientDelegate, @unchecked Sendable {
    private let cond = NSCondition()
    private var _connacks: [Int32] = []
    private var _disconnects: [Int32] = []
    private var _messages: [(topic: String, payload: String)] = []
    private var _logs: [String] = []
    private let topics: [String]
    private(set) var client: MQTTClient?

    /// Subscribes to `subscribe` (QoS 1) after every accepted CONNACK.
    init(_ options: MQTTClient.Options, subscribe: [String] = []) throws {
        topics = subscribe
        client = try MQTTClient(options, delegate: self)
    }

    func start() throws { try client?.start() }
    func stop() { client?.stop() }

    func mqttConnected(rc: Int32) {
        if rc == 0 { for t in topics { try? client?.subscribe(t, qos: 1) } }
        cond.withLock { _connacks.append(rc); cond.broadcast() }
    }
    func mqttDisconnected(rc: Int32) { cond.withLock { _disconnects.append(rc); cond.broadcast() } }
    func mqttMessage(topic: String, payload: [UInt8], retained: Bool) {
        cond.withLock { _messages.append((topic, String(decoding: payload, as: UTF8.self))); cond.broadcast() }
    }
    func mqttPublished(mid: Int32) {}
    func mqttLibraryLog(_ message: String) { cond.withLock { _logs.append(message); cond.broadcast() } }

    var connacks: [Int32] { cond.withLock { _connacks } }
    var disconnects: [Int32] { cond.withLock { _disconnects } }
    var messages: [(topic: String, payload: String)] { cond.withLock { _messages } }
    var logs: [String] { cond.withLock { _logs } }

    /// Waits (woken by every callback) until `done` holds; false on timeout.
    @discardableResult
    func waitUntil(timeout: Double = 20, _ done: () -> Bool) -> Bool {
        cond.wait(timeout: timeout, until: done)
    }
}

/// A TCP proxy in front of a broker that reads each client's CONNECT and
/// looks at its protocol level: MQTT 5 (level 5) is refused as a broker
/// that only speaks 3.1.1 would (`.connack`: a v3 CONNACK 0x20 0x02 0x00
/// 0x01 "unacceptable protocol version", then close; `.close`: close
/// without a word); anything else is forwarded to the broker, both ways.
/// `.forward` refuses nothing. `injectDisconnect(reason:)` plays a broker
/// ending every forwarded connection with an MQTT 5 DISCONNECT.
final class ProtocolProxy: @unchecked Sendable {
    enum Mode: Sendable { case forward, connack, close }

    let port: Int
    private let upstreamPort: Int
    private let mode: Mode
    private let cond = NSCondition()
    private var _levels: [UInt8] = []
    private var clients: [Int32: Int32] = [:]   // client fd → upstream fd
    private var closing = false
    private var threads: [JoinableThread] = []
    private let listenFd: Int32
    private let wake: WakePipe
    private var acceptThread: JoinableThread?

    init(upstreamPort: Int, mode: Mode) throws {
        self.upstreamPort = upstreamPort
        self.mode = mode
        (listenFd, port) = try Net.listenLoopback(backlog: 64)
        wake = try WakePipe()
        acceptThread = JoinableThread { [self] in acceptLoop() }
    }

    deinit {
        cond.withLock {
            closing = true
            for (c, u) in clients { shutdown(c, Int32(SHUT_RDWR)); shutdown(u, Int32(SHUT_RDWR)) }
        }
        wake.signal()
        acceptThread?.join()
        for t in cond.withLock({ threads }) { t.join() }
        close(listenFd)
    }

    /// The protocol level of every CONNECT seen, in order (5 = MQTT 5, 4 = 3.1.1).
    var levels: [UInt8] { cond.withLock { _levels } }

    @discardableResult
    func waitUntil(timeout: Double = 20, _ done: ([UInt8]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock()
        defer { cond.unlock() }
        while !done(_levels) {
            if !cond.wait(until: deadline) { return done(_levels) }
        }
        return true
    }

    /// Sends DISCONNECT with `reason` to every forwarded client and closes
    /// its connection (both sides); returns how many there were.
    @discardableResult
    func injectDisconnect(reason: UInt8) -> Int {
        cond.withLock {
            for (c, u) in clients {
                let packet: [UInt8] = [0xE0, 0x01, reason]
                _ = packet.withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                shutdown(c, Int32(SHUT_RDWR))
                shutdown(u, Int32(SHUT_RDWR))
            }
            return clients.count
        }
    }

    private func acceptLoop() {
        while true {
            var fds = [pollfd(fd: listenFd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.readFd, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 && errno == EINTR { continue }
            if cond.withLock({ closing }) { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listenFd, nil, nil)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            cond.withLock { threads.append(JoinableThread { [self] in serve(fd) }) }
        }
    }

    /// Reads exactly `n` bytes (blocking); nil at EOF or error.
    private static func readExactly(_ fd: Int32, _ n: Int) -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: n)
        var got = 0
        while got < n {
            let r = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, n - got, 0) }
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { return nil }
            got += r
        }
        return buf
    }

    private static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var rest = bytes
        while !rest.isEmpty {
            let w = rest.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if w < 0 && errno == EINTR { continue }
            if w <= 0 { return false }
            rest = rest.dropFirst(w)
        }
        return true
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        // The CONNECT: fixed header, remaining length (varint), body; the
        // body starts with the protocol name ("MQTT", length-prefixed) and level.
        guard let first = Self.readExactly(client, 1), first[0] >> 4 == 1 else { return }
        var header = first
        var length = 0, multiplier = 1
        while true {
            guard let b = Self.readExactly(client, 1), header.count < 5 else { return }
            header += b
            length += Int(b[0] & 0x7F) * multiplier
            multiplier *= 128
            if b[0] & 0x80 == 0 { break }
        }
        guard length >= 7, let body = Self.readExactly(client, length) else { return }
        let level = body[6]
        let closed = cond.withLock { () -> Bool in
            _levels.append(level)
            cond.broadcast()
            return closing
        }
        if closed { return }
        if level == 5 && mode != .forward {
            if mode == .connack { _ = Self.writeAll(client, [0x20, 0x02, 0x00, 0x01][...]) }
            shutdown(client, Int32(SHUT_RDWR))
            return
        }
        let upstream = Net.connectLoopback(port: upstreamPort)
        guard upstream >= 0 else { return }
        defer { close(upstream) }
        let registered = cond.withLock { () -> Bool in
            if closing { return false }
            clients[client] = upstream
            return true
        }
        guard registered else { return }
        defer { cond.withLock { clients[client] = nil } }
        guard Self.writeAll(upstream, (header + body)[...]) else { return }
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { break } }
            var ok = true
            for (i, (from, to)) in [(client, upstream), (upstream, client)].enumerated() where fds[i].revents != 0 {
                let n = buf.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                // Under the lock: an injected DISCONNECT never lands inside a forwarded packet.
                if n <= 0 || !cond.withLock({ Self.writeAll(to, buf[..<n]) }) { ok = false; break }
            }
            if !ok { break }
        }
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(upstream, Int32(SHUT_RDWR))
    }
}

/// mosquitto's version, from `mosquitto -h` ("mosquitto version 2.0.11").
let mosquittoVersion: [Int] = {
    guard let cli = try? CLIProcess([Broker.executable, "-h"]) else { return [] }
    _ = cli.waitExit()
    guard let range = cli.output.range(of: #"version [0-9.]+"#, options: .regularExpression) else { return [] }
    return cli.output[range].dropFirst("version ".count).split(separator: ".").compactMap { Int($0) }
}()

/// What a session takeover looks like to the old connection (DESIGN §2):
/// mosquitto sends DISCONNECT 142 to MQTT 5 clients since 2.0.15; before
/// (Debian 12's 2.0.11) it just closes: libmosquitto reports rc 7.
var takeoverRC: Int32 { mosquittoVersion.lexicographicallyPrecedes([2, 0, 15]) ? 7 : 142 }

@Suite struct MQTTFleetTests {
    /// docs/mqtt.md shows the fleet file's settings: the same, in order.
    @Test func docsShowTheFleetFile() throws {
        let doc = try String(contentsOfFile: Build.root + "/docs/mqtt.md", encoding: .utf8)
        let section = try #require(doc.range(of: "## Broker settings for a fleet")).upperBound
        let open = try #require(doc.range(of: "```\n", range: section..<doc.endIndex))
        let close = try #require(doc.range(of: "```", range: open.upperBound..<doc.endIndex))
        let shown = doc[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
        let file = try String(contentsOfFile: FleetBroker.confFile, encoding: .utf8)
        let settings = file.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(shown == settings)
    }

    /// The fleet config binds the client id to the login: a thief with its
    /// own valid login asking for client id "shop-1", again and again,
    /// never disconnects the device, and reads none of its messages; the
    /// device plays all 20 payments.
    @Test func aThiefCannotTakeTheDevicesSession() throws {
        let link = try FleetLink(users: ["thief"])
        try link.start()
        let ids = (1...20).map { "TH\($0)" }
        var thieves: [Peer] = []
        for (i, id) in ids.enumerated() {
            let thief = try Peer(link.fleet.options(user: "thief", clientID: "shop-1"),
                                 subscribe: ["soundbox/v1/shop-1/#", "soundbox/v1/thief/payment"])
            try thief.start()
            #expect(thief.waitUntil { thief.connacks.contains(0) }, "the thief could log in: \(thief.connacks) \(thief.logs)")
            try link.backend.pay(id: id, amount: "1.\(i + 10)")
            // The thief's own topic, after the payment: once the thief has
            // this, it would have had the payment had the broker let it.
            // (Re-sent each second until it arrives: the thief's first
            // SUBSCRIBE may land after the first one.)
            var seen = false
            for n in 1...30 where !seen {
                try link.backend.publish("soundbox/v1/thief/payment", "sentinel-\(i)-\(n)")
                seen = thief.waitUntil(timeout: 1) { thief.messages.contains { $0.payload.hasPrefix("sentinel-\(i)-") } }
            }
            #expect(seen, "the thief was subscribed while the payment went out")
            thief.stop()
            thieves.append(thief)
        }
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 60))
        let stolen = thieves.flatMap { $0.messages.filter { $0.topic.hasPrefix("soundbox/v1/shop-1/") } }
        #expect(stolen.isEmpty, "the thief read \(stolen)")
        let log = link.broker.log
        #expect(log.components(separatedBy: "as thief (p5").count - 1 >= 20, "the thief's logins, as client id 'thief'")
        #expect(!log.contains("Client shop-1 already connected"))
        #expect(log.contains("as shop-1 (p5, c0"), "the device on MQTT 5, clean start off")
        for t in thieves { t.stop() }
        #expect(link.daemon.stop().0 == 0)
        #expect(!link.daemon.log(run: 1).contains("mqtt: disconnected"), "the device was never disconnected")
        let entries = try link.entries()
        #expect(entries.map(\.payment.id).sorted() == ids.sorted())
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
    }

    /// The control for the test above: the same file without
    /// `use_username_as_clientid` lets the thief kick the device off (and
    /// the device sees the takeover as `takeoverRC`).
    @Test func withoutClientIDBindingTheThiefTakesTheSessionOver() throws {
        let link = try FleetLink(users: ["thief"], without: ["use_username_as_clientid"])
        try link.start()
        let thief = try Peer(link.fleet.options(user: "thief", clientID: "shop-1"))
        try thief.start()
        #expect(thief.waitUntil { thief.connacks.contains(0) })
        try link.daemon.until("status", timeout: 100) { _ in link.daemon.log(run: 1).contains("mqtt: disconnected") }
        thief.stop()
        #expect(link.broker.waitForLog("Client shop-1 already connected, closing old connection."))
        #expect(link.daemon.log(run: 1).contains("mqtt: disconnected rc=\(takeoverRC)"), "\(link.daemon.log(run: 1))")
        // The device takes its session back and goes on. What was published
        // while the thief's login held the session was dropped (the ACL
        // keeps it from the thief): only the backend's re-sending brings it.
        #expect(link.backend.payUntilAcknowledged(["BACK"], amount: "2"), "\(link.daemon.log(run: 1))\n\(link.broker.log)")
        #expect(link.daemon.stop().0 == 0)
    }

    /// `message_size_limit`: the broker drops payments over 16 KiB (the
    /// device never sees them; 25 of them, more than the 20 that would
    /// stall the device were it left to its Maximum Packet Size); one over
    /// the device's 4 KiB but within the broker's limit is rejected with a
    /// receipt; the good one after them is played.
    @Test func aMessageOverTheBrokersLimitNeverReachesTheDevice() throws {
        let link = try FleetLink()
        try link.start()
        let pad = { (n: Int) in String(repeating: "x", count: n) }
        for _ in 0..<25 { try link.backend.pay(#"{"id":"BIG","amount":"1","pad":""# + pad(20_000) + #""}"#) }
        try link.backend.pay(#"{"id":"MID","amount":"1","pad":""# + pad(8_000) + #""}"#)
        try link.backend.pay(id: "GOOD", amount: "3.30")
        #expect(link.backend.waitForReceipts(["GOOD"], ["played"], timeout: 60))
        // MID is too big for the device to read its id: a `rejected` receipt without one.
        #expect(link.backend.waitUntil(timeout: 30) { link.backend.count("rejected") == 1 })
        // In order: had BIG reached the device, its receipt would have come before GOOD's.
        #expect(link.backend.receipts(for: "BIG").isEmpty && link.backend.receipts(for: "MID").isEmpty)
        #expect(link.backend.count("rejected") == 1)
        #expect(link.broker.log.components(separatedBy: "Dropped too large PUBLISH from backend").count - 1 == 25)
        #expect(link.daemon.stop().0 == 0)
        #expect(link.daemon.log(run: 1).components(separatedBy: "ingest: rejected").count - 1 == 1)
    }

    /// MQTT 5 Maximum Packet Size: with no size limit at the broker at all,
    /// a 4 MiB payment is still never sent to the device (mosquitto drops it
    /// for that client): no receipt for it, no memory for it, and the good
    /// payment after it is played. (One such drop; 20 would stall the
    /// device: see `maximumPacketSize`.)
    @Test func maximumPacketSizeKeepsAHugeMessageAwayWithoutTheBrokersLimit() throws {
        let link = try FleetLink(without: ["message_size_limit", "max_packet_size"])
        try link.start()
        try link.backend.pay(id: "WARM", amount: "1")
        #expect(link.backend.waitForReceipts(["WARM"], ["played"], timeout: 60))
        let before = try #require(link.peakRSS())
        try link.backend.pay(#"{"id":"HUGE","amount":"1","pad":""# + String(repeating: "x", count: 4 << 20) + #""}"#)
        try link.backend.pay(id: "GOOD", amount: "4.40")
        #expect(link.backend.waitForReceipts(["GOOD"], ["played"], timeout: 60))
        let after = try #require(link.peakRSS())
        #expect(link.backend.receipts(for: "HUGE").isEmpty)
        #expect(link.broker.waitForLog("Dropping too large outgoing PUBLISH for shop-1"))
        // Reading it would cost at least its 4 MiB (libmosquitto's buffer).
        #expect(after - before < 2048, "VmHWM grew from \(before) to \(after) KiB")
        #expect(link.daemon.stop().0 == 0)
        #expect(!link.daemon.log(run: 1).contains("ingest: rejected"))
    }

    /// 2,000 payments published as fast as the backend can to an online
    /// device: the fleet's queue limits hold them all; each is played once,
    /// in publish order.
    @Test func aBurstOf2000IsPlayedOnceInOrder() throws {
        let link = try FleetLink()
        try link.start()
        let ids = (1...2000).map { String(format: "BU%04d", $0) }
        for id in ids { try link.backend.pay(id: id, amount: "5.55") }
        #expect(link.backend.waitForReceipts(ids, ["played"], timeout: 300), "played \(link.backend.count("played")) of 2000")
        #expect(!link.broker.log.contains("Outgoing messages are being dropped"))
        for id in ids { #expect(link.backend.receipts(for: id).filter { $0 == "played" }.count == 1, "\(id)") }
        #expect(link.daemon.stop().0 == 0)
        let entries = try link.entries().sorted { $0.seq < $1.seq }
        #expect(entries.map(\.payment.id) == ids)
        #expect(entries.allSatisfy { $0.state == .played && $0.plays == 1 })
    }
}

@Suite struct MQTTProtocolTests {
    /// A broker that refuses MQTT 5 (as a 3.1.1-only broker does: a v3
    /// CONNACK "unacceptable protocol version", or closing the connection):
    /// the daemon falls back to 3.1.1, says so in its log, and plays.
    @Test(arguments: [ProtocolProxy.Mode.connack, .close])
    func fallsBackToMQTT311(mode: ProtocolProxy.Mode) throws {
        var proxy: ProtocolProxy?
        let link = try Link { broker in
            let p = try ProtocolProxy(upstreamPort: broker.port, mode: mode)
            proxy = p
            return p.port
        }
        let p = try #require(proxy)
        try link.start()
        try link.backend.pay(id: "V311", amount: "3.11")
        #expect(link.backend.waitForReceipts(["V311"], ["played"], timeout: 60))
        #expect(p.levels.first == 5 && p.levels.last == 4, "\(p.levels)")
        let log = link.daemon.log(run: 1)
        #expect(log.contains("using MQTT 3.1.1 from now on"), "\(log)")
        #expect(link.broker.log.contains("as shop-1 (p2, c0"), "3.1.1 (mosquitto logs it as p2), clean session off")
        if mode == .connack {
            // Refused once, at once 3.1.1: no refusal or disconnect reported.
            #expect(p.levels == [5, 4])
            #expect(!log.contains("mqtt: disconnected") && !log.contains("connect_refused"), "\(log)")
        }
        // After the fallback the device stays on 3.1.1: reconnects too.
        _ = link.daemon.stop()
        #expect(p.levels.filter { $0 == 5 }.count == (mode == .connack ? 1 : 2))
    }

    /// The client itself: protocol version, properties, and what a takeover
    /// looks like (an MQTT 5 DISCONNECT 142; mosquitto's own takeover).
    @Test func takeoverIsReportedWithItsReason() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path + "/broker")
        let proxy = try ProtocolProxy(upstreamPort: broker.port, mode: .forward)
        var o = MQTTClient.Options(clientID: "shop-1", host: "127.0.0.1", port: proxy.port)
        o.keepalive = 5
        o.reconnectMax = 2
        let device = try Peer(o)
        try device.start()
        #expect(device.waitUntil { device.connacks == [0] })
        #expect(device.client?.protocolVersion == 5)
        #expect(proxy.injectDisconnect(reason: 142) == 1)
        #expect(device.waitUntil { !device.disconnects.isEmpty })
        #expect(device.disconnects.first == 142)
        #expect(MQTTClient.isSessionTakeover(rc: device.disconnects[0]))
        #expect(!MQTTClient.isSessionTakeover(rc: 7) && !MQTTClient.isSessionTakeover(rc: 0))
        #expect(MQTTClient.disconnectText(rc: 142) == "Session taken over")
        // It reconnects by itself (a DISCONNECT from the broker is not a stop()).
        #expect(device.waitUntil { device.connacks == [0, 0] })
        device.stop()

        // mosquitto's own takeover, directly (no proxy).
        var d = MQTTClient.Options(clientID: "shop-2", host: "127.0.0.1", port: broker.port)
        d.reconnectMax = 2
        let first = try Peer(d)
        try first.start()
        #expect(first.waitUntil { first.connacks == [0] })
        let second = try Peer(d)
        try second.start()
        #expect(first.waitUntil { !first.disconnects.isEmpty })
        first.stop()
        #expect(first.disconnects.first == takeoverRC, "mosquitto \(mosquittoVersion)")
        #expect(broker.log.contains("as shop-2 (p5, c0"), "MQTT 5, clean start off")
        second.stop()
    }
}
