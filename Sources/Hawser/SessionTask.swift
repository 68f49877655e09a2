// The NSURLSessionTask role: a request the manager runs, with state, byte counts and metrics.
//
// A task is driven by one small state machine (`Phase`) behind a lock, so resume, suspend and
// cancel may come from any thread, race with each other and with the engine's completion, and the
// task still completes exactly once.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import HawserCore

/// Where a task is (NSURLSessionTaskState).
public enum SessionTaskState: Sendable, Hashable, CustomStringConvertible {
    /// Executing (or waiting for a connection, an adapter, a retry delay).
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
public class SessionTask: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// Lifecycle of the attempts behind the task.
    enum Phase {
        /// Never resumed.
        case idle
        /// Between attempts: running the adapter, waiting for a retry decision or delay.
        case preparing
        /// `Session.execute` is being called for attempt `n`.
        case launching(attempt: Int)
        /// Attempt `n` runs on the engine.
        case engine(RequestTask, attempt: Int)
        /// The completion has been decided. Final.
        case done
    }

    struct Core {
        var state: SessionTaskState = .suspended
        var phase: Phase = .idle
        var attempt = 0
        var cancelPending = false
        var cancelError: HawserError?
        var taskDescription: String?
        var currentRequest: HTTPClientRequest?
        var response: HTTPResponse?
        var error: (any Error)?
        var sent: Int64 = 0
        var received: Int64 = 0
        var expectedToSend: Int64 = 0
        var expectedToReceive: Int64 = -1
        var priority: Float = 0.5
        var metrics: TaskMetrics?
        var retryCount = 0
    }

    /// Unique among the tasks of one manager (NSURLSessionTask.taskIdentifier).
    public let taskIdentifier: Int
    /// The request the task was created with.
    public let originalRequest: HTTPClientRequest?
    let core: Locked<Core>
    weak var manager: SessionManager?
    let hub: EventHub
    /// The per-task delegate; cleared at completion (it and the task refer to each other until then).
    let delegateRef = Locked<TaskDelegate?>(nil)
    /// Set when a data task became a download task: the engine's events go there from then on.
    let convertedTo = Locked<DownloadTask?>(nil)
    /// A problem found when the task was created (unreadable upload file, invalid resume data);
    /// the task fails with it when resumed, instead of the creating call trapping.
    var preflightError: (any Error)?
    /// Makes the request body again when a 307/308 redirect must resend a streamed body and no
    /// ``SessionManager/taskNeedNewBodyStream`` block is set (a multipart form can be produced
    /// again; an arbitrary stream cannot). Set before the task is resumed.
    var replayableBody: (@Sendable () -> RequestBody)?

    init(identifier: Int, request: HTTPClientRequest?, manager: SessionManager?, hub: EventHub) {
        self.taskIdentifier = identifier
        self.originalRequest = request
        self.manager = manager
        self.hub = hub
        var core = Core()
        core.currentRequest = request
        core.expectedToSend = request?.body?.knownLength ?? 0
        self.core = Locked(core)
    }

    // MARK: - Properties

    /// A description the caller may set (NSURLSessionTask.taskDescription).
    public var taskDescription: String? {
        get { self.core.withLock { $0.taskDescription } }
        set { self.core.withLock { $0.taskDescription = newValue } }
    }
    /// The request of the current attempt: after adapters, with resume headers, and the target of
    /// the last redirect followed (NSURLSessionTask.currentRequest).
    public var currentRequest: HTTPClientRequest? { self.core.withLock { $0.currentRequest } }
    /// The final response head, once it arrived.
    public var response: HTTPResponse? { self.core.withLock { $0.response } }
    /// The task's state.
    public var state: SessionTaskState { self.core.withLock { $0.state } }
    /// Why the task failed, once it completed (nil on success).
    public var error: (any Error)? { self.core.withLock { $0.error } }
    /// Request body bytes written to the socket.
    public var countOfBytesSent: Int64 { self.core.withLock { $0.sent } }
    /// Response body bytes received (after chunked framing and content decoding).
    public var countOfBytesReceived: Int64 { self.core.withLock { $0.received } }
    /// Request body size; -1 for a stream of unknown length (sent chunked).
    public var countOfBytesExpectedToSend: Int64 { self.core.withLock { $0.expectedToSend } }
    /// The response's Content-Length; -1 while unknown (NSURLSessionTransferSizeUnknown).
    public var countOfBytesExpectedToReceive: Int64 { self.core.withLock { $0.expectedToReceive } }
    /// A hint in 0…1 (NSURLSessionTaskPriority). Stored and reported; the engine does not reorder
    /// its queue by it.
    public var priority: Float {
        get { self.core.withLock { $0.priority } }
        set { self.core.withLock { $0.priority = min(1, max(0, newValue.isNaN ? 0.5 : newValue)) } }
    }
    /// The timings of the last attempt, once the task completed.
    public var metrics: TaskMetrics? { self.core.withLock { $0.metrics } }
    /// How many times the task's retrier sent it again.
    public var retryCount: Int { self.core.withLock { $0.retryCount } }

