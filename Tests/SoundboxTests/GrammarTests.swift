import Testing
import TestSupport
@testable import Soundbox

private func amount(_ text: String) throws -> Amount { try Amount.parse(text, max: .wordsMax) }
private let zh = ChineseGrammar()
private let en = IndianEnglishGrammar()
private let hi = HindiGrammar()

@Suite struct ChineseGrammarTests {
    /// DESIGN §3, row by row.
    @Test(arguments: [
        ("0.01", "零 点 零 一 元"), ("10", "十 元"), ("10.50", "十 点 五 元"),
        ("101", "一 百 零 一 元"), ("110", "一 百 一 十 元"), ("1010", "一 千 零 一 十 元"),
        ("100010", "十 万 零 一 十 元"), ("1001000", "一 百 万 一 千 元"),
        ("100000001", "一 亿 零 一 元"),
        ("123456789.12", "一 亿 二 千 三 百 四 十 五 万 六 千 七 百 八 十 九 点 一 二 元"),
    ])
    func designTable(_ text: String, _ expected: String) throws {
        #expect(zh.clips(for: try amount(text)).joined(separator: " ") == expected)
    }

    @Test func prefixByChannel() throws {
        let a = try amount("1")
        #expect(zh.announcement(a, channel: .alipay) == ["支付宝到账", "一", "元"])
        #expect(zh.announcement(a, channel: .wechat) == ["微信收款", "一", "元"])
        #expect(zh.announcement(a, channel: Channel(name: "unionpay")) == ["收款到账", "一", "元"])
        #expect(zh.announcement(a) == ["收款到账", "一", "元"])
    }

    @Test func summaryReadsCountAndTotal() throws {
        #expect(zh.summary(count: 12, total: try amount("300.5"))
            == ["今日收款", "十", "二", "笔", "共", "三", "百", "点", "五", "元"])
        #expect(zh.summary(count: 0, total: Amount(minorUnits: 0)) == ["今日收款", "零", "笔"])
        #expect(zh.offlineSummary(count: 40, total: try amount("1234.5"))
            == ["离线期间收款", "四", "十", "笔", "共", "一", "千", "二", "百", "三", "十", "四", "点", "五", "元"])
        #expect(en.offlineSummary(count: 3, total: try amount("12"))
            == ["while_offline", "three", "payments", "total", "rupees", "twelve"])
        #expect(hi.offlineSummary(count: 3, total: try amount("12")) == ["ऑफ़लाइन_रहते_हुए", "तीन", "भुगतान", "कुल", "बारह", "रुपये"])
    }
}

@Suite struct IndianEnglishGrammarTests {
    @Test(arguments: [
        ("120000.50", "rupees one lakh twenty thousand and fifty paise"),
        ("1.00", "rupee one"), ("0.01", "one paisa"), ("0.05", "five paise"),
        ("1.01", "rupee one and one paisa"), ("100000", "rupees one lakh"),
        ("99999", "rupees ninety nine thousand nine hundred and ninety nine"),
        ("10000000", "rupees one crore"), ("9999999", "rupees ninety nine lakh ninety nine thousand nine hundred and ninety nine"),
        ("123450000000", "rupees twelve thousand three hundred and forty five crore"),
    ])
    func lakhAndCroreBoundaries(_ text: String, _ expected: String) throws {
        #expect(en.clips(for: try amount(text)).joined(separator: " ") == expected)
    }

    @Test func prefixByChannel() throws {
        #expect(en.announcement(try amount("2"), channel: .alipay) == ["alipay_received", "rupees", "two"])
    }
}

@Suite struct HindiGrammarTests {
    /// The boundaries of the Indian grouping, and singular रुपया / पैसा.
    @Test(arguments: [
        ("99", "निन्यानवे रुपये"), ("100", "एक सौ रुपये"), ("999", "नौ सौ निन्यानवे रुपये"),
        ("1000", "एक हज़ार रुपये"), ("99999", "निन्यानवे हज़ार नौ सौ निन्यानवे रुपये"),
        ("100000", "एक लाख रुपये"), ("9999999", "निन्यानवे लाख निन्यानवे हज़ार नौ सौ निन्यानवे रुपये"),
        ("10000000", "एक करोड़ रुपये"), ("999999999", "निन्यानवे करोड़ निन्यानवे लाख निन्यानवे हज़ार नौ सौ निन्यानवे रुपये"),
        ("1000000000", "एक अरब रुपये"), ("100000001", "दस करोड़ एक रुपये"),
        ("1.00", "एक रुपया"), ("0.01", "एक पैसा"), ("0.05", "पाँच पैसे"), ("1.01", "एक रुपया और एक पैसा"),
        ("123.45", "एक सौ तेईस रुपये और पैंतालीस पैसे"),
    ])
    func groupingBoundaries(_ text: String, _ expected: String) throws {
        #expect(hi.clips(for: try amount(text)).joined(separator: " ") == expected)
    }

