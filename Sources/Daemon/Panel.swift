import CLinux
import GPIO
import Glibc
import Soundbox
import SoundboxSystem
import Synchronization

/// The merchant's hands on the box (docs/gpio.md): the mute switch, the
/// volume buttons and the status LED, on one thread that sleeps in poll(2)
/// until an edge, a gesture deadline or an LED blink is due.
final class Panel: Service, @unchecked Sendable {
    let name = "panel"
    /// What the LED shows (muted, a fault, the link); the panel writes `gpio`.
    private let device: DeviceState
    /// Where the buttons' requests go (prompts, replay, today's total).
    private let scheduler: Scheduler
    private let changed: Changes
    private let backend: any GPIOBackend
    private let log = Log("gpio")
    private var mute: (any EdgeInput)?
    private var buttons: [(Gestures.Button, any EdgeInput)] = []
    private var led: (any LogicalOutput)?
    private var gestures: Gestures
    private let debounce: Double
    private var stopPipe: [Int32] = [-1, -1]
    /// Signalled whenever what the LED shows may have changed (`.state`
    /// changes): it is looked at again then, and only then.
    private let changes = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    /// The mute switch moved at this time: its level counts once it has
    /// been still for the debounce time.
    private var muteSettlesAt: Double?

    /// - Parameter changed: told when the volume or the mute switch changed
    ///   (the uplink publishes status); tells the panel of `.state` changes.
    init(device: DeviceState, scheduler: Scheduler, changed: Changes, backend: any GPIOBackend, config: Config) {
        self.device = device
        self.scheduler = scheduler
        self.changed = changed
        self.backend = backend
        changed.signalState(eventfd: changes)
        debounce = Double(config[.gpioDebounce]) / 1000
        var timing = Gestures.Timing()
        timing.debounce = debounce
        gestures = Gestures(timing: timing)
    }

    /// Requests every fitted line; each one that cannot be had is logged
    /// once and reported by `doctor`: the box works on without it.
    func open(_ config: Config) {
        func spec(_ keys: GPIOKeys) -> LineSpec? {
            let line = config[keys.line]
            guard line >= 0 else { return nil }
            return LineSpec(chip: config[.gpioChip], offset: line, activeLow: config[keys.activeLow],
                            bias: LineSpec.Bias(rawValue: config[keys.bias]) ?? .asIs)
        }
        var problems: [String] = []
        func attempt<T>(_ keys: GPIOKeys, _ body: (LineSpec) throws(GPIOError) -> T) -> T? {
            guard let s = spec(keys) else { return nil }
            do { return try body(s) } catch {
                log.warning("line_unavailable", ["function": keys.function, "error": error.description])
                problems.append("\(keys.function): \(error.description)")
                return nil
            }
        }
        mute = attempt(.mute) { s throws(GPIOError) in try backend.input(s, consumer: "soundboxd-mute") }
        if let b = attempt(.volumeUp, { s throws(GPIOError) in try backend.input(s, consumer: "soundboxd-vol-up") }) { buttons.append((.up, b)) }
        if let b = attempt(.volumeDown, { s throws(GPIOError) in try backend.input(s, consumer: "soundboxd-vol-down") }) { buttons.append((.down, b)) }
        led = attempt(.led) { s throws(GPIOError) in try backend.output(s, consumer: "soundboxd-led", initial: false) }
        // The switch's position at start counts, not only its changes.
        if let mute, let on = try? mute.level() { setMuted(on) }
        device.gpio.withLock { $0 = problems }
        log.info("lines", ["chip": config[.gpioChip], "held": "\([mute].compactMap { $0 }.count + buttons.count + (led == nil ? 0 : 1))",
                           "libgpiod": GPIO.libraryVersion, "api": "v\(GPIO.api)"])
        pipe(&stopPipe)
    }

    var hasLines: Bool { mute != nil || !buttons.isEmpty || led != nil }

    func shutdown(deadline: Double) { if stopPipe[1] >= 0 { var b: UInt8 = 1; _ = write(stopPipe[1], &b, 1) } }

    func run() {
        var ledOn = false
        var nextBlink: Double?
        var lastPattern: LEDPattern?
        while true {
            let now = SystemClock.monotonic()
            if let due = muteSettlesAt, now >= due, let mute {
                muteSettlesAt = nil
                if let on = try? mute.level() { setMuted(on) }
            }
            // LED: steady states are set once; blinking toggles on a timer.
            let connected = device.link.withLock { !$0.enabled || $0.connected }
            let pattern = LEDPattern.of(muted: device.settings.muted, fault: !device.faults.isEmpty, connected: connected)
            if pattern != lastPattern {
                lastPattern = pattern
                ledOn = pattern != .off
                try? led?.set(ledOn)
                nextBlink = pattern.period.map { now + $0.on }
            } else if let due = nextBlink, now >= due, let period = pattern.period {
                ledOn.toggle()
                try? led?.set(ledOn)
                nextBlink = now + (ledOn ? period.on : period.off)
            }
            for action in gestures.tick(at: now) { perform(action) }

            var fds = [pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0), pollfd(fd: changes, events: Int16(POLLIN), revents: 0)]
            fds += ([mute].compactMap { $0 } + buttons.map(\.1)).map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            // Steady LED, no held button, no bouncing switch: sleep until something happens.
            let deadlines = [gestures.nextDeadline, nextBlink, muteSettlesAt].compactMap { $0 }
            let wait = deadlines.min().map { Int32(min(max(0, $0 - now), 3600) * 1000) + 1 } ?? -1
            _ = poll(&fds, nfds_t(fds.count), wait)
            if fds[0].revents != 0 { return }
            if fds[1].revents != 0 { var count: UInt64 = 0; _ = read(changes, &count, 8) }
            // A bouncing switch: wait until it has been still, then read its level.
            if let mute, let edges = try? mute.readEdges(), !edges.isEmpty { muteSettlesAt = SystemClock.monotonic() + debounce }
            for (button, line) in buttons {
                for e in (try? line.readEdges()) ?? [] {
                    for action in gestures.edge(button, pressed: e.active, at: e.time) { perform(action) }
                }
            }
        }
    }

    private func setMuted(_ on: Bool) {
        guard device.settings.switchMuted.exchange(on, ordering: .relaxed) != on else { return }
        log.info("mute_switch", ["on": "\(on)"])
        changed.post(.state)
    }

    private func perform(_ action: Gestures.Action) {
        log.info("button", ["action": "\(action)"])
        switch action {
        case .volumeUp, .volumeDown:
            let old = device.settings.current[.audioVolume]
            let new = max(0, min(10, old + (action == .volumeUp ? 1 : -1)))
            _ = try? device.settings.set([IntKey.audioVolume.key.name: "\(new)"], from: .local)
            changed.post(.state)
            if new == 10 { _ = scheduler.submit(.prompt(.volumeMax)) }
            if new == 0 { _ = scheduler.submit(.prompt(.volumeMin)) }
        case .replayLast:
            _ = try? scheduler.replay(id: nil)
        case .summary:
            _ = scheduler.submit(.summary)
        }
    }
}
