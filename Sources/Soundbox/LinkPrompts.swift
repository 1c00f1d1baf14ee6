/// Decides the spoken link prompts, 网络已断开 / 网络已连接, as a plain state
/// machine fed with the broker link's ups and downs and the time
/// (docs/soundboxd.md, "Link prompts"):
///
/// - the loss is spoken only once the link has been down `lossAfter`
///   seconds (10): a reconnect within seconds (a broker restart, a blip) is
///   not worth interrupting a shop for;
/// - never while a takeover or duplicate device id is suspected
///   (`TakeoverWatch`): two boxes with one id flip every few seconds, and
///   the fault is reported instead (status, doctor, LED);
/// - the loss at most once per `interval` (a minute);
/// - the reconnect only after a spoken loss, and then always (it answers
///   it: a merchant who heard the loss must hear it end); so it too comes
///   at most once per spoken loss.
///
/// Times are monotonic seconds; nothing here reads a clock.
public struct LinkPrompts: Sendable {
    public let lossAfter: Double
    public let interval: Double
    private var downSince: Double?
    /// This down period's loss was decided (spoken or not): once per period.
    private var lossDecided = false
    private var lossSpoken = false
    private var lastLossSpoken: Double?

    public init(lossAfter: Double = 10, interval: Double = 60) {
        self.lossAfter = lossAfter; self.interval = interval
    }

    /// The link went down at `t`.
    public mutating func disconnected(at t: Double) {
        guard downSince == nil else { return }
        downSince = t
        lossDecided = false
    }

    /// The link came up at `t`: 网络已连接 if this down period's loss was spoken.
    public mutating func connected(at t: Double) -> Prompt? {
        defer { downSince = nil; lossSpoken = false }
        return lossSpoken ? .networkConnected : nil
    }

    /// Time has passed (`t`); `conflict`: a takeover is suspected now.
    /// 网络已断开 once the link has been down `lossAfter` seconds.
    public mutating func check(at t: Double, conflict: Bool) -> Prompt? {
        guard let since = downSince, !lossDecided, t - since >= lossAfter else { return nil }
        lossDecided = true
        if conflict { return nil }
        if let last = lastLossSpoken, t - last < interval { return nil }
        lastLossSpoken = t
        lossSpoken = true
        return .networkDisconnected
    }

    /// When `check` could next speak, if it could.
    public var nextCheck: Double? {
        guard let since = downSince, !lossDecided else { return nil }
        return since + lossAfter
    }
}
