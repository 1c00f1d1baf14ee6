import Glibc
import Soundbox

/// `doctor`: one record per check, each OK or a fix-it hint.
enum Doctor {
    static func run(_ c: Context) -> ControlReply {
        var r = ControlReply()
        func check(_ name: String, _ status: String, _ detail: String, _ hint: String? = nil) {
            r.add("check", name)
            r.add("status", status)
            r.add("detail", detail)
            if let hint, status != "ok" { r.add("hint", hint) }
        }
        let config = c.settings.current
        let audioFault = c.scheduler.status.withLock { $0.audioFault }
        if let audioFault {
            check("audio", "fail", "\(OutputName.of(config)): \(audioFault)",
                  "check the speaker's cable or USB plug; `aplay -l` lists sound cards; audio.device names the one to use")
        } else {
            check("audio", "ok", OutputName.of(config))
        }

        check("voice", c.voiceOK ? "ok" : "fail", c.voiceReport,
              "run `soundboxctl voice check \(config[.voiceDir])/\(config[.voiceLang])`; reinstall the voice pack")

        let link = c.link.withLock { $0 }
        if !link.enabled {
            check("broker", "ok", "MQTT off (mqtt.enabled = false)")
        } else if link.connected {
            check("broker", "ok", "connected to \(link.endpoint) as \(config[.deviceID].isEmpty ? "the hostname" : config[.deviceID])")
        } else {
            check("broker", "fail", "not connected to \(link.endpoint): \(link.lastError ?? "connecting")",
                  "check the network and mqtt.host/mqtt.port; with TLS, that mqtt.tls.ca signed the broker's certificate and that the certificate names mqtt.host; payments queued by the broker arrive once connected")
        }

        let gpioProblems = c.gpio.withLock { $0 }
        if !config.bool(.gpioEnabled) {
            check("gpio", "ok", "GPIO off (gpio.enabled = false)")
        } else if gpioProblems.isEmpty {
            check("gpio", "ok", "\(config[.gpioChip]): mute switch, buttons and LED lines held")
        } else {
            check("gpio", "fail", gpioProblems.joined(separator: "; ") + "; the box runs without them",
                  "check gpio.chip and the gpio.*.line offsets (`gpioinfo` lists chips and lines, and who holds a busy line); the user needs access to /dev/gpiochip* (group gpio)")
        }

        let storageFault = c.backlog.state.withLock { $0.storageFault }
        let dbPath = config[.stateDir] + "/soundbox.db"
        if let store = c.store {
            let quick = store.quickCheck()
            if quick != "ok" {
                check("database", "fail", "\(dbPath): \(quick)", recovery(dbPath))
            } else if let storageFault {
                check("database", "fail", "\(dbPath): writes fail: \(storageFault); payments are held in memory",
                      "free space on the disk holding \(config[.stateDir]) (df -h), then restart soundboxd")
            } else {
                let pending = (try? store.pendingCount()) ?? 0
                check("database", "ok", "\(dbPath): \(pending) pending")
            }
        } else {
            check("database", "fail", "\(dbPath): \(c.storeError ?? "cannot be opened"); payments are held in memory", recovery(dbPath))
        }

        var fs = statvfs()
        if statvfs(config[.stateDir], &fs) == 0 {
            let free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
            let mb = free / 1_048_576
            let status = mb < 20 ? "fail" : mb < 100 ? "warn" : "ok"
            check("disk", status, "\(mb) MB free in \(config[.stateDir])",
                  "delete old files or logs on that disk; soundboxd needs about 20 MB")
        } else {
            check("disk", "fail", "\(config[.stateDir]): \(String(cString: strerror(errno)))", "create it, writable by soundboxd")
        }

        if SystemClock.isSynchronized(environment: c.environment) {
            check("clock", "ok", "synchronised")
        } else {
            check("clock", "warn", "not synchronised: stale payments are spoken, not expired",
                  "check network time: `timedatectl timesync-status` or `chronyc tracking`")
        }
        return r
    }

    static func recovery(_ db: String) -> String {
        "stop soundboxd, move the file aside (mv \(db) \(db).broken; also any -wal/-shm files) and start soundboxd: "
            + "a new database is created; pending payments in the old one can be salvaged with `sqlite3 \(db).broken .recover`"
    }
}
