// ~460 lines: the update's decisions still sit beside its subprocess calls, its watch of the install and its file writes; issue 40's pure UpdateFlow takes the decisions out.
import Glibc
import Soundbox
import SoundboxSystem

/// What the system says about itself through the image's update helper
/// (`update.helper info`): the version that runs, the slot it booted, and
/// why the last boot happened.
struct SystemInfo: Sendable, Equatable {
    var version = soundboxVersion
    var slot: String?
    var bootReason: String?
    /// Why the health check left the slot it tried (the helper keeps it).
    var rollback: String?

    static func parse(_ lines: [String]) -> SystemInfo {
        var info = SystemInfo()
        for line in lines {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let k = line[..<eq], v = String(line[line.index(after: eq)...])
            let shown = TextFile.excerpt(v, limit: 200)
            switch k {
            case "version" where DebianVersion.isValid(v): info.version = v
            case "slot" where ["A", "B"].contains(v): info.slot = v
            case "boot_reason" where !v.isEmpty: info.bootReason = shown
            case "rollback" where !v.isEmpty: info.rollback = shown
            default: break
            }
        }
        return info
    }
}

/// Where the update stands and what runs, for status and doctor.
struct UpdateView: Sendable {
    let record: Shared<UpdateRecord>
    let system: Shared<SystemInfo>
    init() { record = Shared(UpdateRecord()); system = Shared(SystemInfo()) }
}

/// System updates (image/README.md "Updates"): one request at a time,
/// from the signed `cmd update` or `soundboxctl update install`. The image's
/// helper has RAUC install the bundle at a quiet moment: a URL streamed
/// straight into the other slot (nothing is downloaded first, so the state
/// partition needs no room for it), a technician's file where it is. Then
/// the other slot is armed for one try and the box rebooted once the queue
/// is empty (or, past `update.reboot_deadline_s`, at the next pause between
/// payments). Back up on the new slot, the update is committed once the
/// daemon has come up with durable storage and the broker connected; on
/// the old slot it has rolled back. The record (`update/state`) survives
/// power cuts, so each step is taken again or carried on (an install cut
/// short starts over).
final class Updater: Service, @unchecked Sendable {
    let name = "update"
    let directory: String
    private let helper: String
    private let view: UpdateView
    private let storage: Storage
    private let wake: Wakeup
    private let playback: Shared<Scheduler.Status>
    private let link: Shared<LinkStatus>
    private let settings: Settings
    private let changes: Changes
    private let environment: [String: String]
    /// This boot's id (the store's, ClockReading.bootID): tells a reboot from a restart.
    private let bootID: String
    private let log = Log("update")

    private let cond = Condition()
    private var request: UpdateRequest?          // guarded by cond
    private var cancelAsked = false              // guarded by cond
    private var stopping = false                 // guarded by cond
    private var job = Subprocess()               // guarded by cond
    private var installEnded: Subprocess.Outcome? // guarded by cond: the helper's install is over
    private var moved = 0.0                       // guarded by cond: when the install's progress last moved
    private var lastLine = ""                     // guarded by cond: the install's last words

    static let stateFile = "state"
    /// What the request asked, for the image's pre-install handler (root):
    /// `version=` (the bundle must be that version) and `force=yes` (a
    /// technician's downgrade). Written before each install, removed after.
    static let requestFile = "request"

    init(config: Config, view: UpdateView, storage: Storage, wake: Wakeup, playback: Shared<Scheduler.Status>,
         link: Shared<LinkStatus>, settings: Settings, changes: Changes, environment: [String: String], bootID: String) {
        directory = config[.stateDir] + "/update"
        helper = config[.updateHelper]
        self.view = view; self.storage = storage; self.wake = wake; self.playback = playback; self.link = link
        self.settings = settings; self.changes = changes; self.environment = environment; self.bootID = bootID
        if let bytes = Files.read(directory + "/" + Self.stateFile, limit: 64 << 10) {
            view.record.withLock { $0 = UpdateRecord.parse(String(decoding: bytes, as: UTF8.self)) }
        }
    }

    var record: UpdateRecord { view.record.withLock { $0 } }

    // MARK: - Requests (any thread)

