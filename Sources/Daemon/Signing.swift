import Glibc
import Soundbox
import SoundboxCrypto
import Synchronization

/// Signed messages on the device (docs/signing.md): the public keys of
/// `payment.keys`, and the checks every payment, cmd and config message
/// passes when `payment.signing = required`. The device holds no private key.
final class Signing: Sendable {
    /// One key file read.
    struct KeyFile: Sendable {
        let path: String
        let key: Ed25519PublicKey
    }
    /// What the key folder held when last read.
    struct Keys: Sendable {
        var folder: String
        var files: [KeyFile] = []
        /// Files that are not keys, or could not be read: path and why.
        var problems: [(path: String, why: String)] = []
        /// Why the folder itself could not be read, if so.
        var folderProblem: String?
    }

    /// At most this many key files are read (a folder is a handful of keys
    /// in rotation; a message without `kid` is tried against each).
    static let maxKeys = 16
    /// The trusted time floor is written down when it has moved this far.
    static let floorStep: Int64 = 3600
    static let floorKey = "signed_time_floor"
    static let configTsKey = "signed_config_ts"

    let mode: Signature.Mode
    let device: String
    private let storage: Storage
    private let environment: [String: String]
    private let keys: Mutex<Keys>
    /// The newest `ts` of a verified message (Unix seconds): without a
    /// synchronised clock, the device's idea of "now" for the stale rule.
    private let floor: Mutex<(value: Int64, saved: Int64)>
    private let log = Log("signing")

    init(config: Config, device: String, storage: Storage, environment: [String: String]) {
        mode = Signature.Mode(rawValue: config[.paymentSigning]) ?? .off
        self.device = device
        self.storage = storage
        self.environment = environment
        keys = Mutex(Self.load(folder: config[.paymentKeys]))
        let saved = storage.meta(Self.floorKey).flatMap { Int64($0) } ?? 0
        floor = Mutex((saved, saved))
        logKeys()
    }

    /// SIGHUP: the key folder is read again (rotation: a removed key is
    /// refused from now on). The folder itself and the mode are read at start.
    func reload() {
        keys.withLock { $0 = Self.load(folder: $0.folder) }
        logKeys()
    }

    var loaded: Keys { keys.withLock { $0 } }

    private func logKeys() {
        let k = loaded
        guard mode == .required || !k.files.isEmpty else { return }
        log.info("keys", ["mode": mode.rawValue, "folder": k.folder, "ids": k.files.map(\.key.id).joined(separator: ",")])
        for p in k.problems { log.warning("key_ignored", ["file": p.path, "reason": p.why]) }
        if let why = k.folderProblem { log.error("keys_unreadable", ["folder": k.folder, "reason": why]) }
        if mode == .required && k.files.isEmpty {
            log.error("no_keys", ["folder": k.folder, "hint": "payment.signing = required refuses every payment until a key is there (then SIGHUP)"])
        }
    }

