import Glibc
import Synchronization

/// Something the services that show the device's state react to.
enum Change: Sendable {
    /// A receipt waits to be sent, and the queue may have moved: the uplink
    /// sends it (and the retained status, if it changed).
    case receipt
    /// What status and the LED show: a setting, the volume, the mute
    /// switch, a fault, the link. The uplink and the panel look again.
    case state
}

/// Where changes are posted: by ingest, the scheduler, the settings' users
/// and the uplink itself. The uplink's sender thread waits on `uplink`; the
/// panel sleeps in poll(2) on an eventfd told of `.state` only, so a burst
/// of receipts does not wake it.
final class Changes: Sendable {
    /// Woken by every change.
    let uplink = Wakeup()
    private let stateDescriptors = Mutex<[Int32]>([])

    func post(_ change: Change) {
        uplink.notify()
        guard case .state = change else { return }
        stateDescriptors.withLock { fds in
            for fd in fds { var one: UInt64 = 1; _ = write(fd, &one, 8) }
        }
    }

    /// Each `.state` change adds one to the eventfd `fd`.
    func signalState(eventfd fd: Int32) { stateDescriptors.withLock { $0.append(fd) } }
}
