import Glibc
import Soundbox
import GPIO
import SoundboxAudio
import SoundboxStore
import SoundboxSystem

/// soundboxd: services started in order (scheduler, broker link, panel,
/// control socket) and stopped in reverse on SIGTERM, under one deadline.
/// The main thread only waits for signals and the watchdog's beat, so an
/// idle daemon does not wake.
public enum Daemon {
    public static let usage = """
        Usage: soundboxd [--config FILE] [--state-dir DIR] [--socket PATH] [--voices DIR]
               soundboxd --check-config [--config FILE]
               soundboxd --migrate [--config FILE] [--state-dir DIR]
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
          --check-config    validate the settings (and that voice.lang is installed) and exit (0 valid, 78 invalid)
          --migrate         open the database as a start would (made, or its schema brought up to date),
                            print its schema version and exit (0, or 1 with the reason)

        One soundboxd per state.dir: a second one exits at once (status 1).
        Signals: SIGTERM/SIGINT stop (within 2 s), SIGHUP re-reads the settings file
        (keys that only take effect at start are logged as needing a restart) and
        the signing keys (payment.keys; docs/signing.md).
        Exit status: 0 stopped, 1 failed to start, 2 usage, 78 invalid configuration.
        """

    /// How long a stop may take, all services together.
    static let stopDeadline = 2.0

    /// - Parameter gpio: the GPIO lines' backend (libgpiod on a box; a test
    ///   may bring its own, see Panel and Tests/DaemonTests/PanelTests).
    public static func main(_ arguments: [String], environment: [String: String],
                            gpio: any GPIOBackend = Libgpiod()) -> Int32 {
        var flags: [String: String] = [:]
        var checkOnly = false
        var it = arguments.makeIterator()
        while let a = it.next() {
            switch a {
            case "--version": print("soundboxd \(soundboxVersion)"); return 0
            case "--help", "-h": print(usage); return 0
            case "--check-config": checkOnly = true
            case "--migrate": flags[a] = "yes"
            case "--config", "--state-dir", "--socket", "--voices":
                guard let v = it.next() else { printErr("\(a) needs a value"); return 2 }
                flags[a] = v
            default: printErr("unknown argument '\(a)' (see --help)"); return 2
            }
        }
        let configPath = flags["--config"]
        let file: Config, voices: VoiceCatalog
        do { (file, voices) = try load(configPath, flags: flags) } catch {
            printErr(error.description)
            return 78   // EX_CONFIG
        }
        if checkOnly { print("configuration OK"); return 0 }
        // A name lookup (libmosquitto's, of mqtt.host, at each attempt)
        // gives up after 1 s per name server, not glibc's 5 s × 2: on a
        // silent link it holds the attempt, and the way back would be found
        // that much later (measured: 10.0 s → 1.0 s; docs/mqtt.md). An
        // administrator's own RES_OPTIONS wins.
        setenv("RES_OPTIONS", "timeout:1 attempts:1", 0)
        return run(file, voices: voices, configPath: configPath, flags: flags, environment: environment, gpio: gpio)
    }

    /// The settings file with the flags on top, and the voice packs of its
    /// voice.dir; throws if the file is invalid or names a pack that is not
    /// installed (when any is).
    static func load(_ configPath: String?, flags: [String: String]) throws(ConfigFileError) -> (Config, VoiceCatalog) {
        var file = try Config.load(path: configPath)
        for (flag, key) in [("--state-dir", TextKey.stateDir), ("--socket", .controlSocket), ("--voices", .voiceDir)] {
            if let v = flags[flag] {
                do { try file.set(key.key, v) } catch { throw ConfigFileError(source: flag, line: nil, error: error) }
            }
        }
        if !file.isSet(TextKey.voiceDir.key) { try? file.set(TextKey.voiceDir.key, VoiceCatalog.defaultDirectory()) }
        let voices = VoiceCatalog.scan(directory: file[.voiceDir])
        let lang = file[.voiceLang]
        if let installed = voices.canonical(lang) {
            try? file.set(TextKey.voiceLang.key, installed)
        } else if !voices.packs.isEmpty {
            // With no pack at all (a broken install) the daemon still runs and chimes; a typo is an error.
            let source = configPath ?? Config.defaultPath
            throw ConfigFileError(source: source, line: Config.line(of: TextKey.voiceLang.key, in: source),
                                  error: .badValue(key: TextKey.voiceLang.key.name, value: lang,
                                                   allowed: "an installed voice pack (\(voices.names.joined(separator: ", ")) in \(voices.directory))"))
        }
        return (file, voices)
    }