    @Test func prefixPromptsAndSummary() throws {
        #expect(hi.announcement(try amount("2"), channel: .other) == ["भुगतान_प्राप्त", "दो", "रुपये"])
        #expect(hi.announcement(try amount("2"), channel: .local) == ["परीक्षण", "दो", "रुपये"])
        #expect(hi.summary(count: 3, total: try amount("150")) == ["आज", "तीन", "भुगतान", "कुल", "एक", "सौ", "पचास", "रुपये"])
        #expect(hi.summary(count: 0, total: Amount(minorUnits: 0)) == ["आज", "शून्य", "भुगतान"])
        #expect(HindiGrammar.belowHundred.count == 100 && Set(HindiGrammar.belowHundred).count == 100)
    }
}

/// Every word a grammar produces must be a clip it declares, or a voice
/// pack could pass `voice check` and still miss a clip at announce time.
@Test(arguments: Grammars.all.map(\.name))
func grammarsOnlyProduceDeclaredClips(_ name: String) throws {
    let g = try #require(Grammars.named(name))
    let declared = Set(g.clipNames)
    var rng = SplitMix64(seed: 7)
    var produced = Set(Channel.allCases.map(g.prefix(for:)))
    produced.formUnion(Prompt.allCases.flatMap(g.clips(for:)))
    produced.formUnion(g.summary(count: 1234, total: Amount(minorUnits: 101)))
    produced.formUnion(g.summary(count: 0, total: Amount(minorUnits: 0)))
    produced.formUnion(g.offlineSummary(count: 40, total: Amount(minorUnits: 123_45)))
    for _ in 0..<20_000 { produced.formUnion(g.clips(for: randomAmount(&rng))) }
    #expect(produced.subtracting(declared).isEmpty)
    #expect(declared.subtracting(produced).isEmpty, "declared but never produced")
}

// MARK: - Property test: the words parse back to the same amount.

/// The reference tables: cn2an's `low` reading, num2words' en_IN words and
/// AI4Bharat indic-numtowords' Hindi (generated, see scripts/reference-tables.py).
@Test(arguments: ["zh-CN", "en-IN", "hi-IN"])
func referenceTable(_ name: String) throws {
    let g = try #require(Grammars.named(name))
    let table = ["zh-CN": ReferenceTables.zhCN, "en-IN": ReferenceTables.enIN, "hi-IN": ReferenceTables.hiIN][name]!
    #expect(table.count >= 60)
    for row in table {
        #expect(g.clips(for: try amount(row.amount)).joined(separator: " ") == row.clips, "\(row.amount)")
    }
}

/// Property: over 100,000 random amounts the words parse back (with an
/// independent reverse parser) to the same amount.
@Test(arguments: [("zh-CN", parseChinese), ("en-IN", parseEnglish), ("hi-IN", parseHindi)] as [(String, @Sendable ([String]) -> Int64?)])
func wordsParseBack(_ name: String, _ parse: @Sendable ([String]) -> Int64?) throws {
    let g = try #require(Grammars.named(name))
    var rng = SplitMix64(seed: 2026)
    for _ in 0..<100_000 {
        let a = randomAmount(&rng)
        let words = g.clips(for: a)
        #expect(parse(words) == a.minorUnits, "\(a): \(words.joined(separator: " "))")
    }
}

/// Amounts of every magnitude from 0.01 to 999,999,999,999.99, with many
/// zeros so the zero rules are exercised.
func randomAmount(_ rng: inout SplitMix64) -> Amount {
    let digits = Int(rng.next() % 14) + 1
    var v: Int64 = 0
    for _ in 0..<digits {
        // 40 % zeros, the rest 1...9 evenly.
        v = v * 10 + (rng.next() % 10 < 4 ? 0 : Int64(rng.next() % 9 + 1))
    }
    return Amount(minorUnits: max(v, 1))
}


