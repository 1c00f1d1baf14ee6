// soundboxctl voice check DIR, voice build and voice clips: the voice packs, offline (voices/README.md).
import FoundationEssentials
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxAudio
import VoiceBuild

func voice(_ args: Arguments, _ out: Output) throws(Failure) {
    switch args.positional.first {
    case "check": try voiceCheck(args, out)
    case "build": try voiceBuild(args, out)
    case "clips": try voiceClips(args, out)
    default: throw usageError("usage: voice check DIR | voice build SRC OUT --lang L | voice clips --lang L")
    }
}

/// What a recording session must record for a grammar: every clip name it
/// can ask for, one a line, sorted (the files `voice build` wants).
func voiceClips(_ args: Arguments, _ out: Output) throws(Failure) {
    guard args.positional.count == 1 else { throw usageError("usage: voice clips --lang L") }
    let g = try grammar(args)
    let clips = Array(Set(g.clipNames)).sorted()
    out.emit(clips, text: clips.joined(separator: "\n"))
}

func voiceCheck(_ args: Arguments, _ out: Output) throws(Failure) {
    guard args.positional.count == 2 else { throw usageError("voice check needs exactly one DIR") }
    /// The check's fields, and beside them `loudness` (or `loudness_error`).
    struct Checked: Encodable {
        var check: VoiceCheckReport
        var loudness: VoiceLoudness.Report?
        var loudnessError: String?
        enum CodingKeys: String, CodingKey { case loudness, loudnessError = "loudness_error" }
        func encode(to encoder: any Encoder) throws {
            try check.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(loudness, forKey: .loudness)
            try c.encodeIfPresent(loudnessError, forKey: .loudnessError)
        }
    }
    let report = VoiceCheckReport.check(directory: args.positional[1])
    var lines = ["\(report.pack): \(report.ok ? "OK" : "FAILED") (\(report.grammar ?? "?") grammar, \(report.clips) clips)"]
    lines += report.errors.map { "error: " + ($0.clip.map { "clip '\($0)': " } ?? "") + $0.problem }
    lines += report.warnings.map { "warning: " + ($0.clip.map { "clip '\($0)': " } ?? "") + $0.problem }
    var checked = Checked(check: report)
    if report.ok, let pack = report.loaded {
        do throws(VoiceBuilder.Failure) {
            let l = try VoiceLoudness.measure(pack)
            checked.loudness = l
            lines += l.clips.map { "  \($0.clip): \(dB($0.lufs)) LUFS, true peak \(dB($0.truePeakDBTP)) dBTP" }
            lines.append("loudness spread: \(dB(l.spread)) LU (loudest minus quietest clip)")
        } catch {
            checked.loudnessError = error.description
            lines.append("loudness not measured: \(error.description)")
        }
    }
    out.emit(checked, text: lines.joined(separator: "\n"))
    if !report.ok { exit(1) }
}

/// A level to one decimal: "-16.0".
func dB(_ x: Double) -> String { String((x * 10).rounded() / 10) }

func voiceBuild(_ args: Arguments, _ out: Output) throws(Failure) {
    guard args.positional.count == 3 else { throw usageError("usage: voice build SRC OUT --lang L [--lufs N] [--true-peak N] [--eq]") }
    guard let lang = args.options["--lang"] else { throw usageError("voice build needs --lang L (\(Grammars.all.map(\.name).joined(separator: ", ")))") }
    let settings = try config(args)
    var options = VoiceBuilder.Options()
    func number(_ flag: String, _ key: IntKey) throws(Failure) -> Int {
        guard let text = args.options[flag] else { return settings[key] }
        guard let n = Int(text), key.key.kind.parse(text) != nil else {
            throw usageError("\(flag) \(text): expected \(key.key.kind.allowed)")
        }
        return n
    }
    options.targetLUFS = try number("--lufs", .voiceTargetLUFS)
    options.truePeakCeiling = try number("--true-peak", .voiceTruePeak)
    options.eq = args.flags.contains("--eq")
    options.source = args.options["--source"]
    let report: VoiceBuilder.Report
    do throws(VoiceBuilder.Failure) {
        report = try VoiceBuilder.build(source: args.positional[1], output: args.positional[2], lang: lang, options: options)
    } catch {
        throw failure(error.description, code: "voice_build")
    }
    var lines = report.clips.map { c in
        "  \(c.clip) -> \(c.file): \(dB(c.sourceLUFS)) -> \(dB(c.lufs)) LUFS, true peak \(dB(c.truePeakDBTP)) dBTP\(c.peakLimited ? " (held down by the ceiling)" : "")"
    }
    lines += report.unused.map { "warning: '\($0)' is not a clip of grammar \(lang): left out" }
    lines.append("\(report.pack): \(report.clips.count) clips at \(dB(report.level)) LUFS (target \(options.targetLUFS)\(report.level < Double(options.targetLUFS) - 0.05 ? ", held down by the \(options.truePeakCeiling) dBTP ceiling on the peakiest clip" : "")); spread \(dB(report.spreadBefore)) LU in the recordings, \(dB(report.spreadAfter)) LU in the pack")
    out.emit(report, text: lines.joined(separator: "\n"))
    let check = VoiceCheckReport.check(directory: report.pack)
    guard check.ok else { throw failure("the pack built does not load: \(check.errors.map(\.problem).joined(separator: "; "))", code: "voice_build") }
}

/// `config keys`: every key, its default, what is allowed and who may change it.
