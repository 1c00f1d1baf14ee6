import Soundbox
import Synchronization

/// What the device is doing and what is wrong with it, as `status`,
/// `doctor`, the retained MQTT status and the LED read it: views, not
/// services to call. Each part that changes has one writer: the
/// scheduler `playback`, the uplink `link`, the panel `gpio`.
struct DeviceState: Sendable {
    let settings: Settings
    let storage: Storage
    let voices: Voices
    /// The backend's public keys and the signature checks (docs/signing.md).
    let signing: Signing
    /// What the scheduler is speaking, the last payment, an audio fault.
    let playback: Shared<Scheduler.Status>
    /// The broker link's state, kept by the uplink (`enabled` false without one).
    let link: Shared<LinkStatus>
    /// GPIO lines that could not be had, for doctor (empty: all fine).
    let gpio: Shared<[String]>
    /// The update under way and what runs (version, slot, the last boot's reason).
    let updates: UpdateView
    let started: Double
    let environment: [String: String]
    /// Written by the image's first-boot provisioning when a file in the
    /// boot partition's soundbox/ folder was refused (image/README.md):
    /// `provisioning.fault` next to the settings file.
    let provisioningFaultPath: String

    /// What the provisioning refused ("soundbox/soundbox.conf:3: …"), if anything.
    var provisioningFault: String? {
        // One line for status and doctor; bounded, whatever is in the file,
        // and nothing invisible (it quotes the vendor's files).
        guard let data = Files.prefix(provisioningFaultPath, 2000) else { return nil }
        let lines = TextFile.lines(String(decoding: data, as: UTF8.self)).filter { !$0.isEmpty }
        let text = TextFile.excerpt(lines.joined(separator: "; "), limit: 2000)
        return text.isEmpty ? "refused (no reason given)" : text
    }

    /// What is broken now: `storage`, `audio`, `voice`, `takeover` (no
    /// database queries: the LED asks on every turn of the panel's loop).
    var faults: [String] {
        var faults: [String] = []
        if storage.fault != nil || storage.damagedWAL != nil { faults.append("storage") }
        if playback.withLock({ $0.audioFault }) != nil { faults.append("audio") }
        if !voices.health(default: settings.current[.voiceLang]).ok { faults.append("voice") }
        if link.withLock({ $0.takeover }) { faults.append("takeover") }
        if provisioningFault != nil { faults.append("provisioning") }
        return faults
    }
}

/// The device's state, for `status` on the socket and the retained MQTT
/// status topic (DESIGN §2).
struct StatusReport {
    var speaking: Bool
    var volume: Int
    var muted: Bool
    var queueDepth: Int
    var voice: String
    var lastID: String
    var uptime: Int
    var output: String
    var durable: Bool
    var clockSynced: Bool
    var faults: [String]
    /// Receipts not yet acknowledged by the broker (outbox and memory).
    var receiptsPending: Int
    /// The packs installed (what `voice.lang` and a payment's `lang` may name).
    var voices: [String]
    /// Packs payments asked for that are not installed.
    var voicesMissing: [String]
    /// `file`-scope keys changed in the file, waiting for a restart.
    var restartNeeded: [String]
    /// "off", "connecting", "connected", "taken over".
    var mqtt: String
    /// What runs (version, slot, why it last booted) and the update's state.
    var system: SystemInfo
    var update: UpdateRecord

    static func make(_ d: DeviceState) -> StatusReport {
        _ = d.storage.checkFile()   // a database file deleted meanwhile is restored now
        let config = d.settings.current
        let s = d.playback.withLock { $0 }
        let link = d.link.withLock { $0 }
        return StatusReport(
            speaking: s.speaking, volume: config[.audioVolume], muted: d.settings.muted,
            queueDepth: d.storage.pendingCount, voice: config[.voiceLang], lastID: s.lastID ?? "",
            uptime: Int(SystemClock.monotonic() - d.started), output: OutputName.of(config),
            durable: d.storage.durable, clockSynced: SystemClock.isSynchronized(environment: d.environment), faults: d.faults,
            receiptsPending: d.storage.receiptsPending, voices: d.voices.catalog.names, voicesMissing: d.voices.missing,
            restartNeeded: d.settings.restartNeeded.map(\.key), mqtt: link.summary,
            system: d.updates.system.withLock { $0 }, update: d.updates.record.withLock { $0 })
    }