    enum Answer: Equatable {
        case accepted(UpdateRecord)
        case refused(String)
    }

    /// Takes a request for the updater's thread; refused at once when
    /// another one is under way, or when the box cannot update.
    func start(_ r: UpdateRequest) -> Answer {
        if let problem = r.problem { return .refused(problem) }
        guard access(helper, X_OK) == 0 else {
            return .refused("this box cannot update itself: no update helper at \(helper) (updates need the Soundbox image)")
        }
        let running = view.system.withLock { $0.version }
        if let v = r.version, !r.force, DebianVersion.compare(v, running) <= 0 {
            return .refused(v == running ? "\(v) already runs" : "older than what runs: \(v), running \(running) (a technician may force it)")
        }
        let current = record
        if current.phase.busy {
            return current.sha256 != nil && current.sha256 == r.sha256 ? .accepted(current)
                : .refused("an update is already \(current.summary); cancel it first (soundboxctl update cancel)")
        }
        return cond.broadcast {
            guard request == nil else { return .refused("an update was just asked for; wait for it to start") }
            request = r
            cancelAsked = false
            // Shown at once (status, `update install --wait`); the updater's thread records it.
            var starting = UpdateRecord()
            starting.phase = .installing
            starting.version = r.version; starting.id = r.id
            view.record.withLock { $0 = starting }
            return .accepted(starting)
        }
    }

    /// Stops an install (a streamed one at once; a file's once its slot
    /// is written, which is then not armed) or a waiting reboot.
    func cancel(id: String? = nil) -> Answer {
        if let id, record.id != id { return .refused("no update \(id) is under way (\(record.summary))") }
        // Not started yet: dropped (the updater's thread is waiting, nothing else writes the record).
        if cond.broadcast({ () -> Bool in defer { request = nil }; return request != nil }) {
            set(.failed, reason: "cancelled")
            return .accepted(record)
        }
        let current = record
        switch current.phase {
        case .waitingToReboot:
            let running: Subprocess = cond.broadcast { cancelAsked = true; return job }
            running.stop(grace: 2)
            return .accepted(current)
        case .installing:
            cond.broadcast { cancelAsked = true }
            return .accepted(current)
        default: return .refused("no update is under way (\(current.summary))")
        }
    }

    // MARK: - The updater's thread

    func run() {
        // A technician in group soundbox puts a bundle here (soundboxctl update install FILE, which
        // gives it this folder's group). Not setgid: the unit's RestrictSUIDSGID refuses that.
        if mkdir(directory, 0o770) != 0 && errno != EEXIST {
            log.error("update_folder_failed", ["path": directory, "error": FileError.phrase(errno: errno)])
        }
        chmod(directory, 0o770)
        // Earlier versions downloaded bundles here; a download they left would hold the space for good.
        for name in ["download.raucb", "download.raucb.part", "force"] { unlink(directory + "/" + name) }
        refreshSystem()
        resume()
        while true {
            var next: UpdateRequest?
            let trying = record.phase == .trying
            let go = cond.wait(timeout: trying ? 1 : nil) { stopping || request != nil }
            if cond.broadcast({ stopping }) { return }
            if go { next = cond.broadcast { defer { request = nil }; job = Subprocess(); return request } }
            if let next { perform(next) } else if trying { commitIfHealthy() }
        }
    }

    /// An install or a reboot the helper is making goes on without us
    /// (RAUC's service finishes it; the next start installs again).
    func shutdown(deadline: Double) {
        cond.broadcast { stopping = true }
    }

    private var cancelled: Bool { cond.broadcast { cancelAsked || stopping } }

    /// After a start: carry on with what the record says was under way.
    private func resume() {
        let r = record
        let slot = view.system.withLock { $0.slot }
        switch r.phase {
        case .installing:
            let source: UpdateRequest.Source? = r.url.map { .url($0) } ?? r.file.map { .file($0) }
            guard let source else { return }
            log.info("resuming", ["phase": r.phase.rawValue, "version": r.version ?? "-"])
            perform(UpdateRequest(source: source, sha256: r.sha256, version: r.version, id: r.id, size: r.size, force: r.force), resumed: true)
        case .waitingToReboot, .trying:
            if let to = r.toSlot, slot == to {
                if r.phase == .waitingToReboot { set(.trying, reason: nil) }
            } else if r.phase == .waitingToReboot && (r.rebootBoot == nil || r.rebootBoot == bootID) {
                // A power cut or a restart before the reboot: armed again (a Pi's try flag does not survive a power cut).
                log.info("resuming", ["phase": r.phase.rawValue])
                if helperOK(["arm"], what: "arm the new slot") { reboot() }
            } else {
                triedAndBack(r)
            }
        default: break
        }
    }

