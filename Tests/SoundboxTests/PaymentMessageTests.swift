// ~940 lines: one suite, the payment message and its strict JSON parser under every hostile input, with the generated corpora it checks.
import Foundation
import Testing
import TestSupport
import Soundbox

/// The payment message (docs/DESIGN.md §2 "Payment") and the strict JSON
/// parser under it.
@Suite struct PaymentMessageTests {

    // MARK: - JSON

    @Suite struct JSON {
        @Test(arguments: [
            ("{}", JSONValue.object([])),
            ("[]", .array([])),
            (" \t\r\n[ ] \n", .array([])),
            ("\"\"", .string("")),
            ("\"abc\"", .string("abc")),
            ("true", .bool(true)), ("false", .bool(false)), ("null", .null),
            ("0", .number("0")), ("-0", .number("-0")), ("1.10", .number("1.10")), ("1e5", .number("1e5")),
            ("-1.5E-3", .number("-1.5E-3")), ("1E+5", .number("1E+5")), ("0.000", .number("0.000")),
            ("12345678901234567890123456789", .number("12345678901234567890123456789")), ("1e308", .number("1e308")),
            ("[1, \"a\", true, null, {}, []]",
             .array([.number("1"), .string("a"), .bool(true), .null, .object([]), .array([])])),
            ("{\"b\": 1, \"a\": [2, {\"c\": null}], \"d\": \"e\"}",
             .object([("b", .number("1")), ("a", .array([.number("2"), .object([("c", .null)])])), ("d", .string("e"))])),
            ("{\"a\": {\"a\": 1}, \"b\": {\"a\": 2}}",
             .object([("a", .object([("a", .number("1"))])), ("b", .object([("a", .number("2"))]))])),
            (#""\"\\\/\b\f\n\r\t""#, .string("\"\\/\u{8}\u{C}\n\r\t")),
            (#""\u00e9\u00E9 \u4e2d""#, .string("éé 中")),
            (#""\ud83d\ude00""#, .string("😀")),
            (#""\u0000""#, .string("\u{0}")),
            ("\"中文 😀 \u{7F}\"", .string("中文 😀 \u{7F}")),
            (#""a\nb" "#, .string("a\nb")),
        ])
        func parsesValidDocuments(_ text: String, _ expected: JSONValue) throws {
            #expect(try JSONValue.parse(Array(text.utf8)) == expected)
        }

        /// Number text is kept exactly as written: no Double in between.
        @Test func numberTextIsPreserved() throws {
            let doc = try JSONValue.parse(Array(#"[1.10, -0, 1e5, 0.1, 99999999.99, 123456789012345678901234567890.01]"#.utf8))
            #expect(doc == .array(["1.10", "-0", "1e5", "0.1", "99999999.99", "123456789012345678901234567890.01"].map(JSONValue.number)))
            #expect(JSONValue.number("1.10") != .number("1.1"))
        }

        @Test func objectsKeepOrderAndCompareInOrder() throws {
            let doc = try JSONValue.parse(Array(#"{"z":1,"a":2}"#.utf8))
            guard case .object(let members) = doc else { Issue.record("not an object"); return }
            #expect(members.map { $0.0 } == ["z", "a"])
            #expect(doc["a"] == .number("2"))
            #expect(doc["missing"] == nil)
            #expect(doc != .object([("a", .number("2")), ("z", .number("1"))]))
        }

        /// Every class of bad input gets its own message and the offset of the problem.
        @Test(arguments: [
            ("", "no JSON value: the input is empty", 0),
            ("  \n", "no JSON value: the input is empty", 3),
            ("\u{FEFF}{}", "starts with a byte order mark, which JSON does not allow", 0),
            ("{} x", "expected the end of the input after the JSON value, found 'x'", 3),
            ("[1] [2]", "expected the end of the input after the JSON value, found '['", 4),
            ("{}\u{0}", "expected the end of the input after the JSON value, found byte 0x00", 2),
            ("[1,]", "trailing comma before ']'", 3),
            ("{\"a\":1,}", "trailing comma before '}'", 7),
            ("[1 2]", "expected ',' or ']' after an array element, found '2'", 3),
            ("{\"a\":1 \"b\":2}", "expected ',' or '}' after an object member, found '\"'", 7),
            ("{\"a\" 1}", "expected ':' after the key 'a', found '1'", 5),
            ("{1:2}", "expected a string key, found '1'", 1),
            ("{'a':1}", "strings must be in double quotes", 1),
            ("['a']", "strings must be in double quotes", 1),
            ("[", "unexpected end of input; expected a value", 1),
            ("{\"a\":", "unexpected end of input; expected a value", 5),
            ("[1", "unexpected end of input; expected ',' or ']' after an array element", 2),
            ("[é]", "expected a value, found 'é'", 1),
            ("// hi\n{}", "comments are not allowed in JSON", 0),
            // numbers
            ("01", "numbers must not have leading zeros", 0),
            ("-01", "numbers must not have leading zeros", 0),
            ("[00]", "numbers must not have leading zeros", 1),
            ("1.", "expected a digit after the decimal point", 2),
            ("1.e5", "expected a digit after the decimal point", 2),
            ("1e", "expected a digit in the exponent", 2),
            ("1e+", "expected a digit in the exponent", 3),
            ("-", "expected a digit after '-'", 1),
            ("-.5", "expected a digit after '-'", 1),
            ("+1", "numbers must not start with '+'", 0),
            (".5", "numbers must start with a digit (0.5, not .5)", 0),
            ("1.5x", "expected the end of the input after the JSON value, found 'x'", 3),
            // NaN and Infinity
            ("NaN", "NaN and Infinity are not JSON", 0),
            ("Infinity", "NaN and Infinity are not JSON", 0),
            ("-Infinity", "NaN and Infinity are not JSON", 0),
            ("+Infinity", "NaN and Infinity are not JSON", 0),
            ("[1, nan]", "NaN and Infinity are not JSON", 4),
            ("{\"amount\": -inf}", "NaN and Infinity are not JSON", 11),
            // other words
            ("True", "unknown word 'True'; JSON has only true, false and null", 0),
            ("[truex]", "unknown word 'truex'; JSON has only true, false and null", 1),
            ("nul", "unknown word 'nul'; JSON has only true, false and null", 0),
            // strings
            ("\"abc", "unterminated string", 0),
            ("[\"a\\", "unterminated string", 1),
            ("\"a\nb\"", "control character U+000A in a string must be escaped", 2),
            ("\"a\\\"\tb\"", "control character U+0009 in a string must be escaped", 4),
            ("\"\\x\"", "invalid escape '\\x' in a string", 1),
            ("\"\\'\"", "invalid escape '\\'' in a string", 1),
            ("\"\\u12\"", "\\u must be followed by 4 hex digits", 1),
            ("\"\\u12G4\"", "\\u must be followed by 4 hex digits", 1),
            ("\"\\ud800\"", "lone surrogate \\uD800 in a string", 1),
            ("\"\\udc00\"", "lone surrogate \\uDC00 in a string", 1),
            ("\"\\ud800\\u0041\"", "lone surrogate \\uD800 in a string", 1),
            ("\"\\ud800\\ud800\"", "lone surrogate \\uD800 in a string", 1),
            ("\"x\\ude00\\ud83d\"", "lone surrogate \\uDE00 in a string", 2),
            // duplicate keys
            ("{\"a\":1,\"a\":2}", "duplicate key 'a'", 7),
            ("{\"a\":{\"b\":1,\"b\":1}}", "duplicate key 'b'", 12),
            ("{\"\\u0061\":1,\"a\":2}", "duplicate key 'a'", 12),
        ] as [(String, String, Int)])
        func rejects(_ text: String, _ message: String, _ offset: Int) {
            #expect(throws: JSONError(message, offset: offset)) { try JSONValue.parse(Array(text.utf8)) }
        }

        @Test(arguments: [
            ([0x7B, 0xFF, 0x7D], 1),                       // {ÿ}: 0xFF is never UTF-8
            ([0x22, 0xC0, 0xAF, 0x22], 1),                 // overlong '/'
            ([0x22, 0xE0, 0x80, 0xAF, 0x22], 1),           // overlong, 3 bytes
            ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),           // an encoded surrogate
            ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),     // above U+10FFFF
            ([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], 1),
            ([0x22, 0x61, 0x80, 0x22], 2),                 // lone continuation byte
            ([0x22, 0xE4, 0xB8], 1),                       // cut in the middle of 中
            ([0x22, 0xE4, 0xB8, 0x22], 1),
            ([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], 3),     // after an escape
            ([0x7B, 0x7D, 0xC3], 2),                       // after the value
            ([0x5B, 0x31, 0x2C, 0x80, 0x5D], 3),           // where a value should be
        ] as [([UInt8], Int)])
        func rejectsInvalidUTF8(_ bytes: [UInt8], _ offset: Int) {
            #expect(throws: JSONError("invalid UTF-8", offset: offset)) { try JSONValue.parse(bytes) }
        }

        @Test func depthLimit() throws {
            func arrays(_ n: Int) -> [UInt8] { Array((String(repeating: "[", count: n) + String(repeating: "]", count: n)).utf8) }
            func objects(_ n: Int) -> [UInt8] {
                Array((String(repeating: "{\"a\":", count: n) + "1" + String(repeating: "}", count: n)).utf8)
            }
            _ = try JSONValue.parse(arrays(16))
            _ = try JSONValue.parse(objects(16))
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 16)) { try JSONValue.parse(arrays(17)) }
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 80)) { try JSONValue.parse(objects(17)) }
            // Hostile depth stops at the limit: no recursion, no stack overflow.
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 16)) { try JSONValue.parse(arrays(10_000)) }
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 80)) { try JSONValue.parse(objects(10_000)) }
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 16)) {
                try JSONValue.parse([UInt8](repeating: UInt8(ascii: "["), count: 1_000_000))
            }
            // Empty containers count too.
            #expect(throws: JSONError("nested deeper than 16 levels", offset: 16)) {
                try JSONValue.parse(Array((String(repeating: "[", count: 16) + "{}" + String(repeating: "]", count: 16)).utf8))
            }
            // Other limits.
            #expect(throws: JSONError("nested deeper than 2 levels", offset: 2)) { try JSONValue.parse(arrays(3), maxDepth: 2) }
            #expect(throws: JSONError("nested deeper than 0 levels", offset: 0)) { try JSONValue.parse(arrays(1), maxDepth: 0) }
            #expect(try JSONValue.parse(Array("1".utf8), maxDepth: 0) == .number("1"))
            var deep = JSONValue.array([])
            for _ in 1..<1000 { deep = .array([deep]) }
            #expect(try JSONValue.parse(arrays(1000), maxDepth: 1000) == deep)
        }

        @Test func duplicateKeysInLargeObjects() throws {
            let keys = (0..<40).map { "\"k\($0)\":\($0)" }
            let ok = try JSONValue.parse(Array(("{" + keys.joined(separator: ",") + "}").utf8))
            guard case .object(let members) = ok else { Issue.record("not an object"); return }
            #expect(members.count == 40 && members[39].0 == "k39")
            for dup in [0, 15, 16, 17, 39] {
                let text = "{" + keys.joined(separator: ",") + ",\"k\(dup)\":1}"
                let offset = text.utf8.count - "\"k\(dup)\":1}".utf8.count
                #expect(throws: JSONError("duplicate key 'k\(dup)'", offset: offset)) { try JSONValue.parse(Array(text.utf8)) }
            }
            let long = String(repeating: "x", count: 100)
            #expect(throws: JSONError("duplicate key '\(String(repeating: "x", count: 40))…'", offset: 106)) {
                try JSONValue.parse(Array("{\"\(long)\":1,\"\(long)\":2}".utf8))
            }
        }

        /// Any collection of bytes: arrays, slices, a String's UTF-8 view, and
        /// collections without contiguous storage.
        @Test func anyByteCollection() throws {
            let text = #"{"a":[1,"é"]}"#
            let expected = JSONValue.object([("a", .array([.number("1"), .string("é")]))])
            #expect(try JSONValue.parse(text.utf8) == expected)
            #expect(try JSONValue.parse(Array(("xx" + text).utf8).dropFirst(2)) == expected)
            #expect(try JSONValue.parse(Array(text.utf8).lazy.map { $0 }) == expected)
            #expect(try JSONValue.parse(AnyCollection(Array(text.utf8))) == expected)
            #expect(throws: JSONError("invalid UTF-8", offset: 1)) { try JSONValue.parse(AnyCollection([0x7B, 0xFF, 0x7D] as [UInt8])) }
        }

        @Test func errorDescription() {
            #expect(JSONError("duplicate key 'a'", offset: 7).description == "duplicate key 'a' at byte 7")
            #expect(JSONValue.array([]).kindDescription == "an array")
            #expect(JSONValue.null.kindDescription == "null")
        }
    }

    // MARK: - Payment messages

    static let maxAmount = Amount.defaultPaymentMax

    static func parse(_ text: String, max: Amount = maxAmount) -> Result<Payment, PaymentRejection> {
        PaymentMessage.parse(Array(text.utf8), maxAmount: max)
    }

    @Test func designExample() throws {
        let text = """
            {"id": "T20261129-000123", "amount": "123.45", "currency": "CNY",
             "channel": "alipay", "ts": 1764415000, "lang": "zh-CN"}
            """
        #expect(try Self.parse(text).get() == Payment(id: "T20261129-000123", amount: Amount(minorUnits: 12345),
                                                      currency: "CNY", channel: .alipay, ts: 1_764_415_000, lang: "zh-CN"))
    }

    @Test(arguments: [
        (#"{"id":"a","amount":"0.1"}"#, 10), (#"{"id":"a","amount":"0.2"}"#, 20),
        (#"{"id":"a","amount":0.1}"#, 10), (#"{"id":"a","amount":0.29}"#, 29), (#"{"id":"a","amount":"0.29"}"#, 29),
        (#"{"id":"a","amount":123.45}"#, 12345), (#"{"id":"a","amount":"123.45"}"#, 12345),
        (#"{"id":"a","amount":1.10}"#, 110), (#"{"id":"a","amount":10}"#, 1000), (#"{"id":"a","amount":"007.50"}"#, 750),
        (#"{"id":"a","amount":99999999.99}"#, 9_999_999_999), (#"{"id":"a","amount":0.01}"#, 1),
        (#"{"id":"a","amount_minor":12345}"#, 12345),
        (#"{"id":"a","amount_minor":1}"#, 1), (#"{"id":"a","amount_minor":9999999999}"#, 9_999_999_999),
        (#"{"id":"a","amount":null,"amount_minor":5}"#, 5), (#"{"id":"a","amount":"5","amount_minor":null}"#, 500),
    ] as [(String, Int64)])
    func amountsAreExact(_ text: String, _ minor: Int64) throws {
        #expect(try Self.parse(text).get().amount.minorUnits == minor)
    }

    @Test func zeroPointOnePlusZeroPointTwo() throws {
        let a = try Self.parse(#"{"id":"a","amount":0.1}"#).get().amount
        let b = try Self.parse(#"{"id":"b","amount":"0.2"}"#).get().amount
        #expect(a.minorUnits + b.minorUnits == 30)
    }

    @Test func optionalFieldsAndDefaults() throws {
        #expect(try Self.parse(#"{"id":"T1","amount":"1"}"#).get() == Payment(id: "T1", amount: Amount(minorUnits: 100)))
        let nulls = #"{"id":"T1","amount":"1","currency":null,"channel":null,"ts":null,"lang":null}"#
        #expect(try Self.parse(nulls).get() == Payment(id: "T1", amount: Amount(minorUnits: 100)))
        let extra = #"{"x":{"deep":[1,{"y":null}]},"id":"T1","amount_minor":250,"channel":"WeChat","ts":0,"lang":"en-IN","memo":"中文","n":1e999}"#
        #expect(try Self.parse(extra).get() == Payment(id: "T1", amount: Amount(minorUnits: 250), channel: .wechat, ts: 0, lang: "en-IN"))
        #expect(try Self.parse(#"{"id":"T1","amount":"1","channel":"unionpay"}"#).get().channel == .other)
        #expect(try Self.parse(#"{"id":"T1","amount":"1","channel":""}"#).get().channel == .other)
        #expect(try Self.parse(#"{"id":"T1","amount":"1","ts":4102444800}"#).get().ts == 4_102_444_800)
        #expect(try Self.parse(#"{"id":"T1","amount":"1","ts":-0}"#).get().ts == 0)
        #expect(try Self.parse(#"{"id":"T1","amount":"1","lang":"abcdefghijklmnop"}"#).get().lang == "abcdefghijklmnop")
        let id64 = String(repeating: "~", count: 64)
        #expect(try Self.parse(#"{"id":"\#(id64)","amount":"1"}"#).get().id == id64)
        #expect(try Self.parse(#"{"id":"\u0041\u0042","amount":"1"}"#).get().id == "AB")
    }

    /// Rejections that happen before an id can be read carry no id.
    @Test(arguments: [
        ("", "not valid JSON: no JSON value: the input is empty at byte 0"),
        ("[1]", "payload must be a JSON object, not an array"),
        ("\"T1\"", "payload must be a JSON object, not a string"),
        ("null", "payload must be a JSON object, not null"),
        (#"{"id":"T1","amount":NaN}"#, "not valid JSON: NaN and Infinity are not JSON at byte 20"),
        (#"{"id":"T1","amount":"1","id":"T2"}"#, "not valid JSON: duplicate key 'id' at byte 24"),
        (#"{"id":"T1","amount":"1"} x"#, "not valid JSON: expected the end of the input after the JSON value, found 'x' at byte 25"),
        (#"{"amount":"1"}"#, "id is missing"),
        (#"{"ID":"T1","amount":"1"}"#, "id is missing"),
        (#"{"id":null,"amount":"1"}"#, "id must be a string, not null"),
        (#"{"id":123,"amount":"1"}"#, "id must be a string, not a number"),
        (#"{"id":["T1"],"amount":"1"}"#, "id must be a string, not an array"),
        (#"{"id":"","amount":"1"}"#, "id is empty"),
        (#"{"id":"T 1","amount":"1"}"#, "id must be printable ASCII without spaces"),
        (#"{"id":"T1\n","amount":"1"}"#, "id must be printable ASCII without spaces"),
        (#"{"id":"T\u0000","amount":"1"}"#, "id must be printable ASCII without spaces"),
        (#"{"id":"订单1","amount":"1"}"#, "id must be printable ASCII without spaces"),
        (#"{"id":"\#(String(repeating: "x", count: 65))","amount":"1"}"#, "id is longer than 64 characters"),
        // the id is checked first: a bad id hides a bad amount
        (#"{"id":"","amount":"-1"}"#, "id is empty"),
    ])
    func rejectsWithoutID(_ text: String, _ reason: String) {
        #expect(Self.parse(text) == .failure(PaymentRejection(id: nil, reason: reason)))
    }

    /// Once the id is fine, every rejection carries it and names its field.
    @Test(arguments: [
        // amount
        (#""amount":"1","amount_minor":100"#, "give amount or amount_minor, not both"),
        (#""amount":"0","amount_minor":0"#, "give amount or amount_minor, not both"),
        (#""currency":"CNY""#, "amount is missing"),
        (#""amount":null"#, "amount is missing"),
        (#""amount":true"#, "amount must be a string or a number, not a boolean"),
        (#""amount":["1"]"#, "amount must be a string or a number, not an array"),
        (#""amount":{"value":"1"}"#, "amount must be a string or a number, not an object"),
        (#""amount":1e308"#, AmountError.exponent.description),
        (#""amount":"1.5e3""#, "amount uses an exponent; write it out in full, e.g. 1500.00 not 1.5e3"),
        (#""amount":-5"#, "amount is negative"),
        (#""amount":"-0.01""#, "amount is negative"),
        (#""amount":-0"#, "amount is negative"),
        (#""amount":0"#, "amount is zero"),
        (#""amount":"0.00""#, "amount is zero"),
        (#""amount":1.001"#, "amount has more than two decimals"),
        (#""amount":"0.001""#, "amount has more than two decimals"),
        (#""amount":100000000"#, "amount is above the limit of 99999999.99"),
        (#""amount":123456789012345678901234567890"#, "amount is above the limit of 99999999.99"),
        (#""amount":"NaN""#, "amount is not a finite number (NaN or Infinity)"),
        (#""amount":"Infinity""#, "amount is not a finite number (NaN or Infinity)"),
        (#""amount":"""#, "amount is empty"),
        (#""amount":" 5""#, "amount contains whitespace"),
        (#""amount":"+5""#, "amount has a leading '+'"),
        (#""amount":"１２""#, "amount contains the non-ASCII digit '１'; use 0-9"),
        (#""amount":"1,000""#, "amount is not a decimal number: unexpected character ','"),
        (#""amount":"¥5""#, "amount is not a decimal number: unexpected character 'non-ASCII text'"),
        // amount_minor
        (#""amount_minor":false"#, "amount_minor must be an integer number of minor units (e.g. 12345 for 123.45), not a boolean"),
        (#""amount_minor":{}"#, "amount_minor must be an integer number of minor units (e.g. 12345 for 123.45), not an object"),
        (#""amount_minor":"12345""#, "amount_minor must be an integer number of minor units (e.g. 12345 for 123.45), not a string"),
        (#""amount_minor":12.5"#, "amount_minor: amount is not a decimal number: minor units must be a whole number"),
        (#""amount_minor":1e3"#, "amount_minor: " + AmountError.exponent.description),
        (#""amount_minor":-1"#, "amount_minor: amount is negative"),
        (#""amount_minor":0"#, "amount_minor: amount is zero"),
        (#""amount_minor":10000000000"#, "amount_minor: amount is above the limit of 99999999.99"),
        // currency
        (#""amount":"1","currency":840"#, "currency must be a string, not a number"),
        (#""amount":"1","currency":"cny""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY), not 'cny'"),
        (#""amount":"1","currency":"CN""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY), not 'CN'"),
        (#""amount":"1","currency":"CNYY""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY), not 'CNYY'"),
        (#""amount":"1","currency":"""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY)"),
        (#""amount":"1","currency":"ÇNY""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY)"),
        // channel
        (#""amount":"1","channel":1"#, "channel must be a string, not a number"),
        (#""amount":"1","channel":{"name":"alipay"}"#, "channel must be a string, not an object"),
        // ts
        (#""amount":"1","ts":"1764415000""#, "ts must be a number (Unix seconds), not a string"),
        (#""amount":"1","ts":true"#, "ts must be a number (Unix seconds), not a boolean"),
        (#""amount":"1","ts":1764415000.5"#, "ts must be a whole number of seconds, without fraction or exponent, not 1764415000.5"),
        (#""amount":"1","ts":1764415000.0"#, "ts must be a whole number of seconds, without fraction or exponent, not 1764415000.0"),
        (#""amount":"1","ts":1.7644e9"#, "ts must be a whole number of seconds, without fraction or exponent, not 1.7644e9"),
        (#""amount":"1","ts":-1"#, "ts must be between 0 and 4102444800, not -1"),
        (#""amount":"1","ts":4102444801"#, "ts must be between 0 and 4102444800, not 4102444801"),
        (#""amount":"1","ts":99999999999999999999999"#, "ts must be between 0 and 4102444800, not 99999999999999999999999"),
        (#""amount":"1","ts":-99999999999999999999999"#, "ts must be between 0 and 4102444800, not -99999999999999999999999"),
        // lang
        (#""amount":"1","lang":5"#, "lang must be a string, not a number"),
        (#""amount":"1","lang":"""#, "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN)"),
        (#""amount":"1","lang":"zh_CN""#, "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN), not 'zh_CN'"),
        (#""amount":"1","lang":"abcdefghijklmnopq""#, "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN), not 'abcdefghijklmnopq'"),
        (#""amount":"1","lang":"中文""#, "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN)"),
        // the first problem wins, in field order
        (#""lang":"","amount":"1","currency":"x""#, "currency must be 3 uppercase letters (ISO 4217, e.g. CNY), not 'x'"),
        (#""ts":-1,"amount":"-1""#, "amount is negative"),
    ])
    func rejectsWithID(_ fields: String, _ reason: String) {
        #expect(Self.parse(#"{"id":"T7",\#(fields)}"#) == .failure(PaymentRejection(id: "T7", reason: reason)))
    }

    @Test func maxAmountIsTheCallers() throws {
        let max = try Amount.parse("100.00", max: .wordsMax)
        #expect(try Self.parse(#"{"id":"a","amount":100}"#, max: max).get().amount == max)
        #expect(try Self.parse(#"{"id":"a","amount_minor":10000}"#, max: max).get().amount == max)
        #expect(Self.parse(#"{"id":"a","amount":"100.01"}"#, max: max)
                == .failure(PaymentRejection(id: "a", reason: "amount is above the limit of 100.00")))
        #expect(Self.parse(#"{"id":"a","amount_minor":10001}"#, max: max)
                == .failure(PaymentRejection(id: "a", reason: "amount_minor: amount is above the limit of 100.00")))
    }

    @Test func sizeLimit() throws {
        let head = #"{"id":"T1","amount":"1","memo":""#, tail = #""}"#
        func payload(_ size: Int) -> [UInt8] {
            Array((head + String(repeating: "m", count: size - head.utf8.count - tail.utf8.count) + tail).utf8)
        }
        #expect(payload(4096).count == 4096)
        #expect(try PaymentMessage.parse(payload(4096), maxAmount: Self.maxAmount).get().id == "T1")
        #expect(PaymentMessage.parse(payload(4097), maxAmount: Self.maxAmount)
                == .failure(PaymentRejection(id: nil, reason: "payload is 4097 bytes, more than 4096")))
        #expect(PaymentMessage.parse([UInt8](repeating: 0xFF, count: 5000), maxAmount: Self.maxAmount)
                == .failure(PaymentRejection(id: nil, reason: "payload is 5000 bytes, more than 4096")))
    }

    @Test func invalidUTF8IsRejected() {
        #expect(PaymentMessage.parse([0x7B, 0xFF, 0x7D], maxAmount: Self.maxAmount)
                == .failure(PaymentRejection(id: nil, reason: "not valid JSON: invalid UTF-8 at byte 1")))
        let memo = Array(#"{"id":"T1","amount":"1","memo":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(PaymentMessage.parse(memo, maxAmount: Self.maxAmount)
                == .failure(PaymentRejection(id: nil, reason: "not valid JSON: invalid UTF-8 at byte 32")))
    }

    /// Unknown fields are not kept, but they are checked as strictly as the
    /// rest: the same JSON error as the full parser gives.
    @Test(arguments: [
        #"{"id":"T1","amount":"1","x":[1,{"a":1,"a":2}]}"#,
        #"{"id":"T1","amount":"1","x":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"k7":0}}"#,
        #"{"id":"T1","amount":"1","x":"\ud800"}"#,
        #"{"id":"T1","amount":"1","x":"\q"}"#,
        #"{"id":"T1","amount":"1","x":01}"#,
        #"{"id":"T1","amount":"1","x":[1,]}"#,
        #"{"id":"T1","amount":"1","x":{"a":1,}}"#,
        #"{"id":"T1","amount":"1","x":[NaN]}"#,
        #"{"id":"T1","amount":"1","x":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}"#,
        #"{"id":"T1","amount":"1","x":1,"x":2}"#,
        #"{"x":1,"id":"T1","x":2,"amount":"1"}"#,
        #"{"id":"T1","amount":"1","x":"a"#,
        #"[1,2,{"a":1,"a":2}]"#,
        #"[1,2,"\ud800"]"#,
        "{\"id\":\"T1\",\"amount\":\"1\",\"x\":\"\u{1}\"}",
    ])
    func unknownFieldsAreValidatedToo(_ text: String) throws {
        let full = try #require(throws: JSONError.self) { try JSONValue.parse(Array(text.utf8)) }
        #expect(Self.parse(text) == .failure(PaymentRejection(id: nil, reason: "not valid JSON: \(full)")))
    }

    @Test func unknownFieldsDoNotHideKnownOnes() throws {
        let text = #"{"a":[{"id":"X"}],"id":"T1","b":{"amount":"9"},"amount":"1.50","c":[[[1]]],"lang":"en-IN","d":"\u00e9"}"#
        #expect(try Self.parse(text).get() == Payment(id: "T1", amount: Amount(minorUnits: 150), lang: "en-IN"))
        let many = (0..<120).map { "\"k\($0)\":[\($0),{\"v\":\"\($0)\"}]" }.joined(separator: ",")
        #expect(try Self.parse("{\(many),\"id\":\"T1\",\"amount_minor\":7}").get() == Payment(id: "T1", amount: Amount(minorUnits: 7)))
        let duplicate = "{\(many),\"id\":\"T1\",\"amount_minor\":7,\"k99\":1}"
        #expect(Self.parse(duplicate) == .failure(PaymentRejection(
            id: nil, reason: "not valid JSON: duplicate key 'k99' at byte \(duplicate.utf8.count - #""k99":1}"#.utf8.count)")))
        #expect(Self.parse(#"[{"id":"T1","amount":"1"}]"#) == .failure(PaymentRejection(id: nil, reason: "payload must be a JSON object, not an array")))
    }

    @Test func rejectionReachesTheReceipt() throws {
        guard case .failure(let r) = Self.parse(#"{"id":"T7","amount":"1.001"}"#) else { Issue.record("accepted"); return }
        let receipt = Receipt(id: r.id, status: .rejected, ts: 1, reason: r.reason)
        #expect(receipt.json == #"{"id":"T7","status":"rejected","ts":1,"reason":"amount has more than two decimals"}"#)
    }

    // MARK: - Hostile payloads

    @Suite struct Hostile {
        /// ≥ 10,000 generated payloads from a fixed seed. Each one must return
        /// (a crash fails the whole test run) with the outcome an independent
        /// reference (below, written from DESIGN §2, not from the sources)
        /// expects: accepted only with the exact payment, rejected with a
        /// non-empty reason and the id whenever it could be read.
        @Test func generatedPayloadsAllGetTheRightAnswer() {
            var rng = SplitMix64(seed: 0x50_55_4E_44_42_4F_58)
            let cases = HostileCorpus.structured(count: 6000, rng: &rng)
                + HostileCorpus.mutations(count: 6000, rng: &rng)
                + HostileCorpus.fixed()
            #expect(cases.count >= 10_000)
            let audit = HostileCorpus.audit(cases) { PaymentMessage.parse($0, maxAmount: .defaultPaymentMax) }
            #expect(audit.failures.isEmpty, "\(audit.failures.count) wrong answers, e.g.\n\(audit.failures.prefix(10).joined(separator: "\n"))")
            // The stream really mixes both outcomes, and the valid payment
            // woven through it always parsed.
            #expect(audit.accepted > 1500 && audit.rejected > 6000, "accepted \(audit.accepted), rejected \(audit.rejected)")
            #expect(audit.designExampleAccepted >= 100)
        }

        /// A crash ends the test process, so it fails the run. The audit itself
        /// must catch a parser that returns a wrong answer: one that accepts a
        /// bad amount, reads an amount through a Double, or gives no reason.
        @Test func auditCatchesBrokenParsers() {
            var rng = SplitMix64(seed: 7)
            let cases = HostileCorpus.structured(count: 2000, rng: &rng) + HostileCorpus.mutations(count: 2000, rng: &rng)
            func real(_ b: [UInt8]) -> Result<Payment, PaymentRejection> { PaymentMessage.parse(b, maxAmount: .defaultPaymentMax) }
            #expect(HostileCorpus.audit(cases, parse: real).failures.isEmpty)

            // Accepts any amount it could not parse, as 1 minor unit.
            let lenient = HostileCorpus.audit(cases) { bytes in
                let r = real(bytes)
                if case .failure(let e) = r, let id = e.id, e.reason.hasPrefix("amount") {
                    return .success(Payment(id: id, amount: Amount(minorUnits: 1)))
                }
                return r
            }
            #expect(!lenient.failures.isEmpty)

            // Reads the amount through a Double (0.29 * 100 = 28.999…).
            let double = HostileCorpus.audit(cases) { bytes in
                guard case .success(var p) = real(bytes), let doc = try? JSONValue.parse(bytes) else { return real(bytes) }
                switch doc["amount"] {
                case .string(let t)?, .number(let t)?:
                    guard let d = Double(t) else { return real(bytes) }
                    p.amount = Amount(minorUnits: Int64(d * 100))
                default: break
                }
                return .success(p)
            }
            #expect(!double.failures.isEmpty)

            // Gives no reason.
            let silent = HostileCorpus.audit(cases) { bytes in
                real(bytes).mapError { PaymentRejection(id: $0.id, reason: "") }
            }
            #expect(!silent.failures.isEmpty)
        }
    }
}

// MARK: - The hostile corpus and its independent reference


private enum HostileCorpus {
    static let maxMinor: Int64 = 9_999_999_999
    static let design = #"{"id": "T20261129-000123", "amount": "123.45", "currency": "CNY", "channel": "alipay", "ts": 1764415000, "lang": "zh-CN"}"#
    static let designPayment = Payment(id: "T20261129-000123", amount: Amount(minorUnits: 12345), currency: "CNY",
                                       channel: .alipay, ts: 1_764_415_000, lang: "zh-CN")

    enum Expected {
        case accept(Payment)
        /// Rejected with exactly this reason (`prefix`: starting with it).
        case reject(id: String?, reason: String, prefix: Bool = false)
        /// Whatever the reference model says.
        case reference
    }

    struct Case {
        var bytes: [UInt8]
        var expected: Expected
    }

    struct Audit {
        var failures: [String] = []
        var accepted = 0, rejected = 0, designExampleAccepted = 0
    }

    static func audit(_ cases: [Case], parse: ([UInt8]) -> Result<Payment, PaymentRejection>) -> Audit {
        var audit = Audit()
        for c in cases {
            let got = parse(c.bytes)
            switch got {
            case .success(let p):
                audit.accepted += 1
                if c.bytes == Array(design.utf8) && p == designPayment { audit.designExampleAccepted += 1 }
            case .failure(let r):
                audit.rejected += 1
                if r.reason.isEmpty { audit.failures.append("empty reason for \(show(c.bytes))") }
            }
            if let problem = check(got, c) { audit.failures.append(problem + " for " + show(c.bytes)) }
        }
        return audit
    }

    static func check(_ got: Result<Payment, PaymentRejection>, _ c: Case) -> String? {
        switch (c.expected, got) {
        case (.accept(let want), .success(let p)):
            return p == want ? nil : "accepted \(p), want \(want)"
        case (.accept(let want), .failure(let r)):
            return "rejected (\(r.reason)), want \(want)"
        case (.reject(let id, let reason, let prefix), .failure(let r)):
            let ok = r.id == id && (prefix ? r.reason.hasPrefix(reason) : r.reason == reason)
            return ok ? nil : "rejected (\(r.id ?? "nil"), \(r.reason)), want (\(id ?? "nil"), \(reason))"
        case (.reject(_, let reason, _), .success(let p)):
            return "accepted \(p), want rejection \(reason)"
        case (.reference, _):
            return checkAgainstReference(got, c.bytes)
        }
    }

    static func show(_ bytes: [UInt8]) -> String {
        let s = String(decoding: bytes.prefix(160), as: UTF8.self).debugDescription
        return bytes.count > 160 ? s + "… (\(bytes.count) bytes)" : s
    }

    // MARK: The reference

    /// What DESIGN §2 says about `bytes`, written independently of the
    /// sources: the exact payment, or a rejection with this id. The JSON tree
    /// comes from JSONValue.parse, itself cross-checked against Foundation's
    /// JSONSerialization.
    static func checkAgainstReference(_ got: Result<Payment, PaymentRejection>, _ bytes: [UInt8]) -> String? {
        if bytes.count > 4096 {
            return check(got, Case(bytes: bytes, expected: .reject(id: nil, reason: "payload is \(bytes.count) bytes, more than 4096")))
        }
        guard let doc = try? JSONValue.parse(bytes) else {
            return check(got, Case(bytes: bytes, expected: .reject(id: nil, reason: "not valid JSON: ", prefix: true)))
        }
        if let differs = crossCheck(doc, bytes) { return differs }
        let (want, id) = reference(doc)
        switch (want, got) {
        case (let w?, .success(let p)): return p == w ? nil : "accepted \(p), reference says \(w)"
        case (let w?, .failure(let r)): return "rejected (\(r.reason)), reference says \(w)"
        case (nil, .success(let p)): return "accepted \(p), reference says reject"
        case (nil, .failure(let r)): return r.id == id ? nil : "rejection id \(r.id ?? "nil"), reference says \(id ?? "nil") (\(r.reason))"
        }
    }

    /// The payment the contract allows, or nil and the id a rejection must carry.
    static func reference(_ doc: JSONValue) -> (Payment?, id: String?) {
        guard case .object = doc, case .string(let id)? = doc["id"] else { return (nil, nil) }
        let bytes = Array(id.utf8)
        guard (1...64).contains(bytes.count), bytes.allSatisfy({ (33...126).contains($0) }) else { return (nil, nil) }
        func given(_ key: String) -> JSONValue? { doc[key] == .null ? nil : doc[key] }
        func text(_ v: JSONValue) -> String? {
            switch v { case .string(let s), .number(let s): s; default: nil }
        }
        func digits(_ s: Substring) -> Bool { !s.isEmpty && s.allSatisfy { "0123456789".contains($0) } }
        func integer(_ s: Substring) -> Int64? {
            let significant = s.drop { $0 == "0" }
            guard significant.count <= 15 else { return Int64.max }
            return significant.reduce(0) { $0 * 10 + Int64($1.asciiValue! - 48) }
        }
        var minor: Int64
        switch (given("amount"), given("amount_minor")) {
        case (let a?, nil):
            guard let t = text(a) else { return (nil, id) }
            let parts = t.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count <= 2, digits(parts[0]), parts.count == 1 || (digits(parts[1]) && parts[1].count <= 2),
                  let whole = integer(parts[0]), whole < 1_000_000_000_000 else { return (nil, id) }
            let cents = parts.count == 2 ? Int64(parts[1].count == 1 ? parts[1] + "0" : parts[1])! : 0
            minor = whole * 100 + cents
        case (nil, let m?):
            guard case .number(let t) = m, digits(Substring(t)), let n = integer(Substring(t)) else { return (nil, id) }
            minor = n
        default: return (nil, id)
        }
        guard minor > 0 && minor <= maxMinor else { return (nil, id) }
        var p = Payment(id: id, amount: Amount(minorUnits: minor))
        if let c = given("currency") {
            guard case .string(let s) = c, s.utf8.count == 3, s.utf8.allSatisfy({ (65...90).contains($0) }) else { return (nil, id) }
            p.currency = s
        }
        if let c = given("channel") {
            guard case .string(let s) = c else { return (nil, id) }
            p.channel = ["alipay": .alipay, "wechat": .wechat][s.lowercased()] ?? .other
        }
        if let t = given("ts") {
            guard case .number(let s) = t else { return (nil, id) }
            let negative = s.hasPrefix("-")
            let body = negative ? s.dropFirst() : Substring(s)
            guard digits(body), let v = integer(body), v <= 4_102_444_800, !negative || v == 0 else { return (nil, id) }
            p.ts = v
        }
        if let l = given("lang") {
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-".utf8)
            guard case .string(let s) = l, (1...16).contains(s.utf8.count), s.utf8.allSatisfy(allowed.contains) else { return (nil, id) }
            p.lang = s
        }
        return (p, id)
    }

    /// A document JSONValue accepts must be one Foundation accepts too, with
    /// the same structure and strings. (Foundation refuses numbers beyond
    /// Double's range, which JSON allows: such documents are not compared.)
    static func crossCheck(_ doc: JSONValue, _ bytes: [UInt8]) -> String? {
        guard !hasHugeNumber(doc) else { return nil }
        guard let theirs = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) else {
            return "JSONValue accepted what Foundation rejects"
        }
        return same(doc, theirs) ? nil : "JSONValue and Foundation read different values"
    }

    static func hasHugeNumber(_ v: JSONValue) -> Bool {
        switch v {
        case .number(let t): !(Double(t)?.isFinite ?? false)
        case .array(let a): a.contains(where: hasHugeNumber)
        case .object(let m): m.contains { hasHugeNumber($0.1) }
        default: false
        }
    }

    static func same(_ ours: JSONValue, _ theirs: Any) -> Bool {
        switch ours {
        case .object(let m):
            guard let d = theirs as? [String: Any], d.count == m.count else { return false }
            return m.allSatisfy { k, v in d[k].map { same(v, $0) } ?? false }
        case .array(let a):
            guard let t = theirs as? [Any], t.count == a.count else { return false }
            return zip(a, t).allSatisfy { same($0, $1) }
        case .string(let s): return (theirs as? String) == s
        case .number(let t):
            guard let a = (theirs as? NSNumber)?.doubleValue, let b = Double(t) else { return false }
            return a == b || abs(a - b) <= abs(b) * 1e-12
        case .bool(let b): return (theirs as? NSNumber)?.boolValue == b
        case .null: return theirs is NSNull
        }
    }

    // MARK: Structured payloads with known answers

    /// One field's option: its JSON (nil: absent) and its problem, if any.
    struct Option {
        var json: String?
        var problem: String? = nil
        /// The problem is the JSON's, not the field's: reason prefix.
        var breaksJSON = false
        var apply: (inout Payment) -> Void = { _ in }
    }

    static func structured(count: Int, rng: inout SplitMix64) -> [Case] {
        let limit = "amount is above the limit of 99999999.99"
        let amountNaN = Option(json: "NaN", problem: "NaN and Infinity are not JSON", breaksJSON: true)
        let ids: [(json: String?, id: String?, problem: String?)] = [
            ("\"T20261129-000123\"", "T20261129-000123", nil), ("\"a\"", "a", nil),
            ("\"" + String(repeating: "Z", count: 64) + "\"", String(repeating: "Z", count: 64), nil),
            (#""!~#{}\"\\""#, #"!~#{}"\"#, nil), (#""\u0041BC""#, "ABC", nil),
            (nil, nil, "id is missing"), ("\"\"", nil, "id is empty"),
            ("\"" + String(repeating: "Z", count: 65) + "\"", nil, "id is longer than 64 characters"),
            ("\"" + String(repeating: "Z", count: 3000) + "\"", nil, "id is longer than 64 characters"),
            ("\"a b\"", nil, "id must be printable ASCII without spaces"),
            ("\"é\"", nil, "id must be printable ASCII without spaces"),
            ("12", nil, "id must be a string, not a number"), ("null", nil, "id must be a string, not null"),
            ("{}", nil, "id must be a string, not an object"),
        ]
        let amounts: [(members: [(String, String)], minor: Int64?, problem: Option?)] = [
            ([("amount", "\"123.45\"")], 12345, nil), ([("amount", "123.45")], 12345, nil),
            ([("amount", "\"0.1\"")], 10, nil), ([("amount", "0.1")], 10, nil), ([("amount", "0.2")], 20, nil),
            ([("amount", "0.29")], 29, nil), ([("amount", "\"0.57\"")], 57, nil), ([("amount", "1.15")], 115, nil),
            ([("amount", "99999999.99")], 9_999_999_999, nil), ([("amount", "\"007.50\"")], 750, nil),
            ([("amount_minor", "12345")], 12345, nil),
            ([("amount_minor", "\"12345\"")], nil, Option(json: nil, problem: "amount_minor must be an integer number of minor units (e.g. 12345 for 123.45), not a string")),
            ([("amount_minor", "1")], 1, nil), ([("amount", "null"), ("amount_minor", "7")], 7, nil),
            ([("amount", "1e308")], nil, Option(json: nil, problem: AmountError.exponent.description)),
            ([("amount", "-1")], nil, Option(json: nil, problem: "amount is negative")),
            ([("amount", "0")], nil, Option(json: nil, problem: "amount is zero")),
            ([("amount", "\"1.001\"")], nil, Option(json: nil, problem: "amount has more than two decimals")),
            ([("amount", "100000000")], nil, Option(json: nil, problem: limit)),
            ([("amount", "1" + String(repeating: "0", count: 400))], nil, Option(json: nil, problem: limit)),
            ([("amount", "\"" + String(repeating: "9", count: 3000) + "\"")], nil, Option(json: nil, problem: limit)),
            ([("amount", "true")], nil, Option(json: nil, problem: "amount must be a string or a number, not a boolean")),
            ([("amount", "[1]")], nil, Option(json: nil, problem: "amount must be a string or a number, not an array")),
            ([("amount", "{}")], nil, Option(json: nil, problem: "amount must be a string or a number, not an object")),
            ([("amount", "\"NaN\"")], nil, Option(json: nil, problem: "amount is not a finite number (NaN or Infinity)")),
            ([("amount", "NaN")], nil, amountNaN),
            ([("amount", "-Infinity")], nil, amountNaN),
            ([("amount_minor", "12.5")], nil, Option(json: nil, problem: "amount_minor: amount is not a decimal number: minor units must be a whole number")),
            ([("amount_minor", "-1")], nil, Option(json: nil, problem: "amount_minor: amount is negative")),
            ([("amount_minor", "null")], nil, Option(json: nil, problem: "amount is missing")),
            ([], nil, Option(json: nil, problem: "amount is missing")),
            ([("amount", "\"1\""), ("amount_minor", "100")], nil, Option(json: nil, problem: "give amount or amount_minor, not both")),
        ]
        let currencies: [Option] = [
            Option(json: nil), Option(json: "null"),
            Option(json: "\"CNY\"", apply: { $0.currency = "CNY" }), Option(json: "\"INR\"", apply: { $0.currency = "INR" }),
            Option(json: "\"cny\"", problem: "currency must be 3 uppercase letters (ISO 4217, e.g. CNY), not 'cny'"),
            Option(json: "\"\"", problem: "currency must be 3 uppercase letters (ISO 4217, e.g. CNY)"),
            Option(json: "156", problem: "currency must be a string, not a number"),
        ]
        let channels: [Option] = [
            Option(json: nil), Option(json: "null"),
            Option(json: "\"alipay\"", apply: { $0.channel = .alipay }), Option(json: "\"WECHAT\"", apply: { $0.channel = .wechat }),
            Option(json: "\"unionpay\""), Option(json: "\"\\u0000中\""),
            Option(json: "[\"alipay\"]", problem: "channel must be a string, not an array"),
            Option(json: "false", problem: "channel must be a string, not a boolean"),
        ]
        let stamps: [Option] = [
            Option(json: nil), Option(json: "null"),
            Option(json: "1764415000", apply: { $0.ts = 1_764_415_000 }), Option(json: "0", apply: { $0.ts = 0 }),
            Option(json: "4102444800", apply: { $0.ts = 4_102_444_800 }),
            Option(json: "4102444801", problem: "ts must be between 0 and 4102444800, not 4102444801"),
            Option(json: "-1", problem: "ts must be between 0 and 4102444800, not -1"),
            Option(json: "1.5", problem: "ts must be a whole number of seconds, without fraction or exponent, not 1.5"),
            Option(json: "1e9", problem: "ts must be a whole number of seconds, without fraction or exponent, not 1e9"),
            Option(json: "\"1764415000\"", problem: "ts must be a number (Unix seconds), not a string"),
            Option(json: "Infinity", problem: "NaN and Infinity are not JSON", breaksJSON: true),
        ]
        let langs: [Option] = [
            Option(json: nil), Option(json: "null"),
            Option(json: "\"zh-CN\"", apply: { $0.lang = "zh-CN" }), Option(json: "\"en-IN\"", apply: { $0.lang = "en-IN" }),
            Option(json: "\"\"", problem: "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN)"),
            Option(json: "\"zh_CN\"", problem: "lang must be 1 to 16 letters, digits or '-' (e.g. zh-CN), not 'zh_CN'"),
            Option(json: "7", problem: "lang must be a string, not a number"),
        ]
        // Unknown fields: ignored, unless they break the JSON or the size.
        let deep = String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000)
        let deepObject = String(repeating: "{\"a\":", count: 600) + "1" + String(repeating: "}", count: 600)
        let extras: [Option] = [
            Option(json: nil), Option(json: nil), Option(json: nil),
            Option(json: "\"thank you 谢谢 \\ud83d\\ude00\""), Option(json: "[1,2.5,-3e-7,true,null,{\"x\":[]}]"),
            Option(json: "1e999"), Option(json: "-0"), Option(json: "{\"amount\":\"-1\",\"id\":5}"),
            Option(json: String(repeating: "[", count: 15) + String(repeating: "]", count: 15)),
            Option(json: "\"" + String(repeating: "x", count: 3500) + "\""),
            Option(json: "\"" + String(repeating: "y", count: 5000) + "\""),
            Option(json: String(repeating: "[", count: 16) + String(repeating: "]", count: 16),
                   problem: "nested deeper than 16 levels", breaksJSON: true),
            Option(json: deep, problem: "nested deeper than 16 levels", breaksJSON: true),
            Option(json: deepObject, problem: "nested deeper than 16 levels", breaksJSON: true),
            Option(json: "\"bad \\x escape\"", problem: "invalid escape '\\x' in a string", breaksJSON: true),
            Option(json: "\"\\udead\"", problem: "lone surrogate \\uDEAD in a string", breaksJSON: true),
            Option(json: "\"\u{1}\"", problem: "control character U+0001 in a string must be escaped", breaksJSON: true),
            Option(json: "\u{FF}", problem: "invalid UTF-8", breaksJSON: true),  // replaced by the byte below
            Option(json: "007", problem: "numbers must not have leading zeros", breaksJSON: true),
        ]

        func pick<T>(_ options: [T], valid: (T) -> Bool) -> T {
            // Mostly valid values, so that many payloads are accepted.
            let good = options.filter(valid), bad = options.filter { !valid($0) }
            return bad.isEmpty || (!good.isEmpty && Double.random(in: 0..<1, using: &rng) < 0.8)
                ? good.randomElement(using: &rng)! : bad.randomElement(using: &rng)!
        }

        var cases: [Case] = []
        for n in 0..<count {
            if n % 50 == 0 { cases.append(Case(bytes: Array(design.utf8), expected: .accept(designPayment))); continue }
            let id = pick(ids) { $0.problem == nil }
            let amount = pick(amounts) { $0.problem == nil }
            let currency = pick(currencies) { $0.problem == nil }
            let channel = pick(channels) { $0.problem == nil }
            let ts = pick(stamps) { $0.problem == nil }
            let lang = pick(langs) { $0.problem == nil }
            var extra = pick(extras) { $0.problem == nil }
            let duplicate = Int.random(in: 0..<40, using: &rng) == 0
            if duplicate { extra = Option(json: "1") }

            // Members in a random order, with random whitespace; remember
            // the first JSON-breaking option in document order.
            var members: [(key: String, json: String, option: Option?)] = []
            if let j = id.json { members.append(("id", j, nil)) }
            for (k, j) in amount.members { members.append((k, j, amount.problem?.breaksJSON == true ? amount.problem : nil)) }
            for (k, o) in [("currency", currency), ("channel", channel), ("ts", ts), ("lang", lang), ("memo", extra)] {
                if let j = o.json { members.append((k, j, o.breaksJSON ? o : nil)) }
            }
            members.shuffle(using: &rng)
            if duplicate {
                members.append(("memo", "2", nil))
                members.swapAt(members.count - 1, Int.random(in: 0..<members.count, using: &rng))
            }
            func space() -> String { ["", "", " ", "\n  ", "\t", "\r\n"].randomElement(using: &rng)! }
            var text = "{" + space()
            var bytes: [UInt8] = []
            var firstBreak: (offset: Int, message: String)?
            var seenMemo = false
            for (k, member) in members.enumerated() {
                if k > 0 { text += "," + space() }
                text += "\"\(member.key)\"" + space() + ":" + space()
                bytes = Array(text.utf8)
                let isDuplicateMemo = duplicate && member.key == "memo" && seenMemo
                if member.key == "memo" { seenMemo = true }
                if firstBreak == nil, let o = member.option {
                    firstBreak = (bytes.count, o.problem!)
                } else if firstBreak == nil, isDuplicateMemo {
                    firstBreak = (0, "duplicate key 'memo'")
                }
                text += member.json + space()
            }
            text += "}"
            bytes = Array(text.utf8)
            if extra.json == "\u{FF}" {  // a raw 0xFF byte, not the UTF-8 of U+00FF
                let i = bytes.indices.first { bytes[$0] == 0xC3 && bytes[$0 + 1] == 0xBF }!
                bytes.replaceSubrange(i...i + 1, with: [0xFF])
            }

            let expected: Expected
            if bytes.count > 4096 {
                expected = .reject(id: nil, reason: "payload is \(bytes.count) bytes, more than 4096")
            } else if let firstBreak {
                expected = .reject(id: nil, reason: "not valid JSON: " + firstBreak.message + " at byte", prefix: true)
            } else if let problem = id.problem {
                expected = .reject(id: nil, reason: problem)
            } else if let problem = amount.problem?.problem ?? currency.problem ?? channel.problem ?? ts.problem ?? lang.problem {
                expected = .reject(id: id.id, reason: problem)
            } else {
                var p = Payment(id: id.id!, amount: Amount(minorUnits: amount.minor!))
                for o in [currency, channel, ts, lang] { o.apply(&p) }
                expected = .accept(p)
            }
            cases.append(Case(bytes: bytes, expected: expected))
        }
        return cases
    }

    // MARK: Mutated payloads, judged by the reference

    static func mutations(count: Int, rng: inout SplitMix64) -> [Case] {
        let seeds = [
            design,
            #"{"id":"T1","amount_minor":12345,"channel":"wechat"}"#,
            #"{"id":"T2","amount":99999999.99,"ts":0,"lang":"en-IN","currency":"INR"}"#,
            #"{"id":"T3","amount":"0.29","memo":["a",{"b":[1.5,-2e3,null,true]}],"x":"\u00e9\ud83d\ude00"}"#,
        ].map { Array($0.utf8) }
        let special = Array(#"{}[]:,"\-+0123456789.eEnulltruefalseNaN \#t"#.utf8) + [0x00, 0x0A, 0x7F, 0x80, 0xBF, 0xC3, 0xE4, 0xED, 0xF4, 0xFF]
        var cases: [Case] = []
        for n in 0..<count {
            if n % 50 == 0 { cases.append(Case(bytes: seeds[0], expected: .accept(designPayment))); continue }
            var b = seeds.randomElement(using: &rng)!
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0..<max(b.count, 1), using: &rng)
                switch Int.random(in: 0..<8, using: &rng) {
                case 0: if !b.isEmpty { b[at] = UInt8.random(in: 0...255, using: &rng) }
                case 1, 2: if !b.isEmpty { b[at] = special.randomElement(using: &rng)! }
                case 3: b.removeLast(Int.random(in: 0...b.count, using: &rng))  // truncate
                case 4: b.insert(special.randomElement(using: &rng)!, at: min(at, b.count))
                case 5: if !b.isEmpty { b.remove(at: at) }
                case 6:  // duplicate a chunk (repeats keys, nests deeper, grows)
                    let end = min(b.count, at + Int.random(in: 1...64, using: &rng))
                    b.insert(contentsOf: b[at..<end], at: end)
                default:  // wrap in containers
                    let n = Int.random(in: 1...3000, using: &rng)
                    b = [UInt8](repeating: UInt8(ascii: "["), count: n) + b + [UInt8](repeating: UInt8(ascii: "]"), count: n)
                }
            }
            cases.append(Case(bytes: b, expected: .reference))
        }
        return cases
    }

    // MARK: Fixed hostile payloads

    static func fixed() -> [Case] {
        func reference(_ s: String) -> Case { Case(bytes: Array(s.utf8), expected: .reference) }
        let nest = 10_000
        var cases = [
            Case(bytes: Array((String(repeating: "[", count: nest) + String(repeating: "]", count: nest)).utf8),
                 expected: .reject(id: nil, reason: "payload is 20000 bytes, more than 4096")),
            Case(bytes: Array((String(repeating: "{\"a\":", count: nest) + "1" + String(repeating: "}", count: nest)).utf8),
                 expected: .reject(id: nil, reason: "payload is 60001 bytes, more than 4096")),
            Case(bytes: Array(("[" + String(repeating: "[", count: 4000) + String(repeating: "]", count: 4000)).utf8),
                 expected: .reject(id: nil, reason: "payload is 8001 bytes, more than 4096")),
            Case(bytes: Array((String(repeating: "[", count: 2048) + String(repeating: "]", count: 2048)).utf8),
                 expected: .reject(id: nil, reason: "not valid JSON: nested deeper than 16 levels at byte 16")),
            Case(bytes: Array((#"{"id":"T9","x":"# + String(repeating: "{\"a\":", count: 800)).utf8),
                 expected: .reject(id: nil, reason: "not valid JSON: nested deeper than 16 levels at byte 90")),
            Case(bytes: [UInt8](repeating: UInt8(ascii: " "), count: 5000), expected: .reject(id: nil, reason: "payload is 5000 bytes, more than 4096")),
            Case(bytes: [UInt8](repeating: UInt8(ascii: " "), count: 4096), expected: .reject(id: nil, reason: "not valid JSON: no JSON value: the input is empty at byte 4096")),
            Case(bytes: [], expected: .reject(id: nil, reason: "not valid JSON: no JSON value: the input is empty at byte 0")),
            Case(bytes: [0x7B, 0xFF, 0x7D], expected: .reject(id: nil, reason: "not valid JSON: invalid UTF-8 at byte 1")),
            Case(bytes: Array(#"{"id":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#"","amount":"1"}"#.utf8),
                 expected: .reject(id: nil, reason: "not valid JSON: invalid UTF-8 at byte 7")),
            Case(bytes: Array(#"{"id":"T9","amount":1e308}"#.utf8), expected: .reject(id: "T9", reason: AmountError.exponent.description)),
            Case(bytes: Array(#"{"id":"T9","amount":-1}"#.utf8), expected: .reject(id: "T9", reason: "amount is negative")),
            Case(bytes: Array(#"{"id":"T9","amount":NaN}"#.utf8), expected: .reject(id: nil, reason: "not valid JSON: NaN and Infinity are not JSON at byte 20")),
            reference(#"{"id":"T9","amount":""# + String(repeating: "1", count: 4000) + "\"}"),
            reference(#"{"id":"T9","amount_minor":"# + String(repeating: "9", count: 4000) + "}"),
            reference(#"{"id":"T9","amount":0."# + String(repeating: "0", count: 4000) + "1}"),
            reference(#"{"id":"T9","amount":"1","ts":"# + String(repeating: "9", count: 4000) + "}"),
            reference(#"{"id":"T9","amount":"1","lang":""# + String(repeating: "a", count: 4000) + "\"}"),
            reference(#"{"id":"T9","amount":"1","currency":""# + String(repeating: "A", count: 4000) + "\"}"),
            reference(#"{"id":"T9","amount":"1","x":""# + String(repeating: "\\u00e9", count: 670) + "\"}"),
            reference(#"{"id":"T9","amount":"1","x":["# + Array(repeating: "1e999", count: 600).joined(separator: ",") + "]}"),
            reference("{" + (0..<300).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + #","id":"T9","amount":"1"}"#),
            reference("{" + (0..<300).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + #","k150":1,"id":"T9","amount":"1"}"#),
        ]
        // Every field, every wrong type.
        for field in ["id", "amount", "amount_minor", "currency", "channel", "ts", "lang"] {
            for value in ["null", "true", "false", "0", "-1", "1.5", "1e308", "\"\"", "\"x\"", "[]", "{}", "[\"T1\"]", "{\"a\":1}"] {
                var fields = ["id": "\"T9\"", "amount": "\"1\""]
                fields[field] = value
                cases.append(reference("{" + fields.map { "\"\($0.key)\":\($0.value)" }.sorted().joined(separator: ",") + "}"))
            }
        }
        return cases
    }
}
