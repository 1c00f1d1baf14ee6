import Foundation
import Soundbox
import SoundboxAudio
import SoundboxSystem
@testable import SoundboxDaemon
import TestSupport
import TestRig

/// The daemon's parts wired as `Daemon.run` wires them, in process, on a
/// scratch database, with no thread started: what the in-process suites
/// (PanelTests, InboxTests, UplinkTests) drive.
final class Parts {
    let scratch = Scratch()
    let config: Config
    let changes = Changes()
    let storage: Storage
    let settings: Settings
    let voices: Voices
    let ingest: Ingest
    let scheduler: Scheduler
    let signing: Signing
    let device: DeviceState
    let updater: Updater
    let deviceID: String

    /// - Parameter set: config keys by name, over the defaults (the shipped voices).
    init(device deviceID: String = "parts-test", _ set: [String: String] = [:]) throws {
        var config = Config()
        try config.set(TextKey.voiceDir.key, Build.root + "/voices")
        try config.set(TextKey.stateDir.key, scratch.path)
        for (k, v) in set.sorted(by: { $0.key < $1.key }) { try config.set(k, v) }
        self.config = config
        self.deviceID = deviceID
        let catalog = VoiceCatalog.scan(directory: config[.voiceDir])
        let changes = changes
        storage = Storage(path: scratch.path + "/soundbox.db", faultChanged: { changes.post(.state) })
        settings = Settings(file: config, storage: storage, voices: catalog)
        voices = Voices(catalog: catalog)
        let wake = Wakeup()
        ingest = Ingest(storage: storage, settings: settings, voices: voices, scheduler: wake, changes: changes)
        scheduler = Scheduler(storage: storage, settings: settings, voices: voices, bank: VoiceBank(catalog: catalog),
                              wake: wake, changes: changes, environment: [:])
        signing = Signing(config: config, device: deviceID, storage: storage, environment: [:])
        device = DeviceState(settings: settings, storage: storage, voices: voices, signing: signing,
                             playback: scheduler.status, link: Shared(LinkStatus()), gpio: Shared([]), updates: UpdateView(),
                             started: 0, environment: [:], provisioningFaultPath: scratch.path + "/provisioning.fault")
        updater = Updater(config: config, view: device.updates, storage: storage, wake: wake, playback: scheduler.status,
                          link: device.link, settings: settings, changes: changes, environment: [:],
                          bootID: "parts-boot")
    }

    func inbox() -> Inbox {
        Inbox(settings: settings, storage: storage, ingest: ingest, scheduler: scheduler, signing: signing, changes: changes,
              updater: updater)
    }

    /// The ids waiting to be spoken, oldest first.
    var queued: [String] { storage.pending().map(\.payment.id) }
    /// The receipts waiting to be sent, as their JSON.
    var receipts: [String] { storage.receipts(limit: 100, excluding: []).map(\.json) }

    /// Waits, on the changes the parts post (no polling), until `ready`.
    func waitUntil(timeout: Double, _ ready: () -> Bool) -> Bool {
        let end = MonotonicClock.seconds() + timeout
        while !ready() {
            let left = end - MonotonicClock.seconds()
            if left <= 0 { return false }
            changes.uplink.waitForWork(timeout: left)
        }
        return true
    }
}
