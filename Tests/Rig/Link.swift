import Foundation
import Soundbox
import SoundboxCrypto
import SoundboxStore
import TestSupport

/// A broker, a backend client and soundboxd connected to the broker.
package final class Link {
    package let scratch = Scratch()
    package let broker: Broker
    package let daemon: Daemon
    package let backend: Backend
    package let device: String

    /// - Parameter via: the port the daemon connects to (a proxy in front of the broker).
    package init(device: String = "shop-1", config: [String: String] = [:], via port: ((Broker) throws -> Int)? = nil) throws {
        self.device = device
        broker = try Broker(dir: scratch.path + "/broker")
        let daemonPort = try port?(broker) ?? broker.port
        daemon = try Daemon(dir: scratch.path, config: [
            "mqtt.enabled": "true", "mqtt.host": "127.0.0.1", "mqtt.port": "\(daemonPort)", "device.id": device,
            "mqtt.keepalive": "5", "mqtt.reconnect_max_s": "2", "mqtt.link_prompts": "false",
        ].merging(config) { $1 })
        backend = try Backend(port: broker.port, device: device)
    }

    /// Starts the daemon and waits until the backend sees it online (its
    /// subscriptions precede its status on the same connection).
    package func start(failpoint: String? = nil) throws {
        try daemon.start(failpoint: failpoint)
        guard backend.waitUntil(timeout: 20, { self.backend.status?["online"] as? Bool == true }) else {
            throw TestFailure("the backend never saw \(device) online: \(String(describing: backend.status))")
        }
        guard backend.status?["id"] as? String == device else {
            throw TestFailure("the status does not name its device: \(String(describing: backend.status))")
        }
    }

    package func entries() throws -> [Entry] { try Store(path: daemon.database).history(limit: 1_000_000) }
}

/// A backend's signing key, made by the openssl command (an independent
/// implementation), its public half in a key folder the daemon reads.
package struct BackendKey {
    package let key: Ed25519PrivateKey
    package let privatePath: String
    package let publicPath: String
    package var id: String { key.publicKey.id }

    package init(dir: String, name: String) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        privatePath = dir + "/\(name).key"
        publicPath = dir + "/\(name).pem"
        for command in [["openssl", "genpkey", "-algorithm", "ed25519", "-out", privatePath],
                        ["openssl", "pkey", "-in", privatePath, "-pubout", "-out", publicPath]] {
            let r = try CommandRun(["/usr/bin/env"] + command)
            guard r.status == 0 else { throw TestFailure("\(command.joined(separator: " ")): \(r.stderr)") }
        }
        key = try Ed25519PrivateKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: privatePath))))
    }

    /// `json` signed for `device` (ts now unless it has one; a cmd gets a fresh nonce).
    package func sign(_ json: String, device: String, now: Int64 = Int64(Date().timeIntervalSince1970)) throws -> String {
        let document = try JSONValue.parse(Array(json.utf8))
        switch Signature.sign(document, device: device, kid: id, now: now, nonce: { UUID().uuidString }, sign: key.sign) {
        case .success(let s): return s.message.text
        case .failure(let p): throw TestFailure("cannot sign \(json): \(p)")
        }
    }
}

/// A link whose daemon demands signatures, with the backend's key in its folder.
package func signedLink(device: String = "shop-1", keys: [String] = ["backend"], config: [String: String] = [:]) throws -> (Link, [BackendKey]) {
    let scratch = "/tmp/sbk-" + String(UUID().uuidString.prefix(8))
    let made = try keys.map { try BackendKey(dir: scratch, name: $0) }
    let folder = scratch + "/keys"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for k in made { try FileManager.default.copyItem(atPath: k.publicPath, toPath: folder + "/" + (k.publicPath as NSString).lastPathComponent) }
    let link = try Link(device: device, config: ["payment.signing": "required", "payment.keys": folder].merging(config) { $1 })
    return (link, made)
}
