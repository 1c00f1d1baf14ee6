import CSQLite
import Glibc
import SoundboxSystem
import Synchronization

/// The one sqlite3 connection of a `Store`, used only under its lock
/// (opened with SQLITE_OPEN_NOMUTEX: SQLite does no locking of its own).
package final class Connection {
    package let db: OpaquePointer
    /// Kept alive as long as the connection (its WAL hook's context).
    var hook: CommitWatch?

    /// - Parameter readOnly: open `path` (a file: URI) for reading only.
    /// - Parameter create: create the file if it does not exist.
    package init(path: String, readOnly: Bool = false, create: Bool = true) throws(StoreError) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            // A handle is returned even on failure, for its message; it must still be closed.
            let error = StoreError(call: "sqlite3_open_v2(\(path))", rc: rc, db: handle)
            sqlite3_close_v2(handle)
            throw error
        }
        db = handle
    }
    deinit { if !isClosed { sqlite3_close_v2(db) } }

    /// Closed by `close()`: `db` must not be used any more.
    private(set) var isClosed = false

    package func close() {
        guard !isClosed else { return }
        sqlite3_close_v2(db)
        isClosed = true
    }

    /// Runs one statement with `args` bound to its `?` parameters, in order,
    /// to the end (its rows, if any, are ignored).
    package func run(_ sql: String, _ args: any Bindable...) throws(StoreError) { try run(sql, args) }

    package func run(_ sql: String, _ args: [any Bindable]) throws(StoreError) {
        let statement = try Statement(db: db, sql: sql, args)
        while try statement.step() {}
    }

    /// Every row of `sql` (with `args` bound), each read by `row`.
    package func rows<T>(_ sql: String, _ args: any Bindable..., row: (Statement) throws(StoreError) -> T) throws(StoreError) -> [T] {
        let statement = try Statement(db: db, sql: sql, args)
        var out: [T] = []
        while try statement.step() { out.append(try row(statement)) }
        return out
    }

    /// Runs several statements separated by semicolons, with no parameters.
    package func exec(_ sql: String) throws(StoreError) {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw StoreError(call: "sqlite3_exec(\(sql))", rc: rc, db: db) }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes(db)) }

    /// Runs `body` in BEGIN IMMEDIATE ... COMMIT (committed, not yet
    /// flushed: `Store.flush`); on any error rolls back and rethrows.
    /// IMMEDIATE takes the write lock at once, so a transaction that reads
    /// before it writes never fails half-way with SQLITE_BUSY.
    package func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try exec("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try exec("COMMIT")
            return result
        } catch {
            // After some errors (SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled back.
            if sqlite3_get_autocommit(db) == 0 { sqlite3_exec(db, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }
}

/// One prepared statement, finalized in deinit.
package final class Statement {
    private let db: OpaquePointer
    private let handle: OpaquePointer
    let sql: String

    /// Prepares `sql` and binds `args` to its parameters 1, 2, ...
    package init(db: OpaquePointer, sql: String, _ args: [any Bindable]) throws(StoreError) {
        var handle: OpaquePointer?
        let rc = sqlite3_prepare_v2(db, sql, -1, &handle, nil)
        guard rc == SQLITE_OK, let handle else { throw StoreError(call: "sqlite3_prepare_v2(\(sql))", rc: rc, db: db) }
        self.db = db; self.handle = handle; self.sql = sql
        for (i, value) in args.enumerated() {
            let rc = value.bind(to: handle, at: Int32(i + 1))
            if rc != SQLITE_OK { throw StoreError(call: "sqlite3_bind(\(sql), \(i + 1))", rc: rc, db: db) }
        }
    }
    deinit { sqlite3_finalize(handle) }

    /// Steps once: true when a row is ready, false when the statement is done.
    package func step() throws(StoreError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let rc: throw StoreError(call: "sqlite3_step(\(sql))", rc: rc, db: db)
        }
    }

    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    package func optionalInt64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : int64(column)
    }
    /// The column's text, nil for NULL.
    package func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, column))), as: UTF8.self)
    }
}

/// A value that can be bound to a `?` parameter.
package protocol Bindable {
    func bind(to statement: OpaquePointer, at index: Int32) -> Int32
}

extension Int64: Bindable {
    package func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, self) }
}

extension Bool: Bindable {
    package func bind(to statement: OpaquePointer, at index: Int32) -> Int32 { sqlite3_bind_int64(statement, index, self ? 1 : 0) }
}

extension String: Bindable {
    package func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        // SQLITE_TRANSIENT (the C macro is not importable): SQLite copies the bytes before returning.
        sqlite3_bind_text(statement, index, self, Int32(utf8.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
    }
}

extension Optional: Bindable where Wrapped: Bindable {
    package func bind(to statement: OpaquePointer, at index: Int32) -> Int32 {
        self?.bind(to: statement, at: index) ?? sqlite3_bind_null(statement, index)
    }
}
