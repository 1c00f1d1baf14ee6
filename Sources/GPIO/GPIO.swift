import CGPIOD
import Glibc

/// A failed libgpiod call: which call, on which line, and the errno.
public struct GPIOError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let line: String
    public let errno: Int32
    public var description: String { "\(line): \(call) failed: \(String(cString: strerror(errno)))" }
}

/// Where a function's line is: chip (name like "gpiochip0", path, label or
/// number, as `gpiod_chip_open_lookup` takes it), offset, polarity, bias.
public struct LineSpec: Sendable, Equatable, CustomStringConvertible {
    public enum Bias: String, Sendable { case asIs = "as-is", disable, pullUp = "pull-up", pullDown = "pull-down" }
    public var chip: String
    public var offset: Int
    public var activeLow: Bool
    public var bias: Bias
    public init(chip: String, offset: Int, activeLow: Bool, bias: Bias) {
        self.chip = chip; self.offset = offset; self.activeLow = activeLow; self.bias = bias
    }
    public var description: String { "\(chip) line \(offset)" }

    var flags: Int32 {
        var f: Int32 = activeLow ? Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) : 0
        switch bias {
        case .asIs: break
        case .disable: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)
        case .pullUp: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        case .pullDown: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        }
        return f
    }
}

/// An input line watched for edges: its descriptor polls readable when an
/// edge is queued.
public protocol EdgeInput: AnyObject {
    var spec: LineSpec { get }
    var fd: Int32 { get }
    /// The queued edges: true = active (pressed, switch on), with the
    /// kernel's timestamp (CLOCK_MONOTONIC seconds).
    func readEdges() throws(GPIOError) -> [(active: Bool, time: Double)]
    /// The current logical level (after active-low).
    func level() throws(GPIOError) -> Bool
}

public protocol LogicalOutput: AnyObject {
    func set(_ on: Bool) throws(GPIOError)
}

/// GPIO access behind a small protocol, so a libgpiod v2 backend can be
/// added without touching the daemon.
public protocol GPIOBackend: Sendable {
    func input(_ spec: LineSpec, consumer: String) throws(GPIOError) -> any EdgeInput
    func output(_ spec: LineSpec, consumer: String, initial: Bool) throws(GPIOError) -> any LogicalOutput
}

/// libgpiod 1.6 (the v1 API of Debian 12 and Raspberry Pi OS bookworm).
public struct LibgpiodV1: GPIOBackend {
    public init() {}
    public func input(_ spec: LineSpec, consumer: String) throws(GPIOError) -> any EdgeInput {
        let line = try V1Line(spec)
        guard gpiod_line_request_both_edges_events_flags(line.line, consumer, spec.flags) == 0 else {
            throw line.error("gpiod_line_request_both_edges_events_flags")
        }
        return line
    }
    public func output(_ spec: LineSpec, consumer: String, initial: Bool) throws(GPIOError) -> any LogicalOutput {
        let line = try V1Line(spec)
        guard gpiod_line_request_output_flags(line.line, consumer, spec.flags, initial ? 1 : 0) == 0 else {
            throw line.error("gpiod_line_request_output_flags")
        }
        return line
    }

    /// "1.6.3": the libgpiod this binary runs against.
    public static var version: String { String(cString: gpiod_version_string()) }
}

/// One requested line and its chip; both released in deinit.
final class V1Line: EdgeInput, LogicalOutput {
    let spec: LineSpec
    private let chip: OpaquePointer
    let line: OpaquePointer

    init(_ spec: LineSpec) throws(GPIOError) {
        self.spec = spec
        guard let c = gpiod_chip_open_lookup(spec.chip) else {
            throw GPIOError(call: "gpiod_chip_open_lookup(\(spec.chip))", line: spec.description, errno: errno)
        }
        guard let l = gpiod_chip_get_line(c, UInt32(spec.offset)) else {
            let e = errno
            gpiod_chip_close(c)
            throw GPIOError(call: "gpiod_chip_get_line(\(spec.offset))", line: spec.description, errno: e)
        }
        chip = c
        line = l
    }
    deinit {
        gpiod_line_release(line)
        gpiod_chip_close(chip)
    }

    func error(_ call: String) -> GPIOError {
        var e = errno
        // A line someone else holds: say who.
        if e == EBUSY, let consumer = gpiod_line_consumer(line) {
            e = EBUSY
            return GPIOError(call: "\(call) (held by '\(String(cString: consumer))')", line: spec.description, errno: e)
        }
        return GPIOError(call: call, line: spec.description, errno: e)
    }

    var fd: Int32 { gpiod_line_event_get_fd(line) }

    func readEdges() throws(GPIOError) -> [(active: Bool, time: Double)] {
        var out: [(Bool, Double)] = []
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&pfd, 1, 0) > 0 {
            var event = gpiod_line_event()
            guard gpiod_line_event_read(line, &event) == 0 else { throw error("gpiod_line_event_read") }
            // With ACTIVE_LOW, libgpiod reports edges in logical terms already.
            let active = event.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE)
            out.append((active, Double(event.ts.tv_sec) + Double(event.ts.tv_nsec) / 1e9))
        }
        return out
    }

    func level() throws(GPIOError) -> Bool {
        let v = gpiod_line_get_value(line)
        guard v >= 0 else { throw error("gpiod_line_get_value") }
        return v == 1
    }

    func set(_ on: Bool) throws(GPIOError) {
        guard gpiod_line_set_value(line, on ? 1 : 0) == 0 else { throw error("gpiod_line_set_value") }
    }
}

public enum GPIO {
    public static var libraryVersion: String { LibgpiodV1.version }
}
