// soundboxctl words AMOUNT and render AMOUNT: what a payment would say, offline.
import FoundationEssentials
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxAudio

struct WordsResult: Encodable { var amount: String; var minor_units: Int64; var lang: String; var clips: [String] }

func words(_ args: Arguments, _ out: Output) throws(Failure) {
    let amount = try parseAmount(args)
    let g = try grammar(args)
    let clips = g.announcement(amount, channel: channel(args))
    out.emit(WordsResult(amount: amount.description, minor_units: amount.minorUnits, lang: g.name, clips: clips),
         text: clips.joined(separator: " "))
}

struct RenderResult: Encodable {
    var amount: String; var lang: String; var clips: [String]; var output: String
    var duration_ms: Int; var sample_rate: Int; var volume: Int
    var substitutions: [Substitution]
    struct Substitution: Encodable { var clip: String; var source: String }
}

func render(_ args: Arguments, _ out: Output) throws(Failure) {
    let amount = try parseAmount(args)
    let settings = try config(args)
    let lang = try language(args)
    let target: OutputChoice
    switch (args.options["-o"], args.options["--device"]) {
    case (let path?, nil): target = .wav(path: path, mode: .replace)
    case (nil, let device?): target = .alsa(device: device)
    case (nil, nil): target = OutputChoice(settings)
    default: throw usageError("render takes either -o or --device, not both")
    }
    let volumeText = args.options["--volume"] ?? "\(settings[.audioVolume])"
    guard let volume = Int(volumeText), Volume.range.contains(volume) else {
        throw usageError("--volume must be an integer 0-10, not '\(volumeText)'")
    }
    let bank = VoiceBank(directory: try voicesDirectory(args))
    let rendition: Rendition
    let clips: [String]
    do {
        let pack = try bank.load(lang)
        clips = pack.grammar.announcement(amount, channel: channel(args))
        rendition = try bank.render(clips, pack: lang, volume: volume)
    } catch {
        throw failure("voice pack '\(lang)': \(error)", code: "voice_pack")
    }
    let output: String
    do {
        let device = try target.make()
        _ = try device.play(rendition.samples, format: rendition.format, shouldStop: { false })
        output = device.name
    } catch {
        throw failure(error.description, code: "audio")
    }
    for s in rendition.substitutions {
        let from = s.pack.map { "fallback pack '\($0)'" } ?? "the built-in chime"
        printError("warning: clip '\(s.clip)' missing or broken in '\(lang)', used \(from)")
    }
    let ms = Int(rendition.duration * 1000)
    out.emit(RenderResult(amount: amount.description, lang: lang, clips: clips, output: output, duration_ms: ms,
                      sample_rate: rendition.format.sampleRate, volume: volume,
                      substitutions: rendition.substitutions.map { .init(clip: $0.clip, source: $0.pack ?? "chime") }),
         text: "\(output): \(clips.joined(separator: " ")) (\(ms) ms)")
}
