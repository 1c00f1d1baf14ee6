import Glibc
import Soundbox
import GPIO
import SoundboxAudio
import SoundboxStore
import SoundboxThreads

/// soundboxd: services started in order (store, voices, scheduler, control
/// socket) and stopped in reverse on SIGTERM. The main thread only waits
/// for signals and the watchdog's beat, so an idle daemon does not wake.
public enum Daemon {
    public static let usage = """
        Usage: soundboxd [--config FILE] [--state-dir DIR] [--socket PATH] [--voices DIR]
               soundboxd --check-config [--config FILE]
               soundboxd --version | --help

        The payment soundbox daemon: takes payments from the bank's broker
        (MQTT), keeps them in a durable queue (DIR/soundbox.db), speaks them
        one at a time, obeys the mute switch and volume buttons (GPIO), and
        serves soundboxctl on the control socket. Settings: /etc/soundbox/soundbox.conf
        (docs/config.md); each path can be overridden here.

          --config FILE     settings file (default /etc/soundbox/soundbox.conf, if present)
          --state-dir DIR   state.dir: where soundbox.db lives
          --socket PATH     control.socket
          --voices DIR      voice.dir
          --check-config    validate the settings and exit (0 valid, 78 invalid)

        Signals: SIGTERM/SIGINT stop (within 2 s), SIGHUP re-reads the settings file.
        Exit status: 0 stopped, 1 failed to start, 2 usage, 78 invalid configuration.
        """

    public static func main(_ arguments: [String], environment: [String: String]) -> Int32 {
        var flags: [String: String] = [:]
        var checkOnly = false
        var it = arguments.makeIterator()
        while let a = it.next() {
            switch a {
            case "--version": print("soundboxd \(soundboxVersion)"); return 0
            case "--help", "-h": print(usage); return 0
            case "--check-config": checkOnly = true
            case "--config", "--state-dir", "--socket", "--voices":
                guard let v = it.next() else { printErr("\(a) needs a value"); return 2 }
                flags[a] = v
            default: printErr("unknown argument '\(a)' (see --help)"); return 2
            }
        }
        let configPath = flags["--config"]
        var file: Config
        do {
            file = try Config.load(path: configPath)
            for (flag, key) in [("--state-dir", ConfigKey.stateDir), ("--socket", .controlSocket), ("--voices", .voiceDir)] {
                if let v = flags[flag] { try? file.set(key.name, v) }
            }
        } catch {
            printErr(error.description)
            return 78   // EX_CONFIG
        }
        if checkOnly { print("configuration OK"); return 0 }
        return run(file, configPath: configPath, flags: flags, environment: environment)
    }

