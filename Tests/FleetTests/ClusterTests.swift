// A real 3-node RabbitMQ cluster (Debian's rabbitmq-server and its MQTT
// plugin, scripts/rabbitmq-cluster) with a real soundboxd and
// soundbox-fleet: what holds across nodes and what does not (docs/fleet.md
// "Clusters").
import Foundation
import Testing
import TestSupport
import TestRig
import Soundbox
import SoundboxStore

/// Three RabbitMQ nodes on loopback; node K's MQTT listener on base+K.
final class RabbitCluster {
    let dir: String
    // Below the kernel's ephemeral ports (32768 and up): no connection of another test holds one.
    let base = 20_000 + Int.random(in: 0..<120) * 100
    private let script = Build.root + "/scripts/rabbitmq-cluster"

    init(dir: String) throws {
        self.dir = dir
        try run(["start", dir, "\(base)", "3"])
        for k in 1...3 { try run(["wait", dir, "\(k)"]) }
    }

    deinit { _ = try? CommandRun([script, "stop", dir], timeout: 60) }

    func port(_ k: Int) -> Int { base + k }
    func address(_ k: Int) -> String { "127.0.0.1:\(port(k))" }
    var all: String { (1...3).map(address).joined(separator: ",") }

    /// The node's Erlang VM killed: no goodbye, no will of its own clients.
    func kill9(_ k: Int) throws {
        let pid = try CommandRun([script, "pid", dir, "\(k)"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let n = Int32(pid) else { throw TestFailure("node \(k) has no pid: '\(pid)'") }
        kill(n, SIGKILL)
        #expect(pollUntil(timeout: 30, interval: 0.1) { Glibc.kill(n, 0) != 0 }, "node \(k) still running")
    }

    func restart(_ k: Int) throws {
        try run(["node", dir, "\(k)"])
        try run(["wait", dir, "\(k)"])
    }

    private func run(_ args: [String]) throws {
        let r = try CommandRun([script] + args, environment: ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin"], timeout: 150)
        guard r.status == 0, !r.timedOut else { throw TestFailure("rabbitmq-cluster \(args.joined(separator: " ")): \(r.status) \(r.stderr)") }
    }
}

@Suite(.serialized) struct ClusterTests {
    func fleet(_ args: [String], _ state: String) throws -> CommandRun {
        try CommandRun([Build.fleet, "--timeout", "20", "--state", state] + args, environment: ["PATH": "/usr/bin:/bin"], timeout: 200)
    }

    /// The node a device's last `connected` log line names.
    func node(of daemon: Daemon, _ cluster: RabbitCluster, after count: Int = 0) -> Int? {
        let lines = daemon.log(run: daemon.runs).split(separator: "\n").filter { $0.contains("mqtt: connected") }
        guard lines.count > count, let last = lines.last else { return nil }
        return (1...3).first { last.contains("broker=" + cluster.address($0)) }
    }

    func connections(_ daemon: Daemon) -> Int {
        daemon.log(run: daemon.runs).split(separator: "\n").filter { $0.contains("mqtt: connected") }.count
    }

    /// Payments across nodes, the inventory across nodes' retained stores,
    /// the device moving when its node dies, what happens when the node
    /// holding its session dies, and its will.
    @Test func aDeviceOnAThreeNodeRabbitMQCluster() throws {
        let scratch = Scratch()
        let started = Date()
        let cluster = try RabbitCluster(dir: scratch.path + "/rabbit")
        let state = scratch.path + "/fleet.db"
        try FileManager.default.createDirectory(atPath: scratch.path + "/box", withIntermediateDirectories: true)
        // First only node 3: the device's session (its queue) lives there.
        let daemon = try Daemon(dir: scratch.path + "/box", config: [
            "mqtt.enabled": "true", "mqtt.host": cluster.address(3), "device.id": "c-1",
            "mqtt.keepalive": "5", "mqtt.reconnect_max_s": "2", "mqtt.link_prompts": "false"])
        try daemon.start()
        #expect(pollUntil(timeout: 60, interval: 0.1) { node(of: daemon, cluster) == 3 }, "\(daemon.log(run: 1))")
        #expect(daemon.log(run: 1).contains("using MQTT 3.1.1 from now on"), "RabbitMQ 3.10 refuses MQTT 5: the device falls back")

        // A payment published on node 1 reaches the device on node 3; its receipts come back.
        let first = try fleet(["--host", cluster.address(1), "--json", "pay", "c-1", "1.00", "--id", "K1", "--wait", "60"], state)
        #expect(first.status == 0 && first.stdout.contains(#""final":"played""#), "\(first.stdout) \(first.stderr)")

        // Retained statuses are per node, and only for exact subscriptions.
        let elsewhere = try fleet(["--host", cluster.address(1), "--json", "devices", "c-1"], state)
        #expect(elsewhere.stdout.contains(#""count":0"#), "node 1 holds no status of c-1: \(elsewhere.stdout)")
        let wildcard = try fleet(["--host", cluster.all, "--json", "devices"], state)
        #expect(wildcard.stdout.contains(#""count":0"#), "no retained status for a wildcard: \(wildcard.stdout)")
        let everyNode = try fleet(["--host", cluster.all, "--json", "devices", "c-1"], state)
        #expect(everyNode.stdout.contains(#""id":"c-1""#) && everyNode.stdout.contains(#""online":true"#), "\(everyNode.stdout) \(everyNode.stderr)")
        #expect(daemon.stop().0 == 0)

        // Now nodes 1 and 2 only: the device connects to one of them, its session still on node 3.
        try daemon.reconfigure(["mqtt.host": cluster.address(1) + "," + cluster.address(2)])
        try daemon.start()
        #expect(pollUntil(timeout: 60, interval: 0.1) { [1, 2].contains(node(of: daemon, cluster) ?? 0) }, "\(daemon.log(run: 2))")
        let c = node(of: daemon, cluster) ?? 1
        let other = c == 1 ? 2 : 1
        let before = connections(daemon)
        try cluster.kill9(c)
        #expect(pollUntil(timeout: 60, interval: 0.1) { connections(daemon) > before && node(of: daemon, cluster) == other },
                "the device moved to the other node: \(daemon.log(run: 2))")
        // The session (on node 3) survived: a payment sent through node 3 is played.
        let moved = try fleet(["--host", cluster.address(3), "--json", "pay", "c-1", "2.00", "--id", "K2", "--resend", "5", "--wait", "90"], state)
        #expect(moved.status == 0 && moved.stdout.contains(#""final":"played""#), "\(moved.stdout) \(moved.stderr)")
        try cluster.restart(c)

        // The node holding the session dies: RabbitMQ refuses the device's
        // subscriptions on every other node until it is back. A backend that
        // re-sends until `played` still gets its payment spoken, once.
        try cluster.kill9(3)
        #expect(pollUntil(timeout: 60, interval: 0.1) { daemon.log(run: 2).contains("subscription_refused") }, "\(daemon.log(run: 2))")
        let pay = try CLIProcess([Build.fleet, "--host", cluster.address(other), "--timeout", "20", "--state", state, "--json",
                                  "pay", "c-1", "3.00", "--id", "K3", "--resend", "3", "--wait", "150"])
        try cluster.restart(3)
        #expect(pay.waitExit(timeout: 150) == 0, "\(pay.output)")
        #expect(pay.output.contains(#""final":"played""#), "\(pay.output)")
        #expect(try Store(path: daemon.database).history(limit: 100).filter { $0.payment.id == "K3" }.count == 1, "spoken once")

        // The will: the device vanishes; a reader of every node sees it offline.
        daemon.kill9()
        #expect(pollUntil(timeout: 60, interval: 0.5) {
            ((try? fleet(["--host", cluster.all, "--json", "devices", "c-1"], state))?.stdout ?? "").contains(#""online":false"#)
        }, "the will, read across the nodes")
        print("cluster test: \(Int(Date().timeIntervalSince(started))) s")
    }
}
