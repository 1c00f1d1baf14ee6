import Glibc

/// The one PCM format the engine produces: signed 16-bit little-endian,
/// interleaved. Every clip is decoded into it once, at load.
public struct PCMFormat: Hashable, Sendable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int, channels: Int = 1) { self.sampleRate = sampleRate; self.channels = channels }
    public static let standard = PCMFormat(sampleRate: 22050, channels: 1)

    public func frames(milliseconds ms: Int) -> Int { sampleRate * ms / 1000 }
    public func duration(samples: Int) -> Double { Double(samples / channels) / Double(sampleRate) }
    public var description: String { "S16_LE \(sampleRate) Hz \(channels == 1 ? "mono" : "\(channels) ch")" }
}

/// Volume 0...10 in 2.5 dB steps (10 = unchanged, 0 = silent), applied
/// with integer arithmetic so that a rendering is byte-exact and repeatable.
public enum Volume {
    public static let range = 0...10
    /// Q15 gains for levels 10, 9, ... 1: 10^(-2.5·k/20) · 32768.
    static let gains: [Int32] = [32768, 24573, 18427, 13818, 10362, 7771, 5827, 4370, 3277, 2457]

    public static func apply(_ level: Int, to samples: inout [Int16]) {
        let level = min(max(level, 0), 10)
        if level == 10 { return }
        if level == 0 { for i in samples.indices { samples[i] = 0 }; return }
        let g = gains[10 - level]
        samples.withUnsafeMutableBufferPointer { buf in
            for i in buf.indices { buf[i] = Int16(truncatingIfNeeded: (Int32(buf[i]) * g + 16384) >> 15) }
        }
    }
}

enum Silence {
    /// Below this absolute sample value a frame counts as silence (≈ -40 dBFS).
    static let threshold: Int16 = 330
    /// Audio kept on each side of the first and last loud frame.
    static let marginMs = 5

    /// The index of the first sample above the threshold, nil for silence.
    static func firstLoud(_ s: [Int16]) -> Int? { s.firstIndex { abs(Int32($0)) > threshold } }

    /// Cuts leading and trailing silence, keeping a short margin so that
    /// soft onsets and decays are not clipped.
    static func trim(_ s: [Int16], format: PCMFormat) -> [Int16] {
        let ch = format.channels
        guard let first = firstLoud(s),
              let last = s.lastIndex(where: { abs(Int32($0)) > threshold }) else { return [] }
        let margin = format.frames(milliseconds: marginMs) * ch
        let start = max(0, (first / ch) * ch - margin)
        let end = min(s.count, (last / ch + 1) * ch + margin)
        return Array(s[start..<end])
    }
}

/// The built-in chime: what plays in place of a clip that no pack can
/// supply, so an announcement is never silently skipped.
enum Chime {
    static func samples(format: PCMFormat) -> [Int16] {
        var out: [Int16] = []
        for freq in [880.0, 660.0] {
            let n = format.frames(milliseconds: 140), fade = format.frames(milliseconds: 10)
            for i in 0..<n {
                let env = Double(min(i, n - 1 - i, fade)) / Double(fade)
                let v = Int16(9000 * env * sin(2 * Double.pi * freq * Double(i) / Double(format.sampleRate)))
                out.append(contentsOf: repeatElement(v, count: format.channels))
            }
        }
        return out
    }
}

/// RIFF/WAVE with a 44-byte header.
public enum WAV {
    public static let headerBytes = 44
    /// The most sample bytes a header can count: its RIFF size (36 + data)
    /// is 32 bits; whole frames of up to 8 bytes (4 channels).
    public static let maxDataBytes = (Int(UInt32.max) - 36) / 8 * 8

    /// `dataBytes` must be at most `maxDataBytes`.
    public static func header(format: PCMFormat, dataBytes: Int) -> [UInt8] {
        var h: [UInt8] = []
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { h += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { h += $0 } }
        h += Array("RIFF".utf8); u32(36 + dataBytes); h += Array("WAVE".utf8)
        h += Array("fmt ".utf8); u32(16); u16(1); u16(format.channels); u32(format.sampleRate)
        u32(format.sampleRate * format.channels * 2); u16(format.channels * 2); u16(16)
        h += Array("data".utf8); u32(dataBytes)
        return h
    }

    /// What a header `header(format:dataBytes:)` wrote says, or nil if
    /// `bytes` is not exactly such a header (another layout, other chunks,
    /// another sample format, or not a WAV at all).
    public static func parse(header bytes: [UInt8]) -> (format: PCMFormat, dataBytes: Int)? {
        guard bytes.count == headerBytes else { return nil }
        func le(_ at: Int, _ n: Int) -> Int { bytes[at..<at + n].reversed().reduce(0) { $0 << 8 | Int($1) } }
        let format = PCMFormat(sampleRate: le(24, 4), channels: le(22, 2))
        // Bounds first: header() must not be asked to write what does not fit its fields.
        guard (1...4).contains(format.channels), (1...768_000).contains(format.sampleRate), le(40, 4) <= maxDataBytes else { return nil }
        return header(format: format, dataBytes: le(40, 4)) == bytes ? (format, le(40, 4)) : nil
    }

    /// Whether `bytes` start as a RIFF/WAVE file of any layout.
    static func isRIFFWave(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 12 && bytes[0..<4].elementsEqual("RIFF".utf8) && bytes[8..<12].elementsEqual("WAVE".utf8)
    }
}

/// One open file descriptor, closed in `deinit`. Reads and writes at
/// explicit offsets (pread/pwrite): never the file position.
final class PosixFile {
    let fd: Int32
    let path: String

    init(path: String, flags: Int32) throws(AudioError) {
        self.path = path
        fd = open(path, flags | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AudioError(call: "open(\(path))", code: errno) }
    }
    deinit { close(fd) }

    func status() throws(AudioError) -> stat {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw AudioError(call: "fstat(\(path))", code: errno) }
        return st
    }

    func truncate(to size: Int) throws(AudioError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw AudioError(call: "ftruncate(\(path))", code: errno) }
    }

    /// Up to `count` bytes from `offset` (fewer at the end of the file).
    func read(_ count: Int, at offset: Int) throws(AudioError) -> [UInt8] {
        var buf = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = buf.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw AudioError(call: "pread(\(path))", code: errno) }
            if n == 0 { break }
            done += n
        }
        return Array(buf[..<done])
    }

    func write(_ bytes: [UInt8], at offset: Int) throws(AudioError) {
        if let e = bytes.withUnsafeBytes({ writeAll($0, at: offset) }) { throw e }
    }
    func write(_ samples: [Int16], at offset: Int) throws(AudioError) {
        // The engine's format is little-endian and so is every target we build for.
        if let e = samples.withUnsafeBytes({ writeAll($0, at: offset) }) { throw e }
    }
    private func writeAll(_ b: UnsafeRawBufferPointer, at offset: Int) -> AudioError? {
        var done = 0
        while done < b.count {
            let n = Glibc.pwrite(fd, b.baseAddress! + done, b.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                return AudioError(call: "pwrite(\(path))", code: errno)
            }
            done += n
        }
        return nil
    }
}

/// An audio failure: the C call that failed and its code (an errno for
/// POSIX calls, a negative ALSA code or an mpg123 code otherwise).
public struct AudioError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let code: Int32
    public let message: String

    public init(call: String, code: Int32, message: String? = nil) {
        self.call = call
        self.code = code
        self.message = message ?? String(cString: strerror(code < 0 ? -code : code))
    }
    public var description: String { "\(call) failed: \(message) (\(code))" }
}
