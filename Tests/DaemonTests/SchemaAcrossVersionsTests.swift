import Foundation
import Testing
import TestSupport
import TestRig
import SoundboxStore

/// One database, two versions, with the real binary: the next version
/// (this one with the rehearsed next schema step, SOUNDBOX_TEST_SCHEMA_NEXT=1,
/// as the boot test's broken bundle runs it) migrates and takes payments; the
/// update is rolled back and this version opens the file as it is: nothing
/// spoken again, nothing lost, the queue keeps flowing; the next version
/// comes back to it without a step.
@Suite struct SchemaAcrossVersionsTests {
    static let next = ["SOUNDBOX_TEST_SCHEMA_NEXT": "1"]

    @Test func aRolledBackVersionOpensWhatTheNextWrote() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        try daemon.start(extraEnv: Self.next)
        #expect(try daemon.request("say", "1.10", "--id", "NEXT1")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        #expect(daemon.stop().0 == 0)
        let migrated = try CommandRun([Build.soundboxd, "--migrate", "--state-dir", daemon.dir + "/state"])
        #expect(migrated.stdout.contains("schema \(Store.programSchema + 1) (this program's: \(Store.programSchema))"), "\(migrated.stdout) \(migrated.stderr)")

        // Rolled back: this version.
        try daemon.start()
        #expect(daemon.log(run: 2).contains("storage: database_newer"), "\(daemon.log(run: 2))")
        #expect(try daemon.request("history", "1")["state"] == "played")
        #expect(try daemon.request("say", "1.10", "--id", "NEXT1")["status"] == "duplicate")
        #expect(try daemon.request("say", "2.20", "--id", "BACK1")["status"] == "queued")
        #expect(try daemon.request("idle", "30").ack == nil)
        let doctor = try CommandRun([Build.soundboxctl, "doctor"], environment: ["SOUNDBOX_SOCKET": daemon.socket])
        #expect(doctor.stdout.contains("OK   database") || doctor.stdout.range(of: #"OK +database"#, options: .regularExpression) != nil, "\(doctor.stdout)")
        #expect(daemon.stop().0 == 0)
        #expect(daemon.log(run: 2).components(separatedBy: "speaking id=NEXT1").count == 1, "NEXT1 not spoken again")

        // The next version again: no step, both payments there, played once.
        try daemon.start(extraEnv: Self.next)
        #expect(try daemon.request("say", "2.20", "--id", "BACK1")["status"] == "duplicate")
        #expect(daemon.stop().0 == 0)
        let store = try Store(path: daemon.database)
        for id in ["NEXT1", "BACK1"] { #expect(try store.entry(id: id)?.state == .played, "\(id)") }
        #expect(try store.entry(id: "NEXT1")?.plays == 1 && store.entry(id: "BACK1")?.plays == 1)
    }
}
