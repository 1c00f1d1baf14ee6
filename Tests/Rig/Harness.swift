import Foundation
import Soundbox
import SoundboxControl
import TestSupport
import SoundboxSystem

/// The repository root, the built binaries and a scratch folder per test.
package enum Build {
    package static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()
    package static let binDir = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().path
    package static let soundboxd = binDir + "/soundboxd"
    package static let soundboxctl = binDir + "/soundboxctl"
    package static let fleet = binDir + "/soundbox-fleet"
}


/// A real soundboxd in a scratch folder: its own config, database, socket,
/// log file and sd_notify socket (how the test knows it is ready).
///
/// Every process it starts is SIGKILLed and reaped in deinit if it is still
/// running, whatever way the test ended (a thrown error, a failed
/// `#require`, a test that never stopped a restarted daemon): no run
/// outlives its test. Every wait on a run is bounded by a deadline.
package final class Daemon {
    package let dir: String
    package var socket: String { dir + "/control.sock" }
    package var database: String { dir + "/state/soundbox.db" }
    package var logPath: String { dir + "/daemon-\(runs).log" }
    package private(set) var runs = 0
    package private(set) var process: Process?
    /// Every run started, with the event its exit sets (the current run last).
    private var started: [(process: Process, exit: Event)] = []
    /// The sd_notify socket of the current run (READY=1 already read).
    package private(set) var notify: NotifySocket?
    package var environment: [String: String] = [:]
    /// A command the daemon runs under, e.g. prlimit.
    package var wrapper: [String] = []
    /// The soundboxd to run (another build: the device's, under qemu-user).
    package var executable = Build.soundboxd

    /// Extra config lines on top of the test defaults (null output, instant).
    package init(dir: String, config: [String: String] = [:]) throws {
        self.dir = dir
        var settings = [
            "state.dir": dir + "/state", "control.socket": dir + "/control.sock",
            "voice.dir": Build.root + "/voices", "audio.output": "null", "audio.null_realtime": "false",
            "mqtt.enabled": "false", "gpio.enabled": "false",
        ]
        settings.merge(config) { $1 }
        self.settings = settings
        try writeConfig()
    }

    deinit {
        for run in started where run.process.isRunning { kill(run.process.processIdentifier, SIGKILL) }
        for run in started { _ = run.exit.wait(timeout: 10) }
    }

    /// The settings written to the daemon's config file.
    package private(set) var settings: [String: String]

    /// Changes settings in the file (read at the next start or SIGHUP).
    package func reconfigure(_ changes: [String: String]) throws {
        settings.merge(changes) { $1 }
        try writeConfig()
    }

    private func writeConfig() throws {
        let text = settings.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(separator: "\n") + "\n"
        try text.write(toFile: dir + "/soundbox.conf", atomically: true, encoding: .utf8)
    }

    /// The exit event of the current run.
    private var currentExit: Event? { started.last?.exit }

    /// Starts the daemon and returns once it has sent READY=1, or throws
    /// with its log if it exited first or sent nothing within `timeout`
    /// (then it is killed). Throws if the previous run is still running:
    /// two daemons on one socket and database is a test bug.
    @discardableResult
    package func start(failpoint: String? = nil, extraEnv: [String: String] = [:], timeout: Double = 60) throws -> Process {
        if let p = process, p.isRunning {
            throw TestFailure("soundboxd run \(runs) is still running; stop() or kill9() it before starting another")
        }
        runs += 1
        let notify = try NotifySocket(path: dir + "/notify-\(runs).sock")
        self.notify = notify
        let p = Process()
        let command = wrapper + [executable, "--config", dir + "/soundbox.conf"]
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        var env = ["NOTIFY_SOCKET": notify.path, "PATH": "/usr/bin:/bin", "SOUNDBOX_TEST_CLOCK": "unsynced"]
        env.merge(environment) { $1 }
        env.merge(extraEnv) { $1 }
        if let failpoint { env["SOUNDBOX_FAILPOINT"] = failpoint }
        p.environment = env
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let logFile = FileHandle(forWritingAtPath: logPath)
        p.standardError = logFile
        p.standardOutput = FileHandle.nullDevice
        let exit = Event()
        p.terminationHandler = { _ in exit.signal() }
        // The child has its own copy: ours is closed at once (no descriptor per run kept).
        defer { try? logFile?.close() }
        try p.run()
        process = p
        started.append((p, exit))
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let msg = notify.receive(timeout: 0.5) {
                if msg.split(separator: "\n").contains("READY=1") { return p }
            } else if exit.isSet {
                throw TestFailure("soundboxd exited (\(p.terminationStatus)) before READY:\n" + log(run: runs))
            }
        }
        kill9()
        throw TestFailure("soundboxd sent no READY=1 within \(timeout) s (killed):\n" + log(run: runs))
    }

    /// SIGKILL, and returns once the process is reaped.
    package func kill9() {
        guard let p = process, let exit = currentExit, !exit.isSet, p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        _ = exit.wait(timeout: 10)
    }

    /// SIGTERM, then waits up to `timeout` for the exit; returns the exit
    /// status and the seconds it took. A run still alive at the deadline is
    /// SIGKILLed and reported as status -1 (never a real exit status).
    package func stop(timeout: Double = 30) -> (Int32, Double) {
        guard let p = process, let exit = currentExit else { return (-1, 0) }
        guard !exit.isSet, p.isRunning else {   // already gone: no signal to a reaped pid
            _ = exit.wait(timeout: 10)
            return (p.terminationStatus, 0)
        }
        let clock = ContinuousClock(), t = clock.now
        p.terminate()
        let exited = exit.wait(timeout: timeout)
        let elapsed = clock.now - t
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard exited else {
            kill9()
            return (-1, seconds)
        }
        return (p.terminationStatus, seconds)
    }

    /// Waits up to `timeout` for the current run to exit by itself and
    /// returns its status (the signal number if a signal ended it). At the
    /// deadline it is SIGKILLed and -1 returned, so a run that was expected
    /// to die (a failpoint, a crash) and did not can never pass for one
    /// that was killed.
    package func waitExit(timeout: Double = 30) -> Int32 {
        guard let p = process, let exit = currentExit else { return -1 }
        guard exit.wait(timeout: timeout) else {
            kill9()
            return -1
        }
        return p.terminationStatus
    }

    package func log(run: Int) -> String {
        (try? String(contentsOfFile: dir + "/daemon-\(run).log", encoding: .utf8)) ?? ""
    }

    /// Polls a request until `done` holds: waiting on the daemon's own
    /// state through its socket (no event to await), bounded by a deadline
    /// (`timeout` seconds), not by a number of tries: how many tries fit in
    /// a given time depends on the machine's load.
    @discardableResult
    package func until(_ args: String..., timeout: Double = 30, _ done: (Reply) -> Bool) throws -> Reply {
        try until(args, timeout: timeout, done)
    }

    private func until(_ args: [String], timeout: Double, _ done: (Reply) -> Bool) throws -> Reply {
        let deadline = Date().addingTimeInterval(timeout)
        var last: Reply?
        repeat {
            let r = try request(args)
            if done(r) { return r }
            last = r
            usleep(5000)
        } while Date() < deadline
        let seen = last.map { $0.ack.map { "\($0)" } ?? "\($0.pairs)" } ?? "none"
        throw TestFailure("never reached within \(timeout) s: \(args); last reply: \(seen)")
    }

    /// One request on a fresh connection.
    package func request(_ args: String...) throws -> Reply { try request(args) }
    package func request(_ args: [String]) throws -> Reply {
        do {
            return Reply(pairs: try ControlConnection.open(socket, timeout: 120).request(args), ack: nil)
        } catch {
            guard let ack = error.ack else { throw error }
            return Reply(pairs: ControlReply(), ack: ack)
        }
    }
}


