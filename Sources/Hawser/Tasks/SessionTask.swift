import HawserCore
import Synchronization

// The NSURLSessionTask role: a request the manager runs, with state, byte counts and metrics.
//
// A task's lifecycle is the value machine `TaskLifecycle` behind the task's lock: resume,
// suspend and cancel may come from any thread and race with each other and with the engine's
// completion, and the task still completes exactly once. The task feeds the machine and performs
// what it answers: starting attempts, waiting for the network, asking the retrier, completing.
// The machine appends its actions to the thread's LifecycleActionBuffer under the lock; the task
// performs them after the lock is released.
// The engine's events go to the task's `TaskDelegate` (the ResponseDelegate of every attempt).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a task is (NSURLSessionTaskState).
public enum SessionTaskState: Sendable, Hashable, CustomStringConvertible {
    /// Executing (or waiting for a connection, the network, an adapter, a retry delay).
    case running
    /// Created and not yet resumed, or suspended: a started task stops reading (back-pressure).
    case suspended
    /// ``SessionTask/cancel()`` was called; the completion is on its way.
    case canceling
    /// Done: the completion handler has been scheduled, ``SessionTask/error`` is final.
    case completed

    public var description: String {
        switch self {
        case .running: return "running"
        case .suspended: return "suspended"
        case .canceling: return "canceling"
        case .completed: return "completed"
        }
    }
}

/// A task of a ``SessionManager`` (NSURLSessionTask). Tasks start ``SessionTaskState/suspended``;
/// ``resume()`` starts them. Thread-safe.
///
/// A resumed task keeps its manager (and so the manager's session) alive until it completes, as
/// NSURLSession keeps its delegate: `HTTPSessionManager().get(…)` completes even when nothing else
/// holds the manager.
public class SessionTask: @unchecked Sendable, Hashable, CustomStringConvertible {
    struct State {
        var lifecycle = TaskLifecycle<RequestTask>()
        var taskDescription: String?
        var currentRequest: HTTPClientRequest?
        var response: HawserResponse?
        var error: (any Error)?
        var expectedToSend: Int64
        var expectedToReceive: Int64 = -1
        var priority: Float = 0.5
        var metrics: TaskMetrics?
        /// The per-task delegate, until the task completes (it and the task refer to each other
        /// until then).
        var delegate: TaskDelegate?
        /// The adapter's output for the attempt about to launch.
        var prepared: HTTPClientRequest?
        /// The retry-delay or connectivity-timeout timer on the event loop.
        var timer: Scheduled?
        /// The reachability observation of a task waiting for the network.
        var connectivity: (manager: NetworkReachabilityManager, observation: NetworkReachabilityManager.Observation)?

        init(currentRequest: HTTPClientRequest?, expectedToSend: Int64) {
            self.currentRequest = currentRequest
            self.expectedToSend = expectedToSend
        }
    }

    /// Unique among the tasks of one manager (NSURLSessionTask.taskIdentifier).
    public let taskIdentifier: Int
    /// The request the task was created with.
    public let originalRequest: HTTPClientRequest?
    let locked: Mutex<State>
    /// Request body bytes written; response body bytes received (after decoding).
    let sentBytes = Atomic<Int64>(0)
    let receivedBytes = Atomic<Int64>(0)
    /// The progress objects, made on first use (most tasks never have one); `progressMade` says
    /// whether either was, so the engine's events pay one relaxed load when none was.
    private let uploadProgressRef = AtomicLazyReference<TransferProgress>()
    private let downloadProgressRef = AtomicLazyReference<TransferProgress>()
    private let progressMade = Atomic<Bool>(false)
    /// What the task needs of its manager (strongly: a manager's core is never referenced weakly,
    /// so retaining it stays cheap).
    let core: ManagerCore
    /// The manager, for a task that starts: the delegate then holds it until the task completes.
    var manager: SessionManager? { self.core.owner }
    /// A problem found when the task was created (unreadable upload file, invalid resume data);
    /// the task fails with it when resumed, instead of the creating call trapping. Set before
    /// the task is resumed.
    var preflightError: (any Error)?
    /// Makes the request body again when a 307/308 redirect must resend a streamed body and no
    /// ``SessionManager/taskNeedNewBodyStream`` block is set (a multipart form can be produced
    /// again; an arbitrary stream cannot). Set before the task is resumed.
    var replayableBody: (@Sendable () -> RequestBody)?

