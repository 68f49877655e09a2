import CHawser
// The loops as the Swift concurrency global executor.
//
// The concurrency runtime sends every job that has no executor of its own (a nonisolated async
// function, `Task {}` outside an actor, a task group's child) to the global executor, by default a
// pool of Dispatch threads. `installAsGlobalExecutor()` points the runtime's enqueue hooks at
// this group instead (as swift-nio's NIOSingletons does for its group), so that such a job runs on
// an event loop, and a request awaited from it is served with no thread hand-off at all:
//
//   * a job enqueued on a loop thread of the group (a task resuming after its response arrived,
//     a child task started from a task on the loop) stays on that loop: no eventfd write, no
//     futex, and the request's connection and the caller share the thread;
//   * a job enqueued from any other thread (the main thread, a Dispatch queue, a thread of its
//     own) goes to the group's loops round-robin (`EventLoopGroup.next()`);
//   * a delayed job that reaches the runtime's delayed or deadline hook becomes a timer on the
//     chosen loop's timer heap. (Swift 6.3's `Task.sleep` keeps its timer in the runtime's own
//     scheduling executor and enqueues the resumption through the plain hook: it resumes on a loop.)
//
// The hooks are process-wide and are never removed: the group is the executor until the process
// exits. The main actor keeps its own executor (the main thread).
import Synchronization

/// Why ``EventLoopGroup/installAsGlobalExecutor()`` refused.
public struct GlobalExecutorInstallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The reasons an install is refused.
    public enum Code: Sendable, Equatable {
        /// Something else (another library, a test harness, a custom runtime) already set the
        /// runtime's global-enqueue hook, or its delayed or deadline variant: two executors
        /// cannot both own it, and Hawser does not take it over.
        case anotherExecutorInstalled
        /// A different ``EventLoopGroup`` is already the global executor.
        case differentGroupInstalled
        /// This Swift runtime does not export the global-enqueue hooks.
        case hooksUnavailable
    }

    /// What went wrong.
    public let code: Code

    /// Creates the error for `code`.
    public init(code: Code) { self.code = code }

    /// A sentence that says what went wrong and what to do.
    public var description: String {
        switch self.code {
        case .anotherExecutorInstalled:
            return "cannot install the event loops as the global executor: another global executor "
                + "(a swift_task_enqueueGlobal hook) was installed first; install Hawser's before anything else does, or keep the other one"
        case .differentGroupInstalled:
            return "cannot install this EventLoopGroup as the global executor: a different group already is "
                + "(the global executor is installed once per process)"
        case .hooksUnavailable:
            return
                "cannot install the event loops as the global executor: this Swift runtime has no global-enqueue hooks"
        }
    }
}

/// The group the runtime's hooks send jobs to, once installed. Written once, under
/// `installLock`, before the hooks are set (the C side publishes them with a release store).
nonisolated(unsafe) private var installedGroup: EventLoopGroup? = nil
private let installLock = Mutex<Void>(())

extension EventLoopGroup {
    /// Makes this group's event loops the Swift concurrency global executor of the process: from
    /// then on every job without an executor of its own (nonisolated async functions, `Task {}`
    /// outside an actor, task-group children, the resumption after `Task.sleep`) runs on the loops.
    ///
    /// ```swift
    /// try EventLoopGroup.shared.installAsGlobalExecutor()   // first line of main
    /// ```
    ///
    /// A request awaited from such a task is served with no thread hand-off: a job enqueued on a
    /// loop of this group stays on that loop, and one enqueued from any other thread goes to the
    /// group's loops round-robin (``next()``). Call it before the first task starts (the first
    /// line of `main`): jobs already queued on the default executor stay there.
    ///
    /// What it means: blocking work in a task (a blocking read, a long computation, a
    /// synchronous wait) now blocks an event loop, and every connection on that loop stalls
    /// until it returns. Run such work off the loops with
    /// `withTaskExecutorPreference(BlockingIOPool.shared) { ... }` (see ``BlockingIOPool``). The
    /// group must not be shut down afterwards. The main actor keeps its own executor.
    ///
    /// Calling it again on the same group does nothing.
    ///
    /// - Throws: ``GlobalExecutorInstallError`` with
    ///   ``GlobalExecutorInstallError/Code/anotherExecutorInstalled`` when something else set
    ///   the runtime's global-enqueue hook first (nothing is changed then),
    ///   ``GlobalExecutorInstallError/Code/differentGroupInstalled`` when another group is the
    ///   executor already, ``GlobalExecutorInstallError/Code/hooksUnavailable`` when the runtime
    ///   has no hooks.
    public func installAsGlobalExecutor() throws(GlobalExecutorInstallError) {
        try installLock.withLock { _ throws(GlobalExecutorInstallError) in
            if let current = installedGroup {
                if current === self { return }
                throw GlobalExecutorInstallError(code: .differentGroupInstalled)
            }
            for loop in self.loops { loop.servesGlobalExecutor.store(true, ordering: .releasing) }
            installedGroup = self
            let rc = CHawser_install_global_executor_hooks(globalEnqueue, globalEnqueueAt)
            guard rc == CHAWSER_EXECUTOR_INSTALLED else {
                installedGroup = nil
                for loop in self.loops { loop.servesGlobalExecutor.store(false, ordering: .releasing) }
                throw GlobalExecutorInstallError(
                    code: rc == CHAWSER_EXECUTOR_HOOK_TAKEN ? .anotherExecutorInstalled : .hooksUnavailable
                )
            }
        }
    }

    /// True when this group is the process's global executor (see ``installAsGlobalExecutor()``).
    public var isGlobalExecutor: Bool {
        installLock.withLock { _ in installedGroup === self }
    }

    /// The group installed as the global executor, if any.
    public static var globalExecutor: EventLoopGroup? {
        installLock.withLock { _ in installedGroup }
    }

    /// The loop a global job goes to: the current thread's loop when it belongs to the installed
    /// group, else the next one round-robin.
    @inline(__always)
    fileprivate func loopForGlobalJob() -> EventLoop {
        if let current = EventLoop.currentLoop, current.servesGlobalExecutor.load(ordering: .relaxed) {
            return current
        }
        return self.next()
    }
}

/// The runtime's global-enqueue hook (through CHawser): runs `job` on a loop.
private let globalEnqueue: @convention(c) (UnsafeMutableRawPointer?) -> Void = { raw in
    guard let raw, let group = installedGroup else { return }
    group.loopForGlobalJob().enqueueJob(unsafeBitCast(raw, to: UnownedJob.self))
}

/// How many delayed or deadline jobs became loop timers (tests: `Task.sleep` took that path).
package let globalExecutorTimedJobs = Atomic<Int>(0)

/// The runtime's delayed and deadline hooks (through CHawser): a timer on a loop, at a
/// CLOCK_MONOTONIC deadline.
private let globalEnqueueAt: @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Void = { raw, deadline in
    guard let raw, let group = installedGroup else { return }
    globalExecutorTimedJobs.add(1, ordering: .relaxed)
    group.loopForGlobalJob().enqueueJob(unsafeBitCast(raw, to: UnownedJob.self), atMonotonicDeadline: deadline)
}
