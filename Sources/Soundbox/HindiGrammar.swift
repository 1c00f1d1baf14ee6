/// hi-IN: Hindi with Indian grouping (सौ, हज़ार, लाख, करोड़, अरब) and
/// Hindi's own word for each number below one hundred, as AI4Bharat's
/// indic-numtowords (`num2words(n, lang='hi')`) writes them:
/// "एक लाख बीस हज़ार रुपये और पचास पैसे". Rules: docs/grammars.md.
public struct HindiGrammar: Grammar {
    public init() {}
    public let name = "hi-IN"
    public let defaultCurrency = "INR"

    /// 0…99: every one its own word.
    static let belowHundred = """
        शून्य एक दो तीन चार पाँच छः सात आठ नौ दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अट्ठारह उन्नीस \
        बीस इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस तीस इकतीस बत्तीस तैंतीस चौंतीस पैंतीस \
        छत्तीस सैंतीस अड़तीस उनतालीस चालीस इकतालीस बयालीस तैंतालीस चौंतालीस पैंतालीस छियालीस सैंतालीस अड़तालीस \
        उनचास पचास इक्यावन बावन तिरेपन चौवन पचपन छप्पन सत्तावन अट्ठावन उनसठ साठ इकसठ बासठ तिरेसठ चौंसठ पैंसठ \
        छयासठ सरसठ अड़सठ उनहत्तर सत्तर इकहत्तर बहत्तर तिहत्तर चौहत्तर पचहत्तर छिहत्तर सतहत्तर अठहत्तर उन्यासी \
        अस्सी इक्यासी बयासी तिरासी चौरासी पचासी छियासी सत्तासी अठासी नवासी नब्बे इक्यानवे बानवे तिरानवे चौरानवे \
        पचानवे छियानवे सत्तानवे अट्ठानवे निन्यानवे
        """.split(separator: " ").map(String.init)
    /// Largest first: अरब 10^9 (its multiplier up to 999), करोड़ 10^7, लाख 10^5, हज़ार, सौ.
    static let scales: [(Int64, String)] = [(1_000_000_000, "अरब"), (10_000_000, "करोड़"), (100_000, "लाख"), (1000, "हज़ार"), (100, "सौ")]

    public func prefix(for channel: Channel) -> String {
        switch channel {
        case .alipay, .wechat, .other: "भुगतान_प्राप्त"
        case .local: clips(for: .test)[0]
        }
    }

    public func clips(for amount: Amount) -> [String] {
        let rupees = amount.major, paise = amount.minor
        var out: [String] = []
        if rupees > 0 { out = Self.cardinal(rupees) + [rupees == 1 ? "रुपया" : "रुपये"] }
        if paise > 0 {
            if rupees > 0 { out.append("और") }
            out += Self.cardinal(Int64(paise)) + [paise == 1 ? "पैसा" : "पैसे"]
        }
        return out
    }

    public func clips(for prompt: Prompt) -> [String] {
        switch prompt {
        case .volumeMax: ["आवाज़_सबसे_तेज़"]
        case .volumeMin: ["आवाज़_सबसे_धीमी"]
        case .networkConnected: ["नेटवर्क_जुड़_गया"]
        case .networkDisconnected: ["नेटवर्क_कट_गया"]
        case .test: ["परीक्षण"]
        }
    }

    /// "आज <N> भुगतान, कुल <amount>".
    public func summary(count: Int, total: Amount) -> [String] { summary("आज", count, total) }
    /// "ऑफ़लाइन रहते हुए <N> भुगतान, कुल <amount>".
    public func offlineSummary(count: Int, total: Amount) -> [String] { summary("ऑफ़लाइन_रहते_हुए", count, total) }

    private func summary(_ opening: String, _ count: Int, _ total: Amount) -> [String] {
        [opening] + Self.cardinal(Int64(count)) + ["भुगतान"] + (total.minorUnits > 0 ? ["कुल"] + clips(for: total) : [])
    }

    public var clipNames: [String] {
        Self.belowHundred + Self.scales.map(\.1) + ["रुपया", "रुपये", "पैसा", "पैसे", "और"]
            + Channel.allCases.map(prefix(for:)) + Prompt.allCases.flatMap(clips(for:))
            + ["आज", "ऑफ़लाइन_रहते_हुए", "भुगतान", "कुल"]
    }

    /// The largest scale that fits, its multiplier read recursively, then
    /// the rest: 1,23,45,678 → बारह करोड़ चौंतीस लाख … (no word for zero
    /// groups, no "और" inside a number).
    static func cardinal(_ n: Int64) -> [String] {
        if n < 100 { return [belowHundred[Int(n)]] }
        let (scale, word) = scales.first { n >= $0.0 }!
        let rest = n % scale
        return cardinal(n / scale) + [word] + (rest > 0 ? cardinal(rest) : [])
    }
}
