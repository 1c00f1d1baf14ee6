import CALSA
import Glibc
import Soundbox

/// How a `play` ended.
public enum PlayOutcome: Sendable, Equatable {
    /// Every frame was handed to the device and drained.
    case completed
    /// `shouldStop` said stop (mute, shutdown) before the end; what was
    /// queued in the device was dropped.
    case interrupted
}

/// Where announcements go: a sound card, a WAV file, or nowhere in real
/// time. Implementations are used from one thread at a time.
public protocol AudioOutput: AnyObject {
    /// For logs and `doctor`: "alsa:default", "wav:/tmp/x.wav", "null".
    var name: String { get }
    /// Plays `samples` and returns when they have been played (or dropped).
    /// `shouldStop` is polled once per period, about every 20–50 ms.
    func play(_ samples: [Int16], format: PCMFormat, shouldStop: () -> Bool) throws(AudioError) -> PlayOutcome
    /// Underruns and suspends recovered from so far (0 for outputs without a device).
    var recoveries: Int { get }
    /// When the last `play` handed the device its first audible sample
    /// (Unix µs; nil for outputs without a device, or all silence): what
    /// latency is measured to (bench/README.md), not the first write of
    /// silence, nor when the sound leaves the speaker.
    var firstAudibleUs: Int64? { get }
    /// Lets go of the device or file; the next `play` opens it again if needed.
    func close()
}

extension AudioOutput {
    public var recoveries: Int { 0 }
    public var firstAudibleUs: Int64? { nil }
    public func close() {}
}

/// Which output to build; from config (`audio.output`, `audio.device`,
/// `audio.wav_file`) or a command's flags.
public enum OutputChoice: Sendable, Equatable {
    case alsa(device: String)
    /// `.append` (the daemon's audio.wav_file) or `.replace` (render -o).
    case wav(path: String, mode: WAVFileOutput.Mode = .append)
    /// Imitates playback time without a device (`realtime: false` returns at once).
    case null(realtime: Bool)

    /// The output `audio.output` selects.
    public init(_ config: Config) {
        switch config[.audioOutput] {
        case "wav": self = .wav(path: config.wavFile)
        case "null": self = .null(realtime: config[.audioNullRealtime])
        default: self = .alsa(device: config[.audioDevice])
        }
    }

    public func make() throws(AudioError) -> any AudioOutput {
        switch self {
        case .alsa(let device): ALSAOutput(device: device)
        case .wav(let path, let mode): try WAVFileOutput(path: path, mode: mode)
        case .null(let realtime): NullOutput(realtime: realtime)
        }
    }
}

/// A PCM device through alsa-lib. Keeps the device open between
/// announcements; reopens it after an error (a USB speaker unplugged and
/// plugged back), trying a bounded number of times before it gives up.
public final class ALSAOutput: AudioOutput {
    public let device: String
    /// Waits before each reopen; the sum bounds how long a payment waits
    /// for a missing device before it is reported `failed`.
    public let retryDelays: [Double]
    private var pcm: OpaquePointer?
    private var openFormat: PCMFormat?
    private var periodFrames = 1024
    /// Underruns and suspends recovered from (snd_pcm_recover), for logs.
    public private(set) var recoveries = 0
    public private(set) var firstAudibleUs: Int64?

    public init(device: String, retryDelays: [Double] = [0.25, 0.5, 1, 2]) {
        self.device = device
        self.retryDelays = retryDelays
    }
    deinit { close() }

    public var name: String { "alsa:\(device)" }

    public func play(_ samples: [Int16], format: PCMFormat, shouldStop: () -> Bool) throws(AudioError) -> PlayOutcome {
        var delays = retryDelays[...]
        while true {
            do {
                try open(format)
                return try write(samples, channels: format.channels, shouldStop: shouldStop)
            } catch {
                close()
                guard let delay = delays.popFirst(), !shouldStop() else { throw error }
                pause(seconds: delay)
            }
        }
    }

