import CVoiceTools
import Glibc
import Soundbox
import SoundboxAudio

/// `soundboxctl voice build SRC OUT --lang L` (voices/README.md): a voice
/// pack from a folder of recordings named by clip (`一.wav`,
/// `rupees.flac`, any rate, mono or stereo). Each clip is read (libsndfile),
/// resampled to the pack's rate (libsoxr), cut of its leading and trailing
/// silence, optionally equalised for a small speaker, brought to one
/// loudness (ITU-R BS.1770 through libebur128) under a true-peak ceiling,
/// and encoded as a gapless mp3 (libmp3lame); then the manifest is written
/// and the pack checked as soundboxd will load it.
public enum VoiceBuilder {
    public struct Options: Sendable {
        /// Loudness every clip is brought to, LUFS.
        public var targetLUFS = -16
        /// No clip's true peak above this, dBTP (a small class-D amplifier never clips).
        public var truePeakCeiling = -1
        /// The clarity EQ: a high-pass below 150 Hz and a presence lift.
        public var eq = false
        public var sampleRate = 22050
        /// LAME's VBR quality (0 best … 9), as `lame -V`.
        public var quality = 4
        /// Where the recordings came from, for the manifest's `source`.
        public var source: String?
        public init() {}
    }

    /// The clarity EQ's settings (also written into the manifest).
    public static let highPassHz = 150, presenceHz = 3000, presenceDB = 3, presenceQ = 1
    /// Below this (≈ −45 dBFS) a sample counts as silence when trimming; a
    /// margin is kept on each side so soft onsets are not clipped.
    static let silence: Float = 0.0056, marginMs = 10

    public struct Clip: Sendable, Encodable, Equatable {
        public var clip: String
        public var file: String
        /// The recording's loudness (after trimming and resampling), and the clip's in the pack.
        public var sourceLUFS: Double
        public var lufs: Double
        public var truePeakDBTP: Double
        public var gainDB: Double
        /// The true-peak ceiling kept it below the target.
        public var peakLimited: Bool
        public var seconds: Double
        enum CodingKeys: String, CodingKey {
            case clip, file, sourceLUFS = "source_lufs", lufs, truePeakDBTP = "true_peak_dbtp", gainDB = "gain_db", peakLimited = "peak_limited", seconds
        }
    }

    public struct Report: Sendable, Encodable {
        public var pack: String
        public var lang: String
        public var clips: [Clip]
        /// Recordings not used by the grammar (left out of the pack).
        public var unused: [String]
        /// Loudest minus quietest clip, LU: before (the recordings) and after.
        public var spreadBefore: Double
        public var spreadAfter: Double
        /// The level every clip was brought to (the target, or lower when
        /// the true-peak ceiling held the peakiest clip below it).
        public var level: Double
        enum CodingKeys: String, CodingKey {
            case pack, lang, clips, unused, spreadBefore = "spread_before_lu", spreadAfter = "spread_after_lu", level = "level_lufs"
        }
    }

    public struct Failure: Error, Sendable, CustomStringConvertible, Equatable {
        public var description: String
        init(_ d: String) { description = d }
    }

    /// Recordings the builder reads, by extension.
    static let extensions = ["wav", "flac", "ogg", "aiff", "aif"]

