import CMosquitto

/// The device's link to the bank's backend over MQTT (docs/DESIGN.md §2).
/// The client arrives with the MQTT issue; for now this target only proves
/// that libmosquitto links.
public enum MQTTBridge {
    /// "2.0.11": the libmosquitto this binary runs against.
    public static var libraryVersion: String {
        var major: Int32 = 0, minor: Int32 = 0, revision: Int32 = 0
        mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}
