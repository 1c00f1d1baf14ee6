import CSQLite
import Glibc
import Soundbox

/// The remote-config overlay, `meta` and signed commands' nonces.
extension Store {
    /// The remote-config overlay (key → value).
    public func overlay() throws(StoreError) -> [String: String] {
        let pairs = try locked { c throws(StoreError) in
            try c.rows("SELECT key, value FROM config_overlay") { [$0.text(0) ?? "", $0.text(1) ?? ""] }
        }
        return Dictionary(uniqueKeysWithValues: pairs.map { ($0[0], $0[1]) })
    }

    /// Sets (value non-nil) or removes (nil) keys of the overlay, and sets
    /// `meta` keys, all or none.
    public func updateOverlay(_ changes: [String: String?], meta: [String: String] = [:]) throws(StoreError) {
        try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) in
                // In key order, so that a failure happens at the same place every time.
                for (key, value) in changes.sorted(by: { $0.key < $1.key }) {
                    if let value {
                        try c.run("INSERT OR REPLACE INTO config_overlay (key, value) VALUES (?, ?)", key, value)
                    } else {
                        try c.run("DELETE FROM config_overlay WHERE key = ?", key)
                    }
                }
                for (key, value) in meta.sorted(by: { $0.key < $1.key }) {
                    try c.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key, value)
                }
            }
        }
    }

    /// A `meta` value, or nil.
    public func meta(_ key: String) throws(StoreError) -> String? {
        try locked { c throws(StoreError) in
            try c.rows("SELECT value FROM meta WHERE key = ?", key) { $0.text(0) }.first ?? nil
        }
    }

    /// Records a signed command's nonce: true the first time it is seen
    /// (within the retention window: `prune`), false for a replay.
    public func useNonce(_ nonce: String, now: Int64) throws(StoreError) -> Bool {
        let clock = self.clock()
        return try write(flush: true) { c throws(StoreError) in
            try c.transaction { () throws(StoreError) -> Bool in
                guard try c.rows("SELECT 1 FROM nonces WHERE nonce = ?", nonce, row: { $0.int64(0) }).isEmpty else { return false }
                try c.run("INSERT INTO nonces (nonce, seen_at, boot, mono, dated) VALUES (?, ?, ?, ?, ?)",
                          nonce, now, clock.boot, clock.sinceBoot, clock.synced)
                return true
            }
        }
    }

}
