/// en-IN: Indian numbering (thousand, lakh, crore) with the words the
/// Python library num2words gives for `lang='en_IN'`, punctuation removed:
/// "rupees one lakh twenty thousand and fifty paise". Rules: docs/grammars.md.
public struct IndianEnglishGrammar: Grammar {
    public init() {}
    public let name = "en-IN"
    public let defaultCurrency = "INR"

    static let ones = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                       "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                       "seventeen", "eighteen", "nineteen"]
    static let tens = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    static let scales: [(Int64, String)] = [(10_000_000, "crore"), (100_000, "lakh"), (1000, "thousand"), (100, "hundred")]

    public func prefix(for channel: Channel) -> String {
        switch channel {
        case .alipay: "alipay_received"
        case .wechat: "wechat_received"
        case .other: "received"
        case .local: clips(for: .test)[0]
        }
    }

    public func clips(for amount: Amount) -> [String] {
        let rupees = amount.major, paise = amount.minor
        var out: [String] = []
        if rupees > 0 { out = [rupees == 1 ? "rupee" : "rupees"] + Self.cardinal(rupees) }
        if paise > 0 {
            if rupees > 0 { out.append("and") }
            out += Self.cardinal(Int64(paise)) + [paise == 1 ? "paisa" : "paise"]
        }
        return out
    }

    public func clips(for prompt: Prompt) -> [String] { [prompt.rawValue] }

    /// "today's collection N payments total rupees …"
    public func summary(count: Int, total: Amount) -> [String] { summary("today_total", count, total) }
    /// "while offline N payments total rupees …"
    public func offlineSummary(count: Int, total: Amount) -> [String] { summary("while_offline", count, total) }

    private func summary(_ opening: String, _ count: Int, _ total: Amount) -> [String] {
        [opening] + Self.cardinal(Int64(count)) + ["payments"] + (total.minorUnits > 0 ? ["total"] + clips(for: total) : [])
    }

    public var clipNames: [String] {
        Self.ones + Self.tens.filter { !$0.isEmpty } + Self.scales.map(\.1)
            + ["and", "rupee", "rupees", "paisa", "paise"]
            + Channel.allCases.map(prefix(for:))
            + Prompt.allCases.flatMap(clips(for:))
            + ["today_total", "while_offline", "payments", "total"]
    }

    /// num2words' English cardinal with Indian scales: the largest scale
    /// that fits, its multiplier read recursively (so 12345 crore is
    /// "twelve thousand three hundred and forty five crore"), and "and"
    /// before a remainder below one hundred.
    static func cardinal(_ n: Int64) -> [String] {
        if n < 20 { return [ones[Int(n)]] }
        if n < 100 { return [tens[Int(n / 10)]] + (n % 10 == 0 ? [] : [ones[Int(n % 10)]]) }
        let (scale, word) = scales.first { n >= $0.0 }!
        let rest = n % scale
        var out = cardinal(n / scale) + [word]
        if rest > 0 {
            if rest < 100 { out.append("and") }
            out += cardinal(rest)
        }
        return out
    }
}
