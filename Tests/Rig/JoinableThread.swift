import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A pthread that can be joined (Foundation's Thread cannot).
package final class JoinableThread: @unchecked Sendable {
    private var handle = pthread_t()
    private var joined = false

    private final class Body { let run: () -> Void; init(_ run: @escaping () -> Void) { self.run = run } }

    package init(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        let rc = pthread_create(&handle, nil, { raw in
            let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            body.run()
            return nil
        }, context)
        precondition(rc == 0, "pthread_create: \(rc)")
    }

    package func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }
}