    static func run(_ file: Config, voices catalog: VoiceCatalog, configPath: String?, flags: [String: String],
                    environment: [String: String], gpio: any GPIOBackend) -> Int32 {
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

        // 0. One daemon per state folder, decided before anything is opened
        //    or connected (a second one would split the broker session).
        let stateDir = file[.stateDir]
        mkdir(stateDir, 0o750)
        let lock: StateLock
        do { lock = try StateLock(directory: stateDir) } catch {
            log.error("already_running", ["state_dir": stateDir, "error": error.description])
            printErr(error.description)
            return 1
        }
        defer { withExtendedLifetime(lock) {} }
        if flags["--migrate"] != nil {
            // (under the state folder's lock: never while a daemon runs on it)
            let path = stateDir + "/soundbox.db"
            do {
                let store = try Store(path: path)
                print("\(path): schema \(store.schemaVersion) (this program's: \(Store.programSchema))")
                return 0
            } catch {
                printErr("\(path): \(error.description)")
                return 1
            }
        }
        ControlServer.reserveDescriptors()   // soft RLIMIT_NOFILE up to the hard limit (at most 65536), before anything is opened

        // 1. Storage: a broken database is a fault, not a crash loop.
        let boot = environment["SOUNDBOX_TEST_BOOT_ID"] ?? ClockReading.bootID
        let wake = Wakeup(), changes = Changes()
        let storage = Storage(path: stateDir + "/soundbox.db", faultChanged: { changes.post(.state) }) { [environment] in
            ClockReading.now(synced: SystemClock.isSynchronized(environment: environment), boot: boot)
        }
        // 2. Voices: the default pack decoded now, the others when first asked for.
        let voices = Voices(catalog: catalog)
        let bank = VoiceBank(catalog: catalog)
        let settings = Settings(file: file, storage: storage, voices: catalog)
        let config = settings.current
        voices.pack(config[.voiceLang], from: bank)

        // 3. Ingest and the scheduler; what the device shows.
        let ingest = Ingest(storage: storage, settings: settings, voices: voices, scheduler: wake, changes: changes)
        let scheduler = Scheduler(storage: storage, settings: settings, voices: voices, bank: bank, wake: wake, changes: changes,
                                  environment: environment)
        scheduler.pruneHistory()
        let configDir = (configPath ?? Config.defaultPath).split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let deviceID = config[.deviceID].isEmpty ? hostname() : config[.deviceID]
        let signing = Signing(config: config, device: deviceID, storage: storage, environment: environment)
        let device = DeviceState(settings: settings, storage: storage, voices: voices, signing: signing,
                                 playback: scheduler.status, link: Shared(LinkStatus()), gpio: Shared([]),
                                 updates: UpdateView(), started: started, environment: environment,
                                 provisioningFaultPath: (configDir.isEmpty ? "." : configDir) + "/provisioning.fault")
        let updater = Updater(config: config, view: device.updates, storage: storage, wake: wake, playback: scheduler.status,
                              link: device.link, settings: settings, changes: changes, environment: environment,
                              bootID: boot)

        // 4. The control socket is bound now (a live one means another
        //    soundboxd: refused before the broker is contacted) and served last.
        let server: ControlServer
        do {
            server = try ControlServer(path: config[.controlSocket], group: config[.controlGroup],
                                       commands: Commands(context: .init(device: device, ingest: ingest, scheduler: scheduler,
                                                                         changes: changes, updater: updater)))
        } catch {
            log.error("control_socket_failed", ["error": error.description])
            printErr(error.description)
            return 1
        }

        let services = ServiceGroup()
        services.start(scheduler)
        // 5. The broker link: payments in, receipts and status out.
        if config[.mqttEnabled] {
            do {
                let uplink = try Uplink(config: config, deviceID: deviceID, device: device,
                                        inbox: Inbox(settings: settings, storage: storage, ingest: ingest, scheduler: scheduler,
                                                     signing: signing, changes: changes, updater: updater),
                                        changes: changes, onLink: { scheduler.linkChanged($0) })
                try uplink.connect()
                services.start(uplink)
            } catch {
                log.error("mqtt_failed", ["error": error.description])
                services.stop(within: stopDeadline)
                server.stop()
                return 1
            }
        }
        // 6. Mute switch, buttons, LED (the box runs on without them).
        if config[.gpioEnabled] {
            let panel = Panel(device: device, scheduler: scheduler, changed: changes, backend: gpio, config: config)
            panel.open(config)
            if panel.hasLines { services.start(panel) }
        }
        // 7. Updates: a download or install a power cut interrupted goes on; a tried slot commits.
        services.start(updater)
        services.start(ControlService(server))

        let notifier = ServiceNotifier(environment: environment)
        let pending = storage.pendingCount
        log.info("ready", ["version": soundboxVersion, "socket": server.path, "pending": "\(pending)",
                           "startup_ms": "\(Int((SystemClock.monotonic() - started) * 1000))"])
        notifier.send("READY=1\nSTATUS=\(pending) pending, voice \(config[.voiceLang]), output \(OutputName.of(config))")

        // 8. Wait for signals; beat the watchdog (under systemd) while the
        //    scheduler lives. (Pruning follows activity: the scheduler's.)
        while true {
            let sig: Int32
            if let w = notifier.watchdogInterval {
                var ts = timespec(tv_sec: Int(w), tv_nsec: Int(w.truncatingRemainder(dividingBy: 1) * 1e9))
                sig = sigtimedwait(&signals, nil, &ts)
            } else {
                sig = sigwaitinfo(&signals, nil)
            }
            if sig == SIGTERM || sig == SIGINT { break }
            if sig == SIGHUP {
                reload(settings, configPath: configPath, flags: flags, log: log)
                signing.reload()
                changes.post(.state)   // the status and the LED may have changed (audio.mute in the file)
                continue
            }
            if notifier.watchdogInterval != nil && healthy(scheduler) { notifier.send("WATCHDOG=1") }
        }

        // 9. Stop in reverse order of start, all within stopDeadline: no new
        //    requests, no buttons, the broker link (offline status published),
        //    then the scheduler (an interrupted payment stays `playing`,
        //    spoken again at the next start).
        log.info("stopping")
        notifier.send("STOPPING=1")
        let stopStarted = SystemClock.monotonic()
        let late = services.stop(within: stopDeadline)
        log.info("stopped", ["uptime_s": "\(Int(SystemClock.monotonic() - started))",
                             "stop_ms": "\(Int((SystemClock.monotonic() - stopStarted) * 1000))",
                             "late": late.isEmpty ? "none" : late.joined(separator: ",")])
        return 0
    }

