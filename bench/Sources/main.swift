// soundbox-bench: numbers for the closing notes (bench/README.md).
//   soundbox-bench announce [VOICES_DIR]   the announce path
//   soundbox-bench daemon [VOICES_DIR]     soundboxd: ingest rate, RSS, idle wakeups, start time
//   soundbox-bench mqtt [VOICES_DIR]       publish → first audible sample latency; idle wake-ups; offline backlog drain
//   soundbox-bench signing [VOICES_DIR]    verification cost; latency with signing off and required
//   soundbox-bench flush [VOICES_DIR]      the same latency, flushes and bytes per payment, a backlog: with flushes 0/10/30 ms slower
//   soundbox-bench fleet [VOICES_DIR [N [REAL]]]  N (10,000) simulated boxes and REAL (20) soundboxd on one mosquitto: soundbox-fleet at scale
//   soundbox-bench wal [VOICES_DIR [N [DELAY_MS...]]]   the -wal file's peak over a backlog of N (10,000) with flushes slower (0 and 30 ms)
import Foundation

let binDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
func ms(_ ns: Double) -> String { String(format: "%.3f ms", ns / 1e6) }

let args = Array(CommandLine.arguments.dropFirst())
let voices = args.dropFirst().first ?? FileManager.default.currentDirectoryPath + "/voices"
switch args.first {
case "announce": try announceBench(voices: voices)
case "daemon": try daemonBench(voices: voices)
case "mqtt": try mqttBench(voices: voices)
case "signing": try signingBench(voices: voices)
case "flush": try flushBench(voices: voices, shim: binDir + "/flushdelay.so")
case "fleet":
    try fleetBench(voices: voices, n: args.count > 2 ? Int(args[2]) ?? 10_000 : 10_000, real: args.count > 3 ? Int(args[3]) ?? 20 : 20)
case "wal":
    let n = args.count > 2 ? Int(args[2]) ?? 10_000 : 10_000
    let delays = args.count > 3 ? args.dropFirst(3).compactMap { Int($0) } : [0, 30]
    try walBench(voices: voices, shim: binDir + "/flushdelay.so", backlog: n, delays: delays)
default:
    print("usage: soundbox-bench announce|daemon|mqtt|signing|flush|wal|fleet [VOICES_DIR]")
    exit(2)
}
