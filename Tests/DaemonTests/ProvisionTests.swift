import Foundation
import Testing
import TestSupport
import TestRig

/// The image's provisioning script (image/files/usr/lib/soundbox-image/provision)
/// on the host, on a scratch root, with the built soundboxd and soundboxctl
/// doing its checks as the image's do: each hostile or careless folder a
/// vendor could write is refused with its file and line, nothing is applied,
/// the settings already on the box are kept and the files stay on the card.
/// Files saved on Windows (a byte order mark, CRLF) are read as written, so
/// a mistake is found on its real line. (The boot test keeps one refusal,
/// to see the fault reach `doctor` and `status` on the image.)
@Suite struct ProvisionTests {
    static let script = Build.root + "/image/files/usr/lib/soundbox-image/provision"
    static let settings = "device.id = shop-1\n"

    /// A run of the script: the fault it wrote, and its folders.
    struct Run {
        let scratch: Scratch
        let status: Int32
        let stderr: String
        var root: String { scratch.path + "/root" }
        var src: String { scratch.path + "/boot" }
        var fault: String? { try? String(contentsOfFile: root + "/etc/soundbox/provisioning.fault", encoding: .utf8) }
        var settings: String? { try? String(contentsOfFile: root + "/etc/soundbox/soundbox.conf", encoding: .utf8) }
        var left: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: src)) ?? []).sorted() }
    }

    /// Runs the script on `files` (name → bytes) put in a boot folder, on a
    /// root whose settings are `ProvisionTests.settings`; `prepare` may add
    /// what bytes cannot say (a FIFO, a folder).
    func provision(_ files: [String: [UInt8]], prepare: (String) throws -> Void = { _ in }) throws -> Run {
        let scratch = Scratch()
        let root = scratch.path + "/root", src = scratch.path + "/boot"
        for dir in [root + "/etc/soundbox/keys", src] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        try Data(Self.settings.utf8).write(to: URL(fileURLWithPath: root + "/etc/soundbox/soundbox.conf"))
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: src + "/" + name)) }
        try prepare(src)
        let r = try CommandRun(["/bin/bash", Self.script], environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SOUNDBOX_BIN": Build.binDir,
                                                                         "SOUNDBOX_IMAGE_ROOT": root, "SOUNDBOX_PROVISION_SRC": src], timeout: 60)
        #expect(!r.timedOut && r.status == 0, "the script must end and let the box boot: \(r.stderr)")
        return Run(scratch: scratch, status: r.status, stderr: r.stderr)
    }

    /// Keys and certificates of the wrong kind, made once by openssl.
    static let pems: [String: [UInt8]] = {
        let scratch = Scratch("sbp")
        let d = scratch.path
        for command in [["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d + "/ec.key"],
                        ["openssl", "req", "-x509", "-new", "-key", d + "/ec.key", "-subj", "/CN=ca", "-days", "1", "-out", d + "/ca.crt"],
                        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", d + "/rsa.key"],
                        ["openssl", "pkey", "-in", d + "/rsa.key", "-pubout", "-out", d + "/rsa.pem"]] {
            let r = try? CommandRun(["/usr/bin/env"] + command)
            precondition(r?.status == 0, "\(command.joined(separator: " ")): \(r?.stderr ?? "did not run")")
        }
        var out: [String: [UInt8]] = [:]
        for name in ["ec.key", "ca.crt", "rsa.pem"] { out[name] = Array(FileManager.default.contents(atPath: d + "/" + name)!) }
        return out
    }()

    static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// Each refusal the boot test made on the PC image, by name: the files,
    /// and how the fault must begin.
    static let refusals: [(String, [String: [UInt8]], String)] = [
        ("settings", ["soundbox.conf": text("device.id = shop-1\naudio.volume = loud\n")], "soundbox/soundbox.conf:2: audio.volume = 'loud' is not allowed"),
        ("wifi_psk", ["wifi.conf": text("ssid=Shop\npsk=short\ncountry=IN\n")], "soundbox/wifi.conf:2: psk must be 8-63"),
        ("wifi_key", ["wifi.conf": text("ssid=Shop\npassword=secret123\n")], "soundbox/wifi.conf:2: unknown key 'password'"),
        ("wifi_country", ["wifi.conf": text("ssid=Shop\npsk=secret123\ncountry=in\n")], "soundbox/wifi.conf:3: country must be two capital letters"),
        ("wifi_ssid", ["wifi.conf": text("ssid=\(String(repeating: "s", count: 33))\ncountry=IN\n")], "soundbox/wifi.conf:1: ssid must be 1-32 bytes"),
        ("wifi_incomplete", ["wifi.conf": text("psk=secret123\n")], "soundbox/wifi.conf: needs ssid= and country="),
        ("hostname", ["hostname": text("../../etc/passwd\n")], "soundbox/hostname:1: '../../etc/passwd' is not a hostname"),
        ("hostname_two_lines", ["hostname": text("shop-1\nshop-2\n")], "soundbox/hostname:1: 'shop-1' is not a hostname"),
        ("ca_not_pem", ["ca.crt": text("hello\n")], "soundbox/ca.crt:1: not PEM"),
        ("ca_not_base64", ["ca.crt": text("-----BEGIN CERTIFICATE-----\nMIIB$$$\n-----END CERTIFICATE-----\n")], "soundbox/ca.crt:2: not base64"),
        ("ca_no_end", ["ca.crt": text("-----BEGIN CERTIFICATE-----\nMIIB\n")], "soundbox/ca.crt:2: the 'CERTIFICATE' block has no END line"),
        ("ca_empty", ["ca.crt": text("\n")], "soundbox/ca.crt: empty: expected a PEM 'CERTIFICATE' block"),
        ("ssh_key", ["authorized_keys": text("# techs\nssh-ed25519 AAAAnotakey tech\n")], "soundbox/authorized_keys:2: not an SSH public key"),
        ("ssh_no_key", ["authorized_keys": text("# nobody yet\n")], "soundbox/authorized_keys: no key in it"),
        ("nul_bytes", ["soundbox.conf": text("device.id = x\0\n")], "soundbox/soundbox.conf: contains NUL bytes"),
        ("too_big", ["soundbox.conf": [UInt8](repeating: UInt8(ascii: "#"), count: 70_000)], "soundbox/soundbox.conf: 70000 bytes; at most 65536"),
        ("signing_without_key", ["soundbox.conf": text("device.id = shop-1\npayment.signing = required\n")],
         "soundbox/soundbox.conf:2: payment.signing = required needs the backend's public key"),
    ]

    @Test(arguments: refusals.map(\.0))
    func aBadFolderIsRefusedWholeWithItsLine(_ name: String) throws {
        let (_, files, want) = try #require(Self.refusals.first { $0.0 == name })
        try expectRefused(try provision(files), want, files: files.keys.sorted())
    }

    /// Keys of the wrong kind where a certificate, an Ed25519 public key or
    /// a pair is expected.
    @Test(arguments: ["key_without_cert", "signing_not_a_key", "signing_not_ed25519", "signing_private"])
    func aWrongKeyIsRefused(_ name: String) throws {
        let pems = Self.pems
        let (files, want): ([String: [UInt8]], String) = switch name {
        case "key_without_cert": (["device.key": pems["ec.key"]!], "soundbox/device.key: device.crt and device.key go together")
        case "signing_not_a_key": (["signing.pem": pems["ca.crt"]!], "soundbox/signing.pem:1: a 'CERTIFICATE' block; expected PUBLIC KEY")
        case "signing_not_ed25519": (["signing.pem": pems["rsa.pem"]!], "soundbox/signing.pem: not an Ed25519 key")
        default: (["signing.pem": pems["ec.key"]!], "soundbox/signing.pem:1: a 'EC PRIVATE KEY' block; expected PUBLIC KEY")
        }
        try expectRefused(try provision(files), want, files: files.keys.sorted())
    }

    @Test func aFolderWhereAFileShouldBeIsRefused() throws {
        let run = try provision([:]) { src in try FileManager.default.createDirectory(atPath: src + "/soundbox.conf", withIntermediateDirectories: false) }
        try expectRefused(run, "soundbox/soundbox.conf: not a regular file", files: ["soundbox.conf"])
    }

    @Test func aFIFOIsRefusedNotRead() throws {
        let run = try provision([:]) { src in #expect(mkfifo(src + "/soundbox.conf", 0o644) == 0) }
        try expectRefused(run, "soundbox/soundbox.conf: not a regular file", files: ["soundbox.conf"])
    }

    /// One bad file among good ones: none of them is applied.
    @Test func oneBadFileStopsAllOfThem() throws {
        let run = try provision(["soundbox.conf": Self.text("device.id = shop-2\n"), "hostname": Self.text("Shop-2\n")])
        try expectRefused(run, "soundbox/hostname:1: 'Shop-2' is not a hostname", files: ["hostname", "soundbox.conf"])
    }

    /// A right folder is applied whole: the network's key derived (the
    /// passphrase not kept), the hostname, the backend's key; the files
    /// leave the card, applied.txt says so. (Files owned by the image's
    /// users, soundbox.conf and authorized_keys, are applied in the boot test.)
    @Test func aRightFolderIsApplied() throws {
        let scratch = Scratch("sbq")
        let r = try CommandRun(["/bin/sh", "-c", "openssl genpkey -algorithm ed25519 | openssl pkey -pubout -out \(scratch.path)/signing.pem"])
        try #require(r.status == 0, "\(r.stderr)")
        let signing = try #require(FileManager.default.contents(atPath: scratch.path + "/signing.pem"))
        let run = try provision(["wifi.conf": Self.text("ssid=Shop\r\npsk=secret123\r\ncountry=IN\r\n"), "hostname": Self.text("shop-2\n"),
                                 "signing.pem": Array(signing)])
        #expect(run.fault == nil)
        let wpa = try String(contentsOfFile: run.root + "/etc/wpa_supplicant/wpa_supplicant.conf", encoding: .utf8)
        let phrase = try CommandRun(["/usr/bin/wpa_passphrase", "Shop", "secret123"])
        let psk = try #require(phrase.stdout.split(separator: "\n").first { $0.hasPrefix("\tpsk=") }).dropFirst(5)
        #expect(wpa.contains("    ssid=53686f70\n") && wpa.contains("    psk=\(psk)\n") && wpa.contains("country=IN\n") && !wpa.contains("secret123"), "\(wpa)")
        #expect(try String(contentsOfFile: run.root + "/etc/hostname", encoding: .utf8) == "shop-2\n")
        #expect(FileManager.default.contents(atPath: run.root + "/etc/soundbox/keys/signing.pem") == signing)
        #expect(run.left == ["applied.txt"], "the card keeps only applied.txt: \(run.left)")
        #expect(run.settings == Self.settings)
    }

    @Test func aWindowsWifiFileIsReadLineByLine() throws {
        let text = "ssid=shop\r\npsk=\(String(repeating: "ab", count: 32))\r\ncountry=in\r\n"
        #expect(try provision(["wifi.conf": [0xEF, 0xBB, 0xBF] + Array(text.utf8)]).fault
                == "soundbox/wifi.conf:3: country must be two capital letters (ISO 3166-1, e.g. IN)\n")
    }

    @Test func aWindowsHostnameFileIsOneLine() throws {
        #expect(try provision(["hostname": [0xEF, 0xBB, 0xBF] + Array("Shop-1\r\n".utf8)]).fault
                == "soundbox/hostname:1: 'Shop-1' is not a hostname: one line of 1-63 lowercase letters, digits and '-', not starting or ending with '-'\n")
    }

    /// The fault names the file and line; nothing was applied: the box's
    /// settings are as they were, the card's files are all still there.
    func expectRefused(_ run: Run, _ want: String, files: [String]) throws {
        let fault = try #require(run.fault, "no fault written: \(run.stderr)")
        #expect(fault.hasPrefix(want), "fault '\(fault)', expected '\(want)…'")
        #expect(fault.hasSuffix("\n") && fault.dropLast().allSatisfy { $0 != "\n" }, "one line: \(fault)")
        #expect(run.settings == Self.settings, "the box's settings must be kept")
        #expect(run.left == files, "the card's files must stay (no applied.txt): \(run.left)")
    }
}
