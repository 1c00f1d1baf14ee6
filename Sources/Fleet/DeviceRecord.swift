/// What the operator's tool believes about one device, read from the
/// device's retained `status` (docs/mqtt.md) and the broker's will. Pure:
/// every hostile status is tested without a broker (docs/fleet.md).
import Soundbox

public struct DeviceRecord: Sendable, Equatable {
    public var id: String
    /// nil: the status did not say (never a guess).
    public var online: Bool?
    /// When the connection this status belongs to began (Unix ms): on a
    /// cluster whose nodes each keep their own retained status, the newest
    /// connection's is the truth (Inventory).
    public var since: Int64?
    public var version: String?
    public var slot: String?
    /// `update.state` (idle, downloading, …) and the version it concerns.
    public var updateState: String?
    public var updateVersion: String?
    public var updateProgress: Int?
    public var updateReason: String?
    /// The request's id (`cmd update`'s `id`: a rollout's).
    public var updateID: String?
    public var volume: Int?
    public var muted: Bool?
    public var voice: String?
    public var queueDepth: Int?
    public var faults: [String] = []
    public var uptime: Int?
    public var bootReason: String?
    /// Unix seconds when this tool last saw the device online (its own
    /// observation, docs/fleet.md "Last seen"), if ever.
    public var lastSeen: Int64?

    public init(id: String) { self.id = id }
}

/// Why a status was not believed. Each is counted and shown by the tool.
public enum StatusProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// Larger than `DeviceRecord.maxStatusBytes`.
    case oversized(Int)
    case notJSON(String)
    case notObject(String)
    /// The payload names another device than its topic does.
    case otherID(String)
    /// A known field with a value of the wrong kind or out of range.
    case badField(String, String)
    /// A topic that is no device's status (`prefix/<id>/status` with a valid id).
    case badTopic

    public var description: String {
        switch self {
        case .oversized(let n): "oversized status: \(n) bytes (at most \(DeviceRecord.maxStatusBytes))"
        case .notJSON(let why): "not valid JSON: \(why)"
        case .notObject(let kind): "the status is \(kind), not an object"
        case .otherID(let other): "the status names another device: '\(TextFile.excerpt(other, limit: 80))'"
        case .badField(let key, let why): "\(key): \(why)"
        case .badTopic: "not a device's status topic"
        }
    }

    /// A short word for counting: `oversized`, `not_json`, `other_id`, …
    public var kind: String {
        switch self {
        case .oversized: "oversized"
        case .notJSON: "not_json"
        case .notObject: "not_object"
        case .otherID: "other_id"
        case .badField: "bad_field"
        case .badTopic: "bad_topic"
        }
    }
}

extension DeviceRecord {
    /// A device's status is a few hundred bytes; the broker should refuse
    /// anything near this (board/mosquitto: message_size_limit 16 KiB).
    public static let maxStatusBytes = 8 * 1024

    /// A device id as the device accepts it (`device.id`: one topic level,
    /// 1-64 bytes, no control or invisible character).
    public static func isValidID(_ id: some StringProtocol) -> Bool { ConfigKey.isDeviceID(id) }

    /// The device id in `prefix/<id>/status`, if the topic is one.
    public static func device(inStatusTopic topic: String, prefix: String) -> String? {
        guard topic.hasPrefix(prefix + "/"), topic.hasSuffix("/status") else { return nil }
        let middle = topic.utf8.dropFirst(prefix.utf8.count + 1).dropLast("/status".utf8.count)
        guard let id = String(middle), isValidID(id) else { return nil }
        return id
    }

    /// Reads a status payload for the device `id` (from its topic). Unknown
    /// fields are ignored (a newer device may say more); a known field of
    /// the wrong kind refuses the whole status, so no half-read value is shown.
    public static func parse(id: String, payload: [UInt8]) -> Result<DeviceRecord, StatusProblem> {
        guard payload.count <= maxStatusBytes else { return .failure(.oversized(payload.count)) }
        let value: JSONValue
        do { value = try JSONValue.parse(payload, maxDepth: 4) } catch { return .failure(.notJSON(error.description)) }
        guard case .object = value else { return .failure(.notObject(value.kindDescription)) }
        var r = DeviceRecord(id: id)
        do throws(StatusProblem) {
            if let named = try text(value, "id"), named != id { throw .otherID(named) }
            r.online = try flag(value, "online")
            r.since = try number(value, "since_ms", 0...253_402_300_799_999).map { Int64($0) }
            r.version = try text(value, "version")
            r.slot = try text(value, "slot")
            r.volume = try number(value, "volume", 0...10)
            r.muted = try flag(value, "muted")
            r.voice = try text(value, "voice")
            r.queueDepth = try number(value, "queue_depth", 0...Int(Int32.max))
            r.uptime = try number(value, "uptime_s", 0...Int(Int32.max))
            r.bootReason = try text(value, "boot_reason")
            switch value["faults"] {
            case nil, .null?: break
            case .array(let items)?:
                guard items.count <= 32 else { throw .badField("faults", "\(items.count) entries (at most 32)") }
                for item in items {
                    guard case .string(let f) = item, isWord(f) else { throw .badField("faults", "each must be a short word") }
                    r.faults.append(f)
                }
            case let other?: throw .badField("faults", "must be an array, not \(other.kindDescription)")
            }
            switch value["update"] {
            case nil, .null?: break
            case let u? where u.isObject:
                r.updateState = try text(u, "state", as: "update.state")
                r.updateVersion = try text(u, "version", as: "update.version")
                r.updateProgress = try number(u, "progress", 0...100, as: "update.progress")
                r.updateReason = try text(u, "reason", as: "update.reason", limit: 600)
                r.updateID = try text(u, "id", as: "update.id")
            case let other?: throw .badField("update", "must be an object, not \(other.kindDescription)")
            }
        } catch { return .failure(error) }
        return .success(r)
    }

    private static func text(_ v: JSONValue, _ key: String, as name: String? = nil, limit: Int = 64) throws(StatusProblem) -> String? {
        switch v[key] {
        case nil, .null?: return nil
        case .string(let s)?:
            // Shown on an operator's terminal: printable, bounded.
            guard s.utf8.count <= limit, s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f && !(0x80...0x9f).contains($0.value) }) else {
                throw .badField(name ?? key, "must be printable text of at most \(limit) bytes")
            }
            return s
        case let other?: throw .badField(name ?? key, "must be a string, not \(other.kindDescription)")
        }
    }

    private static func flag(_ v: JSONValue, _ key: String) throws(StatusProblem) -> Bool? {
        switch v[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let other?: throw .badField(key, "must be true or false, not \(other.kindDescription)")
        }
    }

    private static func number(_ v: JSONValue, _ key: String, _ range: ClosedRange<Int>, as name: String? = nil) throws(StatusProblem) -> Int? {
        switch v[key] {
        case nil, .null?: return nil
        case .number(let n)?:
            guard let i = Int(n), range.contains(i) else { throw .badField(name ?? key, "must be a whole number \(range.lowerBound)-\(range.upperBound), not \(TextFile.excerpt(n, limit: 40))") }
            return i
        case let other?: throw .badField(name ?? key, "must be a number, not \(other.kindDescription)")
        }
    }

    private static func isWord(_ s: String) -> Bool {
        (1...32).contains(s.utf8.count) && s.utf8.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5f || $0 == 0x2d }
    }
}

extension JSONValue {
    var isObject: Bool { if case .object = self { true } else { false } }
}
