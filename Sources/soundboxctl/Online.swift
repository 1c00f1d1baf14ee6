// The online commands: each is one request on soundboxd's control socket
// (docs/control-protocol.md), its reply printed as text or JSON.
import FoundationEssentials
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxControl
import SoundboxAudio

/// The online commands (docs/DESIGN.md §5, plus `wait`).
enum OnlineCommand: String {
    case status, queue, history, replay, say, volume, config, doctor, wait
    case testAudio = "test-audio"

    /// Options the command takes besides the global ones.
    var options: Set<String> {
        switch self {
        case .history: ["--limit"]
        case .say: ["--lang", "--id"]
        case .wait: ["--timeout"]
        default: []
        }
    }
}

/// Seconds to wait for soundboxd's reply (`wait` waits its own timeout plus this).
let replyTimeout = 10
/// Seconds `wait` lets soundboxd take beyond the idle timeout it asked for.
let idleMargin = 5

/// Checks the arguments, sends the request, prints the reply. Argument
/// errors are found before connecting, so they exit 2 with or without a daemon.
func runOnline(_ command: OnlineCommand, _ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(command.options, for: command.rawValue)
    let (request, timeout) = try request(for: command, args)
    if request.contains(where: { $0.unicodeScalars.contains { $0 == "\n" || $0 == "\r" } }) {
        throw usageError("an argument contains a line break; the control socket takes one line per request")
    }
    let length = ControlProtocol.requestLine(request).utf8.count + 1
    guard length <= ControlProtocol.maxLine else {
        throw usageError("the request is \(length) bytes; the control socket takes lines of at most \(ControlProtocol.maxLine)")
    }
    let path = try socketPath(args)
    let reply: ControlReply
    do { reply = try ControlConnection.open(path, timeout: timeout).request(request) } catch {
        throw Failure(message: error.message, code: error.code, status: 1)
    }
    try show(command, reply, out)
}

/// soundboxd's socket: --socket, else $SOUNDBOX_SOCKET, else control.socket
/// from the config file (whose default is /run/soundbox/control.sock).
func socketPath(_ args: Arguments) throws(Failure) -> String {
    if let path = args.options["--socket"] { return path }
    if let path = ProcessInfo.processInfo.environment["SOUNDBOX_SOCKET"], !path.isEmpty { return path }
    return try config(args)[.controlSocket]
}

/// The request's arguments and the seconds to wait for its reply.
func request(for command: OnlineCommand, _ args: Arguments) throws(Failure) -> (request: [String], timeout: Int) {
    let p = args.positional
    let name = command.rawValue
    func noArguments() throws(Failure) {
        guard p.isEmpty else { throw usageError("\(name) takes no arguments, got '\(p[0])'") }
    }
    switch command {
    case .status, .queue, .testAudio, .doctor:
        try noArguments()
        return ([name], replyTimeout)
    case .history:
        try noArguments()
        guard let text = args.options["--limit"] else { return ([name], replyTimeout) }
        guard let limit = Int(text), (1...1000).contains(limit) else {
            throw usageError("--limit must be an integer 1-1000, not '\(text)'")
        }
        return ([name, String(limit)], replyTimeout)
    case .replay:
        guard p.count <= 1 else { throw usageError("replay takes at most one ID, got \(p.count) arguments") }
        if let id = p.first, let problem = Payment.problem(withID: id) { throw usageError("replay: \(problem)") }
        return ([name] + p, replyTimeout)
    case .say:
        // The same checks and messages as `words`; payment.max_amount is the daemon's.
        let amount = try parseAmount(args)
        if let id = args.options["--id"], let problem = Payment.problem(withID: id) { throw usageError("--id: \(problem)") }
        var request = [name, amount.description]
        for option in ["--lang", "--id"] {
            if let value = args.options[option] { request += [option, value] }
        }
        return (request, replyTimeout)
    case .volume:
        guard p.count <= 1 else { throw usageError("volume takes at most one of N (0-10), up, down") }
        guard let level = p.first else { return ([name], replyTimeout) }
        if level == "up" || level == "down" { return ([name, level], replyTimeout) }
        guard let n = Int(level), Volume.range.contains(n) else {
            throw usageError("volume must be an integer 0-10, up or down, not '\(level)'")
        }
        return ([name, String(n)], replyTimeout)
    case .config:
        switch (p.first, p.count) {
        case ("get", 1...2), ("set", 3): return ([name] + p, replyTimeout)
        default: throw usageError("usage: config get [KEY] | config set KEY VALUE")
        }
    case .wait:
        try noArguments()
        let text = args.options["--timeout"] ?? "60"
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw usageError("--timeout must be whole seconds 1-86400, not '\(text)'")
        }
        return (["idle", String(seconds)], seconds + idleMargin)
    }
}

// MARK: - Showing replies

