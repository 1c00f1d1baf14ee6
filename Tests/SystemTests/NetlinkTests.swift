import Glibc
import CLinux
import Testing
import SoundboxSystem

/// Netlink datagrams as the kernel writes them (host byte order).
enum Netlink {
    static func message(type: Int, _ payload: [UInt8], length: UInt32? = nil) -> [UInt8] {
        var bytes = le32(length ?? UInt32(16 + payload.count)) + le16(UInt16(type)) + le16(0) + le32(1) + le32(0) + payload
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }
    /// RTM_NEWLINK with struct ifinfomsg and an IFLA_IFNAME attribute.
    static func link(index: Int32, running: Bool, loopback: Bool = false, name: String? = "eth0", type: Int = 16) -> [UInt8] {
        var flags = UInt32(IFF_UP)
        if running { flags |= UInt32(IFF_RUNNING) }
        if loopback { flags |= UInt32(IFF_LOOPBACK) }
        var payload = [0, 0] + le16(1) + le32(UInt32(bitPattern: index)) + le32(flags) + le32(0)
        if let name { payload += attribute(type: 3, Array(name.utf8) + [0]) }
        return message(type: type, payload)
    }
    static func attribute(type: Int, _ data: [UInt8], length: UInt16? = nil) -> [UInt8] {
        var bytes = le16(length ?? UInt16(4 + data.count)) + le16(UInt16(type)) + data
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }
    static func le32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
    static func le16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
}

