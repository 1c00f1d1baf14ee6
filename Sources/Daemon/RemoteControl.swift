import Soundbox

/// The backend's `config` and `cmd` topics (DESIGN §2, docs/mqtt.md).
struct RemoteControl: Sendable {
    let settings: Settings
    let storage: Storage
    let ingest: Ingest
    let scheduler: Scheduler
    let signing: Signing
    /// Told when a config changed what status and the LED show.
    let changes: Changes
    private let log = Log("mqtt")
    /// The `meta` key holding the last config applied from the broker.
    static let lastConfigKey = "remote_config"

    init(settings: Settings, storage: Storage, ingest: Ingest, scheduler: Scheduler, signing: Signing, changes: Changes) {
        self.settings = settings; self.storage = storage; self.ingest = ingest; self.scheduler = scheduler; self.signing = signing
        self.changes = changes
    }

    /// A config message: validates every key (only remote-scope keys are
    /// allowed), applies all or nothing, persists. Returns the answer for
    /// config/applied, or nil when there is nothing to say: a retained
    /// config the same as the last one applied from the broker (it comes
    /// again at every reconnect) changes nothing — not even keys a
    /// technician or the buttons changed since.
    func config(_ bytes: [UInt8], retained: Bool) -> String? {
        guard !bytes.isEmpty else { return nil }   // the retained config was cleared
        let document: JSONValue, changes: [String: String]
        switch RemoteMessage.document(bytes, what: "config", maxDepth: 4).flatMap({ d in RemoteConfig.changes(d).map { (d, $0) } }) {
        case .failure(let e):
            log.warning("config_rejected", ["reason": e.description])
            return Self.refusal(error: e.description)
        case .success(let (d, c)): (document, changes) = (d, c)
        }
        let canonical = changes.sorted { $0.key < $1.key }.map { $0.key + "=" + $0.value }.joined(separator: "\n")
        if retained && storage.meta(Self.lastConfigKey) == canonical {
            log.info("config_unchanged")
            return nil
        }
        // Signed (docs/signing.md): a refusal is a rejected receipt, not an
        // answer on config/applied, so a forged config cannot even replace
        // the retained answer; and a genuine config older than the one in
        // effect is refused (a replayed "mute" cannot undo a later "unmute").
        var meta = [Self.lastConfigKey: canonical]
        switch signing.check(.config, document, content: { Signature.content(document) }, config: settings.current) {
        case .failure(let p):
            log.warning("config_rejected", ["reason": p.description])
            ingest.reject(nil, p.description, kind: .config)
            return nil
        case .success(let envelope?):
            if let last = storage.meta(Signing.configTsKey).flatMap({ Int64($0) }), envelope.ts < last {
                let p = SignatureProblem(.stale, "older (ts \(envelope.ts)) than the config applied last (ts \(last))")
                log.warning("config_rejected", ["reason": p.description])
                ingest.reject(nil, p.description, kind: .config)
                return nil
            }
            meta[Signing.configTsKey] = String(envelope.ts)
        case .success(nil): break
        }
        let rejected = settings.problems(changes, from: .remote)
        guard rejected.isEmpty else {
            log.warning("config_rejected", ["keys": rejected.keys.sorted().joined(separator: ",")])
            var fields = JSONObject()
            for (k, why) in rejected.sorted(by: { $0.key < $1.key }) { fields.add(k, why) }
            var answer = JSONObject()
            answer.add("ok", false)
            answer.add("rejected", fields)
            return answer.text
        }
        do {
            let now = try settings.set(changes, from: .remote, meta: meta)
            log.info("config_applied", ["keys": changes.keys.sorted().joined(separator: ",")])
            self.changes.post(.state)
            var config = JSONObject()
            for (k, v) in now.effective { config.add(k.name, v) }
            var answer = JSONObject()
            answer.add("ok", true)
            answer.add("config", config)
            return answer.text
        } catch {
            self.changes.post(.state)
            return Self.refusal(error: error.description)
        }
    }

    private static func refusal(error: String) -> String {
        var o = JSONObject()
        o.add("ok", false)
        o.add("error", error)
        return o.text
    }

    /// A cmd message. A retained one is refused: it would run again at
    /// every reconnect.
    func command(_ bytes: [UInt8], retained: Bool) {
        guard !retained else {
            log.warning("cmd_rejected", ["reason": "retained: a command is an event, not a state; publish it without the retain flag"])
            return
        }
        let config = settings.current
        let document: JSONValue
        switch RemoteMessage.document(bytes, what: "cmd") {
        case .failure(let e): log.warning("cmd_rejected", ["reason": e.description]); return
        case .success(let d): document = d
        }
        // Signed: verified, and its nonce never seen before within the window.
        switch signing.check(.cmd, document, content: { Signature.content(document) }, config: config) {
        case .failure(let p):
            log.warning("cmd_rejected", ["reason": p.description])
            ingest.reject(nil, p.description, kind: .cmd)
            return
        case .success(let envelope?):
            let now = SystemClock.nowMs()
            let nonce = envelope.nonce ?? ""
            guard storage.useNonce(nonce, now: now, since: now - Int64(config[.queueRetentionDays]) * 86_400_000) else {
                let p = SignatureProblem(.stale, "nonce \(nonce) was used before (a replayed command)")
                log.warning("cmd_rejected", ["reason": p.description])
                ingest.reject(nil, p.description, kind: .cmd)
                return
            }
        case .success(nil): break
        }
        switch RemoteCommand.parse(document, maxAmount: config[.paymentMaxAmount], now: SystemClock.nowMs()) {
        case .failure(let e):
            log.warning("cmd_rejected", ["reason": e.description])
        case .success(.say(let p)):
            log.info("cmd", ["cmd": "say", "id": p.id])
            _ = ingest.accept(p)
        case .success(.replay(let id)):
            guard let found = (try? scheduler.replay(id: id)) ?? nil else {
                log.warning("cmd_rejected", ["cmd": "replay", "reason": "no such payment", "id": id ?? "-"])
                return
            }
            log.info("cmd", ["cmd": "replay", "id": found.entry.payment.id])
        case .success(.summary):
            log.info("cmd", ["cmd": "summary"])
            _ = scheduler.submit(.summary)
        case .success(.test):
            log.info("cmd", ["cmd": "test"])
            _ = scheduler.submit(.test)
        }
    }
}