    /// One field of the report, and whether the MQTT status carries it
    /// (the socket's `status` has them all).
    private enum Value { case int(Int), bool(Bool), text(String), list([String]), object(JSONObject, line: String) }
    private var fields: [(key: String, value: Value, mqtt: Bool)] {
        [("version", .text(system.version), true), ("slot", .text(system.slot ?? "none"), true),
         ("update", .object(update.json, line: update.summary), true), ("update_reason", .text(update.reason ?? "none"), false),
         ("boot_reason", .text(system.bootReason ?? "unknown"), true), ("state", .text(speaking ? "speaking" : "idle"), false),
         ("volume", .int(volume), true), ("muted", .bool(muted), true), ("queue_depth", .int(queueDepth), true),
         ("voice", .text(voice), true), ("last_id", .text(lastID), true), ("uptime_s", .int(uptime), false),
         ("output", .text(output), false), ("durable", .bool(durable), true), ("clock_synced", .bool(clockSynced), false),
         ("faults", .list(faults), true), ("receipts_pending", .int(receiptsPending), false), ("mqtt", .text(mqtt), false),
         ("voices", .list(voices), true), ("voices_missing", .list(voicesMissing), true), ("restart_needed", .list(restartNeeded), false)]
    }

    /// For the control socket: `key: value` lines; a list is comma-separated, or `none`.
    var reply: ControlReply {
        var r = ControlReply()
        for (key, value, _) in fields {
            switch value {
            case .int(let n): r.add(key, n)
            case .bool(let b): r.add(key, b)
            case .text(let t): r.add(key, t)
            case .list(let l): r.add(key, l.isEmpty ? "none" : l.joined(separator: ","))
            case .object(_, let line): r.add(key, line)
            }
        }
        return r
    }

    /// The retained MQTT status: {"online":true,"id":"counter-7","since_ms":1796350400123,"version":"0.1.0",...};
    /// without uptime for change detection. `id` is the device's own, as in
    /// its topic: a fleet tool reads a status that names another as a lie;
    /// `since_ms` when its connection began (docs/mqtt.md).
    func json(id: String, since: Int64, uptime: Bool) -> String {
        var o = JSONObject()
        o.add("online", true)
        o.add("id", id)
        o.add("since_ms", since)
        for (key, value, mqtt) in fields where mqtt {
            switch value {
            case .int(let n): o.add(key, n)
            case .bool(let b): o.add(key, b)
            case .text(let t): o.add(key, t)
            case .list(let l): o.add(key, l)
            case .object(let object, _): o.add(key, object)
            }
        }
        if uptime { o.add("uptime_s", self.uptime) }
        return o.text
    }
}

extension StatusReport {
    /// What the broker's will and a clean stop leave retained:
    /// {"online":false,"id":"counter-7","since_ms":1796350400123}, `since_ms` the
    /// start of the connection that ended.
    static func offline(id: String, since: Int64) -> String {
        var o = JSONObject()
        o.add("online", false)
        o.add("id", id)
        o.add("since_ms", since)
        return o.text
    }
}

enum OutputName {
    /// "alsa:default", "wav:/tmp/x.wav", "null".
    static func of(_ config: Config) -> String {
        switch config[.audioOutput] {
        case "wav": "wav:" + config.wavFile
        case "null": "null"
        default: "alsa:" + config[.audioDevice]
        }
    }
}

/// A value shared between threads.
final class Shared<T: Sendable>: Sendable {
    private let state: Mutex<T>
    init(_ value: T) { state = Mutex(value) }
    func withLock<R>(_ body: (inout T) -> R) -> R { state.withLock { body(&$0) } }
}

struct LinkStatus: Sendable {
    var enabled = false
    var connected = false
    var endpoint = ""
    /// Another client keeps taking our session (TakeoverWatch).
    var takeover = false
    /// MQTT protocol level of the link: 5, or 4 (3.1.1) when the broker refused 5.
    var protocolLevel = 0
    /// The last two different problems, most recent last ("certificate
    /// verify failed; connect to ... failed: A TLS error occurred").
    var lastError: String?

    var summary: String {
        !enabled ? "off" : takeover ? "taken over" : connected ? "connected" : "connecting"
    }

    mutating func noteError(_ message: String) {
        guard let last = lastError?.split(separator: "; ", omittingEmptySubsequences: false).last, last != message else {
            if lastError == nil { lastError = message }
            return
        }
        lastError = String(last) + "; " + message
    }
}
