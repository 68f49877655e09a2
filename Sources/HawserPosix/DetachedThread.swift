import CHawser

#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached thread named `name` (as `top` and `/proc/*/task/*/comm` show it) that runs
/// `body` once. False when the system refuses a thread; `body` is then released unrun.
///
/// The worker pools (`Resolver`, `BlockingIOPool`) start their threads through this.
func startDetachedThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void

        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(name: name, body: body))
    var tid = pthread_t()
    let rc = pthread_create(
        &tid,
        nil,
        { arg in
            let start = Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue()
            CHawser_set_thread_name(start.name)
            start.body()
            return nil
        },
        start.toOpaque()
    )
    guard rc == 0 else {
        start.release()
        return false
    }
    pthread_detach(tid)
    return true
}