/// Reverse of the zh-CN grammar, written independently: positional value
/// of each digit from the unit after it; 万 and 亿 close a section.
func parseChinese(_ words: [String]) -> Int64? {
    guard words.last == "元" else { return nil }
    let body = words.dropLast()
    let point = body.firstIndex(of: "点")
    let intWords = body[..<(point ?? body.endIndex)]
    let digit = ["零": 0, "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9]
    let unit: [String: Int64] = ["十": 10, "百": 100, "千": 1000]
    var total: Int64 = 0, section: Int64 = 0, pending: Int64? = nil
    for w in intWords {
        if let d = digit[w] { pending = Int64(d) }
        else if let u = unit[w] { section += (pending ?? 1) * u; pending = nil }
        else if w == "万" { total += (section + (pending ?? 0)) * 10_000; section = 0; pending = nil }
        else if w == "亿" { total = (total + section + (pending ?? 0)) * 100_000_000; section = 0; pending = nil }
        else { return nil }
    }
    total += section + (pending ?? 0)
    var minor: Int64 = 0
    if let p = point {
        let ds = body[body.index(after: p)...].compactMap { digit[$0] }
        guard (1...2).contains(ds.count) else { return nil }
        minor = Int64(ds[0]) * 10 + (ds.count == 2 ? Int64(ds[1]) : 0)
    }
    return total * 100 + minor
}

/// Reverse of the en-IN grammar: scale words multiply what precedes them
/// within the current scale; "and" is noise.
func parseEnglish(_ words: [String]) -> Int64? {
    let small: [String: Int64] = Dictionary(uniqueKeysWithValues:
        IndianEnglishGrammar.ones.enumerated().map { ($1, Int64($0)) }
        + IndianEnglishGrammar.tens.enumerated().filter { !$1.isEmpty }.map { ($1, Int64($0 * 10)) })
    let scales: [String: Int64] = ["hundred": 100, "thousand": 1000, "lakh": 100_000, "crore": 10_000_000]
    func number<S: Collection<String>>(_ ws: S) -> Int64? {
        // Evaluate with a stack of (value) split at scales in decreasing order.
        var total: Int64 = 0, current: Int64 = 0
        for w in ws where w != "and" {
            if let v = small[w] { current += v }
            else if let s = scales[w] {
                if s == 100 { current *= 100 }
                else if s == 10_000_000 { total = (total + current) * s; current = 0 }
                else { total += current * s; current = 0 }
            } else { return nil }
        }
        return total + current
    }
    var rupees: Int64 = 0, paise: Int64 = 0
    var ws = words[...]
    if ws.first == "rupee" || ws.first == "rupees" {
        let end = ws.lastIndex(of: "paise") ?? ws.lastIndex(of: "paisa")
        var rupeeWords = ws.dropFirst()
        if end != nil {
            // The paise part is after the last "and".
            guard let and = rupeeWords.lastIndex(of: "and") else { return nil }
            rupeeWords = rupeeWords[..<and]
            ws = ws[ws.index(after: and)...]
        } else { ws = [] }
        guard let r = number(rupeeWords) else { return nil }
        rupees = r
        guard (rupees == 1) == (words.first == "rupee") else { return nil }
    }
    if let unit = ws.last {
        guard unit == "paise" || unit == "paisa", let p = number(ws.dropLast()) else { return nil }
        guard (p == 1) == (unit == "paisa") else { return nil }
        paise = p
    }
    return rupees * 100 + paise
}

/// Reverse of the hi-IN grammar: a word below one hundred adds its value;
/// सौ multiplies what it follows; हज़ार, लाख and करोड़ close a group;
/// अरब multiplies everything before it.
func parseHindi(_ words: [String]) -> Int64? {
    let small = Dictionary(uniqueKeysWithValues: HindiGrammar.belowHundred.enumerated().map { ($1, Int64($0)) })
    let groups: [String: Int64] = ["हज़ार": 1000, "लाख": 100_000, "करोड़": 10_000_000]
    func number<S: Collection<String>>(_ ws: S) -> Int64? {
        guard !ws.isEmpty else { return nil }
        var total: Int64 = 0, current: Int64 = 0
        for w in ws {
            if let v = small[w] { current += v }
            else if w == "सौ" { current *= 100 }
            else if let g = groups[w] { total += current * g; current = 0 }
            else if w == "अरब" { total = (total + current) * 1_000_000_000; current = 0 }
            else { return nil }
        }
        return total + current
    }
    var ws = words[...]
    var rupees: Int64 = 0, paise: Int64 = 0
    if let unit = ws.firstIndex(where: { $0 == "रुपया" || $0 == "रुपये" }) {
        guard let r = number(ws[..<unit]), (r == 1) == (ws[unit] == "रुपया") else { return nil }
        rupees = r
        ws = ws[ws.index(after: unit)...]
        if !ws.isEmpty { guard ws.first == "और" else { return nil }; ws = ws.dropFirst() }
    }
    if let unit = ws.last {
        guard unit == "पैसा" || unit == "पैसे", let p = number(ws.dropLast()), (p == 1) == (unit == "पैसा") else { return nil }
        paise = p
    }
    return rupees * 100 + paise
}
