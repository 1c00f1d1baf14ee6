/// Signed messages (docs/signing.md): what a signature covers and how a
/// message carries it. Pure: the Ed25519 verification itself is OpenSSL's
/// (`SoundboxCrypto`), called by the daemon with `Signature.canonical`'s bytes.
///
/// A signed message carries, besides its own fields:
///
/// | field | what |
/// |---|---|
/// | `sig` | the Ed25519 signature of the canonical bytes, standard base64 (88 characters) |
/// | `kid` | optional: the key's id (16 lowercase hex digits); without it every key is tried |
/// | `device` | optional: the device it is for; another device's is refused as `wrong device` |
/// | `ts` | required: Unix seconds when it was made (a payment's own `ts`) |
/// | `nonce` | `cmd` only, required: 1–64 printable ASCII, never used twice |
///
/// The signature covers lines of `name=value` (UTF-8, each ending in
/// "\n"), not the JSON text, so key order, whitespace and number spelling
/// do not matter:
///
///     soundbox-sig-v1
///     kind=payment            (payment, cmd or config)
///     device=shop-1           (this device's id, whatever the message says)
///     kid=1f2e3d4c5b6a7988    (empty when the message has none)
///     ts=1764415000
///     nonce=                  (empty but for cmd)
///     ...content...
///
/// Content of a payment, in this order: `id`, `amount_minor` (the amount in
/// minor units, however the message wrote it), `currency`, `channel`,
/// `lang` (each as given, empty when absent). Of a cmd or a config: every
/// other member, nested objects flattened to dotted keys, sorted by key
/// (bytewise), as `key=value` (strings as they are, numbers as written,
/// booleans `true`/`false`).
public enum Signature {
    public static let version = "soundbox-sig-v1"
    /// The members that carry the signature, never part of a cmd's or config's content.
    public static let envelopeFields = ["sig", "kid", "device", "ts", "nonce"]

    public enum Kind: String, Sendable, CaseIterable {
        case payment, cmd, config
    }

    /// Whether a device demands signatures (`payment.signing`).
    public enum Mode: String, Sendable, CaseIterable {
        /// Nothing is verified (today's backends keep working).
        case off
        /// Payments, cmd and config messages must carry a valid `sig`.
        case required
    }

    /// The signature members of one message, checked for shape.
    public struct Envelope: Sendable, Equatable {
        public var sig: [UInt8]
        public var kid: String?
        public var device: String?
        public var ts: Int64
        public var nonce: String?

        public init(sig: [UInt8], kid: String?, device: String?, ts: Int64, nonce: String?) {
            self.sig = sig; self.kid = kid; self.device = device; self.ts = ts; self.nonce = nonce
        }
    }

    /// Reads the envelope of `document` (a JSON object) for a message of
    /// `kind` meant for `device`: the shape of every member, and `device`.
    /// Whether the signature verifies, whose key and how old are the
    /// verifier's to say.
    public static func envelope(_ document: JSONValue, kind: Kind, device: String) -> Result<Envelope, SignatureProblem> {
        func bad(_ why: String) -> Result<Envelope, SignatureProblem> { .failure(.init(.bad, why)) }
        let sig: [UInt8]
        switch document["sig"] {
        case nil, .null?: return .failure(.init(.missing, nil))
        case .string(let text)?:
            guard text.utf8.count == 88 else {
                let n = text.unicodeScalars.count
                return bad("sig must be 88 characters of base64 (64 bytes), not \(n) \(n == 1 ? "character" : "characters")")
            }
            guard let bytes = Base64.decode(text), bytes.count == 64 else { return bad("sig is not standard base64 of 64 bytes") }
            sig = bytes
        case let other?: return bad("sig must be a string of base64, not \(other.kindDescription)")
        }
        var kid: String?
        switch document["kid"] {
        case nil, .null?: break
        case .string(let text)?:
            guard text.utf8.count == 16, text.utf8.allSatisfy(isLowerHex) else {
                return bad("kid must be a key id: 16 lowercase hex digits (soundboxctl key id FILE)")
            }
            kid = text
        case let other?: return bad("kid must be a string, not \(other.kindDescription)")
        }
        var target: String?
        switch document["device"] {
        case nil, .null?: break
        case .string(let text)?:
            guard text == device else {
                let shown = isPrintable(text) && text.utf8.count <= 64 ? " '\(text)'" : ""
                return .failure(.init(.wrongDevice, "the message is for device\(shown), this is '\(device)'"))
            }
            target = text
        case let other?: return bad("device must be a string, not \(other.kindDescription)")
        }
        let ts: Int64
        switch document["ts"] {
        case nil, .null?: return bad("ts is missing: a signed message says when it was made (Unix seconds)")
        case .number(let text)?:
            guard let seconds = Int64(text), seconds >= 0, seconds <= PaymentMessage.maxTimestamp else {
                return bad("ts must be whole Unix seconds between 0 and \(PaymentMessage.maxTimestamp)")
            }
            ts = seconds
        case let other?: return bad("ts must be a number (Unix seconds), not \(other.kindDescription)")
        }
        var nonce: String?
        switch document["nonce"] {
        case nil, .null?:
            if kind == .cmd { return bad("nonce is missing: a signed cmd carries a nonce used only once") }
        case .string(let text)?:
            guard Payment.problem(withID: text) == nil else { return bad("nonce must be 1-64 printable ASCII characters without spaces") }
            nonce = text
        case let other?: return bad("nonce must be a string, not \(other.kindDescription)")
        }
        return .success(Envelope(sig: sig, kid: kid, device: target, ts: ts, nonce: nonce))
    }

