import CSQLite
import Glibc
import Soundbox

/// The receipts outbox (table `outbox`): what the broker has not taken yet.
extension Store {
    /// Appends a receipt that belongs to no state change here (e.g. `rejected`) to the outbox.
    public func appendReceipt(_ receipt: Receipt, now: Int64, flush: Bool = true) throws(StoreError) {
        try write(flush: flush) { c throws(StoreError) in try append(receipt, now: now, c) }
    }

    /// Receipts waiting for the broker, oldest first, at most `limit`.
    public func outbox(limit: Int) throws(StoreError) -> [OutboxItem] {
        try locked { c throws(StoreError) in
            try c.rows("SELECT n, payload, created_at FROM outbox ORDER BY n LIMIT ?", Int64(limit)) {
                OutboxItem(n: $0.int64(0), payload: $0.text(1) ?? "", createdAt: $0.int64(2))
            }
        }
    }

    /// How many receipts wait for the broker.
    public func outboxCount() throws(StoreError) -> Int {
        try locked { c throws(StoreError) in
            try c.rows("SELECT count(*) FROM outbox") { Int($0.int64(0)) }[0]
        }
    }

    /// Forgets receipts the broker has taken (PUBACK). Unknown numbers are ignored.
    public func deleteOutbox(_ n: [Int64], flush: Bool = true) throws(StoreError) {
        guard !n.isEmpty else { return }
        // One statement (so one commit) for any number of rows: the numbers go in as a JSON array.
        let list = "[" + n.map(String.init).joined(separator: ",") + "]"
        try write(flush: flush) { c throws(StoreError) in
            try c.run("DELETE FROM outbox WHERE n IN (SELECT value FROM json_each(?))", list)
        }
    }


    func append(_ receipt: Receipt, now: Int64, _ c: Connection) throws(StoreError) {
        try c.run("INSERT INTO outbox (payload, created_at) VALUES (?, ?)", receipt.json, now)
        lastOutbox.store(sqlite3_last_insert_rowid(c.db), ordering: .relaxed)
    }

}
