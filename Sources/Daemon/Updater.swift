// ~570 lines: the update's decisions still sit beside its subprocess calls and file writes; issue 40 moves them into a pure UpdateFlow.
import Glibc
import Soundbox
import SoundboxCrypto
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
/// from the signed `cmd update` or `soundboxctl update install`. A URL is
/// downloaded into the update folder (free space checked first, resumed
/// after a drop or a power cut, its SHA-256 verified); the bundle is
/// installed by the image's helper (RAUC) at a quiet moment, the other slot
/// armed for one try, and the box rebooted once the queue is empty (or, past
/// `update.reboot_deadline_s`, at the next pause between payments). Back up
/// on the new slot, the update is committed once the daemon has come up
/// with durable storage and the broker connected; on the old slot it has
/// rolled back. The record (`update/state`) survives power cuts, so each
/// step is taken again or carried on.
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

    /// What is kept free on the state partition for the queue, beyond a download.
    static let reserve: Int64 = 64 << 20
    static let stateFile = "state"
    static let downloadFile = "download.raucb"

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
        if case .file(let name) = r.source {
            do { try Files.checkRegular(directory + "/" + name) } catch { return .refused(error.description) }
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
            if case .url = r.source { starting.phase = .downloading } else { starting.phase = .installing }
            starting.version = r.version; starting.id = r.id
            view.record.withLock { $0 = starting }
            return .accepted(starting)
        }
    }

    /// Stops a download or a waiting reboot; an install under way finishes.
    func cancel() -> Answer {
        // Not started yet: dropped (the updater's thread is waiting, nothing else writes the record).
        if cond.broadcast({ () -> Bool in defer { request = nil }; return request != nil }) {
            set(.failed, reason: "cancelled")
            return .accepted(record)
        }
        let current = record
        switch current.phase {
        case .downloading, .waitingToReboot:
            let running: Subprocess = cond.broadcast { cancelAsked = true; return job }
            running.stop(grace: 2)
            return .accepted(current)
        case .installing: return .refused("the bundle is being installed and cannot be interrupted; cancel once it waits to reboot")
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

    /// A download stops; an install or a reboot the helper is making goes
    /// on without us (RAUC's service finishes it; the next start resumes).
    func shutdown(deadline: Double) {
        let downloading = record.phase == .downloading
        cond.broadcast { stopping = true; if downloading { job.stop(grace: max(0, min(1, deadline - SystemClock.monotonic()))) } }
    }

    private var cancelled: Bool { cond.broadcast { cancelAsked || stopping } }

    /// After a start: carry on with what the record says was under way.
    private func resume() {
        let r = record
        let slot = view.system.withLock { $0.slot }
        switch r.phase {
        case .downloading, .installing:
            guard let sha = r.sha256, let url = r.url else {
                if let file = r.file { log.info("resuming", ["phase": r.phase.rawValue]); perform(UpdateRequest(source: .file(file), version: r.version, id: r.id, force: r.force), resumed: true) }
                return
            }
            log.info("resuming", ["phase": r.phase.rawValue, "version": r.version ?? "-"])
            perform(UpdateRequest(source: .url(url), sha256: sha, version: r.version, id: r.id, size: r.size, force: r.force), resumed: true)
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
        let file: String
        switch r.source {
        case .url(let url):
            rec.url = url; rec.sha256 = r.sha256; rec.size = r.size; rec.file = Self.downloadFile
            file = Self.downloadFile
            if !(resumed && rec.phase == .installing) {
                rec.phase = .downloading
                save(rec, receipt: true)
                guard download(url, sha256: r.sha256!, size: r.size) else { return }
            }
        case .file(let name):
            rec.file = name; rec.url = nil; rec.sha256 = nil; rec.size = nil
            file = name
        }
        install(directory + "/" + file, force: r.force)
    }

    // MARK: Download

    /// Downloads `url` to download.raucb (through download.raucb.part,
    /// resumed with an HTTP range), then checks its SHA-256.
    private func download(_ url: String, sha256: String, size: Int64?) -> Bool {
        let part = directory + "/" + Self.downloadFile + ".part", final = directory + "/" + Self.downloadFile
        // Downloaded before a power cut but not yet installed: verified again.
        if Files.exists(final) && !Files.exists(part) { rename(final, part) }
        guard let total = size ?? contentLength(url) else { return false }
        guard total <= UpdateRequest.maxSize else { return fail("the bundle is \(total >> 20) MiB, more than a slot holds (\(UpdateRequest.maxSize >> 20) MiB)") }
        if Self.fileSize(part) > total { unlink(part) }
        let free = Self.freeBytes(directory)
        let need = total - Self.fileSize(part)
        if need + Self.reserve > free {
            unlink(part)
            return fail("not enough space on the state partition: the bundle needs \(need >> 20) MiB more and \(Self.reserve >> 20) MiB stay for the queue; \(free >> 20) MiB are free")
        }
        var failures = 0, lastSize = Self.fileSize(part)
        while Self.fileSize(part) < total {
            if cancelled { return abandon(part) }
            var reason = ""
            let ticker = Ticker(every: 1) { [self] in progress(Self.fileSize(part), of: total) }
            let outcome = currentJob.run(curl(url, part, limit: total), environment: childEnvironment) { line in reason = line }
            ticker.stop()
            if cancelled { return abandon(part) }
            switch outcome {
            case .exited(0) where Self.fileSize(part) < total:
                reason = "the server ended the bundle early at \(Self.fileSize(part)) of \(total) bytes"
            case .exited(0): continue
            case .exited(23), .signaled(SIGXFSZ):   // curl: write error (the disk is full, a file-size limit)
                unlink(part)
                return fail("could not write the download (\(TextFile.excerpt(reason.isEmpty ? "\(outcome)" : reason, limit: 120))): \(Self.freeBytes(directory) >> 20) MiB free on the state partition")
            case .exited(33), .exited(36):   // the server cannot resume: from the start again
                unlink(part)
                continue
            case .exited(63):
                unlink(part)
                return fail("the server sent more than the \(total) bytes announced")
            case .exited(22):
                return fail("download refused by the server: \(TextFile.excerpt(reason, limit: 200))")
            case .notStarted(let e):
                return fail("could not start curl: \(FileError.phrase(errno: e))")
            default: break
            }
            let now = Self.fileSize(part)
            failures = now > lastSize ? 1 : failures + 1
            lastSize = now
            log.warning("download_interrupted", ["bytes": "\(now)", "reason": TextFile.excerpt(reason, limit: 200), "attempt": "\(failures)"])
            if failures >= 6 { return fail("download failed 6 times in a row: \(TextFile.excerpt(reason, limit: 200)) (kept \(now) bytes; ask again to resume)") }
            _ = cond.wait(timeout: Double(min(30, 1 << failures))) { cancelAsked || stopping }
        }
        let got = Self.fileSize(part)
        guard got == total else {
            unlink(part)
            return fail("the download is \(got) bytes, not the \(total) announced (a truncated or altered bundle)")
        }
        progress(got, of: total)
        guard let digest = Self.sha256(of: part), digest == sha256 else {
            unlink(part)
            return fail("sha256 mismatch: the download is not the bundle the command named (a truncated or altered download)")
        }
        guard rename(part, final) == 0 else { return fail("rename \(part): \(FileError.phrase(errno: errno))") }
        log.info("downloaded", ["bytes": "\(got)"])
        return true
    }

    /// curl dies with the daemon (setpriv's parent-death signal): a daemon
    /// killed mid-download must not leave a curl writing the file the next
    /// daemon resumes.
    static let curlCommand = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", "/usr/bin/curl"]

    private func curl(_ url: String, _ output: String, limit: Int64) -> [String] {
        Self.curlCommand + ["--fail", "--silent", "--show-error", "--location", "--max-redirs", "3",
         "--proto", "=http,https", "--proto-redir", "=http,https", "--connect-timeout", "20",
         "--speed-limit", "1", "--speed-time", "60", "--max-filesize", "\(limit)", "--continue-at", "-",
         "--output", output, "--", url]
    }

    /// The server's Content-Length for `url` (HEAD, redirects followed).
    private func contentLength(_ url: String) -> Int64? {
        var length: Int64?, last = ""
        let outcome = currentJob.run(Self.curlCommand + ["--fail", "--silent", "--show-error", "--head", "--location", "--max-redirs", "3",
                                      "--proto", "=http,https", "--proto-redir", "=http,https", "--connect-timeout", "20",
                                      "--max-time", "60", "--", url], environment: childEnvironment) { line in
            last = line
            let lower = line.lowercased()
            if lower.hasPrefix("content-length:") { length = Int64(String(lower.dropFirst(15).filter { $0 != " " && $0 != "\t" })) }
        }
        if cancelled { _ = abandon(nil); return nil }
        guard outcome == .exited(0) else { _ = fail("could not reach the bundle: \(TextFile.excerpt(last, limit: 200))"); return nil }
        guard let length, length > 0 else { _ = fail("the server did not say the bundle's size; send \"size\" with the command"); return nil }
        return length
    }

    private func progress(_ bytes: Int64, of total: Int64) {
        let pct = total > 0 ? Int(min(100, bytes * 100 / total)) : 0
        step(pct)
    }

    /// Records progress; a receipt every 10 %.
    private func step(_ pct: Int) {
        var r = record
        guard pct != r.progress else { return }
        let receipt = pct / 10 != r.progress / 10
        r.progress = pct
        save(r, receipt: receipt)
    }

    // MARK: Install, arm, reboot

    private func install(_ bundle: String, force: Bool) {
        // A quiet moment: never while a payment is being spoken.
        while !wake.waitIdle(timeout: 1) { if cancelled { _ = abandon(nil); return } }
        if cancelled { _ = abandon(nil); return }
        var r = record
        r.phase = .installing; r.progress = 0
        save(r, receipt: true)
        let forceFile = directory + "/force"
        if force { close(open(forceFile, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o640)) } else { unlink(forceFile) }
        var last = ""
        let outcome = currentJob.run([helper, "install", bundle], environment: childEnvironment) { [self] line in
            if let pct = InstallProgress.percent(line) { step(pct) } else if !line.allSatisfy({ $0 == " " }) { last = line }
        }
        unlink(forceFile)
        if cancelled { return }
        guard outcome == .exited(0) else {
            unlink(bundle)   // refused: it would only take room on the state partition
            _ = fail("install failed: \(TextFile.excerpt(last.isEmpty ? "\(outcome)" : last, limit: 300))")
            return
        }
        log.info("installed", ["version": record.version ?? "-"])
        var armed: String?
        guard helperOK(["arm"], what: "arm the new slot", line: { l in if l.hasPrefix("slot=") { armed = String(l.dropFirst(5)) } }) else { return }
        r = record
        r.phase = .waitingToReboot; r.progress = 100
        r.toSlot = armed.flatMap { ["A", "B"].contains($0) ? $0 : nil } ?? Self.other(r.fromSlot)
        save(r, receipt: true)
        unlink(bundle)   // the slot holds it now (kept until then: a power cut before this installs it again)
        reboot()
    }

    /// Reboots once the queue is empty; past the deadline, at the next
    /// pause between payments. Payments keep coming and being spoken meanwhile.
    private func reboot() {
        let deadline = SystemClock.monotonic() + Double(settings.current[.updateRebootDeadline])
        while !wake.waitIdle(timeout: 1) {
            if cancelled { _ = abandon(nil); return }
            if SystemClock.monotonic() > deadline && !playback.withLock({ $0.speaking }) { break }
        }
        if cancelled { _ = abandon(nil); return }
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
        for k in ["SOUNDBOX_UPDATE_TEST", "http_proxy", "https_proxy", "no_proxy"] { env[k] = environment[k] }
        env["SOUNDBOX_UPDATE_DIR"] = directory
        return env
    }

    /// Runs the helper; a failure fails the update with its last line.
    private func helperOK(_ args: [String], what: String, line: (String) -> Void = { _ in }) -> Bool {
        var last = ""
        let outcome = currentJob.run([helper] + args, environment: childEnvironment) { l in line(l); last = l }
        guard outcome == .exited(0) else {
            return cancelled ? abandon(nil) : fail("could not \(what): \(TextFile.excerpt(last.isEmpty ? "\(outcome)" : last, limit: 300))")
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

    /// Cancelled: the download deleted, an armed try disarmed, the update
    /// failed "cancelled". Stopped (the daemon stops, e.g. for the very
    /// reboot it asked for): nothing changes; the next start carries on.
    private func abandon(_ part: String?) -> Bool {
        guard cond.broadcast({ cancelAsked }) else { return false }
        if let part { unlink(part) }
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
        let path = directory + "/" + Self.stateFile, tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o640)
        if fd >= 0 {
            let bytes = Array(r.text.utf8)
            let ok = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count && fsync(fd) == 0
            close(fd)
            if ok && rename(tmp, path) == 0 {
                Paths.syncFolder(containing: path)
            } else {
                log.warning("state_not_saved", ["path": path, "error": FileError.phrase(errno: errno)])
            }
        }
        if receipt {
            send(Self.receiptStatus(r.phase), id: r.id, version: r.version, reason: r.reason,
                 progress: [.downloading, .installing].contains(r.phase) ? r.progress : nil)
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
        case .downloading: .downloading
        case .installing: .installing
        case .waitingToReboot: .waitingToReboot
        case .trying: .trying
        case .committed: .committed
        case .rolledBack: .rolledBack
        }
    }

    static func other(_ slot: String?) -> String? { slot == "A" ? "B" : slot == "B" ? "A" : nil }

    static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return lstat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    static func freeBytes(_ directory: String) -> Int64 { Paths.freeBytes(directory) ?? 0 }

    /// The file's SHA-256 as lowercase hex, read in 1 MiB pieces.
    static func sha256(of path: String) -> String? {
        guard let fd = try? Files.openRegular(path) else { return nil }
        defer { close(fd) }
        var hash = SHA256Stream()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            hash.update(buffer[..<n])
        }
        return Crypto.hex(hash.finish())
    }
}

/// Calls `body` every `seconds` on its own thread until stopped.
private final class Ticker: @unchecked Sendable {
    private let cond = Condition()
    private var done = false
    private var thread: ServiceThread?

    init(every seconds: Double, _ body: @escaping @Sendable () -> Void) {
        thread = ServiceThread(name: "update-progress") { [self] in
            while !cond.wait(timeout: seconds, until: { done }) { body() }
        }
    }

    func stop() {
        cond.broadcast { done = true }
        _ = thread?.join(timeout: 2)
        thread = nil
    }
}
