import CGPIOBridge
import Glibc

/// A failed libgpiod call: which call, on which line, and the errno.
public struct GPIOError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let line: String
    public let errno: Int32
    public init(call: String, line: String, errno: Int32) { self.call = call; self.line = line; self.errno = errno }
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

    var biasCode: Int32 {
        switch bias {
        case .asIs: Int32(SB_GPIO_BIAS_AS_IS.rawValue)
        case .disable: Int32(SB_GPIO_BIAS_DISABLE.rawValue)
        case .pullUp: Int32(SB_GPIO_BIAS_PULL_UP.rawValue)
        case .pullDown: Int32(SB_GPIO_BIAS_PULL_DOWN.rawValue)
        }
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

/// GPIO access behind a small protocol (tests of the daemon's panel logic
/// need no chip; `Libgpiod` is the real one).
public protocol GPIOBackend: Sendable {
    func input(_ spec: LineSpec, consumer: String) throws(GPIOError) -> any EdgeInput
    func output(_ spec: LineSpec, consumer: String, initial: Bool) throws(GPIOError) -> any LogicalOutput
}

/// libgpiod, v1 (Debian 12, Raspberry Pi OS bookworm: 1.6) or v2 (Debian
/// 13 trixie: 2.x) as found when this binary was built (CGPIOBridge).
public struct Libgpiod: GPIOBackend {
    public init() {}
    public func input(_ spec: LineSpec, consumer: String) throws(GPIOError) -> any EdgeInput {
        try Line(spec, consumer: consumer, output: false, initial: false)
    }
    public func output(_ spec: LineSpec, consumer: String, initial: Bool) throws(GPIOError) -> any LogicalOutput {
        try Line(spec, consumer: consumer, output: true, initial: initial)
    }
}

/// One requested line (and its chip), released in deinit.
final class Line: EdgeInput, LogicalOutput {
    let spec: LineSpec
    private let handle: OpaquePointer

    init(_ spec: LineSpec, consumer: String, output: Bool, initial: Bool) throws(GPIOError) {
        self.spec = spec
        var call: UnsafePointer<CChar>?
        var holder = [CChar](repeating: 0, count: 64)
        guard let h = sb_gpio_request(spec.chip, UInt32(spec.offset), output, spec.activeLow, spec.biasCode, initial,
                                      consumer, &call, &holder, holder.count) else {
            let e = errno
            var name = call.map { String(cString: $0) } ?? "sb_gpio_request"
            if name.hasPrefix("gpiod_chip_open") { name += "(\(spec.chip))" }
            // A line someone else holds: say who.
            let who = String(decoding: holder.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if e == EBUSY && !who.isEmpty { name += " (held by '\(who)')" }
            throw GPIOError(call: name, line: spec.description, errno: e)
        }
        handle = h
    }
    deinit { sb_gpio_release(handle) }

    private func error(_ call: String) -> GPIOError { GPIOError(call: call, line: spec.description, errno: errno) }

    var fd: Int32 { sb_gpio_fd(handle) }

    func readEdges() throws(GPIOError) -> [(active: Bool, time: Double)] {
        var out: [(Bool, Double)] = []
        var rising = false
        var ns: UInt64 = 0
        while true {
            let n = sb_gpio_read_edge(handle, &rising, &ns)
            if n < 0 { throw error("read edge event") }
            if n == 0 { return out }
            out.append((rising, Double(ns) / 1e9))
        }
    }

    func level() throws(GPIOError) -> Bool {
        let v = sb_gpio_get(handle)
        guard v >= 0 else { throw error("get value") }
        return v == 1
    }

    func set(_ on: Bool) throws(GPIOError) {
        guard sb_gpio_set(handle, on) == 0 else { throw error("set value") }
    }
}

public enum GPIO {
    /// "1.6.3", "2.2.1": the libgpiod this binary runs against.
    public static var libraryVersion: String { String(cString: sb_gpio_library_version()) }
    /// 1 or 2: the libgpiod API this binary was built for.
    public static var api: Int { Int(sb_gpio_api()) }
}