    public static func build(source: String, output: String, lang: String, options: Options = Options()) throws(Failure) -> Report {
        if let missing = vt_load() { throw Failure(String(cString: missing)) }
        guard let grammar = Grammars.named(lang) else {
            throw Failure("unknown language '\(lang)'; grammars: \(Grammars.all.map(\.name).joined(separator: ", "))")
        }
        guard (-40 ... -5).contains(options.targetLUFS), (-12 ... 0).contains(options.truePeakCeiling) else {
            throw Failure("loudness target \(options.targetLUFS) LUFS / ceiling \(options.truePeakCeiling) dBTP: expected -40 to -5 LUFS and -12 to 0 dBTP")
        }
        guard VoicePackManifest.sampleRates.contains(options.sampleRate) else { throw Failure("\(options.sampleRate) Hz is not an mp3 rate") }
        let recordings = try Self.recordings(in: source)
        let wanted = Array(Set(grammar.clipNames)).sorted()
        let missing = wanted.filter { recordings[$0] == nil }
        guard missing.isEmpty else {
            throw Failure("\(source): \(missing.count) clip(s) of grammar \(lang) have no recording: \(missing.joined(separator: ", "))")
        }
        let unused = recordings.keys.filter { !wanted.contains($0) }.sorted()
        let name = output.split(separator: "/").last.map(String.init) ?? output
        guard ConfigKey.Kind.isPackName(name) else { throw Failure("\(output): the folder's name is the pack's name: 1-32 letters, digits, '-' or '_'") }
        guard !Files.exists(output) || Files.list(output).isEmpty else { throw Failure("\(output) exists and is not empty: choose a new folder") }
        let work = output + ".building"
        Self.remove(work)
        guard mkdir(work, 0o755) == 0 || errno == EEXIST else { throw Failure("\(work): \(String(cString: strerror(errno)))") }

        var clips: [Clip] = []
        do {
            let prepared = try wanted.map { clip throws(Failure) in try Self.prepare(clip, from: recordings[clip]!, options: options) }
            // One level for every clip, so that a sentence spliced from them
            // does not jump between words: the target, or lower if the
            // ceiling keeps the peakiest clip below it.
            let level = prepared.map { min(Double(options.targetLUFS), Double(options.truePeakCeiling) - $0.peakDB + $0.lufs) }.min()
                ?? Double(options.targetLUFS)
            for p in prepared { clips.append(try Self.encode(p, level: level, into: work, options: options)) }
            try Self.writeManifest(work + "/manifest.json", name: name, grammar: grammar, clips: clips, level: level, options: options)
        } catch {
            Self.remove(work)
            throw error
        }
        if Files.exists(output) { rmdir(output) }
        guard rename(work, output) == 0 else { throw Failure("rename \(work) → \(output): \(String(cString: strerror(errno)))") }
        let before = clips.map(\.sourceLUFS), after = clips.map(\.lufs)
        return Report(pack: output, lang: lang, clips: clips, unused: unused,
                      spreadBefore: Self.round((before.max() ?? 0) - (before.min() ?? 0)),
                      spreadAfter: Self.round((after.max() ?? 0) - (after.min() ?? 0)),
                      level: Self.round(clips.isEmpty ? 0 : after.reduce(0, +) / Double(after.count), 1))
    }

    /// Clip name → recording path; two recordings of one clip are refused.
    static func recordings(in source: String) throws(Failure) -> [String: String] {
        guard Files.exists(source) else { throw Failure("\(source): no such folder") }
        var found: [String: String] = [:]
        for file in Files.list(source).sorted() {
            guard let dot = file.lastIndex(of: "."), extensions.contains(file[file.index(after: dot)...].lowercased()) else { continue }
            let clip = String(file[..<dot])
            if let other = found[clip] { throw Failure("\(source): two recordings of clip '\(clip)': \(other) and \(file)") }
            found[clip] = file
        }
        return found.mapValues { source + "/" + $0 }
    }

    /// A clip read, resampled, trimmed and equalised, with its loudness.
    struct Prepared {
        var clip: String
        var samples: [Float]
        var lufs: Double
        var peakDB: Double
    }

