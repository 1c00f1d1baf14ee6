import CSQLite
import Glibc
import SoundboxSystem

/// A failed SQLite call: which call, its extended result code and what
/// `sqlite3_errmsg` said. The few checks that are not one C call (the schema
/// version, a state guard) use the closest SQLite code and say so in `call`.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// The C call, with its argument: "sqlite3_step(INSERT INTO outbox ...)".
    public let call: String
    /// The extended result code, e.g. 778 (SQLITE_IOERR_WRITE); `code & 0xFF` is the primary code.
    public let code: Int32
    /// What SQLite (or the check) said, for logs and people.
    public let message: String

    public init(call: String, code: Int32, message: String) {
        self.call = call; self.code = code; self.message = message
    }

    /// The error `rc` of `call` on connection `db`.
    init(call: String, rc: Int32, db: OpaquePointer?) {
        self.init(call: call, code: rc, message: String(cString: db.map { sqlite3_errmsg($0) } ?? sqlite3_errstr(rc)))
    }

    private var primary: Int32 { code & 0xFF }
    /// The file is damaged or is not a database: restore or recreate it, retrying will not help.
    public var isCorrupt: Bool { primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB }
    /// The disk (or `max_page_count`) is full.
    public var isFull: Bool { primary == SQLITE_FULL }
    /// Nothing could be written: disk full or an I/O error. The transaction
    /// was rolled back; reads may still work.
    public var isWriteFailure: Bool { primary == SQLITE_FULL || primary == SQLITE_IOERR }
    /// Writing is not allowed: a read-only file, folder or file system, or
    /// permissions (SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH).
    public var isPermission: Bool {
        primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM || primary == SQLITE_AUTH
    }
    /// The row it was about is not there (SQLITE_NOTFOUND): e.g. a payment
    /// no longer pending when its final state is written.
    public var isNotFound: Bool { primary == SQLITE_NOTFOUND }
    public var description: String { "\(call) failed: \(message) (\(code))" }

    /// A write refused without trying: the database cannot be written now
    /// (its fault says why), as an I/O error.
    public static func unavailable(_ call: String, _ why: String) -> StoreError {
        StoreError(call: call, code: SQLITE_IOERR, message: why)
    }

    /// A failed POSIX call on the database's files (copying, renaming,
    /// flushing), as an I/O error carrying errno's text.
    public static func posix(_ call: String, _ error: Errno) -> StoreError {
        StoreError(call: call, code: SQLITE_IOERR, message: error.description)
    }
}