    /// Tries of a new slot, a power cut or a reset during one counting.
    static let maxTries = 3

    /// Rebooted into the new slot and back on the old one. The health check
    /// left a verdict: rolled back. None (a power cut or a reset during the
    /// try, before the check spoke): the try again, at most `maxTries` in all.
    private func triedAndBack(_ r: UpdateRecord) {
        let system = view.system.withLock { $0 }
        let slot = r.toSlot ?? "?", last = system.bootReason ?? "unknown"
        if system.rollback == nil && r.tries + 1 < Self.maxTries {
            var again = r
            again.tries += 1
            again.phase = .waitingToReboot
            again.reason = "the try of slot \(slot) ended without a verdict (last boot: \(last)); trying again (\(again.tries + 1) of \(Self.maxTries))"
            again.rebootBoot = nil
            log.warning("try_interrupted", ["slot": slot, "tries": "\(again.tries)", "last_boot": last])
            save(again, receipt: true)
            if helperOK(["arm"], what: "arm the new slot") { reboot() }
            return
        }
        let why = system.rollback ?? "slot \(slot) did not come up in \(r.tries + 1) tries (a crash, a hang or a power cut during its first boot; the last boot: \(last))"
        log.warning("rolled_back", ["slot": slot, "version": r.version ?? "-", "reason": why])
        set(.rolledBack, reason: why)
    }

    private func perform(_ r: UpdateRequest, resumed: Bool = false) {
        let system = view.system.withLock { $0 }
        var rec = resumed ? record : UpdateRecord()
        rec.version = r.version; rec.id = r.id; rec.force = r.force; rec.reason = nil
        rec.fromSlot = rec.fromSlot ?? system.slot
        let source: String
        switch r.source {
        case .url(let url):
            rec.url = url; rec.sha256 = r.sha256; rec.size = r.size; rec.file = nil
            source = url
        case .file(let path):
            rec.file = path; rec.url = nil; rec.sha256 = nil; rec.size = nil
            source = path
        }
        install(source, rec)
    }

    /// Records progress; a receipt every 10 %.
    private func step(_ pct: Int) {
        cond.broadcast { moved = SystemClock.monotonic() }
        var r = record
        guard pct != r.progress else { return }
        let receipt = pct / 10 != r.progress / 10
        r.progress = pct
        save(r, receipt: receipt)
    }

    // MARK: Install, arm, reboot

    private func install(_ source: String, _ rec: UpdateRecord) {
        // A quiet moment: never while a payment is being spoken.
        while !wake.waitIdle(timeout: 1) { if cancelled { _ = abandon(); return } }
        if cancelled { _ = abandon(); return }
        var r = rec
        r.phase = .installing; r.progress = 0
        save(r, receipt: true)
        let requestFile = directory + "/" + Self.requestFile
        var asked = r.version.map { "version=\($0)\n" } ?? ""
        if r.force { asked += "force=yes\n" }
        guard Paths.replace(requestFile, with: asked) else {
            _ = fail("could not write \(requestFile): \(FileError.phrase(errno: errno))")
            return
        }
        guard let (outcome, last) = watchInstall(source) else { return }   // the daemon stops: RAUC goes on
        unlink(requestFile)
        if cond.broadcast({ cancelAsked }) { _ = abandon(); return }
        guard outcome == .exited(0) else {
            _ = fail(Self.stopped(last) ?? "install failed: \(TextFile.excerpt(last.isEmpty ? "\(outcome)" : last, limit: 300))")
            return
        }
        log.info("installed", ["version": record.version ?? "-"])
        var armed: String?
        guard helperOK(["arm"], what: "arm the new slot", line: { l in if l.hasPrefix("slot=") { armed = String(l.dropFirst(5)) } }) else { return }
        r = record
        r.phase = .waitingToReboot; r.progress = 100
        r.toSlot = armed.flatMap { ["A", "B"].contains($0) ? $0 : nil } ?? Self.other(r.fromSlot)
        save(r, receipt: true)
        reboot()
    }

