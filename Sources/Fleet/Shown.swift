/// What the operator's tool shows of what devices say about themselves
/// (docs/fleet.md "What devices say, as shown"): every device-supplied
/// string through the one escaper, `TextFile.visible`, before it reaches
/// the table, the CSV or the JSON. A box cannot reorder, hide, recolour or
/// add rows on the operator's screen: controls (ESC, CR, LF, TAB, DEL, C1),
/// bidirectional overrides, isolates and marks, zero-width characters and
/// line/paragraph separators are written as `\u{202E}`, `\n`, `\t`; other
/// text (Chinese, accents, emoji) stays as it is.
import Soundbox

extension DeviceRecord {
    /// The record with every text field `TextFile.visible` (numbers and
    /// flags as they are). Selectors match the record as read; this is
    /// only for output.
    public var shown: DeviceRecord {
        func v(_ s: String?) -> String? { s.map(TextFile.visible) }
        var r = self
        r.id = TextFile.visible(id)
        r.version = v(version); r.slot = v(slot); r.voice = v(voice); r.bootReason = v(bootReason)
        r.updateState = v(updateState); r.updateVersion = v(updateVersion); r.updateReason = v(updateReason); r.updateID = v(updateID)
        r.faults = faults.map(TextFile.visible)
        return r
    }
}

extension RolloutDevice {
    /// The device's id and reason (a receipt's or its status's
    /// `update.reason`) `TextFile.visible`.
    public var shown: RolloutDevice {
        var d = self
        d.id = TextFile.visible(id)
        d.reason = reason.map(TextFile.visible)
        return d
    }
}

extension JSONValue {
    /// The value with every string, member names included, `TextFile.visible`
    /// (a receipt passed on by `soundbox-fleet receipts`).
    public var shown: JSONValue {
        switch self {
        case .string(let s): .string(TextFile.visible(s))
        case .array(let items): .array(items.map(\.shown))
        case .object(let members): .object(members.map { (TextFile.visible($0.0), $0.1.shown) })
        case .number, .bool, .null: self
        }
    }
}
