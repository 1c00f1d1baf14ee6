import Soundbox
import SoundboxAudio
import SoundboxStore
import Synchronization
import SoundboxThreads

/// A request from a technician that goes through the speaker between
/// announcements, with a way to wait for it.
final class UserJob: @unchecked Sendable {
    enum Kind { case replay(Payment), test, prompt(Prompt), summary }
    let kind: Kind
    private let done = Condition()
    private var result: Result<Int, AudioError>?   // guarded by done

    init(_ kind: Kind) { self.kind = kind }
    func complete(_ r: Result<Int, AudioError>) { done.broadcast { result = r } }
    /// Waits for the job; nil on timeout.
    func wait(timeout: Double) -> Result<Int, AudioError>? {
        var r: Result<Int, AudioError>?
        done.wait(timeout: timeout) { r = result; return r != nil }
        return r
    }
}

/// Speaks payments one at a time, oldest first: queued → playing →
/// played (or muted, expired, failed), each step durable with its receipt.
/// Runs on its own thread, which alone touches the voice bank and the
/// audio output.
final class Scheduler: @unchecked Sendable {
    struct Status: Sendable {
        var speaking = false
        var lastID: String?
        var audioFault: String?
    }
    let status = Mutex(Status())
    /// Monotonic time of the last sign of life, for the watchdog.
    let heartbeat = Atomic<Int64>(0)
    let stopping = Atomic<Bool>(false)

    private let store: Store?
    private let backlog: Backlog
    private let settings: Settings
    private let ingest: Ingest
    let wake: Wakeup
    private let jobs = Mutex<[UserJob]>([])
    private let environment: [String: String]
    private let log = Log("queue")

    // Scheduler thread only.
    private let bank: VoiceBank
    private var output: (any AudioOutput)?
    private var outputChoice: OutputChoice?

    init(store: Store?, backlog: Backlog, settings: Settings, ingest: Ingest, wake: Wakeup, bank: VoiceBank,
         environment: [String: String]) {
        self.store = store; self.backlog = backlog; self.settings = settings; self.ingest = ingest
        self.wake = wake; self.bank = bank; self.environment = environment
    }

    func submit(_ job: UserJob) {
        jobs.withLock { $0.append(job) }
        wake.notify()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        wake.notify()
    }

