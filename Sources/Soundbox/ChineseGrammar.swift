/// zh-CN: the `low` reading of the Python library cn2an, trailing decimal
/// zeros dropped, then 元. Rules: docs/grammars.md.
public struct ChineseGrammar: Grammar {
    public init() {}
    public let name = "zh-CN"
    public let defaultCurrency = "CNY"

    static let digits = ["零", "一", "二", "三", "四", "五", "六", "七", "八", "九"]

    public func prefix(for channel: Channel) -> String {
        switch channel {
        case .alipay: "支付宝到账"
        case .wechat: "微信收款"
        case .other: "收款到账"
        case .local: clips(for: .test)[0]
        }
    }

    public func clips(for amount: Amount) -> [String] {
        var out = Self.integer(amount.major)
        let fen = amount.minor
        if fen != 0 {
            out.append("点")
            out.append(Self.digits[fen / 10])
            if fen % 10 != 0 { out.append(Self.digits[fen % 10]) }
        }
        out.append("元")
        return out
    }

    public func clips(for prompt: Prompt) -> [String] {
        switch prompt {
        case .volumeMax: ["音量最大"]
        case .volumeMin: ["音量最小"]
        case .networkConnected: ["网络已连接"]
        case .networkDisconnected: ["网络已断开"]
        case .test: ["测试"]
        }
    }

    /// 今日收款 N 笔 共 X 元
    public func summary(count: Int, total: Amount) -> [String] { summary("今日收款", count, total) }
    /// 离线期间收款 N 笔 共 X 元
    public func offlineSummary(count: Int, total: Amount) -> [String] { summary("离线期间收款", count, total) }

    private func summary(_ opening: String, _ count: Int, _ total: Amount) -> [String] {
        [opening] + Self.integer(Int64(count)) + ["笔"] + (total.minorUnits > 0 ? ["共"] + clips(for: total) : [])
    }

    public var clipNames: [String] {
        Self.digits + ["十", "百", "千", "万", "亿", "点", "元"]
            + Channel.allCases.map(prefix(for:))
            + Prompt.allCases.flatMap(clips(for:))
            + ["今日收款", "离线期间收款", "笔", "共"]
    }

    /// Reads 0 ..< 10^12. Groups of four digits carry 万 and 亿; zeros at
    /// the end of a group are silent; any run of zeros between two spoken
    /// digits, inside a group or across groups, is one 零; a leading 一十
    /// is read 十.
    static func integer(_ n: Int64) -> [String] {
        guard n > 0 else { return ["零"] }
        var out: [String] = []
        var zeroRun = false
        for (group, unit) in [(n / 100_000_000, "亿"), (n / 10_000 % 10_000, "万"), (n % 10_000, "")] {
            guard group > 0 else {
                zeroRun = zeroRun || !out.isEmpty
                continue
            }
            if !out.isEmpty && (zeroRun || group < 1000) { out.append("零") }
            zeroRun = false
            out += groupWords(Int(group))
            if !unit.isEmpty { out.append(unit) }
        }
        if out.count > 1 && out[0] == "一" && out[1] == "十" { out.removeFirst() }
        return out
    }

    /// Reads 1 ... 9999 with 千 百 十; inner zero runs become one 零.
    private static func groupWords(_ g: Int) -> [String] {
        var out: [String] = []
        var zeroRun = false
        for (place, unit) in [(1000, "千"), (100, "百"), (10, "十"), (1, "")] {
            let d = g / place % 10
            guard d > 0 else {
                zeroRun = zeroRun || !out.isEmpty
                continue
            }
            if zeroRun { out.append("零") }
            zeroRun = false
            out.append(digits[d])
            if !unit.isEmpty { out.append(unit) }
        }
        return out
    }
}
