// soundboxd: the payment soundbox daemon. It is being built issue by issue;
// this build only reports its version and the C libraries it links.
import Glibc
import GPIO
import MQTTBridge
import Soundbox

let usage = """
    Usage: soundboxd [--version] [--help]

    The daemon (MQTT ingest, durable queue, control socket) is not built yet;
    use `soundboxctl words|render|voice check` for the announce path.
    """

switch CommandLine.arguments.dropFirst().first {
case "--version":
    print("soundboxd \(soundboxVersion) (libmosquitto \(MQTTBridge.libraryVersion), libgpiod \(GPIO.libraryVersion))")
case "--help", "-h":
    print(usage)
default:
    print(usage)
    exit(2)
}