/// Prints a reply: list replies as one line per record, the rest as
/// aligned `key: value` lines; with --json, one object with typed values.
/// Exits 1 after printing when a doctor check fails or a say is rejected.
func show(_ command: OnlineCommand, _ reply: ControlReply, _ out: Output) throws(Failure) {
    switch command {
    case .queue, .history:
        let entries = reply.records(startingWith: "id")
        let rows = entries.map { entryRow($0, history: command == .history) }
        let empty = command == .queue ? "no payments waiting" : "no payments in the history"
        out.emit(JSONValue.object(["entries": .array(try entries.map(typed))]),
                 text: rows.isEmpty ? empty : table(rows).joined(separator: "\n"))
    case .doctor:
        let checks = reply.records(startingWith: "check")
        let ok = !checks.contains { field($0, "status") == "fail" }
        out.emit(JSONValue.object(["checks": .array(try checks.map(typed)), "ok": .bool(ok)]),
                 text: doctorText(checks))
        if !ok { exit(1) }
    default:
        out.emit(try typed(reply.pairs), text: aligned(reply.pairs))
        if command == .say && reply["status"] == "rejected" { exit(1) }
    }
}

/// Reply keys whose values are integers or booleans in JSON; every other
/// value stays a string, whatever it looks like (an id "12345" is text).
let integerKeys: Set<String> = ["volume", "queue_depth", "uptime_s", "seq", "plays", "duration_ms", "accepted_at", "updated_at", "receipts_pending"]
let booleanKeys: Set<String> = ["muted", "durable", "clock_synced", "summary"]

/// A record or flat reply as a JSON object with typed values.
func typed(_ pairs: [(key: String, value: String)]) throws(Failure) -> JSONValue {
    var object: [String: JSONValue] = [:]
    for (key, value) in pairs {
        if integerKeys.contains(key) {
            guard let n = Int(value) else { throw protocolError(key, value, "an integer") }
            object[key] = .int(n)
        } else if booleanKeys.contains(key) {
            guard value == "true" || value == "false" else { throw protocolError(key, value, "true or false") }
            object[key] = .bool(value == "true")
        } else {
            object[key] = .string(value)
        }
    }
    return .object(object)
}

func protocolError(_ key: String, _ value: String, _ expected: String) -> Failure {
    failure("soundboxd sent \(key): '\(value)', expected \(expected)", code: "protocol")
}

func field(_ record: [(key: String, value: String)], _ key: String) -> String? {
    record.first { $0.key == key }?.value
}

/// `key: value` lines with the values lined up.
func aligned(_ pairs: [(key: String, value: String)]) -> String {
    let width = (pairs.map(\.key.count).max() ?? 0) + 2
    return pairs.map { ($0.key + ":").padding(to: width) + $0.value }.joined(separator: "\n")
}

/// One queue or history entry: `#seq id state amount channel lang time`,
/// then for history the plays and the reason, if any.
func entryRow(_ record: [(key: String, value: String)], history: Bool) -> [String] {
    func f(_ key: String) -> String { field(record, key) ?? "-" }
    var row = ["#" + f("seq"), f("id"), f("state"), f("amount"), f("channel"), f("lang"), localTime(f("accepted_at"))]
    if history {
        row.append(f("plays") == "1" ? "1 play" : "\(f("plays")) plays")
        if field(record, "summary") == "true" { row.append("in the offline summary") }
        row.append(field(record, "reason").map { "reason: " + $0 } ?? "")
    }
    return row
}

/// `OK   audio    detail`, `FAIL database detail` and its `hint: ...` line.
func doctorText(_ checks: [[(key: String, value: String)]]) -> String {
    let width = (checks.map { (field($0, "check") ?? "").count }.max() ?? 0) + 1
    var lines: [String] = []
    for check in checks {
        let status = (field(check, "status") ?? "?").uppercased().padding(to: 5)
        lines.append(status + (field(check, "check") ?? "?").padding(to: width) + (field(check, "detail") ?? ""))
        if let hint = field(check, "hint") { lines.append(String(repeating: " ", count: 5) + "hint: " + hint) }
    }
    return lines.joined(separator: "\n")
}

/// Rows with their columns lined up, two spaces apart.
func table(_ rows: [[String]]) -> [String] {
    let columns = rows.map(\.count).max() ?? 0
    let widths = (0..<columns).map { i in rows.map { i < $0.count ? $0[i].count : 0 }.max() ?? 0 }
    return rows.map { row in
        var line = zip(row, widths).map { $0.padding(to: $1) }.joined(separator: "  ")
        while line.last == " " { line.removeLast() }
        return line
    }
}

/// Unix seconds as local "2025-11-29 14:03:21"; any other text unchanged.
func localTime(_ text: String) -> String {
    guard var seconds = time_t(text) else { return text }
    var parts = tm()
    guard localtime_r(&seconds, &parts) != nil else { return text }
    var buffer = [CChar](repeating: 0, count: 32)
    let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
    return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension String {
    /// The string padded with spaces to `width` characters.
    func padding(to width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}

/// A JSON value built from a reply, typed by key (see `typed`).
enum JSONValue: Encodable {
    case string(String), int(Int), bool(Bool), array([JSONValue]), object([String: JSONValue])

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .int(let n): try c.encode(n)
        case .bool(let b): try c.encode(b)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}
