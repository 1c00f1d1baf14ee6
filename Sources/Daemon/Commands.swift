import Glibc
import Soundbox
import SoundboxAudio
import SoundboxStore
import Synchronization

/// The command table (docs/control-protocol.md): name, argument counts,
/// handler. A handler returns the reply's pairs or throws an ACK.
struct Commands: Sendable {
    /// What the handlers use.
    struct Context: Sendable {
        /// What status and doctor report.
        let device: DeviceState
        let ingest: Ingest
        let scheduler: Scheduler
        let changes: Changes
        let updater: Updater
        var settings: Settings { device.settings }
        var storage: Storage { device.storage }
        /// Something status and the LED show changed (settings, volume).
        func changed() { changes.post(.state) }
    }
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
        Command(name: "doctor", args: 0...0) { c, _ in Doctor.run(c.device) },
        Command(name: "idle", args: 0...1) { c, a throws(ControlAck) in try idle(c, a) },
        Command(name: "update", args: 1...7) { c, a throws(ControlAck) in try update(c, a) },
    ]

    /// Runs one request line; returns the reply text (pairs + OK, or ACK).
    func execute(_ line: String) -> String {
        var name = ""
        do throws(ControlAck) {
            let args = try ControlProtocol.tokenize(line)
            guard let first = args.first else { throw ControlAck(.unknown, command: "", "empty request") }
            name = first
            guard let command = Self.table.first(where: { $0.name == first }) else {
                // As received: the ACK escapes its command and message (one escaper, once).
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

    static func status(_ c: Context) -> ControlReply { StatusReport.make(c.device).reply }

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
            if e.summary != nil { r.add("summary", true) }
        }
    }

    static func queue(_ c: Context) throws(ControlAck) -> ControlReply {
        var r = ControlReply()
        for item in c.storage.pending() {
            r.add("id", item.payment.id)
            r.add("seq", item.seq)
            r.add("state", item.state.rawValue)
            r.add("amount", item.payment.amount.description)
            r.add("channel", item.payment.channel.rawValue)
            if let lang = item.payment.lang { r.add("lang", lang) }
            r.add("accepted_at", item.acceptedAt / 1000)
        }
        return r
    }

    static func history(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let limit = a.first.map { Int($0) } ?? 20
        guard let limit, (1...1000).contains(limit) else { throw ControlAck(.arg, command: "history", "LIMIT must be 1-1000") }
        var r = ControlReply()
        do {
            for e in try c.storage.history(limit: limit) { add(e, to: &r, full: true) }
        } catch { throw ControlAck(.system, command: "history", error.description) }
        return r
    }

    static func replay(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let found: (entry: Entry, queued: Bool)?
        do { found = try c.scheduler.replay(id: a.first) } catch {
            throw ControlAck(.system, command: "replay", error.description)
        }
        guard let found else {
            throw ControlAck(.noExist, command: "replay", a.first.map { "no payment with id '\($0)'" } ?? "no payment yet")
        }
        guard found.queued else { throw busy("replay") }
        var r = ControlReply()
        r.add("id", found.entry.payment.id)
        r.add("status", "queued")
        return r
    }

    static func say(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var options: [String: String] = [:]
        var i = 1
        while i < a.count {
            guard ["--lang", "--id"].contains(a[i]), i + 1 < a.count else {
                throw ControlAck(.arg, command: "say", "usage: say AMOUNT [--lang L] [--id ID]")
            }
            options[a[i]] = a[i + 1]
            i += 2
        }
        let amount: Amount
        do { amount = try Amount.parse(a[0], max: .wordsMax) } catch {
            throw ControlAck(.arg, command: "say", "'\(a[0])': \(error)")
        }
        var lang: String?
        if let asked = options["--lang"] {
            guard let found = c.settings.voices.canonical(asked) else {
                throw ControlAck(.arg, command: "say", Settings.installedPackProblem(asked, c.settings.voices))
            }
            lang = found
        }
        let id = options["--id"] ?? "say-\(SystemClock.nowMs())"
        // Typed on the box, not paid: it opens with the test words (Channel.local).
        let payment = Payment(id: id, amount: amount, channel: .local,
                              ts: SystemClock.nowMs() / 1000, lang: lang)
        let max = c.settings.current[.paymentMaxAmount]
        let problem = Payment.problem(withID: id) ?? (amount > max ? AmountError.aboveLimit(max).description : nil)
        let result = problem.map { c.ingest.reject(id, $0) } ?? c.ingest.accept(payment)
        var r = ControlReply()
        r.add("id", id)
        r.add("status", result.status.rawValue)
        if case .rejected(let reason) = result { r.add("reason", reason) }
        if case .queued(let durable) = result { r.add("durable", durable) }
        return r
    }

    static func volume(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var level = c.settings.current[.audioVolume]
        switch a.first {
        case nil: break
        case "up": level = min(10, level + 1)
        case "down": level = max(0, level - 1)
        case let n?:
            guard let v = Int(n), Volume.range.contains(v) else { throw ControlAck(.arg, command: "volume", "volume must be 0-10, up or down") }
            level = v
        }
        if a.first != nil {
            defer { c.changed() }
            do { try c.settings.set([IntKey.audioVolume.key.name: "\(level)"], from: .local) } catch {
                throw ControlAck(.system, command: "volume", error.description)
            }
        }
        var r = ControlReply()
        r.add("volume", level)
        return r
    }

    static func config(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        var r = ControlReply()
        let waiting = c.settings.restartNeeded
        switch (a[0], a.count) {
        case ("get", 1):
            for (k, v) in c.settings.current.effective { r.add(k.name, v) }
            if !waiting.isEmpty { r.add("restart_needed", waiting.map(\.key).joined(separator: ",")) }
        case ("get", 2):
            guard let key = ConfigKey.named(a[1]) else { throw ControlAck(.arg, command: "config", ConfigError.unknownKey(a[1]).description) }
            r.add(key.name, c.settings.current.shown(key))
            if let w = waiting.first(where: { $0.key == key.name }) { r.add("restart_needed", "the file now says '\(w.inFile)'") }
        case ("set", 3):
            defer { c.changed() }
            do {
                let now = try c.settings.set([a[1]: a[2]], from: .local)
                r.add(a[1], now.shown(ConfigKey.named(a[1])!))
            } catch {
                if case .storage = error { throw ControlAck(.system, command: "config", error.description) }
                throw ControlAck(.arg, command: "config", error.description)
            }
        default:
            throw ControlAck(.arg, command: "config", "usage: config get [KEY] | config set KEY VALUE")
        }
        return r
    }

    static func testAudio(_ c: Context) throws(ControlAck) -> ControlReply {
        guard let job = c.scheduler.submit(.test) else { throw busy("test-audio") }
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

    static func busy(_ command: String) -> ControlAck {
        ControlAck(.system, command: command, "too many requests are waiting to be spoken; try again when they are done")
    }

    /// update status | update cancel | update install NAME|URL [--sha256 H] [--version V] [--force]
    /// (NAME: a bundle soundboxctl put in the update folder).
    static func update(_ c: Context, _ a: [String]) throws(ControlAck) -> ControlReply {
        let usage = "usage: update status | update cancel | update install FILE|URL [--sha256 HEX] [--version V] [--force]"
        let answer: Updater.Answer
        switch (a[0], a.count) {
        case ("status", 1): answer = .accepted(c.updater.record)
        case ("cancel", 1): answer = c.updater.cancel()
        case ("install", 2...):
            var options: [String: String] = [:]
            var force = false
            var i = 2
            while i < a.count {
                if a[i] == "--force" { force = true; i += 1; continue }
                guard ["--sha256", "--version"].contains(a[i]), i + 1 < a.count else { throw ControlAck(.arg, command: "update", usage) }
                options[a[i]] = a[i + 1]
                i += 2
            }
            let isURL = a[1].hasPrefix("http://") || a[1].hasPrefix("https://")
            let request = UpdateRequest(source: isURL ? .url(a[1]) : .file(a[1]), sha256: options["--sha256"],
                                        version: options["--version"], force: force)
            answer = c.updater.start(request)
        default: throw ControlAck(.arg, command: "update", usage)
        }
        let record: UpdateRecord
        switch answer {
        case .accepted(let r): record = r
        case .refused(let reason): throw ControlAck(.system, command: "update", reason)
        }
        let system = c.device.updates.system.withLock { $0 }
        var r = ControlReply()
        r.add("state", record.phase.rawValue)
        if [.downloading, .installing].contains(record.phase) { r.add("progress", record.progress) }
        if let v = record.version { r.add("version", v) }
        if let reason = record.reason { r.add("reason", reason) }
        r.add("running", system.version)
        r.add("slot", system.slot ?? "none")
        r.add("dir", c.updater.directory)
        return r
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

