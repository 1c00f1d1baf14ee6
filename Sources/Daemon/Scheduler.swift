import Soundbox
import SoundboxAudio
import SoundboxStore
import Synchronization
import SoundboxSystem

/// A request that goes through the speaker between payments (a replay, the
/// test sentence, a prompt, the summary), with a way to wait for it.
final class UserJob: @unchecked Sendable {
    enum Kind: Sendable {
        case replay(Payment), test, prompt(Prompt), summary

        /// Requests with the same key coalesce (RequestQueue).
        var key: String {
            switch self {
            case .replay(let p): "replay:" + p.id
            case .test: "test"
            case .prompt(let p): "prompt:" + p.rawValue
            case .summary: "summary"
            }
        }
    }
    let kind: Kind
    /// When it was asked for (monotonic s).
    let submitted = SystemClock.monotonic()
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
/// Requests (RequestQueue) run only when no payment waits. Runs on its own
/// thread, which alone touches the voice bank and the audio output.
final class Scheduler: Service, @unchecked Sendable {
    let name = "scheduler"
    /// What it is doing, for status, doctor and the LED (written here only).
    struct Status: Sendable {
        var speaking = false
        var lastID: String?
        var audioFault: String?
    }
    let status = Shared(Status())
    /// Monotonic time of the last sign of life, for the watchdog.
    let heartbeat = Atomic<Int64>(0)
    let stopping = Atomic<Bool>(false)

    let storage: Storage
    let settings: Settings
    let voices: Voices
    /// Woken when work arrives; `isIdle` when there is none.
    let wake: Wakeup
    /// Told of receipts waiting and of faults that came or went.
    let changes: Changes
    private let requests = Mutex(RequestQueue<UserJob>(capacity: 16))
    private let environment: [String: String]
    let log = Log("queue")

    // Scheduler thread only.
    let bank: VoiceBank
    private var output: (any AudioOutput)?
    private var outputChoice: OutputChoice
    /// When the last request spoke (Unix ms): payments that arrived during
    /// it do not count that time against the stale rule.
    private var lastRequest: ClosedRange<Int64>?
    /// When history was last pruned (monotonic s): at most hourly, after a
    /// payment, so an idle box does not wake for it (nothing grows then).
    private var lastPrune = SystemClock.monotonic()
    /// Set at start and by each reconnect (`armSummary`): when, if an
    /// offline summary may be due.
    let summaryArmedAt = Mutex<Double?>(SystemClock.monotonic())

    init(storage: Storage, settings: Settings, voices: Voices, bank: VoiceBank, wake: Wakeup, changes: Changes,
         environment: [String: String]) {
        self.storage = storage; self.settings = settings; self.voices = voices; self.bank = bank
        self.wake = wake; self.changes = changes; self.environment = environment
        outputChoice = OutputChoice(settings.current)
    }

    /// Queues a request; nil when too many are waiting already. A request
    /// equal to one already queued joins it.
    func submit(_ kind: UserJob.Kind) -> UserJob? {
        let submission = requests.withLock { $0.submit(key: kind.key) { UserJob(kind) } }
        switch submission {
        case .queued(let job):
            wake.notify()
            return job
        case .joined(let job):
            log.info("request_joined", ["request": kind.key])
            return job
        case .refused:
            log.warning("request_refused", ["request": kind.key, "reason": "too many requests waiting"])
            return nil
        }
    }

    /// A link prompt waits this long after it was decided (the broker's
    /// backlog lands right after a reconnect) and gives way to any payment
    /// queued meanwhile or while it is spoken: the payment says the link
    /// is back better than the prompt.
    static let linkPromptSettle = 0.5

    /// What the broker link tells the speaker: a (re)connect arms the
    /// offline summary; a link prompt is spoken between payments.
    func linkChanged(_ event: LinkEvent) {
        switch event {
        case .connected: armSummary()
        case .prompt(let p): _ = submit(.prompt(p))
        }
    }

    func shutdown(deadline: Double) {
        stopping.store(true, ordering: .relaxed)
        wake.notify()
    }

    func run() {
        while !stopping.load(ordering: .relaxed) {
            beat()
            if let item = storage.next() {
                if let group = item.summary {
                    // Left `playing` by a crash: the whole summary again.
                    storage.restartSummary(group, now: SystemClock.nowMs())
                    speakSummary(group)
                } else if !summarizeIfDue(head: item) {
                    process(item)
                }
            } else if let job = requests.withLock({ $0.next(paymentsWaiting: false) }) {
                let start = SystemClock.nowMs()
                run(job)
                lastRequest = start...SystemClock.nowMs()
            } else {
                // While storage is failing, look again every few seconds
                // (Storage tells status and the LED when the fault clears).
                wake.waitForWork(timeout: storage.retry() ? 5 : nil)
            }
        }
        for job in requests.withLock({ $0.drain() }) {
            job.complete(.failure(AudioError(call: "scheduler", code: 0, message: "soundboxd is stopping")))
        }
        output?.close()
        log.info("stopped")
    }

