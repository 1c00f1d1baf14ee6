// ~790 lines: one suite, signed messages against RFC 8032's vectors and two independent signers, with the signer helpers only it uses.
// Signed messages (docs/signing.md): Ed25519 through OpenSSL (SoundboxCrypto),
// the canonical bytes and the envelope (Soundbox.Signature), and standard
// base64. Checked against RFC 8032's vectors and against two independent
// signers (the openssl CLI and Python's `cryptography`), so the format a
// backend implements from the docs is the one the device verifies.
import Foundation
import Testing
import Soundbox
import SoundboxCrypto
import TestSupport

// MARK: - Helpers


func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8)
    precondition(digits.count % 2 == 0, "odd hex")
    func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: preconditionFailure("not hex")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
}

func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

func json(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

/// A placeholder signature: the envelope needs one of the right shape
/// before the bytes it covers can be built (as `soundboxctl sign` does).
let placeholderSig = String(repeating: "A", count: 86) + "=="

/// The bytes a verifier on device `device` builds for `text` (a message of
/// `kind`, with or without its `sig`).
func canonicalBytes(_ kind: Signature.Kind, _ text: String, device: String = "shop-1") throws -> [UInt8] {
    let document: JSONValue, content: [(String, String)]
    switch kind {
    case .payment:
        switch PaymentMessage.parseKeepingDocument(Array(text.utf8), maxAmount: .wordsMax) {
        case .failure(let r): throw TestFailure("payment refused: \(r.reason)")
        case .success(let (p, d)): document = d; content = Signature.paymentContent(p, document: d)
        }
    case .cmd, .config:
        document = try json(text)
        switch Signature.content(document) {
        case .failure(let p): throw p
        case .success(let c): content = c
        }
    }
    guard case .object(var members) = document else { throw TestFailure("not an object") }
    if !members.contains(where: { $0.0 == "sig" }) { members.append(("sig", .string(placeholderSig))) }
    let envelope: Signature.Envelope
    switch Signature.envelope(.object(members), kind: kind, device: device) {
    case .failure(let p): throw p
    case .success(let e): envelope = e
    }
    switch Signature.canonical(kind: kind, device: device, envelope: envelope, content: content) {
    case .failure(let p): throw p
    case .success(let bytes): return bytes
    }
}


/// Runs a command to its end; throws unless it exits 0. Returns its stdout.
@discardableResult
func runOK(_ command: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let r = try CommandRun(command, environment: ["PATH": "/usr/bin:/bin", "LC_ALL": "C"], timeout: 60)
    guard r.status == 0, !r.timedOut else {
        throw TestFailure("\(command.joined(separator: " ")) exited \(r.status): \(r.stderr)")
    }
    return r.stdout
}

/// An Ed25519 key pair made by the openssl CLI: priv.pem, pub.pem.
struct OpenSSLKeyPair {
    let dir: Scratch
    var priv: String { dir.path + "/priv.pem" }
    var pub: String { dir.path + "/pub.pem" }
    init() throws {
        dir = Scratch("ossl")
        do {
            try runOK(["/usr/bin/openssl", "genpkey", "-algorithm", "ed25519", "-out", dir.path + "/priv.pem"])
            try runOK(["/usr/bin/openssl", "pkey", "-in", dir.path + "/priv.pem", "-pubout", "-out", dir.path + "/pub.pem"])
        } catch { dir.remove(); throw error }
    }
    /// openssl's own idea of the key id: the SHA-256 of the DER's last 32
    /// bytes (the raw key), first 16 hex digits.
    func opensslKeyID() throws -> String {
        let out = try runOK(["/bin/sh", "-c", "openssl pkey -pubin -in \"$0\" -outform DER | tail -c 32 | sha256sum", pub])
        return String(out.prefix(16))
    }
    func publicKey() throws -> Ed25519PublicKey {
        try Ed25519PublicKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pub))))
    }
}

// MARK: - RFC 8032 and SHA-256

struct Vector: Sendable, CustomTestStringConvertible {
    let name, secret, publicKey, message, signature: String
    var testDescription: String { name }
}

