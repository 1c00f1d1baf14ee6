import Foundation
import Soundbox
@testable import SoundboxDaemon
import SoundboxSystem
import Testing
import TestSupport
import TestRig

/// `Uplink` in process, on a real mosquitto: the broker link without a
/// spawned daemon (MQTTDaemonTests and MQTTFaultTests drive the same
/// through soundboxd). No scheduler thread runs: payments stay queued.
@Suite struct UplinkTests {
    /// What the uplink tells the scheduler (`LinkEvent`s), as they come.
    final class Told: @unchecked Sendable {
        private let cond = Condition()
        private var connects = 0   // guarded by cond

        func add(_ event: LinkEvent) {
            if case .connected = event { cond.broadcast { connects += 1 } }
        }
        /// Waits (on the events, not on a clock) for the `n`th connect.
        func waitForConnect(_ n: Int, timeout: Double = 30) -> Bool { cond.wait(timeout: timeout) { connects >= n } }
    }

    final class Box {
        let scratch = Scratch()
        let broker: Broker
        let parts: Parts
        let told = Told()
        let uplink: Uplink
        private var thread: ServiceThread?

        init() throws {
            broker = try Broker(dir: scratch.path + "/broker")
            parts = try Parts(device: "uplink-test", [TextKey.mqttHost.key.name: "127.0.0.1", IntKey.mqttPort.key.name: "\(broker.port)",
                                                      IntKey.mqttReconnectMax.key.name: "2"])
            let told = told
            uplink = try Uplink(config: parts.settings.current, deviceID: parts.deviceID, device: parts.device, inbox: parts.inbox(),
                                changes: parts.changes, onLink: { told.add($0) })
            try uplink.connect()
            let uplink = uplink
            thread = ServiceThread(name: "uplink-test") { uplink.run() }
        }
        deinit {
            uplink.shutdown(deadline: SystemClock.monotonic() + 5)
            thread?.join(timeout: 10)
        }

        var link: LinkStatus { parts.device.link.withLock { $0 } }
        func backend() throws -> Backend { try Backend(port: broker.port, device: parts.deviceID) }
    }

    /// Connected: the link is told once (to the scheduler, and in
    /// `device.link`, the only copy status and the LED read), the retained
    /// status says online; a payment is stored before its PUBACK and its
    /// `queued` receipt reaches the backend, then leaves the outbox once the
    /// broker took it; a config is answered on config/applied.
    @Test func aPaymentIsStoredAndItsReceiptReachesTheBackend() throws {
        let box = try Box()
        #expect(box.told.waitForConnect(1))
        let backend = try box.backend()
        #expect(backend.waitUntil(timeout: 30) { backend.status?["online"] as? Bool == true })
        #expect(box.link.connected && box.link.protocolLevel == 5)

        try backend.pay(id: "U1", amount: "3.00")
        try backend.pay(id: "U2", amount: "3.0x")
        #expect(backend.waitForReceipts(["U1", "U2"], ["queued", "rejected"], timeout: 30))
        #expect(backend.receipts(for: "U1") == ["queued"] && backend.receipts(for: "U2") == ["rejected"])
        #expect(box.parts.queued == ["U1"])
        #expect(pollUntil(timeout: 30) { box.parts.storage.receiptsPending == 0 }, "acknowledged receipts are deleted")

        try backend.publish(backend.topics.config, #"{"audio.volume":4}"#)
        #expect(backend.waitUntil(timeout: 30) { backend.applied.contains { $0["ok"] as? Bool == true } })
        #expect(box.parts.settings.current[.audioVolume] == 4)
    }

    /// The broker goes: the link says so (not connected, why); a receipt
    /// made meanwhile waits in the outbox; the broker comes back on the same
    /// port: the uplink reconnects by itself, tells the scheduler again (an
    /// offline summary may be due) and the receipt is sent and taken.
    @Test func receiptsWaitForTheBrokerAndGoWhenItComesBack() throws {
        let box = try Box()
        #expect(box.told.waitForConnect(1))
        box.broker.stop()
        #expect(pollUntil(timeout: 30) { !box.link.connected })
        #expect(box.link.lastError?.contains("disconnected") == true)

        #expect(box.parts.ingest.accept(Payment(id: "D1", amount: Amount(minorUnits: 100))) == .queued(durable: true))
        #expect(box.parts.storage.receiptsPending == 1, "no broker: the receipt waits")

        try box.broker.restart()
        #expect(box.told.waitForConnect(2))
        #expect(pollUntil(timeout: 30) { box.parts.storage.receiptsPending == 0 }, "sent and acknowledged after the reconnect")
        #expect(box.link.connected && box.link.lastError == nil)
    }
}
