// swift-tools-version:6.0
// Soundbox: the software inside a payment soundbox. See README.md and docs/.
import PackageDescription

let package = Package(
    name: "Soundbox",
    products: [
        .executable(name: "soundboxd", targets: ["soundboxd"]),
        .executable(name: "soundboxctl", targets: ["soundboxctl"]),
        .executable(name: "soundbox-fleet", targets: ["soundbox-fleet"]),
    ],
    targets: [
        // One system-library target per C library (modulemap + shim.h).
        .systemLibrary(name: "CALSA", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CMosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CMPG123", providers: [.apt(["libmpg123-dev"])]),
        .systemLibrary(name: "CGPIOD", providers: [.apt(["libgpiod-dev"])]),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLinux"),   // glibc calls Swift's Glibc module hides
        .systemLibrary(name: "CCrypto", providers: [.apt(["libssl-dev"])]),   // OpenSSL's libcrypto: Ed25519, SHA-256

        // The core: amounts, grammars, voice-pack manifests. No C imports.
        .target(name: "Soundbox"),
        // The thin system layer: threads and condition variables, errno,
        // descriptors, Unix socket addresses, paths; for the daemon, the MQTT
        // client, soundboxctl, the benchmarks and the tests.
        .target(name: "SoundboxSystem", dependencies: ["CLinux"], path: "Sources/System"),
        // Ed25519 and SHA-256 through OpenSSL (signed payments, docs/signing.md).
        .target(name: "SoundboxCrypto", dependencies: ["CCrypto"], path: "Sources/Crypto"),
        // Edge adapters.
        .target(name: "SoundboxAudio", dependencies: ["Soundbox", "CALSA", "CMPG123"], path: "Sources/Audio"),
        .target(name: "MQTTBridge", dependencies: ["Soundbox", "SoundboxSystem", "CMosquitto"]),
        // libgpiod v1 (Debian 12) or v2 (Debian 13) behind one C API: both
        // headers are <gpiod.h>, so only the preprocessor can choose.
        .target(name: "CGPIOBridge", dependencies: ["CGPIOD"],
                cSettings: [.define("_FORTIFY_SOURCE", to: "2", .when(configuration: .release))],
                linkerSettings: [.linkedLibrary("gpiod")]),
        .target(name: "GPIO", dependencies: ["Soundbox", "CGPIOBridge"]),
        // The voice-pack builder's audio libraries (libsndfile, libsoxr,
        // libebur128, libmp3lame), loaded with dlopen when a pack is built:
        // their headers at build time, nothing at run time for the box.
        .target(name: "CVoiceTools", cSettings: [.define("_FORTIFY_SOURCE", to: "2", .when(configuration: .release))],
                linkerSettings: [.linkedLibrary("dl")]),
        // soundboxctl voice build / voice check's loudness (voices/README.md).
        .target(name: "VoiceBuild", dependencies: ["Soundbox", "SoundboxAudio", "CVoiceTools"], path: "Sources/VoiceBuild"),
        .target(name: "SoundboxStore", dependencies: ["Soundbox", "CSQLite", "SoundboxSystem"], path: "Sources/Store"),
        // The control socket's client: soundboxctl, tests, benchmarks.
        .target(name: "SoundboxControl", dependencies: ["Soundbox", "SoundboxSystem"], path: "Sources/Control"),
        // The operator's view of a fleet: statuses read, selectors (docs/fleet.md). No C imports.
        .target(name: "SoundboxFleet", dependencies: ["Soundbox"], path: "Sources/Fleet"),
        // The operator tool's broker connection, made synchronous (docs/fleet.md).
        .target(name: "FleetLink", dependencies: ["MQTTBridge", "SoundboxSystem"], path: "Sources/FleetLink"),
        // Thousands of simulated boxes in one process, for the fleet tool's tests and benchmark.
        .target(name: "FleetSim", dependencies: ["Soundbox", "SoundboxCrypto", "SoundboxSystem", "CLinux"], path: "Sources/FleetSim"),
        // The operator tool's own memory (SQLite): devices last seen online, the rollouts.
        .target(name: "FleetState", dependencies: ["SoundboxStore", "SoundboxFleet"], path: "Sources/FleetState"),
        // The command line the tools share: arguments, failures, --json output.
        .target(name: "SoundboxCLI", path: "Sources/CLI"),
        // The daemon's services: ingest, scheduler, control socket, lifecycle.
        .target(name: "SoundboxDaemon", dependencies: ["Soundbox", "SoundboxAudio", "SoundboxStore", "MQTTBridge", "GPIO", "SoundboxSystem", "CLinux", "SoundboxCrypto"], path: "Sources/Daemon"),

        // The device's two executables: wiring (soundboxctl one file per group of commands).
        .executableTarget(name: "soundboxd", dependencies: ["SoundboxDaemon", "MQTTBridge", "GPIO"]),
        .executableTarget(name: "soundboxctl", dependencies: ["Soundbox", "SoundboxCLI", "SoundboxAudio", "SoundboxControl", "SoundboxCrypto", "SoundboxSystem", "VoiceBuild"]),

        .executableTarget(name: "soundbox-fleet", dependencies: ["Soundbox", "SoundboxCLI", "SoundboxFleet", "FleetLink", "FleetState", "MQTTBridge", "SoundboxCrypto", "SoundboxSystem"]),

        // Benchmarks (bench/README.md); not part of the test suite.
        .executableTarget(name: "soundbox-bench", dependencies: ["Soundbox", "SoundboxAudio", "SoundboxControl", "SoundboxSystem", "MQTTBridge", "SoundboxCrypto", "FleetSim", "FleetLink"], path: "bench/Sources"),

        // Helpers shared by the test targets.
        .target(name: "TestSupport", path: "Tests/Support"),
        // The real processes the system tests run: a mosquitto (plain, TLS,
        // Debian's layout), its certificates, a backend client, a soundboxd.
        .target(name: "TestRig", dependencies: ["Soundbox", "SoundboxSystem", "SoundboxControl", "SoundboxStore", "SoundboxCrypto", "MQTTBridge", "TestSupport"],
                path: "Tests/Rig"),
        .testTarget(name: "SoundboxTests", dependencies: ["Soundbox", "TestSupport"],
                    exclude: ["IndicReference"]),   // IndicGrammarTests' reference rows (scripts/indic-tables.py)
        .testTarget(name: "AudioTests", dependencies: ["Soundbox", "SoundboxAudio", "TestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["Soundbox", "SoundboxSystem", "SoundboxCrypto", "soundboxctl", "TestSupport", "VoiceBuild"]),
        .testTarget(name: "SystemTests", dependencies: ["SoundboxSystem", "CLinux"]),
        .testTarget(name: "MQTTTests", dependencies: ["MQTTBridge"]),
        .testTarget(name: "StoreTests", dependencies: ["Soundbox", "SoundboxStore", "TestSupport"]),
        .testTarget(name: "FleetTests", dependencies: ["Soundbox", "SoundboxFleet", "FleetState", "SoundboxStore", "SoundboxCrypto", "FleetSim", "TestSupport", "TestRig",
                                                    "soundbox-fleet", "soundboxd"]),
        .testTarget(name: "SigningTests", dependencies: ["Soundbox", "SoundboxCrypto", "TestSupport"]),
        .testTarget(name: "DaemonTests", dependencies: ["Soundbox", "SoundboxSystem", "GPIO", "SoundboxAudio", "SoundboxStore", "SoundboxDaemon", "SoundboxControl", "MQTTBridge", "TestSupport", "TestRig", "SoundboxCrypto", "soundboxd", "soundboxctl"],
                    exclude: ["bundle-server.py"]),   // UpdateTests' HTTP server, run from the checkout
    ],
    swiftLanguageModes: [.v6]
)
