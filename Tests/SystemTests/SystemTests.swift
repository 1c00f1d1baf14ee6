import Glibc
import Testing
import SoundboxSystem

@Suite struct UnixSocketAddressTests {
    @Test func aPathMustFitSunPathAndHoldNoNUL() {
        #expect(throws: Errno.invalidArgument) { try UnixSocketAddress("") }
        #expect(throws: Errno.invalidArgument) { try UnixSocketAddress("a\u{0}b") }
        #expect(throws: Errno.nameTooLong) { try UnixSocketAddress("/" + String(repeating: "x", count: UnixSocketAddress.maxPathBytes)) }
        #expect((try? UnixSocketAddress("/" + String(repeating: "x", count: UnixSocketAddress.maxPathBytes - 1))) != nil)
    }

    @Test func aBoundPathTakesConnectionsAndGoneItRefuses() throws {
        let path = "/tmp/sbx-system-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        defer { unlink(path) }
        let address = try UnixSocketAddress(path)
        let server = try FileDescriptor.unixSocket(.stream)
        defer { server.close() }
        try server.bind(to: address)
        #expect(listen(server.rawValue, 1) == 0)
        let client = try FileDescriptor.unixSocket(.stream)
        try client.connect(to: address)
        client.close()
        unlink(path)
        let late = try FileDescriptor.unixSocket(.stream)
        defer { late.close() }
        #expect(throws: Errno.notFound) { try late.connect(to: address) }
    }

    /// "@name" is the abstract namespace only when asked (sd_notify's
    /// $NOTIFY_SOCKET); otherwise it is a file called "@name".
    @Test func anAtSignIsAbstractOnlyWhenAsked() throws {
        let name = "@sbx-system-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let receiver = try FileDescriptor.unixSocket(.datagram)
        defer { receiver.close() }
        try receiver.bind(to: UnixSocketAddress(name, abstractNamespace: true))
        #expect(access(name, F_OK) != 0)   // no file was made
        let sender = try FileDescriptor.unixSocket(.datagram)
        defer { sender.close() }
        #expect(try sender.send(Array("READY=1".utf8), to: UnixSocketAddress(name, abstractNamespace: true)) == 7)
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = buffer.withUnsafeMutableBytes { recv(receiver.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        #expect(n == 7 && String(decoding: buffer[..<max(n, 0)], as: UTF8.self) == "READY=1")
        #expect(throws: Errno.notFound) { try sender.send([1], to: UnixSocketAddress(name)) }   // the file "@…" does not exist
    }
}

@Suite struct PathsTests {
    @Test func theParentOfAPath() {
        #expect(Paths.parent(of: "/var/lib/soundbox/queue.db") == "/var/lib/soundbox")
        #expect(Paths.parent(of: "/queue.db") == "/")
        #expect(Paths.parent(of: "queue.db") == nil)
        #expect(Paths.parent(of: "state/queue.db") == "state")
    }

    @Test func syncingWhatIsNotThereSaysWhy() {
        #expect(throws: Errno.notFound) { try Paths.sync("/nonexistent-\(getpid())/x") }
        #expect(Errno.notFound.description == "No such file or directory")
    }
}