@Suite struct RoutingNetlinkTests {
    @Test func linksAddressesAndRoutesAreRead() {
        let datagram = Netlink.link(index: 2, running: true) + Netlink.link(index: 1, running: true, loopback: true, name: "lo")
            + Netlink.message(type: 20, [UInt8](repeating: 0, count: 8))     // RTM_NEWADDR
            + Netlink.message(type: 25, [UInt8](repeating: 0, count: 12))    // RTM_DELROUTE
            + Netlink.link(index: 2, running: false, type: 17)                // RTM_DELLINK
            + Netlink.message(type: 3, [0, 0, 0, 0])                          // NLMSG_DONE
            + Netlink.message(type: 4, [])                                    // NLMSG_OVERRUN
        let (messages, malformed) = RoutingNetlink.parse(datagram)
        #expect(malformed == 0)
        #expect(messages == [.link(index: 2, name: "eth0", running: true, loopback: false),
                             .link(index: 1, name: "lo", running: true, loopback: true),
                             .addressChanged, .routeChanged, .linkGone(index: 2), .overrun])
    }

    /// Up without a carrier (IFF_UP, no IFF_RUNNING) is not running.
    @Test func anInterfaceUpWithoutCarrierIsNotRunning() {
        #expect(RoutingNetlink.parse(Netlink.link(index: 4, running: false)).messages == [.link(index: 4, name: "eth0", running: false, loopback: false)])
    }

    /// What makes no sense is counted and skipped; the parse never reads
    /// past the datagram and never stops answering.
    @Test func messagesThatMakeNoSenseAreCountedNotBelieved() {
        let good = Netlink.link(index: 2, running: true)
        let cases: [(String, [UInt8], Int)] = [
            ("a tail under a header", Array(good.prefix(15)), 1),
            ("a length of 0", Netlink.message(type: 16, [], length: 0) + good, 1),
            ("a length under a header", Netlink.message(type: 16, [], length: 12) + good, 1),
            ("a length past the end", Netlink.message(type: 16, [0, 0, 0, 0], length: 4096), 1),
            ("the largest length", Netlink.message(type: 16, [0, 0, 0, 0], length: .max), 1),
            ("a link message too short", Netlink.message(type: 16, [0, 0, 0, 0, 2, 0, 0, 0]) + good, 1),
            ("link index 0", Netlink.link(index: 0, running: true) + good, 1),
            ("a negative link index", Netlink.link(index: -5, running: true) + good, 1),
            ("an address message too short", Netlink.message(type: 20, [0, 0]) + good, 1),
            ("a route message too short", Netlink.message(type: 24, [0, 0, 0, 0]) + good, 1),
        ]
        for (what, bytes, bad) in cases {
            let (messages, malformed) = RoutingNetlink.parse(bytes)
            #expect(malformed == bad, "\(what)")
            // A header that cannot be trusted ends the datagram; anything else is skipped alone.
            if what.hasPrefix("a length") || what == "the largest length" {
                #expect(messages.isEmpty, "\(what): \(messages)")
            } else if bytes.count > good.count {
                #expect(messages.last == .link(index: 2, name: "eth0", running: true, loopback: false), "\(what): \(messages)")
            }
        }
        // Types nobody asked for are ignored, not counted.
        #expect(RoutingNetlink.parse(Netlink.message(type: 28, [1, 2, 3, 4]) + good).malformed == 0)
        #expect(RoutingNetlink.parse([]).messages.isEmpty)
    }

    @Test func attributesThatMakeNoSenseLoseOnlyTheName() {
        func named(_ attribute: [UInt8]) -> (String?, Int) {
            let payload = [0, 0] + Netlink.le16(1) + Netlink.le32(7) + Netlink.le32(UInt32(IFF_UP | IFF_RUNNING)) + Netlink.le32(0) + attribute
            let (messages, malformed) = RoutingNetlink.parse(Netlink.message(type: 16, payload))
            guard case .link(7, let name, true, false)? = messages.first else { Issue.record("\(messages)"); return (nil, malformed) }
            return (name, malformed)
        }
        #expect(named(Netlink.attribute(type: 3, [], length: 0)) == (nil, 1))
        #expect(named(Netlink.attribute(type: 3, Array("wlan0".utf8), length: 200)) == (nil, 1))
        #expect(named(Netlink.attribute(type: 3, Array("wlan0".utf8))) == ("wlan0", 0))           // no NUL
        #expect(named(Netlink.attribute(type: 3, [UInt8](repeating: 0x41, count: 300))) == (String(repeating: "A", count: 15), 0))
        #expect(named(Netlink.attribute(type: 3, [0xff, 0xfe, 0x0a, 0x1b, 0])).0?.count == 4)    // bytes, not a name: kept short and decoded
    }

    /// Random bytes: no crash, no read past the end, only the kinds there are.
    @Test func randomDatagramsAreSurvived() {
        var rng = SystemRandomNumberGenerator()
        for round in 0..<5000 {
            var bytes = (0..<Int.random(in: 0...96, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Half of them with a plausible header, so the parse goes deeper.
            if round % 2 == 0, bytes.count >= 16 {
                bytes.replaceSubrange(0..<6, with: Netlink.le32(UInt32(bytes.count)) + Netlink.le16(UInt16([16, 17, 20, 21, 24, 25][round % 6])))
            }
            let (messages, malformed) = RoutingNetlink.parse(bytes)
            #expect(malformed >= 0 && messages.count <= bytes.count / 16)
        }
    }
}

@Suite struct LinkTableTests {
    @Test func aLinkThatRunsAgainIsRegainedButNotAtFirstSightNorLoopback() {
        var table = LinkTable()
        #expect(table.apply([.link(index: 2, name: "eth0", running: true, loopback: false)]) == ([], true))
        #expect(table.apply([.link(index: 2, name: nil, running: true, loopback: false)]) == ([], false))   // no change
        #expect(table.apply([.link(index: 2, name: nil, running: false, loopback: false)]) == ([], true))
        #expect(table.apply([.link(index: 2, name: nil, running: true, loopback: false)]) == ([2], true))
        #expect(table.name(2) == "eth0")
        _ = table.apply([.link(index: 1, name: "lo", running: false, loopback: true)])
        #expect(table.apply([.link(index: 1, name: "lo", running: true, loopback: true)]).regained.isEmpty)
        // Down and up within one read is still back; gone is not.
        #expect(table.apply([.link(index: 2, name: nil, running: false, loopback: false),
                             .link(index: 2, name: nil, running: true, loopback: false)]).regained == [2])
        #expect(table.apply([.link(index: 2, name: nil, running: false, loopback: false),
                             .link(index: 2, name: nil, running: true, loopback: false), .linkGone(index: 2)]).regained.isEmpty)
        #expect(table.apply([.routeChanged]) == ([], true))
    }

    /// However many links the kernel names, the table holds at most its capacity.
    @Test func theTableIsBounded() {
        var table = LinkTable()
        _ = table.apply((1...10_000).map { .link(index: Int32($0), name: "veth\($0)", running: true, loopback: false) })
        #expect(table.count == LinkTable.capacity)
    }
}

