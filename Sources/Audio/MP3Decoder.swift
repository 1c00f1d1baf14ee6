import CMPG123
import Glibc
import Soundbox

/// Decodes whole mp3 files (regular files only) with libmpg123 into the engine's PCM format.
/// One instance owns one `mpg123_handle`; not thread-safe.
public final class MP3Decoder {
    private let handle: OpaquePointer

    public init() throws(AudioError) {
        var err: Int32 = 0
        guard let h = mpg123_new(nil, &err) else {
            throw AudioError(call: "mpg123_new", code: err, message: String(cString: mpg123_plain_strerror(err)))
        }
        handle = h
        // Quiet: errors are reported by us, with the clip's name. No resync:
        // garbage inside a file is an error, not a burst of noise.
        let flags = MPG123_QUIET.rawValue | MPG123_GAPLESS.rawValue | MPG123_NO_RESYNC.rawValue
        try check(mpg123_param2(handle, Int32(MPG123_FLAGS.rawValue), Int(flags), 0), "mpg123_param(MPG123_FLAGS)")
    }
    deinit { mpg123_delete(handle) }

    /// The file's samples at `format` (resampled and down-mixed by mpg123
    /// when the file differs). Throws when the file cannot be opened, is
    /// corrupt, or holds no audio.
    public func decode(path: String, to format: PCMFormat) throws(AudioError) -> [Int16] {
        try check(mpg123_format_none(handle), "mpg123_format_none")
        let channels = format.channels == 1 ? MPG123_MONO.rawValue : MPG123_STEREO.rawValue
        try check(mpg123_param2(handle, Int32(MPG123_FORCE_RATE.rawValue), format.sampleRate, 0), "mpg123_param(MPG123_FORCE_RATE)")
        try check(mpg123_format(handle, format.sampleRate, Int32(channels), Int32(MPG123_ENC_SIGNED_16.rawValue)), "mpg123_format")
        // Opened here, as a regular file only: mpg123_open would block for
        // ever on a FIFO (a daemon hung at start, deaf to SIGTERM).
        let fd: Int32
        do { fd = try Files.openRegular(path) } catch {
            throw AudioError(call: "open(\(path))", code: error.errno, message: error.phrase)
        }
        defer { close(fd) }   // mpg123_open_fd does not close it
        try check(mpg123_open_fd(handle, fd), "mpg123_open_fd(\(path))")
        defer { mpg123_close(handle) }

        var out: [Int16] = []
        var buffer = [Int16](repeating: 0, count: 8192)
        while true {
            var done = 0
            let rc = buffer.withUnsafeMutableBytes { mpg123_read(handle, $0.baseAddress, $0.count, &done) }
            out.append(contentsOf: buffer[0..<(done / 2)])
            if rc == MPG123_DONE.rawValue { break }
            if rc == MPG123_NEW_FORMAT.rawValue || rc == MPG123_OK.rawValue { continue }
            try check(rc, "mpg123_read(\(path))")
        }
        guard !out.isEmpty else { throw AudioError(call: "mpg123_read(\(path))", code: 0, message: "no audio frames") }
        return out
    }

    private func check(_ rc: Int32, _ call: String) throws(AudioError) {
        guard rc != MPG123_OK.rawValue else { return }
        let code = rc == MPG123_ERR.rawValue ? mpg123_errcode(handle) : rc
        throw AudioError(call: call, code: code, message: String(cString: mpg123_plain_strerror(code)))
    }
}
