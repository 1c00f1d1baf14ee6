import Foundation
import Soundbox
import SoundboxCrypto

/// Signed payments (docs/signing.md): what verifying one costs, in
/// process, and the publish → first audible sample latency with signing off and
/// required, in one run against the same broker.
func signingBench(voices: String) throws {
    let rig = try BenchRig(name: "signing", voices: voices)
    let keys = rig.dir + "/keys"
    try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
    for command in [["genpkey", "-algorithm", "ed25519", "-out", rig.dir + "/backend.key"],
                    ["pkey", "-in", rig.dir + "/backend.key", "-pubout", "-out", keys + "/backend.pem"]] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = command
        try p.run(); p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw BenchError("openssl \(command.joined(separator: " ")) failed") }
    }
    let key = try Ed25519PrivateKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: rig.dir + "/backend.key"))))
    let publicKey = try Ed25519PublicKey(pem: Array(try Data(contentsOf: URL(fileURLWithPath: keys + "/backend.pem"))))
    func signed(_ id: String, _ amount: String) -> String {
        let doc = try! JSONValue.parse(Array(#"{"id":"\#(id)","amount":"\#(amount)","currency":"CNY","channel":"alipay"}"#.utf8))
        guard case .success(let s) = Signature.sign(doc, device: "bench", kid: key.publicKey.id, now: Int64(Date().timeIntervalSince1970),
                                                    nonce: { "" }, sign: key.sign) else { fatalError("cannot sign") }
        return s.message.text
    }

    // 1. The device's work per payment, as Signing.check does it: parse,
    //    envelope, canonical bytes, Ed25519 verification (and that alone).
    let n = 5000
    let messages = (0..<n).map { Array(signed("V\($0)", "\($0 % 900 + 1).50").utf8) }
    var whole: [Double] = [], verifyOnly: [Double] = []
    for bytes in messages {
        let t0 = now()
        guard case .success(let (p, doc)) = PaymentMessage.parseKeepingDocument(bytes, maxAmount: Amount(minorUnits: 9_999_999_999)),
              case .success(let env) = Signature.envelope(doc, kind: .payment, device: "bench"),
              case .success(let canonical) = Signature.canonical(kind: .payment, device: "bench", envelope: env,
                                                               content: Signature.paymentContent(p, document: doc)) else {
            throw BenchError("a signed payment did not parse")
        }
        let t1 = now()
        guard publicKey.verify(env.sig, of: canonical) else { throw BenchError("a signed payment did not verify") }
        let t2 = now()
        whole.append(Double(t2 - t0) / 1000)
        verifyOnly.append(Double(t2 - t1) / 1000)
    }
    print(String(format: "signed payment, in process (%d): parse + envelope + canonical + verify median %.1f µs (Ed25519 verify alone %.1f µs)",
                 n, median(whole), median(verifyOnly)))

    // 2. Latency, signing off then required, same broker, same machine.
    try rig.startDaemon()
    let off = try rig.latencies(500, prefix: "OFF") { id, amount in #"{"id":"\#(id)","amount":"\#(amount)","currency":"CNY","channel":"alipay"}"# }
    rig.stopDaemon()
    try rig.configure("payment.signing = required\npayment.keys = \(keys)")
    try rig.startDaemon()
    let on = try rig.latencies(500, prefix: "ON", message: signed)
    rig.stopDaemon()
    print("publish -> first audible sample, signing off (\(off.count)):      \(percentiles(off))")
    print("publish -> first audible sample, signing required (\(on.count)): \(percentiles(on))")
}
