import Glibc

/// A connected socket read line by line, with deadlines; closed by `close`
/// or in deinit.
public final class LineConnection {
    public enum Line: Equatable, Sendable { case line(String), notUTF8, tooLong, timeout, end }
    public let fd: Int32
    private var open = true
    private var buffer: [UInt8] = []

    public init(fd: Int32) { self.fd = fd }
    deinit { close() }

    public func close() {
        if open { Glibc.close(fd) }
        open = false
    }

    /// The next line without its newline; `.timeout` when it is not complete
    /// by `deadline` (monotonic seconds), however the bytes trickle in.
    public func readLine(max: Int, until deadline: Double) -> Line {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                // Never decoded with replacement: U+FFFD would reach ids and logs as "��".
                let line = String(validating: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                guard nl <= max else { return .tooLong }
                guard let line else { return .notUTF8 }
                return .line(line.hasSuffix("\r") ? String(line.dropLast()) : line)
            }
            if buffer.count > max { return .tooLong }
            guard wait(for: Int16(POLLIN), until: deadline) else { return .timeout }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if n <= 0 { return .end }
            buffer += chunk[..<n]
        }
    }

    /// Sends all of `text` by `deadline`; false when the client did not take
    /// it in time or went away.
    public func write(_ text: String, until deadline: Double) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n > 0 { bytes = bytes.dropFirst(n); continue }
            guard n < 0 && (errno == EINTR || errno == EAGAIN) else { return false }
            guard wait(for: Int16(POLLOUT), until: deadline) else { return false }
        }
        return true
    }

    /// Whether `fd` became ready (or hung up: the next call says how) by `deadline`.
    private func wait(for events: Int16, until deadline: Double) -> Bool {
        while true {
            let left = deadline - MonotonicClock.seconds()
            if left <= 0 { return false }
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            let rc = poll(&pfd, 1, Int32(min(left * 1000, 3_600_000).rounded(.up)))
            if rc > 0 || (rc < 0 && errno != EINTR) { return true }
        }
    }
}

/// CLOCK_MONOTONIC: for deadlines and timeouts (never jumps with the date).
public enum MonotonicClock {
    public static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// CLOCK_REALTIME in whole milliseconds since 1970 (a date, not a deadline).
    public static func unixMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
