// ~590 lines: one real mosquitto for every test (plain, TLS, Debian's conf.d layout), its restarts and log waits, and the mosquitto_pub/sub wrappers.
import Foundation
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

// Test infrastructure for the MQTT tests: a real mosquitto per test, on
// 127.0.0.1 with a random free port, its own config, data folder and log.
// See HarnessSelfTests.swift for how each piece is used.
//



/// Polls `condition` every `interval` seconds until it holds or `timeout`
/// passes. Only for real conditions that have no event to wait on (a port
/// accepting, a file changing); returns whether it held.
@discardableResult
package func pollUntil(timeout: Double, interval: Double = 0.01, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if condition() { return true }
        if Date() >= deadline { return false }
        usleep(useconds_t(interval * 1e6))
    }
}

/// A TLS listener for `Broker`. The files are PEM paths (see `Certificates`).
package struct TLSListener: Sendable {
    package var caFile: String
    package var certFile: String
    package var keyFile: String
    package var requireCertificate: Bool
    package var useIdentityAsUsername: Bool
    package var aclFile: String?

    package init(caFile: String, certFile: String, keyFile: String, requireCertificate: Bool = true,
         useIdentityAsUsername: Bool = true, aclFile: String? = nil) {
        self.caFile = caFile; self.certFile = certFile; self.keyFile = keyFile
        self.requireCertificate = requireCertificate; self.useIdentityAsUsername = useIdentityAsUsername
        self.aclFile = aclFile
    }
}

/// Where a test-side MQTT peer connects: the broker's plain port, its TLS
/// port, or a FaultProxy in front of either.
///
/// The seam for `MQTTProbe`: the in-process Swift test client (to come,
/// for throughput tests) takes an `MQTTEndpoint`; until then the self-tests
/// use the mosquitto_pub/mosquitto_sub wrappers below (a handful of
/// messages each, never throughput).
package struct MQTTEndpoint: Sendable {
    package var host = "127.0.0.1"
    package var port: Int
    /// Client-side TLS: the CA to verify the server with, and optionally a
    /// client certificate. Use host "localhost" to exercise hostname checks.
    package var tls: ClientTLS?

    package struct ClientTLS: Sendable {
        package var caFile: String
        package var certFile: String?
        package var keyFile: String?

        package init(caFile: String, certFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile; self.certFile = certFile; self.keyFile = keyFile
        }
    }

    package init(host: String = "127.0.0.1", port: Int, tls: ClientTLS? = nil) {
        self.host = host; self.port = port; self.tls = tls
    }

    /// The connection arguments for mosquitto_pub / mosquitto_sub.
    package var cliArguments: [String] {
        var a = ["-h", host, "-p", String(port)]
        if let tls {
            a += ["--cafile", tls.caFile, "--tls-version", "tlsv1.2"]
            if let c = tls.certFile, let k = tls.keyFile { a += ["--cert", c, "--key", k] }
        }
        return a
    }
}