    private func beat() { heartbeat.store(Int64(SystemClock.monotonic() * 1000), ordering: .relaxed) }

    private func process(_ item: Storage.Item) {
        let config = settings.current
        let now = SystemClock.nowMs()
        let decision = AnnouncePolicy.decide(
            happenedAt: item.payment.ts ?? item.acceptedAt / 1000, now: now / 1000,
            heldBack: (AnnouncePolicy.overlap(from: item.acceptedAt, to: now, busy: lastRequest) + 999) / 1000,
            staleAfter: config[.queueStaleAfter], clockSynchronized: SystemClock.isSynchronized(environment: environment),
            muted: settings.muted)
        switch decision {
        case .mute:
            finish(item, .muted, nil)
        case .expire(let reason):
            finish(item, .expired, reason)
        case .speak:
            storage.markPlaying(item, now: now)
            Failpoint.hit("before_speaking")
            switch item.ref {
            case .stored(let seq): log.info("speaking", ["id": item.payment.id, "seq": "\(seq)", "plays": "\(item.plays + 1)"])
            case .memory: log.info("speaking", ["id": item.payment.id, "durable": "false", "plays": "\(item.plays + 1)"])
            }
            let result = speak(item.payment, config: config, mutable: true)
            Failpoint.hit("after_speaking")
            switch result {
            case .success(.completed):
                let chimed = item.payment.currency.flatMap { currency in
                    voices.catalog.reader(lang: item.payment.lang, currency: currency, defaultPack: config[.voiceLang]).chime
                        ? voices.catalog.chimeReason(currency) : nil
                }
                finish(item, .played, chimed)
            case .success(.interrupted) where stopping.load(ordering: .relaxed):
                // Left `playing`: spoken again after the restart.
                log.info("interrupted", ["id": item.payment.id])
            case .success(.interrupted):
                finish(item, .muted, nil)
            case .failure(let error):
                finish(item, .failed, error.description)
            }
        }
    }

    func finish(_ item: Storage.Item, _ state: PaymentState, _ reason: String?) {
        storage.finish(item, state, reason: reason, now: SystemClock.nowMs())
        status.withLock { $0.lastID = item.payment.id }
        changes.post(.receipt)
        if SystemClock.monotonic() - lastPrune >= 3600 {
            lastPrune = SystemClock.monotonic()
            pruneHistory()
        }
        if let reason {
            log.warning(state.rawValue, ["id": item.payment.id, "reason": reason])
        } else {
            log.info(state.rawValue, ["id": item.payment.id])
        }
    }

    private func run(_ job: UserJob) {
        let config = settings.current
        let lang = config[.voiceLang]
        let grammar = voices.pack(lang, from: bank)?.grammar
        switch job.kind {
        case .replay(let p):
            log.info("replaying", ["id": p.id])
            // A replay the merchant asked for is not cut by the mute switch.
            job.complete(speak(p, config: config, mutable: false).map { _ in 0 })
        case .prompt(let p) where p == .networkConnected || p == .networkDisconnected:
            // Payments first: wait for the backlog, give way to any payment.
            let seen = wake.paymentsQueued
            while SystemClock.monotonic() < job.submitted + Self.linkPromptSettle, wake.paymentsQueued == seen, !stopping.load(ordering: .relaxed) {
                wake.waitForWork(timeout: job.submitted + Self.linkPromptSettle - SystemClock.monotonic(), idle: false)
            }
            guard wake.paymentsQueued == seen else {
                log.info("prompt_skipped", ["name": p.rawValue, "reason": "a payment came"])
                return job.complete(.success(0))
            }
            log.info("prompt", ["name": p.rawValue])
            let volume = max(1, config[.audioVolume])
            let played = play(grammar?.clips(for: p) ?? [], lang: lang, volume: volume, mutable: false) { [wake] in wake.paymentsQueued != seen }
            if case .success(.interrupted) = played { log.info("prompt_cut", ["name": p.rawValue, "reason": "a payment came"]) }
            job.complete(played.map { _ in 0 })
        case .prompt(let p):
            log.info("prompt", ["name": p.rawValue])
            // 音量最小 at volume 0 must still be heard: prompts are at least level 1.
            let volume = max(1, config[.audioVolume])
            job.complete(play(grammar?.clips(for: p) ?? [], lang: lang, volume: volume, mutable: false).map { _ in 0 })
        case .summary:
            let today = storage.summary(since: SystemClock.localMidnightMs())
            log.info("summary", ["count": "\(today.count)"])
            let clips = grammar?.summary(count: today.count, total: Amount(minorUnits: today.totalMinor)) ?? []
            job.complete(play(clips, lang: lang, volume: config[.audioVolume], mutable: false).map { _ in 0 })
        case .test:
            let clips = grammar.map { $0.clips(for: .test) + $0.announcement(Amount(minorUnits: 12345)) } ?? []
            let start = SystemClock.monotonic()
            job.complete(play(clips, lang: lang, volume: config[.audioVolume], mutable: false).map { _ in
                Int((SystemClock.monotonic() - start) * 1000)
            })
        }
    }

