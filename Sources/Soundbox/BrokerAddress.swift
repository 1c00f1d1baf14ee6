/// The brokers `mqtt.host` names: one, or several of a cluster tried in
/// turn (docs/mqtt.md "Several brokers"). Pure.
public struct BrokerAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    /// nil: `mqtt.port` (or the default for the transport).
    public var port: Int?

    public init(host: String, port: Int? = nil) { self.host = host; self.port = port }

    public static let maxBrokers = 8

    /// `host`, `host:port`, `[v6]:port` or a bare IPv6 address, separated by
    /// commas (spaces around them allowed); nil if any entry is not one.
    public static func list(_ text: String) -> [BrokerAddress]? {
        let entries = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(" ") }
        guard (1...maxBrokers).contains(entries.count) else { return nil }
        var out: [BrokerAddress] = []
        for e in entries {
            guard let b = one(e) else { return nil }
            out.append(b)
        }
        return out
    }

    private static func one(_ e: Substring) -> BrokerAddress? {
        var host = e, port: Int?
        if e.hasPrefix("[") {
            guard let close = e.firstIndex(of: "]") else { return nil }
            host = e[e.index(after: e.startIndex)..<close]
            let rest = e[e.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            }
        } else if e.filter({ $0 == ":" }).count == 1, let colon = e.firstIndex(of: ":") {
            host = e[..<colon]
            guard let p = Int(e[e.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
        }
        guard !host.isEmpty, ConfigKey.Kind.fits(String(host), ConfigKey.Kind.maxHost, refusing: " ,[]") else { return nil }
        return BrokerAddress(host: String(host), port: port)
    }

    public var description: String {
        guard let port else { return host }
        return (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }
}

extension Substring {
    func trimmingCharacters(_ c: Character) -> Substring {
        var s = self
        while s.first == c { s = s.dropFirst() }
        while s.last == c { s = s.dropLast() }
        return s
    }
}
