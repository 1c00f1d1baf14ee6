import Testing
import Soundbox

@Suite struct AmountTests {
    @Test(arguments: [
        ("123.45", 12345), ("0.01", 1), ("0.1", 10), ("0.10", 10), ("10", 1000), ("1.00", 100),
        ("007.50", 750), ("99999999.99", 9_999_999_999),
    ] as [(String, Int64)])
    func parsesExactly(_ text: String, _ minor: Int64) throws {
        #expect(try Amount.parse(text, max: .defaultPaymentMax).minorUnits == minor)
    }

    @Test func sumsWithoutBinaryFloat() throws {
        let a = try Amount.parse("0.1", max: .wordsMax), b = try Amount.parse("0.2", max: .wordsMax)
        #expect(a.minorUnits + b.minorUnits == 30)
    }

    @Test func limits() throws {
        #expect(throws: AmountError.aboveLimit(.defaultPaymentMax)) { try Amount.parse("100000000", max: .defaultPaymentMax) }
        #expect(try Amount.parse("999999999999.99", max: .wordsMax).minorUnits == 99_999_999_999_999)
        #expect(throws: AmountError.aboveLimit(.wordsMax)) { try Amount.parse("1000000000000", max: .wordsMax) }
        #expect(throws: AmountError.aboveLimit(.wordsMax)) { try Amount.parse("123456789012345678901234567890", max: .wordsMax) }
    }

    /// Every class of bad input gets its own error.
    @Test(arguments: [
        ("", AmountError.empty),
        ("-5", .negative), ("-0.01", .negative),
        ("0", .zero), ("0.00", .zero), ("000", .zero),
        ("1.234", .tooManyDecimals), ("0.001", .tooManyDecimals),
        ("1e3", .exponent), ("1.5E2", .exponent), ("1e-2", .exponent),
        ("NaN", .notFinite), ("nan", .notFinite), ("Infinity", .notFinite), ("-Infinity", .notFinite), ("inf", .notFinite),
        ("+5", .leadingPlus),
        (" 5", .whitespace), ("5 ", .whitespace), ("1 000", .whitespace), ("1\t0", .whitespace),
        ("１２", .nonASCIIDigit("１")), ("٣", .nonASCIIDigit("٣")), ("1२", .nonASCIIDigit("२")),
        ("12a", .malformed("unexpected character 'a'")), ("1,000", .malformed("unexpected character ','")),
        ("1.2.3", .malformed("more than one decimal point")),
        (".5", .malformed("no digit before the decimal point")), ("5.", .malformed("no digit after the decimal point")),
    ])
    func rejects(_ text: String, _ error: AmountError) {
        #expect(throws: error) { try Amount.parse(text, max: .defaultPaymentMax) }
    }

    @Test func minorUnits() throws {
        #expect(try Amount.parseMinorUnits("12345", max: .defaultPaymentMax).description == "123.45")
        #expect(throws: AmountError.zero) { try Amount.parseMinorUnits("0", max: .defaultPaymentMax) }
        #expect(throws: AmountError.negative) { try Amount.parseMinorUnits("-1", max: .defaultPaymentMax) }
        #expect(throws: AmountError.exponent) { try Amount.parseMinorUnits("1e3", max: .defaultPaymentMax) }
        #expect(throws: AmountError.malformed("minor units must be a whole number")) { try Amount.parseMinorUnits("1.5", max: .defaultPaymentMax) }
        #expect(throws: AmountError.aboveLimit(.defaultPaymentMax)) { try Amount.parseMinorUnits("10000000000", max: .defaultPaymentMax) }
        #expect(throws: AmountError.negative) { try Amount.fromMinorUnits(-3, max: .defaultPaymentMax) }
    }

    @Test func messagesSayWhatIsWrong() {
        #expect(AmountError.aboveLimit(.defaultPaymentMax).description == "amount is above the limit of 99999999.99")
        #expect(AmountError.tooManyDecimals.code == "too_many_decimals")
    }
}