    /// Speaks a payment with the pack that reads its language and currency,
    /// never quieter than audio.min_volume.
    /// - Parameter mutable: whether turning mute on cuts it.
    private func speak(_ p: Payment, config: Config, mutable: Bool) -> Result<PlayOutcome, AudioError> {
        let volume = AnnounceVolume.level(user: config[.audioVolume], minimum: config[.audioMinVolume], muted: false)!
        let reader = voices.catalog.reader(lang: p.lang, currency: p.currency, defaultPack: config[.voiceLang])
        if let missing = reader.missing { voices.noteMissing(missing) }
        if reader.chime {
            // The last step of the fallback chain: a payment, but no pack reads its currency.
            log.warning("currency_unreadable", ["id": p.id, "currency": p.currency ?? "-"])
            return play(nil, lang: reader.pack, volume: volume, mutable: mutable)
        }
        let clips = voices.pack(reader.pack, from: bank)?.grammar.announcement(p.amount, channel: p.channel) ?? ["?"]
        log.debug("clips", ["id": p.id, "pack": reader.pack, "clips": clips.joined(separator: " ")])
        return play(clips, lang: reader.pack, volume: volume, mutable: mutable)
    }

    /// Plays `clips` of pack `lang`; nil: the chime. `cut`: another reason
    /// to stop short (checked as the sound goes out).
    func play(_ clips: [String]?, lang: String, volume: Int, mutable: Bool,
              cut: () -> Bool = { false }) -> Result<PlayOutcome, AudioError> {
        var samples = bank.chime
        if let clips {
            do {
                let r = try bank.render(clips, pack: lang, volume: volume)
                for s in r.substitutions {
                    log.warning("clip_substituted", ["clip": s.clip, "pack": lang, "from": s.pack ?? "chime"])
                }
                samples = r.samples
            } catch {
                // No usable voice pack at all: the chime still says "a payment".
                log.error("voice_unavailable", ["pack": lang, "error": error.description])
            }
        } else {
            Volume.apply(volume, to: &samples)
        }
        status.withLock { $0.speaking = true }
        defer { status.withLock { $0.speaking = false } }
        do {
            let out = try currentOutput()
            let recoveredBefore = out.recoveries
            defer {
                if out.recoveries > recoveredBefore {
                    log.warning("audio_recovered", ["underruns": "\(out.recoveries - recoveredBefore)", "output": out.name])
                }
            }
            let outcome = try out.play(samples, format: bank.format) { [self] in
                beat()
                return stopping.load(ordering: .relaxed) || (mutable && settings.muted) || cut()
            }
            // For bench/: when the first audible sample went to the device (Unix µs).
            if let t = out.firstAudibleUs { log.debug("audio_start", ["t_us": "\(t)", "frames": "\(samples.count)"]) }
            noteAudioFault(nil)
            return .success(outcome)
        } catch {
            log.error("audio_failed", ["output": "\(outputChoice)", "error": error.description])
            noteAudioFault(error.description)
            return .failure(error)
        }
    }

    /// An audio fault came or went: status and the LED show it.
    private func noteAudioFault(_ fault: String?) {
        let was = status.withLock { s in
            defer { s.audioFault = fault }
            return s.audioFault
        }
        if (was == nil) != (fault == nil) { changes.post(.state) }
    }

    /// Deletes what queue.retention_days and queue.history_max no longer
    /// keep: at start, then at most hourly after a payment.
    func pruneHistory() {
        let config = settings.current
        do {
            let n = try storage.prune(now: SystemClock.nowMs(), retention: Int64(config[.queueRetentionDays]) * 86_400_000,
                                      keep: config[.queueHistoryMax])
            if n > 0 { log.info("pruned", ["entries": "\(n)"]) }
        } catch {
            log.error("prune_failed", ["error": error.description])
        }
    }

    /// Queues a replay of payment `id`, or of the last one: the entry, and
    /// whether it was queued (false: too many requests wait); nil when
    /// there is no such payment.
    func replay(id: String?) throws(StoreError) -> (entry: Entry, queued: Bool)? {
        let found = if let id { try storage.entry(id: id) } else { try storage.history(limit: 1).first }
        guard let entry = found else { return nil }
        return (entry, submit(.replay(entry.payment)) != nil)
    }

    /// The output `audio.*` selects. The device, file and kind are fixed
    /// at start (file-only keys); `audio.null_realtime` may change.
    private func currentOutput() throws(AudioError) -> any AudioOutput {
        let choice = OutputChoice(settings.current)
        if let output, choice == outputChoice { return output }
        output?.close()
        output = nil
        let made = try choice.make()
        output = made
        outputChoice = choice
        log.info("output", ["name": made.name])
        return made
    }
}
