// The kernel's routing netlink (rtnetlink(7)): what the MQTT client needs
// to know of the box's links, addresses and routes, as systemd-networkd
// and NetworkManager learn it — from events, not timers. The parse is pure
// (`RoutingNetlink.parse`, `LinkTable`); `LinkWatcher` owns the socket.
import CLinux
import Glibc

/// One thing the kernel said on the routing netlink.
public enum RoutingMessage: Equatable, Sendable {
    /// A link's state: `running` is administratively up and operational
    /// (a carrier, an associated Wi-Fi); `loopback` for `lo`.
    case link(index: Int32, name: String?, running: Bool, loopback: Bool)
    case linkGone(index: Int32)
    /// An address or a route came or went: the way to a host may differ.
    case addressChanged, routeChanged
    /// The kernel dropped messages (the socket's buffer overflowed): what
    /// is known of the links must be read again.
    case overrun
}

public enum RoutingNetlink {
    /// The multicast groups watched: links, IPv4 and IPv6 addresses and routes.
    public static let groups = UInt32(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE)

    /// Parses one datagram of netlink messages. What makes no sense (a
    /// length past the end or under a header, a payload too short for its
    /// type, a link index ≤ 0) is counted in `malformed` and skipped; a
    /// header whose length cannot be trusted ends the datagram.
    public static func parse(_ bytes: [UInt8]) -> (messages: [RoutingMessage], malformed: Int) {
        var messages: [RoutingMessage] = []
        var malformed = 0
        var offset = 0
        while bytes.count - offset >= 16 {
            let length = Int(u32(bytes, offset))
            guard length >= 16, length <= bytes.count - offset else { malformed += 1; break }
            let type = Int32(u16(bytes, offset + 4))
            let payload = (offset + 16)..<(offset + length)
            switch type {
            case NLMSG_OVERRUN: messages.append(.overrun)
            case Int32(RTM_NEWLINK), Int32(RTM_DELLINK):
                // struct ifinfomsg: family, pad, type (16), index (32), flags (32), change (32).
                guard payload.count >= 16 else { malformed += 1; break }
                let index = Int32(bitPattern: u32(bytes, payload.lowerBound + 4))
                guard index > 0 else { malformed += 1; break }
                if type == Int32(RTM_DELLINK) { messages.append(.linkGone(index: index)); break }
                let flags = Int32(bitPattern: u32(bytes, payload.lowerBound + 8))
                let name = attribute(IFLA_IFNAME, in: bytes, (payload.lowerBound + 16)..<payload.upperBound, malformed: &malformed)
                    .map(interfaceName)
                messages.append(.link(index: index, name: name,
                                      running: flags & Int32(IFF_UP) != 0 && flags & Int32(IFF_RUNNING) != 0,
                                      loopback: flags & Int32(IFF_LOOPBACK) != 0))
            case Int32(RTM_NEWADDR), Int32(RTM_DELADDR):
                // struct ifaddrmsg: 8 bytes.
                if payload.count >= 8 { messages.append(.addressChanged) } else { malformed += 1 }
            case Int32(RTM_NEWROUTE), Int32(RTM_DELROUTE):
                // struct rtmsg: 12 bytes.
                if payload.count >= 12 { messages.append(.routeChanged) } else { malformed += 1 }
            default:
                break   // NOOP, ERROR, DONE (a dump's end), and types not asked for
            }
            offset += (length + 3) & ~3
        }
        if offset < bytes.count && bytes.count - offset < 16 && malformed == 0 { malformed += 1 }   // a stray tail
        return (messages, malformed)
    }

    /// The payload of attribute `type` among the rtattrs in `range`, if present and whole.
    static func attribute(_ type: Int, in bytes: [UInt8], _ range: Range<Int>, malformed: inout Int) -> ArraySlice<UInt8>? {
        var offset = range.lowerBound
        while range.upperBound - offset >= 4 {
            let length = Int(u16(bytes, offset))
            guard length >= 4, length <= range.upperBound - offset else { malformed += 1; return nil }
            if Int(u16(bytes, offset + 2)) == type { return bytes[(offset + 4)..<(offset + length)] }
            offset += (length + 3) & ~3
        }
        return nil
    }

    /// An interface name as the kernel gives it (NUL-terminated, at most
    /// 15 bytes), as text for the log.
    static func interfaceName(_ raw: ArraySlice<UInt8>) -> String {
        String(decoding: raw.prefix { $0 != 0 }.prefix(15), as: UTF8.self)
    }

    private static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        b.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) }
    }
    private static func u16(_ b: [UInt8], _ at: Int) -> UInt16 {
        b.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt16.self) }
    }
}

