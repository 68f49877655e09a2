import HawserBase
import HawserPosix
import Synchronization

// The thread-safe handle of a task: what a caller may do to it from any thread (cancel, fail,
// pause and resume reading) hops to the task's loop and feeds its machine there; what it may
// read from delegate callbacks (the wire head, the metrics so far) is the loop's state.

extension RequestTask {
    /// Cancels the task. Whatever it is doing (queued, resolving, connecting, writing, mid-head,
    /// mid-body), it ends exactly once with a `.cancelled` error. Safe from any thread; idempotent.
    public func cancel() {
        if self.cancelRequested.exchange(true, ordering: .relaxed) { return }
        self.onLoop { self.fail(HawserError(.cancelled, "the task was cancelled")) }
    }

    /// Ends the task with `error` (e.g. a delegate that refuses the response). Like ``cancel()``,
    /// it completes the task exactly once and closes its connection. Safe from any thread.
    public func fail(with error: HawserError) {
        if self.cancelRequested.exchange(true, ordering: .relaxed) { return }
        self.onLoop { self.fail(error) }
    }

    /// The request head as encoded for the wire, for the request being executed: the caller's
    /// fields and what the session added (Host, framing, cookies, Accept-Encoding…). Read it
    /// from delegate callbacks, on the event loop.
    public var wireRequestHead: [UInt8] { self.prepared.head }

    /// The metrics gathered so far (the connection, TLS, and the timings reached). Read it from
    /// delegate callbacks, on the event loop.
    public var currentMetrics: TaskMetrics { self.metrics }

    /// Stops reading the response from the socket until ``resumeReading()``. Safe from any thread.
    public func pauseReading() {
        self.onLoop {
            self.machine.pauseReading(into: &self.pool.requestQueue.scratch)
            self.runActions()
        }
    }

    /// Resumes reading after ``pauseReading()``. Safe from any thread.
    public func resumeReading() {
        self.onLoop {
            self.machine.resumeReading(into: &self.pool.requestQueue.scratch)
            self.runActions()
        }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop { body() } else { self.eventLoop.execute(body) }
    }
}
