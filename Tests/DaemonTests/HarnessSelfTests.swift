import Foundation
import Testing
import TestSupport
import TestRig

/// The MQTT test infrastructure proves itself against a real mosquitto,
/// with mosquitto_pub / mosquitto_sub as the peers.
@Suite struct HarnessSelfTests {
    // MARK: Broker

    @Test func plainPublishSubscribeRoundTrip() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        #expect(broker.port > 0 && broker.tlsPort == nil)
        #expect(broker.config.contains("listener \(broker.port) 127.0.0.1\n"))

        let sub = try MosquittoSub(broker.endpoint, topics: ["soundbox/v1/shop-1/payment"])
        #expect(sub.waitSubscribed(), "\(sub.output)")
        let pub = try mosquittoPub(broker.endpoint, topic: "soundbox/v1/shop-1/payment", message: #"{"id":"T1","amount":"1.00"}"#)
        #expect(pub.status == 0, "\(pub.output)")
        #expect(sub.waitForMessage(#"{"id":"T1","amount":"1.00"}"#), "\(sub.output)")
        #expect(sub.messages.map(\.topic) == ["soundbox/v1/shop-1/payment"])
        #expect(broker.waitForLog("Received PUBLISH"), "\(broker.log)")
    }

    /// kill9 + restart: same port, same data. What the broker saved (a
    /// retained message and a message queued for an offline persistent
    /// session) survives the SIGKILL.
    @Test func killedAndRestartedBrokerKeepsWhatItSaved() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let port = broker.port
        let firstPid = broker.pid

        // An offline device with a persistent session (clean session off).
        // -E: exit once subscribed (a clean DISCONNECT; the session stays).
        let device = try MosquittoSub(broker.endpoint, topics: ["soundbox/v1/shop-1/payment"], clientID: "shop-1",
                                      persistent: true, extra: ["-E"])
        #expect(device.cli.waitExit() == 0, "\(device.output)")
        #expect(device.output.contains("received SUBACK"))

        #expect(try mosquittoPub(broker.endpoint, topic: "soundbox/v1/shop-1/config", message: "retained-1", retain: true).status == 0)
        #expect(try mosquittoPub(broker.endpoint, topic: "soundbox/v1/shop-1/payment", message: "queued-1").status == 0)
        #expect(broker.waitForSave(), "no database save seen:\n\(broker.log)")

        broker.kill9()
        #expect(!broker.isRunning)
        #expect(!Net.canConnect(port: port))
        try broker.restart()
        #expect(broker.port == port)
        #expect(broker.pid != firstPid)
        #expect(Net.canConnect(port: port))

