import Foundation

/// A fresh folder under /tmp for one test, removed when the value dies (or
/// by `remove()`). A short path on purpose: a Unix socket's path must fit
/// in 108 bytes. The one temp-folder helper of every test target.
public final class Scratch: @unchecked Sendable {
    public let path: String

    public init(_ prefix: String = "sbx") {
        path = "/tmp/\(prefix)-" + String(UUID().uuidString.prefix(8))
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { remove() }

    /// Removes the folder and everything in it now.
    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` to `name` in the folder; returns its path.
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// Why a test's own step (not the code under test) failed: the one error
/// type the tests throw.
public struct TestFailure: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
