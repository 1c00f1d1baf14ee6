import CMosquitto

public enum MQTTBridge {
    /// "2.0.11": the libmosquitto this binary runs against.
    public static var libraryVersion: String {
        var major: Int32 = 0, minor: Int32 = 0, revision: Int32 = 0
        mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}

/// The topics of DESIGN §2 for one device.
public struct Topics: Sendable, Equatable {
    public let payment, receipt, config, configApplied, cmd, status: String
    public init(prefix: String, device: String) {
        let base = prefix + "/" + device
        payment = base + "/payment"; receipt = base + "/receipt"; config = base + "/config"
        configApplied = base + "/config/applied"; cmd = base + "/cmd"; status = base + "/status"
    }
}
