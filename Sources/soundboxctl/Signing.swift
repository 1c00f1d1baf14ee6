// `key id` and `sign` (docs/signing.md): what a backend must do to sign a
// message for a device with payment.signing = required, done the same way.
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxCrypto

/// The core's JSON (soundboxctl has its own JSONValue for output).
typealias Message = Soundbox.JSONValue

/// The text of FILE (a regular file), at most a key file's size.
func readKeyFile(_ path: String) throws(Failure) -> [UInt8] {
    do { return try TextFile.read(path, limit: Ed25519PublicKey.maxFileBytes) } catch {
        throw failure(error.description, code: "key")
    }
}

/// `key id FILE`: the id of a public or private Ed25519 key (PEM).
func keyCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly([], for: "key")
    guard args.positional.first == "id", args.positional.count == 2 else { throw usageError("usage: key id FILE") }
    let path = args.positional[1]
    let text = try readKeyFile(path)
    let key: Ed25519PublicKey, type: String
    do { key = try Ed25519PublicKey(pem: text); type = "public" } catch let publicError {
        do { key = try Ed25519PrivateKey(pem: text).publicKey; type = "private" } catch {
            // A public key of another algorithm (RSA): say so, not why it is no private key.
            let why = "\(publicError)".hasPrefix("not an Ed25519 key") ? "\(publicError)" : "\(error)"
            throw failure("\(path): \(why)", code: "key")
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
    let keyText = try readKeyFile(keyPath)
    do { key = try Ed25519PrivateKey(pem: keyText) } catch {
        if (try? Ed25519PublicKey(pem: keyText)) != nil {
            throw failure("\(keyPath): a public key; sign needs the private one (-----BEGIN PRIVATE KEY-----)", code: "key")
        }
        throw failure("\(keyPath): \(error)", code: "key")
    }
    // A payload file saved by Notepad (`sign ... - < payload.json`): its byte order mark is no JSON.
    let text = args.positional[0] == "-" ? TextFile.droppingBOM(readStandardInput()) : Array(args.positional[0].utf8)
    let document = try parseMessage(text)
    var kind: Signature.Kind?
    if let k = args.options["--kind"] {
        guard let known = Signature.Kind(rawValue: k) else { throw usageError("--kind must be payment, cmd or config, not '\(k)'") }
        kind = known
    }
    let device: String
    if let d = args.options["--device"] { device = d }
    else if case .string(let d)? = document["device"] { device = d }
    else {
        let settings = try config(args)
        device = settings[.deviceID].isEmpty ? localHostname() : settings[.deviceID]
    }
    switch Signature.sign(document, kind: kind, device: device, kid: key.publicKey.id, now: Int64(time(nil)),
                          nonce: Crypto.nonce, sign: key.sign) {
    case .failure(let p): throw failure(p.detail ?? p.description, code: "payload")
    case .success(let signed):
        struct Signed: Encodable { var kind: String; var device: String; var kid: String; var canonical: String; var message: String }
        let message = signed.message.text
        out.emit(Signed(kind: signed.kind.rawValue, device: device, kid: key.publicKey.id,
                        canonical: String(decoding: signed.canonical, as: UTF8.self), message: message), text: message)
    }
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

func localHostname() -> String {
    var buf = [CChar](repeating: 0, count: 256)
    gethostname(&buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
