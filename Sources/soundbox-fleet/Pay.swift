// `pay DEVICE AMOUNT`: the reference backend client (docs/fleet.md "pay"):
// one payment, signed when a key is given, followed by its receipts until
// a final one, re-sent (the same id) until the device has answered.
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxCrypto
import SoundboxFleet
import SoundboxSystem
import FleetLink

/// Receipt statuses after which nothing more comes for a payment.
let finalStatuses: Set<String> = ["played", "duplicate", "muted", "expired", "rejected", "failed"]

func payCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(["--id", "--currency", "--channel", "--lang", "--wait", "--resend"], for: "pay")
    guard args.positional.count == 2 else { throw usageError("usage: pay DEVICE AMOUNT [--id ID] [--currency C] [--channel C] [--lang L] [--key PRIVATE] [--wait S] [--resend S]") }
    let device = args.positional[0]
    guard DeviceRecord.isValidID(device) else { throw usageError("'\(TextFile.excerpt(device))' is no device id (1-64 bytes without '/', '+', '#' or control characters)") }
    let amount: Amount
    do { amount = try Amount.parse(args.positional[1], max: .wordsMax) } catch { throw usageError("'\(TextFile.excerpt(args.positional[1]))': \(error)") }
    let id = args.options["--id"] ?? "fleet-\(time(nil))-\(Crypto.nonce().prefix(8))"
    guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
        throw usageError("--id must be 1-64 printable ASCII characters, not '\(TextFile.excerpt(id))'")
    }
    var members: [(String, JSONValue)] = [("id", .string(id)), ("amount", .string(amount.description))]
    for (option, field) in [("--currency", "currency"), ("--channel", "channel"), ("--lang", "lang")] {
        if let v = args.options[option] {
            guard (1...32).contains(v.utf8.count), v.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else { throw usageError("\(option) '\(TextFile.excerpt(v))': 1-32 printable ASCII characters") }
            members.append((field, .string(v)))
        }
    }
    members.append(("ts", .number(String(time(nil)))))
    var message = JSONValue.object(members)
    if args.setting("--key") != nil {
        let key = try signingKey(args)
        switch Signature.sign(message, kind: .payment, device: device, kid: key.publicKey.id, now: Int64(time(nil)), nonce: Crypto.nonce, sign: key.sign) {
        case .failure(let p): throw failure(p.detail ?? p.description, code: "sign")
        case .success(let signed): message = signed.message
        }
    }
    let wait = try seconds(args, "--wait", default: 120)
    let resend = try seconds(args, "--resend", default: 10, max: 3600)
    let p = try prefix(args)

    let link = try connect(args)
    defer { link.close() }
    var receipts: [String] = []   // statuses in arrival order, each once
    var final: String?
    var reason: String?
    var sent = 0
    do {
        try link.subscribe([p + "/" + device + "/receipt"], qos: 1, retained: false, timeout: try timeout(args))
        let deadline = MonotonicClock.seconds() + wait
        var nextSend = 0.0
        while final == nil {
            let now = MonotonicClock.seconds()
            guard now < deadline else { break }
            // Re-sent, the same id, until the device has answered at all (it says duplicate for one it has).
            if receipts.isEmpty && now >= nextSend {
                let mid = try link.publish(p + "/" + device + "/payment", message.text, qos: 1)
                if link.waitAcknowledged([mid], timeout: min(wait, 30)) > 0 { printError("note: the broker did not acknowledge the payment (will re-send)") }
                sent += 1
                nextSend = MonotonicClock.seconds() + resend
            }
            let until = receipts.isEmpty ? min(deadline, nextSend) : deadline
            guard let m = link.next(timeout: max(0.01, until - MonotonicClock.seconds())) else { continue }
            guard !m.retained, m.payload.count <= 64 << 10, let v = try? JSONValue.parse(m.payload),
                  case .string(id)? = v["id"], case .string(let said)? = v["status"] else { continue }
            // As shown (escaped once, TextFile.visible): the device's words are only compared with plain ones.
            let status = TextFile.visible(said)
            if !receipts.contains(status) && !(status == "duplicate" && receipts.contains("queued")) {
                receipts.append(status)
                if !out.json { print("\(status)\(v["reason"].flatMap { if case .string(let r) = $0 { ": " + TextFile.excerpt(r, limit: 300) } else { nil } } ?? "")") }
            }
            // Copies re-sent while the device was away: after our `queued`, a duplicate is one of them.
            if status == "duplicate" && receipts.contains("queued") { continue }
            if finalStatuses.contains(status) {
                final = status
                if case .string(let r)? = v["reason"] { reason = TextFile.excerpt(r, limit: 300) }
            }
        }
    } catch {
        if let f = error as? Failure { throw f }
        throw failure("\(error)", code: "broker")
    }
    struct Result: Encodable { var id: String; var device: String; var receipts: [String]; var final: String?; var reason: String?; var sent: Int }
    if out.json { out.emit(Result(id: id, device: device, receipts: receipts, final: final, reason: reason, sent: sent), text: "") }
    guard let final else {
        throw failure("no final receipt for \(id) within \(Int(wait)) s (receipts: \(receipts.isEmpty ? "none" : receipts.joined(separator: ", ")); sent \(sent) times)", code: "timeout")
    }
    if !["played", "duplicate", "muted"].contains(final) { throw Failure(message: out.json ? "" : "\(id): \(final)", code: final, status: 1) }
}
