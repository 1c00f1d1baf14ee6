import Soundbox
import SoundboxStore

// The offline summary (docs/soundboxd.md): what SummaryPlan decides, spoken.
extension Scheduler {
    /// At start and after each reconnect: the next time payments wait, see
    /// whether enough old ones do for an offline summary.
    func armSummary() {
        summaryArmedAt.withLock { $0 = SystemClock.monotonic() }
        wake.notify()
    }

    /// Speaks the old payments waiting as one summary per currency, if at
    /// least `queue.summary_min` of a currency are older than
    /// `queue.summary_after_s`; returns whether it spoke one. Waits first
    /// (at most 1.5 s after arming) until no payment has been accepted for
    /// a quarter of a second: the broker hands a backlog over in a burst.
    /// After a summary it is armed again: a backlog too long to land in
    /// that time makes a second summary, not a long row of old payments.
    func summarizeIfDue(head: Storage.Item) -> Bool {
        guard let armedAt = summaryArmedAt.withLock({ $0 }) else { return false }
        let config = settings.current
        let plan = SummaryPlan(minimum: config[.queueSummaryMin], afterSeconds: config[.queueSummaryAfter])
        guard plan.mayBeDue(headPlays: head.plays, headDurable: head.ref.isStored, headHappenedAtMs: head.happenedAtMs,
                            now: SystemClock.nowMs(), muted: settings.muted) else {
            summaryArmedAt.withLock { $0 = nil }
            return false
        }
        while SummaryPlan.keepWaiting(newestAcceptedMs: storage.queuedForSummary().map(\.acceptedAt).max(), now: SystemClock.nowMs(),
                                      armedFor: SystemClock.monotonic() - armedAt), !stopping.load(ordering: .relaxed) {
            wake.waitForWork(timeout: 0.25, idle: false)
        }
        summaryArmedAt.withLock { $0 = nil }
        let waiting = storage.queuedForSummary().map { e in
            let reader = voices.catalog.reader(lang: nil, currency: e.payment.currency, defaultPack: config[.voiceLang])
            return SummaryPlan.Candidate(id: e.seq, happenedAtMs: e.happenedAtMs,
                                         group: reader.chime ? nil : e.payment.currency ?? voices.catalog.currency(of: reader.pack) ?? "")
        }
        var spoke = false
        for seqs in plan.summaries(waiting, now: SystemClock.nowMs()) {
            guard let group = storage.beginSummary(seqs, now: SystemClock.nowMs()) else { continue }
            speakSummary(group)
            spoke = true
        }
        if spoke { armSummary() }
        return spoke
    }

    /// Speaks summary `group` (begun now, or left `playing` by a crash: then
    /// it is spoken again whole) and records its payments `played`.
    func speakSummary(_ group: Int64) {
        let config = settings.current
        let members = storage.summaryMembers(group)
        guard let first = members.first else { return }
        let total = Amount(minorUnits: members.reduce(0) { $0 + $1.payment.amount.minorUnits })
        let reader = voices.catalog.reader(lang: nil, currency: first.payment.currency, defaultPack: config[.voiceLang])
        let clips = voices.pack(reader.pack, from: bank)?.grammar.offlineSummary(count: members.count, total: total)
        log.info("offline_summary", ["summary": "\(group)", "count": "\(members.count)", "pack": reader.pack,
                                     "first": first.payment.id, "last": members.last!.payment.id])
        for m in members {
            guard case .stored(let seq) = m.ref else { continue }
            log.info("speaking", ["id": m.payment.id, "seq": "\(seq)", "plays": "\(m.plays)", "summary": "\(group)"])
        }
        log.debug("amount", ["summary": "\(group)", "total": total.description, "currency": first.payment.currency ?? "-"])
        Failpoint.hit("in_summary")
        let volume = AnnounceVolume.level(user: config[.audioVolume], minimum: config[.audioMinVolume], muted: false)!
        // No pack reads its currency any more (voice.lang changed since a crash): the chime.
        let result = play(reader.chime ? nil : clips, lang: reader.pack, volume: volume, mutable: true)
        Failpoint.hit("after_summary")
        let now = SystemClock.nowMs()
        switch result {
        case .success(.completed):
            let ids = storage.finishSummary(group, now: now)
            status.withLock { $0.lastID = members.last!.payment.id }
            changes.post(.receipt)
            log.info("played", ["summary": "\(group)", "payments": "\(ids.count)"])
        case .success(.interrupted) where stopping.load(ordering: .relaxed):
            log.info("interrupted", ["summary": "\(group)"])   // left `playing`: spoken again after the restart
        case .success(.interrupted):
            for m in members { finish(m, .muted, nil) }
        case .failure(let error):
            for m in members { finish(m, .failed, error.description) }
        }
    }

}
