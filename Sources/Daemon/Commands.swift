import Glibc
import Soundbox
import SoundboxAudio
import SoundboxStore
import Synchronization

/// The running daemon's parts, as the control commands see them.
struct Context: Sendable {
    let settings: Settings
    let store: Store?
    let storeError: String?
    let backlog: Backlog
    let ingest: Ingest
    let scheduler: Scheduler
    let voiceReport: String
    let voiceOK: Bool
    let started: Double
    let environment: [String: String]
    /// The broker link's state, kept by the uplink.
    let link: Shared<LinkStatus>
    /// GPIO lines that could not be had, for doctor (empty: all fine).
    let gpio: Shared<[String]>

    /// Something the backend sees changed (settings, volume).
    func changed() { ingest.outbox.notify() }
}

/// The command table (docs/control-protocol.md): name, argument counts,
/// handler. A handler returns the reply's pairs or throws an ACK.
struct Commands: Sendable {
    typealias Handler = @Sendable (Context, [String]) throws(ControlAck) -> ControlReply
    struct Command: Sendable {
        let name: String
        let args: ClosedRange<Int>
        let handler: Handler
    }

    let context: Context
    static let table: [Command] = [
        Command(name: "ping", args: 0...0) { _, _ in ControlReply() },
        Command(name: "status", args: 0...0) { c, _ in status(c) },
        Command(name: "queue", args: 0...0) { c, _ throws(ControlAck) in try queue(c) },
        Command(name: "history", args: 0...1) { c, a throws(ControlAck) in try history(c, a) },
        Command(name: "replay", args: 0...1) { c, a throws(ControlAck) in try replay(c, a) },
        Command(name: "say", args: 1...7) { c, a throws(ControlAck) in try say(c, a) },
        Command(name: "volume", args: 0...1) { c, a throws(ControlAck) in try volume(c, a) },
        Command(name: "config", args: 1...3) { c, a throws(ControlAck) in try config(c, a) },
        Command(name: "test-audio", args: 0...0) { c, _ throws(ControlAck) in try testAudio(c) },
        Command(name: "doctor", args: 0...0) { c, _ in Doctor.run(c) },
        Command(name: "idle", args: 0...1) { c, a throws(ControlAck) in try idle(c, a) },
    ]

    /// Runs one request line; returns the reply text (pairs + OK, or ACK).
    func execute(_ line: String) -> String {
        var name = ""
        do throws(ControlAck) {
            let args = try ControlProtocol.tokenize(line)
            guard let first = args.first else { throw ControlAck(.unknown, command: "", "empty request") }
            name = first
            guard let command = Self.table.first(where: { $0.name == first }) else {
                throw ControlAck(.unknown, command: first, "unknown command '\(first)'")
            }
            let rest = Array(args.dropFirst())
            guard command.args.contains(rest.count) else {
                throw ControlAck(.arg, command: first, "wrong number of arguments for '\(first)'")
            }
            return try command.handler(context, rest).text
        } catch {
            var ack = error
            if ack.command.isEmpty { ack.command = name }
            return ack.line
        }
    }

    // MARK: - Handlers

    static func status(_ c: Context) -> ControlReply { StatusReport.make(c).reply }

    static func add(_ e: Entry, to r: inout ControlReply, full: Bool) {
        r.add("id", e.payment.id)
        r.add("seq", e.seq)
        r.add("state", e.state.rawValue)
        r.add("amount", e.payment.amount.description)
        r.add("channel", e.payment.channel.rawValue)
        if let lang = e.payment.lang { r.add("lang", lang) }
        r.add("accepted_at", e.acceptedAt / 1000)
        if full {
            r.add("updated_at", e.updatedAt / 1000)
            r.add("plays", e.plays)
            if let reason = e.reason { r.add("reason", reason) }
        }
    }

    static func store(_ c: Context, _ command: String) throws(ControlAck) -> Store {
        guard let s = c.store else { throw ControlAck(.system, command: command, "database unavailable: \(c.storeError ?? "unknown")") }
        return s
    }

    static func queue(_ c: Context) throws(ControlAck) -> ControlReply {
        var r = ControlReply()
        let s = try store(c, "queue")
        do {
            for e in try s.pending() { add(e, to: &r, full: false) }
        } catch { throw ControlAck(.system, command: "queue", error.description) }
        for m in c.backlog.state.withLock({ $0.payments }) {
            r.add("id", m.payment.id); r.add("seq", 0); r.add("state", "queued")
            r.add("amount", m.payment.amount.description); r.add("channel", m.payment.channel.rawValue)
            if let lang = m.payment.lang { r.add("lang", lang) }
            r.add("accepted_at", m.acceptedAt / 1000)
        }
        return r
    }

