/// Where a payment came from; picks the prefix clip of the announcement.
public enum Channel: String, Sendable, CaseIterable {
    case alipay, wechat, other
    /// Typed on the box (`soundboxctl say`), not paid: opens with the test
    /// prompt's words (测试 / "test"), so that a merchant never mistakes it
    /// for a payment (docs/signing.md). No backend message can ask for it.
    case local

    /// Any channel name the backend sends: unknown names (and "local") read as `other`.
    public init(name: String?) {
        switch name.flatMap({ Channel(rawValue: $0.lowercased()) }) {
        case .alipay?: self = .alipay
        case .wechat?: self = .wechat
        default: self = .other
        }
    }
}

/// Fixed sentences that are not amounts.
public enum Prompt: String, Sendable, CaseIterable {
    case volumeMax = "volume_max"
    case volumeMin = "volume_min"
    case networkConnected = "network_connected"
    case networkDisconnected = "network_disconnected"
    case test
}

/// A language's reading of amounts: a small pure function from an exact
/// amount to clip names. Adding a language means adding a `Grammar` here
/// and a voice pack whose manifest names it; nothing else.
public protocol Grammar: Sendable {
    /// The name voice-pack manifests use in their "grammar" field.
    var name: String { get }
    /// ISO 4217 code used when a payment names no currency.
    var defaultCurrency: String { get }
    /// The clip that starts an announcement for a channel.
    func prefix(for channel: Channel) -> String
    /// The clips that read `amount`, without the prefix.
    func clips(for amount: Amount) -> [String]
    /// The clips of a fixed prompt.
    func clips(for prompt: Prompt) -> [String]
    /// Today's summary: number of payments and their total (which may be
    /// zero: "today, zero payments").
    func summary(count: Int, total: Amount) -> [String]
    /// The offline summary (docs/soundboxd.md): the payments that waited
    /// while the box was offline, their number and total, in one sentence.
    func offlineSummary(count: Int, total: Amount) -> [String]
    /// Every clip name this grammar can ever produce: what a pack must hold.
    var clipNames: [String] { get }
}

extension Grammar {
    /// The whole announcement of a payment: prefix, then the amount.
    public func announcement(_ amount: Amount, channel: Channel = .other) -> [String] {
        [prefix(for: channel)] + clips(for: amount)
    }
}

/// The grammars this build knows, by name.
public enum Grammars {
    public static let all: [any Grammar] = [ChineseGrammar(), IndianEnglishGrammar(), HindiGrammar()] + IndicGrammar.all

    public static func named(_ name: String) -> (any Grammar)? {
        all.first { $0.name == name }
    }
}