    /// Runs `helper install SOURCE` on a thread of its own and watches it
    /// from this one: a cancel, `update.install_deadline_s` since it began
    /// or `update.install_stall_s` without its progress moving (a server
    /// that trickles or stopped answering) has the helper stop RAUC's
    /// streaming (`helper cancel`), which ends the install. Its outcome and
    /// last line (the why, when it failed; "stopped: …" when the watch
    /// stopped it); nil when the daemon stops meanwhile.
    private func watchInstall(_ source: String) -> (Subprocess.Outcome, String)? {
        let job = currentJob, began = SystemClock.monotonic()
        let deadline = Double(settings.current[.updateInstallDeadline]), stall = Double(settings.current[.updateInstallStall])
        cond.broadcast { installEnded = nil; moved = began; lastLine = "" }
        let worker = ServiceThread(name: "update-install") { [self] in
            let outcome = job.run([helper, "install", source], environment: childEnvironment) { [self] line in
                if let pct = InstallProgress.percent(line) { step(pct) } else if !line.allSatisfy({ $0 == " " }) { cond.broadcast { lastLine = line } }
            }
            cond.broadcast { installEnded = outcome }
        }
        var why: String?
        while !cond.wait(timeout: 1, until: { installEnded != nil || stopping }) {
            guard why == nil else { continue }
            let (asked, lastMove) = cond.broadcast { (cancelAsked, moved) }
            let now = SystemClock.monotonic()
            if asked { why = "cancelled" }
            else if now - began > deadline { why = "the install did not end within \(Int(deadline)) s (update.install_deadline_s)" }
            else if now - lastMove > stall {
                why = "the install made no progress for \(Int(stall)) s (update.install_stall_s): the bundle's server trickles or stopped answering"
            }
            guard let why else { continue }
            log.warning("install_stopping", ["reason": why])
            var said = ""
            if Subprocess().run([helper, "cancel"], environment: childEnvironment, line: { said = $0 }) != .exited(0) {
                log.warning("helper_failed", ["helper": helper, "command": "cancel", "output": TextFile.excerpt(said, limit: 200)])
            }
        }
        guard let outcome = cond.broadcast({ installEnded }) else { return nil }
        _ = worker.join(timeout: 5)
        return (outcome, why.map { "stopped: " + $0 } ?? cond.broadcast { lastLine })
    }

    /// The reason a watched install was stopped for (its last line "stopped: …").
    static func stopped(_ last: String) -> String? { last.hasPrefix("stopped: ") ? String(last.dropFirst(9)) : nil }

    /// Reboots once the queue is empty; past the deadline, at the next
    /// pause between payments. Payments keep coming and being spoken meanwhile.
    private func reboot() {
        let deadline = SystemClock.monotonic() + Double(settings.current[.updateRebootDeadline])
        while !wake.waitIdle(timeout: 1) {
            if cancelled { _ = abandon(); return }
            if SystemClock.monotonic() > deadline && !playback.withLock({ $0.speaking }) { break }
        }
        if cancelled { _ = abandon(); return }
        var r = record
        r.rebootBoot = bootID
        save(r, receipt: false)
        log.info("rebooting", ["to_slot": r.toSlot ?? "-", "version": r.version ?? "-"])
        _ = helperOK(["reboot"], what: "reboot")
    }

    /// On the tried slot: committed once the daemon is up with durable
    /// storage and connected to the broker (the uplink only connects after
    /// the daemon has started; the health check in the image rolls back a
    /// slot that never gets here).
    private func commitIfHealthy() {
        let r = record
        guard r.phase == .trying, let to = r.toSlot, view.system.withLock({ $0.slot }) == to else { return }
        guard storage.durable, link.withLock({ $0.connected }) else { return }
        guard helperOK(["commit"], what: "commit slot \(to)") else { return }
        log.info("committed", ["slot": to, "version": r.version ?? "-"])
        set(.committed, reason: nil)
    }

