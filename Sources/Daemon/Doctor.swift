import GPIO
import Glibc
import Soundbox
import SoundboxSystem

/// `doctor`: one record per check, each OK or a fix-it hint.
enum Doctor {
    static func run(_ d: DeviceState) -> ControlReply {
        var r = ControlReply()
        func check(_ name: String, _ status: String, _ detail: String, _ hint: String? = nil) {
            r.add("check", name)
            r.add("status", status)
            r.add("detail", detail)
            if let hint, status != "ok" { r.add("hint", hint) }
        }
        let config = d.settings.current
        if let audioFault = d.playback.withLock({ $0.audioFault }) {
            check("audio", "fail", "\(OutputName.of(config)): \(audioFault)",
                  "check the speaker's cable or USB plug; `aplay -l` lists sound cards; audio.device names the one to use")
        } else {
            check("audio", "ok", OutputName.of(config))
        }

        let voice = d.voices.health(default: config[.voiceLang])
        let missing = d.voices.missing
        if !voice.ok {
            check("voice", "fail", voice.detail,
                  "run `soundboxctl voice check \(config[.voiceDir])/\(config[.voiceLang])`; set voice.lang to an installed pack or reinstall it")
        } else if !missing.isEmpty {
            check("voice", "warn", voice.detail + "; payments asked for packs that are not installed: \(missing.joined(separator: ", ")) (read by \(config[.voiceLang]), or by another pack where it does not read their currency: docs/grammars.md)",
                  "install those voice packs in \(config[.voiceDir]), or ask the backend not to send that lang")
        } else {
            check("voice", "ok", voice.detail)
        }

        let link = d.link.withLock { $0 }
        let device = config[.deviceID].isEmpty ? "the hostname" : config[.deviceID]
        if !link.enabled {
            check("broker", "ok", "MQTT off (mqtt.enabled = false)")
        } else if link.takeover {
            check("broker", "fail", "another client keeps taking this device's session at \(link.endpoint) (client id \(device)): payments go to whichever is connected; link prompts are not spoken meanwhile",
                  "another box uses this device id (or another client its credentials): make device.id unique per box (two boxes with the same id split the payments); on the broker, bind client ids to credentials (docs/mqtt.md, \"Broker settings for a fleet\")")
        } else if link.connected {
            check("broker", "ok", "connected to \(link.endpoint) as \(device), MQTT \(link.protocolLevel == 5 ? "5" : "3.1.1")")
        } else {
            check("broker", "fail", "not connected to \(link.endpoint): \(link.lastError ?? "connecting")",
                  "check the network and mqtt.host/mqtt.port; with TLS, that mqtt.tls.ca signed the broker's certificate and that the certificate names mqtt.host; payments queued by the broker arrive once connected")
        }

        let gpioProblems = d.gpio.withLock { $0 }
        if !config[.gpioEnabled] {
            check("gpio", "ok", "GPIO off (gpio.enabled = false)")
        } else if gpioProblems.isEmpty {
            check("gpio", "ok", "\(config[.gpioChip]): mute switch, buttons and LED lines held (libgpiod \(GPIO.libraryVersion))")
        } else {
            check("gpio", "fail", gpioProblems.joined(separator: "; ") + "; the box runs without them",
                  "check gpio.chip and the gpio.*.line offsets (`gpioinfo` lists chips and lines, and who holds a busy line); the user needs access to /dev/gpiochip* (group gpio)")
        }

        let dir = config[.stateDir]
        let db = d.storage.path
        if let fault = d.storage.checkFile() {
            let held = "payments are held in memory and still announced"
            switch fault.kind {
            case .full:
                check("database", "fail", "\(db): writes fail: \(fault.message); \(held)",
                      "free space on the disk holding \(dir) (df -h \(dir)); soundboxd writes everything held in memory as soon as it can")
            case .permission:
                check("database", "fail", "\(db): not writable: \(fault.message); \(held)",
                      "soundboxd cannot write to \(dir): check that the file system is not read-only (`mount`, `dmesg` for SD card errors) and the owner (`ls -ld \(dir)`: the soundbox user)")
            case .corrupt:
                check("database", "fail", "\(db): \(fault.message); \(held)", recovery(db))
            case .replaced:
                check("database", "fail", "\(fault.message); \(held)",
                      "if the new file is meant (a restored backup), restart soundboxd to use it; otherwise move it away and soundboxd restores its own database")
            case .other:
                check("database", "fail", "\(db): writes fail: \(fault.message); \(held)",
                      "the disk reports errors: check `dmesg`; an SD card that fails must be replaced")
            }
        } else if let damaged = d.storage.damagedWAL {
            let copies = damaged.copies.isEmpty ? "no copy could be kept" : "kept as it was: " + damaged.copies.joined(separator: ", ")
            check("database", "fail", "\(db)-wal was damaged (\(damaged.found?.description ?? "found at an earlier start")); \(copies): "
                      + "payments acknowledged in those transactions may be missing from the queue, the history and dedup",
                  "ask the backend to re-send what it sent before the damage was found (the log's wal_damaged line has the time): a re-sent payment the box still knows is answered duplicate, one it lost is spoken (again, if it had been); "
                      + (damaged.copies.isEmpty ? "the fault clears at the next start" : "keep the copy for whoever looks into it, then delete it (rm \(damaged.copies.joined(separator: " "))) to clear the fault"))
        } else if let quick = d.storage.quickCheck(), quick != "ok" {
            check("database", "fail", "\(db): \(quick)", recovery(db))
        } else {
            check("database", "ok", "\(db): \(d.storage.pendingCount) pending")
        }

        if let free = Paths.freeBytes(dir) {
            let mb = free / 1_048_576
            if access(dir, W_OK) != 0 {
                check("disk", "fail", "\(dir) is not writable (\(String(cString: strerror(errno)))); \(mb) MB free",
                      "remount the file system read-write, or give the soundbox user the folder")
            } else {
                check("disk", mb < 20 ? "fail" : mb < 100 ? "warn" : "ok", "\(mb) MB free in \(dir)",
                      "delete old files or logs on that disk; soundboxd needs about 20 MB")
            }
        } else {
            check("disk", "fail", "\(dir): \(String(cString: strerror(errno)))", "create it, writable by soundboxd")
        }

        if SystemClock.isSynchronized(environment: d.environment) {
            check("clock", "ok", "synchronised")
        } else {
            check("clock", "warn", "not synchronised: stale payments are spoken, not expired",
                  "check network time: `timedatectl timesync-status` or `chronyc tracking`")
        }

        let signing = d.signing.doctor()
        check("signing", signing.status, signing.detail, signing.hint)

        if let fault = d.provisioningFault {
            check("provisioning", "fail", fault + "; nothing from that provisioning was applied",
                  "fix that file in the soundbox/ folder of the boot partition (or remove it) and reboot; then delete \(d.provisioningFaultPath)")
        } else {
            check("provisioning", "ok", "no provisioning refused")
        }

        let system = d.updates.system.withLock { $0 }, update = d.updates.record.withLock { $0 }
        let runs = "version \(system.version)" + (system.slot.map { " on slot \($0)" } ?? "") + "; last boot: \(system.bootReason ?? "unknown")"
        let asked = update.version.map { " (\($0))" } ?? ""
        switch update.phase {
        case .rolledBack:
            check("update", "warn", runs + "; the update\(asked) was rolled back: \(update.reason ?? "no reason kept")",
                  "the tried slot was left and marked bad; fix what the reason says (network, broker, the bundle) and ask again (soundboxctl update install, or the backend's cmd update)")
        case .failed:
            check("update", "warn", runs + "; the last update\(asked) failed: \(update.reason ?? "no reason kept")",
                  "nothing was written to a slot; fix what the reason says and ask again")
        default:
            if system.bootReason == "watchdog" {
                check("update", "warn", runs + "; update: \(update.summary)",
                      "the hardware watchdog reset the board: the system hung; `journalctl -b -1` may say why")
            } else {
                check("update", "ok", runs + "; update: \(update.summary)")
            }
        }

        let waiting = d.settings.restartNeeded
        if waiting.isEmpty {
            check("config", "ok", "the settings in use are the file's (and the overlay's)")
        } else {
            let list = waiting.map { "\($0.key) (in use: '\($0.inUse)', file: '\($0.inFile)')" }.joined(separator: "; ")
            check("config", "warn", "changed in the settings file, in use only after a restart: \(list)",
                  "restart soundboxd (systemctl restart soundboxd) to use the new values")
        }
        return r
    }

    static func recovery(_ db: String) -> String {
        "stop soundboxd, move the file aside (mv \(db) \(db).broken; also any -wal/-shm files) and start soundboxd: "
            + "a new database is created; pending payments in the old one can be salvaged with `sqlite3 \(db).broken .recover`"
    }
}