    static func run(_ file: Config, configPath: String?, flags: [String: String], environment: [String: String]) -> Int32 {
        let log = Log("daemon")
        let started = SystemClock.monotonic()
        // Signals are taken synchronously by the main thread only: block
        // them before any thread starts so every thread inherits the mask.
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
        signal(SIGXFSZ, SIG_IGN)   // a file-size limit then fails the write (EFBIG) instead of killing us

        // 1. Store. A broken database must not become a crash loop: run on
        //    memory and say so in status and doctor.
        let stateDir = file[.stateDir]
        mkdir(stateDir, 0o750)
        var store: Store?
        var storeError: String?
        do { store = try Store(path: stateDir + "/soundbox.db") } catch {
            storeError = error.description
            log.error("database_unavailable", ["path": stateDir + "/soundbox.db", "error": error.description])
        }
        let settings = Settings(file: file, store: store)
        let config = settings.current

        // 2. Voices, decoded once.
        let bank = VoiceBank(directory: config[.voiceDir])
        let (voiceOK, voiceReport) = loadVoices(bank, config[.voiceLang], log)

        // 3. Ingest and the scheduler thread.
        let wake = Wakeup(), outbox = Wakeup()
        let backlog = Backlog()
        let ingest = Ingest(store: store, backlog: backlog, settings: settings, wake: wake, outbox: outbox)
        let scheduler = Scheduler(store: store, backlog: backlog, settings: settings, ingest: ingest, wake: wake,
                                  bank: bank, environment: environment)
        prune(store, config, log)
        let schedulerThread = ServiceThread(name: "scheduler") { scheduler.run() }

        let context = Context(settings: settings, store: store, storeError: storeError, backlog: backlog, ingest: ingest,
                              scheduler: scheduler, voiceReport: voiceReport, voiceOK: voiceOK, started: started,
                              environment: environment, link: Shared(LinkStatus()), gpio: Shared([]))
        // 4. The broker link: payments in, receipts and status out.
        var uplink: Uplink?
        var uplinkThread: ServiceThread?
        if config.bool(.mqttEnabled) {
            let device = config[.deviceID].isEmpty ? hostname() : config[.deviceID]
            let u = Uplink(context: context, events: outbox, device: device)
            do { try u.start(config, device: device) } catch {
                log.error("mqtt_failed", ["error": error.description])
                scheduler.stop()
                schedulerThread.join(timeout: 2)
                return 1
            }
            uplink = u
            uplinkThread = ServiceThread(name: "uplink") { u.run() }
        }

        // 5. Mute switch, buttons, LED (the box runs on without them).
        var panel: Panel?
        var panelThread: ServiceThread?
        if config.bool(.gpioEnabled) {
            let p = Panel(context: context, backend: LibgpiodV1(), config: config)
            p.open(config)
            if p.hasLines {
                panel = p
                panelThread = ServiceThread(name: "panel") { p.run() }
            }
        }

        // 6. Control socket.
        let server: ControlServer
        do {
            server = try ControlServer(path: config[.controlSocket], group: config[.controlGroup], commands: Commands(context: context))
        } catch {
            log.error("control_socket_failed", ["error": error.description])
            panel?.stop()
            uplink?.stop()
            scheduler.stop()
            schedulerThread.join(timeout: 2)
            return 1
        }
        let serverThread = ServiceThread(name: "control") { server.run() }

        let notifier = ServiceNotifier(environment: environment)
        let pending = (try? store?.pendingCount()) ?? 0
        log.info("ready", ["version": soundboxVersion, "socket": server.path, "pending": "\(pending)",
                           "startup_ms": "\(Int((SystemClock.monotonic() - started) * 1000))"])
        notifier.send("READY=1\nSTATUS=\(pending) pending, voice \(config[.voiceLang]), output \(OutputName.of(config))")

        // 7. Wait for signals; beat the watchdog while the scheduler lives;
        //    prune hourly.
        var nextPrune = SystemClock.monotonic() + 3600
        while true {
            var timeout = nextPrune - SystemClock.monotonic()
            if let w = notifier.watchdogInterval { timeout = min(timeout, w) }
            var ts = timespec(tv_sec: Int(max(timeout, 0)), tv_nsec: Int(max(timeout, 0).truncatingRemainder(dividingBy: 1) * 1e9))
            let sig = sigtimedwait(&signals, nil, &ts)
            if sig == SIGTERM || sig == SIGINT { break }
            if sig == SIGHUP {
                reload(settings, configPath: configPath, flags: flags, log: log)
                continue
            }
            if notifier.watchdogInterval != nil && healthy(scheduler) { notifier.send("WATCHDOG=1") }
            if SystemClock.monotonic() >= nextPrune {
                prune(store, settings.current, log)
                nextPrune = SystemClock.monotonic() + 3600
            }
        }

        // 8. Stop in reverse order, within 2 s: no new requests, the broker
        //    link (offline status published), then the scheduler (an
        //    interrupted payment stays `playing`, spoken again at the next start).
        log.info("stopping")
        notifier.send("STOPPING=1")
        server.stop()
        panel?.stop()
        panelThread?.join(timeout: 0.2)
        uplink?.stop()
        uplinkThread?.join(timeout: 0.5)
        scheduler.stop()
        if !schedulerThread.join(timeout: 1.8) { log.warning("scheduler_did_not_stop") }
        serverThread.join(timeout: 0.1)
        log.info("stopped", ["uptime_s": "\(Int(SystemClock.monotonic() - started))"])
        return 0
    }

    static func loadVoices(_ bank: VoiceBank, _ lang: String, _ log: Log) -> (Bool, String) {
        do {
            let pack = try bank.load(lang)
            for (clip, why) in pack.broken.sorted(by: { $0.key < $1.key }) {
                log.warning("clip_broken", ["pack": lang, "clip": clip, "error": why])
            }
            if pack.broken.isEmpty { return (true, "\(lang): \(pack.clips.count) clips") }
            return (false, "\(lang): \(pack.broken.count) clips missing or broken (\(pack.broken.keys.sorted().joined(separator: " "))); they play from the fallback pack or as a chime")
        } catch {
            log.error("voice_unavailable", ["pack": lang, "error": error.description])
            return (false, "\(error.description); payments play as a chime")
        }
    }

    static func reload(_ settings: Settings, configPath: String?, flags: [String: String], log: Log) {
        do {
            var file = try Config.load(path: configPath)
            for (flag, key) in [("--state-dir", ConfigKey.stateDir), ("--socket", .controlSocket), ("--voices", .voiceDir)] {
                if let v = flags[flag] { try? file.set(key.name, v) }
            }
            settings.reload(file: file)
            log.info("reloaded", ["file": configPath ?? Config.defaultPath])
        } catch {
            log.error("reload_failed", ["error": error.description, "kept": "previous settings"])
        }
    }

    static func prune(_ store: Store?, _ config: Config, _ log: Log) {
        guard let store else { return }
        let now = SystemClock.nowMs()
        let keepMs = Int64(config.integer(.queueRetentionDays)) * 86_400_000
        do {
            let n = try store.prune(before: now - keepMs, keep: config.integer(.queueHistoryMax), dedupBefore: now - keepMs)
            if n > 0 { log.info("pruned", ["entries": "\(n)"]) }
        } catch {
            log.error("prune_failed", ["error": error.description])
        }
    }

    /// Alive: waiting for work, or showed a sign of life recently.
    static func healthy(_ scheduler: Scheduler) -> Bool {
        if scheduler.wake.isIdle { return true }
        let beat = Double(scheduler.heartbeat.load(ordering: .relaxed)) / 1000
        return SystemClock.monotonic() - beat < 10
    }

    static func hostname() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        gethostname(&buf, buf.count)
        return String(cString: buf)
    }

    static func printErr(_ message: String) {
        let line = Array("soundboxd: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