    // MARK: - Helpers

    private var currentJob: Subprocess { cond.broadcast { job } }
    private var childEnvironment: [String: String] {
        var env = ["PATH": environment["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"]
        for k in ["SOUNDBOX_UPDATE_TEST"] { env[k] = environment[k] }
        env["SOUNDBOX_UPDATE_DIR"] = directory
        return env
    }

    /// Runs the helper; a failure fails the update with its last line.
    private func helperOK(_ args: [String], what: String, line: (String) -> Void = { _ in }) -> Bool {
        var last = ""
        let outcome = currentJob.run([helper] + args, environment: childEnvironment) { l in line(l); last = l }
        guard outcome == .exited(0) else {
            return cancelled ? abandon() : fail("could not \(what): \(TextFile.excerpt(last.isEmpty ? "\(outcome)" : last, limit: 300))")
        }
        return true
    }

    /// The system's facts, from the helper (once at start).
    private func refreshSystem() {
        guard access(helper, X_OK) == 0 else { return }
        var lines: [String] = []
        let outcome = currentJob.run([helper, "info"], environment: childEnvironment) { if lines.count < 64 { lines.append($0) } }
        guard outcome == .exited(0) else {
            log.warning("helper_failed", ["helper": helper, "outcome": "\(outcome)", "output": TextFile.excerpt(lines.last ?? "", limit: 200)])
            return
        }
        let info = SystemInfo.parse(lines)
        view.system.withLock { $0 = info }
        log.info("system", ["version": info.version, "slot": info.slot ?? "-", "boot_reason": info.bootReason ?? "-"])
        changes.post(.state)
    }

    private func fail(_ reason: String) -> Bool {
        log.warning("update_failed", ["reason": reason])
        set(.failed, reason: reason)
        return false
    }

    /// Cancelled: an armed try disarmed, the update failed "cancelled".
    /// Stopped (the daemon stops, e.g. for the very reboot it asked for):
    /// nothing changes; the next start carries on.
    private func abandon() -> Bool {
        guard cond.broadcast({ cancelAsked }) else { return false }
        if record.phase == .waitingToReboot { _ = Subprocess().run([helper, "disarm"], environment: childEnvironment) }
        return fail("cancelled")
    }

    private func set(_ phase: UpdatePhase, reason: String?) {
        var r = record
        r.phase = phase; r.reason = reason
        save(r, receipt: true)
    }

    /// Persists `r` (fsynced, then renamed over the old record), shows it,
    /// and sends the update's receipt when asked.
    private func save(_ r: UpdateRecord, receipt: Bool) {
        var r = r
        r.ts = SystemClock.nowMs() / 1000
        view.record.withLock { $0 = r }
        let path = directory + "/" + Self.stateFile
        if !Paths.replace(path, with: r.text) {
            log.warning("state_not_saved", ["path": path, "error": FileError.phrase(errno: errno)])
        }
        if receipt {
            send(Self.receiptStatus(r.phase), id: r.id, version: r.version, reason: r.reason,
                 progress: r.phase == .installing ? r.progress : nil)
        }
        changes.post(.state)
    }

    /// A request refused before it started: one failed receipt.
    func refusedReceipt(_ r: UpdateRequest, _ reason: String) { send(.failed, id: r.id, version: r.version, reason: reason) }

    /// An update's receipt, named by the request's id, else its version.
    private func send(_ status: Receipt.Status, id: String?, version: String?, reason: String?, progress: Int? = nil) {
        let now = SystemClock.nowMs()
        storage.recordReceipt(Receipt(id: id ?? version, status: status, ts: now / 1000, reason: reason, kind: "update",
                                      progress: progress, version: version), now: now)
        changes.post(.receipt)
    }

    static func receiptStatus(_ p: UpdatePhase) -> Receipt.Status {
        switch p {
        case .idle, .failed: .failed
        case .installing: .installing
        case .waitingToReboot: .waitingToReboot
        case .trying: .trying
        case .committed: .committed
        case .rolledBack: .rolledBack
        }
    }

    static func other(_ slot: String?) -> String? { slot == "A" ? "B" : slot == "B" ? "A" : nil }
}
