#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserHTTP1
import Synchronization

/// One request being executed by a ``Session``. Thread-safe handle; the task's working state
/// is confined to the session's event loop.
public final class RequestTask: @unchecked Sendable {
    /// Where the task is. Loop-confined.
    enum State {
        /// Created, not yet handed to the pool. Next: queued, executing, finished.
        case created
        /// Waiting in the pool for a connection. Next: executing, finished.
        case queued
        /// Running on a connection. Next: queued (retry), finished.
        case executing(HTTP1Connection)
        /// Done; the delegate has been told. Final.
        case finished
    }

    /// The request as given.
    public let originalRequest: HTTPClientRequest
    /// The request being executed: the original one, or where redirects led (NSURLSessionTask's
    /// currentRequest). Changes only on the event loop; read it from delegate callbacks.
    public internal(set) var request: HTTPClientRequest
    /// The loop this task runs on.
    public let eventLoop: EventLoop
    let delegate: any ResponseDelegate
    unowned(unsafe) let pool: ConnectionPool

    // Loop-confined state.
    var state: State = .created
    var metrics = TaskMetrics()
    var key: ConnectionKey
    var encodedHead: [UInt8] = []
    /// The body as it goes on the wire: the request's body, gzip-coded when it asks for
    /// `compressesBody`. Set with `encodedHead`, from the same `Session.prepare`.
    var wireBody: RequestBody?
    var lastActivity: UInt64 = 0
    var idleTimeoutNanos: UInt64 = 0
    var resourceDeadline: UInt64 = 0
    var resourceSeconds: Double = 0
    /// The task's one timer: due at the earlier of the idle and the resource deadline.
    var timer: Scheduled?
    var readingPaused = false
    /// Reading is held while a delegate decides about this response (a redirect, a challenge).
    var decisionPending = false
    /// Whether the connection should stop reading for this task now.
    var readingSuspended: Bool { self.readingPaused || self.decisionPending }
    /// The request that replaces this one once the current response (a followed redirect) ends.
    var followUp: HTTPClientRequest?
    /// A redirect's body is being drained while the delegate finds a new body stream;
    /// `responseDrained` records that it ended before the answer came.
    var drainingResponse = false
    /// The server answered before the 100-continue body was sent, which was then never sent.
    var bodyWithheld = false
    var countsFollowUpAsRedirect = true
    /// 401/407 rounds of this task (loop-breaker and previousFailureCount), per direction.
    var serverAuthAttempts: AuthenticationAttempts?
    var proxyAuthAttempts: AuthenticationAttempts?
    /// The stored response a conditional request revalidates (a 304 serves it).
    var cacheCandidate: CachedResponse?
    /// A response being stored: its head (Content-Encoding removed: the body is kept decoded),
    /// the body so far, and when the request went out. nil when it is not to be stored, or
    /// after the body outgrew what the cache would keep.
    var cacheRecording: (head: HTTPResponseHead, body: [UInt8], requestTime: Date)?
    /// The network body is ignored: a cached response was delivered in its place (after a 304).
    var servedFromCache = false
    var pendingCachedBody: [UInt8]?
    var requestTime = Date()
    /// Undoes the response's Content-Encoding as body bytes arrive.
    var decoder: ContentDecoder?
    var responseDrained = false
    var bodyWriter: RequestBodyWriter?
    var bodyBytesSent: Int64 = 0

    /// Set from any thread so a cancel that races with completion is decided once, on the loop.
    private let cancelRequested = Atomic<Bool>(false)

    init(request: HTTPClientRequest, key: ConnectionKey, encodedHead: [UInt8], wireBody: RequestBody?, eventLoop: EventLoop,
         delegate: any ResponseDelegate, pool: ConnectionPool) {
        self.request = request
        self.originalRequest = request
        self.key = key
        self.encodedHead = encodedHead
        self.wireBody = wireBody
        self.eventLoop = eventLoop
        self.delegate = delegate
        self.pool = pool
    }

