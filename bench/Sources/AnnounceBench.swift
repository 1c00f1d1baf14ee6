import Foundation
import Soundbox
import SoundboxAudio

/// The announce path: PCM build time, pack load time, render's peak RSS.
func announceBench(voices: String) throws {
let ctl = binDir + "/soundboxctl"


// 1. Load (decode + trim) every shipped pack, in a fresh bank each time.
var loads: [Double] = []
for _ in 0..<20 {
    let t = now()
    let bank = VoiceBank(directory: voices)
    for pack in ["zh-CN", "en-IN"] { _ = try bank.load(pack) }
    loads.append(Double(now() - t))
}

// 2. Build the PCM of the longest zh-CN announcement, packs loaded.
let bank = VoiceBank(directory: voices)
try bank.load("zh-CN")
let longest = try Amount.parse("999999999999.99", max: .wordsMax)
let clips = ChineseGrammar().announcement(longest, channel: .alipay)
var builds: [Double] = []
var samples = 0
for _ in 0..<2000 {
    let t = now()
    let r = try bank.render(ChineseGrammar().announcement(longest, channel: .alipay), pack: "zh-CN", volume: 6)
    builds.append(Double(now() - t))
    samples = r.samples.count
}

// 3. Peak RSS of `soundboxctl render`, measured by GNU time (package
// `time`): getrusage(RUSAGE_CHILDREN) here would report this process's own
// size, since Linux carries the pre-exec peak across fork and exec.
let out = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(getpid()).wav").path
let p = Process()
p.executableURL = URL(fileURLWithPath: "/usr/bin/time")
p.arguments = ["-f", "%M", ctl, "render", "999999999999.99", "-o", out, "--voices", voices]
let err = Pipe()
p.standardOutput = FileHandle.nullDevice
p.standardError = err
try p.run()
let report = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
p.waitUntilExit()
try? FileManager.default.removeItem(atPath: out)
let peakKiB = Int(report.split(separator: "\n").last ?? "") ?? -1

print("longest zh-CN announcement: \(clips.count) clips, \(samples) samples (\(String(format: "%.2f", Double(samples) / 22050)) s)")
print("build PCM, packs loaded:    median \(ms(median(builds))), min \(ms(builds.min()!))   (goal < 1 ms)")
print("load zh-CN + en-IN packs:   median \(ms(median(loads))), min \(ms(loads.min()!))   (goal < 100 ms)")
print("soundboxctl render peak RSS: \(String(format: "%.1f", Double(peakKiB) / 1024)) MB (exit \(p.terminationStatus))   (goal < 20 MB)")
}
