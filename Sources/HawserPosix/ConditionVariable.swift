import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A pthread condition variable paired with a pthread mutex, for the few places that must
/// block a thread (joining work, waiting for a loop to finish). Never used on a loop thread.
final class ConditionVariable: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(self.mutex, nil)
        pthread_cond_init(self.cond, nil)
    }

    deinit {
        pthread_cond_destroy(self.cond)
        pthread_mutex_destroy(self.mutex)
        self.cond.deallocate()
        self.mutex.deallocate()
    }

    func broadcast() {
        pthread_mutex_lock(self.mutex)
        pthread_cond_broadcast(self.cond)
        pthread_mutex_unlock(self.mutex)
    }

    /// Waits until `ready()` is true; `ready` is re-checked under the condition's mutex.
    func wait(until ready: () -> Bool) {
        pthread_mutex_lock(self.mutex)
        while !ready() { pthread_cond_wait(self.cond, self.mutex) }
        pthread_mutex_unlock(self.mutex)
    }
}

extension Mutex where Value: Sendable {
    /// Blocks until the value is non-nil / true (signalled through `cond.broadcast()`).
    func waitUntilSet<T>(_ cond: ConditionVariable) -> T where Value == T? {
        var result: T? = nil
        cond.wait {
            result = self.withLock { $0 }
            return result != nil
        }
        return result!
    }

    func waitUntilSet(_ cond: ConditionVariable) -> Bool where Value == Bool {
        cond.wait { self.withLock { $0 } }
        return true
    }
}