@Suite struct RFC8032Tests {
    static let vectors = [
        Vector(name: "TEST 1", secret: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
               publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", message: "",
               signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        Vector(name: "TEST 2", secret: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
               publicKey: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", message: "72",
               signature: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        Vector(name: "TEST 3", secret: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
               publicKey: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", message: "af82",
               signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ]

    @Test(arguments: vectors)
    func secretGivesThePublicKeyAndTheExactSignature(_ v: Vector) throws {
        let key = try Ed25519PrivateKey(secret: hex(v.secret))
        #expect(hexString(key.publicKey.raw) == v.publicKey)
        #expect(hexString(key.sign(hex(v.message))) == v.signature)
        // Deterministic: the same again.
        #expect(key.sign(hex(v.message)) == key.sign(hex(v.message)))
        #expect(key.publicKey.id == Crypto.keyID(raw: hex(v.publicKey)))
        #expect(key.publicKey.id == hexString(Crypto.sha256(hex(v.publicKey)).prefix(8)))
    }

    @Test(arguments: vectors)
    func publicKeyVerifiesAndRefusesEveryFlippedBit(_ v: Vector) throws {
        let key = try Ed25519PublicKey(raw: hex(v.publicKey))
        #expect(key.raw == hex(v.publicKey))
        let message = hex(v.message), signature = hex(v.signature)
        #expect(key.verify(signature, of: message))
        for bit in 0..<(signature.count * 8) {
            var s = signature
            s[bit / 8] ^= 1 << (bit % 8)
            #expect(!key.verify(s, of: message), "signature bit \(bit) flipped still verifies")
        }
        for bit in 0..<(message.count * 8) {
            var m = message
            m[bit / 8] ^= 1 << (bit % 8)
            #expect(!key.verify(signature, of: m), "message bit \(bit) flipped still verifies")
        }
        #expect(!key.verify(signature, of: message + [0]))
        if !message.isEmpty { #expect(!key.verify(signature, of: Array(message.dropLast()))) }
        #expect(!key.verify(Array(signature.dropLast()), of: message))
        #expect(!key.verify(signature + [0], of: message))
        #expect(!key.verify([], of: message))
        #expect(!key.verify([UInt8](repeating: 0, count: 64), of: message))
    }

    @Test func aSignatureDoesNotVerifyWithAnotherKey() throws {
        let keys = try Self.vectors.map { try Ed25519PublicKey(raw: hex($0.publicKey)) }
        for (i, v) in Self.vectors.enumerated() {
            for (j, key) in keys.enumerated() {
                #expect(key.verify(hex(v.signature), of: hex(v.message)) == (i == j), "\(v.name) with key \(j)")
            }
        }
    }

    @Test func wrongSizedKeysAreRefused() {
        for n in [0, 31, 33, 64] {
            #expect(throws: KeyError.self) { try Ed25519PublicKey(raw: [UInt8](repeating: 1, count: n)) }
            #expect(throws: KeyError.self) { try Ed25519PrivateKey(secret: [UInt8](repeating: 1, count: n)) }
        }
    }

    @Test func sha256() {
        #expect(hexString(Crypto.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hexString(Crypto.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        // FIPS 180-2's two-block message.
        #expect(hexString(Crypto.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func pemReadingRefusesWhatIsNotAnEd25519Key() {
        #expect(throws: KeyError.self) { try Ed25519PublicKey(pem: Array("hello".utf8)) }
        #expect(throws: KeyError.self) { try Ed25519PublicKey(pem: Array("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".utf8)) }
        #expect(throws: KeyError.self) { try Ed25519PrivateKey(pem: []) }
        #expect(throws: KeyError.self) { try Ed25519PublicKey(pem: [UInt8](repeating: UInt8(ascii: "-"), count: Ed25519PublicKey.maxFileBytes + 1)) }
    }
}

// MARK: - Independent signers

@Suite struct IndependentSignerTests {
    static let device = "shop-1"
    static let ts = "1764415000"

    /// The three kinds of message, unsigned, each given a kid by the caller.
    static func messages(kid: String) -> [(Signature.Kind, String)] {
        [(.payment, #"{"id":"T1","amount":"12.50","currency":"CNY","channel":"alipay","ts":\#(ts),"kid":"\#(kid)"}"#),
         (.cmd, #"{"cmd":"say","amount":"3.20","lang":"en-IN","ts":\#(ts),"nonce":"n-0001","kid":"\#(kid)"}"#),
         (.config, #"{"audio":{"volume":8,"mute":false},"payment.max_amount":"5000","ts":\#(ts),"kid":"\#(kid)"}"#)]
    }

    /// openssl pkeyutl and Python's cryptography sign the canonical bytes;
    /// the device's verifier (the public PEM openssl wrote) takes both, and
    /// both are the device's own signature (Ed25519 is deterministic).
    @Test func opensslAndPythonSignaturesVerify() throws {
        let pair = try OpenSSLKeyPair()
        defer { pair.dir.remove() }
        let publicKey = try pair.publicKey()
        let privateKey = try Ed25519PrivateKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pair.priv))))
        #expect(privateKey.publicKey.raw == publicKey.raw)
        for (kind, text) in Self.messages(kid: publicKey.id) {
            let bytes = try canonicalBytes(kind, text)
            let file = try pair.dir.write("\(kind).txt", bytes)

            let ossl = try runOK(["/usr/bin/openssl", "pkeyutl", "-sign", "-rawin", "-inkey", pair.priv, "-in", file, "-out", file + ".sig"])
            #expect(ossl.isEmpty)
            let opensslSig = Array(try Data(contentsOf: URL(fileURLWithPath: file + ".sig")))
            #expect(opensslSig.count == 64)
            #expect(publicKey.verify(opensslSig, of: bytes), "\(kind): openssl's signature does not verify")

            let python = try runOK(["/usr/bin/python3", "-c", """
                import sys, base64
                from cryptography.hazmat.primitives.serialization import load_pem_private_key
                key = load_pem_private_key(open(sys.argv[1], "rb").read(), password=None)
                print(base64.b64encode(key.sign(open(sys.argv[2], "rb").read())).decode())
                """, pair.priv, file])
            let b64 = python.trimmingCharacters(in: .newlines)
            #expect(b64.utf8.count == 88)
            let pythonSig = try #require(Base64.decode(b64), "python's base64 is not ours: \(b64)")
            #expect(publicKey.verify(pythonSig, of: bytes), "\(kind): Python's signature does not verify")

            #expect(opensslSig == pythonSig)
            #expect(privateKey.sign(bytes) == opensslSig)
            #expect(Base64.encode(opensslSig) == b64)

            // The whole path: the signed message, as a backend sends it, read back.
            let signed = String(text.dropLast()) + #","sig":"\#(b64)"}"#
            let document = try json(signed)
            let envelope = try Signature.envelope(document, kind: kind, device: Self.device).get()
            #expect(envelope.sig == pythonSig)
            #expect(envelope.kid == publicKey.id)
            #expect(try canonicalBytes(kind, signed) == bytes)
            #expect(publicKey.verify(envelope.sig, of: try canonicalBytes(kind, signed)))
            // Another device builds other bytes: refused.
            #expect(!publicKey.verify(envelope.sig, of: try canonicalBytes(kind, signed, device: "shop-2")))
        }
    }

    @Test func keyIDIsWhatOpensslSays() throws {
        let pair = try OpenSSLKeyPair()
        defer { pair.dir.remove() }
        let expected = try pair.opensslKeyID()
        #expect(expected.utf8.count == 16 && expected.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        let publicKey = try pair.publicKey()
        #expect(publicKey.id == expected)
        #expect(Crypto.keyID(raw: publicKey.raw) == expected)
        let privateKey = try Ed25519PrivateKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: pair.priv))))
        #expect(privateKey.publicKey.id == expected)
        // The raw bytes are the DER's last 32, as openssl has them.
        let der = try runOK(["/bin/sh", "-c", "openssl pkey -pubin -in \"$0\" -outform DER | tail -c 32 | od -An -tx1 | tr -d ' \\n'", pair.pub])
        #expect(hexString(publicKey.raw) == der)
    }

