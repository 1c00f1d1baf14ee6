// ~490 lines: the stand-in helper (the image helper's protocol, played in bash) and its rig beside the scenarios, each a box's whole update with a real broker and server.
import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox

/// The box's side of a system update (image/README.md, Updates), with a
/// real broker, a real HTTP server (Tests/DaemonTests/bundle-server.py:
/// slow sends, errors) and a real soundboxd. What cannot exist here — two
/// root slots, RAUC streaming into one, a reboot — is the stand-in helper
/// below, speaking the helper's protocol (`update.helper`); the image's real
/// helper and RAUC run under QEMU (systest/image).
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
    /// What the update folder holds (on the daemon's state partition).
    var updateFolder: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: link.daemon.dir + "/state/update")) ?? []).sorted() }
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
    /// system folder; `install` accepts a "SIGNED BUNDLE" of the version the
    /// request named (progress lines, then the version it holds goes to
    /// `installed`), read from its URL or its path; `arm` names the
    /// other slot; `commit` makes the booted slot the default; `reboot`
    /// only records it (the test plays the firmware).
    static let helperScript = #"""
        #!/bin/bash
        set -eu
        S=${SOUNDBOX_UPDATE_TEST:?}
        echo "$1" >> "$S/calls"
        [ "$1" != install ] || echo "$2" > "$S/source"
        other() { [ "$(cat "$S/slot")" = A ] && echo B || echo A; }
        case "$1" in
        info)
          echo "version=$(cat "$S/version")"; echo "slot=$(cat "$S/slot")"
          [ ! -f "$S/boot_reason" ] || echo "boot_reason=$(cat "$S/boot_reason")"
          [ ! -f "$S/rollback" ] || echo "rollback=$(cat "$S/rollback")" ;;
        install)
          # As RAUC: a URL is read as it is installed (here whole, then checked), a file where it is.
          case "$2" in
            http://*|https://*) b=$S/streamed
              echo " 0% Installing"
              curl -sSf -o "$b" "$2" 2>"$S/curl.err" & echo $! > "$S/curl.pid"
              wait $! || { echo "could not read the bundle: $(cat "$S/curl.err")" >&2; exit 1; } ;;
            /*) b=$2; [ -f "$b" ] || { echo "no bundle at $2" >&2; exit 1; } ;;
            *) echo "not a URL or an absolute path: $2" >&2; exit 1 ;;
          esac
          head -1 "$b" | grep -qx 'SIGNED BUNDLE' || { echo "signature verification failed: not signed by a key of the keyring" >&2; exit 1; }
          v=$(sed -n 's/^version=//p' "$b" | head -1)
          asked() { sed -n "s/^$1=//p" "${SOUNDBOX_UPDATE_DIR:?}/request" 2>/dev/null | head -1; }
          want=$(asked version)
          [ -z "$want" ] || [ "$want" = "$v" ] || { echo "the bundle is version $v, not the $want the update named" >&2; exit 1; }
          if [ "$(asked force)" != yes ] && dpkg --compare-versions "$v" lt "$(cat "$S/version")"; then
            echo "older than what runs: bundle $v, running $(cat "$S/version")" >&2; exit 1
          fi
          for p in 0 10 20 40 60 80 100; do echo " $p% Installing"; done
          echo "$v" > "$S/installed"; echo "installed $v" ;;
        arm) other > "$S/next"; echo "slot=$(other)" ;;
        disarm) rm -f "$S/next" ;;
        cancel) [ ! -f "$S/curl.pid" ] || kill "$(cat "$S/curl.pid")" ;;
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
    /// The whole good path over MQTT: installed at a quiet moment (streamed:
    /// nothing of the bundle on the state partition), the other slot armed,
    /// rebooted, committed once connected on the new slot; payments before,
    /// during and after are each spoken once.
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
        #expect(seen.first == "installing" && !seen.contains("downloading"), "\(seen)")
        // The reboot is asked for once the queue is empty (no event to await outside the daemon: the helper's file).
        #expect(pollUntil(timeout: 30) { FileManager.default.fileExists(atPath: rig.system + "/rebooted") })
        #expect(rig.calls.suffix(3) == ["install", "arm", "reboot"], "\(rig.calls)")
        #expect(rig.link.backend.waitForReceipts(["before", "during"], ["played"], timeout: 30))
        // Nothing of the bundle was kept on the state partition: the update folder holds the record only.
        #expect(rig.updateFolder == ["state"], "\(rig.updateFolder)")
        // Progress receipts: every 10 %, rising, to 100.
        let steps = rig.link.backend.receipts.filter { $0["id"] as? String == "U1" && $0["status"] as? String == "installing" }
            .compactMap { $0["progress"] as? Int }
        #expect(steps.first == 0 && steps.last == 100 && steps == steps.sorted() && steps.count >= 5, "\(steps)")

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

    /// A power cut (SIGKILL) in the middle of the install: the next start
    /// installs again from the URL (RAUC writes the slot from the start).
    @Test func anInstallStartsOverAfterAPowerCut() throws {
        let rig = try UpdateRig()
        let server = try rig.startServing("0.2.0", size: 1_500_000, ["--rate", "300000"])
        try rig.update("U3", server.url, server.sha256, "0.2.0")
        #expect(rig.waitFor("U3", "installing"))
        #expect(pollUntil(timeout: 30) { server.requests().contains { $0.hasPrefix("GET") } })
        rig.link.daemon.kill9()
        try rig.link.start()
        #expect(rig.waitFor("U3", "waiting to reboot", timeout: 90), "\(rig.statuses("U3")) \(rig.failedReason("U3") ?? "")")
        #expect(rig.calls.filter { $0 == "install" }.count == 2, "\(rig.calls)")
        #expect(server.requests().filter { $0.hasPrefix("GET") }.count >= 2, "\(server.requests())")
        _ = rig.link.daemon.stop()
    }

    /// Refused, each with its reason in a failed receipt, nothing armed, the
    /// queue flowing: a bundle of another version than the command named
    /// (a server sending another signed release), one older than what runs
    /// (before anything is fetched), one the system refuses (signature), a
    /// URL the server does not have, an impossible size.
    @Test func refusedUpdates() throws {
        let rig = try UpdateRig(version: "0.3.0")
        try rig.link.start()
        let good = try rig.bundle("g.raucb", version: "0.4.0")
        let served = try rig.serve(good.path)
        try rig.update("R1", served.url, good.sha256, "0.4.1")
        #expect(rig.waitFor("R1", "failed"))
        #expect(rig.failedReason("R1")?.contains("the bundle is version 0.4.0, not the 0.4.1 the update named") == true, "\(rig.failedReason("R1") ?? "")")

        try rig.update("R2", served.url, good.sha256, "0.2.9")
        #expect(rig.waitFor("R2", "failed"))
        #expect(rig.failedReason("R2")?.contains("older than what runs: 0.2.9, running 0.3.0") == true, "\(rig.failedReason("R2") ?? "")")

        let unsigned = try rig.bundle("u.raucb", version: "0.4.0", signed: false)
        let u = try rig.serve(unsigned.path)
        try rig.update("R3", u.url, unsigned.sha256, "0.4.0")
        #expect(rig.waitFor("R3", "failed"))
        #expect(rig.failedReason("R3")?.contains("signature verification failed") == true, "\(rig.failedReason("R3") ?? "")")
        #expect(!rig.calls.contains("arm") && !rig.calls.contains("reboot"), "\(rig.calls)")

        // A server that answers 404.
        try rig.cmd(#"{"cmd":"update","id":"R6","url":"\#(served.url).missing","sha256":"\#(good.sha256)","version":"0.4.0"}"#)
        #expect(rig.waitFor("R6", "failed"))
        #expect(rig.failedReason("R6")?.contains("could not read the bundle") == true && rig.failedReason("R6")?.contains("404") == true,
                "\(rig.failedReason("R6") ?? "")")

        try rig.cmd(#"{"cmd":"update","id":"R5","url":"\#(served.url)","sha256":"\#(good.sha256)","version":"0.4.0","size":\#(UpdateRequest.maxSize + 1)}"#)
        try rig.link.backend.pay(id: "still-flowing", amount: "5.00")
        #expect(rig.link.backend.waitForReceipts(["still-flowing"], ["played"], timeout: 30))
        #expect(rig.statuses("R5").isEmpty, "a malformed update command is logged and ignored: \(rig.statuses("R5"))")
        // Nothing left behind on the state partition.
        #expect(rig.updateFolder == ["state"], "\(rig.updateFolder)")
        _ = rig.link.daemon.stop()
    }

    /// A bundle bigger than all the room on the state partition (a real
    /// 8 MiB file system: a tmpfs in the daemon's own mount namespace)
    /// installs: streamed into the slot, it needs none.
    @Test func anUpdateNeedsNoRoomOnTheStatePartition() throws {
        let rig = try UpdateRig()
        let state = rig.link.daemon.dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        rig.link.daemon.wrapper = ["/usr/bin/unshare", "-m", "--propagation", "private"] + (geteuid() == 0 ? [] : ["-r"])
            + ["/bin/sh", "-c", #"mount -t tmpfs -o size=8m soundbox-test "$0" && exec "$@""#, state]
        let s = try rig.startServing("0.2.0", size: 12_000_000)
        try rig.cmd(#"{"cmd":"update","id":"S1","url":"\#(s.url)","sha256":"\#(s.sha256)","version":"0.2.0","size":12000000}"#)
        #expect(rig.waitFor("S1", "waiting to reboot"), "\(rig.statuses("S1")) \(rig.failedReason("S1") ?? "")")
        _ = rig.link.daemon.stop()
    }

    /// Links planted in the update folder by a member of group soundbox
    /// (the folder is theirs too) are never written through: the record's
    /// and the request's temporary files, and the download earlier versions
    /// kept there, pointing at the queue's database.
    @Test func linksInTheUpdateFolderAreNotFollowed() throws {
        let rig = try UpdateRig()
        let folder = rig.link.daemon.dir + "/state/update"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let victim = rig.link.daemon.dir + "/victim"
        try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
        for name in ["state.tmp", "request.tmp", "download.raucb.part", "download.raucb", "request"] {
            try FileManager.default.createSymbolicLink(atPath: folder + "/" + name, withDestinationPath: victim)
        }
        let s = try rig.startServing("0.2.0", size: 200_000)
        try rig.update("L1", s.url, s.sha256, "0.2.0")
        #expect(rig.waitFor("L1", "waiting to reboot"), "\(rig.statuses("L1")) \(rig.failedReason("L1") ?? "")")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
        #expect(rig.updateFolder == ["state"], "\(rig.updateFolder)")
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

    /// By hand: soundboxctl has the bundle installed where it is (no copy:
    /// a refused one leaves nothing) and follows it; a second request while
    /// one is under way is refused; a downgrade needs --force; a path that
    /// is not an absolute bundle's is refused.
    @Test func technicianInstallsAFile() throws {
        let rig = try UpdateRig(version: "0.3.0")
        try rig.link.start()
        let older = try rig.bundle("soundbox-0.2.0-generic-amd64.raucb", version: "0.2.0")
        let env = ["SOUNDBOX_SOCKET": rig.link.daemon.socket]
        let refused = try CommandRun([Build.soundboxctl, "update", "install", older.path, "--wait"], environment: env)
        #expect(refused.status == 1 && refused.stdout.contains("older than what runs"), "\(refused.stdout) \(refused.stderr)")
        #expect(rig.updateFolder == ["state"], "a refused install leaves nothing: \(rig.updateFolder)")
        #expect(FileManager.default.fileExists(atPath: older.path))
        // Asked by a relative path with a detour: soundboxd gets it absolute and plain.
        let detour = "../" + (rig.bundles as NSString).lastPathComponent + "/" + (older.path as NSString).lastPathComponent
        let forced = try CommandRun([Build.soundboxctl, "update", "install", detour, "--force", "--wait"], environment: env,
                                    timeout: 60, directory: rig.system)
        #expect(forced.status == 0 && forced.stdout.contains("waiting to reboot"), "\(forced.stdout) \(forced.stderr)")
        #expect(rig.read("source") == URL(fileURLWithPath: older.path).resolvingSymlinksInPath().path, "\(rig.read("source") ?? "-")")
        let again = try CommandRun([Build.soundboxctl, "update", "install", older.path], environment: env)
        #expect(again.status == 1 && again.stderr.contains("already waiting to reboot"), "\(again.stderr)")
        let status = try CommandRun([Build.soundboxctl, "--json", "update", "status"], environment: env)
        #expect(status.stdout.contains(#""state":"waiting to reboot""#), "\(status.stdout)")
        let hostile = try CommandRun([Build.soundboxctl, "update", "install", "../../etc/passwd.raucb"], environment: env)
        #expect(hostile.status == 1, "\(hostile.stdout) \(hostile.stderr)")
        for path in ["../x.raucb", "/a/../x.raucb", "/a//x.raucb", "x.raucb", "/etc/passwd", "/a/x.raucb\u{1b}[2J.raucb"] {
            let raw = try rig.link.daemon.request("update", "install", path)
            #expect(raw.ack?.message.contains("not a bundle's absolute path") == true, "\(path): \(String(describing: raw.ack))")
        }
        _ = rig.link.daemon.stop()
    }

    /// A streamed install stopped by the technician (soundboxctl) or the
    /// backend (a signed `update-cancel`, for its own id only): at once,
    /// failed "cancelled", nothing armed, the queue flowing.
    @Test func anInstallIsCancelled() throws {
        let rig = try UpdateRig()
        let s = try rig.startServing("0.2.0", size: 2_000_000, ["--rate", "100000"])
        try rig.update("C1", s.url, s.sha256, "0.2.0")
        // Under way: the bundle is being read (no event to await outside the daemon: the server's log).
        #expect(pollUntil(timeout: 30) { s.requests().contains { $0.hasPrefix("GET") } })
        let r = try rig.link.daemon.request("update", "cancel")
        #expect(r.ack == nil, "\(String(describing: r.ack))")
        #expect(rig.waitFor("C1", "failed", timeout: 10), "\(rig.statuses("C1"))")
        #expect(rig.failedReason("C1") == "cancelled")
        #expect(rig.calls.contains("cancel") && !rig.calls.contains("arm"), "\(rig.calls)")

        // The backend's: another id is not this update; its own stops it.
        try rig.update("C2", s.url, s.sha256, "0.2.0")
        #expect(pollUntil(timeout: 30) { s.requests().filter { $0.hasPrefix("GET") }.count == 2 })
        try rig.cmd(#"{"cmd":"update-cancel","id":"C9"}"#)
        try rig.link.backend.pay(id: "between", amount: "1.00")
        #expect(rig.link.backend.waitForReceipts(["between"], ["played"], timeout: 30))
        #expect(rig.link.daemon.log(run: 1).contains("no update C9 is under way"), "the other id was refused")
        try rig.cmd(#"{"cmd":"update-cancel","id":"C2"}"#)
        #expect(rig.waitFor("C2", "failed", timeout: 10), "\(rig.statuses("C2"))")
        #expect(rig.failedReason("C2") == "cancelled" && !rig.calls.contains("arm"), "\(rig.calls)")
        _ = rig.link.daemon.stop()
    }

    /// A server that trickles (3 bytes a second, so curl never times out):
    /// stopped once its progress has not moved for update.install_stall_s,
    /// failed with that reason well before the overall deadline. And one
    /// that sends steadily but too slowly for update.install_deadline_s.
    @Test func aTricklingServerEndsInAFailedReceipt() throws {
        let rig = try UpdateRig(config: ["update.install_stall_s": "5", "update.install_deadline_s": "600"])
        let s = try rig.startServing("0.2.0", size: 300_000, ["--rate", "3"])
        let began = Date()
        try rig.update("T1", s.url, s.sha256, "0.2.0")
        #expect(rig.waitFor("T1", "failed", timeout: 60), "\(rig.statuses("T1"))")
        #expect(rig.failedReason("T1")?.contains("made no progress for 5 s (update.install_stall_s)") == true, "\(rig.failedReason("T1") ?? "")")
        #expect(Date().timeIntervalSince(began) < 30)
        _ = rig.link.daemon.stop()

        let late = try UpdateRig(config: ["update.install_stall_s": "600", "update.install_deadline_s": "5"])
        let slow = try late.startServing("0.2.0", size: 300_000, ["--rate", "3"])
        try late.update("T2", slow.url, slow.sha256, "0.2.0")
        #expect(late.waitFor("T2", "failed", timeout: 60), "\(late.statuses("T2"))")
        #expect(late.failedReason("T2")?.contains("did not end within 5 s (update.install_deadline_s)") == true, "\(late.failedReason("T2") ?? "")")
        #expect(!late.calls.contains("arm"))
        try late.link.backend.pay(id: "after", amount: "1.00")
        #expect(late.link.backend.waitForReceipts(["after"], ["played"], timeout: 30))
        _ = late.link.daemon.stop()
    }
}