    /// The `*.pem` and `*.pub` regular files of `folder`, in name order.
    static func load(folder: String) -> Keys {
        var k = Keys(folder: folder)
        guard let dir = opendir(folder) else {
            k.folderProblem = FileError.phrase(errno: errno)
            return k
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".pem") || name.hasSuffix(".pub") { names.append(name) }
        }
        var seen: [String: String] = [:]
        for name in names.sorted() {
            let path = folder + "/" + name
            guard k.files.count < maxKeys else { k.problems.append((path, "more than \(maxKeys) keys: not read")); continue }
            let bytes: [UInt8]
            do { bytes = try TextFile.read(path, limit: Ed25519PublicKey.maxFileBytes) } catch {
                k.problems.append((path, error.phrase)); continue
            }
            do {
                let key = try Ed25519PublicKey(pem: bytes)
                if let earlier = seen[key.id] { k.problems.append((path, "the same key as \(earlier)")); continue }
                seen[key.id] = path
                k.files.append(KeyFile(path: path, key: key))
            } catch {
                k.problems.append((path, error.description))
            }
        }
        return k
    }

    /// Checks a message of `kind` when signing is required: its envelope,
    /// the signature over its `content` (verified before anything else is
    /// believed), then its age. Returns the envelope, or why it is refused.
    /// With signing off: nil envelope, nothing checked (not even `content`).
    func check(_ kind: Signature.Kind, _ document: JSONValue, content makeContent: () -> Result<[(String, String)], SignatureProblem>,
               config: Config) -> Result<Signature.Envelope?, SignatureProblem> {
        guard mode == .required else { return .success(nil) }
        let content: [(String, String)]
        switch makeContent() {
        case .failure(let p): return .failure(p)
        case .success(let c): content = c
        }
        let envelope: Signature.Envelope
        switch Signature.envelope(document, kind: kind, device: device) {
        case .failure(let p): return .failure(p)
        case .success(let e): envelope = e
        }
        let message: [UInt8]
        switch Signature.canonical(kind: kind, device: device, envelope: envelope, content: content) {
        case .failure(let p): return .failure(p)
        case .success(let bytes): message = bytes
        }
        let files = keys.withLock { $0.files }
        let candidates: [KeyFile]
        if let kid = envelope.kid {
            candidates = files.filter { $0.key.id == kid }
            if candidates.isEmpty {
                return .failure(.init(.unknownKey, files.isEmpty ? "this device has no keys (payment.keys)" : "no key with id \(kid) on this device"))
            }
        } else {
            if files.isEmpty { return .failure(.init(.unknownKey, "this device has no keys (payment.keys)")) }
            candidates = files
        }
        guard candidates.contains(where: { $0.key.verify(envelope.sig, of: message) }) else {
            return .failure(.init(.bad, envelope.kid == nil ? "verified by none of the \(files.count) keys" : "does not verify with key \(envelope.kid!)"))
        }
        // Genuine: now its age means something.
        let window = Int64(config[.queueRetentionDays]) * 86_400
        let synced = SystemClock.isSynchronized(environment: environment)
        let reference = synced ? SystemClock.nowMs() / 1000 : floor.withLock { $0.value }
        if reference > 0 && envelope.ts < reference - window {
            let days = (reference - envelope.ts) / 86_400
            return .failure(.init(.stale, "made \(days) days before the device's \(synced ? "clock" : "newest signed message"); at most \(config[.queueRetentionDays]) days (queue.retention_days)"))
        }
        raiseFloor(envelope.ts)
        return .success(envelope)
    }

    /// The newest verified `ts` becomes the device's lower bound for "now".
    private func raiseFloor(_ ts: Int64) {
        let save: Int64? = floor.withLock { f in
            guard ts > f.value else { return nil }
            f.value = ts
            guard ts - f.saved >= Self.floorStep else { return nil }
            f.saved = ts
            return ts
        }
        if let save { try? storage.updateOverlay([:], meta: [Self.floorKey: String(save)]) }
    }

    /// Lines for doctor's `signing` check: status, detail, hint.
    func doctor() -> (status: String, detail: String, hint: String?) {
        let k = loaded
        let list = k.files.map { "\($0.key.id) (\($0.path))" }.joined(separator: ", ")
        let ignored = k.problems.map { "\($0.path): \($0.why)" }.joined(separator: "; ")
        switch mode {
        case .off:
            return ("ok", "off: payments, cmd and config are not verified" + (k.files.isEmpty ? "" : "; keys loaded: \(list)"), nil)
        case .required where k.files.isEmpty:
            return ("fail", "required, but no key in \(k.folder)\(k.folderProblem.map { " (\($0))" } ?? "")\(ignored.isEmpty ? "" : "; ignored: \(ignored)"): every payment is refused",
                    "put the backend's Ed25519 public key (PEM, *.pem) in \(k.folder), then `systemctl reload soundboxd` (SIGHUP)")
        case .required where !ignored.isEmpty:
            return ("warn", "required; \(k.files.count) \(k.files.count == 1 ? "key" : "keys"): \(list); ignored: \(ignored)",
                    "remove or fix the ignored files in \(k.folder), then SIGHUP")
        case .required:
            return ("ok", "required; \(k.files.count) \(k.files.count == 1 ? "key" : "keys"): \(list)", nil)
        }
    }
}
