// `provision check SRC STAGE`: a provisioning folder's files checked
// (Soundbox.Provisioning) and staged for the image's `provision` script,
// which runs it at boot and only places what it staged (image/README.md).
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxCrypto
import SoundboxSystem

/// Checks every provisioning file in SRC, all of them or none: each is read
/// as written on Windows or Linux and staged into STAGE (an empty folder of
/// the caller's), the settings are checked by soundboxd itself, and a
/// wifi.conf becomes the wpa_supplicant.conf to install. The first problem
/// is printed on standard output as "soundbox/FILE[:LINE]: why" (the fault
/// the box reports) with status 1; nothing is printed when all are right.
func provisionCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(["--soundboxd", "--keys"], for: "provision")
    guard args.positional.first == "check", args.positional.count == 3 else {
        throw usageError("usage: provision check SRC STAGE [--soundboxd PATH (/usr/bin/soundboxd)] [--keys DIR (/etc/soundbox/keys)]")
    }
    let stage = args.positional[2]
    var isDir = stat()
    guard stat(stage, &isDir) == 0, isDir.st_mode & S_IFMT == S_IFDIR else { throw failure("\(stage): not a folder", code: "stage") }
    do throws(Provisioning.Problem) {
        try checkFolder(src: args.positional[1], stage: stage, soundboxd: args.options["--soundboxd"] ?? "/usr/bin/soundboxd",
                        keys: args.options["--keys"] ?? "/etc/soundbox/keys")
    } catch {
        struct Refused: Encodable { var fault: String }
        out.emit(Refused(fault: error.description), text: error.description)
        throw Failure(message: "", code: "refused", status: 1)
    }
}

private func checkFolder(src: String, stage: String, soundboxd: String, keys: String) throws(Provisioning.Problem) {
    var staged: [String: [UInt8]] = [:]
    for name in Provisioning.files {
        var st = stat()
        guard lstat(src + "/" + name, &st) == 0 else { continue }
        guard st.st_mode & S_IFMT == S_IFREG else { throw Provisioning.Problem(name, "not a regular file") }
        guard st.st_size <= Provisioning.maxFileBytes else { throw Provisioning.Problem(name, "\(st.st_size) bytes; at most \(Provisioning.maxFileBytes)") }
        let bytes: [UInt8]
        do { bytes = Provisioning.normalized(try Files.contents(src + "/" + name, limit: Provisioning.maxFileBytes)) } catch {
            throw Provisioning.Problem(name, "cannot be read: \(error)")
        }
        try Provisioning.checkText(name, bytes)
        staged[name] = bytes
        try write(stage + "/" + name, bytes)
    }
    func text(_ name: String) -> String? { staged[name].map { String(decoding: $0, as: UTF8.self) } }

    if staged["soundbox.conf"] != nil { try checkSettings(stage + "/soundbox.conf", soundboxd: soundboxd) }
    if let t = text("ca.crt") { try Provisioning.checkPEM("ca.crt", t, kinds: ["CERTIFICATE"]) }
    if let t = text("device.crt") { try Provisioning.checkPEM("device.crt", t, kinds: ["CERTIFICATE"]) }
    if let t = text("device.key") { try Provisioning.checkPEM("device.key", t, kinds: ["PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY"]) }
    if (staged["device.crt"] == nil) != (staged["device.key"] == nil) {
        throw Provisioning.Problem(staged["device.crt"] != nil ? "device.crt" : "device.key", "device.crt and device.key go together; the other one is missing")
    }
    // The backend's signing key: an Ed25519 public key, read as soundboxd will.
    if let t = text("signing.pem") {
        try Provisioning.checkPEM("signing.pem", t, kinds: ["PUBLIC KEY"])
        do { _ = try Ed25519PublicKey(pem: staged["signing.pem"]!) } catch {
            throw Provisioning.Problem("signing.pem", "\(error)")
        }
    }
    // A settings file that demands signatures needs a key, here or on the box.
    if let t = text("soundbox.conf"), let line = Provisioning.signingRequiredLine(t), staged["signing.pem"] == nil, !hasKeys(keys) {
        throw Provisioning.Problem("soundbox.conf", line: line, "payment.signing = required needs the backend's public key: add signing.pem")
    }
    if let t = text("authorized_keys") { try Provisioning.checkAuthorizedKeys(t) }
    if let t = text("wifi.conf") {
        let wifi = try Provisioning.wifi(t)
        let derived = wifi.pskIsHex ? nil : wifi.psk.map { Crypto.hex(Crypto.wpaKey(passphrase: $0, ssid: wifi.ssid)) }
        try write(stage + "/wpa_supplicant.conf", Array(Provisioning.wpaSupplicant(wifi, derivedKey: derived).utf8))
    }
    if let t = text("hostname") { _ = try Provisioning.hostname(t) }
}

/// soundboxd's own check of a settings file (its keys and values, and that
/// voice.lang is installed); its first line of complaint, with the staged
/// path given back the card's name.
private func checkSettings(_ path: String, soundboxd: String) throws(Provisioning.Problem) {
    var said: [String] = []
    switch Subprocess().run([soundboxd, "--check-config", "--config", path], line: { said.append($0) }) {
    case .exited(0): return
    case .notStarted(let e): throw Provisioning.Problem("soundbox.conf", "cannot be checked: \(soundboxd): \(String(cString: strerror(e)))")
    default:
        var first = said.first { !$0.hasPrefix("configuration OK") } ?? "refused by soundboxd"
        if first.hasPrefix("soundboxd: ") { first.removeFirst(11) }
        if first.hasPrefix(path + ":") {
            let rest = first.dropFirst(path.count + 1)
            if let colon = rest.firstIndex(of: ":"), let line = Int(rest[..<colon]) {
                throw Provisioning.Problem("soundbox.conf", line: line, String(rest[rest.index(after: colon)...].drop { $0 == " " }))
            }
            throw Provisioning.Problem("soundbox.conf", String(rest.drop { $0 == " " }))
        }
        throw Provisioning.Problem("soundbox.conf", first.replacing(path, with: "soundbox.conf"))
    }
}

/// Whether the box already has a backend key (`*.pem` or `*.pub` in DIR).
private func hasKeys(_ dir: String) -> Bool {
    guard let d = opendir(dir) else { return false }
    defer { closedir(d) }
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name.hasSuffix(".pem") || name.hasSuffix(".pub") { return true }
    }
    return false
}

private func write(_ path: String, _ bytes: [UInt8]) throws(Provisioning.Problem) {
    let name = String(path.split(separator: "/").last ?? "")
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw Provisioning.Problem(name, "cannot be staged: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { throw Provisioning.Problem(name, "cannot be staged: \(String(cString: strerror(errno)))") }
        done += n
    }
}
