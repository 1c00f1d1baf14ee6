import Foundation
import Testing
import TestSupport
import TestRig

/// The image's provisioning script (image/files/usr/lib/soundbox-image/provision)
/// on a scratch root: files a vendor saved on Windows (a byte order mark,
/// CRLF) are read as written, so a mistake is found on its real line.
@Suite struct ProvisionTextTests {
    static let script = Build.root + "/image/files/usr/lib/soundbox-image/provision"

    /// Runs the script on `files` (name → bytes) put in a boot folder;
    /// returns the fault it wrote, if any.
    func provision(_ files: [String: [UInt8]]) throws -> String? {
        let scratch = Scratch()
        let root = scratch.path + "/root", src = scratch.path + "/boot"
        for dir in [root + "/etc/soundbox", src] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: src + "/" + name)) }
        let r = try CommandRun(["/bin/bash", Self.script], environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                                         "SOUNDBOX_IMAGE_ROOT": root, "SOUNDBOX_PROVISION_SRC": src], timeout: 30)
        #expect(!r.timedOut && r.status == 0, "\(r.stderr)")
        return try? String(contentsOfFile: root + "/etc/soundbox/provisioning.fault", encoding: .utf8)
    }

    @Test func aWindowsWifiFileIsReadLineByLine() throws {
        let text = "ssid=shop\r\npsk=\(String(repeating: "ab", count: 32))\r\ncountry=in\r\n"
        let fault = try provision(["wifi.conf": [0xEF, 0xBB, 0xBF] + Array(text.utf8)])
        #expect(fault == "soundbox/wifi.conf:3: country must be two capital letters (ISO 3166-1, e.g. IN)\n")
    }

    @Test func aWindowsHostnameFileIsOneLine() throws {
        let fault = try provision(["hostname": [0xEF, 0xBB, 0xBF] + Array("Shop-1\r\n".utf8)])
        #expect(fault == "soundbox/hostname:1: 'Shop-1' is not a hostname: one line of 1-63 lowercase letters, digits and '-', not starting or ending with '-'\n")
    }

    @Test func aFIFOIsRefusedNotRead() throws {
        let scratch = Scratch()
        let root = scratch.path + "/root", src = scratch.path + "/boot"
        for dir in [root + "/etc/soundbox", src] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        #expect(mkfifo(src + "/soundbox.conf", 0o644) == 0)
        let r = try CommandRun(["/bin/bash", Self.script], environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                                         "SOUNDBOX_IMAGE_ROOT": root, "SOUNDBOX_PROVISION_SRC": src], timeout: 30)
        #expect(!r.timedOut)
        #expect(try String(contentsOfFile: root + "/etc/soundbox/provisioning.fault", encoding: .utf8) == "soundbox/soundbox.conf: not a regular file\n")
    }
}
