import Testing
import Soundbox

@Suite struct ConfigTests {
    @Test func defaultsWhenEmpty() throws {
        let c = try Config.parse("", source: "x.conf")
        #expect(c[.audioOutput] == "alsa")
        #expect(c[.audioDevice] == "default")
        #expect(c[.audioVolume] == 6)
        #expect(c[.voiceLang] == "zh-CN")
    }

    @Test func commentsBlankLinesAndSpaces() throws {
        let c = try Config.parse("""
            # the shop's box
            audio.volume=9   # loud shop

              audio.device = file:'/tmp/o.raw',raw
            audio.output = wav
            voice.dir = /srv/voices#1
            """, source: "x.conf")
        #expect(c[.audioVolume] == 9)
        #expect(c[.audioDevice] == "file:'/tmp/o.raw',raw")
        #expect(c[.audioOutput] == "wav")
        #expect(c[.voiceDir] == "/srv/voices#1", "a # inside a value is kept")
    }

    /// Each bad line names the file, the line, the key and what is allowed.
    @Test(arguments: [
        ("audio.volume = 11", "soundbox.conf:2: audio.volume = '11' is not allowed; expected an integer 0-10"),
        ("audio.volume = loud", "soundbox.conf:2: audio.volume = 'loud' is not allowed; expected an integer 0-10"),
        ("audio.volume = -1", "soundbox.conf:2: audio.volume = '-1' is not allowed; expected an integer 0-10"),
        ("audio.output = speaker", "soundbox.conf:2: audio.output = 'speaker' is not allowed; expected one of alsa, wav, null"),
        ("audio.device =", "soundbox.conf:2: audio.device = '' is not allowed; expected a non-empty value of at most 1024 bytes, without control characters"),
        ("voice.dir = ", "soundbox.conf:2: voice.dir = '' is not allowed; expected a path of at most 4096 bytes (PATH_MAX), without control characters"),
        ("volume 3", "soundbox.conf:2: expected 'key = value', got 'volume 3'"),
        ("voice.lang = en-IN", "soundbox.conf:2: voice.lang is already set on line 1"),
    ])
    func badLines(_ line: String, _ message: String) {
        let error = #expect(throws: ConfigFileError.self) {
            try Config.parse("voice.lang = zh-CN\n" + line + "\n", source: "soundbox.conf")
        }
        #expect(error?.description == message)
    }

    @Test func unknownKeyListsTheKnownOnes() {
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("audio.volum = 3", source: "s.conf") }
        #expect(error?.description == "s.conf:1: unknown key 'audio.volum'; known keys: "
            + ConfigKey.all.map(\.name).joined(separator: ", "))
        #expect(error?.description.contains("audio.volume") == true)
    }

    /// `mqtt.dead_link_s`: off, or 5 s and more; 1-4 would reconnect a
    /// slow link all the time (a TLS handshake each).
    @Test func theDeadLinkIsOffOrAtLeastFiveSeconds() throws {
        for ok in ["0", "5", "10", "3600"] { #expect(try Config.parse("mqtt.dead_link_s = \(ok)\n", source: "f")[.mqttDeadLink] == Int(ok)!) }
        for bad in ["1", "4", "-1", "3601", "ten"] {
            #expect(throws: ConfigFileError.self) { try Config.parse("mqtt.dead_link_s = \(bad)\n", source: "f") }
        }
    }

    /// Every key's bad values give the documented message.
    @Test(arguments: ConfigKey.all.map(\.name))
    func everyKeyRejectsABadValue(_ name: String) throws {
        let key = try #require(ConfigKey.named(name))
        let bad: String, allowed: String
        let long = { (n: Int) in String(repeating: "x", count: n + 1) }
        switch key.kind {
        case .text: (bad, allowed) = ("", "a non-empty value of at most 1024 bytes, without control characters")
        case .optionalText: (bad, allowed) = (long(1024), "any text of at most 1024 bytes (empty = not set)")
        case .path: (bad, allowed) = ("", "a path of at most 4096 bytes (PATH_MAX), without control characters")
        case .optionalPath: (bad, allowed) = ("/" + long(4096), "a path of at most 4096 bytes (PATH_MAX) without control characters, or empty = not set")
        case .host: (bad, allowed) = ("broker .example", "a broker's host name (at most 253 bytes, no spaces or control characters) with an optional :port, or up to 8 of them separated by commas, tried in turn (e.g. mq1.example.com,mq2.example.com:8884)")
        case .topicLevel: (bad, allowed) = ("shop/1", "an MQTT topic level: at most 64 bytes, without '/', '+', '#' or control characters (empty = the hostname)")
        case .topicPrefix: (bad, allowed) = ("soundbox/+", "MQTT topic levels: at most 128 bytes, without '+', '#' or control characters")
        case .integer(let r): (bad, allowed) = ("\(r.upperBound + 1)", "an integer \(r.lowerBound)-\(r.upperBound)")
        case .integerOrOff(let r): (bad, allowed) = ("\(r.lowerBound - 1)", "0 (off) or an integer \(r.lowerBound)-\(r.upperBound)")
        case .choice(let options): (bad, allowed) = ("maybe", "one of " + options.joined(separator: ", "))
        case .bool: (bad, allowed) = ("yes", "one of true, false")
        case .packName: (bad, allowed) = ("../etc", "a voice pack's name (1-32 letters, digits, '-' or '_')")
        case .amount: (bad, allowed) = ("1e3", "an amount 0.01-999999999999.99 with at most two decimals")
        }
        let error = #expect(throws: ConfigFileError.self) { try Config.parse("\(name) = \(bad)\n", source: "f.conf") }
        #expect(error?.description.hasPrefix("f.conf:1: \(name) = '\(TextFile.excerpt(bad))' is not allowed; expected \(allowed)") == true,
                "\(error?.description ?? "")")
    }

    @Test func secretsAreMasked() throws {
        let c = try Config.parse("mqtt.password = hunter2\n", source: "s.conf")
        #expect(c[.mqttPassword] == "hunter2")
        #expect(c.shown(TextKey.mqttPassword.key) == "********")
        #expect(c.effective.first { $0.key == TextKey.mqttPassword.key }?.value == "********")
        #expect(Config().shown(TextKey.mqttPassword.key) == "", "unset is shown as unset")
    }

    @Test func missingDefaultFileMeansDefaultsButANamedFileMustExist() throws {
        #expect(throws: ConfigFileError.self) { try Config.load(path: "/nonexistent/soundbox.conf") }
    }

    @Test func everyKeyDefaultIsValid() throws {
        var c = Config()
        for key in ConfigKey.all { try c.set(key.name, key.defaultValue) }
        #expect(ConfigKey.all.count == Set(ConfigKey.all.map(\.name)).count)
    }
}

/// `mqtt.host`: one broker or a cluster's nodes, tried in turn.
@Suite struct BrokerAddressTests {
    @Test func listsAreRead() throws {
        #expect(BrokerAddress.list("mq.example.com") == [BrokerAddress(host: "mq.example.com")])
        #expect(BrokerAddress.list("a:1884, b ,[::1]:1885,::1") == [
            BrokerAddress(host: "a", port: 1884), BrokerAddress(host: "b"),
            BrokerAddress(host: "::1", port: 1885), BrokerAddress(host: "::1")])
        #expect(BrokerAddress(host: "::1", port: 1885).description == "[::1]:1885")
        #expect(BrokerAddress(host: "a", port: 1884).description == "a:1884")
    }

    @Test(arguments: ["", ",", "a,,b", "a:0", "a:65536", "a:x", "a:", "[::1", "[::1]x", "a b", "a\u{7}", "a,b,c,d,e,f,g,h,i",
                      String(repeating: "h", count: 254)])
    func hostileListsAreRefused(text: String) {
        #expect(BrokerAddress.list(text) == nil, "\(text)")
        var c = Config()
        #expect(throws: ConfigError.self) { try c.set("mqtt.host", text) }
    }
}