/// A real mosquitto on 127.0.0.1.
///
/// Plain broker config (`<dir>/mosquitto.conf`):
///
///     user root
///     persistence true
///     persistence_location <dir>/data/
///     autosave_interval 1
///     set_tcp_nodelay true
///     max_queued_messages 100000
///     max_inflight_messages 20
///     log_dest file <dir>/mosquitto.log
///     log_type all
///     <extraConfig>
///     listener <port> 127.0.0.1
///     allow_anonymous true
///
/// With `tls:`, `per_listener_settings true` goes first, and a second
/// listener follows the plain one. The plain listener stays open to
/// anonymous clients with no ACL (the test's "backend" side); the TLS
/// listener (the device side) gets its own auth and ACL:
///
///     listener <tlsPort> 127.0.0.1
///     allow_anonymous true
///     cafile / certfile / keyfile <paths>
///     tls_version tlsv1.2
///     require_certificate true|false
///     use_identity_as_username true|false
///     acl_file <path>              (if given)
///
/// `extraConfig` is placed before the listener blocks: global options only.
///
/// With `confD:` the broker is set up as Debian installs it instead: a main
/// `<dir>/mosquitto.conf` with what Debian's /etc/mosquitto/mosquitto.conf
/// sets (persistence_location, log_dest; plus `user root` and `log_type all`
/// for the tests) and `include_dir <dir>/conf.d`, where
/// `<dir>/conf.d/soundbox.conf` is `confD(port)`: the whole rest of the
/// configuration, listeners included (one listener, on `port`; `tls` and
/// `extraConfig` are not used). See MQTTFleetTests' `FleetBroker`.
package final class Broker: @unchecked Sendable {
    package let dir: String
    package private(set) var port: Int
    package private(set) var tlsPort: Int?
    package let extraConfig: String
    package let tls: TLSListener?
    /// The conf.d file's text for a given port, if set up like Debian.
    package let confD: (@Sendable (_ port: Int) -> String)?
    package var configPath: String { dir + "/mosquitto.conf" }
    package var confDPath: String { dir + "/conf.d/soundbox.conf" }
    package var logPath: String { dir + "/mosquitto.log" }
    package var dataDir: String { dir + "/data" }
    /// The persistence file mosquitto writes (a new file renamed over the old).
    package var databasePath: String { dataDir + "/mosquitto.db" }
    package static let executable = "/usr/sbin/mosquitto"

    private let lock = NSLock()
    private var process: Process?
    /// How many times mosquitto has been started.
    package private(set) var runs = 0

    /// The plain listener, for test-side peers.
    package var endpoint: MQTTEndpoint { MQTTEndpoint(port: port) }

    package init(dir: String, extraConfig: String = "", tls: TLSListener? = nil,
         confD: (@Sendable (_ port: Int) -> String)? = nil) throws {
        self.dir = dir
        self.extraConfig = extraConfig
        self.tls = confD == nil ? tls : nil
        self.confD = confD
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        port = 0
        // Free ports are found by binding port 0 and closing; someone may
        // take one before mosquitto binds it: then pick again.
        var lastError: Error?
        for _ in 0..<20 {
            port = try Net.freePort()
            tlsPort = tls == nil ? nil : try Net.freePort()
            if tlsPort == port { continue }
            try writeConfig()
            do {
                try launch()
                return
            } catch let e as AddressInUse {
                lastError = e
                continue
            }
        }
        throw lastError ?? TestFailure("mosquitto: no free port found")
    }

    deinit { stop() }

    /// The TLS listener as seen by a device, which connects to "localhost"
    /// (so the server certificate's hostname is checked).
    package func tlsEndpoint(caFile: String, certFile: String?, keyFile: String?) -> MQTTEndpoint {
        MQTTEndpoint(host: "localhost", port: tlsPort!,
                     tls: .init(caFile: caFile, certFile: certFile, keyFile: keyFile))
    }

    package var config: String {
        if confD != nil {
            return [
                "user root",
                "persistence true",
                "persistence_location \(dir)/data/",
                "log_dest file \(logPath)",
                "log_type all",
                "include_dir \(dir)/conf.d",
            ].joined(separator: "\n") + "\n"
        }
        var lines: [String] = []
        if tls != nil { lines.append("per_listener_settings true") }
        lines += [
            "user root",
            "persistence true",
            "persistence_location \(dir)/data/",
            "autosave_interval 1",
            "set_tcp_nodelay true",
            "max_queued_messages 100000",
            "max_inflight_messages 20",
            "log_dest file \(logPath)",
            "log_type all",
        ]
        if !extraConfig.isEmpty { lines.append(extraConfig) }
        lines += ["listener \(port) 127.0.0.1", "allow_anonymous true"]
        if let tls, let tlsPort {
            lines += [
                "listener \(tlsPort) 127.0.0.1",
                "allow_anonymous true",
                "cafile \(tls.caFile)",
                "certfile \(tls.certFile)",
                "keyfile \(tls.keyFile)",
                "tls_version tlsv1.2",
                "require_certificate \(tls.requireCertificate)",
                "use_identity_as_username \(tls.useIdentityAsUsername)",
            ]
            if let acl = tls.aclFile { lines.append("acl_file \(acl)") }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func writeConfig() throws {
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        if let confD {
            try FileManager.default.createDirectory(atPath: dir + "/conf.d", withIntermediateDirectories: true)
            try confD(port).write(toFile: confDPath, atomically: true, encoding: .utf8)
        }
    }

    private struct AddressInUse: Error, CustomStringConvertible { let description: String }

    /// Starts mosquitto and returns once it logged "running" for this run and
    /// its ports accept TCP connections (bounded: 5 s).
    private func launch() throws {
        let logStart = (try? FileManager.default.attributesOfItem(atPath: logPath)[.size] as? Int) ?? 0
        lock.lock()
        runs += 1
        let stderrPath = dir + "/mosquitto-\(runs).stderr"
        lock.unlock()
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Broker.executable)
        p.arguments = ["-c", configPath]
        p.standardOutput = FileHandle.nullDevice
        let stderrFile = FileHandle(forWritingAtPath: stderrPath)
        p.standardError = stderrFile
        p.standardInput = FileHandle.nullDevice
        defer { try? stderrFile?.close() }   // the child has its own copy
        try runWithDefaultSignals(p)
        lock.lock(); process = p; lock.unlock()

        let ports = [port] + (tlsPort.map { [$0] } ?? [])
        var ready = false
        var exited = false
        pollUntil(timeout: 5) {
            if !p.isRunning { exited = true; return true }
            // "mosquitto version 2.0.11 running" is logged once every listener
            // is open; then each port must accept a connection. (Each probe
            // leaves a "Client <unknown> closed its connection." line, and on
            // the TLS port an "unexpected eof" line, in the log.)
            let text = newLog(since: logStart)
            guard text.contains("mosquitto version") && text.contains(" running") else { return false }
            ready = ports.allSatisfy { Net.canConnect(port: $0) }
            return ready
        }
        if ready { return }
        if !exited { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        let text = newLog(since: logStart) + ((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
        if text.contains("Address already in use") { throw AddressInUse(description: text) }
        throw TestFailure("mosquitto did not start (exit \(p.terminationStatus)):\n\(text)")
    }

    private func newLog(since offset: Int) -> String {
        guard let data = FileManager.default.contents(atPath: logPath), data.count > offset else { return "" }
        return String(decoding: data[offset...], as: UTF8.self)
    }

    package var isRunning: Bool { lock.withLock { process?.isRunning ?? false } }
    package var pid: Int32? { lock.withLock { process.map { $0.processIdentifier } } }

    /// SIGKILL: mosquitto loses whatever it had not saved.
    package func kill9() {
        guard let p = lock.withLock({ process }), p.isRunning else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    /// SIGTERM and wait (mosquitto saves its database on the way out);
    /// SIGKILL if it is still there after 10 s.
    package func stop() {
        guard let p = lock.withLock({ process }) else { return }
        if p.isRunning {
            kill(p.processIdentifier, SIGTERM)
            if !pollUntil(timeout: 10, { !p.isRunning }) {
                // Say why (a blocked or pending SIGTERM, its state) before the SIGKILL.
                let status = (try? String(contentsOfFile: "/proc/\(p.processIdentifier)/status", encoding: .utf8)) ?? ""
                let lines = status.split(separator: "\n").filter { ["State", "SigBlk", "SigPnd", "ShdPnd", "SigCgt", "SigIgn"].contains(String($0.prefix { $0 != ":" })) }
                print("Broker.stop: mosquitto \(p.processIdentifier) ignored SIGTERM for 10 s: \(lines.joined(separator: "; "))")
                kill(p.processIdentifier, SIGKILL)
            }
        }
        p.waitUntilExit()
    }

    /// Starts it again on the same ports with the same data folder (after
    /// kill9 or stop). Stops a running one first.
    package func restart() throws {
        stop()
        // Same port on purpose: a device reconnects to where it was. The
        // listener uses SO_REUSEADDR, so TIME_WAIT does not block it.
        var lastError: Error?
        for _ in 0..<50 {
            do { try launch(); return } catch let e as AddressInUse {
                // Someone briefly holds our port (e.g. an outgoing
                // connection's ephemeral port); wait for it to go.
                lastError = e
                usleep(100_000)
            }
        }
        throw lastError!
    }

    /// The whole log file (all runs).
    package var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits (bounded polling of the log file) until the log contains `text`
    /// at least `count` times.
    @discardableResult
    package func waitForLog(_ text: String, count: Int = 1, timeout: Double = 10) -> Bool {
        pollUntil(timeout: timeout) { log.components(separatedBy: text).count - 1 >= count }
    }

    /// Waits until mosquitto has saved its database after this call: every
    /// message it acknowledged before the call is then on disk and survives
    /// kill9. mosquitto is single-threaded and saves to a new file that it
    /// renames over the old one, so the first new inode seen after the
    /// call comes from a save that started after everything acknowledged
    /// before it. autosave_interval 1 saves every ~2 s (mosquitto checks
    /// `last + interval < now`).
    @discardableResult
    package func waitForSave(timeout: Double = 10) -> Bool {
        func inode() -> UInt64? {
            var st = stat()
            return stat(databasePath, &st) == 0 ? UInt64(st.st_ino) : nil
        }
        let before = inode()
        return pollUntil(timeout: timeout) { let now = inode(); return now != nil && now != before }
    }
}

// MARK: - Starting processes

/// Starts `p` from a fresh thread whose signal mask is empty.
///
/// Foundation's Process (swift-corelibs-foundation, Swift 6.3) hands the
/// calling thread's signal mask to the child, and Swift Testing runs tests
/// on threads that block SIGTERM, SIGINT, SIGHUP and more. mosquitto (which
/// waits in epoll_pwait with the mask it inherited) and mosquitto_sub then
/// never see SIGTERM: `terminate()` does nothing and `waitUntilExit()`
/// hangs. Every process here is started through this function.
package func runWithDefaultSignals(_ p: Process) throws {
    final class Outcome: @unchecked Sendable { var error: Error? }
    let outcome = Outcome()
    let process = p
    let t = JoinableThread {
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        do { try process.run() } catch { outcome.error = error }
    }
    t.join()
    if let e = outcome.error { throw e }
}

// MARK: - Raw sockets (Glibc)

package enum Net {
    /// A port that was free a moment ago: bind 127.0.0.1:0, read it, close.
    package static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        defer { close(fd) }
        var addr = loopback(port: 0)
        guard withSockaddr(&addr, { bind(fd, $0, $1) }) == 0 else { throw TestFailure("bind: errno \(errno)") }
        return try boundPort(fd)
    }

    /// A TCP socket listening on 127.0.0.1 at a free port, and that port.
    package static func listenLoopback(backlog: Int32) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = loopback(port: 0)
        guard withSockaddr(&addr, { bind(fd, $0, $1) }) == 0, listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            throw TestFailure("bind/listen: errno \(e)")
        }
        do { return (fd, try boundPort(fd)) } catch { close(fd); throw error }
    }

    package static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        return addr
    }

    package static func withSockaddr<R>(_ addr: inout sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    package static func boundPort(_ fd: Int32) throws -> Int {
        var addr = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0 else { throw TestFailure("getsockname: errno \(errno)") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// A blocking TCP connection to 127.0.0.1:port, or -1 (errno set).
    package static func connectLoopback(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var addr = loopback(port: port)
        if withSockaddr(&addr, { connect(fd, $0, $1) }) != 0 {
            let e = errno
            close(fd)
            errno = e
            return -1
        }
        return fd
    }

    package static func canConnect(port: Int) -> Bool {
        let fd = connectLoopback(port: port)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }
}

// MARK: - mosquitto_pub / mosquitto_sub (self-tests and a few messages only)

/// A running command whose stdout+stderr are collected as they arrive;
/// tests wait on output (an event), not on time. deinit SIGKILLs it.
///
/// Stop these with `kill9()`, not SIGTERM: mosquitto_sub 2.0.11 can
/// deadlock in its own SIGTERM handler (seen: it stopped sending PINGREQs
/// and never exited). For a clean exit use its own options (-C, -E, -W).
package final class CLIProcess: @unchecked Sendable {
    package let process = Process()
    package let argv: [String]

    /// Shared with the reader thread (which must not hold the CLIProcess,
    /// or deinit would never run while the command lives).
    private final class Output: @unchecked Sendable {
        package let cond = NSCondition()
        package var text = ""
        package var eof = false
    }
    private let out = Output()

    package init(_ argv: [String]) throws {
        self.argv = argv
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: argv[0])
        process.arguments = Array(argv.dropFirst())
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try runWithDefaultSignals(process)
        let reading = pipe.fileHandleForReading
        let out = self.out
        Thread {
            let fd = reading.fileDescriptor
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                out.cond.lock()
                if n <= 0 { out.eof = true } else { out.text += String(decoding: buf[..<n], as: UTF8.self) }
                out.cond.broadcast()
                out.cond.unlock()
                if n <= 0 { break }
            }
            try? reading.close()
        }.start()
    }

    deinit { kill9() }

    package var pid: Int32 { process.processIdentifier }
    package var output: String { out.cond.withLock { out.text } }

    /// Waits until the output satisfies `predicate` (checked on every new
    /// chunk), or the output ends, or `timeout` passes. Returns whether it held.
    @discardableResult
    package func waitForOutput(timeout: Double = 10, _ predicate: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        out.cond.lock()
        defer { out.cond.unlock() }
        while true {
            if predicate(out.text) { return true }
            if out.eof || !out.cond.wait(until: deadline) { return predicate(out.text) }
        }
    }

    /// Waits until `needle` occurs `count` times.
    @discardableResult
    package func waitFor(_ needle: String, count: Int = 1, timeout: Double = 10) -> Bool {
        waitForOutput(timeout: timeout) { $0.components(separatedBy: needle).count - 1 >= count }
    }

    /// Waits for the process to exit (bounded); nil if it is still running.
    package func waitExit(timeout: Double = 10) -> Int32? {
        waitForOutput(timeout: timeout) { _ in false }  // returns at EOF: the process closed its output
        guard pollUntil(timeout: 2, { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// SIGKILL and wait.
    package func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// `mosquitto_sub -d` with a parseable message format. Lines:
/// `MSG|<topic>|<payload>` per message; debug lines such as
/// "received SUBACK" / "sending CONNECT" tell the test where it is.
package final class MosquittoSub: @unchecked Sendable {
    package let cli: CLIProcess
    package static let messagePrefix = "MSG|"

    /// - Parameters: clientID nil = random; persistent = `-c` (clean session off).
    package init(_ endpoint: MQTTEndpoint, topics: [String], qos: Int = 1, clientID: String? = nil,
         persistent: Bool = false, extra: [String] = []) throws {
        // mosquitto_sub flushes stdout only after a message; its -d lines
        // ("received SUBACK") would sit in the buffer: line-buffer it.
        var argv = ["/usr/bin/stdbuf", "-oL", "/usr/bin/mosquitto_sub"] + endpoint.cliArguments + ["-d", "-q", String(qos), "-F", "MSG|%t|%p"]
        for t in topics { argv += ["-t", t] }
        if let clientID { argv += ["-i", clientID] }
        if persistent { argv.append("-c") }
        cli = try CLIProcess(argv + extra)
    }

    /// Waits for the broker's SUBACK (the subscription is in place).
    @discardableResult
    package func waitSubscribed(count: Int = 1, timeout: Double = 10) -> Bool { cli.waitFor("received SUBACK", count: count, timeout: timeout) }

    /// The messages received so far, in order.
    package var messages: [(topic: String, payload: String)] { MosquittoSub.parse(cli.output) }

    package static func parse(_ text: String) -> [(topic: String, payload: String)] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix(messagePrefix) else { return nil }
            let parts = line.dropFirst(messagePrefix.count).split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    /// Waits until a message with this payload arrived (an event: each new
    /// output chunk wakes the wait).
    @discardableResult
    package func waitForMessage(_ payload: String, timeout: Double = 10) -> Bool {
        cli.waitForOutput(timeout: timeout) { text in MosquittoSub.parse(text).contains { $0.payload == payload } }
    }

    package func hasMessage(_ payload: String) -> Bool { messages.contains { $0.payload == payload } }

    package var output: String { cli.output }
}

/// `mosquitto_pub` once; returns its exit status and output. QoS 1 by
/// default: mosquitto_pub exits 0 only after the PUBACK, so the broker
/// holds the message when this returns.
@discardableResult
package func mosquittoPub(_ endpoint: MQTTEndpoint, topic: String, message: String, qos: Int = 1, retain: Bool = false,
                  clientID: String? = nil, timeout: Double = 10) throws -> (status: Int32, output: String) {
    var argv = ["/usr/bin/mosquitto_pub"] + endpoint.cliArguments + ["-d", "-q", String(qos), "-t", topic, "-m", message]
    if retain { argv.append("-r") }
    if let clientID { argv += ["-i", clientID] }
    let cli = try CLIProcess(argv)
    guard let status = cli.waitExit(timeout: timeout) else {
        cli.kill9()
        throw TestFailure("mosquitto_pub did not finish in \(timeout) s:\n\(cli.output)")
    }
    return (status, cli.output)
}