    /// Cancels the task. Whatever it is doing (queued, resolving, connecting, writing, mid-head,
    /// mid-body), it ends exactly once with a `.cancelled` error. Safe from any thread; idempotent.
    public func cancel() {
        if self.cancelRequested.exchange(true, ordering: .relaxed) { return }
        if self.eventLoop.inEventLoop {
            self.fail(HawserError(.cancelled, "the task was cancelled"))
        } else {
            self.eventLoop.execute { self.fail(HawserError(.cancelled, "the task was cancelled")) }
        }
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
    public var wireRequestHead: [UInt8] { self.encodedHead }

    /// The metrics gathered so far (the connection, TLS, and the timings reached). Read it from
    /// delegate callbacks, on the event loop.
    public var currentMetrics: TaskMetrics { self.metrics }

    /// Stops reading the response from the socket until ``resumeReading()``. Safe from any thread.
    public func pauseReading() {
        self.onLoop {
            self.readingPaused = true
            if case .executing(let c) = self.state { c.updateReadInterest() }
        }
    }

    /// Resumes reading after ``pauseReading()``. Safe from any thread.
    public func resumeReading() {
        self.onLoop {
            guard self.readingPaused else { return }
            self.readingPaused = false
            self.lastActivity = TaskMetrics.now()
            if case .executing(let c) = self.state { c.resumeAfterPause() }
        }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop { body() } else { self.eventLoop.execute(body) }
    }

    var isFinished: Bool {
        if case .finished = self.state { return true }
        return false
    }

    // MARK: - Loop-side lifecycle

    /// Arms the task's timer; called once when the task is handed to the pool.
    func start(configuration: SessionConfiguration) {
        let now = TaskMetrics.now()
        self.metrics.fetchStart = now
        self.lastActivity = now
        let idle = self.request.timeoutInterval ?? configuration.timeoutIntervalForRequest
        self.idleTimeoutNanos = Self.nanos(idle)
        self.resourceSeconds = configuration.timeoutIntervalForResource
        self.resourceDeadline = now &+ Self.nanos(configuration.timeoutIntervalForResource)
        self.armTimer(now: now)
    }

    static func nanos(_ seconds: Double) -> UInt64 {
        if seconds <= 0 { return 0 }
        if seconds > 1e9 { return UInt64(1e18) }
        return UInt64(seconds * 1e9)
    }

    /// One timer per task, re-armed lazily: activity only updates `lastActivity`, and when the
    /// timer fires early it re-arms for whichever deadline is now nearest. A busy download costs
    /// no timer work per read, and a task costs one heap entry, not two.
    private func armTimer(now: UInt64) {
        let idleDue = self.lastActivity &+ self.idleTimeoutNanos
        let due = min(idleDue, self.resourceDeadline)
        self.timer = self.eventLoop.scheduleInLoop(in: due > now ? due - now : 0) { [unowned(unsafe) self] in
            self.timerFired()
        }
    }

    private func timerFired() {
        self.timer = nil
        guard !self.isFinished else { return }
        let now = TaskMetrics.now()
        if now >= self.resourceDeadline {
            self.fail(HawserError(.resourceTimeout, "the task did not finish within \(self.resourceSeconds) s"))
            return
        }
        // The idle clock does not run while the consumer holds the response back.
        if self.readingSuspended { self.lastActivity = now }
        if now &- self.lastActivity >= self.idleTimeoutNanos {
            let seconds = Double(self.idleTimeoutNanos) / 1e9
            self.fail(HawserError(.idleTimeout, "no data moved for \(seconds) s"))
            return
        }
        self.armTimer(now: now)
    }

    /// Ends the task with an error. Idempotent; closes the connection if one is in use.
    func fail(_ error: HawserError) {
        switch self.state {
        case .finished:
            return
        case .created:
            break
        case .queued:
            self.pool.removeWaiting(self)
        case .executing(let connection):
            connection.abort(self)
        }
        self.finish(.failure(error.with(url: self.request.url)))
    }

    /// Tells the delegate, exactly once, and releases the timers. `notifyPool` is false only for a
    /// task that never reached its pool (its loop had shut down): the pool is not ours to touch then.
    func finish(_ result: Result<HTTPHeaders?, HawserError>, notifyPool: Bool = true) {
        if case .finished = self.state { return }
        var result = result
        if case .success = result, self.decoder != nil {
            // A coded stream that stops early is a truncated body even if the framing was complete.
            do {
                try self.decoder!.finish()
            } catch {
                result = .failure(error.with(url: self.request.url))
            }
            self.decoder = nil
        }
        if case .success = result, let recording = self.cacheRecording {
            self.cacheRecording = nil
            self.storeInCache(recording)
        }
        if case .success = result {
            if let next = self.followUp {
                self.followUp = nil
                self.restart(with: next)
                return
            }
            if self.drainingResponse {
                self.responseDrained = true
                self.state = .created
                return
            }
        }
        self.state = .finished
        self.timer?.cancel()
        self.timer = nil
        if self.metrics.responseEnd == nil { self.metrics.responseEnd = TaskMetrics.now() }
        self.bodyWriter?.taskEnded(result)
        self.bodyWriter = nil
        if notifyPool { self.pool.taskFinished(self) }
        self.delegate.task(self, didCompleteWith: result, metrics: self.metrics)
    }
}

/// Writes a streamed request body. Each `write` suspends until the bytes were handed to the
/// socket (back-pressure), and throws if the task ended meanwhile.
public final class RequestBodyWriter: @unchecked Sendable {
    /// Strong: the producer may outlive the task's exchange (a failure, a redirect), and must
    /// find out safely. The cycle through `task.bodyWriter` is broken when the exchange ends.
    let task: RequestTask
    // Loop-confined.
    var ended: Result<HTTPHeaders?, HawserError>?
    var written: Int64 = 0

    init(task: RequestTask) { self.task = task }

    /// Sends `bytes` as the next part of the body.
    public func write(_ bytes: [UInt8]) async throws {
        if bytes.isEmpty { return }
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
            self.task.eventLoop.execute {
                if let ended = self.ended {
                    cont.resume(throwing: Self.endedError(ended))
                    return
                }
                guard self.task.bodyWriter === self, case .executing(let c) = self.task.state else {
                    cont.resume(throwing: HawserError(.cancelled, "the task is no longer running"))
                    return
                }
                c.writeBodyChunk(bytes, for: self.task) { error in
                    if let error { cont.resume(throwing: error) } else { cont.resume() }
                }
            }
        }
    }

    static func endedError(_ r: Result<HTTPHeaders?, HawserError>) -> HawserError {
        switch r {
        case .failure(let e): return e
        case .success: return HawserError(.invalidRequest, "the response ended before the request body was complete")
        }
    }

    func taskEnded(_ result: Result<HTTPHeaders?, HawserError>) {
        self.ended = result
    }
}
