// `receipts`: the backend's receipt consumer (docs/fleet.md "receipts"),
// one JSON line per receipt, through an MQTT 5 shared subscription so that
// several consumers share the load without reading a receipt twice.
import Glibc
import Soundbox
import SoundboxCLI
import SoundboxFleet
import FleetLink
import SoundboxSystem

func receiptsCommand(_ args: Arguments, _ out: Output) throws(Failure) {
    try args.allowOnly(["--group", "--count", "--idle"], for: "receipts")
    guard args.positional.isEmpty else { throw usageError("usage: receipts [--group G] [--count N] [--idle S]") }
    let group = args.options["--group"] ?? "soundbox-fleet"
    guard DeviceRecord.isValidID(group) else { throw usageError("--group '\(TextFile.excerpt(group))': one topic level, 1-64 bytes") }
    var count = Int.max
    if let c = args.options["--count"] {
        guard let n = Int(c), n > 0 else { throw usageError("--count must be a whole number above 0, not '\(TextFile.excerpt(c))'") }
        count = n
    }
    let idle = args.options["--idle"] == nil ? nil : try seconds(args, "--idle", default: 0)
    let p = try prefix(args)
    final class Seen: @unchecked Sendable { var n = 0 }   // guarded by `wake`
    let seen = Seen()
    let wake = Condition()
    // Written and flushed inside the callback: the PUBACK follows it, so a
    // receipt this consumer acknowledged is on its output.
    let link = try connect(args, persistent: args.setting("--client-id") != nil) { m in
        guard let device = deviceOfReceipt(m.topic, prefix: p), m.payload.count <= 64 << 10,
              let v = try? JSONValue.parse(m.payload) else { return }
        // The receipt's strings as shown (escaped: TextFile.visible), like every device's words.
        let line = Array((JSONValue.object([("device", .string(TextFile.visible(device))), ("receipt", v.shown)]).text + "\n").utf8)
        writeAll(1, line)
        wake.broadcast { seen.n += 1 }
    }
    defer { link.close() }
    let topic = p + "/+/receipt"
    let shared = link.protocolVersion == 5
    if !shared {
        printError("note: the broker speaks MQTT 3.1.1 only: no shared subscription; this consumer gets every receipt")
    }
    do {
        try link.subscribe([shared ? "$share/\(group)/\(topic)" : topic], qos: 1, retained: false, timeout: try timeout(args))
    } catch { throw failure("\(error)", code: "broker") }
    printError("receipts: subscribed to \(shared ? "$share/\(group)/" : "")\(topic)")
    // Until --count receipts, or --idle seconds without one (else for ever).
    while true {
        let n = wake.broadcast { seen.n }
        if n >= count { return }
        let moved = wake.wait(timeout: idle) { seen.n != n }
        if !moved && idle != nil { return }
    }
}

/// The device id in `PREFIX/<id>/receipt`.
func deviceOfReceipt(_ topic: String, prefix: String) -> String? {
    guard topic.hasPrefix(prefix + "/"), topic.hasSuffix("/receipt") else { return nil }
    let id = String(topic.dropFirst(prefix.count + 1).dropLast("/receipt".count))
    return DeviceRecord.isValidID(id) ? id : nil
}

/// Writes every byte (a pipe may take them in pieces); gives up on an error (a closed pipe).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        done += n
    }
}