/// What is known of the box's links, from the messages: which came back.
/// Bounded (`capacity` links; more are not followed).
public struct LinkTable: Sendable {
    public static let capacity = 256
    private var links: [Int32: (name: String?, running: Bool)] = [:]

    public init() {}

    /// Applies `messages`: the links (not loopback) that were known not
    /// running and now run, and whether the way to a host may have changed
    /// (any link, address or route news, or an overrun).
    public mutating func apply(_ messages: [RoutingMessage]) -> (regained: Set<Int32>, changed: Bool) {
        var regained = Set<Int32>()
        var changed = false
        for m in messages {
            switch m {
            case .link(let index, let name, let running, let loopback):
                let before = links[index]
                if before == nil && links.count >= Self.capacity { continue }
                links[index] = (name ?? before?.name, running)
                if before?.running != running { changed = true }
                if running, before?.running == false, !loopback { regained.insert(index) }
            case .linkGone(let index):
                if links.removeValue(forKey: index) != nil { changed = true }
                regained.remove(index)
            case .addressChanged, .routeChanged, .overrun:
                changed = true
            }
        }
        return (regained, changed)
    }

    /// A link's name, if it was heard of.
    public func name(_ index: Int32) -> String? { links[index]?.name ?? nil }
    public var count: Int { links.count }
}

/// Owns a NETLINK_ROUTE socket subscribed to `RoutingNetlink.groups`
/// (non-blocking, close-on-exec) and asks the kernel for every link's
/// state at the start and after an overrun. Only the kernel's messages are
/// read (sender port 0): another process that writes to this socket is
/// not heard. Not thread-safe: one thread owns it.
public final class LinkWatcher {
    public let fd: Int32
    private var sequence: UInt32 = 0
    private var buffer = [UInt8](repeating: 0, count: 32 * 1024)

    public init() throws(Errno) {
        let s = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), NETLINK_ROUTE)
        guard s >= 0 else { throw .current }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = RoutingNetlink.groups
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard bound == 0 else { let e = Errno.current; Glibc.close(s); throw e }
        fd = s
        requestLinks()
    }

    deinit { Glibc.close(fd) }

    /// Asks for every link's state (a dump: its answers arrive as link messages).
    private func requestLinks() {
        sequence &+= 1
        // struct nlmsghdr (16) + struct ifinfomsg (16), family AF_UNSPEC.
        var request = [UInt8](repeating: 0, count: 32)
        request.withUnsafeMutableBytes { b in
            b.storeBytes(of: UInt32(32), toByteOffset: 0, as: UInt32.self)
            b.storeBytes(of: UInt16(RTM_GETLINK), toByteOffset: 4, as: UInt16.self)
            b.storeBytes(of: UInt16(NLM_F_REQUEST | NLM_F_DUMP), toByteOffset: 6, as: UInt16.self)
            b.storeBytes(of: sequence, toByteOffset: 8, as: UInt32.self)
        }
        var kernel = sockaddr_nl()
        kernel.nl_family = sa_family_t(AF_NETLINK)
        _ = request.withUnsafeBytes { b in
            withUnsafePointer(to: &kernel) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                }
            }
        }
    }

    /// Reads every datagram waiting (never blocks): the kernel's messages,
    /// and how many parts made no sense or came from someone else.
    public func read() -> (messages: [RoutingMessage], malformed: Int) {
        var messages: [RoutingMessage] = []
        var malformed = 0
        // Bounded: a flood is read on the next wake, not in one go.
        for _ in 0..<64 {
            var from = sockaddr_nl()
            var fromLength = socklen_t(MemoryLayout<sockaddr_nl>.size)
            let n = buffer.withUnsafeMutableBytes { b in
                withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &fromLength) }
                }
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ENOBUFS {
                    messages.append(.overrun)
                    requestLinks()
                    continue
                }
                break   // EAGAIN: all read
            }
            guard from.nl_pid == 0 else { malformed += 1; continue }
            let parsed = RoutingNetlink.parse(Array(buffer[0..<n]))
            messages += parsed.messages
            malformed += parsed.malformed
        }
        return (messages, malformed)
    }
}

/// The kernel's way to a host: the local address it would send from, and
/// its interface (0 when the address is on none: it just went away).
public struct RoutePath: Equatable, Sendable, CustomStringConvertible {
    public let source: String
    public let interface: Int32
    public init(source: String, interface: Int32) { self.source = source; self.interface = interface }
    public var description: String { "from \(source)" }
}