    public var description: String {
        let c = self.core.withLock { ($0.state, $0.currentRequest) }
        let what = c.1.map { "\($0.method) \($0.url.absoluteString)" } ?? "no request"
        return "\(type(of: self))(\(self.taskIdentifier), \(c.0), \(what))"
    }

    /// A curl command line that sends the task's current request.
    public var curlDescription: String {
        self.currentRequest?.curlDescription ?? "curl  # the task has no request"
    }

    public static func == (a: SessionTask, b: SessionTask) -> Bool { a === b }
    public func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }

    // MARK: - Control

    /// Starts a task that was never started, or continues a suspended one (reading resumes).
    /// Does nothing to a running, canceling or completed task.
    public func resume() {
        enum Action { case none, start, continueReading(RequestTask), resumedOnly }
        let action = self.core.withLock { c -> Action in
            guard c.state == .suspended else { return .none }
            c.state = .running
            switch c.phase {
            case .idle:
                c.phase = .preparing
                return .start
            case .engine(let t, _):
                return .continueReading(t)
            default:
                return .resumedOnly
            }
        }
        switch action {
        case .none:
            return
        case .start:
            self.emitResume()
            self.startWhenConnected()
        case .continueReading(let t):
            self.emitResume()
            t.resumeReading()
        case .resumedOnly:
            self.emitResume()
        }
    }

    /// Suspends a running task: it stops reading the response, and TCP's flow control holds the
    /// server back until ``resume()``. The idle timeout does not run while suspended.
    public func suspend() {
        let engine = self.core.withLock { c -> (Bool, RequestTask?) in
            guard c.state == .running else { return (false, nil) }
            c.state = .suspended
            if case .engine(let t, _) = c.phase { return (true, t) }
            return (true, nil)
        }
        guard engine.0 else { return }
        engine.1?.pauseReading()
        self.hub.post(.taskDidSuspend(self))
        self.manager?.monitors.forEach { $0.taskDidSuspend(self) }
    }

    /// Cancels the task. It completes (once) with a `HawserError` of code `.cancelled`
    /// (NSURLErrorCancelled, -999), whatever it was doing. Safe from any thread; idempotent.
    public func cancel() {
        self.cancel(with: HawserError(.cancelled, "the task was cancelled", url: self.originalRequest?.url))
    }

    func cancel(with error: HawserError) {
        enum Action { case none, completeNow, engine(RequestTask) }
        let action = self.core.withLock { c -> Action in
            if c.state == .completed || c.state == .canceling { return .none }
            if case .done = c.phase { return .none }
            c.state = .canceling
            c.cancelError = error
            switch c.phase {
            case .idle, .preparing:
                c.phase = .done
                return .completeNow
            case .launching:
                c.cancelPending = true
                return .none
            case .engine(let t, _):
                return .engine(t)
            case .done:
                return .none
            }
        }
        switch action {
        case .none: return
        case .completeNow:
            self.manager?.monitors.forEach { $0.taskDidCancel(self) }
            self.complete(error: error, metrics: nil)
        case .engine(let t):
            self.manager?.monitors.forEach { $0.taskDidCancel(self) }
            t.fail(with: error)
        }
    }

    private func emitResume() {
        self.hub.post(.taskDidResume(self))
        self.manager?.monitors.forEach { $0.taskDidResume(self) }
    }

    // MARK: - Attempts

    /// Starts the first attempt, after waiting for the network when the manager
    /// ``SessionManager/waitsForConnectivity`` and its reachability manager reports it not
    /// reachable. The task stays in phase `.preparing` (state `.running`) while it waits, so a
    /// cancel ends it at once; the wait ends when the status turns reachable or unknown, or fails
    /// the task with `.resourceTimeout` after the configuration's `timeoutIntervalForResource`.
    private func startWhenConnected() {
        guard let manager = self.manager, manager.waitsForConnectivity,
              let reachability = manager.existingReachabilityManager else {
            self.startAttempt(self.originalRequest)
            return
        }
        // Observe first, then look: a change between the two is not missed.
        let fired = Locked(false)
        let token = Locked<NetworkReachabilityManager.Observation?>(nil)
        let timer = Locked<DispatchWorkItem?>(nil)
        let stopObserving: @Sendable () -> Void = { [weak reachability] in
            if let t = token.withLock({ t -> NetworkReachabilityManager.Observation? in defer { t = nil }; return t }) {
                reachability?.removeObserver(t)
            }
        }
        let finish: @Sendable (_ timedOut: Bool) -> Void = { [weak self] timedOut in
            let first = fired.withLock { f -> Bool in defer { f = true }; return !f }
            guard first else { return }
            timer.withLock { $0 }?.cancel()
            stopObserving()
            guard let self else { return }
            if timedOut {
                let seconds = self.manager?.configuration.timeoutIntervalForResource ?? 0
                self.finishPreparing(error: HawserError(.resourceTimeout, "the network stayed unreachable for \(seconds) s (waitsForConnectivity)",
                                                        url: self.originalRequest?.url))
            } else {
                self.startAttempt(self.originalRequest)
            }
        }
        let observation = reachability.addObserver { change in
            if change.status != .notReachable { finish(false) }
        }
        token.withLock { $0 = observation }
        if fired.withLock({ $0 }) { stopObserving() }
        guard reachability.networkReachabilityStatus == .notReachable else {
            finish(false)
            return
        }
        manager.monitors.forEach { $0.taskIsWaitingForConnectivity(self) }
        let limit = manager.configuration.timeoutIntervalForResource
        let item = DispatchWorkItem { finish(true) }
        timer.withLock { $0 = item }
        DispatchQueue.global().asyncAfter(deadline: .now() + min(limit, 365 * 24 * 3600), execute: item)
    }

    /// Runs the adapter (if any) on `request`, then launches it. Called in phase `.preparing`.
    func startAttempt(_ request: HTTPClientRequest?) {
        if let e = self.preflightError {
            self.finishPreparing(error: e)
            return
        }
        guard let request else {
            self.finishPreparing(error: SessionManagerError.noRequest)
            return
        }
        guard let manager = self.manager else {
            self.finishPreparing(error: HawserError(.cancelled, "the SessionManager of this task was released", url: request.url))
            return
        }
        if let adapter = manager.interceptor {
            Self.adaptThenLaunch(self, adapter: adapter, request: request)
        } else {
            self.launch(request)
        }
    }

    private static func adaptThenLaunch(_ task: SessionTask, adapter: any RequestInterceptor, request: HTTPClientRequest) {
        Task.detached {
            do {
                let adapted = try await adapter.adapt(request, for: task)
                task.manager?.monitors.forEach { $0.task(task, didAdapt: request, to: adapted) }
                task.launch(adapted)
            } catch {
                task.finishPreparing(error: SessionManagerError.adapterFailed(underlying: error))
            }
        }
    }

    /// Ends a task that is between attempts with `error` (unless a cancel got there first).
    func finishPreparing(error: any Error) {
        let proceed = self.core.withLock { c -> Bool in
            guard case .preparing = c.phase else { return false }
            c.phase = .done
            return true
        }
        if proceed { self.complete(error: error, metrics: nil) }
    }

    /// Hands `request` to the engine as the next attempt.
    func launch(_ original: HTTPClientRequest) {
        let request = self.prepareForAttempt(original)
        guard let manager = self.manager else {
            self.finishPreparing(error: HawserError(.cancelled, "the SessionManager of this task was released", url: request.url))
            return
        }
        let session: Session
        do {
            session = try manager.activeSession()
        } catch {
            self.finishPreparing(error: error)
            return
        }
        let attempt = self.core.withLock { c -> Int? in
            guard case .preparing = c.phase else { return nil }
            c.attempt += 1
            c.phase = .launching(attempt: c.attempt)
            c.currentRequest = request
            c.expectedToSend = request.body?.knownLength ?? (request.body == nil ? 0 : -1)
            return c.attempt
        }
        guard let attempt else { return }
        let bridge = EngineBridge(target: self, attempt: attempt)
        let engineTask = session.execute(request, delegate: bridge)
        let after = self.core.withLock { c -> (cancel: HawserError?, pause: Bool) in
            guard case .launching(let a) = c.phase, a == attempt else { return (nil, false) }
            c.phase = .engine(engineTask, attempt: attempt)
            return (c.cancelPending ? (c.cancelError ?? HawserError(.cancelled, "the task was cancelled")) : nil,
                    c.state == .suspended)
        }
        if let e = after.cancel { engineTask.fail(with: e) }
        else if after.pause { engineTask.pauseReading() }
    }

    /// The request actually sent for an attempt (a download adds its resume headers).
    func prepareForAttempt(_ request: HTTPClientRequest) -> HTTPClientRequest { request }

    /// Whether events from `attempt` still concern this task.
    func isCurrent(_ attempt: Int) -> Bool {
        self.core.withLock { c in
            switch c.phase {
            case .launching(let a), .engine(_, let a): return a == attempt
            default: return false
            }
        }
    }

    // MARK: - Engine events (on the event loop)

    func engineDidReceiveHead(_ head: HTTPResponseHead, engineTask: RequestTask, attempt: Int, url: URL) {
        let response = HTTPResponse(url: url, statusCode: head.status, headers: head.headers, version: head.version)
        self.core.withLock { c in
            c.response = response
            c.received = 0
            c.expectedToReceive = head.headers.contentLength.map(Int64.init) ?? -1
        }
        self.manager?.monitors.forEach { $0.task(self, didReceive: response) }
        self.didReceiveResponse(response, engineTask: engineTask, attempt: attempt)
    }

    /// Subclass hook: the final head arrived.
    func didReceiveResponse(_ response: HTTPResponse, engineTask: RequestTask, attempt: Int) {}

    func engineDidReceiveBody(_ bytes: UnsafeRawBufferPointer, engineTask: RequestTask) {
        let (received, expected) = self.core.withLock { c -> (Int64, Int64) in
            c.received += Int64(bytes.count)
            return (c.received, c.expectedToReceive)
        }
        self.manager?.monitors.forEach { $0.task(self, didReceiveBytes: bytes.count) }
        self.didReceiveBody(bytes, received: received, expected: expected, engineTask: engineTask)
    }

    /// Subclass hook: body bytes arrived.
    func didReceiveBody(_ bytes: UnsafeRawBufferPointer, received: Int64, expected: Int64, engineTask: RequestTask) {}

    func engineDidSendBody(total: Int64, expected: Int64?) {
        let previous = self.core.withLock { c -> Int64 in
            let p = c.sent
            c.sent = total
            if let expected { c.expectedToSend = expected }
            return p
        }
        let expectedValue = expected ?? -1
        self.delegate?.uploadProgress.set(completed: total, total: expectedValue)
        if let block = self.manager?.hooks.withLock({ $0.taskDidSendBodyData }) {
            block(self, total - previous, total, expectedValue)
        }
        self.manager?.monitors.forEach { $0.task(self, didSendBodyBytes: total, expected: expectedValue) }
    }

    func engineDidComplete(_ result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics, attempt: Int) {
        let error: HawserError? = { if case .failure(let e) = result { return e }; return nil }()
        let retrier = self.manager?.interceptor
        enum Next { case ignore, complete, completeCancelled(HawserError), askRetrier(HTTPClientRequest?, HTTPResponse?), restart }
        let next = self.core.withLock { c -> Next in
            switch c.phase {
            case .launching(let a), .engine(_, let a):
                guard a == attempt else { return .ignore }
            default:
                return .ignore
            }
            c.metrics = metrics
            if c.state == .canceling || c.cancelPending {
                // Cancelled before the engine heard of it (e.g. while launching): the task ends
                // cancelled even if the response was complete.
                c.phase = .done
                return .completeCancelled(c.cancelError ?? HawserError(.cancelled, "the task was cancelled"))
            }
            if error == nil, self.needsRestart() {
                c.phase = .preparing
                return .restart
            }
            let worthAsking = error != nil || (c.response.map { $0.statusCode >= 400 } ?? false)
            if retrier != nil, worthAsking, self.canRetry {
                c.phase = .preparing
                return .askRetrier(c.currentRequest, c.response)
            }
            c.phase = .done
            return .complete
        }
        switch next {
        case .ignore:
            return
        case .completeCancelled(let e):
            self.complete(error: e, metrics: metrics)
        case .complete:
            let cancelError = self.core.withLock { $0.cancelError }
            self.complete(error: error.map { e -> any Error in
                if e.code == .cancelled, let cancelError { return cancelError }
                return e
            }, metrics: metrics)
        case .restart:
            // Not from inside the engine's callback: the pool is mid-notification.
            DispatchQueue.global().async { self.launch(self.restartRequest()) }
        case .askRetrier(let request, let response):
            guard let retrier, let request else {
                self.finishPreparing(error: error ?? SessionManagerError.noRequest)
                return
            }
            Self.askRetrier(self, retrier: retrier, request: request, response: response, error: error, metrics: metrics)
        }
    }

    private static func askRetrier(_ task: SessionTask, retrier: any RequestInterceptor, request: HTTPClientRequest,
                                   response: HTTPResponse?, error: HawserError?, metrics: TaskMetrics) {
        Task.detached {
            let attempts = task.core.withLock { $0.retryCount }
            let decision = await retrier.retry(task, request: request, response: response, error: error, retryCount: attempts)
            switch decision {
            case .doNotRetry:
                let proceed = task.core.withLock { c -> Bool in
                    guard case .preparing = c.phase else { return false }
                    c.phase = .done
                    return true
                }
                if proceed { task.complete(error: error, metrics: metrics) }
            case .retry, .retryWithDelay:
                let delay: Double = { if case .retryWithDelay(let d) = decision { return d }; return 0 }()
                task.manager?.monitors.forEach { $0.task(task, willRetryAfter: delay, error: error) }
                if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(min(delay, 3600) * 1e9)) }
                let go = task.core.withLock { c -> Bool in
                    guard case .preparing = c.phase else { return false }
                    c.retryCount += 1
                    return true
                }
                guard go else { return }
                task.resetForRetry()
                // Replay the original request: the adapter runs again (e.g. with a refreshed token).
                task.startAttempt(task.originalRequest ?? request)
            }
        }
    }

    /// Whether a retrier may send the task again (a download restarts; a streamed upload whose
    /// producer already ran cannot be replayed).
    var canRetry: Bool {
        if case .stream? = self.originalRequest?.body, self.replayableBody == nil { return false }
        return true
    }

    /// Download hook: the attempt asked to be sent again without its Range header (416).
    func needsRestart() -> Bool { false }
    func restartRequest() -> HTTPClientRequest { self.originalRequest! }

    /// Subclass hook: drop what the failed attempt accumulated.
    func resetForRetry() {
        self.core.withLock { c in
            c.sent = 0
            c.received = 0
            c.response = nil
        }
        self.delegate?.resetForRetry()
    }

    var delegate: TaskDelegate? { self.delegateRef.withLock { $0 } }

    /// The one place a task completes. Callers have moved the phase to `.done` under the lock, so
    /// this runs once per task.
    func complete(error: (any Error)?, metrics: TaskMetrics?) {
        self.core.withLock { c in
            c.state = .completed
            c.error = error
            if let metrics { c.metrics = metrics }
        }
        let manager = self.manager
        let delegate = self.delegateRef.withLock { d -> TaskDelegate? in
            let out = d
            d = nil
            return out
        }
        manager?.removeDelegate(for: self)
        if let manager {
            let hooks = manager.hooks.withLock { $0 }
            if let metrics, let block = hooks.taskDidFinishCollectingMetrics { block(self, metrics) }
            if let metrics { manager.monitors.forEach { $0.task(self, didFinishCollecting: metrics) } }
            hooks.taskDidComplete?(self, error)
        }
        self.willComplete(error: error) { finalError in
            // Monitors first: they hear of the completion before the handler runs on its queue.
            manager?.monitors.forEach { $0.task(self, didCompleteWith: finalError) }
            delegate?.taskDidComplete(self, error: finalError, metrics: metrics)
            manager?.taskFinished()
        }
    }

    /// Subclass hook before the delegate runs (a download closes its file, produces resume data).
    func willComplete(error: (any Error)?, then: @escaping @Sendable ((any Error)?) -> Void) { then(error) }
}

