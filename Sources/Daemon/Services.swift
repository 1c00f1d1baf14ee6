import Soundbox
import SoundboxSystem

/// A part of the daemon that runs on its own thread until asked to stop
/// (the scheduler, the broker link, the panel, the control socket).
protocol Service: AnyObject, Sendable {
    /// For logs: "scheduler", "mqtt", ...
    var name: String { get }
    /// The service's work; returns once `shutdown` was called (or at once
    /// if it already was). Runs on a thread of the group's.
    func run()
    /// Asks `run` to return by `deadline` (monotonic seconds). Called from
    /// the main thread; must not block.
    func shutdown(deadline: Double)
}

/// Services started in order and stopped in reverse, under one deadline for
/// the whole shutdown (docs/soundboxd.md "Service life"): a service that
/// does not stop in time is named in the log and left behind, so the process
/// still exits when promised.
final class ServiceGroup {
    private var running: [(service: any Service, thread: ServiceThread)] = []
    private let log = Log("daemon")

    /// Starts `service` on its own thread, after those started before.
    func start(_ service: any Service) {
        running.append((service, ServiceThread(name: service.name) { service.run() }))
    }

    /// Stops every service, the last started first: each is asked to stop
    /// (all at once, so one that hangs cannot keep the others from hearing
    /// it), then waited for in the same order, each given what is left of
    /// `seconds`. Returns the names of those that did not stop in time.
    @discardableResult
    func stop(within seconds: Double) -> [String] {
        let deadline = SystemClock.monotonic() + seconds
        for (service, _) in running.reversed() { service.shutdown(deadline: deadline) }
        var late: [String] = []
        for (service, thread) in running.reversed() {
            if thread.join(timeout: max(0, deadline - SystemClock.monotonic())) {
                log.info("service_stopped", ["service": service.name])
            } else {
                late.append(service.name)
                log.warning("service_did_not_stop", ["service": service.name, "deadline_s": "\(seconds)"])
            }
        }
        running = []
        return late
    }
}