    static func reload(_ settings: Settings, configPath: String?, flags: [String: String], log: Log) {
        do throws(ConfigFileError) {
            var (file, _) = try load(configPath, flags: flags)
            // Packs are found at start: one added since then needs a restart.
            guard let lang = settings.voices.canonical(file[.voiceLang]) else {
                let source = configPath ?? Config.defaultPath
                throw ConfigFileError(source: source, line: Config.line(of: TextKey.voiceLang.key, in: source),
                                      error: .badValue(key: TextKey.voiceLang.key.name, value: file[.voiceLang],
                                                       allowed: "a voice pack installed when soundboxd started (\(settings.voices.names.joined(separator: ", ")))"))
            }
            try? file.set(TextKey.voiceLang.key, lang)
            settings.reload(file: file)
            log.info("reloaded", ["file": configPath ?? Config.defaultPath])
        } catch {
            log.error("reload_failed", ["error": error.description, "kept": "previous settings"])
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
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func printErr(_ message: String) {
        let line = Array("soundboxd: \(message)\n".utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

/// The control socket as a service: accepts until stopped.
final class ControlService: Service, @unchecked Sendable {
    let name = "control"
    private let server: ControlServer
    init(_ server: ControlServer) { self.server = server }
    func run() { server.run() }
    func shutdown(deadline: Double) { server.stop() }
}

/// An exclusive lock on the state folder (flock on the folder itself, so it
/// works on a read-only file system too), held for the process's life: a
/// second soundboxd with the same state.dir fails before it opens the
/// database or contacts the broker.
final class StateLock {
    private let fd: Int32

    init(directory: String) throws(DaemonError) {
        fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .errno("open(\(directory))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let e = errno
            close(fd)
            if e == EWOULDBLOCK { throw DaemonError("another soundboxd is already running with state.dir \(directory)") }
            errno = e
            throw .errno("flock(\(directory))")
        }
    }
    deinit { close(fd) }
}