@Suite struct LinkWatcherTests {
    /// The kernel answers the watcher's first question: every link, with lo among them.
    @Test func theWatcherHearsTheKernelsLinks() throws {
        let watcher = try LinkWatcher()
        var fds = [pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)]
        #expect(poll(&fds, 1, 5000) == 1)
        let heard = watcher.read()
        #expect(heard.malformed == 0)
        #expect(heard.messages.contains { if case .link(_, "lo", _, true) = $0 { true } else { false } }, "\(heard.messages)")
    }

    /// Another process may send to the watcher's socket (netlink unicast
    /// between sockets): what it says is counted, never believed.
    @Test func onlyTheKernelIsHeard() throws {
        let watcher = try LinkWatcher()
        var fds = [pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, 5000)
        _ = watcher.read()   // the kernel's answer to the link dump
        var own = sockaddr_nl()
        var length = socklen_t(MemoryLayout<sockaddr_nl>.size)
        _ = withUnsafeMutablePointer(to: &own) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(watcher.fd, $0, &length) } }
        let forger = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue), NETLINK_ROUTE)
        try #require(forger >= 0)
        defer { close(forger) }
        var to = sockaddr_nl()
        to.nl_family = sa_family_t(AF_NETLINK)
        to.nl_pid = own.nl_pid
        let forged = Netlink.link(index: 2, running: false) + Netlink.link(index: 2, running: true)
        let sent = forged.withUnsafeBytes { b in
            withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(forger, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) } }
        }
        try #require(sent == forged.count, "the kernel refused the forged datagram (errno \(errno)): nothing to test")
        fds[0].revents = 0
        #expect(poll(&fds, 1, 5000) == 1)
        let heard = watcher.read()
        #expect(heard.messages.isEmpty && heard.malformed == 1, "\(heard)")
    }

    /// As root: a veth pair made and brought up is heard, carrier included.
    @Test(.enabled(if: getuid() == 0)) func aLinkComingUpIsHeard() throws {
        let name = "sbxw\(UInt16.random(in: 0...9999))"
        let watcher = try LinkWatcher()
        var fds = [pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, 5000)
        var table = LinkTable()
        _ = table.apply(watcher.read().messages)
        #expect(system("ip link add \(name)a type veth peer name \(name)b && ip link set \(name)a up") == 0)
        defer { _ = system("ip link del \(name)a 2>/dev/null") }
        func hear() -> [RoutingMessage] {
            var messages: [RoutingMessage] = []
            while true {
                fds[0].revents = 0
                guard poll(&fds, 1, 1000) == 1 else { return messages }
                messages += watcher.read().messages
            }
        }
        let before = hear()
        _ = table.apply(before)
        #expect(before.contains { if case .link(_, name + "a", false, false) = $0 { true } else { false } }, "\(before)")
        #expect(system("ip link set \(name)b up") == 0)   // the peer up: carrier on a (and b runs too)
        let after = hear()
        let regained = table.apply(after).regained
        #expect(Set(regained.compactMap { table.name($0) }) == [name + "a", name + "b"], "\(after)")
    }
}

@Suite struct NetworkPathsTests {
    @Test func theRouteToLoopbackLeavesFromLoopback() throws {
        let path = try #require(NetworkPaths.route(to: "127.0.0.1"))
        #expect(path.source == "127.0.0.1")
        #expect(path.interface == Int32(bitPattern: if_nametoindex("lo")))
        #expect(NetworkPaths.route(to: "broker.example") == nil)   // names are not looked up
        #expect(NetworkPaths.route(to: "") == nil)
        #expect(NetworkPaths.isNumeric("::1") && NetworkPaths.isNumeric("10.0.0.1") && !NetworkPaths.isNumeric("10.0.0.256"))
    }

    @Test func aDeadLinkProbeIsArmedOnATCPSocket() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(s) }
        #expect(NetworkPaths.armDeadLinkProbe(s, idle: 8, interval: 1, timeout: 10) == nil)
        func get(_ level: Int32, _ option: Int32) -> Int32 {
            var v: Int32 = 0
            var n = socklen_t(4)
            _ = getsockopt(s, level, option, &v, &n)
            return v
        }
        let tcp = Int32(IPPROTO_TCP)
        #expect(get(SOL_SOCKET, SO_KEEPALIVE) == 1)
        #expect(get(tcp, TCP_KEEPIDLE) == 8 && get(tcp, TCP_KEEPINTVL) == 1 && get(tcp, TCP_KEEPCNT) == 10)
        #expect(get(tcp, TCP_USER_TIMEOUT) == 10_000)
        // Not a TCP socket: which option failed, and why.
        let u = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(u) }
        #expect(NetworkPaths.armDeadLinkProbe(u, idle: 8, interval: 1, timeout: 10)?.option == "TCP_KEEPIDLE")
    }
}