/// A task that receives the response into memory (NSURLSessionDataTask).
public class DataTask: SessionTask, @unchecked Sendable {
    override func didReceiveResponse(_ response: HTTPResponse, engineTask: RequestTask, attempt: Int) {
        self.delegate?.downloadProgress.set(completed: 0, total: response.expectedContentLength)
        guard let manager = self.manager, let block = manager.hooks.withLock({ $0.dataTaskDidReceiveResponse }) else { return }
        switch block(self, response) {
        case .allow:
            return
        case .cancel:
            self.cancel()
        case .becomeDownload:
            manager.convertToDownload(self, engineTask: engineTask, attempt: attempt, response: response)
        }
    }

    override func didReceiveBody(_ bytes: UnsafeRawBufferPointer, received: Int64, expected: Int64, engineTask: RequestTask) {
        guard let delegate = self.delegate else { return }
        delegate.append(bytes)
        delegate.downloadProgress.set(completed: received, total: expected)
        if let block = self.manager?.hooks.withLock({ $0.dataTaskDidReceiveData }) {
            block(self, Data(bytes))
        }
    }
}

/// A data task whose request has a body: bytes, a file, or a stream (NSURLSessionUploadTask).
public final class UploadTask: DataTask, @unchecked Sendable {}

/// Receives the engine's events for one attempt and forwards them to the task. Loop-confined;
/// `target` changes when a data task becomes a download task.
final class EngineBridge: ResponseDelegate, @unchecked Sendable {
    private let origin: SessionTask
    let attempt: Int

