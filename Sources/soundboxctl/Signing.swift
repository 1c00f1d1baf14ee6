// `key id` and `sign` (docs/signing.md): what a backend must do to sign a
// message for a device with payment.signing = required, done the same way.
import Glibc
import Soundbox
import SoundboxCrypto

/// The core's JSON (soundboxctl has its own JSONValue for output).
typealias Message = Soundbox.JSONValue

/// The text of FILE, at most a key file's size.
func readKeyFile(_ path: String) throws(Failure) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw failure("\(path): \(String(cString: strerror(errno)))", code: "key") }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n < 0 { throw failure("\(path): \(String(cString: strerror(errno)))", code: "key") }
        if n == 0 { return out }
        out += buffer[0..<n]
        if out.count > Ed25519PublicKey.maxFileBytes {
            throw failure("\(path): more than \(Ed25519PublicKey.maxFileBytes) bytes; not a key file", code: "key")
        }
    }
}

/// `key id FILE`: the id of a public or private Ed25519 key (PEM).
func keyCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly([], for: "key")
    guard args.positional.first == "id", args.positional.count == 2 else { throw usageError("usage: key id FILE") }
    let path = args.positional[1]
    let text = try readKeyFile(path)
    let key: Ed25519PublicKey, type: String
    if let k = try? Ed25519PublicKey(pem: text) {
        key = k; type = "public"
    } else {
        do { key = try Ed25519PrivateKey(pem: text).publicKey; type = "private" } catch {
            throw failure("\(path): \(error)", code: "key")
        }
    }
    struct KeyID: Encodable { var id: String; var file: String; var type: String }
    out.emit(KeyID(id: key.id, file: path, type: type), text: key.id)
}

/// `sign --key PRIVATE [--kind K] [--device ID] PAYLOAD`: the message with
/// `kid`, `ts` (now, if it has none), `nonce` (cmd, if none) and `sig` added.
func signCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(["--key", "--kind", "--device"], for: "sign")
    guard let keyPath = args.options["--key"] else { throw usageError("sign needs --key PRIVATE (an Ed25519 private key, PEM)") }
    guard args.positional.count == 1 else { throw usageError("usage: sign --key PRIVATE [--kind payment|cmd|config] [--device ID] PAYLOAD (JSON, or - for standard input)") }
    let key: Ed25519PrivateKey
    do { key = try Ed25519PrivateKey(pem: try readKeyFile(keyPath)) } catch let e as Failure { throw e } catch {
        throw failure("\(keyPath): \(error)", code: "key")
    }
    let text = args.positional[0] == "-" ? readStandardInput() : Array(args.positional[0].utf8)
    guard case .object(var members) = try parseMessage(text) else { throw failure("PAYLOAD must be a JSON object", code: "payload") }
    let kind: Signature.Kind
    if let k = args.options["--kind"] {
        guard let known = Signature.Kind(rawValue: k) else { throw usageError("--kind must be payment, cmd or config, not '\(k)'") }
        kind = known
    } else {
        let keys = Set(members.map(\.0))
        kind = keys.contains("cmd") ? .cmd : keys.contains("amount") || keys.contains("amount_minor") ? .payment : .config
    }
    let device: String
    if let d = args.options["--device"] { device = d }
    else if case .string(let d)? = Message.object(members)["device"] { device = d }
    else {
        let settings = try config(args)
        device = settings[.deviceID].isEmpty ? localHostname() : settings[.deviceID]
    }
    members.removeAll { $0.0 == "sig" || $0.0 == "kid" }
    members.append(("kid", .string(key.publicKey.id)))
    if !members.contains(where: { $0.0 == "ts" }) { members.append(("ts", .number(String(time(nil))))) }
    if kind == .cmd && !members.contains(where: { $0.0 == "nonce" }) { members.append(("nonce", .string(randomNonce()))) }
    let document = Message.object(members)
    let content: [(String, String)]
    switch kind {
    case .payment:
        switch PaymentMessage.parse(document, maxAmount: .wordsMax) {
        case .success(let p): content = Signature.paymentContent(p, document: document)
        case .failure(let r): throw failure("not a payment a device takes: \(r.reason)", code: "payload")
        }
    case .cmd, .config:
        switch Signature.content(document) {
        case .success(let c): content = c
        case .failure(let p): throw failure(p.description, code: "payload")
        }
    }
    let envelope: Signature.Envelope
    switch Signature.envelope(.object(members + [("sig", .string(String(repeating: "A", count: 86) + "=="))]), kind: kind, device: device) {
    case .success(let e): envelope = e
    case .failure(let p): throw failure(p.description, code: "payload")
    }
    let canonical: [UInt8]
    switch Signature.canonical(kind: kind, device: device, envelope: envelope, content: content) {
    case .success(let bytes): canonical = bytes
    case .failure(let p): throw failure(p.description, code: "payload")
    }
    members.append(("sig", .string(Base64.encode(key.sign(canonical)))))
    let message = Message.object(members).text
    struct Signed: Encodable { var kind: String; var device: String; var kid: String; var canonical: String; var message: String }
    out.emit(Signed(kind: kind.rawValue, device: device, kid: key.publicKey.id, canonical: String(decoding: canonical, as: UTF8.self),
                    message: message), text: message)
}

func parseMessage(_ bytes: [UInt8]) throws(Failure) -> Message {
    do { return try Message.parse(bytes) } catch { throw failure("PAYLOAD is not valid JSON: \(error)", code: "payload") }
}

func readStandardInput() -> [UInt8] {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while out.count <= 1 << 20 {
        let n = read(0, &buffer, buffer.count)
        if n <= 0 { break }
        out += buffer[0..<n]
    }
    return out
}

/// 16 hex digits from the kernel's random source.
func randomNonce() -> String {
    var bytes = [UInt8](repeating: 0, count: 8)
    let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    if fd >= 0 { _ = read(fd, &bytes, 8); close(fd) }
    return bytes.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined()
}

func localHostname() -> String {
    var buf = [CChar](repeating: 0, count: 256)
    gethostname(&buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