    /// A payment's content lines (see the type's comment), from the parsed
    /// payment and its document (for `channel` as the backend wrote it).
    public static func paymentContent(_ payment: Payment, document: JSONValue) -> [(String, String)] {
        func text(_ key: String) -> String {
            if case .string(let s)? = document[key] { return s }
            return ""
        }
        return [("id", payment.id), ("amount_minor", String(payment.amount.minorUnits)),
                ("currency", payment.currency ?? ""), ("channel", text("channel")), ("lang", payment.lang ?? "")]
    }

    /// A cmd's or config's content: every member but the envelope's,
    /// flattened and sorted.
    public static func content(_ document: JSONValue) -> Result<[(String, String)], SignatureProblem> {
        switch flatten(document, excluding: envelopeFields) {
        case .failure(let e): .failure(.init(.bad, e.description))
        case .success(let pairs): .success(pairs.sorted { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) })
        }
    }

    /// The bytes the signature covers.
    public static func canonical(kind: Kind, device: String, envelope e: Envelope, content: [(String, String)]) -> Result<[UInt8], SignatureProblem> {
        var lines = [version]
        let header = [("kind", kind.rawValue), ("device", device), ("kid", e.kid ?? ""), ("ts", String(e.ts)), ("nonce", e.nonce ?? "")]
        for (k, v) in header + content {
            // One line per field: a newline (or any control character) in
            // a key or value, or '=' in a key, would let two messages share bytes.
            guard isLineSafe(k), isLineSafe(v) else {
                return .failure(.init(.bad, "a signed field holds a control character (\(isPrintable(k) ? k : "a key"))"))
            }
            guard !k.utf8.contains(UInt8(ascii: "=")) else {
                return .failure(.init(.bad, "a signed field's name holds '=' (\(isPrintable(k) && k.utf8.count <= 64 ? k : "a key"))"))
            }
            lines.append(k + "=" + v)
        }
        return .success(Array((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// Signs `document` as a backend must (`soundboxctl sign`, the tests,
    /// the benchmarks): `kid` set to the key's, `ts` added when missing
    /// (`now`), `nonce` added to a cmd without one, and `sig` from `sign`
    /// over the canonical bytes. `kind` nil: a cmd if it has `cmd`, a
    /// payment if it has an amount, else a config.
    public static func sign(_ document: JSONValue, kind: Kind? = nil, device: String, kid: String, now: Int64,
                            nonce: () -> String, sign: ([UInt8]) -> [UInt8]) -> Result<Signed, SignatureProblem> {
        guard case .object(var members) = document else { return .failure(.init(.bad, "the message must be a JSON object")) }
        let names = Set(members.map(\.0))
        let kind = kind ?? (names.contains("cmd") ? .cmd : names.contains("amount") || names.contains("amount_minor") ? .payment : .config)
        members.removeAll { $0.0 == "sig" || $0.0 == "kid" }
        members.append(("kid", .string(kid)))
        if !names.contains("ts") { members.append(("ts", .number(String(now)))) }
        if kind == .cmd && !names.contains("nonce") { members.append(("nonce", .string(nonce()))) }
        let unsigned = JSONValue.object(members)
        let content: [(String, String)]
        switch kind {
        case .payment:
            switch PaymentMessage.parse(unsigned, maxAmount: .wordsMax) {
            case .success(let p): content = paymentContent(p, document: unsigned)
            case .failure(let r): return .failure(.init(.bad, "not a payment a device takes: \(r.reason)"))
            }
        case .cmd, .config:
            switch Signature.content(unsigned) {
            case .success(let c): content = c
            case .failure(let p): return .failure(p)
            }
        }
        // The envelope as the device will read it (a placeholder sig of the right shape).
        let placeholder = JSONValue.object(members + [("sig", .string(String(repeating: "A", count: 86) + "=="))])
        return envelope(placeholder, kind: kind, device: device)
            .flatMap { canonical(kind: kind, device: device, envelope: $0, content: content) }
            .map { bytes in
                Signed(kind: kind, canonical: bytes, message: .object(members + [("sig", .string(Base64.encode(sign(bytes))))]))
            }
    }

    /// A message `sign` made: its kind, the bytes signed and the message with `sig`.
    public struct Signed: Sendable {
        public let kind: Kind
        public let canonical: [UInt8]
        public let message: JSONValue
    }

    /// Nested objects as dotted keys; strings, numbers (as written) and
    /// booleans as text; arrays and null refused.
    public static func flatten(_ document: JSONValue, excluding: [String] = []) -> Result<[(String, String)], RemoteMessageError> {
        guard case .object(let members) = document else { return .failure(.init("the message must be a JSON object")) }
        var out: [(String, String)] = []
        func walk(_ members: [(String, JSONValue)], _ prefix: String) -> RemoteMessageError? {
            for (k, v) in members {
                if prefix.isEmpty && excluding.contains(k) { continue }
                let key = prefix.isEmpty ? k : prefix + "." + k
                switch v {
                case .object(let inner): if let e = walk(inner, key) { return e }
                case .string(let s): out.append((key, s))
                case .number(let n): out.append((key, n))
                case .bool(let b): out.append((key, b ? "true" : "false"))
                case .array, .null: return .init("\(key) must be a string, a number or a boolean, not \(v.kindDescription)")
                }
            }
            return nil
        }
        if let e = walk(members, "") { return .failure(e) }
        return .success(out)
    }

    private static func isLowerHex(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))
    }
    private static func isLineSafe(_ s: String) -> Bool { s.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F } }
    private static func isPrintable(_ s: String) -> Bool { s.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F } }
}

