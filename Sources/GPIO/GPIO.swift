import CGPIOD

/// The merchant's hands on the box: mute switch, volume buttons, status LED
/// through libgpiod's v1 API. The adapter arrives with the GPIO issue; for
/// now this target only proves that libgpiod links.
public enum GPIO {
    /// "1.6.3": the libgpiod this binary runs against.
    public static var libraryVersion: String { String(cString: gpiod_version_string()) }
}
