/// An exact amount of money in minor units (fen, paise).
///
/// Amounts are never held in a binary floating point: "0.1" + "0.2" is
/// exactly 30 minor units. Parsing accepts a decimal string, the text of a
/// JSON number, or an integer count of minor units, and rejects everything
/// else with an `AmountError` that says what is wrong.
public struct Amount: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The amount in minor units (1/100 of the major unit).
    public let minorUnits: Int64

    public init(minorUnits: Int64) { self.minorUnits = minorUnits }

    /// The whole major units (yuan, rupees).
    public var major: Int64 { minorUnits / 100 }
    /// The minor part, 0...99 (fen, paise).
    public var minor: Int { Int(minorUnits % 100) }

    /// Largest amount the grammars read: 999,999,999,999.99 (below 10^12).
    public static let wordsMax = Amount(minorUnits: 99_999_999_999_999)
    /// Default `payment.max_amount`: 99,999,999.99.
    public static let defaultPaymentMax = Amount(minorUnits: 9_999_999_999)

    /// "123.45", always two decimals.
    public var description: String {
        let m = minor
        return "\(major).\(m < 10 ? "0" : "")\(m)"
    }

    public static func < (a: Amount, b: Amount) -> Bool { a.minorUnits < b.minorUnits }

    /// Parses a decimal amount in major units ("123.45", "10", "0.5"), as
    /// written in a JSON string or as the raw text of a JSON number.
    /// - Parameter max: the largest amount accepted (inclusive).
    public static func parse(_ text: String, max: Amount) throws(AmountError) -> Amount {
        let (integer, fraction) = try split(text)
        guard fraction.count <= 2 else { throw .tooManyDecimals }
        // More than 15 integer digits cannot be below any limit we support,
        // and would overflow Int64 once scaled.
        let significant = integer.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 15 else { throw .aboveLimit(max) }
        var value: Int64 = 0
        for d in significant { value = value * 10 + Int64(d - UInt8(ascii: "0")) }
        value *= 100
        for (i, d) in fraction.enumerated() {
            value += Int64(d - UInt8(ascii: "0")) * (i == 0 ? 10 : 1)
        }
        return try checked(value, max: max)
    }

    /// Parses an integer count of minor units ("12345" = 123.45), as in the
    /// payment field `amount_minor`.
    public static func parseMinorUnits(_ text: String, max: Amount) throws(AmountError) -> Amount {
        let (integer, fraction) = try split(text)
        guard fraction.isEmpty else { throw .malformed("minor units must be a whole number") }
        let significant = integer.drop { $0 == UInt8(ascii: "0") }
        guard significant.count <= 17 else { throw .aboveLimit(max) }
        var value: Int64 = 0
        for d in significant { value = value * 10 + Int64(d - UInt8(ascii: "0")) }
        return try checked(value, max: max)
    }

    /// Validates an integer count of minor units already held as a number.
    public static func fromMinorUnits(_ value: Int64, max: Amount) throws(AmountError) -> Amount {
        guard value >= 0 else { throw .negative }
        return try checked(value, max: max)
    }

    private static func checked(_ value: Int64, max: Amount) throws(AmountError) -> Amount {
        guard value != 0 else { throw .zero }
        guard value <= max.minorUnits else { throw .aboveLimit(max) }
        return Amount(minorUnits: value)
    }

    /// Splits "123.45" into its ASCII digit runs, or says precisely why the
    /// text is not a plain non-negative decimal.
    private static func split(_ text: String) throws(AmountError) -> (integer: [UInt8], fraction: [UInt8]) {
        guard !text.isEmpty else { throw .empty }
        if text.contains(where: { $0.isWhitespace }) { throw .whitespace }
        let unsigned = text.first == "+" || text.first == "-" ? String(text.dropFirst()) : text
        switch unsigned.lowercased() {
        case "nan", "inf", "infinity": throw .notFinite
        default: break
        }
        if text.first == "+" { throw .leadingPlus }
        if text.first == "-" { throw .negative }
        if let c = text.first(where: { !$0.isASCII && $0.isNumber }) { throw .nonASCIIDigit(c) }
        if text.contains(where: { $0 == "e" || $0 == "E" }) { throw .exponent }
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count <= 2 else { throw .malformed("more than one decimal point") }
        for part in parts {
            if let bad = part.first(where: { $0 < UInt8(ascii: "0") || $0 > UInt8(ascii: "9") }) {
                let shown = bad < 0x80 ? String(UnicodeScalar(bad)) : "non-ASCII text"
                throw .malformed("unexpected character '\(shown)'")
            }
        }
        guard !parts[0].isEmpty else { throw .malformed("no digit before the decimal point") }
        if parts.count == 2 && parts[1].isEmpty { throw .malformed("no digit after the decimal point") }
        return (Array(parts[0]), parts.count == 2 ? Array(parts[1]) : [])
    }
}

/// Why a text is not an acceptable amount. `code` is stable (receipts,
/// `--json`); `description` is the message for people.
public enum AmountError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty
    case negative
    case zero
    case tooManyDecimals
    case aboveLimit(Amount)
    case exponent
    case notFinite
    case leadingPlus
    case whitespace
    case nonASCIIDigit(Character)
    case malformed(String)

    public var code: String {
        switch self {
        case .empty: "empty"
        case .negative: "negative"
        case .zero: "zero"
        case .tooManyDecimals: "too_many_decimals"
        case .aboveLimit: "above_limit"
        case .exponent: "exponent"
        case .notFinite: "not_finite"
        case .leadingPlus: "leading_plus"
        case .whitespace: "whitespace"
        case .nonASCIIDigit: "non_ascii_digit"
        case .malformed: "malformed"
        }
    }

    public var description: String {
        switch self {
        case .empty: "amount is empty"
        case .negative: "amount is negative"
        case .zero: "amount is zero"
        case .tooManyDecimals: "amount has more than two decimals"
        case .aboveLimit(let max): "amount is above the limit of \(max)"
        case .exponent: "amount uses an exponent; write it out in full, e.g. 1500.00 not 1.5e3"
        case .notFinite: "amount is not a finite number (NaN or Infinity)"
        case .leadingPlus: "amount has a leading '+'"
        case .whitespace: "amount contains whitespace"
        case .nonASCIIDigit(let c): "amount contains the non-ASCII digit '\(c)'; use 0-9"
        case .malformed(let why): "amount is not a decimal number: \(why)"
        }
    }
}
