// The buffer the tasks' lifecycle machines append their actions to: one per thread, reused from
// input to input, so feeding a task's lifecycle allocates nothing (a buffer per task would be an
// allocation per request). A task's inputs come from any thread (resume, suspend and cancel from
// the caller's, the engine's events from the event loop, the interceptor's answers from its
// task), and each runs on one thread from the machine's answer to the end of its actions, so a
// buffer of the thread's own needs no lock. An action may feed another input on the same thread
// (a launch reports the engine's handle): that input appends behind the running one's actions,
// runs its own, and removes them, so the buffer is used as a stack.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

final class LifecycleActionBuffer {
    typealias Action = TaskLifecycle<RequestTask>.Action

    /// The actions of the inputs being run on this thread, the innermost last.
    var actions: [Action] = []

    private init() {
        self.actions.reserveCapacity(4)
    }

    /// The current thread's buffer (made on the thread's first input).
    static var current: LifecycleActionBuffer {
        if let p = pthread_getspecific(lifecycleActionBufferKey) {
            return Unmanaged<LifecycleActionBuffer>.fromOpaque(p).takeUnretainedValue()
        }
        let buffer = LifecycleActionBuffer()
        pthread_setspecific(lifecycleActionBufferKey, Unmanaged.passRetained(buffer).toOpaque())
        return buffer
    }

    /// Removes the actions from `start` on (an input's, once run), keeping the capacity.
    func removeActions(from start: Int) {
        self.actions.removeLast(self.actions.count - start)
    }
}

/// The thread-specific slot of ``LifecycleActionBuffer/current``; a thread's buffer is released
/// when the thread exits.
private let lifecycleActionBufferKey: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { p in
        guard let p else { return }
        Unmanaged<LifecycleActionBuffer>.fromOpaque(p).release()
    }
    precondition(status == 0, "pthread_key_create failed: \(status)")
    return key
}()
