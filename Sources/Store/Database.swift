import Glibc
import SoundboxSystem
import Soundbox

/// What is wrong with the database, for status, doctor and the LED.
public struct StorageFault: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Disk full (or a file-size limit).
        case full
        /// A read-only file, folder or file system, or permissions.
        case permission
        /// The file is damaged or is not a database.
        case corrupt
        /// The file was deleted or replaced while open.
        case replaced
        /// An I/O error, or anything else.
        case other
    }
    public var kind: Kind
    public var message: String

    public init(kind: Kind, message: String) { self.kind = kind; self.message = message }

    public init(_ error: StoreError) {
        kind = error.isFull ? .full : error.isPermission ? .permission : error.isCorrupt ? .corrupt : .other
        message = error.description
    }
}

/// The database file's whole life, around the `Store` that has it open:
/// opened at start (a folder made, a damaged WAL found and kept, read only
/// when it cannot be written), reopened when it could not be (at most every
/// 5 s), restored from the open connection when someone deletes it, left
/// alone and reported when someone replaces it, and the fault of the last
/// failure until a write succeeds again. A value: its owner (`Storage`)
/// holds it under its lock; it reads the monotonic clock only through the
/// `now` it is given.
public struct Database: Sendable {
    public let path: String
    /// The open store (read-only when the file could not be written), or nil.
    public private(set) var store: Store?
    /// What is wrong now, or nil.
    public private(set) var fault: StorageFault?
    /// What the last open that found a damaged WAL found.
    public private(set) var walDamage: WALDamage?
    private let clock: @Sendable () -> ClockReading
    private var lastReopen = -1e9
    /// The store's `diskFullRecoveries` already logged.
    private var diskFullsLogged = 0
    private let log = Log("storage")

    /// Opens the database at `path` (making its folder). One that cannot be
    /// opened is a fault, not a crash; one that cannot be written is opened
    /// read only, to still answer for what it holds (dedup, history, settings).
    public init(path: String, clock: @escaping @Sendable () -> ClockReading) {
        self.path = path
        self.clock = clock
        do throws(StoreError) { store = try Self.open(path, clock) } catch {
            fault = StorageFault(error)
            log.error("database_unavailable", ["path": path, "error": error.description])
            if error.isPermission, let readable = try? Store(readingOnly: path) {
                store = readable
                log.warning("database_read_only", ["path": path])
            }
        }
        walDamage = store?.walDamage
    }

    private static func open(_ path: String, _ clock: @escaping @Sendable () -> ClockReading) throws(StoreError) -> Store {
        makeParent(of: path)
        let store = try Store(path: path, clock: clock)
        if store.schemaVersion > Store.programSchema {
            Log("storage").warning("database_newer", ["path": path, "schema": "\(store.schemaVersion)", "program_schema": "\(Store.programSchema)",
                                                     "note": "written by a newer soundboxd (a rolled back update); used as it is"])
        }
        if let damage = store.walDamage {
            Log("storage").error("wal_damaged", ["path": path + "-wal", "damage": damage.description, "copy": damage.copy ?? "none (it could not be copied)"])
        }
        return store
    }

    /// The store, if it can be written now (`monotonic`: seconds): reopened
    /// if it could not be (or was read only), and still the file at `path`
    /// (restored if deleted). Does not clear the fault: `succeeded()` does,
    /// once the caller has written.
    public mutating func writable(monotonic: Double) -> Store? {
        if store?.isReadOnly == true || store == nil && fault?.kind != .corrupt {
            guard monotonic - lastReopen >= 5 else { return nil }
            lastReopen = monotonic
            do throws(StoreError) {
                let reopened = try Self.open(path, clock)
                store = reopened
                walDamage = reopened.walDamage ?? walDamage
                log.info("database_reopened", ["path": path])
            } catch {
                // A read-only store stays for reading.
                if store == nil { failed(error, "open") }
                return nil
            }
        }
        guard let store else { return nil }
        if let problem = store.fileProblem() { return restore(problem) }
        return store
    }

    /// A write through `writable()` worked: the fault (if any) is over.
    public mutating func succeeded() {
        if fault != nil {
            log.info("storage_recovered", ["path": path])
            fault = nil
        }
        if let store, store.diskFullRecoveries != diskFullsLogged {
            diskFullsLogged = store.diskFullRecoveries
            log.warning("disk_full_recovered", ["path": path, "times": "\(diskFullsLogged)", "reserve": store.holdsReserve ? "held" : "used"])
        }
    }

    /// A call of the store failed: its fault (logged when it changes).
    public mutating func failed(_ error: StoreError, _ what: String) {
        let new = StorageFault(error)
        if fault != new { log.error("storage_failed", ["during": what, "error": error.description]) }
        fault = new
    }

    /// The file is still the one open (one stat): false when someone deleted
    /// or replaced it (the next `writable` restores or reports it).
    public var fileIsInPlace: Bool { store?.fileProblem() == nil }

    /// The open file is no longer at `path`. Deleted: copies the open
    /// database back to `path` (nothing is lost) and reopens it. Replaced
    /// by another file: someone's choice, left alone; a fault until restart.
    private mutating func restore(_ problem: String) -> Store? {
        guard let store else { return nil }
        guard access(path, F_OK) != 0 else {
            if fault?.kind != .replaced { log.error("database_replaced", ["path": path, "error": problem]) }
            fault = StorageFault(kind: .replaced, message: problem)
            return nil
        }
        log.error("database_deleted", ["path": path])
        let temporary = path + ".restore"
        unlink(temporary)
        do throws(StoreError) {
            Self.makeParent(of: path)
            try store.copy(to: temporary)
            do { try Paths.sync(temporary) } catch { throw .posix("fsync(\(temporary))", error) }
            // Close the old connection first: closing deletes its -wal/-shm by
            // name (at once, even if a flush or a reader still holds the store).
            store.close()
            self.store = nil
            guard rename(temporary, path) == 0 else { throw .posix("rename(\(temporary), \(path))", .current) }
            Paths.syncFolder(containing: path)
            let reopened = try Self.open(path, clock)
            self.store = reopened
            log.info("database_restored", ["path": path])
            return reopened
        } catch {
            unlink(temporary)
            fault = StorageFault(kind: .replaced, message: "\(problem); restoring it failed: \(error.description)")
            return nil
        }
    }

    private static func makeParent(of path: String) {
        if let folder = Paths.parent(of: path), folder != "/" { mkdir(folder, 0o750) }
    }
}
