import CHawser
// Blocking work off the event loop: file IO runs on a small pool of threads, as getaddrinfo
// runs on the Resolver's, and its result is posted back to the loop that asked with `execute`.
//
// Ordering: jobs carry an ordering key. Jobs with the same key run one at a time, in the order
// they were submitted; jobs with different keys run in parallel, up to the pool's thread count.
// A job without a key is a barrier: it starts when every job submitted before it has finished,
// and no job submitted after it starts before it has finished.
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A bounded pool of threads for blocking calls (file IO), with per-key ordering.
public final class BlockingIOPool: Sendable {
    private struct Job: Sendable {
        var key: String?
        var work: @Sendable () -> Void
        /// Runs alongside any keyed or unordered job (a Swift job of a task that prefers this
        /// pool as its executor); never before a barrier queued ahead of it.
        var unordered = false
    }

    private struct State {
        var queue: [Job] = []
        var running: [String?] = []  // the keys of running jobs (nil: a barrier)
        var threads = 0
        var idle = 0
    }

    private let state = Mutex(State())
    private let cond = ConditionVariable()
    private let maxThreads: Int
    private let name: String

    /// The process-wide pool for file IO (up to 2 threads, started on demand, parked when idle).
    public static let shared = BlockingIOPool(maxThreads: 2, name: "hawser-io")

    /// A pool that runs at most `maxThreads` jobs at once on threads named `name`, started
    /// when work is waiting and parked when idle. Most programs use ``shared``.
    public init(maxThreads: Int, name: String = "hawser-io") {
        self.maxThreads = max(1, maxThreads)
        self.name = name
    }

    /// Runs `work` on a pool thread, after every earlier job with the same `key` (and every
    /// earlier barrier); `key == nil` makes it a barrier.
    public func submit(key: String?, _ work: @escaping @Sendable () -> Void) {
        self.submit(Job(key: key, work: work))
    }

    /// Runs `work` on a pool thread with no ordering against other jobs but barriers.
    func submitUnordered(_ work: @escaping @Sendable () -> Void) {
        self.submit(Job(key: Self.unorderedKey, work: work, unordered: true))
    }

    /// The key an unordered job holds in `running` (a keyed job with this very key would only
    /// wait for unordered ones).
    private static let unorderedKey = "\u{0}unordered"

    private func submit(_ job: Job) {
        let startThread: Bool = self.state.withLock { s in
            s.queue.append(job)
            if s.idle == 0 && s.threads < self.maxThreads {
                s.threads += 1
                return true
            }
            return false
        }
        if startThread { self.spawn() }
        self.cond.broadcast()
    }

    /// Runs `work` on a pool thread (ordered by `key` as ``submit(key:_:)``) and calls
    /// `completion` with its result on `loop`.
    public func submit<T: Sendable>(
        key: String?,
        on loop: EventLoop,
        _ work: @escaping @Sendable () -> T,
        completion: @escaping @Sendable (T) -> Void
    ) {
        self.submit(key: key) {
            let result = work()
            loop.execute { completion(result) }
        }
    }

    /// Runs `work` ordered by `key` and waits for its result on the calling thread. Never call
    /// it on an event loop thread.
    public func runAndWait<T: Sendable>(key: String?, _ work: @escaping @Sendable () -> T) -> T {
        let done = Mutex<T?>(nil)
        let cond = ConditionVariable()
        self.submit(key: key) {
            let result = work()
            done.withLock { $0 = result }
            cond.broadcast()
        }
        return done.waitUntilSet(cond)
    }

    private func spawn() {
        if !startDetachedThread(name: self.name, { self.work() }) {
            self.state.withLock { $0.threads -= 1 }
        }
    }

    /// The index of the first job that may start now, if any.
    private static func runnable(_ s: State) -> Int? {
        if s.running.contains(where: { $0 == nil }) { return nil }  // a barrier runs alone
        var earlierKeys = Set<String>()
        for (i, job) in s.queue.enumerated() {
            guard let key = job.key else {
                // A barrier starts only when nothing runs and nothing is queued before it.
                return i == 0 && s.running.isEmpty ? i : nil
            }
            if job.unordered { return i }
            if !earlierKeys.contains(key) && !s.running.contains(key) { return i }
            earlierKeys.insert(key)
        }
        return nil
    }

    private func work() {
        while true {
            var job: Job? = nil
            self.state.withLock { $0.idle += 1 }
            // `wait(until:)` re-checks under the condition's mutex, so a broadcast between the
            // check and the wait cannot be missed.
            self.cond.wait {
                job = self.state.withLock { s in
                    guard let i = Self.runnable(s) else { return nil }
                    let j = s.queue.remove(at: i)
                    s.running.append(j.key)
                    s.idle -= 1
                    return j
                }
                return job != nil
            }
            guard let j = job else { continue }
            j.work()
            self.state.withLock { s in
                if let i = s.running.firstIndex(where: { $0 == j.key }) { s.running.remove(at: i) }
            }
            // A finished job may unblock a waiting one with the same key (or a barrier).
            self.cond.broadcast()
        }
    }
}