    init(identifier: Int, request: HTTPClientRequest?, core: ManagerCore) {
        self.taskIdentifier = identifier
        self.originalRequest = request
        self.core = core
        self.locked = Mutex(
            State(currentRequest: request, expectedToSend: request?.body.map { $0.knownLength ?? -1 } ?? 0)
        )
    }

    // MARK: - Properties

    /// A description the caller may set (NSURLSessionTask.taskDescription).
    public var taskDescription: String? {
        get { self.locked.withLock { $0.taskDescription } }
        set { self.locked.withLock { $0.taskDescription = newValue } }
    }
    /// The request of the current attempt: after adapters, with resume headers, and the target of
    /// the last redirect followed (NSURLSessionTask.currentRequest).
    public var currentRequest: HTTPClientRequest? { self.locked.withLock { $0.currentRequest } }
    /// The final response head, once it arrived.
    public var response: HawserResponse? { self.locked.withLock { $0.response } }
    /// The task's state.
    public var state: SessionTaskState { self.locked.withLock { $0.lifecycle.state } }
    /// Why the task failed, once it completed (nil on success).
    public var error: (any Error)? { self.locked.withLock { $0.error } }
    /// Request body bytes written to the socket.
    public var countOfBytesSent: Int64 { self.sentBytes.load(ordering: .relaxed) }
    /// Response body bytes received (after chunked framing and content decoding).
    public var countOfBytesReceived: Int64 { self.receivedBytes.load(ordering: .relaxed) }
    /// Request body size; -1 for a stream of unknown length (sent chunked).
    public var countOfBytesExpectedToSend: Int64 { self.locked.withLock { $0.expectedToSend } }
    /// The response's Content-Length; -1 while unknown (NSURLSessionTransferSizeUnknown).
    public var countOfBytesExpectedToReceive: Int64 { self.locked.withLock { $0.expectedToReceive } }
    /// A hint in 0…1 (NSURLSessionTaskPriority). Stored and reported; the engine does not reorder
    /// its queue by it.
    public var priority: Float {
        get { self.locked.withLock { $0.priority } }
        set { self.locked.withLock { $0.priority = min(1, max(0, newValue.isNaN ? 0.5 : newValue)) } }
    }
    /// The timings of the last attempt, once the task completed.
    public var metrics: TaskMetrics? { self.locked.withLock { $0.metrics } }
    /// How many times the task's retrier sent it again.
    public var retryCount: Int { self.locked.withLock { $0.lifecycle.retryCount } }

    public var description: String {
        let c = self.locked.withLock { ($0.lifecycle.state, $0.currentRequest) }
        let what = c.1.map { "\($0.method) \($0.url.absoluteString)" } ?? "no request"
        return "\(type(of: self))(\(self.taskIdentifier), \(c.0), \(what))"
    }

    /// A curl command line that sends the task's current request.
    public var curlDescription: String {
        self.currentRequest?.curlDescription ?? "curl  # the task has no request"
    }