/// A reply: pairs, or the ACK.
package struct Reply {
    package var pairs: ControlReply
    package var ack: ControlAck?
    package subscript(key: String) -> String? { pairs[key] }
}

/// The sd_notify datagram socket a test listens on.
package final class NotifySocket {
    package let path: String
    package let fd: Int32
    package init(path: String) throws {
        self.path = path
        unlink(path)
        let socket = try FileDescriptor.unixSocket(.datagram)
        fd = socket.rawValue
        do { try socket.bind(to: UnixSocketAddress(path)) } catch { socket.close(); throw TestFailure("bind notify socket \(path): \(error)") }
    }
    deinit { close(fd); unlink(path) }

    /// The next datagram, or nil after `timeout` seconds.
    package func receive(timeout: Double) -> String? {
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? String(decoding: buf[..<n], as: UTF8.self) : nil
    }
}

/// Parsed `<6>queue: speaking id=X seq=N` lines of a daemon log.
package struct LogEvents {
    package var events: [(event: String, fields: [String: String])] = []
    /// Reads each line as written (LogLine: values may be quoted and escaped).
    package init(_ text: String) {
        for line in text.split(separator: "\n") {
            guard let parsed = LogLine.parse(line) else { continue }
            events.append((parsed.event, Dictionary(parsed.fields.map { ($0.key, $0.value) }) { _, last in last }))
        }
    }
    package func ids(_ event: String) -> [String] { events.filter { $0.event == event }.compactMap { $0.fields["id"] } }
}
