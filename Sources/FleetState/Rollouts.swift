/// A rollout's memory (docs/fleet.md "Rollout"): its request, plan and
/// stage, and every device's state, so that `rollout resume` carries on
/// after the tool was killed, and `rollout status` and `rollout halt` work
/// from another terminal.
import SoundboxStore
import SoundboxFleet
import Glibc

extension FleetState {
    func makeRolloutTables() throws(StoreError) {
        try db.exec("""
            CREATE TABLE IF NOT EXISTS rollout (id TEXT PRIMARY KEY, created INTEGER NOT NULL, url TEXT NOT NULL,
                sha256 TEXT NOT NULL, version TEXT NOT NULL, size INTEGER, prefix TEXT NOT NULL, canary INTEGER NOT NULL,
                batch TEXT NOT NULL, max_failures INTEGER NOT NULL, timeout INTEGER NOT NULL,
                phase TEXT NOT NULL, reason TEXT, stage INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS rollout_device (rollout TEXT NOT NULL, device TEXT NOT NULL, stage INTEGER NOT NULL,
                state TEXT NOT NULL, progress INTEGER, reason TEXT, sent_at INTEGER, PRIMARY KEY (rollout, device));
            """)
    }

    /// Stores a new rollout and its devices; an id already used is refused.
    public func begin(_ r: RolloutRecord, devices: [RolloutDevice]) throws(StoreError) {
        try db.transaction { () throws(StoreError) in
            let batch: String
            switch r.plan.batch {
            case .percent(let p): batch = "\(p)%"
            case .count(let n): batch = "\(n)"
            }
            try db.run("INSERT INTO rollout VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", r.id, r.created, r.url, r.sha256, r.version,
                       r.size, r.prefix, Int64(r.plan.canary), batch, Int64(r.plan.maxFailures), Int64(r.timeout),
                       r.phase.rawValue, r.reason, Int64(r.stage))
            for d in devices {
                try db.run("INSERT INTO rollout_device VALUES (?,?,?,?,?,?,?)", r.id, d.id, Int64(d.stage), d.state.rawValue,
                           d.progress.map { Int64($0) }, d.reason, d.sentAt)
            }
        }
    }

    /// The rollout `id`, or the newest one.
    public func rollout(_ id: String?) throws(StoreError) -> RolloutRecord? {
        let columns = "id, created, url, sha256, version, size, prefix, canary, batch, max_failures, timeout, phase, reason, stage"
        let read = { (s: Statement) throws(StoreError) -> RolloutRecord in
            let batch = (try? RolloutPlan.batch(s.text(8) ?? "")) ?? .percent(10)
            var r = RolloutRecord(id: s.text(0) ?? "", url: s.text(2) ?? "", sha256: s.text(3) ?? "", version: s.text(4) ?? "",
                                  size: s.optionalInt64(5), prefix: s.text(6) ?? "",
                                  plan: RolloutPlan(canary: Int(s.int64(7)), batch: batch, maxFailures: Int(s.int64(9))),
                                  timeout: Int(s.int64(10)), created: s.int64(1))
            r.phase = RolloutRecord.Phase(rawValue: s.text(11) ?? "") ?? .halted
            r.reason = s.text(12)
            r.stage = Int(s.int64(13))
            return r
        }
        if let id { return try db.rows("SELECT \(columns) FROM rollout WHERE id = ?", id, row: read).first }
        return try db.rows("SELECT \(columns) FROM rollout ORDER BY created DESC, rowid DESC LIMIT 1", row: read).first
    }

    public func devices(of rollout: String) throws(StoreError) -> [RolloutDevice] {
        try db.rows("SELECT device, stage, state, progress, reason, sent_at FROM rollout_device WHERE rollout = ? ORDER BY stage, device", rollout) { s throws(StoreError) in
            var d = RolloutDevice(id: s.text(0) ?? "", stage: Int(s.int64(1)), state: RolloutState(rawValue: s.text(2) ?? "") ?? .pending)
            d.progress = s.optionalInt64(3).map { Int($0) }
            d.reason = s.text(4)
            d.sentAt = s.optionalInt64(5)
            return d
        }
    }

    /// Saves devices' states (one transaction).
    public func save(_ rollout: String, _ devices: some Sequence<RolloutDevice>) throws(StoreError) {
        try db.transaction { () throws(StoreError) in
            for d in devices {
                try db.run("UPDATE rollout_device SET state = ?, progress = ?, reason = ?, sent_at = ? WHERE rollout = ? AND device = ?",
                           d.state.rawValue, d.progress.map { Int64($0) }, d.reason, d.sentAt, rollout, d.id)
            }
        }
    }

    /// Sets the rollout's phase, reason and stage.
    public func set(_ rollout: String, phase: RolloutRecord.Phase, reason: String?, stage: Int) throws(StoreError) {
        try db.run("UPDATE rollout SET phase = ?, reason = ?, stage = ? WHERE id = ?", phase.rawValue, reason, Int64(stage), rollout)
    }

    /// Marks a running rollout halted (by the operator); false if it was not running.
    public func halt(_ rollout: String, reason: String) throws(StoreError) -> Bool {
        try db.run("UPDATE rollout SET phase = 'halted', reason = ? WHERE id = ? AND phase = 'running'", reason, rollout)
        return db.changes > 0
    }

    /// Takes the lock of the one process that drives rollouts (a file beside the state
    /// file, flock(2): the kernel drops it when the process dies, even by
    /// kill -9). nil: another process drives it.
    public func driverLock() -> Int32? {
        let fd = open(path + ".rollout.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { close(fd); return nil }
        return fd
    }
}
