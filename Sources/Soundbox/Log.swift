import Glibc
import Synchronization

/// Journald-friendly log lines on standard error, one per event:
/// `<6>queue: played id=T1 seq=4` (format: `LogLine`). Payment amounts are
/// logged only at debug level.
public struct Log: Sendable {
    public let subsystem: String
    public init(_ subsystem: String) { self.subsystem = subsystem }

    /// Set once at start and on reload.
    public static let debugEnabled = Atomic<Bool>(false)

    public func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(6, event, fields) }
    public func warning(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(4, event, fields) }
    public func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) { write(3, event, fields) }
    public func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        if Log.debugEnabled.load(ordering: .relaxed) { write(7, event, fields) }
    }

    private func write(_ priority: Int, _ event: String, _ fields: KeyValuePairs<String, String>) {
        // Values are quoted and escaped (LogLine): no payload can forge a line.
        let line = LogLine.format(priority: priority, subsystem: subsystem, event: event, fields: fields) + "\n"
        // One write(2) per line so lines from threads never interleave.
        _ = line.utf8CString.withUnsafeBufferPointer { Glibc.write(2, $0.baseAddress, $0.count - 1) }
    }
}
