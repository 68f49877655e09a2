// A BlockingIOPool is a Swift task executor: the way to run blocking work off the event loops,
// which matters most once the loops are the global executor (EventLoopGroup.installAsGlobalExecutor):
//
//     let text = try await withTaskExecutorPreference(BlockingIOPool.shared) {
//         try String(contentsOfFile: path, encoding: .utf8)   // a blocking read, off the loops
//     }
//
// The task's jobs run on the pool's threads, alongside its keyed file IO and never before a
// barrier submitted ahead of them. A blocking job holds one of the pool's threads until it
// returns: the shared pool has two, so long or many blocking calls want a pool of their own
// (`BlockingIOPool(maxThreads: 8, name: "app-blocking")`).
extension BlockingIOPool: TaskExecutor {
    /// Runs `job` on one of the pool's threads (the `TaskExecutor` requirement), unordered
    /// against the pool's other work but its barriers.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.submitUnordered { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
