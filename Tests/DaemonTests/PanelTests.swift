import Foundation
import GPIO
import Glibc
import Soundbox
import SoundboxAudio
@testable import SoundboxDaemon
import SoundboxSystem
import Testing
import TestSupport
import TestRig

/// GPIO in place of a chip: each input is a pipe the test writes edges to
/// (its read end is what the panel polls), each output records its levels.
final class FakeGPIO: GPIOBackend, @unchecked Sendable {
    final class Input: EdgeInput, @unchecked Sendable {
        let spec: LineSpec
        private let pipeFDs: [Int32]
        private let lock = NSLock()
        private var queued: [(active: Bool, time: Double)] = []
        private var current = false
        var fd: Int32 { pipeFDs[0] }

        init(_ spec: LineSpec) {
            self.spec = spec
            var fds: [Int32] = [-1, -1]
            pipe(&fds)
            _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
            pipeFDs = fds
        }
        deinit { close(pipeFDs[0]); close(pipeFDs[1]) }

        /// The finger: the line goes active (pressed, switch on) or not, now.
        func edge(_ active: Bool, at time: Double = MonotonicClock.seconds()) {
            lock.withLock { queued.append((active, time)); current = active }
            var one: UInt8 = 1
            _ = write(pipeFDs[1], &one, 1)
        }

        func readEdges() throws(GPIOError) -> [(active: Bool, time: Double)] {
            var drain = [UInt8](repeating: 0, count: 64)
            while read(pipeFDs[0], &drain, drain.count) > 0 {}
            return lock.withLock { defer { queued = [] }; return queued }
        }
        func level() throws(GPIOError) -> Bool { lock.withLock { current } }
    }

    final class Output: LogicalOutput, @unchecked Sendable {
        let levels = Condition()
        private(set) var history: [Bool] = []   // guarded by levels
        func set(_ on: Bool) throws(GPIOError) { levels.broadcast { history.append(on) } }
        func waitFor(_ on: Bool, timeout: Double) -> Bool { levels.wait(timeout: timeout) { history.last == on } }
    }

    private let lock = NSLock()
    private(set) var inputs: [Int: Input] = [:]
    private(set) var outputs: [Int: Output] = [:]
    /// Offsets refused as if another program held them.
    var busy: Set<Int> = []

    func input(_ spec: LineSpec, consumer: String) throws(GPIOError) -> any EdgeInput {
        if busy.contains(spec.offset) { throw GPIOError(call: "request (held by 'other')", line: spec.description, errno: EBUSY) }
        let line = Input(spec)
        lock.withLock { inputs[spec.offset] = line }
        return line
    }
    func output(_ spec: LineSpec, consumer: String, initial: Bool) throws(GPIOError) -> any LogicalOutput {
        let line = Output()
        lock.withLock { outputs[spec.offset] = line }
        return line
    }
}

/// The panel in process, on a fake chip: the mute switch, the volume
/// buttons, the LED and a line that cannot be had (the VM test in
/// scripts/vm drives the same through gpio-sim and the real libgpiod).
@Suite struct PanelTests {
    /// The daemon's parts the panel uses, on a scratch database.
    final class Box {
        let parts: Parts
        var device: DeviceState { parts.device }
        var changes: Changes { parts.changes }
        let gpio = FakeGPIO()
        let panel: Panel
        private var thread: ServiceThread?

        init(busy: Set<Int> = []) {
            parts = try! Parts(device: "panel-test", [TextKey.gpioChip.key.name: "fake"])
            gpio.busy = busy
            panel = Panel(device: parts.device, scheduler: parts.scheduler, changed: parts.changes, backend: gpio, config: parts.config)
        }

        func start() {
            panel.open(device.settings.current)
            let panel = panel
            thread = ServiceThread(name: "panel-test") { panel.run() }
        }
        deinit {
            panel.shutdown(deadline: 0)
            thread?.join(timeout: 5)
        }

        var volume: Int { device.settings.current[.audioVolume] }

        func waitUntil(timeout: Double, _ ready: () -> Bool) -> Bool { parts.waitUntil(timeout: timeout, ready) }
    }

    @Test func aShortPressOfUpOrDownStepsTheVolumeOnRelease() throws {
        let box = Box()
        box.start()
        let before = box.volume
        let up = try #require(box.gpio.inputs[27])
        let t = MonotonicClock.seconds()
        up.edge(true, at: t)
        up.edge(false, at: t + 0.1)
        #expect(box.waitUntil(timeout: 10) { box.volume == before + 1 })
        let down = try #require(box.gpio.inputs[22])
        down.edge(true, at: t + 0.3)
        down.edge(false, at: t + 0.4)
        #expect(box.waitUntil(timeout: 10) { box.volume == before })
    }

    @Test func theMuteSwitchMutesOnceItIsStillAndTheLEDSaysSo() throws {
        let box = Box()
        box.start()
        let led = try #require(box.gpio.outputs[23])
        #expect(led.waitFor(true, timeout: 10), "unmuted, no fault, link not enabled: steady on")
        let mute = try #require(box.gpio.inputs[17])
        mute.edge(true)
        mute.edge(false)
        mute.edge(true)   // bounce, then still: on
        #expect(box.waitUntil(timeout: 10) { box.device.settings.muted })
        mute.edge(false)
        #expect(box.waitUntil(timeout: 10) { !box.device.settings.muted })
    }

    /// A storage fault met by a write (no setting, no button) reaches the
    /// LED at once: the panel sleeps until a change of state, and this is one.
    @Test func aStorageFaultMakesTheLEDBlinkFast() throws {
        let box = Box()
        box.start()
        let led = try #require(box.gpio.outputs[23])
        #expect(led.waitFor(true, timeout: 10), "no fault yet: steady on")
        let path = box.device.storage.path
        try Data("not ours".utf8).write(to: URL(fileURLWithPath: path + ".other"))
        #expect(rename(path + ".other", path) == 0)
        let result = box.device.storage.accept(Payment(id: "A", amount: Amount(minorUnits: 100)), now: 1_000)
        #expect(result == .queued(durable: false, seq: nil))
        #expect(box.device.faults == ["storage"])
        #expect(led.waitFor(false, timeout: 10), "fast blink: the LED goes dark within 0.125 s of the fault")
        #expect(led.waitFor(true, timeout: 10))
    }

    @Test func aLineHeldByAnotherProgramIsReportedAndTheRestWork() throws {
        let box = Box(busy: [27])
        box.start()
        let problems = box.device.gpio.withLock { $0 }
        #expect(problems.count == 1 && problems[0].hasPrefix("vol_up: fake line 27"), "\(problems)")
        #expect(box.gpio.inputs[27] == nil && box.gpio.inputs[22] != nil && box.gpio.inputs[17] != nil)
        #expect(box.panel.hasLines)
    }
}