    init(target: SessionTask, attempt: Int) {
        self.origin = target
        self.attempt = attempt
    }

    private var target: SessionTask { self.origin.convertedTo.withLock { $0 } ?? self.origin }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        guard self.target.isCurrent(self.attempt) else { return }
        self.target.engineDidReceiveHead(head, engineTask: task, attempt: self.attempt, url: task.request.url)
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        self.target.engineDidReceiveBody(bytes, engineTask: task)
    }

    func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
        self.target.engineDidSendBody(total: totalSent, expected: expected)
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.target.engineDidComplete(result, metrics: metrics, attempt: self.attempt)
    }

    /// Server trust and 401/407: the manager's task block, session block, then security policy
    /// (AFURLSessionManager's challenge delegate method).
    func task(_ task: RequestTask, didReceive challenge: AuthenticationChallenge,
              completion: @escaping @Sendable (ChallengeDisposition) -> Void) {
        let target = self.target
        guard target.isCurrent(self.attempt), let manager = target.manager else {
            completion(.performDefaultHandling)
            return
        }
        completion(manager.taskDisposition(for: challenge, task: target))
    }

    /// The manager's `taskWillPerformHTTPRedirection` block decides; without it the redirect is
    /// followed. A followed redirect becomes the task's `currentRequest`.
    func task(_ task: RequestTask, willPerformRedirection response: HTTPResponseHead, newRequest: HTTPClientRequest,
              completion: @escaping @Sendable (HTTPClientRequest?) -> Void) {
        let target = self.target
        guard target.isCurrent(self.attempt) else {
            completion(newRequest)
            return
        }
        var chosen: HTTPClientRequest? = newRequest
        if let block = target.manager?.hooks.withLock({ $0.taskWillPerformHTTPRedirection }) {
            // `task.request` is still the request that was redirected.
            let redirect = HTTPResponse(url: task.request.url, statusCode: response.status, headers: response.headers,
                                        version: response.version)
            chosen = block(target, redirect, newRequest)
        }
        if let chosen { target.core.withLock { $0.currentRequest = chosen } }
        completion(chosen)
    }

    /// The manager's `dataTaskWillCacheResponse` block decides whether a data task's response is
    /// stored; without it, it is stored as proposed.
    func task(_ task: RequestTask, willCacheResponse proposed: CachedResponse,
              completion: @escaping @Sendable (CachedResponse?) -> Void) {
        let target = self.target
        guard let data = target as? DataTask, let block = target.manager?.hooks.withLock({ $0.dataTaskWillCacheResponse }) else {
            completion(proposed)
            return
        }
        let response = HTTPResponse(url: task.request.url, statusCode: proposed.head.status, headers: proposed.head.headers,
                                    version: proposed.head.version)
        completion(block(data, response) ? proposed : nil)
    }

    /// The manager's `taskNeedNewBodyStream` block, else the task's own replayable body (a
    /// multipart form), else nil (the engine fails the task).
    func task(_ task: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void) {
        let target = self.target
        if let block = target.manager?.hooks.withLock({ $0.taskNeedNewBodyStream }) {
            completion(block(target))
            return
        }
        completion(target.replayableBody?())
    }
}