    static func prepare(_ clip: String, from path: String, options: Options) throws(Failure) -> Prepared {
        var err = [CChar](repeating: 0, count: 256)
        func why() -> String { String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        var rate: Int32 = 0, frames = 0
        let fd: Int32
        do { fd = try Files.openRegular(path) } catch { throw Failure(error.description) }
        let read = vt_read_mono(fd, &rate, &frames, &err, err.count)
        close(fd)
        guard let raw = read else { throw Failure("\(path): \(why())") }
        defer { free(raw) }
        var outFrames = 0
        guard let resampled = vt_resample(raw, frames, rate, Int32(options.sampleRate), &outFrames, &err, err.count) else {
            throw Failure("\(path): \(why())")
        }
        var samples = Array(UnsafeBufferPointer(start: resampled, count: outFrames))
        free(resampled)
        samples = Self.trimmed(samples, rate: options.sampleRate)
        guard samples.count >= options.sampleRate / 50 else { throw Failure("\(path): silent (nothing above -45 dBFS)") }
        if options.eq { Self.equalise(&samples, rate: Double(options.sampleRate)) }
        let (lufs, peak) = try Self.loudness(samples, rate: options.sampleRate, path: path)
        return Prepared(clip: clip, samples: samples, lufs: lufs, peakDB: 20 * log10(max(peak, 1e-9)))
    }

    /// The clip brought to `level` LUFS, encoded, written, and decoded
    /// again to check it plays gapless at the loudness reported.
    static func encode(_ p: Prepared, level: Double, into dir: String, options: Options) throws(Failure) -> Clip {
        var err = [CChar](repeating: 0, count: 256)
        func why() -> String { String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        let gain = level - p.lufs
        let g = Float(pow(10, gain / 20))
        let pcm = p.samples.map { Int16(max(-32768, min(32767, ($0 * g * 32768).rounded()))) }
        var length = 0
        guard let mp3 = vt_encode_mp3(pcm, pcm.count, Int32(options.sampleRate), Int32(options.quality), &length, &err, err.count) else {
            throw Failure("\(p.clip): \(why())")
        }
        defer { free(mp3) }
        let file = p.clip + ".mp3"
        try Self.write(dir + "/" + file, UnsafeRawBufferPointer(start: mp3, count: length))
        // As soundboxd will hear it.
        let decoded: [Int16]
        do { decoded = try MP3Decoder().decode(path: dir + "/" + file, to: PCMFormat(sampleRate: options.sampleRate)) } catch {
            throw Failure("\(p.clip): the mp3 written does not decode: \(error)")
        }
        guard abs(decoded.count - pcm.count) <= options.sampleRate / 100 else {
            throw Failure("\(p.clip): decodes to \(decoded.count) samples, not \(pcm.count): not gapless")
        }
        let (lufs, truePeak) = try Self.loudness(decoded.map { Float($0) / 32768 }, rate: options.sampleRate, path: file)
        return Clip(clip: p.clip, file: file, sourceLUFS: Self.round(p.lufs), lufs: Self.round(lufs),
                    truePeakDBTP: Self.round(20 * log10(max(truePeak, 1e-9))), gainDB: Self.round(gain),
                    peakLimited: Double(options.truePeakCeiling) - p.peakDB + p.lufs <= level + 0.01,
                    seconds: Self.round(Double(decoded.count) / Double(options.sampleRate), 3))
    }

    /// Loudness (LUFS) and true peak (linear) of mono float samples.
    public static func loudness(_ x: [Float], rate: Int, path: String) throws(Failure) -> (lufs: Double, peak: Double) {
        if let missing = vt_load() { throw Failure(String(cString: missing)) }
        var err = [CChar](repeating: 0, count: 256)
        var lufs = 0.0, peak = 0.0
        guard vt_loudness(x, x.count, Int32(rate), &lufs, &peak, &err, err.count) == 0 else {
            throw Failure("\(path): " + String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        guard lufs.isFinite else { throw Failure("\(path): silent") }
        return (lufs, peak)
    }

    /// Cuts leading and trailing silence, keeping `marginMs` on each side.
    static func trimmed(_ s: [Float], rate: Int) -> [Float] {
        guard let first = s.firstIndex(where: { abs($0) > silence }), let last = s.lastIndex(where: { abs($0) > silence }) else { return [] }
        let margin = rate * marginMs / 1000
        return Array(s[max(0, first - margin)..<min(s.count, last + 1 + margin)])
    }

    /// The clarity EQ: a second-order Butterworth high-pass at 150 Hz and a
    /// +3 dB peaking filter at 3 kHz (Q 1), biquads from R. Bristow-Johnson's
    /// Audio EQ Cookbook. (No Debian library the builder uses has an EQ;
    /// libsox has, but would bring its effects chain and codecs for two
    /// filters.)
    static func equalise(_ x: inout [Float], rate: Double) {
        let w0 = 2 * Double.pi * Double(highPassHz) / rate, q = 1 / 2.0.squareRoot()
        let a = sin(w0) / (2 * q), c = cos(w0)
        biquad(&x, b: [(1 + c) / 2, -(1 + c), (1 + c) / 2], a: [1 + a, -2 * c, 1 - a])
        let w1 = 2 * Double.pi * Double(presenceHz) / rate, gainA = pow(10, Double(presenceDB) / 40)
        let al = sin(w1) / (2 * Double(presenceQ)), c1 = cos(w1)
        biquad(&x, b: [1 + al * gainA, -2 * c1, 1 - al * gainA], a: [1 + al / gainA, -2 * c1, 1 - al / gainA])
    }

    static func biquad(_ x: inout [Float], b: [Double], a: [Double]) {
        let b0 = b[0] / a[0], b1 = b[1] / a[0], b2 = b[2] / a[0], a1 = a[1] / a[0], a2 = a[2] / a[0]
        var x1 = 0.0, x2 = 0.0, y1 = 0.0, y2 = 0.0
        for i in x.indices {
            let x0 = Double(x[i])
            let y0 = b0 * x0 + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2
            x2 = x1; x1 = x0; y2 = y1; y1 = y0
            x[i] = Float(y0)
        }
    }

    /// manifest.json, one member per line and one clip per line (people
    /// read and diff it), clips in the grammar's order of names.
    static func writeManifest(_ path: String, name: String, grammar: any Grammar, clips: [Clip], level: Double,
                              options: Options) throws(Failure) {
        let q = JSONText.quote
        var loudness = JSONObject()
        loudness.add("target_lufs", options.targetLUFS)
        loudness.add("true_peak_dbtp", options.truePeakCeiling)
        loudness.add("level_lufs", decimal: Self.round(level, 1))
        if options.eq {
            var eq = JSONObject()
            eq.add("highpass_hz", highPassHz)
            eq.add("presence_hz", presenceHz)
            eq.add("presence_db", presenceDB)
            eq.add("presence_q", presenceQ)
            loudness.add("eq", eq)
        }
        let source = (options.source.map { $0 + "; " } ?? "")
            + "soundboxctl voice build: every clip at \(Self.round(level, 1)) LUFS (target \(options.targetLUFS)), "
            + "true peak at most \(options.truePeakCeiling) dBTP, EQ \(options.eq ? "on" : "off"), lame -V \(options.quality)"
        let members = [
            "\"format_version\": 1", "\"name\": \(q(name))", "\"language\": \(q(grammar.name))", "\"grammar\": \(q(grammar.name))",
            "\"currency\": \(q(grammar.defaultCurrency))", "\"fallback\": null",
            "\"format\": {\"codec\": \"mp3\", \"sample_rate\": \(options.sampleRate), \"channels\": 1}",
            "\"gap_ms\": \(VoicePackManifest.defaultGapMs)", "\"source\": \(q(source))", "\"loudness\": \(loudness.text)",
            "\"clips\": {\n" + clips.map { "    \(q($0.clip)): \(q($0.file))" }.joined(separator: ",\n") + "\n  }",
        ]
        try write(path, Array(("{\n" + members.map { "  " + $0 }.joined(separator: ",\n") + "\n}\n").utf8))
    }

    static func write(_ path: String, _ bytes: some Collection<UInt8>) throws(Failure) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure("\(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let data = Array(bytes)
        let n = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == data.count else { throw Failure("\(path): \(String(cString: strerror(errno)))") }
    }

    static func write(_ path: String, _ buffer: UnsafeRawBufferPointer) throws(Failure) { try write(path, Array(buffer)) }

    static func remove(_ dir: String) {
        for f in Files.list(dir) { unlink(dir + "/" + f) }
        rmdir(dir)
    }

    static func round(_ x: Double, _ places: Int = 2) -> Double {
        let p = pow(10, Double(places))
        return (x * p).rounded() / p
    }
}

/// `voice check`'s loudness: every clip as soundboxd plays it (decoded and
/// trimmed), its BS.1770 loudness and true peak, and the pack's spread.
public enum VoiceLoudness {
    public struct Clip: Sendable, Encodable, Equatable {
        public var clip: String
        public var lufs: Double
        public var truePeakDBTP: Double
        enum CodingKeys: String, CodingKey { case clip, lufs, truePeakDBTP = "true_peak_dbtp" }
    }

    public struct Report: Sendable, Encodable {
        public var clips: [Clip]
        /// Loudest minus quietest clip, LU.
        public var spread: Double
        enum CodingKeys: String, CodingKey { case clips, spread = "spread_lu" }
    }

    /// Measures a pack as `VoiceCheckReport.check` loaded it; throws when
    /// the loudness library is missing.
    public static func measure(_ pack: LoadedPack) throws(VoiceBuilder.Failure) -> Report {
        let rate = pack.manifest.format.sampleRate, channels = max(1, pack.manifest.format.channels)
        var clips: [Clip] = []
        for (clip, pcm) in pack.clips.sorted(by: { $0.key < $1.key }) where !pcm.isEmpty {
            // Mono, as the builder measures (a stereo pack's channels averaged).
            let mono = stride(from: 0, to: pcm.count - channels + 1, by: channels).map { i in
                Float((0..<channels).reduce(0) { $0 + Int(pcm[i + $1]) }) / Float(channels) / 32768
            }
            let (lufs, peak) = try VoiceBuilder.loudness(mono, rate: rate, path: clip)
            clips.append(Clip(clip: clip, lufs: VoiceBuilder.round(lufs), truePeakDBTP: VoiceBuilder.round(20 * log10(max(peak, 1e-9)))))
        }
        let l = clips.map(\.lufs)
        return Report(clips: clips, spread: VoiceBuilder.round((l.max() ?? 0) - (l.min() ?? 0)))
    }
}
