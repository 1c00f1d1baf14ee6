/// `soundbox-fleet config set`: the settings checked before anything is
/// sent (the allow-list and every value, in the device's own words), and
/// the tally of the devices' answers (docs/fleet.md "config set").
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

/// The answers to one push, by device.
public struct ConfigTally: Sendable {
    public enum Outcome: Sendable, Equatable {
        case applied
        /// The device's reason (`config/applied` "rejected", or a `rejected` config receipt: a signature refused).
        case refused(String)
        /// Offline when the config was sent: it applies when the device comes back (the config is retained).
        case offline
        case noAnswer
        /// Still waited for.
        case waiting
    }
    public let prefix: String
    public private(set) var outcomes: [String: Outcome] = [:]
    /// Answers that could not be read (counted, not believed).
    public private(set) var unreadable = 0

    /// Online devices are waited for; offline ones are counted as such
    /// (an answer from one that comes back meanwhile still counts).
    public init(prefix: String, targets: [DeviceRecord]) {
        self.prefix = prefix
        for d in targets { outcomes[d.id] = d.online == true ? .waiting : .offline }
    }

    public var waiting: Int { outcomes.values.filter { $0 == .waiting }.count }

    /// A message from `PREFIX/+/config/applied` or `PREFIX/+/receipt`.
    /// Retained ones are older answers, not ours: ignored.
    public mutating func take(topic: String, payload: [UInt8], retained: Bool) {
        guard !retained else { return }
        for (suffix, isReceipt) in [("/config/applied", false), ("/receipt", true)] where topic.hasSuffix(suffix) && topic.hasPrefix(prefix + "/") {
            let id = String(topic.dropFirst(prefix.count + 1).dropLast(suffix.count))
            guard let current = outcomes[id], current == .waiting || current == .offline || current == .noAnswer else { return }
            guard payload.count <= 64 << 10, let v = try? JSONValue.parse(payload) else { unreadable += 1; return }
            if isReceipt {
                // Only a refused config: payment and cmd receipts share the topic.
                guard case .string("config")? = v["kind"], case .string("rejected")? = v["status"] else { return }
                outcomes[id] = .refused(Self.text(v["reason"]) ?? "rejected (no reason given)")
            } else {
                switch v["ok"] {
                case .bool(true)?: outcomes[id] = .applied
                case .bool(false)?:
                    if case .object(let members)? = v["rejected"], !members.isEmpty {
                        outcomes[id] = .refused(members.map { Self.text($0.1) ?? $0.0 }.joined(separator: "; "))
                    } else {
                        outcomes[id] = .refused("refused (no reason given)")
                    }
                default: unreadable += 1
                }
            }
            return
        }
    }

    /// The deadline passed: those still waited for did not answer.
    public mutating func finish() {
        for (id, o) in outcomes where o == .waiting { outcomes[id] = .noAnswer }
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

    private static func text(_ v: JSONValue?) -> String? {
        guard case .string(let s)? = v else { return nil }
        return TextFile.excerpt(s, limit: 300)
    }
}
