import Foundation
@testable import SoundboxStore
import Testing
import TestSupport

/// One database, two versions (Schema's rule): after a rolled back update the
/// previous program opens what the next one wrote, as it is.
@Suite struct SchemaRuleTests {
    let tmp = TempDB()

    /// Every step from v6 on leaves a database the previous version can use;
    /// the rehearsed next step too.
    @Test func everyStepKeepsThePreviousVersion() {
        for (i, step) in Schema.steps.enumerated() where i + 1 >= 6 {
            #expect(step.oldestReader <= i, "v\(i + 1) breaks the program of v\(i): its oldest reader is \(step.oldestReader)")
        }
        #expect(Schema.rehearsal.oldestReader <= Schema.steps.count)
    }

    /// The next version migrates (a new column, a new table); this one then
    /// opens the file as it is, queues, plays, dedups; the next one opens it
    /// again without a step and finds everything.
    @Test func thePreviousVersionUsesWhatTheNextWrote() throws {
        do {
            let store = try Store(path: tmp.path)
            _ = try store.accept(pay("OLD1"), now: t0)
        }
        // The next program: its migration, and a payment it accepted with its new column set.
        do {
            let c = try Connection(path: tmp.path)
            #expect(try Schema.migrate(c, steps: Schema.steps + [Schema.rehearsal]) == Schema.steps.count + 1)
            try c.exec("UPDATE payments SET rehearsal = 'set by the next version' WHERE id = 'OLD1'")
        }
        // Rolled back: this program.
        let store = try Store(path: tmp.path)
        #expect(store.schemaVersion == Schema.steps.count + 1)
        #expect(try store.pending().map(\.payment.id) == ["OLD1"])
        guard case .duplicate = try store.accept(pay("OLD1"), now: t0 + 1) else { Issue.record("OLD1 again not a duplicate"); return }
        guard case .queued(let seq) = try store.accept(pay("BACK1"), now: t0 + 2) else { Issue.record("BACK1 not queued"); return }
        try store.finish(seq: seq, state: .played, reason: nil, now: t0 + 3)
        #expect(try store.entry(id: "BACK1")?.state == .played)
        #expect(store.quickCheck() == "ok")
        let (version, oldest, rehearsal) = try store.connection.withLock { c throws(StoreError) in
            (try c.userVersion(),
             try c.rows("SELECT value FROM meta WHERE key = 'schema_oldest_reader'") { $0.text(0) ?? "" },
             try c.rows("SELECT id, coalesce(rehearsal, '-') FROM payments ORDER BY seq") { "\($0.text(0) ?? ""):\($0.text(1) ?? "")" })
        }
        #expect(version == Schema.steps.count + 1 && oldest == ["\(Schema.rehearsal.oldestReader)"])
        #expect(rehearsal == ["OLD1:set by the next version", "BACK1:-"])
        // And forward again: nothing to apply, everything there.
        let c = try Connection(path: tmp.path)
        #expect(try Schema.migrate(c, steps: Schema.steps + [Schema.rehearsal]) == Schema.steps.count + 1)
        #expect(try c.rows("SELECT count(*) FROM payments") { $0.int64(0) } == [2])
    }

    /// A newer database whose oldest reader is newer than this program (or
    /// that does not say): refused, saying why, not guessed at.
    @Test(arguments: [("6", "needs schema 6"), (nil, "needs schema 99")] as [(String?, String)])
    func aDatabaseThisVersionCannotUseIsRefused(_ oldest: String?, _ message: String) throws {
        do {
            let store = try Store(path: tmp.path)
            _ = try store.accept(pay("A"), now: t0)
            try store.connection.withLock { c throws(StoreError) in
                try c.exec("PRAGMA user_version = \(oldest == nil ? 99 : 6)")
                if let oldest { try c.run("UPDATE meta SET value = ? WHERE key = 'schema_oldest_reader'", oldest) }
                else { try c.exec("DELETE FROM meta WHERE key = 'schema_oldest_reader'") }
            }
        }
        // (with a rule-keeping rehearsal, a v6 database that needs 6 is one this v5 program cannot use)
        let error = #expect(throws: StoreError.self) { try Store(path: tmp.path) }
        #expect(error?.description.contains("newer soundboxd") == true && error?.description.contains(message) == true, "\(String(describing: error))")
        #expect(error?.isCorrupt == false)
    }

    /// A fresh database records its oldest reader.
    @Test func aNewDatabaseSaysItsOldestReader() throws {
        let store = try Store(path: tmp.path)
        let oldest = try store.connection.withLock { c throws(StoreError) in
            try c.rows("SELECT value FROM meta WHERE key = 'schema_oldest_reader'") { $0.text(0) ?? "" }
        }
        #expect(oldest == ["\(Schema.steps.last!.oldestReader)"])
    }
}
