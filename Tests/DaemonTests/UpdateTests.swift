import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox

/// The box's side of a system update (image/README.md, Updates), with a
/// real broker, a real HTTP server (Tests/DaemonTests/bundle-server.py:
/// ranges, drops, slow sends), real curl and a real soundboxd. What cannot
/// exist here — two root slots, RAUC, a reboot — is the stand-in helper
/// below, speaking the helper's protocol (`update.helper`); the image's real
/// helper runs under QEMU (systest/image).
final class UpdateRig {
    let link: Link
    let system: String
    let helper: String
    let bundles: String
    var servers: [Process] = []

    /// A running system of `version` on slot A.
    init(version: String = "0.1.0", config: [String: String] = [:]) throws {
        let scratch = Scratch()
        system = scratch.path + "/system"
        bundles = scratch.path + "/bundles"
        helper = scratch.path + "/update-helper"
        for d in [system, bundles] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        try Self.helperScript.write(toFile: helper, atomically: true, encoding: .utf8)
        chmod(helper, 0o755)
        link = try Link(config: ["update.helper": helper, "update.reboot_deadline_s": "0"].merging(config) { $1 })
        link.daemon.environment["SOUNDBOX_UPDATE_TEST"] = system
        link.daemon.environment["SOUNDBOX_TEST_BOOT_ID"] = "boot-1"
        try write("version", version)
        try write("slot", "A")
        try write("default", "A")
        withExtendedLifetime(scratch) {}
        keep = scratch
    }
    private var keep: Scratch?

    deinit { for s in servers where s.isRunning { kill(s.processIdentifier, SIGKILL); s.waitUntilExit() } }

