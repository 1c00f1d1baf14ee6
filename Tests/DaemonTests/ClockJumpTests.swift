import Foundation
import Testing
import TestSupport
import TestRig

/// Dedup across clock jumps, against the real binary with its wall clock
/// moved by Tests/Shims/clockshift.c (docs/soundboxd.md, "Dedup and a
/// clock that jumps"). Each run is a boot of its own (SOUNDBOX_TEST_BOOT_ID).
@Suite(.serialized) struct ClockJumpTests {
    static let shim = CShim.build("Tests/Shims/clockshift.c")

    private func start(_ daemon: Daemon, boot: String, synced: Bool, shift: Int64) throws {
        try daemon.start(extraEnv: ["LD_PRELOAD": try Self.shim.get(), "SOUNDBOX_CLOCK_SHIFT_S": "\(shift)",
                                    "SOUNDBOX_TEST_BOOT_ID": boot, "SOUNDBOX_TEST_CLOCK": synced ? "synced" : "unsynced"])
    }

    private func status(_ daemon: Daemon, _ id: String) throws -> String? {
        try daemon.request("say", "3.30", "--id", id)["status"]
    }

    @Test func dedupHoldsWhateverTheClockDid() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let now = Int64(Date().timeIntervalSince1970)
        let ids = ["K1", "K2", "K3"]

        // Before time sync the clock says 1970-01-02.
        try start(daemon, boot: "boot-1", synced: false, shift: 86_400 - now)
        for id in ids { #expect(try status(daemon, id) == "queued") }
        let behind = try daemon.request("history", "1")["accepted_at"] ?? ""
        #expect((Int64(behind) ?? now) < 2 * 86_400, "the shim moved the clock (accepted at \(behind))")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)

        // Restarted with the right time: nothing pruned, a re-send is a duplicate.
        try start(daemon, boot: "boot-2", synced: true, shift: 0)
        #expect(try daemon.request("history", "10").pairs.records(startingWith: "id").count == 3)
        for id in ids { #expect(try status(daemon, id) == "duplicate", "\(id) after the clock was set") }
        #expect(daemon.stop().0 == 0)

        // Then twenty years ahead, not synchronised (set by hand): nothing pruned by it.
        try start(daemon, boot: "boot-3", synced: false, shift: 20 * 365 * 86_400)
        #expect(try status(daemon, "K1") == "duplicate")
        #expect(daemon.stop().0 == 0)

        // Corrected: still duplicates, history kept.
        try start(daemon, boot: "boot-4", synced: true, shift: 0)
        #expect(try status(daemon, "K2") == "duplicate")
        #expect(try daemon.request("history", "10").pairs.records(startingWith: "id").count == 3)
        #expect(daemon.stop().0 == 0)

        // Eight days of real time later the window (7 days) has passed: K3 is new again.
        try start(daemon, boot: "boot-5", synced: true, shift: 8 * 86_400)
        #expect(try status(daemon, "K3") == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)
        for run in 1...daemon.runs { #expect(!daemon.log(run: run).contains("prune_failed")) }
    }
}