        let retained = try MosquittoSub(broker.endpoint, topics: ["soundbox/v1/shop-1/config"], extra: ["-C", "1"])
        #expect(retained.waitForMessage("retained-1"), "\(retained.output)\n\(broker.log)")
        let back = try MosquittoSub(broker.endpoint, topics: ["soundbox/v1/shop-1/payment"], clientID: "shop-1", persistent: true)
        #expect(back.waitForMessage("queued-1"), "\(back.output)\n\(broker.log)")
        #expect(broker.log.components(separatedBy: " running").count - 1 == 2)
    }

    @Test func stopEndsTheBrokerAndRestartComesBack() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path, extraConfig: "max_keepalive 3600")
        #expect(broker.config.contains("max_keepalive 3600\nlistener"))
        broker.stop()
        #expect(!broker.isRunning)
        #expect(broker.log.contains("terminating"))
        try broker.restart()
        #expect(try mosquittoPub(broker.endpoint, topic: "t", message: "after-restart").status == 0)
    }

    // MARK: TLS

    @Test func tlsClientCertificatesAndPerDeviceACL() throws {
        let tmp = Scratch()
        let certs = try Certificates.make(in: tmp.path + "/pki", devices: ["shop-1", "shop-2"])
        let acl = tmp.path + "/acl"
        try "pattern readwrite soundbox/v1/%u/#\n".write(toFile: acl, atomically: true, encoding: .utf8)
        let broker = try Broker(dir: tmp.path + "/broker", tls: TLSListener(
            caFile: certs.ca, certFile: certs.serverCert, keyFile: certs.serverKey,
            requireCertificate: true, useIdentityAsUsername: true, aclFile: acl))
        #expect(broker.tlsPort != nil && broker.tlsPort != broker.port)
        func device(_ id: String) -> MQTTEndpoint {
            broker.tlsEndpoint(caFile: certs.ca, certFile: certs.client(id).cert, keyFile: certs.client(id).key)
        }
        #expect(device("shop-1").host == "localhost")

        // shop-1 over TLS to "localhost": certificate chain and hostname check pass.
        let shop1 = try MosquittoSub(device("shop-1"), topics: ["soundbox/v1/shop-1/#"], clientID: "shop-1-sub")
        #expect(shop1.waitSubscribed(), "\(shop1.output)\n\(broker.log)")
        // shop-2 tries to read shop-1's topics (and its own).
        let shop2 = try MosquittoSub(device("shop-2"), topics: ["soundbox/v1/shop-1/#", "soundbox/v1/shop-2/#"], clientID: "shop-2-sub")
        #expect(shop2.waitSubscribed(), "\(shop2.output)\n\(broker.log)")

        let pub = try mosquittoPub(device("shop-1"), topic: "soundbox/v1/shop-1/payment", message: "pay-1", clientID: "shop-1-pub")
        #expect(pub.status == 0, "\(pub.output)")
        #expect(shop1.waitForMessage("pay-1"), "\(shop1.output)")
        // Once shop-1's subscriber has it, the broker has routed pay-1; a
        // later message to shop-2 is queued behind anything pay-1 queued
        // for shop-2. So when the sentinel arrives, pay-1 never will.
        #expect(try mosquittoPub(broker.endpoint, topic: "soundbox/v1/shop-2/payment", message: "sentinel").status == 0)
        #expect(shop2.waitForMessage("sentinel"), "\(shop2.output)")
        #expect(!shop2.hasMessage("pay-1"), "\(shop2.output)")
        #expect(shop2.messages.map(\.payload) == ["sentinel"])
        #expect(broker.log.contains("New client connected from 127.0.0.1") && broker.log.contains("u'shop-2'"), "\(broker.log)")

        // The plain listener (the test's backend side) has no ACL.
        #expect(try mosquittoPub(broker.endpoint, topic: "soundbox/v1/shop-1/payment", message: "from-backend").status == 0)
        #expect(shop1.waitForMessage("from-backend"), "\(shop1.output)")

        // No client certificate: the TLS handshake is refused.
        let anonymous = try MosquittoSub(broker.tlsEndpoint(caFile: certs.ca, certFile: nil, keyFile: nil),
                                         topics: ["soundbox/v1/shop-1/#"], clientID: "no-cert")
        let status = anonymous.cli.waitExit(timeout: 10)
        #expect(status != nil && status != 0, "\(anonymous.output)")
        #expect(!anonymous.output.contains("received CONNACK"), "\(anonymous.output)")
        #expect(!broker.log.contains("as no-cert"), "\(broker.log)")
    }

    @Test func certificatesHaveTheNamesDevicesAndBrokersCheck() throws {
        let tmp = Scratch()
        let certs = try Certificates.make(in: tmp.path, devices: ["shop-1"])
        let server = try Certificates.run([Certificates.openssl, "x509", "-in", certs.serverCert, "-noout", "-subject", "-ext", "subjectAltName"])
        #expect(server.contains("CN = localhost"), "\(server)")
        #expect(server.contains("DNS:localhost") && server.contains("IP Address:127.0.0.1"), "\(server)")
        let client = try Certificates.run([Certificates.openssl, "x509", "-in", certs.client("shop-1").cert, "-noout", "-subject"])
        #expect(client.contains("CN = shop-1"), "\(client)")
        let verify = try Certificates.run([Certificates.openssl, "verify", "-CAfile", certs.ca, "-verify_hostname", "localhost",
                                           "-purpose", "sslserver", certs.serverCert])
        #expect(verify.contains("OK"), "\(verify)")
        #expect(throws: TestFailure.self) {
            try Certificates.run([Certificates.openssl, "verify", "-CAfile", certs.ca, "-verify_hostname", "example.com", certs.serverCert])
        }
        let key = try Certificates.run([Certificates.openssl, "pkey", "-in", certs.serverKey, "-noout", "-text"])
        #expect(key.contains("prime256v1") || key.contains("P-256"), "\(key)")
    }

    // MARK: Daemon

    /// A Daemon dropped while a run is alive (a test that threw, failed a
    /// `#require`, or never stopped a restarted run) kills and reaps it: no
    /// soundboxd outlives its test. Starting over a live run is refused.
    @Test func droppedDaemonKillsAndReapsItsRuns() throws {
        let scratch = Scratch()
        var daemon: Daemon? = try Daemon(dir: scratch.path)
        let first = try daemon!.start()
        #expect(throws: TestFailure.self) { try daemon!.start() }
        #expect(first.isRunning, "a refused start leaves the live run alone")
        #expect(daemon!.stop().0 == 0)
        let second = try daemon!.start()
        #expect(second.isRunning)
        daemon = nil
        #expect(!second.isRunning)
        #expect(second.terminationReason == .uncaughtSignal && second.terminationStatus == SIGKILL)
    }

    /// A run that does not exit by the deadline is killed and reported as
    /// -1, never as the status of a death it did not die (e.g. a failpoint's
    /// SIGKILL that never fired).
    @Test func waitExitPastItsDeadlineKillsAndSaysSo() throws {
        let scratch = Scratch()
        let daemon = try Daemon(dir: scratch.path)
        let p = try daemon.start()
        #expect(daemon.waitExit(timeout: 0.2) == -1)
        #expect(!p.isRunning)
    }

    // MARK: FaultProxy

    @Test func roundTripThroughTheProxy() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let proxy = try FaultProxy(upstreamPort: broker.port)
        #expect(proxy.port != broker.port)
        let sub = try MosquittoSub(proxy.endpoint, topics: ["p"])
        #expect(sub.waitSubscribed(), "\(sub.output)")
        #expect(try mosquittoPub(proxy.endpoint, topic: "p", message: "via-proxy").status == 0)
        #expect(sub.waitForMessage("via-proxy"), "\(sub.output)")
        // mosquitto_pub's DISCONNECT may still be on its way through the
        // proxy when the message arrives: wait for nothing held, not a snapshot.
        #expect(proxy.waitUntil { $0.pendingUp == 0 && $0.pendingDown == 0 }, "\(proxy.stats)")
        let s = proxy.stats
        #expect(s.connectionsAccepted == 2, "\(s)")
        #expect(s.bytesUp > 0 && s.bytesDown > 0, "\(s)")
    }

    @Test func dropAllBreaksAConnectedSubscriber() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let proxy = try FaultProxy(upstreamPort: broker.port)
        let sub = try MosquittoSub(proxy.endpoint, topics: ["d"], clientID: "dropped", persistent: true)
        #expect(sub.waitSubscribed(), "\(sub.output)")
        // dropAll's own answer, not a later snapshot: mosquitto_sub may
        // already have reconnected by then.
        #expect(proxy.dropAll(), "\(proxy.stats)")
        // mosquitto_sub notices and reconnects (after its 1 s reconnect delay).
        #expect(proxy.waitUntil { $0.connectionsAccepted >= 2 && $0.connectionsOpen == 1 }, "\(proxy.stats)\n\(sub.output)")
        #expect(sub.cli.waitFor("received CONNACK", count: 2), "\(sub.output)")
        #expect(broker.waitForLog("Client dropped closed its connection"), "\(broker.log)")
        #expect(sub.waitSubscribed(count: 2), "\(sub.output)")
        #expect(try mosquittoPub(broker.endpoint, topic: "d", message: "after-drop").status == 0)
        #expect(sub.waitForMessage("after-drop"), "\(sub.output)")
    }

    @Test func stallHoldsAPublishUntilUnstalled() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let proxy = try FaultProxy(upstreamPort: broker.port)
        let sub = try MosquittoSub(proxy.endpoint, topics: ["s"])
        #expect(sub.waitSubscribed(), "\(sub.output)")
        // The CONNACK and SUBACK are through and counted (the proxy counts a
        // send under the lock that `stats` takes, so what the subscriber has
        // seen is counted); wait for that as an event all the same.
        #expect(proxy.waitUntil { $0.bytesDown > 0 && $0.pendingDown == 0 && $0.pendingUp == 0 }, "\(proxy.stats)")
        let down = proxy.stats.bytesDown

        proxy.stall(true)
        #expect(try mosquittoPub(broker.endpoint, topic: "s", message: "held").status == 0)
        // The PUBLISH reached the proxy and is held there, not forwarded:
        // one snapshot taken once it is held shows nothing more went down.
        #expect(proxy.waitUntil { $0.pendingDown > 0 }, "\(proxy.stats)")
        let held = proxy.stats
        #expect(held.bytesDown == down, "\(held)")
        #expect(held.connectionsOpen == 1, "\(held)")
        #expect(!sub.hasMessage("held"), "\(sub.output)")

        // A new connection while stalled: accepted, but gets no CONNACK.
        let late = try MosquittoSub(proxy.endpoint, topics: ["s"])
        #expect(proxy.waitUntil { $0.connectionsAccepted == 2 && $0.pendingUp > 0 }, "\(proxy.stats)")
        #expect(!late.output.contains("received CONNACK"))

        proxy.stall(false)
        #expect(sub.waitForMessage("held"), "\(sub.output)")
        #expect(late.waitSubscribed(), "\(late.output)")
        #expect(proxy.waitUntil { $0.pendingDown == 0 && $0.pendingUp == 0 && $0.bytesDown >= down + held.pendingDown }, "\(proxy.stats)")
    }

    /// The next chunk from the broker is cut in half and the connection
    /// closed: the subscriber reconnects and the broker re-sends the QoS 1
    /// message with DUP set.
    @Test func cutMidPacketClosesAfterHalfAPacket() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let proxy = try FaultProxy(upstreamPort: broker.port)
        let sub = try MosquittoSub(proxy.endpoint, topics: ["c"], clientID: "cut", persistent: true)
        #expect(sub.waitSubscribed(), "\(sub.output)")

        proxy.cutMidPacket()
        #expect(try mosquittoPub(broker.endpoint, topic: "c", message: "cut-in-half").status == 0)
        #expect(proxy.waitUntil { $0.cuts == 1 && $0.connectionsAccepted >= 2 }, "\(proxy.stats)")
        #expect(sub.waitForMessage("cut-in-half"), "\(sub.output)")
        // The first copy never arrived whole: the one printed is the re-send.
        #expect(sub.output.contains("received PUBLISH (d1, q1"), "\(sub.output)")
        #expect(sub.messages.map(\.payload) == ["cut-in-half"])
        #expect(proxy.stats.cuts == 1)
    }

    @Test func refuseClosesNewConnections() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        let proxy = try FaultProxy(upstreamPort: broker.port)
        proxy.refuse(true)
        let refused = try mosquittoPub(proxy.endpoint, topic: "r", message: "refused")
        #expect(refused.status != 0, "\(refused.output)")
        #expect(proxy.stats.connectionsRefused == 1 && proxy.stats.bytesUp == 0, "\(proxy.stats)")
        proxy.refuse(false)
        #expect(try mosquittoPub(proxy.endpoint, topic: "r", message: "accepted").status == 0)
        let s = proxy.stats
        #expect(s.connectionsAccepted == 2 && s.connectionsRefused == 1 && s.bytesUp > 0, "\(s)")
    }

    @Test func deinitClosesTheProxyAndItsConnections() throws {
        let tmp = Scratch()
        let broker = try Broker(dir: tmp.path)
        var proxy: FaultProxy? = try FaultProxy(upstreamPort: broker.port)
        let port = proxy!.port
        let sub = try MosquittoSub(proxy!.endpoint, topics: ["x"], clientID: "held")
        #expect(sub.waitSubscribed(), "\(sub.output)")
        proxy = nil
        // The listener is gone, and the broker saw its side closed.
        #expect(!Net.canConnect(port: port))
        #expect(broker.waitForLog("Client held closed its connection"), "\(broker.log)")
    }
}
