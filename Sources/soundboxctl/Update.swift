// soundboxctl update: a system update by hand (image/README.md, Updates),
// through soundboxd, which does the work and keeps the queue flowing.
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxControl
import SoundboxSystem

/// update status | update cancel | update install FILE|URL [--sha256 H] [--bundle-version V] [--force] [--wait]
func updateCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(["--sha256", "--bundle-version", "--force", "--wait"], for: "update")
    let p = args.positional
    let path = try socketPath(args)
    func ask(_ request: [String]) throws(Failure) -> ControlReply {
        do { return try ControlConnection.open(path, timeout: replyTimeout).request(request) } catch {
            throw Failure(message: error.message, code: error.code, status: 1)
        }
    }
    func show(_ reply: ControlReply) throws(Failure) {
        out.emit(try typed(reply.pairs), text: aligned(reply.pairs))
    }
    switch (p.first, p.count) {
    case ("status", 1), ("cancel", 1):
        try show(try ask(["update", p[0]]))
    case ("install", 2):
        var request = ["update", "install"]
        let source = p[1]
        if source.hasPrefix("http://") || source.hasPrefix("https://") {
            guard args.options["--sha256"] != nil, args.options["--bundle-version"] != nil else {
                throw usageError("a URL needs --sha256 HEX and --bundle-version V (the bundle's version)")
            }
            request.append(source)
        } else {
            let dir = try ask(["update", "status"])["dir"] ?? "/var/lib/soundbox/update"
            request.append(try copyBundle(source, into: dir))
        }
        if let sha = args.options["--sha256"] { request += ["--sha256", sha] }
        if let v = args.options["--bundle-version"] { request += ["--version", v] }
        if args.flags.contains("--force") { request.append("--force") }
        let reply = try ask(request)
        guard args.flags.contains("--wait") else { return try show(reply) }
        try follow(ask, out)
    default:
        throw usageError("usage: update status | update cancel | update install FILE|URL [--sha256 HEX] [--bundle-version V] [--force] [--wait]")
    }
}

/// Prints each change of the update's state until it waits to reboot,
/// failed or is done; exits 1 when it failed.
private func follow(_ ask: ([String]) throws(Failure) -> ControlReply, _ out: Output) throws(Failure) {
    var last = ""
    while true {
        let r = try ask(["update", "status"])
        let state = r["state"] ?? "?"
        let line = [state, r["progress"].map { $0 + "%" }, r["version"], r["reason"]].compactMap { $0 }.joined(separator: " ")
        if line != last && !out.json { print(line) }
        last = line
        switch state {
        case "failed":
            if out.json { out.emit(try typed(r.pairs), text: "") }
            exit(1)
        case "waiting to reboot", "committed", "rolled back", "trying", "idle":
            if out.json { out.emit(try typed(r.pairs), text: "") }
            return
        default: usleep(500_000)   // a technician's progress display, not a synchronisation
        }
    }
}

/// Copies FILE into the update folder (soundboxd's; group soundbox may
/// write there) under its own name, through a temporary name, synced.
private func copyBundle(_ source: String, into dir: String) throws(Failure) -> String {
    let base = String(source.split(separator: "/").last ?? "")
    let name = UpdateRequest.isBundleName(base) ? base : "bundle.raucb"
    guard base.hasSuffix(".raucb") else { throw usageError("'\(source)' is not a RAUC bundle (.raucb)") }
    let input: Int32
    do { input = try Files.openRegular(source) } catch { throw failure(error.description, code: "io") }
    defer { close(input) }
    let tmp = dir + "/.incoming-\(getpid())", target = dir + "/" + name
    let output = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o640)
    guard output >= 0 else {
        throw failure("cannot write \(tmp): \(FileError.phrase(errno: errno)) (run as root or join group soundbox)", code: "io")
    }
    // soundboxd (user soundbox) reads it through the folder's group.
    var folder = stat()
    if stat(dir, &folder) == 0 { _ = fchown(output, uid_t.max, folder.st_gid) }
    fchmod(output, 0o640)
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    var ok = true
    while ok {
        let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { ok = n == 0; break }
        ok = buffer.withUnsafeBytes { write(output, $0.baseAddress, n) } == n
        if !ok { break }
    }
    let e = errno
    ok = ok && fsync(output) == 0
    close(output)
    guard ok, rename(tmp, target) == 0 else {
        unlink(tmp)
        throw failure("copying \(source) to \(dir): \(FileError.phrase(errno: e)) (\(UpdateFolder.freeText(dir)))", code: "io")
    }
    return name
}

enum UpdateFolder {
    static func freeText(_ dir: String) -> String {
        Paths.freeBytes(dir).map { "\($0 >> 20) MiB free there" } ?? "free space unknown"
    }
}
