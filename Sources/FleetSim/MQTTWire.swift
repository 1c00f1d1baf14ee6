/// The few MQTT 3.1.1 packets a simulated box needs, on the wire: one
/// socket per box and nothing else (libmosquitto takes three descriptors a
/// client, and 10,000 boxes must fit one process's limit).
enum MQTTWire {
    /// CONNECT: a persistent session (clean session 0) with a retained QoS 1 will.
    static func connect(clientID: String, keepalive: UInt16, willTopic: String, will: [UInt8]) -> [UInt8] {
        // Protocol level 4; flags: will (0x04), its QoS 1 (0x08), retained (0x20).
        let flags: UInt8 = 0x04 | 0x08 | 0x20
        var body: [UInt8] = string("MQTT")
        body += [4, flags, UInt8(keepalive >> 8), UInt8(keepalive & 0xff)]
        body += string(clientID) + string(willTopic) + bytes(will)
        return packet(0x10, body)
    }

    static func subscribe(id: UInt16, topics: [String], qos: UInt8) -> [UInt8] {
        var body = [UInt8(id >> 8), UInt8(id & 0xff)]
        for t in topics { body += string(t) + [qos] }
        return packet(0x82, body)
    }

    static func publish(topic: String, payload: [UInt8], qos: UInt8, retain: Bool, id: UInt16) -> [UInt8] {
        var body = string(topic)
        if qos > 0 { body += [UInt8(id >> 8), UInt8(id & 0xff)] }
        return packet(0x30 | (qos << 1) | (retain ? 1 : 0), body + payload)
    }

    static func puback(_ id: UInt16) -> [UInt8] { [0x40, 2, UInt8(id >> 8), UInt8(id & 0xff)] }
    static let pingreq: [UInt8] = [0xc0, 0]
    static let disconnect: [UInt8] = [0xe0, 0]

    enum Packet: Equatable {
        case connack(returnCode: UInt8)
        case publish(topic: String, payload: [UInt8], qos: UInt8, retain: Bool, id: UInt16)
        /// Anything else a client may get (SUBACK, PUBACK, PINGRESP): nothing to do.
        case other(UInt8)
    }

    enum Problem: Error, Equatable { case malformed, tooLarge }

    /// The next whole packet at the start of `buffer[start...]`: the packet
    /// and its length, nil when more bytes are needed.
    static func next(_ buffer: [UInt8], from start: Int, limit: Int) throws(Problem) -> (Packet, Int)? {
        guard buffer.count - start >= 2 else { return nil }
        var length = 0, multiplier = 1, i = start + 1
        while true {
            guard i < buffer.count else { return nil }
            let b = Int(buffer[i])
            length += (b & 0x7f) * multiplier
            i += 1
            if b & 0x80 == 0 { break }
            multiplier *= 128
            guard multiplier <= 128 * 128 * 128 else { throw .malformed }
        }
        guard length <= limit else { throw .tooLarge }
        guard buffer.count - i >= length else { return nil }
        let type = buffer[start]
        let body = buffer[i..<(i + length)]
        let total = i + length - start
        switch type >> 4 {
        case 2:
            guard body.count >= 2 else { throw .malformed }
            return (.connack(returnCode: body[body.startIndex + 1]), total)
        case 3:
            let qos = (type >> 1) & 3
            guard body.count >= 2, qos < 3 else { throw .malformed }
            let n = Int(body[body.startIndex]) << 8 | Int(body[body.startIndex + 1])
            var p = body.startIndex + 2
            guard body.endIndex - p >= n + (qos > 0 ? 2 : 0) else { throw .malformed }
            let topic = String(decoding: body[p..<(p + n)], as: UTF8.self)
            p += n
            var id: UInt16 = 0
            if qos > 0 { id = UInt16(body[p]) << 8 | UInt16(body[p + 1]); p += 2 }
            return (.publish(topic: topic, payload: Array(body[p...]), qos: qos, retain: type & 1 == 1, id: id), total)
        default:
            return (.other(type >> 4), total)
        }
    }

    private static func string(_ s: String) -> [UInt8] { bytes(Array(s.utf8)) }
    private static func bytes(_ b: [UInt8]) -> [UInt8] { [UInt8(b.count >> 8), UInt8(b.count & 0xff)] + b }

    private static func packet(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        var out = [type]
        var n = body.count
        repeat {
            var b = UInt8(n % 128)
            n /= 128
            if n > 0 { b |= 0x80 }
            out.append(b)
        } while n > 0
        return out + body
    }
}