    /// The format as the docs show it, written out by hand.
    @Test func canonicalTextIsPinned() throws {
        let kid = "1f2e3d4c5b6a7988"
        let payment = try canonicalBytes(.payment, #"{"id":"T1","amount":"12.50","currency":"CNY","channel":"alipay","ts":1764415000,"kid":"\#(kid)"}"#)
        #expect(String(decoding: payment, as: UTF8.self) == """
            soundbox-sig-v1
            kind=payment
            device=shop-1
            kid=1f2e3d4c5b6a7988
            ts=1764415000
            nonce=
            id=T1
            amount_minor=1250
            currency=CNY
            channel=alipay
            lang=

            """)
        #expect(Array("soundbox-sig-v1\nkind=payment\ndevice=shop-1\nkid=\(kid)\nts=1764415000\nnonce=\nid=T1\namount_minor=1250\ncurrency=CNY\nchannel=alipay\nlang=\n".utf8) == payment)

        // No kid, a lang, no currency or channel: empty lines, same order.
        let bare = try canonicalBytes(.payment, #"{"id":"T2","amount_minor":7,"ts":0,"lang":"en-IN"}"#, device: "d")
        #expect(String(decoding: bare, as: UTF8.self) == "soundbox-sig-v1\nkind=payment\ndevice=d\nkid=\nts=0\nnonce=\nid=T2\namount_minor=7\ncurrency=\nchannel=\nlang=en-IN\n")

        // cmd: every other member sorted by key; numbers as written.
        let cmd = try canonicalBytes(.cmd, #"{"cmd":"say","lang":"en-IN","amount":12.5,"ts":1764415000,"nonce":"n-1","device":"shop-1"}"#)
        #expect(String(decoding: cmd, as: UTF8.self) == "soundbox-sig-v1\nkind=cmd\ndevice=shop-1\nkid=\nts=1764415000\nnonce=n-1\namount=12.5\ncmd=say\nlang=en-IN\n")

        // config: nested objects as dotted keys, booleans as true/false.
        let config = try canonicalBytes(.config, #"{"audio":{"volume":8},"audio.mute":true,"ts":1764415000,"kid":"\#(kid)"}"#)
        #expect(String(decoding: config, as: UTF8.self) == "soundbox-sig-v1\nkind=config\ndevice=shop-1\nkid=\(kid)\nts=1764415000\nnonce=\naudio.mute=true\naudio.volume=8\n")
    }
}

// MARK: - What the signature covers

struct Tamper: Sendable, CustomTestStringConvertible {
    let name: String
    let kind: Signature.Kind
    let original: String
    let tampered: String
    /// The device the tampered message is verified on.
    var device = "shop-1"
    var testDescription: String { "\(kind) \(name)" }
}

@Suite struct CanonicalFormTests {
    static let kid = "0123456789abcdef"
    /// RFC 8032 TEST 1's key, as a stand-in backend key.
    static func backend() throws -> Ed25519PrivateKey {
        try Ed25519PrivateKey(secret: hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
    }

    @Test func keyOrderWhitespaceAndNumberSpellingDoNotMatter() throws {
        let variants = [
            #"{"id":"T1","amount":"12.50","currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef"}"#,
            #"{"id":"T1","amount":12.5,"currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef"}"#,
            #"{"id":"T1","amount":12.50,"currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef"}"#,
            #"{"id":"T1","amount":"12.5","currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef"}"#,
            #"{"amount_minor":1250,"kid":"0123456789abcdef","ts":1764415000,"channel":"alipay","currency":"CNY","id":"T1"}"#,
            "{\n  \"kid\" : \"0123456789abcdef\",\r\n\t\"ts\" : 1764415000 , \"channel\":\"alipay\",\n \"currency\" :\"CNY\", \"amount_minor\" : 1250,\"id\":\"T1\"\n}\n",
            // The message's own device (this one), a null amount_minor, unknown fields: not covered.
            #"{"device":"shop-1","id":"T1","amount":"12.50","amount_minor":null,"currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef","memo":"x"}"#,
        ]
        let first = try canonicalBytes(.payment, variants[0])
        let signature = try Self.backend().sign(first)
        for text in variants {
            let bytes = try canonicalBytes(.payment, text)
            #expect(bytes == first, "\(text)")
            #expect(try Self.backend().publicKey.verify(signature, of: bytes))
        }

        let cmds = [#"{"cmd":"say","amount":"12.50","lang":"en-IN","ts":5,"nonce":"abc"}"#,
                    " { \"nonce\" : \"abc\" ,\n\"ts\":5, \"lang\":\"en-IN\",\t\"amount\":\"12.50\", \"cmd\":\"say\" } "]
        #expect(try canonicalBytes(.cmd, cmds[0]) == canonicalBytes(.cmd, cmds[1]))
        let configs = [#"{"audio":{"volume":8,"mute":false},"ts":5}"#, #"{"ts":5,"audio":{"mute":false,"volume":8}}"#,
                       #"{"audio.mute":false,"audio.volume":8,"ts":5}"#, #"{"audio.volume":8,"audio":{"mute":false},"ts":5}"#]
        for c in configs { #expect(try canonicalBytes(.config, c) == canonicalBytes(.config, configs[0]), "\(c)") }
    }

    static let payment = #"{"id":"T1","amount":"12.50","currency":"CNY","channel":"alipay","ts":1764415000,"kid":"0123456789abcdef","lang":"zh-CN"}"#
    static let cmd = #"{"cmd":"say","amount":"3.20","lang":"en-IN","opts":{"loud":true},"ts":1764415000,"nonce":"n-1","kid":"0123456789abcdef"}"#
    static let config = #"{"audio":{"volume":8,"mute":false},"payment.max_amount":"5000","ts":1764415000,"kid":"0123456789abcdef"}"#

    static func replacing(_ text: String, _ a: String, _ b: String) -> String {
        precondition(text.contains(a), "\(a) not in \(text)")
        return text.replacingOccurrences(of: a, with: b)
    }

    static let tampers: [Tamper] = [
        Tamper(name: "amount", kind: .payment, original: payment, tampered: replacing(payment, #""12.50""#, #""12.51""#)),
        Tamper(name: "amount x10", kind: .payment, original: payment, tampered: replacing(payment, #""amount":"12.50""#, #""amount_minor":12500"#)),
        Tamper(name: "currency", kind: .payment, original: payment, tampered: replacing(payment, "CNY", "USD")),
        Tamper(name: "currency removed", kind: .payment, original: payment, tampered: replacing(payment, #""currency":"CNY","#, "")),
        Tamper(name: "channel", kind: .payment, original: payment, tampered: replacing(payment, "alipay", "wechat")),
        Tamper(name: "channel removed", kind: .payment, original: payment, tampered: replacing(payment, #""channel":"alipay","#, "")),
        Tamper(name: "device", kind: .payment, original: payment, tampered: payment, device: "shop-2"),
        Tamper(name: "id", kind: .payment, original: payment, tampered: replacing(payment, #""T1""#, #""T2""#)),
        Tamper(name: "ts", kind: .payment, original: payment, tampered: replacing(payment, "1764415000", "1764415001")),
        Tamper(name: "kid", kind: .payment, original: payment, tampered: replacing(payment, "0123456789abcdef", "0123456789abcdee")),
        Tamper(name: "kid removed", kind: .payment, original: payment, tampered: replacing(payment, #","kid":"0123456789abcdef""#, "")),
        Tamper(name: "lang", kind: .payment, original: payment, tampered: replacing(payment, "zh-CN", "en-IN")),
        Tamper(name: "lang removed", kind: .payment, original: payment, tampered: replacing(payment, #","lang":"zh-CN""#, "")),
        Tamper(name: "nonce added", kind: .payment, original: payment, tampered: replacing(payment, #""id""#, #""nonce":"x","id""#)),

        Tamper(name: "cmd", kind: .cmd, original: cmd, tampered: replacing(cmd, #""say""#, #""test""#)),
        Tamper(name: "amount", kind: .cmd, original: cmd, tampered: replacing(cmd, "3.20", "3.21")),
        Tamper(name: "amount spelling", kind: .cmd, original: cmd, tampered: replacing(cmd, #""3.20""#, "3.2")),
        Tamper(name: "lang", kind: .cmd, original: cmd, tampered: replacing(cmd, "en-IN", "zh-CN")),
        Tamper(name: "nested member", kind: .cmd, original: cmd, tampered: replacing(cmd, "true", "false")),
        Tamper(name: "member added", kind: .cmd, original: cmd, tampered: replacing(cmd, #""cmd""#, #""id":"T9","cmd""#)),
        Tamper(name: "member removed", kind: .cmd, original: cmd, tampered: replacing(cmd, #""lang":"en-IN","#, "")),
        Tamper(name: "key renamed", kind: .cmd, original: cmd, tampered: replacing(cmd, #""lang""#, #""lanh""#)),
        Tamper(name: "nonce", kind: .cmd, original: cmd, tampered: replacing(cmd, "n-1", "n-2")),
        Tamper(name: "ts", kind: .cmd, original: cmd, tampered: replacing(cmd, "1764415000", "1764415001")),
        Tamper(name: "kid", kind: .cmd, original: cmd, tampered: replacing(cmd, "0123456789abcdef", "f123456789abcdef")),
        Tamper(name: "device", kind: .cmd, original: cmd, tampered: cmd, device: "shop-10"),

        Tamper(name: "value", kind: .config, original: config, tampered: replacing(config, #""volume":8"#, #""volume":9"#)),
        Tamper(name: "bool", kind: .config, original: config, tampered: replacing(config, "false", "true")),
        Tamper(name: "string value", kind: .config, original: config, tampered: replacing(config, #""5000""#, #""50000""#)),
        Tamper(name: "key", kind: .config, original: config, tampered: replacing(config, "payment.max_amount", "payment.min_amount")),
        Tamper(name: "nested key", kind: .config, original: config, tampered: replacing(config, "volume", "volumes")),
        Tamper(name: "member added", kind: .config, original: config, tampered: replacing(config, #""ts""#, #""voice.lang":"en-IN","ts""#)),
        Tamper(name: "member removed", kind: .config, original: config, tampered: replacing(config, #""payment.max_amount":"5000","#, "")),
        Tamper(name: "ts", kind: .config, original: config, tampered: replacing(config, "1764415000", "1764414999")),
        Tamper(name: "kid", kind: .config, original: config, tampered: replacing(config, "0123456789abcdef", "0123456789abcdea")),
        Tamper(name: "device", kind: .config, original: config, tampered: config, device: "shop"),
    ]

    /// Each covered field, changed: other bytes, and the original's
    /// signature no longer verifies.
    @Test(arguments: tampers)
    func tamperingBreaksTheSignature(_ t: Tamper) throws {
        let key = try Self.backend()
        let original = try canonicalBytes(t.kind, t.original)
        let signature = key.sign(original)
        #expect(key.publicKey.verify(signature, of: original))
        let tampered = try canonicalBytes(t.kind, t.tampered, device: t.device)
        #expect(tampered != original)
        #expect(!key.publicKey.verify(signature, of: tampered))
    }

    /// Every content member of a cmd and a config, one at a time: its value
    /// changed, or the member dropped, changes the bytes.
    @Test(arguments: [Signature.Kind.cmd, .config])
    func everyContentMemberIsCovered(_ kind: Signature.Kind) throws {
        let text = kind == .cmd ? Self.cmd : Self.config
        guard case .object(let members) = try json(text) else { throw TestFailure("not an object") }
        let original = try canonicalBytes(kind, text)
        let content = try Signature.content(try json(text)).get()
        #expect(!content.isEmpty)
        #expect(!content.contains { Signature.envelopeFields.contains($0.0) })
        var checked = 0
        for (i, (key, value)) in members.enumerated() where !Signature.envelopeFields.contains(key) {
            let changed: JSONValue
            switch value {
            case .string(let s): changed = .string(s + "x")
            case .number(let n): changed = .number(n + "1")
            case .bool(let b): changed = .bool(!b)
            case .object(let inner): changed = .object(inner + [("extra", .string("1"))])
            default: throw TestFailure("unexpected \(value)")
            }
            var edited = members
            edited[i].1 = changed
            #expect(try canonicalBytes(kind, JSONValue.object(edited).text) != original, "\(key) changed")
            var dropped = members
            dropped.remove(at: i)
            #expect(try canonicalBytes(kind, JSONValue.object(dropped).text) != original, "\(key) dropped")
            checked += 1
        }
        #expect(checked == (kind == .cmd ? 4 : 2))
    }

    /// The signature's own members are not content; `sig` itself is never covered.
    @Test func envelopeMembersAreNotContent() throws {
        let content = try Signature.content(try json(#"{"a":"1","sig":"x","kid":"y","device":"z","ts":1,"nonce":"n","b":{"sig":"s"}}"#)).get()
        #expect(content.map(\.0) == ["a", "b.sig"])
        let withSig = try canonicalBytes(.cmd, String(Self.cmd.dropLast()) + #","sig":"\#(Base64.encode([UInt8](repeating: 7, count: 64)))"}"#)
        #expect(withSig == (try canonicalBytes(.cmd, Self.cmd)))
    }

    @Test func contentIsSortedBytewise() throws {
        let content = try Signature.content(try json(#"{"ä":"1","a0":"2","B":"3","a":{"b":"4"},"a.":"5","_":"6"}"#)).get()
        #expect(content.map(\.0) == ["B", "_", "a.", "a.b", "a0", "ä"])
    }

    @Test(arguments: [#"{"cmd":"say","list":[1,2]}"#, #"{"cmd":"say","x":null}"#, #"{"a":{"b":[]}}"#, "[1]", #""cmd""#])
    func contentRefusesArraysNullAndNonObjects(_ text: String) throws {
        let result = Signature.content(try json(text))
        guard case .failure(let p) = result else { Issue.record("\(text) gave content \(result)"); return }
        #expect(p.kind == .bad)
        #expect(p.detail?.isEmpty == false)
        #expect(p.description.hasPrefix("signature: bad: "))
    }

    /// One line per field: a value that holds a newline (or any control
    /// character), or a key that holds '=', could make two messages share
    /// bytes, so it cannot be signed.
    @Test(arguments: [
        #"{"cmd":"say","x":"a\nkind=payment"}"#, #"{"cmd":"say","x":"a\r"}"#, #"{"cmd":"say","x":"a\tb"}"#,
        #"{"cmd":"say","x":"\u0000"}"#, #"{"cmd":"say","x":"\u007f"}"#, #"{"cmd":"say","x":"\u001b[2J"}"#,
        #"{"cmd":"say","a\nb":"1"}"#, #"{"cmd":"say","a=b":"c"}"#, #"{"cmd":"say","x":{"y=z":"1"}}"#, #"{"cmd":"say","=":""}"#,
    ])
    func canonicalRefusesControlCharactersAndEqualsInKeys(_ text: String) throws {
        var members: [(String, JSONValue)]
        guard case .object(let m) = try json(text) else { throw TestFailure("not an object") }
        members = m
        members += [("ts", .number("1")), ("nonce", .string("n")), ("sig", .string(placeholderSig))]
        let document = JSONValue.object(members)
        let content = try Signature.content(document).get()
        let envelope = try Signature.envelope(document, kind: .cmd, device: "shop-1").get()
        let result = Signature.canonical(kind: .cmd, device: "shop-1", envelope: envelope, content: content)
        guard case .failure(let p) = result else { Issue.record("\(text) was signable"); return }
        #expect(p.kind == .bad)
        #expect(p.description.hasPrefix("signature: bad: "))
        #expect(!p.description.utf8.contains { $0 < 0x20 }, "\(p.description)")
    }

    @Test func equalsInAValueIsFineAndDiffersFromEqualsInAKey() throws {
        let value = try canonicalBytes(.config, #"{"a":"b=c","ts":1}"#)
        #expect(String(decoding: value, as: UTF8.self).hasSuffix("\na=b=c\n"))
        #expect(throws: SignatureProblem.self) { try canonicalBytes(.config, #"{"a=b":"c","ts":1}"#) }
        // Unicode is not a control character.
        let unicode = try canonicalBytes(.config, #"{"voice.greeting":"收款\u2028到账","ts":1}"#)
        #expect(String(decoding: unicode, as: UTF8.self).hasSuffix("\nvoice.greeting=收款\u{2028}到账\n"))
    }

    @Test func aPaymentFieldWithAControlCharacterCannotBeSigned() throws {
        #expect(throws: SignatureProblem.self) { try canonicalBytes(.payment, #"{"id":"T1","amount":"1","channel":"alipay\nkind=cmd","ts":1}"#) }
        // The device id is this device's own, but it is checked too.
        #expect(throws: SignatureProblem.self) { try canonicalBytes(.payment, #"{"id":"T1","amount":"1","ts":1}"#, device: "shop\n1") }
    }

    /// The header cannot be forged from content: a cmd member named like a
    /// header field is a line after the header, so other bytes.
    @Test func contentCannotImpersonateTheHeader() throws {
        let plain = try canonicalBytes(.cmd, #"{"cmd":"test","ts":5,"nonce":"n"}"#)
        let spoof = try canonicalBytes(.cmd, #"{"cmd":"test","kind":"payment","ts":5,"nonce":"n"}"#)
        #expect(plain != spoof)
        let text = String(decoding: spoof, as: UTF8.self)
        #expect(text.hasPrefix("soundbox-sig-v1\nkind=cmd\n"))
        #expect(text.hasSuffix("\ncmd=test\nkind=payment\n"))
    }
}

// MARK: - The envelope

struct Hostile: Sendable, CustomTestStringConvertible {
    let name: String
    let kind: Signature.Kind
    /// Members to set (nil: remove).
    let members: [(String, JSONValue?)]
    let expected: SignatureProblem.Class
    /// Text the detail must not contain (an echoed hostile value).
    var notEchoing: String? = nil
    var testDescription: String { name }
    init(_ name: String, _ kind: Signature.Kind, _ members: [(String, JSONValue?)], _ expected: SignatureProblem.Class = .bad, notEchoing: String? = nil) {
        self.name = name; self.kind = kind; self.members = members; self.expected = expected; self.notEchoing = notEchoing
    }
    init(_ name: String, _ members: [(String, JSONValue?)], _ expected: SignatureProblem.Class = .bad, notEchoing: String? = nil) {
        self.init(name, .payment, members, expected, notEchoing: notEchoing)
    }
}

@Suite struct EnvelopeTests {
    static let sigBytes = (0..<64).map { UInt8($0 * 3 & 0xFF) }
    static let goodSig = Base64.encode(sigBytes)

    static func document(_ kind: Signature.Kind, _ changes: [(String, JSONValue?)]) -> JSONValue {
        var members: [(String, JSONValue)] = [("id", .string("T1")), ("amount", .string("1")), ("sig", .string(goodSig)),
                                              ("kid", .string("0123456789abcdef")), ("device", .string("shop-1")), ("ts", .number("1764415000"))]
        if kind == .cmd { members.append(("nonce", .string("n-1"))) }
        for (k, v) in changes {
            if let i = members.firstIndex(where: { $0.0 == k }) {
                if let v { members[i].1 = v } else { members.remove(at: i) }
            } else if let v {
                members.append((k, v))
            }
        }
        return .object(members)
    }

    @Test(arguments: Signature.Kind.allCases)
    func aWellFormedEnvelope(_ kind: Signature.Kind) throws {
        let e = try Signature.envelope(Self.document(kind, []), kind: kind, device: "shop-1").get()
        #expect(e == Signature.Envelope(sig: Self.sigBytes, kid: "0123456789abcdef", device: "shop-1", ts: 1764415000, nonce: kind == .cmd ? "n-1" : nil))
    }

    @Test func optionalMembersMayBeAbsentOrNull() throws {
        for absent in [nil, JSONValue.null] {
            let e = try Signature.envelope(Self.document(.payment, [("kid", absent), ("device", absent), ("nonce", absent)]), kind: .payment, device: "shop-1").get()
            #expect(e.kid == nil && e.device == nil && e.nonce == nil && e.ts == 1764415000)
            _ = try Signature.envelope(Self.document(.config, [("kid", absent), ("device", absent)]), kind: .config, device: "x").get()
        }
        // Bounds of ts and nonce that are allowed.
        for ts in ["0", String(PaymentMessage.maxTimestamp)] {
            #expect(try Signature.envelope(Self.document(.payment, [("ts", .number(ts))]), kind: .payment, device: "shop-1").get().ts == Int64(ts))
        }
        let nonce = String(repeating: "~", count: 64)
        #expect(try Signature.envelope(Self.document(.cmd, [("nonce", .string(nonce))]), kind: .cmd, device: "shop-1").get().nonce == nonce)
        #expect(try Signature.envelope(Self.document(.cmd, [("nonce", .string("!"))]), kind: .cmd, device: "shop-1").get().nonce == "!")
        // A payment or config may carry a nonce; it is then covered.
        #expect(try Signature.envelope(Self.document(.payment, [("nonce", .string("p"))]), kind: .payment, device: "shop-1").get().nonce == "p")
    }

    static let hostile: [Hostile] = {
        func s(_ t: String) -> JSONValue { .string(t) }
        let b64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let urlSig = String(goodSig.dropLast(4)) + "-_A="   // URL alphabet
        var cases: [Hostile] = [
            Hostile("sig missing", [("sig", nil)], .missing),
            Hostile("sig null", [("sig", .null)], .missing),
            Hostile("cmd sig missing", .cmd, [("sig", nil)], .missing),
            Hostile("sig number", [("sig", .number("12"))]),
            Hostile("sig object", [("sig", .object([("b64", s(goodSig))]))]),
            Hostile("sig array", [("sig", .array([s(goodSig)]))]),
            Hostile("sig bool", [("sig", .bool(true))]),
            Hostile("sig empty", [("sig", s(""))]),
            Hostile("sig 87", [("sig", s(String(goodSig.dropLast())))]),
            Hostile("sig 89", [("sig", s(goodSig + "="))]),
            Hostile("sig 88 URL alphabet", [("sig", s(urlSig))]),
            Hostile("sig 88 with '-'", [("sig", s("-" + goodSig.dropFirst()))]),
            Hostile("sig 88 with '_'", [("sig", s(String(goodSig.prefix(40)) + "_" + goodSig.dropFirst(41)))]),
            Hostile("sig 88 with a space", [("sig", s(String(goodSig.prefix(40)) + " " + goodSig.dropFirst(41)))]),
            Hostile("sig 88 with a newline", [("sig", s(String(goodSig.prefix(76)) + "\n" + goodSig.dropFirst(77)))]),
            Hostile("sig 86+2 spaces", [("sig", s(String(goodSig.dropLast(2)) + "  "))]),
            Hostile("sig 4 KiB", [("sig", s(String(repeating: "A", count: 4096)))]),
            Hostile("sig 88 é", [("sig", s(String(repeating: "é", count: 88)))]),
            Hostile("sig 44 é (88 bytes)", [("sig", s(String(repeating: "é", count: 44)))]),
            Hostile("sig NUL", [("sig", s(String(repeating: "\u{0}", count: 88)))]),
            Hostile("sig 66 bytes", [("sig", s(String(repeating: "A", count: 88)))]),
            Hostile("sig 65 bytes", [("sig", s(String(repeating: "A", count: 87) + "="))]),
            Hostile("sig 64 bytes, non-canonical padding", [("sig", s(String(repeating: "A", count: 85) + "B=="))]),
            Hostile("sig '=' inside", [("sig", s(String(repeating: "A", count: 40) + "==" + String(repeating: "A", count: 46)))]),
            Hostile("sig padded 3", [("sig", s(String(repeating: "A", count: 85) + "==="))]),

            Hostile("kid uppercase", [("kid", s("0123456789ABCDEF"))]),
            Hostile("kid 15", [("kid", s("0123456789abcde"))]),
            Hostile("kid 17", [("kid", s("0123456789abcdef0"))]),
            Hostile("kid empty", [("kid", s(""))]),
            Hostile("kid not hex", [("kid", s("0123456789abcdeg"))]),
            Hostile("kid unicode", [("kid", s("０１２３４５６７８９ａｂｃｄｅｆ"))]),
            Hostile("kid 8 é (16 bytes)", [("kid", s(String(repeating: "é", count: 8)))]),
            Hostile("kid space", [("kid", s("0123456789abcde "))]),
            Hostile("kid number", [("kid", .number("1234567890123456"))]),
            Hostile("kid object", [("kid", .object([]))]),
            Hostile("kid bool", [("kid", .bool(false))]),

            Hostile("device other", [("device", s("shop-2"))], .wrongDevice),
            Hostile("device case", [("device", s("SHOP-1"))], .wrongDevice),
            Hostile("device empty", [("device", s(""))], .wrongDevice),
            Hostile("device prefix", [("device", s("shop-1 "))], .wrongDevice),
            Hostile("device escape", [("device", s("\u{1b}[31mshop-1"))], .wrongDevice, notEchoing: "\u{1b}"),
            Hostile("device newline", [("device", s("shop-2\nkind=payment"))], .wrongDevice, notEchoing: "kind=payment"),
            Hostile("device DEL", [("device", s("shop-2\u{7f}"))], .wrongDevice, notEchoing: "\u{7f}"),
            Hostile("device long", [("device", s(String(repeating: "x", count: 5000)))], .wrongDevice, notEchoing: String(repeating: "x", count: 65)),
            Hostile("device unicode", [("device", s("商店-1"))], .wrongDevice, notEchoing: "商店"),
            Hostile("device number", [("device", .number("1"))]),
            Hostile("device object", [("device", .object([("id", s("shop-1"))]))]),
            Hostile("cmd device other", .cmd, [("device", s("shop-2"))], .wrongDevice),
            Hostile("config device other", .config, [("device", s("shop-2"))], .wrongDevice),

            Hostile("ts missing", [("ts", nil)]),
            Hostile("ts null", [("ts", .null)]),
            Hostile("ts negative", [("ts", .number("-1"))]),
            Hostile("ts fractional", [("ts", .number("1764415000.5"))]),
            Hostile("ts .0", [("ts", .number("1764415000.0"))]),
            Hostile("ts exponent", [("ts", .number("1.7e9"))]),
            Hostile("ts exponent integer", [("ts", .number("1e9"))]),
            Hostile("ts after 2100", [("ts", .number(String(PaymentMessage.maxTimestamp + 1)))]),
            Hostile("ts huge", [("ts", .number("99999999999999999999999999"))]),
            Hostile("ts Int64.max", [("ts", .number(String(Int64.max)))]),
            Hostile("ts Int64.min", [("ts", .number(String(Int64.min)))]),
            Hostile("ts string", [("ts", s("1764415000"))]),
            Hostile("ts bool", [("ts", .bool(true))]),
            Hostile("ts object", [("ts", .object([]))]),
            Hostile("cmd ts missing", .cmd, [("ts", nil)]),
            Hostile("config ts missing", .config, [("ts", nil)]),

            Hostile("cmd nonce missing", .cmd, [("nonce", nil)]),
            Hostile("cmd nonce null", .cmd, [("nonce", .null)]),
            Hostile("nonce empty", .cmd, [("nonce", s(""))]),
            Hostile("nonce space", .cmd, [("nonce", s("a b"))]),
            Hostile("nonce tab", .cmd, [("nonce", s("a\tb"))]),
            Hostile("nonce newline", .cmd, [("nonce", s("a\nkind=payment"))]),
            Hostile("nonce 65", .cmd, [("nonce", s(String(repeating: "n", count: 65)))]),
            Hostile("nonce 4 KiB", .cmd, [("nonce", s(String(repeating: "n", count: 4096)))]),
            Hostile("nonce unicode", .cmd, [("nonce", s("нонс"))]),
            Hostile("nonce number", .cmd, [("nonce", .number("12345"))]),
            Hostile("payment nonce with a space", [("nonce", s("a b"))]),
            Hostile("config nonce too long", .config, [("nonce", s(String(repeating: "n", count: 65)))]),
        ]
        // Every character base64 does not have, at the start of an 88-character sig.
        for c in ["!", "*", ".", ",", ":", "\\", "\"", "~", "\u{7f}", "\u{0}"] where !b64.contains(Array(c.utf8)[0]) {
            cases.append(Hostile("sig with \(c.debugDescription)", [("sig", s(c + goodSig.dropFirst()))]))
        }
        return cases
    }()

    /// Each hostile value: its own class, a detail that says why (none for
    /// `missing`), "signature: " first, and nothing unprintable or huge echoed.
    @Test(arguments: hostile)
    func hostileValuesAreRefused(_ h: Hostile) {
        let result = Signature.envelope(Self.document(h.kind, h.members), kind: h.kind, device: "shop-1")
        guard case .failure(let p) = result else { Issue.record("\(h.name) accepted: \(result)"); return }
        #expect(p.kind == h.expected)
        #expect(p.description.hasPrefix("signature: \(h.expected.rawValue)"))
        if h.expected == .missing {
            #expect(p.description == "signature: missing")
        } else {
            let detail = p.detail ?? ""
            #expect(!detail.isEmpty)
            #expect(p.description == "signature: \(h.expected.rawValue): \(detail)")
        }
        #expect(p.description.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }, "\(p.description.debugDescription)")
        #expect(p.description.utf8.count < 200, "\(p.description.utf8.count) bytes")
        if let echo = h.notEchoing { #expect(!p.description.contains(echo)) }
        // A member is named in its detail.
        if h.expected == .bad, let member = h.members.first?.0 { #expect(p.detail?.contains(member) == true, "\(p.description)") }
    }

    @Test func wrongDeviceNamesBothDevicesWhenPrintable() throws {
        let result = Signature.envelope(Self.document(.payment, [("device", .string("shop-2"))]), kind: .payment, device: "shop-1")
        #expect(result == .failure(SignatureProblem(.wrongDevice, "the message is for device 'shop-2', this is 'shop-1'")))
    }

    @Test func sigIsCheckedBeforeTheOtherMembers() {
        let result = Signature.envelope(Self.document(.cmd, [("sig", nil), ("ts", nil), ("nonce", nil), ("kid", .number("1"))]), kind: .cmd, device: "shop-1")
        #expect(result == .failure(SignatureProblem(.missing, nil)))
    }

    @Test func aNonObjectHasNoSignature() {
        for d in [JSONValue.array([]), .string("x"), .null, .number("1")] {
            #expect(Signature.envelope(d, kind: .payment, device: "shop-1") == .failure(SignatureProblem(.missing, nil)))
        }
    }

    @Test func problemDescriptions() {
        #expect(SignatureProblem(.unknownKey, "no key with id 0123456789abcdef on this device").description
                == "signature: unknown key: no key with id 0123456789abcdef on this device")
        #expect(SignatureProblem(.stale, nil).description == "signature: stale")
        #expect(SignatureProblem.Class.allCases.map(\.rawValue) == ["missing", "bad", "unknown key", "wrong device", "stale"])
    }
}

// MARK: - Base64

@Suite struct Base64Tests {
    @Test func roundTripsEveryLengthAndAgreesWithFoundation() {
        var rng = SplitMix64(seed: 0x5EED_B64)
        for length in 0...70 {
            for _ in 0..<8 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let text = Base64.encode(bytes)
                #expect(text.utf8.count == (length + 2) / 3 * 4)
                #expect(text == Data(bytes).base64EncodedString(), "length \(length)")
                #expect(Base64.decode(text) == bytes, "length \(length)")
            }
        }
        // The extremes of every byte.
        for b in [[UInt8](repeating: 0, count: 64), [UInt8](repeating: 0xFF, count: 64), (0...255).map { UInt8($0) }] {
            #expect(Base64.decode(Base64.encode(b)) == b)
            #expect(Base64.encode(b) == Data(b).base64EncodedString())
        }
    }

    @Test func rfc4648Vectors() {
        let vectors = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64.encode([0xFB, 0xFF, 0xBF]) == "+/+/")
        #expect(Base64.decode("+/+/") == [0xFB, 0xFF, 0xBF])
    }

    @Test(arguments: [
        "Zh==", "Zm9=", "Zm+=", "AB==", "AAB=", "//==", "A/==", "AA/=",     // padding drops bits that are not zero
        "Zg", "Zg=", "Zm8", "Z", "Zm9vY", "Zm9vYg=",                       // missing padding
        "Zg==Zg==", "Zm8=Zm9v", "Z=g=", "Z===", "====", "=AAA", "AA=A",    // '=' in the middle or too much
        "Zg===", "Zm9vYg===", "Zm9v=",
        "Zm-v", "Zm_v", "-_-_",                                            // URL alphabet
        " Zm9v", "Zm9v ", "Zm 9v", "Zm9v\n", "Zm9v\r\n", "\tZm9v", "Zm\n9v", // whitespace
        "Zm9é", "Zé=", "Ｚｍ９ｖ", "Zm9\u{0}",                             // not ASCII / NUL
    ])
    func strictDecodingRefuses(_ text: String) {
        #expect(Base64.decode(text) == nil, "\(text.debugDescription)")
    }

    /// The last character before padding may only carry zero bits where the
    /// padding drops them: 4 of 64 characters after "==", 16 after "=".
    @Test func onlyCanonicalPaddingBitsAreAccepted() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var twoPad = 0, onePad = 0
        for (i, c) in alphabet.enumerated() {
            let a = Base64.decode("Q\(c)==")
            #expect((a != nil) == (i % 16 == 0), "Q\(c)==")
            if a != nil { twoPad += 1 }
            let b = Base64.decode("QU\(c)=")
            #expect((b != nil) == (i % 4 == 0), "QU\(c)=")
            if b != nil { onePad += 1 }
        }
        #expect(twoPad == 4 && onePad == 16)
    }

    /// Whatever decodes is canonical: encoding it again gives the same text.
    @Test func whateverDecodesIsCanonical() {
        var rng = SplitMix64(seed: 42)
        let chars = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/==-_ \n".utf8)
        var accepted = 0
        for _ in 0..<20_000 {
            let n = 4 * (1 + rng.below(3)) - (rng.below(4) == 0 ? rng.below(2) : 0)
            var text = (0..<n).map { _ in chars[rng.below(66)] }
            // Often a well-placed padding, so that the accepting path runs too.
            if rng.below(2) == 0, n % 4 == 0 {
                let pad = rng.below(3)
                for k in 0..<pad { text[n - 1 - k] = UInt8(ascii: "=") }
            }
            if rng.below(10) == 0 { text[rng.below(n)] = chars[64 + rng.below(chars.count - 64)] }
            let s = String(decoding: text, as: UTF8.self)
            if let bytes = Base64.decode(s) {
                accepted += 1
                #expect(Base64.encode(bytes) == s, "\(s) decodes but is not canonical")
                #expect(Data(base64Encoded: s).map { Array($0) } == bytes, "Foundation reads \(s) otherwise")
            }
        }
        #expect(accepted > 1000)
    }
}
