import Foundation
import Soundbox
import SoundboxAudio
import Testing
import TestSupport
import VoiceBuild

/// The fourteen packs that ship (voices/, made by voices/make-voices.sh
/// from espeak-ng's voices): each whole for its grammar, at one loudness,
/// every clip sounding and none longer than its letters take to say (a
/// voice that lacks a letter spells its name: seconds of it), and the
/// sentences a payment, today's total and the offline summary make spoken
/// from the pack's own clips.
@Suite struct ShippedPackTests {
    static let packs = Grammars.all.map(\.name)

    /// What a clip's letters are: its scalars but for vowel signs, viramas
    /// and other marks, the joiners and the "_" between the words of a phrase.
    static func letters(_ clip: String) -> Int {
        clip.unicodeScalars.filter { u in
            switch u.properties.generalCategory {
            case .nonspacingMark, .spacingMark, .enclosingMark, .format: false
            default: u != "_"
            }
        }.count
    }

    @Test(arguments: packs)
    func wholeAtOneLoudnessAndEveryClipAWord(_ name: String) throws {
        let report = VoiceCheckReport.check(directory: Ctl.voices + "/" + name)
        #expect(report.ok, "\(report.errors)")
        let pack = try #require(report.loaded)
        let grammar = try #require(Grammars.named(name))
        #expect(Set(pack.clips.keys) == Set(grammar.clipNames), "the pack has every clip of its grammar, and only those")
        let loudness = try VoiceLoudness.measure(pack)
        #expect(loudness.spread <= 0.5, "\(name): spread \(loudness.spread) LU")
        let rate = Double(pack.manifest.format.sampleRate)
        // Chinese and English clips are syllables and words, not letters: no bound by letters.
        let byLetters = !["zh-CN", "en-IN"].contains(name)
        for (clip, pcm) in pack.clips.sorted(by: { $0.key < $1.key }) {
            let seconds = Double(pcm.count) / rate
            let peak = pcm.lazy.map { abs(Int32($0)) }.max() ?? 0
            #expect(seconds >= 0.05 && peak > 3000, "\(name) \(clip): \(seconds) s, peak \(peak)")
            let most = 0.5 + 0.15 * Double(Self.letters(clip))
            #expect(!byLetters || seconds <= most, "\(name) \(clip): \(seconds) s for \(Self.letters(clip)) letters (at most \(most) s)")
        }
        let bank = VoiceBank(directory: Ctl.voices)
        let total = Amount(minorUnits: 1_234_567_89)
        for sentence in [grammar.announcement(Amount(minorUnits: 98_765_43), channel: .alipay),
                         grammar.announcement(Amount(minorUnits: 1_00), channel: .local),
                         grammar.summary(count: 37, total: total), grammar.offlineSummary(count: 12, total: total)] {
            let r = try bank.render(sentence, pack: name, volume: 6)
            #expect(r.substitutions.isEmpty, "\(name): \(sentence.joined(separator: " ")): \(r.substitutions)")
            #expect(r.duration > 0.3 * Double(sentence.count), "\(name): \(r.duration) s for \(sentence.count) clips")
        }
    }

    /// `voices/make-voices.sh te-IN` makes the shipped te-IN pack again, byte
    /// for byte (the same espeak-ng, libsndfile, libsoxr, libebur128 and
    /// lame as Debian 12's).
    @Test func aPackIsMadeAgainByteForByte() throws {
        let tmp = Scratch()
        let run = try CommandRun(["/bin/bash", Ctl.voices + "/make-voices.sh", "te-IN"],
                                 environment: ProcessInfo.processInfo.environment.merging(
                                    ["SOUNDBOXCTL": Ctl.binary, "SOUNDBOX_VOICES_OUT": tmp.path]) { $1 },
                                 timeout: 300)
        #expect(run.status == 0, "\(run.stderr)")
        let shipped = Ctl.voices + "/te-IN", made = tmp.path + "/te-IN"
        let files = try FileManager.default.contentsOfDirectory(atPath: shipped).sorted()
        #expect(try FileManager.default.contentsOfDirectory(atPath: made).sorted() == files)
        for file in files {
            #expect(FileManager.default.contents(atPath: made + "/" + file) == FileManager.default.contents(atPath: shipped + "/" + file), "\(file)")
        }
    }
}
