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
    /// Runs `job` on this loop's thread (the `TaskExecutor` requirement). From the loop's own thread
    /// the job joins the local queue, with no wake-up; from any other thread it is queued under a
    /// lock and the loop is woken (through its eventfd) when it may be asleep. After the loop has
    /// shut down, jobs are dropped: it will never run again.
    public func enqueue(_ job: consuming ExecutorJob) {
        self.enqueueJob(UnownedJob(job))
    }
}