    /// Closes the device; the next `play` opens it again.
    public func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
        openFormat = nil
    }

    private func open(_ format: PCMFormat) throws(AudioError) {
        if pcm != nil && openFormat == format { return }
        close()
        var handle: OpaquePointer?
        try check(snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, 0), "snd_pcm_open(\(device))")
        pcm = handle
        // 100 ms of buffer: short enough that a stop is heard at once, long
        // enough to ride over scheduling hiccups on a small board.
        try check(snd_pcm_set_params(handle, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED,
                                     UInt32(format.channels), UInt32(format.sampleRate), 1, 100_000),
                  "snd_pcm_set_params(\(format))")
        var buffer: snd_pcm_uframes_t = 0, period: snd_pcm_uframes_t = 0
        try check(snd_pcm_get_params(handle, &buffer, &period), "snd_pcm_get_params")
        periodFrames = max(64, Int(period))
        openFormat = format
    }

    private func write(_ samples: [Int16], channels: Int, shouldStop: () -> Bool) throws(AudioError) -> PlayOutcome {
        guard let pcm else { return .completed }
        let frames = samples.count / channels
        let audible = Silence.firstLoud(samples).map { $0 / channels }
        firstAudibleUs = nil
        var done = 0
        while done < frames {
            if shouldStop() {
                snd_pcm_drop(pcm)
                snd_pcm_prepare(pcm)
                return .interrupted
            }
            let n = min(periodFrames, frames - done)
            let r = samples.withUnsafeBufferPointer {
                snd_pcm_writei(pcm, $0.baseAddress! + done * channels, snd_pcm_uframes_t(n))
            }
            if r < 0 {
                // Underrun (-EPIPE), suspend (-ESTRPIPE) and -EINTR are
                // recoverable; anything else (-ENODEV: unplugged) is not.
                try check(snd_pcm_recover(pcm, Int32(r), 1), "snd_pcm_writei")
                recoveries += 1
                continue
            }
            if let audible, firstAudibleUs == nil, audible < done + Int(r) { firstAudibleUs = unixMicroseconds() }
            done += Int(r)
        }
        try check(snd_pcm_drain(pcm), "snd_pcm_drain")
        // drain leaves the PCM in SETUP state; prepare it for the next play.
        try check(snd_pcm_prepare(pcm), "snd_pcm_prepare")
        return .completed
    }

    private func check(_ rc: Int32, _ call: String) throws(AudioError) {
        if rc < 0 { throw AudioError(call: call, code: rc, message: String(cString: snd_strerror(rc))) }
    }
}

/// Appends every announcement to one WAV file, keeping its header valid
/// after each, for demos on machines without a sound card and for tests
/// (docs/audio.md).
///
/// The daemon may run as root and the path may lie in a folder others can
/// write, so only a regular file of its own is written: never through a
/// symbolic link (O_NOFOLLOW), never a FIFO, device, folder or socket
/// (opened O_NONBLOCK so that none can block, then fstat), never a file
/// with a second hard link (it may be another file's name). An existing
/// file is continued only if it is a WAV this output wrote, in the same
/// format; anything else is refused, not overwritten. Samples go at
/// explicit offsets (pwrite) right after what the header counts, so a tail
/// left by a crash between samples and header is written over; the header
/// is rewritten after each announcement. At 4 GiB (the header's 32-bit
/// sizes) the file stops growing: `play` fails with EFBIG. It also stops
/// (ENOSPC) before it would leave less than `keepFree` bytes free on its
/// disk: by default it is in `state.dir`, beside the queue, which must
/// never be crowded out by a recording.
public final class WAVFileOutput: AudioOutput {
    public enum Mode: Sendable { case append, replace }
    public let path: String
    private let file: PosixFile
    private var format: PCMFormat?
    private var dataBytes = 0
    /// The free space on the file's disk it never writes into.
    public let keepFree: Int
    /// 64 MiB: the queue's database and its WAL need about 20 MB.
    public static let defaultKeepFree = 64 << 20

