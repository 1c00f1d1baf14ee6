/// `soundbox-fleet config set` and `cmd`: the settings checked before
/// anything is sent (the allow-list and every value, in the device's own
/// words), and the tally of the devices' answers (docs/fleet.md).
import Soundbox

public struct ConfigPush: Sendable, Equatable {
    /// key, value (as given), in the order given; each key once.
    public private(set) var settings: [(key: String, value: String)] = []

    public static func == (a: ConfigPush, b: ConfigPush) -> Bool { a.settings.elementsEqual(b.settings) { $0 == $1 } }

    /// `KEY=VALUE` words. A key the backend may not set, an unknown key or
    /// a value the device would refuse is refused here, with its reason.
    public init(_ words: [String]) throws(SelectorError) {
        guard !words.isEmpty else { throw SelectorError("config set needs KEY=VALUE (e.g. audio.volume=8)") }
        for w in words {
            guard let eq = w.firstIndex(of: "=") else { throw SelectorError("'\(TextFile.excerpt(w))' is no KEY=VALUE") }
            let name = String(w[..<eq]), value = String(w[w.index(after: eq)...])
            guard let key = ConfigKey.named(name) else {
                let remote = ConfigKey.all.filter { $0.refusal(.remote) == nil }.map(\.name)
                throw SelectorError("unknown key '\(TextFile.excerpt(name))'; the backend may set: \(remote.joined(separator: ", "))")
            }
            if let why = key.refusal(.remote) { throw SelectorError(why) }
            guard key.kind.parse(value) != nil else {
                throw SelectorError(ConfigError.badValue(key: name, value: value, allowed: key.kind.allowed).description)
            }
            guard !settings.contains(where: { $0.key == name }) else { throw SelectorError("\(name) is given twice") }
            settings.append((name, value))
        }
    }

    /// The config message, before signing: `{"audio.volume":"8", ...}`.
    public var document: JSONValue { .object(settings.map { ($0.key, .string($0.value)) }) }
}

/// The answers to one push (a config or a command to many devices), by device.
public struct PushTally: Sendable {
    /// A config is answered on `config/applied`; a command only when it is
    /// refused (a `rejected` receipt of kind cmd): silence means accepted.
    public enum Kind: String, Sendable { case config, cmd }
    public enum Outcome: Sendable, Equatable {
        /// A config applied; a command the broker delivered and the device did not refuse.
        case applied
        /// The device's reason (`config/applied` "rejected", or a `rejected` config receipt: a signature refused).
        case refused(String)
        /// Offline when it was sent: a config applies when the device comes
        /// back (it is retained); a command waits in the device's session.
        case offline
        case noAnswer
        /// Still waited for.
        case waiting
    }
    public let prefix: String
    public let kind: Kind
    public private(set) var outcomes: [String: Outcome] = [:]
    /// Answers that could not be read (counted, not believed).
    public private(set) var unreadable = 0

    /// Online devices are waited for; offline ones are counted as such
    /// (an answer from one that comes back meanwhile still counts).
    public init(prefix: String, kind: Kind, targets: [DeviceRecord]) {
        self.prefix = prefix
        self.kind = kind
        for d in targets { outcomes[d.id] = d.online == true ? .waiting : .offline }
        waiting = outcomes.values.filter { $0 == .waiting }.count
    }

    /// Devices still waited for (kept as answers come: a fleet answers 10,000 times).
    public private(set) var waiting = 0

    private mutating func settle(_ id: String, _ outcome: Outcome) {
        if outcomes[id] == .waiting { waiting -= 1 }
        outcomes[id] = outcome
    }

    /// A message from `PREFIX/+/config/applied` or `PREFIX/+/receipt`.
    /// Retained ones are older answers, not ours: ignored.
    public mutating func take(topic: String, payload: [UInt8], retained: Bool) {
        guard !retained else { return }
        for (suffix, isReceipt) in [("/config/applied", false), ("/receipt", true)] where topic.hasSuffix(suffix) && topic.hasPrefix(prefix + "/") {
            if !isReceipt && kind == .cmd { return }
            let id = String(topic.dropFirst(prefix.count + 1).dropLast(suffix.count))
            guard let current = outcomes[id], current == .waiting || current == .offline || current == .noAnswer else { return }
            guard payload.count <= 64 << 10, let v = try? JSONValue.parse(payload) else { unreadable += 1; return }
            if isReceipt {
                // Only a refusal of this kind: payment receipts share the topic.
                guard case .string(kind.rawValue)? = v["kind"], case .string("rejected")? = v["status"] else { return }
                settle(id, .refused(Self.text(v["reason"]) ?? "rejected (no reason given)"))
            } else {
                switch v["ok"] {
                case .bool(true)?: settle(id, .applied)
                case .bool(false)?:
                    if case .object(let members)? = v["rejected"], !members.isEmpty {
                        settle(id, .refused(members.map { Self.text($0.1) ?? TextFile.excerpt($0.0, limit: 300) }.joined(separator: "; ")))
                    } else {
                        settle(id, .refused("refused (no reason given)"))
                    }
                default: unreadable += 1
                }
            }
            return
        }
    }

    /// The deadline passed: a config still waited for had no answer; a
    /// command not refused by then was accepted.
    public mutating func finish() {
        for (id, o) in outcomes where o == .waiting { settle(id, kind == .config ? .noAnswer : .applied) }
    }

    /// Ids by outcome kind: applied, refused, offline, no answer (sorted).
    public func ids(_ kind: String) -> [String] {
        outcomes.filter { Self.kind($0.value) == kind }.keys.sorted()
    }

    public static func kind(_ o: Outcome) -> String {
        switch o {
        case .applied: "applied"
        case .refused: "refused"
        case .offline: "offline"
        case .noAnswer: "no_answer"
        case .waiting: "waiting"
        }
    }

    /// A device's reason as shown (escaped and bounded: `TextFile.excerpt`).
    private static func text(_ v: JSONValue?) -> String? {
        guard case .string(let s)? = v else { return nil }
        return TextFile.excerpt(s, limit: 300)
    }
}
