import Testing
import Soundbox

/// The control socket's codec (docs/control-protocol.md).
@Suite struct ControlProtocolTests {
    @Test(arguments: [
        ("status", ["status"]),
        ("  say   12.50\t--id T1  ", ["say", "12.50", "--id", "T1"]),
        (#"say 12.50 --id "T 1""#, ["say", "12.50", "--id", "T 1"]),
        ("config set audio.device \"a\tb\"", ["config", "set", "audio.device", "a\tb"]),
        (#"x "a \"quoted\" word" "back\\slash""#, ["x", #"a "quoted" word"#, #"back\slash"#]),
        (#"x "" y"#, ["x", "", "y"]),
        (#"x ab"c d"ef"#, ["x", "abc def"]),
        (#"x a\b"#, ["x", #"a\b"#]),
        ("", []),
    ])
    func tokenize(_ line: String, _ args: [String]) throws {
        #expect(try ControlProtocol.tokenize(line) == args)
    }

    @Test(arguments: [#"say "12.50"#, #"x "a\"#, #"x "a\""#])
    func unterminatedQuoteIsAnArgumentError(_ line: String) {
        #expect(throws: ControlAck(.arg, command: "", "unterminated quoted argument")) { try ControlProtocol.tokenize(line) }
    }

    /// Whatever the arguments, requestLine then tokenize gives them back.
    @Test func quoteRoundTrips() throws {
        let tricky = ["", " ", "plain", "two words", "\t", #"""#, #"\"#, #"\\""#, #"a\"b"#, #"ends with \"#,
                      "收款 到账", "\u{301}starts with a combining mark", " \u{301}", "\"\u{301}", "emoji 👩‍👩‍👧",
                      "--id", "key: value", "ACK [2@0] {x} y", "'single'"]
        for arg in tricky {
            #expect(try ControlProtocol.tokenize(ControlProtocol.quote(arg)) == [arg], "\(arg.debugDescription)")
        }
        #expect(try ControlProtocol.tokenize(ControlProtocol.requestLine(tricky)) == tricky)
        #expect(ControlProtocol.quote("12.50") == "12.50")
        #expect(ControlProtocol.quote(#"a "b""#) == #""a \"b\"""#)
    }

    @Test func valuesStayOnOneLine() {
        #expect(ControlProtocol.value("a\nb\r\nc\rd") == #"a\nb\r\nc\rd"#)
        var reply = ControlReply()
        reply.add("reason", "line one\r\nline two")
        reply.add("volume", 7)
        #expect(reply.text == #"reason: line one\r\nline two"# + "\nvolume: 7\nOK\n")
    }

    /// Issue 18 item 11: a reply value never carries a control or invisible
    /// character raw: they are escaped exactly as log values are (one
    /// escaper, LogLine's), and so is the command an ACK names.
    @Test func replyValuesEscapeControlsAsTheLogDoes() {
        let hostile = "A\u{1B}[2J\u{0}B\u{7F}\u{85}\u{9B}\u{202E}Z\\u{41}"
        #expect(ControlProtocol.value(hostile) == #"A\u{1B}[2J\u{0}B\u{7F}\u{85}\u{9B}\u{202E}Z\\u{41}"#)
        #expect(LogLine.quoted(hostile) == "\"" + ControlProtocol.value(hostile) + "\"")
        #expect(ControlProtocol.value("收款 到账 \"quoted\" key: value") == "收款 到账 \"quoted\" key: value", "printable text stays as it is")
        let ack = ControlAck(.unknown, command: "\u{1B}[2J", "unknown command '\u{1B}[2J'")
        #expect(ack.line == #"ACK [5@0] {\u{1B}[2J} unknown command '\u{1B}[2J'"# + "\n")
    }

    @Test func ackFormatAndParseRoundTrip() {
        let ack = ControlAck(.noExist, command: "replay", "no payment with id 'nope' {or} [so]")
        #expect(ack.line == "ACK [50@0] {replay} no payment with id 'nope' {or} [so]\n")
        #expect(ControlAck.parse(String(ack.line.dropLast())) == ack)
        #expect(ControlAck.parse("ACK [4@0] {} permission denied") == ControlAck(.permission, command: "", "permission denied"))
        #expect(ControlAck(.arg, command: "say", "bad\namount").line == #"ACK [2@0] {say} bad\namount"# + "\n")
        for notAnAck in ["OK", "ACK", "ACK [x@0] {say} y", "ACK [2@0] no braces", "id: ACK [2@0] {a} b"] {
            #expect(ControlAck.parse(notAnAck) == nil, "\(notAnAck)")
        }
    }

    @Test func pairs() {
        #expect(ControlReply.pair("id: T1")! == ("id", "T1"))
        #expect(ControlReply.pair("reason: time: 12:00")! == ("reason", "time: 12:00"))
        #expect(ControlReply.pair("detail: ")! == ("detail", ""))
        #expect(ControlReply.pair("voice: \u{301}x")! == ("voice", "\u{301}x"))
        for bad in ["OK", "id:T1", "id:", "no colon"] {
            #expect(ControlReply.pair(bad) == nil, "\(bad)")
        }
    }

    @Test func recordsStartAtTheirFirstKey() {
        var reply = ControlReply()
        for (k, v) in [("check", "audio"), ("status", "ok"), ("check", "disk"), ("status", "fail"), ("hint", "free space")] {
            reply.add(k, v)
        }
        let records = reply.records(startingWith: "check")
        #expect(records.map { $0.map(\.key) } == [["check", "status"], ["check", "status", "hint"]])
        #expect(records[1].last!.value == "free space")
        #expect(ControlReply().records(startingWith: "id").isEmpty)
        #expect(reply["status"] == "ok", "the subscript finds the first")
    }
}