    func write(_ name: String, _ text: String) throws { try (text + "\n").write(toFile: system + "/" + name, atomically: true, encoding: .utf8) }
    func read(_ name: String) -> String? {
        (try? String(contentsOfFile: system + "/" + name, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    /// The helper's calls, in order ("install", "arm", "reboot", "commit").
    var calls: [String] { (read("calls") ?? "").split(separator: "\n").map(String.init) }

    /// A bundle the stand-in accepts ("SIGNED BUNDLE"), padded to `size` bytes.
    func bundle(_ name: String, version: String, size: Int = 300_000, signed: Bool = true) throws -> (path: String, sha256: String) {
        var text = (signed ? "SIGNED BUNDLE\n" : "NOT SIGNED\n") + "version=\(version)\n"
        text += String(repeating: "x", count: max(0, size - text.utf8.count))
        let path = bundles + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let run = try CommandRun(["/usr/bin/sha256sum", path])
        return (path, String(run.stdout.prefix(64)))
    }

    /// Serves `file`; returns its URL and the server's request log.
    func serve(_ file: String, _ options: [String] = []) throws -> (url: String, requests: () -> [String]) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [Build.root + "/Tests/DaemonTests/bundle-server.py", file] + options
        let out = Pipe()
        p.standardOutput = out
        let lines = Lines()
        try runWithDefaultSignals(p)
        servers.append(p)
        let handle = out.fileHandleForReading
        Thread.detachNewThread {
            var pending = Data()
            while case let chunk = handle.availableData, !chunk.isEmpty {
                pending.append(chunk)
                while let nl = pending.firstIndex(of: 0x0a) {
                    lines.add(String(decoding: pending[pending.startIndex..<nl], as: UTF8.self))
                    pending = pending[(nl + 1)...]
                }
            }
        }
        guard lines.wait(count: 1, timeout: 20), let port = Int(lines.all[0]) else { throw TestFailure("bundle-server did not start") }
        return ("http://127.0.0.1:\(port)/" + (file as NSString).lastPathComponent, { Array(lines.all.dropFirst()) })
    }

    /// The next boot (the updater tells a restart from a reboot by the boot id).
    func newBoot() {
        boots += 1
        link.daemon.environment["SOUNDBOX_TEST_BOOT_ID"] = "boot-\(boots)"
    }
    private var boots = 1

    /// A bundle of `version` served with `options`, and the daemon started.
    func startServing(_ version: String, size: Int, _ options: [String] = []) throws -> (sha256: String, url: String, requests: () -> [String]) {
        let b = try bundle("b.raucb", version: version, size: size)
        let s = try serve(b.path, options)
        try link.start()
        return (b.sha256, s.url, s.requests)
    }

    func cmd(_ json: String) throws { try link.backend.publish(link.backend.topics.cmd, json) }
    /// The backend's signed-or-not `cmd update` (payment.signing is off here).
    func update(_ id: String, _ url: String, _ sha256: String, _ version: String) throws {
        try cmd(#"{"cmd":"update","id":"\#(id)","url":"\#(url)","sha256":"\#(sha256)","version":"\#(version)"}"#)
    }

    /// The update's receipts for `id`, in order.
    func statuses(_ id: String) -> [String] { link.backend.receipts(for: id) }
    func waitFor(_ id: String, _ status: String, timeout: Double = 60) -> Bool {
        link.backend.waitUntil(timeout: timeout) { self.statuses(id).contains(status) }
    }
    func failedReason(_ id: String) -> String? {
        link.backend.receipts.last { $0["id"] as? String == id && $0["status"] as? String == "failed" }?["reason"] as? String
    }

    /// The firmware's part: the daemon stopped (the reboot), the armed slot
    /// booted once with the version installed there.
    func rebootIntoArmed() throws {
        _ = link.daemon.stop()
        newBoot()
        let next = try #require(read("next"))
        try write("slot", next)
        try write("version", try #require(read("installed")))
        try? FileManager.default.removeItem(atPath: system + "/next")
        try link.start()
    }

    /// The helper's protocol, played without slots: `info` reads the
    /// system folder; `install` accepts a "SIGNED BUNDLE" (progress lines,
    /// then the version it holds goes to `installed`); `arm` names the
    /// other slot; `commit` makes the booted slot the default; `reboot`
    /// only records it (the test plays the firmware).
    static let helperScript = #"""
        #!/bin/bash
        set -eu
        S=${SOUNDBOX_UPDATE_TEST:?}
        echo "$1" >> "$S/calls"
        other() { [ "$(cat "$S/slot")" = A ] && echo B || echo A; }
        case "$1" in
        info)
          echo "version=$(cat "$S/version")"; echo "slot=$(cat "$S/slot")"
          [ ! -f "$S/boot_reason" ] || echo "boot_reason=$(cat "$S/boot_reason")"
          [ ! -f "$S/rollback" ] || echo "rollback=$(cat "$S/rollback")" ;;
        install)
          [ -f "$2" ] || { echo "no bundle at $2" >&2; exit 1; }
          head -1 "$2" | grep -qx 'SIGNED BUNDLE' || { echo "signature verification failed: not signed by a key of the keyring" >&2; exit 1; }
          v=$(sed -n 's/^version=//p' "$2" | head -1)
          if [ ! -e "${SOUNDBOX_UPDATE_DIR:?}/force" ] && dpkg --compare-versions "$v" lt "$(cat "$S/version")"; then
            echo "older than what runs: bundle $v, running $(cat "$S/version")" >&2; exit 1
          fi
          for p in 0 10 20 40 60 80 100; do echo " $p% Installing"; done
          echo "$v" > "$S/installed"; echo "installed $v" ;;
        arm) other > "$S/next"; echo "slot=$(other)" ;;
        disarm) rm -f "$S/next" ;;
        commit) cp "$S/slot" "$S/default" ;;
        reboot) touch "$S/rebooted" ;;
        *) echo "unknown: $1" >&2; exit 2 ;;
        esac
        """#
}

/// Lines read by another thread, awaited.
final class Lines: @unchecked Sendable {
    private let cond = NSCondition()
    private var lines: [String] = []
    func add(_ l: String) { cond.lock(); lines.append(l); cond.broadcast(); cond.unlock() }
    var all: [String] { cond.lock(); defer { cond.unlock() }; return lines }
    func wait(count: Int, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        cond.lock(); defer { cond.unlock() }
        while lines.count < count { if !cond.wait(until: deadline) { return false } }
        return true
    }
}

@Suite(.serialized) struct UpdateTests {
    /// The whole good path over MQTT: downloaded, verified, installed at a
    /// quiet moment, the other slot armed, rebooted, committed once
    /// connected on the new slot; payments before, during and after are
    /// each spoken once.
    @Test func goodUpdateOverMQTT() throws {
        let rig = try UpdateRig()
        let b = try rig.bundle("soundbox-0.2.0-rpi-arm64.raucb", version: "0.2.0", size: 3_000_000)
        let server = try rig.serve(b.path, ["--rate", "1000000"])
        try rig.link.start()
        try rig.link.backend.pay(id: "before", amount: "1.00")
        try rig.update("U1", server.url, b.sha256, "0.2.0")
        try rig.link.backend.pay(id: "during", amount: "2.00")
        #expect(rig.waitFor("U1", "waiting to reboot"), "\(rig.statuses("U1"))")
        let seen = rig.statuses("U1")
        #expect(seen.first == "downloading" && seen.contains("installing"), "\(seen)")
        // The reboot is asked for once the queue is empty (no event to await outside the daemon: the helper's file).
        #expect(pollUntil(timeout: 30) { FileManager.default.fileExists(atPath: rig.system + "/rebooted") })
        #expect(rig.calls.suffix(3) == ["install", "arm", "reboot"], "\(rig.calls)")
        #expect(rig.link.backend.waitForReceipts(["before", "during"], ["played"], timeout: 30))
        // The bundle is gone from the state partition once it is in the slot.
        #expect(!FileManager.default.fileExists(atPath: rig.link.daemon.dir + "/state/update/download.raucb"))
        // Progress receipts: every 10 %, rising, to 100, for the download and then the install.
        let mine = rig.link.backend.receipts.filter { $0["id"] as? String == "U1" }
        // (The download's steps are read once a second: a 3 s download has at least three.)
        for (phase, least) in [("downloading", 3), ("installing", 5)] {
            let steps = mine.filter { $0["status"] as? String == phase }.compactMap { $0["progress"] as? Int }
            #expect(steps.first == 0 && steps.last == 100 && steps == steps.sorted() && steps.count >= least, "\(phase): \(steps)")
        }

        try rig.rebootIntoArmed()
        #expect(rig.waitFor("U1", "committed"), "\(rig.statuses("U1"))")
        #expect(rig.read("default") == "B")
        let status = try rig.link.daemon.until("status") { $0["update"]?.hasPrefix("committed") == true }
        #expect(status["version"] == "0.2.0" && status["slot"] == "B", "\(status.pairs.pairs)")
        let mqtt = rig.link.backend.status
        #expect(mqtt?["version"] as? String == "0.2.0" && mqtt?["slot"] as? String == "B", "\(String(describing: mqtt))")
        try rig.link.backend.pay(id: "after", amount: "3.00")
        #expect(rig.link.backend.waitForReceipts(["after"], ["played"], timeout: 30))
        for id in ["before", "during", "after"] { #expect(rig.link.backend.receipts(for: id).filter { $0 == "played" }.count == 1) }
        _ = rig.link.daemon.stop()
    }

    /// A connection dropped half-way: the download resumes with a Range
    /// request and the bundle still verifies.
    @Test func downloadResumesAfterADrop() throws {
        let rig = try UpdateRig()
        let server = try rig.startServing("0.2.0", size: 1_000_000, ["--drop-after", "300000"])
        try rig.update("U2", server.url, server.sha256, "0.2.0")
        #expect(rig.waitFor("U2", "waiting to reboot"), "\(rig.statuses("U2")) \(rig.failedReason("U2") ?? "")")
        let gets = server.requests().filter { $0.hasPrefix("GET") }
        #expect(gets.count >= 2 && gets.dropFirst().contains { $0.contains("range=bytes=") && !$0.contains("range=bytes=0-") }, "\(gets)")
        _ = rig.link.daemon.stop()
    }

    /// A power cut (SIGKILL) in the middle of the download: the next start
    /// carries on from what is on disk.
    @Test func downloadResumesAfterAPowerCut() throws {
        let rig = try UpdateRig()
        let server = try rig.startServing("0.2.0", size: 1_500_000, ["--rate", "300000"])
        try rig.update("U3", server.url, server.sha256, "0.2.0")
        let part = rig.link.daemon.dir + "/state/update/download.raucb.part"
        #expect(pollUntil(timeout: 30) { (try? FileManager.default.attributesOfItem(atPath: part)[.size] as? Int ?? 0) ?? 0 > 200_000 })
        rig.link.daemon.kill9()
        try rig.link.start()
        #expect(rig.waitFor("U3", "waiting to reboot", timeout: 90), "\(rig.statuses("U3")) \(rig.failedReason("U3") ?? "")")
        let gets = server.requests().filter { $0.hasPrefix("GET") }
        #expect(gets.last?.contains("range=bytes=") == true && gets.last?.contains("range=bytes=0-") == false, "\(gets)")
        _ = rig.link.daemon.stop()
    }

    /// Refused before anything is installed: a download that is not the
    /// bundle named (sha256), one the server cut short and would not
    /// resume, a bundle the system refuses (signature), one older than what
    /// runs, an unknown size: a failed receipt with the reason each time,
    /// the install never called, the queue flowing.
    @Test func refusedUpdates() throws {
        let rig = try UpdateRig(version: "0.3.0")
        try rig.link.start()
        let good = try rig.bundle("g.raucb", version: "0.4.0")
        let served = try rig.serve(good.path)
        let wrong = String(repeating: "ab", count: 32)
        try rig.update("R1", served.url, wrong, "0.4.0")
        #expect(rig.waitFor("R1", "failed"))
        #expect(rig.failedReason("R1")?.contains("sha256 mismatch") == true, "\(rig.failedReason("R1") ?? "")")

        try rig.update("R2", served.url, good.sha256, "0.2.9")
        #expect(rig.waitFor("R2", "failed"))
        #expect(rig.failedReason("R2")?.contains("older than what runs: 0.2.9, running 0.3.0") == true, "\(rig.failedReason("R2") ?? "")")

        let unsigned = try rig.bundle("u.raucb", version: "0.4.0", signed: false)
        let u = try rig.serve(unsigned.path)
        try rig.update("R3", u.url, unsigned.sha256, "0.4.0")
        #expect(rig.waitFor("R3", "failed"))
        #expect(rig.failedReason("R3")?.contains("signature verification failed") == true, "\(rig.failedReason("R3") ?? "")")
        #expect(!rig.calls.contains("arm") && !rig.calls.contains("reboot"), "\(rig.calls)")

        // A truncated bundle, served as if whole: its sha256 is not the command's.
        let cut = rig.bundles + "/cut.raucb"
        try Data(try Data(contentsOf: URL(fileURLWithPath: good.path)).prefix(200_000)).write(to: URL(fileURLWithPath: cut))
        let truncated = try rig.serve(cut)
        try rig.update("R4", truncated.url, good.sha256, "0.4.0")
        #expect(rig.waitFor("R4", "failed"))
        #expect(rig.failedReason("R4")?.contains("sha256 mismatch") == true, "\(rig.failedReason("R4") ?? "")")

        // A server that answers 404.
        try rig.cmd(#"{"cmd":"update","id":"R6","url":"\#(served.url).missing","sha256":"\#(good.sha256)","version":"0.4.0"}"#)
        #expect(rig.waitFor("R6", "failed"))
        #expect(rig.failedReason("R6")?.contains("could not reach the bundle") == true, "\(rig.failedReason("R6") ?? "")")

        try rig.cmd(#"{"cmd":"update","id":"R5","url":"\#(served.url)","sha256":"\#(good.sha256)","version":"0.4.0","size":\#(UpdateRequest.maxSize + 1)}"#)
        try rig.link.backend.pay(id: "still-flowing", amount: "5.00")
        #expect(rig.link.backend.waitForReceipts(["still-flowing"], ["played"], timeout: 30))
        #expect(rig.statuses("R5").isEmpty, "a malformed update command is logged and ignored: \(rig.statuses("R5"))")
        // Nothing left behind on the state partition.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: rig.link.daemon.dir + "/state/update")) ?? []
        #expect(left.filter { $0.hasPrefix("download") }.isEmpty, "\(left)")
        _ = rig.link.daemon.stop()
    }

    /// Not enough room on the state partition (a real 80 MiB file
    /// system: a tmpfs in the daemon's own mount namespace): refused before
    /// the download starts, with the numbers. A write that fails half-way
    /// (a file-size limit on the daemon, as a full disk fails curl's write):
    /// failed, the partial download deleted.
    @Test func notEnoughSpace() throws {
        let rig = try UpdateRig()
        let state = rig.link.daemon.dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        rig.link.daemon.wrapper = ["/usr/bin/unshare", "-m", "--propagation", "private"] + (geteuid() == 0 ? [] : ["-r"])
            + ["/bin/sh", "-c", #"mount -t tmpfs -o size=80m soundbox-test "$0" && exec "$@""#, state]
        try rig.link.start()
        let b = try rig.bundle("big.raucb", version: "0.2.0", size: 1000)
        let s = try rig.serve(b.path)
        try rig.cmd(#"{"cmd":"update","id":"S1","url":"\#(s.url)","sha256":"\#(b.sha256)","version":"0.2.0","size":40000000}"#)
        #expect(rig.waitFor("S1", "failed"))
        let reason = rig.failedReason("S1") ?? ""
        #expect(reason.contains("not enough space on the state partition: the bundle needs 38 MiB more and 64 MiB stay for the queue"), "\(reason)")
        #expect(!rig.calls.contains("install") && s.requests().filter { $0.hasPrefix("GET") }.isEmpty)
        _ = rig.link.daemon.stop()

        rig.link.daemon.wrapper = ["/usr/bin/prlimit", "--fsize=400000", "--"]
        try rig.link.start()
        let big = try rig.bundle("b2.raucb", version: "0.2.0", size: 1_000_000)
        let s2 = try rig.serve(big.path)
        try rig.update("S2", s2.url, big.sha256, "0.2.0")
        #expect(rig.waitFor("S2", "failed"))
        #expect(rig.failedReason("S2")?.contains("could not write the download") == true, "\(rig.failedReason("S2") ?? "")")
        #expect(!FileManager.default.fileExists(atPath: state + "/update/download.raucb.part"))
        #expect(!rig.calls.contains("install"))
        try rig.link.backend.pay(id: "after-full", amount: "1.00")
        #expect(rig.link.backend.waitForReceipts(["after-full"], ["played"], timeout: 30))
        _ = rig.link.daemon.stop()
    }

    /// A tried slot that did not come up: the box is back on the old slot
    /// (the firmware's one-shot try is over) and says so, with the reason
    /// the image's health check left.
    @Test func rolledBackIsReported() throws {
        let rig = try UpdateRig()
        let b = try rig.bundle("b.raucb", version: "0.2.0")
        let s = try rig.serve(b.path)
        try rig.link.start()
        try rig.update("B1", s.url, b.sha256, "0.2.0")
        #expect(rig.waitFor("B1", "waiting to reboot"))
        // The firmware tries slot B only at the reboot the daemon asks for. The receipt comes
        // before the daemon records that it asks (`reboot_boot`, then `helper reboot`): stopped
        // in between, the next start is a restart before the reboot, armed again, still waiting.
        // (No event to await outside the daemon: the helper's file, as in goodUpdateOverMQTT.)
        try #require(pollUntil(timeout: 30) { FileManager.default.fileExists(atPath: rig.system + "/rebooted") }, "\(rig.calls)")
        _ = rig.link.daemon.stop()
        // Slot B was tried and never committed; the health check marked it and rebooted to A.
        try rig.write("rollback", "soundboxd was not ready within 600 s on slot B")
        try rig.write("boot_reason", "rollback")
        rig.newBoot()
        try rig.link.start()
        #expect(rig.waitFor("B1", "rolled back"), "\(rig.statuses("B1"))")
        let status = try rig.link.daemon.until("status") { $0["update"]?.hasPrefix("rolled back") == true }
        #expect(status["slot"] == "A" && status["version"] == "0.1.0" && status["boot_reason"] == "rollback")
        #expect(status["update_reason"]?.contains("not ready within 600 s") == true, "\(status.pairs.pairs)")
        #expect(!rig.calls.contains("commit"))
        let doctor = try CommandRun([Build.soundboxctl, "doctor"], environment: ["SOUNDBOX_SOCKET": rig.link.daemon.socket])
        #expect(doctor.stdout.contains("WARN update") && doctor.stdout.contains("last boot: rollback")
                    && doctor.stdout.contains("was rolled back: soundboxd was not ready within 600 s"), "\(doctor.stdout)")
        _ = rig.link.daemon.stop()
    }

    /// A power cut during the new slot's first boot (the one-shot try used,
    /// no verdict from the health check): the box is back on the old slot
    /// and tries again, at most three times in all; then rolled back. A try
    /// that gets through commits as usual.
    @Test func anInterruptedTryIsTriedAgain() throws {
        let rig = try UpdateRig()
        let b = try rig.bundle("b.raucb", version: "0.2.0")
        let s = try rig.serve(b.path)
        try rig.link.start()
        try rig.update("T1", s.url, b.sha256, "0.2.0")
        let reboots = { rig.calls.filter { $0 == "reboot" }.count }
        #expect(pollUntil(timeout: 30) { reboots() == 1 })
        /// The firmware boots the armed slot once; the power is cut before anything decides.
        func cutDuringTheTry() throws {
            _ = rig.link.daemon.stop()
            try rig.write("boot_reason", "power cut")
            try? FileManager.default.removeItem(atPath: rig.system + "/next")
            rig.newBoot()
            try rig.link.start()
        }
        for again in 2...3 {
            try cutDuringTheTry()
            #expect(pollUntil(timeout: 30) { reboots() == again }, "\(rig.calls)")
            let status = try rig.link.daemon.until("status") { $0["update_reason"]?.contains("(\(again) of 3)") == true }
            #expect(status["update"]?.hasPrefix("waiting to reboot") == true && status["slot"] == "A", "\(status.pairs.pairs)")
            #expect(status["update_reason"]?.contains("last boot: power cut") == true, "\(status.pairs.pairs)")
        }
        #expect(rig.calls.filter { $0 == "arm" }.count == 3, "\(rig.calls)")
        // Once more: three tries and none got through.
        try cutDuringTheTry()
        #expect(rig.waitFor("T1", "rolled back"), "\(rig.statuses("T1"))")
        let status = try rig.link.daemon.until("status") { $0["update"]?.hasPrefix("rolled back") == true }
        #expect(status["update_reason"]?.contains("did not come up in 3 tries") == true, "\(status.pairs.pairs)")
        #expect(reboots() == 3 && !rig.calls.contains("commit"), "\(rig.calls)")
        _ = rig.link.daemon.stop()

        // A second rollout of the same version, cut once, then booted for real: committed.
        try rig.link.start()
        try rig.update("T2", s.url, b.sha256, "0.2.0")
        #expect(pollUntil(timeout: 30) { reboots() == 4 })
        try cutDuringTheTry()
        #expect(pollUntil(timeout: 30) { reboots() == 5 }, "\(rig.calls)")
        try rig.rebootIntoArmed()
        #expect(rig.waitFor("T2", "committed"), "\(rig.statuses("T2"))")
        #expect(rig.read("default") == "B" && rig.read("version") == "0.2.0")
        _ = rig.link.daemon.stop()
    }

    /// By hand: soundboxctl copies the bundle into the update folder and
    /// follows it; a second request while one is under way is refused; a
    /// downgrade needs --force.
    @Test func technicianInstallsAFile() throws {
        let rig = try UpdateRig(version: "0.3.0")
        try rig.link.start()
        let older = try rig.bundle("soundbox-0.2.0-generic-amd64.raucb", version: "0.2.0")
        let env = ["SOUNDBOX_SOCKET": rig.link.daemon.socket]
        let refused = try CommandRun([Build.soundboxctl, "update", "install", older.path, "--wait"], environment: env)
        #expect(refused.status == 1 && refused.stdout.contains("older than what runs"), "\(refused.stdout) \(refused.stderr)")
        let forced = try CommandRun([Build.soundboxctl, "update", "install", older.path, "--force", "--wait"], environment: env, timeout: 60)
        #expect(forced.status == 0 && forced.stdout.contains("waiting to reboot"), "\(forced.stdout) \(forced.stderr)")
        let again = try CommandRun([Build.soundboxctl, "update", "install", older.path], environment: env)
        #expect(again.status == 1 && again.stderr.contains("already waiting to reboot"), "\(again.stderr)")
        let status = try CommandRun([Build.soundboxctl, "--json", "update", "status"], environment: env)
        #expect(status.stdout.contains(#""state":"waiting to reboot""#), "\(status.stdout)")
        let hostile = try CommandRun([Build.soundboxctl, "update", "install", "../../etc/passwd.raucb"], environment: env)
        #expect(hostile.status == 1, "\(hostile.stdout) \(hostile.stderr)")
        let raw = try rig.link.daemon.request("update", "install", "../x.raucb")
        #expect(raw.ack?.message.contains("not a bundle's file name") == true, "\(String(describing: raw.ack))")
        _ = rig.link.daemon.stop()
    }

    /// A download cancelled by the technician stops at once and leaves nothing.
    @Test func cancelADownload() throws {
        let rig = try UpdateRig()
        let s = try rig.startServing("0.2.0", size: 2_000_000, ["--rate", "100000"])
        try rig.update("C1", s.url, s.sha256, "0.2.0")
        #expect(rig.waitFor("C1", "downloading"))
        _ = try rig.link.daemon.until("update", "status") { $0["state"] == "downloading" }
        let r = try rig.link.daemon.request("update", "cancel")
        #expect(r.ack == nil, "\(String(describing: r.ack))")
        #expect(rig.waitFor("C1", "failed"))
        #expect(rig.failedReason("C1") == "cancelled")
        #expect(!FileManager.default.fileExists(atPath: rig.link.daemon.dir + "/state/update/download.raucb.part"))
        _ = rig.link.daemon.stop()
    }
}