    static func history(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let limit = a.first.map { Int($0) } ?? 20
        guard let limit, (1...1000).contains(limit) else { throw ControlAck(.arg, command: "history", "LIMIT must be 1-1000") }
        var r = ControlReply()
        let s = try store(c, "history")
        do {
            for e in try s.history(limit: limit) { add(e, to: &r, full: true) }
        } catch { throw ControlAck(.system, command: "history", error.description) }
        return r
    }

    static func replay(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let s = try store(c, "replay")
        let found: Entry?
        do {
            if let id = a.first { found = try s.entry(id: id) } else { found = try s.history(limit: 1).first }
        } catch {
            throw ControlAck(.system, command: "replay", error.description)
        }
        guard let entry = found else {
            throw ControlAck(.noExist, command: "replay", a.first.map { "no payment with id '\($0)'" } ?? "no payment yet")
        }
        c.scheduler.submit(UserJob(.replay(entry.payment)))
        var r = ControlReply()
        r.add("id", entry.payment.id)
        r.add("status", "queued")
        return r
    }

    static func say(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var options: [String: String] = [:]
        var i = 1
        while i < a.count {
            guard ["--lang", "--channel", "--id"].contains(a[i]), i + 1 < a.count else {
                throw ControlAck(.arg, command: "say", "usage: say AMOUNT [--lang L] [--channel C] [--id ID]")
            }
            options[a[i]] = a[i + 1]
            i += 2
        }
        let amount: Amount
        do { amount = try Amount.parse(a[0], max: .wordsMax) } catch {
            throw ControlAck(.arg, command: "say", "'\(a[0])': \(error)")
        }
        let id = options["--id"] ?? "say-\(SystemClock.nowMs())"
        let payment = Payment(id: id, amount: amount, channel: Channel(name: options["--channel"]),
                              ts: SystemClock.nowMs() / 1000, lang: options["--lang"])
        let result = c.ingest.accept(payment)
        var r = ControlReply()
        r.add("id", id)
        r.add("status", result.status.rawValue)
        if case .rejected(let reason) = result { r.add("reason", reason) }
        if case .queued(let durable) = result { r.add("durable", durable) }
        return r
    }

    static func volume(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var level = c.settings.current.integer(.audioVolume)
        switch a.first {
        case nil: break
        case "up": level = min(10, level + 1)
        case "down": level = max(0, level - 1)
        case let n?:
            guard let v = Int(n), Volume.range.contains(v) else { throw ControlAck(.arg, command: "volume", "volume must be 0-10, up or down") }
            level = v
        }
        if a.first != nil {
            do { _ = try c.settings.set(["audio.volume": "\(level)"]) } catch {
                throw ControlAck(.system, command: "volume", error.description)
            }
            c.changed()
        }
        var r = ControlReply()
        r.add("volume", level)
        return r
    }

    static func config(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var r = ControlReply()
        switch (a[0], a.count) {
        case ("get", 1):
            for (k, v) in c.settings.current.effective { r.add(k.name, v) }
        case ("get", 2):
            guard let key = ConfigKey.named(a[1]) else { throw ControlAck(.arg, command: "config", ConfigError.unknownKey(a[1]).description) }
            r.add(key.name, c.settings.current.shown(key))
        case ("set", 3):
            do {
                let now = try c.settings.set([a[1]: a[2]])
                r.add(a[1], now.shown(ConfigKey.named(a[1])!))
                c.changed()
            } catch { throw ControlAck(.arg, command: "config", error.description) }
        default:
            throw ControlAck(.arg, command: "config", "usage: config get [KEY] | config set KEY VALUE")
        }
        return r
    }

    static func testAudio(_ c: Context) throws(ControlAck) -> ControlReply {
        let job = UserJob(.test)
        c.scheduler.submit(job)
        guard let result = job.wait(timeout: 120) else { throw ControlAck(.system, command: "test-audio", "timed out") }
        switch result {
        case .success(let ms):
            var r = ControlReply()
            r.add("output", OutputName.of(c.settings.current))
            r.add("duration_ms", ms)
            return r
        case .failure(let e):
            throw ControlAck(.system, command: "test-audio", e.description)
        }
    }

    static func idle(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let timeout = a.first.map { Double($0) } ?? 60
        guard let timeout, timeout >= 0, timeout <= 86400 else { throw ControlAck(.arg, command: "idle", "TIMEOUT_S must be 0-86400") }
        guard c.scheduler.wake.waitIdle(timeout: timeout) else {
            throw ControlAck(.system, command: "idle", "still busy after \(Int(timeout)) s")
        }
        var r = ControlReply()
        r.add("queue_depth", 0)
        return r
    }
}

