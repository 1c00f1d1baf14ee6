import CCrypto

/// Ed25519 (RFC 8032) and SHA-256 through OpenSSL's EVP interface
/// (`EVP_PKEY_ED25519`): libcrypto is already on every box, pulled in by
/// libmosquitto's TLS, and it is the implementation the backend's own
/// tools (`openssl pkeyutl`, Python's `cryptography`) use. Nothing here
/// does arithmetic of its own.
public enum Crypto {
    /// 16 lowercase hex digits from OpenSSL's CSPRNG: a signed cmd's `nonce`.
    public static func nonce() -> String {
        var bytes = [UInt8](repeating: 0, count: 8)
        precondition(RAND_bytes(&bytes, 8) == 1, "RAND_bytes failed")
        return hex(bytes)
    }

    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { b in
            out.withUnsafeMutableBytes { o in
                EVP_Digest(b.baseAddress, b.count, o.baseAddress!.assumingMemoryBound(to: UInt8.self), &length, EVP_sha256(), nil)
            }
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return out
    }

    /// A Wi-Fi network's key from its passphrase (IEEE 802.11i: PBKDF2 with
    /// HMAC-SHA1, the SSID as salt, 4096 rounds, 32 bytes), as
    /// wpa_passphrase makes it: what provisioning writes into
    /// wpa_supplicant.conf, so the passphrase itself is not kept.
    public static func wpaKey(passphrase: String, ssid: String) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let pass = Array(passphrase.utf8), salt = Array(ssid.utf8)
        let ok = pass.withUnsafeBufferPointer { p in
            PKCS5_PBKDF2_HMAC_SHA1(p.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(p.count),
                                   salt, Int32(salt.count), 4096, 32, &out)
        }
        precondition(ok == 1, "PKCS5_PBKDF2_HMAC_SHA1 failed")
        return out
    }

    /// A key's id: the first 8 bytes of the SHA-256 of its 32 raw public
    /// bytes, as 16 lowercase hex digits (docs/signing.md).
    public static func keyID(raw: [UInt8]) -> String { hex(sha256(raw).prefix(8)) }

    /// Lowercase hex, two digits a byte.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { b in String(b, radix: 16).leftPadded(2) }.joined()
    }

    /// OpenSSL's queued error messages, oldest first, emptied.
    static func errors() -> String {
        var lines: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return lines.joined(separator: "; ")
    }

    /// Reads a PEM key from memory with `read` (PEM_read_bio_PUBKEY or
    /// PEM_read_bio_PrivateKey); nil with OpenSSL's reason when it fails.
    static func pem(_ text: [UInt8], _ read: (OpaquePointer?) -> OpaquePointer?) -> Result<OpaquePointer, KeyError> {
        guard text.count <= Ed25519PublicKey.maxFileBytes else {
            return .failure(KeyError("\(text.count) bytes, more than \(Ed25519PublicKey.maxFileBytes) for a key file"))
        }
        guard text.contains(UInt8(ascii: "-")) else { return .failure(KeyError("not PEM: expected a '-----BEGIN ...' line")) }
        _ = errors()
        let key: OpaquePointer? = text.withUnsafeBytes { b in
            guard let bio = BIO_new_mem_buf(b.baseAddress, Int32(b.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let key else {
            let why = errors()
            return .failure(KeyError("not a PEM key OpenSSL can read" + (why.isEmpty ? "" : " (\(why))")))
        }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(key)
            return .failure(KeyError("not an Ed25519 key (make one with: openssl genpkey -algorithm ed25519)"))
        }
        return .success(key)
    }

    /// The 32 raw public bytes of an Ed25519 EVP_PKEY (public or private).
    static func rawPublic(_ key: OpaquePointer) -> [UInt8] {
        var raw = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = EVP_PKEY_get_raw_public_key(key, &raw, &length)
        precondition(ok == 1 && length == 32, "EVP_PKEY_get_raw_public_key failed")
        return raw
    }
}

/// Why a key could not be read.
public struct KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// One Ed25519 public key, ready to verify: the OpenSSL key is made once
/// (at load) and only read afterwards, so verifying from several threads
/// at once is safe (each verification has its own EVP_MD_CTX).
public final class Ed25519PublicKey: @unchecked Sendable {
    /// Key files are small PEM texts; anything bigger is not one.
    public static let maxFileBytes = 16 * 1024
    /// The 32 raw bytes (RFC 8032's encoding).
    public let raw: [UInt8]
    /// `Crypto.keyID(raw:)`: what a message names in `kid`.
    public let id: String
    private let key: OpaquePointer

    /// From the 32 raw bytes of RFC 8032.
    public init(raw: [UInt8]) throws(KeyError) {
        guard raw.count == 32 else { throw KeyError("an Ed25519 public key is 32 bytes, not \(raw.count)") }
        guard let key = raw.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }) else {
            throw KeyError("OpenSSL refused the key: \(Crypto.errors())")
        }
        self.key = key
        self.raw = raw
        id = Crypto.keyID(raw: raw)
    }

    /// From a PEM file's text: a public key ("-----BEGIN PUBLIC KEY-----",
    /// as `openssl pkey -pubout` writes it).
    public init(pem: [UInt8]) throws(KeyError) {
        switch Crypto.pem(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) {
        case .failure(let e): throw e
        case .success(let key):
            self.key = key
            raw = Crypto.rawPublic(key)
            id = Crypto.keyID(raw: raw)
        }
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` (64 bytes) is this key's signature of `message`.
    public func verify(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard signature.count == 64, let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, nil, nil, key) == 1 else { _ = Crypto.errors(); return false }
        let ok = signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in
                EVP_DigestVerify(ctx, s.baseAddress, 64, m.baseAddress, m.count)
            }
        }
        if ok != 1 { _ = Crypto.errors() }
        return ok == 1
    }
}

/// An Ed25519 private key: for `soundboxctl sign` (tests, demos, the
/// backend team's reference), never on a device in the field.
public final class Ed25519PrivateKey: @unchecked Sendable {
    private let key: OpaquePointer
    public let publicKey: Ed25519PublicKey

    /// From a PEM file's text ("-----BEGIN PRIVATE KEY-----", as `openssl
    /// genpkey -algorithm ed25519` writes it; not encrypted).
    public init(pem: [UInt8]) throws(KeyError) {
        switch Crypto.pem(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) {
        case .failure(let e): throw e
        case .success(let key):
            self.key = key
            publicKey = try Ed25519PublicKey(raw: Crypto.rawPublic(key))
        }
    }

    /// From RFC 8032's 32-byte secret (its test vectors).
    public init(secret: [UInt8]) throws(KeyError) {
        guard secret.count == 32 else { throw KeyError("an Ed25519 secret key is 32 bytes, not \(secret.count)") }
        guard let key = secret.withUnsafeBufferPointer({ EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }) else {
            throw KeyError("OpenSSL refused the key: \(Crypto.errors())")
        }
        self.key = key
        publicKey = try Ed25519PublicKey(raw: Crypto.rawPublic(key))
    }

    deinit { EVP_PKEY_free(key) }

    /// The 64-byte signature of `message` (Ed25519 is deterministic).
    public func sign(_ message: [UInt8]) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        precondition(EVP_DigestSignInit(ctx, nil, nil, nil, key) == 1, "EVP_DigestSignInit: \(Crypto.errors())")
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        let ok = message.withUnsafeBufferPointer { m in
            EVP_DigestSign(ctx, &signature, &length, m.baseAddress, m.count)
        }
        precondition(ok == 1 && length == 64, "EVP_DigestSign: \(Crypto.errors())")
        return signature
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// SHA-256 over data given in pieces (a bundle of hundreds of MiB).
public struct SHA256Stream: ~Copyable {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex(SHA-256) failed")
    }
    deinit { EVP_MD_CTX_free(context) }

    public mutating func update(_ bytes: ArraySlice<UInt8>) {
        let ok = bytes.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        precondition(ok == 1, "EVP_DigestUpdate failed")
    }

    public consuming func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        precondition(ok == 1 && length == 32, "EVP_DigestFinal_ex failed")
        return out
    }
}
