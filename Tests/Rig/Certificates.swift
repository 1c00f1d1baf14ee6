import Foundation
import TestSupport

/// A throwaway PKI made with the `openssl` CLI at test time (EC P-256, so
/// it takes tens of milliseconds): a CA, a server certificate for
/// `localhost` (SAN DNS:localhost, IP:127.0.0.1, so hostname verification
/// passes when a device connects to "localhost"), and one client
/// certificate per device id (CN = device id; with mosquitto's
/// `use_identity_as_username` the CN becomes the MQTT username).
package struct Certificates: Sendable {
    package let dir: String
    package var ca: String { dir + "/ca.crt" }
    package var caKey: String { dir + "/ca.key" }
    package var serverCert: String { dir + "/server.crt" }
    package var serverKey: String { dir + "/server.key" }
    package let devices: [String]

    package func client(_ id: String) -> (cert: String, key: String) {
        precondition(devices.contains(id), "no client certificate made for \(id)")
        return (dir + "/client-\(id).crt", dir + "/client-\(id).key")
    }

    package static let openssl = "/usr/bin/openssl"

    package static func make(in dir: String, devices: [String]) throws -> Certificates {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let certs = Certificates(dir: dir, devices: devices)
        // Our own extension sections: no dependence on the system openssl.cnf.
        let extensions = dir + "/extensions.cnf"
        try """
            [ca]
            basicConstraints = critical, CA:TRUE
            keyUsage = critical, keyCertSign, cRLSign
            subjectKeyIdentifier = hash
            [server]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost, IP:127.0.0.1
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [client]
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = clientAuth
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            [req]
            distinguished_name = dn
            prompt = no
            [dn]

            """.write(toFile: extensions, atomically: true, encoding: .utf8)

        func key(_ path: String) throws {
            try run([openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        }
        var serial = 1
        func sign(subject: String, key keyPath: String, section: String, out: String) throws {
            let csr = out + ".csr"
            try run([openssl, "req", "-new", "-config", extensions, "-key", keyPath, "-subj", subject, "-out", csr])
            serial += 1
            try run([openssl, "x509", "-req", "-in", csr, "-CA", certs.ca, "-CAkey", certs.caKey,
                     "-set_serial", String(serial), "-days", "3650", "-sha256",
                     "-extfile", extensions, "-extensions", section, "-out", out])
            try? FileManager.default.removeItem(atPath: csr)
        }

        try key(certs.caKey)
        try run([openssl, "req", "-new", "-x509", "-config", extensions, "-key", certs.caKey,
                 "-subj", "/CN=Soundbox Test CA", "-days", "3650", "-sha256",
                 "-extensions", "ca", "-set_serial", "1", "-out", certs.ca])
        try key(certs.serverKey)
        try sign(subject: "/CN=localhost", key: certs.serverKey, section: "server", out: certs.serverCert)
        for id in devices {
            let (cert, keyPath) = certs.client(id)
            try key(keyPath)
            try sign(subject: "/CN=\(id)", key: keyPath, section: "client", out: cert)
        }
        return certs
    }

    /// Runs a command; throws with its output if it fails.
    @discardableResult
    package static func run(_ argv: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: argv[0])
        p.arguments = Array(argv.dropFirst())
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        p.standardInput = FileHandle.nullDevice
        try runWithDefaultSignals(p)
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        try? pipe.fileHandleForReading.close()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw TestFailure("\(argv.joined(separator: " ")) failed (\(p.terminationStatus)):\n\(out)")
        }
        return out
    }
}
