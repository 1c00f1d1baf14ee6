import Soundbox

/// The backend's `config` topic (DESIGN §2, docs/mqtt.md), as a route of
/// `Inbox`: every key validated (only remote-scope keys are allowed), all
/// or nothing applied, persisted, and answered on config/applied.
struct ConfigRoute: InboxRoute {
    let settings: Settings
    let storage: Storage
    /// Told when a config changed what status and the LED show.
    let changes: Changes
    private let log = Log("mqtt")
    /// The `meta` key holding the last config applied from the broker.
    static let lastConfigKey = "remote_config"
    var kind: Signature.Kind { .config }

    init(settings: Settings, storage: Storage, changes: Changes) {
        self.settings = settings; self.storage = storage; self.changes = changes
    }

    /// The changes, and what is stored with them once applied.
    struct Message {
        let changes: [String: String]
        var meta: [String: String]
    }

    /// Nothing to say for a cleared retained config, or for a retained
    /// config the same as the last one applied from the broker (it comes
    /// again at every reconnect): that changes nothing — not even keys a
    /// technician or the buttons changed since.
    func read(_ bytes: [UInt8], retained: Bool, config: Config) -> Result<(document: JSONValue, message: Message), Refusal> {
        guard !bytes.isEmpty else { return .failure(.nothing) }
        switch RemoteMessage.document(bytes, what: "config", maxDepth: 4).flatMap({ d in RemoteConfig.changes(d).map { (d, $0) } }) {
        case .failure(let e):
            log.warning("config_rejected", ["reason": e.description])
            return .failure(.answer(Self.refusal(error: e.description)))
        case .success(let (document, changes)):
            let canonical = changes.sorted { $0.key < $1.key }.map { $0.key + "=" + $0.value }.joined(separator: "\n")
            if retained && storage.meta(Self.lastConfigKey) == canonical {
                log.info("config_unchanged")
                return .failure(.nothing)
            }
            return .success((document, Message(changes: changes, meta: [Self.lastConfigKey: canonical])))
        }
    }

    /// A genuine config older than the one in effect is refused (a
    /// replayed "mute" cannot undo a later "unmute"); a refusal is a
    /// rejected receipt, so a forged config cannot even replace the
    /// retained answer.
    func fresh(_ message: Message, _ envelope: Signature.Envelope, config: Config) -> Result<Message, Refusal> {
        if let last = storage.meta(Signing.configTsKey).flatMap({ Int64($0) }), envelope.ts < last {
            return .failure(.receipt(id: nil, SignatureProblem(.stale, "older (ts \(envelope.ts)) than the config applied last (ts \(last))").description))
        }
        var m = message
        m.meta[Signing.configTsKey] = String(envelope.ts)
        return .success(m)
    }

    func validate(_ message: Message, config: Config) -> Result<Message, Refusal> {
        let rejected = settings.problems(message.changes, from: .remote)
        guard !rejected.isEmpty else { return .success(message) }
        log.warning("config_rejected", ["keys": rejected.keys.sorted().joined(separator: ",")])
        var fields = JSONObject()
        for (k, why) in rejected.sorted(by: { $0.key < $1.key }) { fields.add(k, why) }
        var answer = JSONObject()
        answer.add("ok", false)
        answer.add("rejected", fields)
        return .failure(.answer(answer.text))
    }

    func act(_ message: Message) -> String? {
        defer { changes.post(.state) }
        do {
            let now = try settings.set(message.changes, from: .remote, meta: message.meta)
            log.info("config_applied", ["keys": message.changes.keys.sorted().joined(separator: ",")])
            var config = JSONObject()
            for (k, v) in now.effective { config.add(k.name, v) }
            var answer = JSONObject()
            answer.add("ok", true)
            answer.add("config", config)
            return answer.text
        } catch {
            return Self.refusal(error: error.description)
        }
    }

    private static func refusal(error: String) -> String {
        var o = JSONObject()
        o.add("ok", false)
        o.add("error", error)
        return o.text
    }
}

/// The backend's `cmd` topic (DESIGN §2), as a route of `Inbox`: say,
/// replay, summary, test, and update (handed to `Updater`). A retained command is refused: it would run
/// again at every reconnect.
struct CommandRoute: InboxRoute {
    let storage: Storage
    let ingest: Ingest
    let scheduler: Scheduler
    let updater: Updater
    private let log = Log("mqtt")
    var kind: Signature.Kind { .cmd }

    init(storage: Storage, ingest: Ingest, scheduler: Scheduler, updater: Updater) {
        self.storage = storage; self.ingest = ingest; self.scheduler = scheduler; self.updater = updater
    }

    func read(_ bytes: [UInt8], retained: Bool, config: Config) -> Result<(document: JSONValue, message: JSONValue), Refusal> {
        guard !retained else { return .failure(.logged("retained: a command is an event, not a state; publish it without the retain flag")) }
        return RemoteMessage.document(bytes, what: "cmd").map { ($0, $0) }.mapError { .logged($0.description) }
    }

    /// Its nonce never seen before within the window.
    func fresh(_ document: JSONValue, _ envelope: Signature.Envelope, config: Config) -> Result<JSONValue, Refusal> {
        let now = SystemClock.nowMs()
        let nonce = envelope.nonce ?? ""
        guard storage.useNonce(nonce, now: now, since: now - Int64(config[.queueRetentionDays]) * 86_400_000) else {
            return .failure(.receipt(id: nil, SignatureProblem(.stale, "nonce \(nonce) was used before (a replayed command)").description))
        }
        return .success(document)
    }

    func validate(_ document: JSONValue, config: Config) -> Result<RemoteCommand, Refusal> {
        RemoteCommand.parse(document, maxAmount: config[.paymentMaxAmount], now: SystemClock.nowMs()).mapError { .logged($0.description) }
    }

    func act(_ command: RemoteCommand) -> String? {
        switch command {
        case .say(let p):
            log.info("cmd", ["cmd": "say", "id": p.id])
            _ = ingest.accept(p)
        case .replay(let id):
            guard let found = (try? scheduler.replay(id: id)) ?? nil else {
                log.warning("cmd_rejected", ["cmd": "replay", "reason": "no such payment", "id": id ?? "-"])
                return nil
            }
            log.info("cmd", ["cmd": "replay", "id": found.entry.payment.id])
        case .summary:
            log.info("cmd", ["cmd": "summary"])
            _ = scheduler.submit(.summary)
        case .test:
            log.info("cmd", ["cmd": "test"])
            _ = scheduler.submit(.test)
        case .update(let request):
            log.info("cmd", ["cmd": "update", "version": request.version ?? "-"])
            // Accepted: its receipts follow (downloading …); refused: one failed receipt says why.
            if case .refused(let reason) = updater.start(request) {
                log.warning("cmd_rejected", ["cmd": "update", "reason": reason])
                updater.refusedReceipt(request, reason)
            }
        }
        return nil
    }
}