    /// Opens (or creates) the file; `.replace` empties it (soundboxctl render -o).
    public init(path: String, mode: Mode = .append, keepFree: Int = WAVFileOutput.defaultKeepFree) throws(AudioError) {
        self.path = path
        self.keepFree = keepFree
        do throws(AudioError) {
            file = try PosixFile(path: path, flags: O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            // ELOOP: a symbolic link; EISDIR: a folder; ENXIO: a socket.
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT != S_IFREG else { throw error }
            let through = st.st_mode & S_IFMT == S_IFLNK ? "through" : "to"
            throw AudioError(call: error.call, code: error.code,
                             message: "\(path) is \(Files.kind(mode: st.st_mode, path: path)), not a regular file; refusing to write \(through) it")
        }
        let st = try file.status()
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw refusal(EINVAL, "is \(Files.kind(mode: st.st_mode, path: path)), not a regular file; refusing to write to it")
        }
        guard st.st_nlink == 1 else {
            throw refusal(EMLINK, "has \(st.st_nlink) hard links (it may be another file's name); refusing to write to it")
        }
        if mode == .replace {
            try file.truncate(to: 0)
            return
        }
        guard st.st_size > 0 else { return }
        let head = try file.read(WAV.headerBytes, at: 0)
        guard let (format, counted) = WAV.parse(header: head) else {
            throw refusal(EINVAL, WAV.isRIFFWave(head)
                ? "is a WAV file of another layout (not 16-bit PCM with a 44-byte header); refusing to overwrite it"
                : "is not a WAV file (no RIFF/WAVE header); refusing to overwrite it")
        }
        self.format = format
        // What the header counts, whole frames, at most what is there.
        let frame = format.channels * 2
        dataBytes = min(counted, Int(st.st_size) - WAV.headerBytes) / frame * frame
    }

    public var name: String { "wav:\(path)" }

    public func play(_ samples: [Int16], format: PCMFormat, shouldStop: () -> Bool) throws(AudioError) -> PlayOutcome {
        if let existing = self.format, existing != format {
            throw refusal(EINVAL, in: "play", "holds \(existing), not \(format); refusing to mix them (move it away or set another audio.wav_file)")
        }
        let bytes = samples.count * 2
        guard dataBytes + bytes <= WAV.maxDataBytes else {
            throw refusal(EFBIG, in: "play", "is full: a WAV file holds at most 4 GiB (\(dataBytes) bytes of samples, \(bytes) more asked for); move it away to record more")
        }
        var fs = statvfs()
        if fstatvfs(file.fd, &fs) == 0 {
            let free = Int(fs.f_bavail) * Int(fs.f_frsize)
            guard free - bytes >= keepFree else {
                throw refusal(ENOSPC, in: "play", "is not written: its disk has \(free >> 20) MiB free and the output keeps \(keepFree >> 20) MiB for the queue; move it away or free space to record more")
            }
        }
        if self.format == nil {
            try file.write(WAV.header(format: format, dataBytes: 0), at: 0)
            self.format = format
        }
        try file.write(samples, at: WAV.headerBytes + dataBytes)
        dataBytes += bytes
        try file.write(WAV.header(format: format, dataBytes: dataBytes), at: 0)
        return .completed
    }

    private func refusal(_ code: Int32, in call: String = "open", _ why: String) -> AudioError {
        AudioError(call: "\(call)(\(path))", code: code, message: "\(path) \(why)")
    }
}

/// No device: takes as long as the sound would (unless `realtime` is
/// false), so the rest of the daemon behaves as on a board with a speaker.
public final class NullOutput: AudioOutput {
    public let realtime: Bool
    public private(set) var framesPlayed = 0
    public init(realtime: Bool = true) { self.realtime = realtime }
    public var name: String { "null" }

    public func play(_ samples: [Int16], format: PCMFormat, shouldStop: () -> Bool) throws(AudioError) -> PlayOutcome {
        let frames = samples.count / format.channels
        let chunk = format.frames(milliseconds: 20)
        var done = 0
        while done < frames {
            if shouldStop() { return .interrupted }
            let n = min(chunk, frames - done)
            if realtime { pause(seconds: Double(n) / Double(format.sampleRate)) }
            done += n
            framesPlayed += n
        }
        return .completed
    }
}

func unixMicroseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}

/// Sleeps through signals (EINTR) for the whole time.
func pause(seconds: Double) {
    var left = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    var rest = timespec()
    while nanosleep(&left, &rest) != 0 && errno == EINTR { left = rest }
}