    func run() {
        while !stopping.load(ordering: .relaxed) {
            beat()
            if let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                run(job)
            } else if let entry = nextStored() {
                process(entry)
            } else if let entry = backlog.state.withLock({ $0.payments.isEmpty ? nil : $0.payments.removeFirst() }) {
                processInMemory(entry)
            } else {
                retryUnrecorded()
                wake.waitForWork()
            }
        }
        (output as? ALSAOutput)?.close()
        log.info("stopped")
    }

    private func beat() { heartbeat.store(Int64(SystemClock.monotonic() * 1000), ordering: .relaxed) }

    /// The oldest pending entry whose outcome is not already decided.
    private func nextStored() -> Entry? {
        guard let store else { return nil }
        do {
            let skip = backlog.state.withLock { $0.unrecorded }
            if skip.isEmpty { return try store.next() }
            return try store.pending().first { skip[$0.seq] == nil }
        } catch {
            fault(error)
            return nil
        }
    }

    private func decide(_ p: Payment, acceptedAt: Int64, _ config: Config) -> AnnouncePolicy.Decision {
        AnnouncePolicy.decide(happenedAt: p.ts ?? acceptedAt / 1000, now: SystemClock.nowMs() / 1000,
                              staleAfter: config.integer(.queueStaleAfter),
                              clockSynchronized: SystemClock.isSynchronized(environment: environment),
                              muted: settings.muted)
    }

    private func process(_ entry: Entry) {
        let config = settings.current
        switch decide(entry.payment, acceptedAt: entry.acceptedAt, config) {
        case .mute:
            finish(entry.seq, entry.payment.id, .muted, nil)
        case .expire(let reason):
            finish(entry.seq, entry.payment.id, .expired, reason)
        case .speak:
            do { try store?.markPlaying(seq: entry.seq, now: SystemClock.nowMs()) } catch { fault(error) }
            Failpoint.hit("before_speaking")
            log.info("speaking", ["id": entry.payment.id, "seq": "\(entry.seq)", "plays": "\(entry.plays + 1)"])
            let result = speak(entry.payment, config: config, payment: true)
            Failpoint.hit("after_speaking")
            switch result {
            case .success(.completed):
                finish(entry.seq, entry.payment.id, .played, nil)
            case .success(.interrupted) where stopping.load(ordering: .relaxed):
                // Left `playing`: spoken again after the restart.
                log.info("interrupted", ["id": entry.payment.id, "seq": "\(entry.seq)"])
            case .success(.interrupted):
                finish(entry.seq, entry.payment.id, .muted, nil)
            case .failure(let error):
                finish(entry.seq, entry.payment.id, .failed, error.description)
            }
        }
    }

    private func processInMemory(_ m: MemoryEntry) {
        let config = settings.current
        var state = PaymentState.played, reason: String?
        switch decide(m.payment, acceptedAt: m.acceptedAt, config) {
        case .mute: state = .muted
        case .expire(let r): state = .expired; reason = r
        case .speak:
            log.info("speaking", ["id": m.payment.id, "durable": "false"])
            switch speak(m.payment, config: config, payment: true) {
            case .success(.completed): state = .played
            case .success(.interrupted) where stopping.load(ordering: .relaxed):
                backlog.state.withLock { $0.payments.insert(m, at: 0) }
                return
            case .success(.interrupted): state = .muted
            case .failure(let e): state = .failed; reason = e.description
            }
        }
        let receipt = Receipt(id: m.payment.id, status: Receipt.Status(rawValue: state.rawValue)!,
                              ts: SystemClock.nowMs() / 1000, reason: reason, durable: false)
        ingest.recordReceipt(receipt)
        finished(m.payment.id, state)
    }

    /// Records a final state with its receipt; if storage fails, remembers
    /// it so the entry is not spoken again in this run, and retries later.
    private func finish(_ seq: Int64, _ id: String, _ state: PaymentState, _ reason: String?) {
        do {
            guard let store else { throw StoreUnavailable() }
            try store.finish(seq: seq, state: state, reason: reason, now: SystemClock.nowMs())
        } catch {
            fault(error)
            backlog.state.withLock { $0.unrecorded[seq] = state }
        }
        finished(id, state, reason: reason)
    }

    private func finished(_ id: String, _ state: PaymentState, reason: String? = nil) {
        status.withLock { $0.lastID = id }
        ingest.outbox.notify()
        if let reason {
            log.warning(state.rawValue, ["id": id, "reason": reason])
        } else {
            log.info(state.rawValue, ["id": id])
        }
    }

    private func retryUnrecorded() {
        guard let store else { return }
        let pending = backlog.state.withLock { $0.unrecorded }
        for (seq, state) in pending.sorted(by: { $0.key < $1.key }) {
            guard (try? store.finish(seq: seq, state: state, reason: nil, now: SystemClock.nowMs())) != nil else { return }
            backlog.state.withLock { $0.unrecorded[seq] = nil }
        }
    }

    private func fault(_ error: any Error) {
        log.error("storage_failed", ["error": "\(error)"])
        backlog.state.withLock { $0.storageFault = "\(error)" }
    }

    private func run(_ job: UserJob) {
        let config = settings.current
        switch job.kind {
        case .replay(let p):
            log.info("replaying", ["id": p.id])
            job.complete(speak(p, config: config, payment: true, mutable: false).map { _ in 0 })
        case .prompt(let p):
            log.info("prompt", ["name": p.rawValue])
            let lang = config[.voiceLang]
            let clips = (try? bank.load(lang))?.grammar.clips(for: p) ?? []
            // 音量最小 at volume 0 must still be heard: prompts are at least level 1.
            var audible = config
            if audible.integer(.audioVolume) == 0 { try? audible.set("audio.volume", "1") }
            job.complete(play(clips, lang: lang, config: audible, payment: false).map { _ in 0 })
        case .summary:
            let lang = config[.voiceLang]
            let midnight = SystemClock.localMidnightMs()
            var count = 0, total: Int64 = 0
            if let store, let today = try? store.summary(since: midnight) { (count, total) = today }
            let clips = (try? bank.load(lang))?.grammar.summary(count: count, total: Amount(minorUnits: total)) ?? []
            log.info("summary", ["count": "\(count)"])
            job.complete(play(clips, lang: lang, config: config, payment: false).map { _ in 0 })
        case .test:
            let lang = config[.voiceLang]
            let clips = ((try? bank.load(lang))?.grammar).map {
                $0.clips(for: .test) + $0.announcement(Amount(minorUnits: 12345))
            } ?? []
            let start = SystemClock.monotonic()
            job.complete(play(clips, lang: lang, config: config, payment: false).map { _ in
                Int((SystemClock.monotonic() - start) * 1000)
            })
        }
    }

    /// Speaks a payment in its language (or the default one).
    /// - Parameter mutable: whether turning mute on cuts it (payments from
    ///   the queue; a replay the merchant asked for is not cut).
    private func speak(_ p: Payment, config: Config, payment: Bool, mutable: Bool = true) -> Result<PlayOutcome, AudioError> {
        var lang = p.lang ?? config[.voiceLang]
        if (try? bank.load(lang)) == nil { lang = config[.voiceLang] }
        let clips = ((try? bank.load(lang))?.grammar).map { $0.announcement(p.amount, channel: p.channel) } ?? ["?"]
        return play(clips, lang: lang, config: config, payment: payment, mutable: payment && mutable)
    }

    private func play(_ clips: [String], lang: String, config: Config, payment: Bool, mutable: Bool = false) -> Result<PlayOutcome, AudioError> {
        // A payment is never quieter than audio.min_volume (prompts follow the user's level).
        let user = config.integer(.audioVolume)
        let volume = payment ? AnnounceVolume.level(user: user, minimum: config.integer(.audioMinVolume), muted: false)! : user
        let samples: [Int16]
        do {
            let r = try bank.render(clips, pack: lang, volume: volume)
            for s in r.substitutions {
                log.warning("clip_substituted", ["clip": s.clip, "pack": lang, "from": s.pack ?? "chime"])
            }
            samples = r.samples
        } catch {
            // No usable voice pack at all: the chime still says "a payment".
            log.error("voice_unavailable", ["pack": lang, "error": error.description])
            samples = bank.chime
        }
        status.withLock { $0.speaking = true }
        defer { status.withLock { $0.speaking = false } }
        do {
            let out = try currentOutput(config)
            let recoveredBefore = (out as? ALSAOutput)?.recoveries ?? 0
            defer {
                if let alsa = out as? ALSAOutput, alsa.recoveries > recoveredBefore {
                    log.warning("audio_recovered", ["underruns": "\(alsa.recoveries - recoveredBefore)", "output": alsa.name])
                }
            }
            // For bench/: when the first frame goes to the output (Unix µs).
            log.debug("audio_start", ["t_us": "\(SystemClock.nowUs())", "frames": "\(samples.count)"])
            let outcome = try out.play(samples, format: bank.format) { [self] in
                beat()
                return stopping.load(ordering: .relaxed) || (mutable && settings.muted)
            }
            status.withLock { $0.audioFault = nil }
            return .success(outcome)
        } catch {
            log.error("audio_failed", ["output": outputChoice.map { "\($0)" } ?? "?", "error": error.description])
            status.withLock { $0.audioFault = error.description }
            return .failure(error)
        }
    }

    private func currentOutput(_ config: Config) throws(AudioError) -> any AudioOutput {
        let choice = OutputChoice(config)
        if let output, choice == outputChoice { return output }
        (output as? ALSAOutput)?.close()
        output = nil
        let made = try choice.make()
        output = made
        outputChoice = choice
        log.info("output", ["name": made.name])
        return made
    }
}
