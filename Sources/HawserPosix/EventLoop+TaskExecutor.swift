// An EventLoop is a Swift task executor: Swift tasks that prefer it run on the loop's thread.
//
//     try await withTaskExecutorPreference(session.eventLoop) {
//         let r = try await session.response(for: request)   // no thread hop at all
//     }
//
// The session's work and the caller's continuation then run on the same thread: submitting a
// request is a direct call and resuming the caller is a local task, with no eventfd write and
// no futex wake-up. Code run this way must not block (it shares the thread with the loop's IO).
extension EventLoop: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        self.enqueueJob(UnownedJob(job))
    }
}
