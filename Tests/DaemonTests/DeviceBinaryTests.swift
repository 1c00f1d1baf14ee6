import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxStore

/// Where image/build-deb left the device builds, as scripts/test says in the
/// environment: SOUNDBOX_DEVICE_BUILD (the build folders: amd64/release,
/// arm64/release), SOUNDBOX_DEVICE_ROOT (the trixie amd64 root, whose
/// libraries the amd64 build runs on), SOUNDBOX_DEVICE_SYSROOT (the arm64
/// sysroot). Without them (plain `swift test`) these tests are skipped.
enum DeviceBuild {
    static let env = ProcessInfo.processInfo.environment
    static let build = env["SOUNDBOX_DEVICE_BUILD"] ?? ""
    static let root = env["SOUNDBOX_DEVICE_ROOT"] ?? ""
    static let sysroot = env["SOUNDBOX_DEVICE_SYSROOT"] ?? ""
    static let qemuARM = "/usr/bin/qemu-aarch64-static", qemuX86 = "/usr/bin/qemu-x86_64-static"

    static var available: Bool {
        !build.isEmpty && FileManager.default.isExecutableFile(atPath: build + "/arm64/release/soundboxd")
            && FileManager.default.isExecutableFile(atPath: qemuARM) && FileManager.default.fileExists(atPath: sysroot + "/usr/lib")
    }

    /// The command prefix that runs a binary of `arch` on this machine:
    /// qemu-user with the target's libraries (`-L`), no binfmt_misc needed.
    static func runner(_ arch: String) -> [String] {
        arch == "arm64" ? [qemuARM, "-L", sysroot] : [qemuX86, "-L", root]
    }
    static func binary(_ arch: String, _ name: String) -> String { build + "/\(arch)/release/" + name }
}

/// The device binaries (trixie, Swift 6.0.3, Swift runtime static) as black
/// boxes: the arm64 ones under qemu-user, against a real mosquitto and
/// ALSA's file plugin (issue: the device build, "Tests").
@Suite(.enabled(if: DeviceBuild.available, "no device build: run image/build-deb (scripts/test does) with qemu-user-static installed"))
struct DeviceBinaryTests {
    /// 50 amounts rendered by the arm64 soundboxctl and by the amd64 one:
    /// the same words and length; the PCM equal but for libmpg123's arm64
    /// decoder, which differs by at most 1 (of 32768) on a few samples.
    @Test func arm64RendersWhatAmd64Renders() throws {
        let dir = Scratch()
        var rng = SplitMix64(seed: 0xA64)
        var amounts = ["0.01", "10.50", "101", "100010", "123456789.12", "99999999.99", "120000.50", "1000000000"]
        while amounts.count < 50 { amounts.append(Amount(minorUnits: Int64(1 + rng.below(999_999_999))).description) }
        var differing = 0, total = 0, worst = 0
        for (i, amount) in amounts.enumerated() {
            let lang = i % 5 == 4 ? "en-IN" : "zh-CN"
            var pcm: [[Int16]] = []
            for arch in ["amd64", "arm64"] {
                let wav = dir.path + "/\(arch)-\(i).wav"
                let r = try CommandRun(DeviceBuild.runner(arch) + [DeviceBuild.binary(arch, "soundboxctl"), "render", amount, "--lang", lang,
                                                                  "-o", wav, "--voices", Build.root + "/voices"], timeout: 120)
                #expect(r.status == 0, "\(arch) \(amount): \(r.stderr)")
                let data = try Data(contentsOf: URL(fileURLWithPath: wav))
                pcm.append(data.dropFirst(44).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) })
            }
            #expect(pcm[0].count == pcm[1].count, "\(amount): lengths differ")
            for (a, b) in zip(pcm[0], pcm[1]) where a != b {
                differing += 1
                worst = max(worst, abs(Int(a) - Int(b)))
            }
            total += pcm[0].count
        }
        print("device: arm64 vs amd64 render of \(amounts.count) amounts: \(differing) of \(total) samples differ, by at most \(worst)")
        #expect(worst <= 1, "the arm64 decoder differs by \(worst)")
        #expect(Double(differing) / Double(total) < 0.001)
    }

    /// The arm64 soundboxd end to end: a real mosquitto, ALSA's file plugin,
    /// 100 payments with duplicates, a kill -9 in the middle and a restart:
    /// every payment played, none twice but the one speaking at the kill,
    /// every receipt delivered.
    @Test func arm64DaemonEndToEnd() throws {
        let raw = Scratch()
        let link = try Link(config: ["audio.output": "alsa", "audio.device": "file:'\(raw.path)/out.raw',raw"])
        link.daemon.executable = DeviceBuild.binary("arm64", "soundboxd")
        link.daemon.wrapper = DeviceBuild.runner("arm64")
        try link.start()
        let ids = (1...100).map { "ARM\($0)" }
        for (i, id) in ids.enumerated() {
            try link.backend.pay(id: id, amount: "\(i + 1).25")
            if i % 10 == 9 { try link.backend.pay(id: ids[i - 5], amount: "1") }   // a duplicate
            if i == 49 {
                #expect(link.backend.waitForReceipts(Array(ids[0..<25]), ["played"], timeout: 120))
                link.daemon.kill9()
                try link.start()
            }
        }
        #expect(link.backend.payUntilAcknowledged(ids, amount: "1.25", every: 5, timeout: 300))
        #expect(try link.daemon.request("idle", "120").ack == nil)
        #expect(link.daemon.stop().0 == 0)
        let entries = try link.entries()
        #expect(Set(entries.map(\.payment.id)) == Set(ids) && entries.count == ids.count, "each accepted once")
        #expect(entries.allSatisfy { $0.state == .played })
        #expect(entries.filter { $0.plays > 1 }.count <= 1, "only the one speaking at the kill is spoken again")
        #expect(ids.allSatisfy { link.backend.receipts(for: $0).contains("played") })
        let size = (try? FileManager.default.attributesOfItem(atPath: raw.path + "/out.raw")[.size] as? Int) ?? 0
        #expect(size > 100 * 22050, "ALSA's file plugin got the sound: \(size) bytes")
    }
}