/// Addresses and routes, asked of the kernel (no packet is sent).
public enum NetworkPaths {
    /// The route the kernel would take to `address` (numeric IPv4 or IPv6)
    /// now, looked up by connecting a UDP socket (nothing is sent); nil
    /// when there is none (ENETUNREACH) or `address` is not numeric.
    public static func route(to address: String) -> RoutePath? {
        guard var target = SocketAddress(numeric: address, port: 9) else { return nil }
        let s = socket(Int32(target.family), Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { return nil }
        defer { Glibc.close(s) }
        guard target.withSockaddr({ connect(s, $0, $1) }) == 0, let source = localAddress(s) else { return nil }
        return RoutePath(source: source, interface: interface(holding: source))
    }

    /// The interface that holds local address `address`, or 0.
    public static func interface(holding address: String) -> Int32 {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return 0 }
        defer { freeifaddrs(list) }
        var entry = list
        while let e = entry {
            if let a = e.pointee.ifa_addr, SocketAddress(a)?.host == address {
                return Int32(bitPattern: if_nametoindex(e.pointee.ifa_name))
            }
            entry = e.pointee.ifa_next
        }
        return 0
    }

    /// The numeric address of a connected socket's peer; nil while it is
    /// not connected (a connect in progress) or not an IP socket.
    public static func peerAddress(_ fd: Int32) -> String? { address(of: fd, getpeername) }

    /// The numeric local address a socket is bound to.
    public static func localAddress(_ fd: Int32) -> String? { address(of: fd, getsockname) }

    private static func address(of fd: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0)?.host } }
    }

    /// Whether `text` is a numeric IPv4 or IPv6 address.
    public static func isNumeric(_ text: String) -> Bool { SocketAddress(numeric: text, port: 0) != nil }

    /// A socket's address family (AF_INET, AF_INET6, ...), or 0.
    public static func family(of fd: Int32) -> Int32 {
        var domain: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 ? domain : 0
    }

    /// Whether host name `name` has an address of `family` (a lookup:
    /// the resolver's own timeouts bound it).
    public static func resolves(_ name: String, family: Int32) -> Bool {
        var hints = addrinfo()
        hints.ai_family = family
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &found) == 0 else { return false }
        freeaddrinfo(found)
        return true
    }

    /// Arms the kernel's own watch on a TCP connection: keep-alive probes
    /// after `idle` seconds without traffic, then every `interval` seconds,
    /// and the connection dropped (ETIMEDOUT) once nothing has come back
    /// for `timeout` seconds — probes or data unacknowledged alike
    /// (TCP_USER_TIMEOUT, which also bounds a connect's SYN retries). The
    /// first option that cannot be set, or nil.
    public static func armDeadLinkProbe(_ fd: Int32, idle: Int, interval: Int, timeout: Int) -> (option: String, error: Errno)? {
        func set(_ level: Int32, _ option: Int32, _ value: Int32, _ name: String) -> (String, Errno)? {
            var v = value
            return setsockopt(fd, level, option, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 ? nil : (name, .current)
        }
        let tcp = Int32(IPPROTO_TCP)
        return set(SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE")
            ?? set(tcp, TCP_KEEPIDLE, Int32(max(1, idle)), "TCP_KEEPIDLE")
            ?? set(tcp, TCP_KEEPINTVL, Int32(max(1, interval)), "TCP_KEEPINTVL")
            ?? set(tcp, TCP_KEEPCNT, Int32(max(1, timeout / max(1, interval))), "TCP_KEEPCNT")
            ?? set(tcp, TCP_USER_TIMEOUT, Int32(clamping: timeout * 1000), "TCP_USER_TIMEOUT")
    }
}

/// An IPv4 or IPv6 socket address.
struct SocketAddress {
    private var storage = sockaddr_storage()
    let family: Int32

    /// From numeric text (no name lookup); nil if it is not one.
    init?(numeric text: String, port: UInt16) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, text, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            family = AF_INET
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: v4, as: sockaddr_in.self) }
            return
        }
        var v6 = sockaddr_in6()
        guard inet_pton(AF_INET6, text, &v6.sin6_addr) == 1 else { return nil }
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        family = AF_INET6
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: v6, as: sockaddr_in6.self) }
    }

    /// From a kernel's sockaddr; nil unless IPv4 or IPv6.
    init?(_ address: UnsafePointer<sockaddr>) {
        family = Int32(address.pointee.sa_family)
        let size: Int
        switch family {
        case AF_INET: size = MemoryLayout<sockaddr_in>.size
        case AF_INET6: size = MemoryLayout<sockaddr_in6>.size
        default: return nil
        }
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: size)) }
    }

    /// The address as numeric text ("10.0.0.5", "fe80::1").
    var host: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        withUnsafeBytes(of: storage) { b in
            if family == AF_INET {
                var a = b.load(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &a, &text, socklen_t(text.count))
            } else {
                var a = b.load(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &a, &text, socklen_t(text.count))
            }
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    mutating func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }
}
