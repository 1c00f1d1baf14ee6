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
            request.append(try bundlePath(source))
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

/// FILE as an absolute path without links, once it is known to be a
/// regular file named *.raucb: RAUC installs it where it is (no copy, so a
/// refused bundle leaves nothing behind) and takes it over (owned by root,
/// read-only) while it does.
private func bundlePath(_ source: String) throws(Failure) -> String {
    guard source.hasSuffix(".raucb") else { throw usageError("'\(source)' is not a RAUC bundle (.raucb)") }
    do { try Files.checkRegular(source) } catch { throw failure(error.description, code: "io") }
    guard let resolved = realpath(source, nil) else { throw failure("\(source): \(FileError.phrase(errno: errno))", code: "io") }
    defer { free(resolved) }
    let path = String(cString: resolved)
    guard UpdateRequest.isBundlePath(path) else {
        throw usageError("'\(path)' is not a bundle's path soundboxd takes (at most 1024 bytes, no control characters, ending in .raucb)")
    }
    return path
}
