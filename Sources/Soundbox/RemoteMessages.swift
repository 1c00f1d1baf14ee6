/// The backend's config and cmd messages (DESIGN §2), parsed: pure, so
/// every malformed shape is tested without a broker.
public enum RemoteConfig {
    /// A partial config object as `key → value` text. Keys may be dotted
    /// ({"audio.volume": 8}) or nested ({"audio": {"volume": 8}}); values are
    /// strings, numbers (their exact text) or booleans. The signature's
    /// members (`sig`, `kid`, `ts`, ...) are not settings. Validation of
    /// keys and values is the settings' job.
    public static func changes(_ document: JSONValue) -> Result<[String: String], RemoteMessageError> {
        guard case .object = document else { return .failure(.init("config must be a JSON object")) }
        return Signature.flatten(document, excluding: Signature.envelopeFields).map { pairs in
            Dictionary(pairs, uniquingKeysWith: { _, last in last })
        }
    }
}

/// A config or cmd message's JSON, at most `PaymentMessage.maxBytes`.
public enum RemoteMessage {
    public static func document(_ bytes: [UInt8], what: String, maxDepth: Int = 16) -> Result<JSONValue, RemoteMessageError> {
        guard bytes.count <= PaymentMessage.maxBytes else { return .failure(.init("\(what) is \(bytes.count) bytes, more than \(PaymentMessage.maxBytes)")) }
        do { return .success(try JSONValue.parse(bytes, maxDepth: maxDepth)) } catch { return .failure(.init("not valid JSON: \(error)")) }
    }
}

/// A command on the cmd topic: {"cmd": "replay"|"say"|"summary"|"test"|"update", ...}.
public enum RemoteCommand: Sendable, Equatable {
    /// Speak a payment again: the one named, else the last one.
    case replay(id: String?)
    /// Announce a payment sent as a command (same fields as a payment).
    case say(Payment)
    /// Speak today's count and total.
    case summary
    /// Speak the test prompt and a sample amount.
    case test
    /// Download, install and try a system update (image/README.md, Updates).
    case update(UpdateRequest)

    public static func parse(_ bytes: [UInt8], maxAmount: Amount, now: Int64) -> Result<RemoteCommand, RemoteMessageError> {
        RemoteMessage.document(bytes, what: "cmd").flatMap { parse($0, maxAmount: maxAmount, now: now) }
    }

    public static func parse(_ value: JSONValue, maxAmount: Amount, now: Int64) -> Result<RemoteCommand, RemoteMessageError> {
        guard case .string(let name)? = value["cmd"] else { return .failure(.init("cmd must be a string naming the command")) }
        switch name {
        case "replay":
            switch value["id"] {
            case nil, .null?: return .success(.replay(id: nil))
            case .string(let id)?: return .success(.replay(id: id))
            case let other?: return .failure(.init("id must be a string, not \(other.kindDescription)"))
            }
        case "say":
            // A payment without an id gets one, so it can be deduplicated and receipted.
            var v = value
            if value["id"] == nil, case .object(var members) = value {
                members.append(("id", .string("cmd-\(now)")))
                v = .object(members)
            }
            switch PaymentMessage.parse(v, maxAmount: maxAmount) {
            case .success(let p): return .success(.say(p))
            case .failure(let r): return .failure(.init(r.reason))
            }
        case "summary": return .success(.summary)
        case "test": return .success(.test)
        case "update": return UpdateRequest.parse(value).map { .update($0) }
        default: return .failure(.init("unknown cmd '\(name)'; known: replay, say, summary, test, update"))
        }
    }
}

public struct RemoteMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