    public static func == (a: SessionTask, b: SessionTask) -> Bool { a === b }
    public func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }

    // MARK: - Progress

    /// The upload progress object, made on first use with the counts so far.
    var uploadProgress: TransferProgress {
        if let p = self.uploadProgressRef.load() { return p }
        let made = TransferProgress(totalUnitCount: self.countOfBytesExpectedToSend)
        made.set(completed: self.countOfBytesSent, total: self.countOfBytesExpectedToSend)
        self.wire(made)
        defer { self.progressMade.store(true, ordering: .releasing) }
        return self.uploadProgressRef.storeIfNil(made)
    }

    /// The download progress object, made on first use with the counts so far.
    var downloadProgress: TransferProgress {
        if let p = self.downloadProgressRef.load() { return p }
        let made = TransferProgress()
        made.set(completed: self.countOfBytesReceived, total: self.countOfBytesExpectedToReceive)
        self.wire(made)
        defer { self.progressMade.store(true, ordering: .releasing) }
        return self.downloadProgressRef.storeIfNil(made)
    }

    /// The upload progress if one was made (a relaxed load when none was).
    @inline(__always)
    var existingUploadProgress: TransferProgress? {
        self.progressMade.load(ordering: .acquiring) ? self.uploadProgressRef.load() : nil
    }

    /// The download progress if one was made.
    @inline(__always)
    var existingDownloadProgress: TransferProgress? {
        self.progressMade.load(ordering: .acquiring) ? self.downloadProgressRef.load() : nil
    }

    /// NSProgress's cancel / pause / resume handlers, wired to the task.
    private func wire(_ p: TransferProgress) {
        p.cancellationHandler = { [weak self] in self?.cancel() }
        p.pausingHandler = { [weak self] in self?.suspend() }
        p.resumingHandler = { [weak self] in self?.resume() }
        switch self.locked.withLock({ ($0.lifecycle.isCompleted, $0.error == nil) }) {
        case (true, true): p.markFinished()
        case (true, false): p.markEnded()
        case (false, _): break
        }
    }

    // MARK: - Control

    /// Starts a task that was never started, or continues a suspended one (reading resumes).
    /// Does nothing to a running, canceling or completed task.
    public func resume() {
        let core = self.core
        let networkDown = core.mustWaitForConnectivity
        let needsPreparation = core.needsPreparation
        let manager = self.manager
        let buffer = LifecycleActionBuffer.current
        let start = buffer.actions.count
        let changed = self.locked.withLock { s -> Bool in
            guard let manager else {
                // The manager is being released: its deinit cancels this task.
                return s.lifecycle.cancel(
                    HawserError(
                        .cancelled,
                        "the SessionManager of this task was released",
                        url: self.originalRequest?.url
                    ),
                    into: &buffer.actions
                )
            }
            if case .idle = s.lifecycle.phase {
                // In flight from now on: the task keeps its manager until it completes.
                s.delegate?.manager = manager
            }
            return s.lifecycle.resume(
                networkDown: networkDown,
                needsPreparation: needsPreparation,
                into: &buffer.actions
            )
        }
        guard changed else { return }
        let completes = buffer.actions[start...].contains {
            if case .complete = $0 { return true }
            return false
        }
        if !completes { core.channel.emit { $0.taskDidResume(self) } }
        self.performActions(buffer, from: start)
    }

    /// Suspends a running task: it stops reading the response, and TCP's flow control holds the
    /// server back until ``resume()``. The idle timeout does not run while suspended.
    public func suspend() {
        let (changed, buffer, start) = self.record { $0.suspend(into: &$1) }
        guard changed else { return }
        self.performActions(buffer, from: start)
        self.core.channel.emit { $0.taskDidSuspend(self) }
    }

    /// Cancels the task. It completes (once) with a `HawserError` of code `.cancelled`
    /// (NSURLErrorCancelled, -999), whatever it was doing. Safe from any thread; idempotent.
    public func cancel() {
        self.cancel(with: HawserError(.cancelled, "the task was cancelled", url: self.originalRequest?.url))
    }

    func cancel(with error: HawserError) {
        let (changed, buffer, start) = self.record { $0.cancel(error, into: &$1) }
        guard changed else { return }
        self.core.channel.emit { $0.taskDidCancel(self) }
        self.performActions(buffer, from: start)
    }

    /// Feeds one input to the lifecycle under the lock and performs its actions.
    func feed(_ input: (inout TaskLifecycle<RequestTask>, inout [TaskLifecycle<RequestTask>.Action]) -> Void) {
        let (_, buffer, start) = self.record {
            input(&$0, &$1)
            return true
        }
        self.performActions(buffer, from: start)
    }

    /// Runs `input` under the lock, the lifecycle's actions going to the thread's buffer from
    /// `start` on; the caller performs them (``performActions(_:from:)``) after looking at them.
    func record(
        _ input: (inout TaskLifecycle<RequestTask>, inout [TaskLifecycle<RequestTask>.Action]) -> Bool
    ) -> (result: Bool, buffer: LifecycleActionBuffer, start: Int) {
        let buffer = LifecycleActionBuffer.current
        let start = buffer.actions.count
        let result = self.locked.withLock { input(&$0.lifecycle, &buffer.actions) }
        return (result, buffer, start)
    }

    // MARK: - Performing the lifecycle's actions

    /// Performs the actions recorded from `start` on, in order, then removes them. An action that
    /// feeds another input (on this thread) has that input's actions run and removed before the
    /// next one here.
    func performActions(_ buffer: LifecycleActionBuffer, from start: Int) {
        var i = start
        while i < buffer.actions.count {
            let action = buffer.actions[i]
            i += 1
            self.perform(action)
        }
        buffer.removeActions(from: start)
    }

    private func perform(_ action: TaskLifecycle<RequestTask>.Action) {
        switch action {
        case .waitForConnectivity(let attempt):
            self.waitForConnectivity(attempt: attempt)
        case .prepare(let attempt):
            self.prepare(attempt: attempt)
        case .launch(let attempt):
            self.launch(attempt: attempt)
        case .resumeReading(let engine):
            // A download whose file writes are behind resumes when they catch up.
            if !self.readingHeldBack { engine.resumeReading() }
        case .pauseReading(let engine):
            engine.pauseReading()
        case .cancelEngine(let engine, let error):
            engine.fail(with: error as? HawserError ?? HawserError(.cancelled, "\(error)", underlying: error))
        case .restart(let attempt):
            self.willRestart()
            // Not from inside the engine's completion callback: the pool is mid-notification.
            if let loop = self.delegate?.eventLoop {
                loop.execute { self.feedRestart(attempt: attempt) }
            } else {
                self.feedRestart(attempt: attempt)
            }
        case .askRetrier(let attempt, let error):
            self.askRetrier(attempt: attempt, error: error)
        case .scheduleRetry(let attempt, let delay):
            self.scheduleRetry(attempt: attempt, delay: delay)
        case .complete(let error):
            self.finish(error: error)
        }
    }

    var delegate: TaskDelegate? { self.locked.withLock { $0.delegate } }

    private func feedRestart(attempt: Int) {
        let networkDown = self.core.mustWaitForConnectivity
        let needsPreparation = self.core.needsPreparation
        self.feed {
            $0.restartDue(attempt: attempt, networkDown: networkDown, needsPreparation: needsPreparation, into: &$1)
        }
    }

    /// The request an attempt starts from: the original one (a retry replays it, so the adapter
    /// runs again, e.g. with a refreshed token).
    func requestForAttempt() -> HTTPClientRequest? { self.originalRequest }

    /// Runs the interceptor's adapter for `attempt` on the session's event loop (adapters are
    /// async; they must not block), then feeds the result.
    private func prepare(attempt: Int) {
        let core = self.core
        guard let adapter = core.interceptor, let request = self.requestForAttempt() else {
            self.feed { $0.prepared(attempt: attempt, into: &$1) }
            return
        }
        let loop = core.registry.withLock { $0.session.eventLoop }
        Task(executorPreference: loop) {
            do {
                let adapted = try await adapter.adapt(request, for: self)
                core.channel.emit { $0.task(self, didAdapt: request, to: adapted) }
                let buffer = LifecycleActionBuffer.current
                let start = buffer.actions.count
                self.locked.withLock { s in
                    s.prepared = adapted
                    s.lifecycle.prepared(attempt: attempt, into: &buffer.actions)
                }
                self.performActions(buffer, from: start)
            } catch {
                self.feed {
                    $0.preparationFailed(
                        attempt: attempt,
                        error: SessionManagerError.adapterFailed(underlying: error),
                        into: &$1
                    )
                }
            }
        }
    }

    /// Hands attempt `attempt` to the engine.
    private func launch(attempt: Int) {
        let fail: (any Error) -> Void = { e in self.feed { $0.preparationFailed(attempt: attempt, error: e, into: &$1) }
        }
        if let e = self.preflightError { return fail(e) }
        let (delegate, prepared) = self.locked.withLock { s -> (TaskDelegate?, HTTPClientRequest?) in
            defer { s.prepared = nil }
            return (s.delegate, s.prepared)
        }
        guard let delegate else {
            return fail(HawserError(.cancelled, "the task's delegate is gone", url: self.originalRequest?.url))
        }
        guard let original = prepared ?? self.requestForAttempt() else { return fail(SessionManagerError.noRequest) }
        let session: Session
        do {
            session = try self.core.activeSession()
        } catch {
            return fail(error)
        }
        let request = self.prepareForAttempt(original)
        if attempt > 1 || prepared != nil || self.changesRequestForAttempts {
            // The first attempt of a task without an adapter sends the request it was made with,
            // which is already its currentRequest.
            let expected = request.body.map { $0.knownLength ?? -1 } ?? 0
            self.locked.withLock { s in
                s.currentRequest = request
                s.expectedToSend = expected
            }
        }
        delegate.startAttempt(attempt, on: session.eventLoop)
        let engine = session.execute(request, delegate: delegate)
        self.feed { $0.engineStarted(attempt: attempt, engine: engine, into: &$1) }
    }

    /// Waits for the network before `attempt`: observes the reachability manager first, then
    /// looks (so a change between the two is not missed), and arms the resource timeout on the
    /// event loop.
    private func waitForConnectivity(attempt: Int) {
        let core = self.core
        guard let reachability = core.existingReachabilityManager else {
            let needsPreparation = core.needsPreparation
            self.feed { $0.connectivityReturned(attempt: attempt, needsPreparation: needsPreparation, into: &$1) }
            return
        }
        let returned: @Sendable () -> Void = { [weak self] in
            guard let self else { return }
            let needsPreparation = self.core.needsPreparation
            self.feed { $0.connectivityReturned(attempt: attempt, needsPreparation: needsPreparation, into: &$1) }
        }
        let observation = reachability.addObserver { change in
            if change.status != .notReachable { returned() }
        }
        let seconds = self.originalRequest?.timeoutIntervalForResource ?? core.configuration.timeoutIntervalForResource
        let timer = core.registry.withLock { $0.session.eventLoop }.schedule(in: Self.nanoseconds(seconds)) {
            [weak self] in
            guard let self else { return }
            let error = HawserError(
                .resourceTimeout,
                "the network stayed unreachable for \(seconds) s (waitsForConnectivity)",
                url: self.originalRequest?.url
            )
            self.feed { $0.connectivityTimedOut(attempt: attempt, error: error, into: &$1) }
        }
        let stillWaiting = self.locked.withLock { s -> Bool in
            guard case .waitingForConnectivity(let a) = s.lifecycle.phase, a == attempt else { return false }
            s.connectivity = (reachability, observation)
            s.timer = timer
            return true
        }
        guard stillWaiting else {
            // Cancelled (or already back) meanwhile.
            reachability.removeObserver(observation)
            timer.cancel()
            return
        }
        core.channel.emit { $0.taskIsWaitingForConnectivity(self) }
        if reachability.networkReachabilityStatus != .notReachable { returned() }
    }

    /// Asks the retrier about `attempt`, on the session's event loop.
    private func askRetrier(attempt: Int, error: (any Error)?) {
        let core = self.core
        guard let retrier = core.interceptor, let request = self.currentRequest else {
            self.feed {
                $0.retryDecided(attempt: attempt, delay: nil, networkDown: false, needsPreparation: false, into: &$1)
            }
            return
        }
        let response = self.response
        let hawserError = error as? HawserError
        let retryCount = self.retryCount
        Task(executorPreference: core.registry.withLock { $0.session.eventLoop }) {
            let decision = await retrier.retry(
                self,
                request: request,
                response: response,
                error: hawserError,
                retryCount: retryCount
            )
            let delay: Double?
            switch decision {
            case .doNotRetry: delay = nil
            case .retry: delay = 0
            case .retryWithDelay(let d): delay = max(0, min(d, 3600))
            }
            if let delay { core.channel.emit { $0.task(self, willRetryAfter: delay, error: hawserError) } }
            let networkDown = core.mustWaitForConnectivity
            let needsPreparation = core.needsPreparation
            let buffer = LifecycleActionBuffer.current
            let start = buffer.actions.count
            self.locked.withLock { s in
                s.lifecycle.retryDecided(
                    attempt: attempt,
                    delay: delay,
                    networkDown: networkDown,
                    needsPreparation: needsPreparation,
                    into: &buffer.actions
                )
                switch buffer.actions[start...].first {
                case nil, .complete?: break
                // Another attempt follows: its delegate drops what this one gathered, under the
                // lock, so that a cancel completing the task from another thread comes after.
                default: s.delegate?.resetForRetry()
                }
            }
            switch buffer.actions[start...].first {
            case nil, .complete?: break
            default: self.resetForRetry()  // another attempt follows: drop what this one gathered
            }
            self.performActions(buffer, from: start)
        }
    }

    /// Schedules the retry of `attempt` on the session's event loop.
    private func scheduleRetry(attempt: Int, delay: Double) {
        let timer = self.core.registry.withLock { $0.session.eventLoop }.schedule(in: Self.nanoseconds(delay)) {
            [weak self] in
            guard let self else { return }
            let networkDown = self.core.mustWaitForConnectivity
            let needsPreparation = self.core.needsPreparation
            self.feed {
                $0.retryDelayElapsed(
                    attempt: attempt,
                    networkDown: networkDown,
                    needsPreparation: needsPreparation,
                    into: &$1
                )
            }
        }
        let keep = self.locked.withLock { s -> Bool in
            guard case .retryDelay(let a, _) = s.lifecycle.phase, a == attempt else { return false }
            s.timer = timer
            return true
        }
        if !keep { timer.cancel() }
    }

    static func nanoseconds(_ seconds: Double) -> UInt64 {
        if !(seconds > 0) { return 0 }
        return UInt64(min(seconds, 365 * 24 * 3600) * 1e9)
    }

    // MARK: - Hooks for the task kinds

    /// The request actually sent for an attempt (a download adds its resume headers).
    func prepareForAttempt(_ request: HTTPClientRequest) -> HTTPClientRequest { request }

    /// Whether ``prepareForAttempt(_:)`` may change the request (a download's does).
    var changesRequestForAttempts: Bool { false }

    /// Whether a retrier may send the task again (a streamed upload whose producer already ran
    /// cannot be replayed).
    var canRetry: Bool {
        if case .stream? = self.originalRequest?.body, self.replayableBody == nil { return false }
        return true
    }

    /// The attempt that just completed must be sent again from the start (a download's 416).
    func needsRestart() -> Bool { false }

    /// Before a restart (a download forgets its resume data).
    func willRestart() {}

    /// Drops what a failed attempt accumulated before the retry.
    func resetForRetry() {
        self.sentBytes.store(0, ordering: .relaxed)
        self.receivedBytes.store(0, ordering: .relaxed)
        self.locked.withLock { $0.response = nil }
        self.existingUploadProgress?.reset(total: self.countOfBytesExpectedToSend)
        self.existingDownloadProgress?.reset(total: -1)
    }

    /// Subclass hook before the delegate finishes (a download closes its file, produces resume data).
    func willComplete(error: (any Error)?) -> (any Error)? { error }

    /// Whether the task itself holds its reading back (a download waiting for its file writes),
    /// so that `resume()` leaves the reading paused.
    var readingHeldBack: Bool { false }

    /// Whether `suspend()` holds the task (and its reading) now.
    var isSuspendedByCaller: Bool { self.locked.withLock { $0.lifecycle.state == .suspended } }

    // MARK: - Completion

    /// The one place a task completes; the lifecycle answered `.complete`, so this runs once.
    private func finish(error: (any Error)?) {
        let (delegate, timer, connectivity, metrics) = self.locked.withLock { s in
            s.error = error
            defer {
                s.delegate = nil
                s.timer = nil
                s.connectivity = nil
            }
            return (s.delegate, s.timer, s.connectivity, s.metrics)
        }
        timer?.cancel()
        if let c = connectivity { c.manager.removeObserver(c.observation) }
        let core = self.core
        let invalidationDone = core.unregister(self)
        if core.channel.isActive {
            for m in core.channel.all {
                if let metrics { m.task(self, didFinishCollecting: metrics) }
                m.task(self, didCompleteWith: error)
            }
        }
        let finalError = self.willComplete(error: error)
        if finalError == nil {
            self.existingUploadProgress?.markFinished()
            self.existingDownloadProgress?.markFinished()
        } else {
            self.existingUploadProgress?.markEnded()
            self.existingDownloadProgress?.markEnded()
        }
        delegate?.finish(self, error: finalError, metrics: metrics)
        if invalidationDone { core.finishInvalidation() }
    }
}

/// A task that receives the response into memory (NSURLSessionDataTask).
public class DataTask: SessionTask, @unchecked Sendable {}

/// A data task whose request has a body: bytes, a file, or a stream (NSURLSessionUploadTask).
public final class UploadTask: DataTask, @unchecked Sendable {}
