/// The operator tool's own memory, a SQLite file (docs/fleet.md "State"):
/// when it first saw each device and when it last saw it online, so that
/// `--offline-for 1h` means something (a retained will says "offline",
/// never since when), and the rollouts (Rollouts.swift).
import SoundboxStore
import Glibc

public final class FleetState {
    let db: Connection
    public let path: String

    /// Opens (or makes) the file; its folder is made 0700 if missing.
    public init(path: String) throws(StoreError) {
        self.path = path
        if let slash = path.lastIndex(of: "/") { Self.makeFolders(String(path[..<slash])) }
        db = try Connection(path: path)
        try db.exec("""
            PRAGMA journal_mode=WAL; PRAGMA busy_timeout=10000;
            CREATE TABLE IF NOT EXISTS seen (device TEXT PRIMARY KEY, first_seen INTEGER NOT NULL, last_online INTEGER);
            """)
        try makeRolloutTables()
    }

    deinit { db.close() }

    /// Records one inventory at `now`: every device seen, and the online
    /// ones as seen online. Returns, per device, when it was last seen
    /// online, or (never) first seen.
    public func record(_ devices: [(id: String, online: Bool)], now: Int64) throws(StoreError) -> [String: Int64] {
        try db.transaction { () throws(StoreError) in
            for d in devices {
                try db.run("INSERT INTO seen (device, first_seen, last_online) VALUES (?, ?, ?) ON CONFLICT(device) DO UPDATE SET last_online = coalesce(excluded.last_online, last_online)",
                           d.id, now, d.online ? Optional(now) : nil)
            }
        }
        var out: [String: Int64] = [:]
        for (id, t) in try db.rows("SELECT device, coalesce(last_online, first_seen) FROM seen", row: { s throws(StoreError) in (s.text(0) ?? "", s.int64(1)) }) {
            out[id] = t
        }
        return out
    }

    /// The default file: $SOUNDBOX_FLEET_STATE, else $XDG_STATE_HOME or
    /// ~/.local/state, then soundbox-fleet/fleet.db.
    public static func defaultPath() -> String {
        func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let p = env("SOUNDBOX_FLEET_STATE") { return p }
        let base = env("XDG_STATE_HOME") ?? ((env("HOME") ?? "/tmp") + "/.local/state")
        return base + "/soundbox-fleet/fleet.db"
    }

    private static func makeFolders(_ dir: String) {
        guard !dir.isEmpty else { return }
        var path = dir.hasPrefix("/") ? "" : "."
        for part in dir.split(separator: "/") {
            path += "/" + part
            if mkdir(path, 0o700) != 0 && errno != EEXIST { return }
        }
    }
}
