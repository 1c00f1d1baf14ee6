import Foundation

/// Set once (a child's exit, a pipe's end): waiting on it is waiting on an
/// event, with a deadline.
public final class Event: @unchecked Sendable {
    private let cond = NSCondition()
    private var set = false

    public init() {}

    public func signal() { cond.withLock { set = true; cond.broadcast() } }

    public var isSet: Bool { cond.withLock { set } }

    /// Whether it happened within `timeout` seconds.
    public func wait(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock()
        defer { cond.unlock() }
        while !set { if !cond.wait(until: deadline) { return set } }
        return true
    }
}

/// Reads a pipe to its end on a thread of its own.
public final class PipeReader: @unchecked Sendable {
    private let done = Event()
    private var bytes = Data()
    public init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            bytes = handle.readDataToEndOfFile()
            // Closed here, not left to the Pipe's life: a test process that
            // runs hundreds of commands must not pass 1024 descriptors
            // (libmosquitto's select() refuses a socket numbered 1024 or more).
            try? handle.close()
            done.signal()
        }
    }
    /// Everything read, once the writer closed its end (the child exited).
    public func data() -> Data {
        _ = done.wait(timeout: 30)
        return done.isSet ? bytes : Data()
    }
}

/// A command run to its end with its output collected, for a test's
/// one-shot children (soundboxctl, soundboxd --check-config, prlimit).
/// Bounded: a child still running after `timeout` (or when `whileRunning`
/// throws) is SIGKILLed (`timedOut`), and it is always reaped before this
/// returns, so none outlives its test.
public struct CommandRun: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    public let timedOut: Bool

    /// - Parameter whileRunning: runs once the child has started (e.g. a
    ///   peer serving its socket).
    public init(_ command: [String], environment: [String: String]? = nil, timeout: Double = 60,
                whileRunning: () throws -> Void = {}) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        if let environment { p.environment = environment }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        let exited = Event()
        p.terminationHandler = { _ in exited.signal() }
        try p.run()
        // Both pipes drained at once, so a child filling one cannot block.
        let o = PipeReader(out.fileHandleForReading), e = PipeReader(err.fileHandleForReading)
        func killAndReap() {
            if !exited.isSet { kill(p.processIdentifier, SIGKILL) }
            _ = exited.wait(timeout: 10)
        }
        do { try whileRunning() } catch { killAndReap(); throw error }
        timedOut = !exited.wait(timeout: timeout)
        if timedOut { killAndReap() }
        status = p.terminationStatus
        stdout = String(decoding: o.data(), as: UTF8.self)
        stderr = String(decoding: e.data(), as: UTF8.self)
    }
}

extension NSCondition {
    /// Waits, woken by each `broadcast`, until `done` (evaluated without the
    /// lock held) holds; false when `timeout` seconds pass first.
    public func wait(timeout: Double, until done: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock()
        defer { unlock() }
        while true {
            unlock()
            let ok = done()
            lock()
            if ok { return true }
            if !wait(until: deadline) { unlock(); let ok = done(); lock(); return ok }
        }
    }
}