/// Why a signed message is refused: the `rejected` receipt's reason is
/// "signature: CLASS" or "signature: CLASS: detail".
public struct SignatureProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Class: String, Sendable, CaseIterable {
        case missing, bad
        case unknownKey = "unknown key"
        case wrongDevice = "wrong device"
        case stale
    }
    public let kind: Class
    public let detail: String?

    public init(_ kind: Class, _ detail: String?) { self.kind = kind; self.detail = detail }

    public var description: String { "signature: \(kind.rawValue)" + (detail.map { ": " + $0 } ?? "") }
}

/// Standard base64 (RFC 4648 §4, with padding), strictly: no whitespace,
/// no URL alphabet, no missing or extra padding.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = UInt32(bytes[i]), b1 = n > 1 ? UInt32(bytes[i + 1]) : 0, b2 = n > 2 ? UInt32(bytes[i + 2]) : 0
            let v = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(n > 1 ? alphabet[Int(v >> 6 & 63)] : UInt8(ascii: "="))
            out.append(n > 2 ? alphabet[Int(v & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes, or nil unless `text` is canonical standard base64.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        for start in stride(from: 0, to: chars.count, by: 4) {
            let last = start + 4 == chars.count
            var v: UInt32 = 0, pad = 0
            for j in 0..<4 {
                let c = chars[start + j]
                if c == UInt8(ascii: "=") {
                    guard last, j >= 2 else { return nil }
                    pad += 1
                    v <<= 6
                    continue
                }
                guard pad == 0, let d = alphabet.firstIndex(of: c) else { return nil }
                v = v << 6 | UInt32(d)
            }
            out.append(UInt8(v >> 16 & 0xFF))
            if pad < 2 { out.append(UInt8(v >> 8 & 0xFF)) }
            if pad < 1 { out.append(UInt8(v & 0xFF)) }
            // Canonical: the bits the padding drops are zero.
            if pad == 1 && v & 0xFF != 0 { return nil }
            if pad == 2 && v & 0xFFFF != 0 { return nil }
        }
        return out
    }
}
