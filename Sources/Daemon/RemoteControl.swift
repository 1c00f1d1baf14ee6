import Soundbox

/// The backend's `config` and `cmd` topics (DESIGN §2, docs/mqtt.md).
struct RemoteControl: Sendable {
    let settings: Settings
    let storage: Storage
    let ingest: Ingest
    let scheduler: Scheduler
    private let log = Log("mqtt")
    /// The `meta` key holding the last config applied from the broker.
    static let lastConfigKey = "remote_config"

    init(settings: Settings, storage: Storage, ingest: Ingest, scheduler: Scheduler) {
        self.settings = settings; self.storage = storage; self.ingest = ingest; self.scheduler = scheduler
    }

    /// A config message: validates every key (only remote-scope keys are
    /// allowed), applies all or nothing, persists. Returns the answer for
    /// config/applied, or nil when there is nothing to say: a retained
    /// config the same as the last one applied from the broker (it comes
    /// again at every reconnect) changes nothing — not even keys a
    /// technician or the buttons changed since.
    func config(_ bytes: [UInt8], retained: Bool) -> String? {
        guard !bytes.isEmpty else { return nil }   // the retained config was cleared
        let changes: [String: String]
        switch RemoteConfig.changes(bytes) {
        case .failure(let e):
            log.warning("config_rejected", ["reason": e.description])
            return Self.refusal(error: e.description)
        case .success(let c): changes = c
        }
        let canonical = changes.sorted { $0.key < $1.key }.map { $0.key + "=" + $0.value }.joined(separator: "\n")
        if retained && storage.meta(Self.lastConfigKey) == canonical {
            log.info("config_unchanged")
            return nil
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
            let now = try settings.set(changes, from: .remote, meta: [Self.lastConfigKey: canonical])
            log.info("config_applied", ["keys": changes.keys.sorted().joined(separator: ",")])
            ingest.outbox.notify()
            var config = JSONObject()
            for (k, v) in now.effective { config.add(k.name, v) }
            var answer = JSONObject()
            answer.add("ok", true)
            answer.add("config", config)
            return answer.text
        } catch {
            ingest.outbox.notify()
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
        switch RemoteCommand.parse(bytes, maxAmount: config[.paymentMaxAmount], now: SystemClock.nowMs()) {
        case .failure(let e):
            log.warning("cmd_rejected", ["reason": e.description])
        case .success(.say(let p)):
            log.info("cmd", ["cmd": "say", "id": p.id])
            _ = ingest.accept(p)
        case .success(.replay(let id)):
            let entry = try? (id.map { try storage.entry(id: $0) } ?? storage.history(limit: 1).first)
            guard let entry = entry ?? nil else {
                log.warning("cmd_rejected", ["cmd": "replay", "reason": "no such payment", "id": id ?? "-"])
                return
            }
            log.info("cmd", ["cmd": "replay", "id": entry.payment.id])
            _ = scheduler.submit(.replay(entry.payment))
        case .success(.summary):
            log.info("cmd", ["cmd": "summary"])
            _ = scheduler.submit(.summary)
        case .success(.test):
            log.info("cmd", ["cmd": "test"])
            _ = scheduler.submit(.test)
        }
    }
}