enum OutputName {
    /// "alsa:default", "wav:/tmp/x.wav", "null".
    static func of(_ config: Config) -> String {
        switch config[.audioOutput] {
        case "wav": "wav:" + config[.audioWavFile]
        case "null": "null"
        default: "alsa:" + config[.audioDevice]
        }
    }
}

/// The device's state, for `status` on the socket and the retained MQTT
/// status topic (DESIGN §2).
struct StatusReport {
    var speaking: Bool
    var volume: Int
    var muted: Bool
    var queueDepth: Int
    var voice: String
    var lastID: String
    var uptime: Int
    var output: String
    var durable: Bool
    var clockSynced: Bool
    var faults: [String]
    /// Receipts not yet acknowledged by the broker (outbox and memory).
    var receiptsPending: Int

    static func make(_ c: Context) -> StatusReport {
        let config = c.settings.current
        let s = c.scheduler.status.withLock { $0 }
        let (memory, storageFault, memoryReceipts) = c.backlog.state.withLock { ($0.payments.count, $0.storageFault, $0.receipts.count) }
        return StatusReport(
            speaking: s.speaking, volume: config.integer(.audioVolume), muted: c.settings.muted,
            queueDepth: ((try? c.store?.pendingCount()) ?? 0) + memory, voice: config[.voiceLang], lastID: s.lastID ?? "",
            uptime: Int(SystemClock.monotonic() - c.started), output: OutputName.of(config),
            durable: c.store != nil && storageFault == nil && memory == 0,
            clockSynced: SystemClock.isSynchronized(environment: c.environment), faults: faults(c),
            receiptsPending: ((try? c.store?.outboxCount()) ?? 0) + memoryReceipts)
    }

    /// What is broken now: `storage`, `audio`, `voice` (no database work:
    /// the LED asks on every turn of the panel's loop).
    static func faults(_ c: Context) -> [String] {
        var faults: [String] = []
        if c.store == nil || c.backlog.state.withLock({ $0.storageFault }) != nil { faults.append("storage") }
        if c.scheduler.status.withLock({ $0.audioFault }) != nil { faults.append("audio") }
        if !c.voiceOK { faults.append("voice") }
        return faults
    }

    var reply: ControlReply {
        var r = ControlReply()
        r.add("version", soundboxVersion)
        r.add("state", speaking ? "speaking" : "idle")
        r.add("volume", volume)
        r.add("muted", muted)
        r.add("queue_depth", queueDepth)
        r.add("voice", voice)
        r.add("last_id", lastID)
        r.add("uptime_s", uptime)
        r.add("output", output)
        r.add("durable", durable)
        r.add("clock_synced", clockSynced)
        r.add("faults", faults.isEmpty ? "none" : faults.joined(separator: ","))
        r.add("receipts_pending", receiptsPending)
        return r
    }

    /// {"online":true,"version":"0.1.0","volume":6,...}; without uptime for
    /// change detection.
    func json(uptime: Bool) -> String {
        var f = [#""online":true"#, #""version":"# + JSONText.quote(soundboxVersion), #""volume":\#(volume)"#,
                 #""muted":\#(muted)"#, #""queue_depth":\#(queueDepth)"#, #""voice":"# + JSONText.quote(voice),
                 #""last_id":"# + JSONText.quote(lastID), #""durable":\#(durable)"#,
                 #""faults":["# + faults.map(JSONText.quote).joined(separator: ",") + "]"]
        if uptime { f.append(#""uptime_s":\#(self.uptime)"#) }
        return "{" + f.joined(separator: ",") + "}"
    }
}

/// A value shared between threads.
final class Shared<T: Sendable>: Sendable {
    private let state: Mutex<T>
    init(_ value: T) { state = Mutex(value) }
    func withLock<R>(_ body: (inout T) -> R) -> R { state.withLock { body(&$0) } }
}

struct LinkStatus: Sendable {
    var enabled = false
    var connected = false
    var endpoint = ""
    /// The last two different problems, most recent last ("certificate
    /// verify failed; connect to ... failed: A TLS error occurred").
    var lastError: String?

    mutating func noteError(_ message: String) {
        guard let last = lastError?.split(separator: "; ", omittingEmptySubsequences: false).last, last != message else {
            if lastError == nil { lastError = message }
            return
        }
        lastError = String(last) + "; " + message
    }
}
