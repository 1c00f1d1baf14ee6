import Glibc

/// What the store needs to know of the clock when it writes a payment, a
/// dedup record or a nonce, so that pruning by age holds for real elapsed
/// time however the wall clock jumped (docs/soundboxd.md, "Dedup and a
/// clock that jumps"): whether the wall clock is synchronised, which boot
/// this is, and the time since it began (CLOCK_BOOTTIME, which counts
/// suspend and never jumps).
public struct ClockReading: Sendable, Equatable {
    public var synced: Bool
    public var boot: String
    /// Milliseconds since this boot began.
    public var sinceBoot: Int64

    public init(synced: Bool, boot: String, sinceBoot: Int64) {
        self.synced = synced; self.boot = boot; self.sinceBoot = sinceBoot
    }

    /// A clock taken as synchronised (tests of the store; a read-only store writes nothing).
    public static let trusted: @Sendable () -> ClockReading = { @Sendable in .now(synced: true) }

    /// This boot's id and time, the wall clock as `synced` says.
    public static func now(synced: Bool, boot: String = ClockReading.bootID) -> ClockReading {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return ClockReading(synced: synced, boot: boot, sinceBoot: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    /// The kernel's id of this boot (`/proc/sys/kernel/random/boot_id`).
    public static let bootID: String = {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "unknown" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        let id = n > 0 ? String(decoding: buffer[..<n], as: UTF8.self).filter { !$0.isWhitespace } : ""
        return id.isEmpty ? "unknown" : id
    }()
}
