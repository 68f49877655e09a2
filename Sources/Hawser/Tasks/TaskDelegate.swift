import Dispatch
import HawserCore
import Synchronization

// AFURLSessionManagerTaskDelegate: one per task, and the engine's ResponseDelegate for every
// attempt of that task. The engine calls it on the session's event loop; it accumulates the body
// and the progress, answers the redirect, challenge, cache and body-stream questions with the
// manager's blocks and security policy, feeds the task's lifecycle, and ends the task: the file
// move of a download, the response serializer and the completion handler on the completion queue
// (or, for the async forms, in the awaiting task), then the didFinish event.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The group completions run in when the manager has no ``SessionManager/completionGroup``.
let defaultCompletionGroup = DispatchGroup()

/// The completion every task kind reduces to: the task it was created for, the response, the
/// serialized object (a file URL for downloads), the error.
typealias TaskCompletion = @Sendable (SessionTask, HawserResponse?, (any Sendable)?, (any Error)?) -> Void

/// One per task. Created with the task, it captures the manager's settings of that moment (the
/// response serializer, the completion queue and group, the body limit), as AFNetworking's
/// manager hands them to each task's delegate.
///
/// Threads: the engine's callbacks run on the event loop, one at a time. The mutable fields
/// (``PhaseFields``) belong to whoever holds the task's phase, and live in a ``PhaseOwned`` that
/// names the owner: the running attempt's loop (from ``startAttempt(_:on:)`` to the attempt's end),
/// or between attempts the thread that moved the phase under the task's lock and claimed them (a
/// retry decision, the completion). The lock's hand-offs order the owners; debug builds check
/// every access against the current one.
final class TaskDelegate: ResponseDelegate, @unchecked Sendable {
    enum Completion {
        /// No handler: the serializer runs only if someone observes the completion.
        case none
        /// A completion handler, on the completion queue inside the completion group.
        case handler(TaskCompletion)
        /// An `async` caller awaits the outcome (``install(_:)``); it runs the serializer itself.
        case awaiting
    }

    private enum AwaitSlot {
        case empty
        case waiting(UnsafeContinuation<TaskOutcome, Never>)
        case delivered(TaskOutcome)
    }

    /// The task the delegate was made for; its completion handler gets this task.
    let owner: SessionTask
    let core: ManagerCore
    /// The manager's settings when the task was made: its response serializer (or the one given
    /// for this request), completion queue and group.
    let settings: ManagerSettings
    let completionQueue: DispatchQueue
    let completionGroup: DispatchGroup
    let completion: Completion
    /// A download's destination (the `destination` block of `downloadTask(with:…)`).
    let destination: (@Sendable (URL, HawserResponse?) -> URL)?
    /// The most a data task buffers (the configuration's `maximumBufferedBodySize`).
    let bodyLimit: Int
    private let awaitSlot = Mutex(AwaitSlot.empty)

    /// What the holder of the task's phase owns.
    struct PhaseFields {
        /// The task the engine's events are for: `owner`, or the download a data task became.
        var task: SessionTask
        var download: DownloadTask?
        /// The manager, held strongly while the task is in flight (set at resume, cleared at the
        /// end): in-flight tasks keep their manager and its session alive, as NSURLSession keeps
        /// its delegate.
        var manager: SessionManager?
        /// The attempt the engine runs and the loop it runs on.
        var attempt = 0
        var eventLoop: EventLoop?
        var body: [UInt8] = []
        var expectedToReceive: Int64 = -1
        /// The final response head of the current attempt (also in the task's state, for readers).
        var response: HawserResponse?
    }

    private var phase: PhaseOwned<PhaseFields>

    /// The task the engine's events are for.
    var task: SessionTask { self.phase.value.task }
    var download: DownloadTask? { self.phase.value.download }
    /// The manager, while the task is in flight. Set at resume (the task is idle: nobody holds
    /// its fields yet).
    var manager: SessionManager? {
        get { self.phase.value.manager }
        set { self.phase.value.manager = newValue }
    }
    /// The loop of the attempt that ran last.
    var eventLoop: EventLoop? { self.phase.value.eventLoop }

    init(
        owner: SessionTask,
        core: ManagerCore,
        completion: Completion,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        responseSerializer: (any ResponseSerialization)? = nil
    ) {
        self.owner = owner
        self.core = core
        self.phase = PhaseOwned(PhaseFields(task: owner, download: owner as? DownloadTask))
        self.completion = completion
        self.destination = destination
        var settings = core.currentSettings
        // A serializer given for this request replaces the manager's in this task's copy only.
        if let responseSerializer { settings = settings.with { $0.responseSerializer = responseSerializer } }
        self.settings = settings
        self.completionQueue = settings.completionQueue ?? core.defaultCompletionQueue
        self.completionGroup = settings.completionGroup ?? defaultCompletionGroup
        self.bodyLimit = core.configuration.maximumBufferedBodySize
    }

    /// An engine callback (of the extension in TaskDelegate+OwnedBody.swift): see ``PhaseOwned/bind(to:file:line:)``.
    func bindPhase(to loop: EventLoop, file: StaticString = #fileID, line: UInt = #line) {
        self.phase.bind(to: loop, file: file, line: line)
    }

    /// Attempt `attempt` starts on the session whose loop is `loop`: the calling thread (which
    /// launched it under the task's lock) sets it up, then the attempt's callbacks own the fields
    /// until it ends.
    func startAttempt(_ attempt: Int, on loop: EventLoop) {
        self.phase.claim()
        self.phase.value.attempt = attempt
        self.phase.value.eventLoop = loop
        self.phase.handToAttempt()
    }

    /// Another attempt follows: drops what the last one gathered. Called under the task's lock
    /// by the thread that decided so (it holds the phase), so that a completion from another
    /// thread comes after it.
    func resetForRetry() {
        self.phase.claim()
        self.phase.value.body = []
        self.phase.value.expectedToReceive = -1
        self.phase.value.response = nil
    }

    // MARK: - The engine's events (on the event loop)

    func task(_ engine: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.phase.bind(to: engine.eventLoop)
        let task = self.task
        let response = HawserResponse(
            url: engine.request.url,
            statusCode: head.status,
            headers: head.headers,
            version: head.version
        )
        let expected = head.headers.contentLength.map(Int64.init) ?? -1
        self.phase.value.expectedToReceive = expected
        self.phase.value.response = response
        task.locked.withLock { s in
            s.response = response
            s.expectedToReceive = expected
        }
        task.receivedBytes.store(0, ordering: .relaxed)
        let channel = self.core.channel
        channel.emit { $0.task(task, didReceive: response) }
        if let download = self.download {
            download.didReceiveResponse(response, engine: engine, channel: channel)
            return
        }
        if self.core.hasResponseBlock, let data = task as? DataTask, let manager = self.manager,
            let block = self.core.hooks.withLock({ $0.dataTaskDidReceiveResponse })
        {
            switch block(data, response) {
            case .allow:
                break
            case .cancel:
                data.cancel()
                return
            case .becomeDownload:
                let download = manager.convertToDownload(
                    data,
                    delegate: self,
                    engine: engine,
                    attempt: self.phase.value.attempt,
                    response: response
                )
                self.phase.value.task = download
                self.phase.value.download = download
                download.didReceiveResponse(response, engine: engine, channel: channel)
                channel.emit { $0.dataTask(data, didBecome: download) }
                return
            }
        }
        // What the body will be once delivered: a HEAD's or a 304's Content-Length describes no
        // body here, a coded one counts coded bytes (the decoded limit is checked as they come).
        let declared = engine.deliveredBodyLength(of: head) ?? -1
        if declared > Int64(self.bodyLimit) {
            engine.fail(with: self.tooLarge(engine, "its Content-Length is \(declared) bytes"))
            return
        }
        self.phase.value.body = []
        if declared > 0 { self.phase.value.body.reserveCapacity(Int(declared)) }
        task.existingDownloadProgress?.set(completed: 0, total: expected)
    }

    func task(_ engine: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        self.phase.bind(to: engine.eventLoop)
        let task = self.task
        if let download = self.download {
            download.write(bytes, engine: engine, channel: self.core.channel)
            return
        }
        let bodyLimit = self.bodyLimit
        let expectedToReceive = self.appendBody(bytes, limit: bodyLimit)
        guard let expectedToReceive else {
            engine.fail(with: self.tooLarge(engine, "more than \(bodyLimit) bytes arrived"))
            return
        }
        let received = task.receivedBytes.wrappingAdd(Int64(bytes.count), ordering: .relaxed).newValue
        task.existingDownloadProgress?.set(completed: received, total: expectedToReceive)
        let channel = self.core.channel
        if channel.isActive, let data = task as? DataTask {
            for m in channel.all { m.dataTask(data, didReceive: bytes) }
        }
    }

    /// Appends to the body unless it would pass `limit` (nil then); returns the expected length.
    private func appendBody(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Int64? {
        let needed = self.phase.value.body.count + bytes.count
        if needed > limit { return nil }
        let capacity = self.phase.value.body.capacity
        if needed > capacity {
            // Grow as append would (doubling), but never reserve past the limit.
            self.phase.value.body.reserveCapacity(min(limit, max(needed, 2 * capacity)))
        }
        self.phase.value.body.append(contentsOf: bytes)
        return self.phase.value.expectedToReceive
    }

    private func tooLarge(_ engine: RequestTask, _ why: String) -> HawserError {
        HawserError(
            .limitExceeded,
            "the response body is larger than maximumBufferedBodySize (\(self.bodyLimit) bytes): \(why); use a download task for large bodies",
            url: engine.request.url
        )
    }

    func task(_ engine: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
        self.phase.bind(to: engine.eventLoop)
        let task = self.task
        let previous = task.sentBytes.exchange(totalSent, ordering: .relaxed)
        let total: Int64
        if let expected {
            total = expected
            task.locked.withLock { $0.expectedToSend = expected }
        } else {
            total = -1
        }
        task.existingUploadProgress?.set(completed: totalSent, total: total)
        self.core.channel.emit {
            $0.task(
                task,
                didSendBodyData: totalSent - previous,
                totalBytesSent: totalSent,
                totalBytesExpectedToSend: total
            )
        }
    }

    func task(_ engine: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.phase.bind(to: engine.eventLoop)
        guard let download = self.download else {
            self.attemptEnded(result, metrics: metrics)
            return
        }
        // A download's attempt ends once its file jobs have run: every byte is written (resume
        // data counts them), and the file is no job's any more when the end closes it.
        download.afterFileJobs(on: engine.eventLoop, engine: engine) { [self] in
            self.attemptEnded(result, metrics: metrics)
        }
    }

    private func attemptEnded(_ result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        let task = self.task
        var error: HawserError? = nil
        if case .failure(let e) = result { error = e }
        let restart = error == nil && task.needsRestart()
        var retry = false
        if self.core.needsPreparation, task.canRetry {
            retry = error != nil || (task.response.map { $0.statusCode >= 400 } ?? false)
        }
        let attempt = self.phase.value.attempt
        // The attempt is over: its loop gives the fields up; the thread that moves the phase next
        // (the completion, a retry decision) claims them.
        self.phase.release()
        let buffer = LifecycleActionBuffer.current
        let start = buffer.actions.count
        task.locked.withLock { s in
            s.metrics = metrics
            s.lifecycle.engineCompleted(
                attempt: attempt,
                error: error,
                restart: restart,
                retry: retry,
                into: &buffer.actions
            )
        }
        task.performActions(buffer, from: start)
    }

    /// Server trust and 401/407: the manager's task block, session block, then security policy
    /// (AFURLSessionManager's challenge delegate method).
    func task(
        _ engine: RequestTask,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        self.phase.bind(to: engine.eventLoop)
        guard let manager = self.manager else {
            completion(.performDefaultHandling)
            return
        }
        completion(manager.taskDisposition(for: challenge, task: self.task))
    }

    /// The manager's `taskWillPerformHTTPRedirection` block decides; without it the redirect is
    /// followed. A followed redirect becomes the task's `currentRequest`.
    func task(
        _ engine: RequestTask,
        willPerformRedirection response: HTTPResponseHead,
        newRequest: HTTPClientRequest,
        completion: @escaping @Sendable (HTTPClientRequest?) -> Void
    ) {
        self.phase.bind(to: engine.eventLoop)
        let task = self.task
        var chosen: HTTPClientRequest? = newRequest
        if let block = self.core.hooks.withLock({ $0.taskWillPerformHTTPRedirection }) {
            // `engine.request` is still the request that was redirected.
            let redirect = HawserResponse(
                url: engine.request.url,
                statusCode: response.status,
                headers: response.headers,
                version: response.version
            )
            chosen = block(task, redirect, newRequest)
        }
        if let chosen { task.locked.withLock { $0.currentRequest = chosen } }
        completion(chosen)
    }

    /// The manager's `dataTaskWillCacheResponse` block decides whether a data task's response is
    /// stored; without it, it is stored as proposed.
    func task(
        _ engine: RequestTask,
        willCacheResponse proposed: CachedResponse,
        completion: @escaping @Sendable (CachedResponse?) -> Void
    ) {
        self.phase.bind(to: engine.eventLoop)
        guard let data = self.task as? DataTask, let block = self.core.hooks.withLock({ $0.dataTaskWillCacheResponse })
        else {
            completion(proposed)
            return
        }
        let response = HawserResponse(
            url: engine.request.url,
            statusCode: proposed.head.status,
            headers: proposed.head.headers,
            version: proposed.head.version
        )
        completion(block(data, response) ? proposed : nil)
    }

    /// The manager's `taskNeedNewBodyStream` block, else the task's own replayable body (a
    /// multipart form), else nil (the engine fails the task).
    func task(_ engine: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void) {
        self.phase.bind(to: engine.eventLoop)
        let task = self.task
        if let block = self.core.hooks.withLock({ $0.taskNeedNewBodyStream }) {
            completion(block(task))
            return
        }
        completion(task.replayableBody?())
    }

    // MARK: - The end

    /// Ends the task (called once, by the task, after its lifecycle completed): hands the outcome
    /// to the awaiting caller, or runs the serializer and the handler on the completion queue.
    func finish(_ task: SessionTask, error: (any Error)?, metrics: TaskMetrics?) {
        self.phase.claim()
        let data = self.phase.value.body
        self.phase.value.body = []
        // The outcome takes over the manager until the completion path has run.
        let pin = self.phase.value.manager
        self.phase.value.manager = nil
        let download = self.phase.value.download
        let outcome = TaskOutcome(
            task: task,
            response: self.phase.value.response,
            data: data,
            download: download,
            settings: self.settings,
            error: error,
            metrics: metrics,
            destination: self.destination,
            core: self.core,
            pin: pin
        )
        switch self.completion {
        case .awaiting:
            self.deliver(outcome)
        case .handler(let handler):
            let owner = self.owner
            self.completionQueue.async(group: self.completionGroup) {
                let (object, failure) = outcome.complete()
                handler(owner, outcome.response, object, failure)
                outcome.announce(object: object, error: failure)
            }
        case .none:
            // Nothing to call: a download still has its file to move, and observers their event.
            guard download != nil || self.core.channel.isActive else { return }
            self.completionQueue.async(group: self.completionGroup) {
                let (object, failure) = outcome.complete()
                outcome.announce(object: object, error: failure)
            }
        }
    }

    /// The awaiting caller's side: called once, from inside `withUnsafeContinuation`. An outcome
    /// that arrived first (a task cancelled before it started) resumes at once.
    func install(_ continuation: UnsafeContinuation<TaskOutcome, Never>) {
        let ready = self.awaitSlot.withLock { slot -> TaskOutcome? in
            if case .delivered(let o) = slot {
                slot = .empty
                return o
            }
            slot = .waiting(continuation)
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    private func deliver(_ outcome: TaskOutcome) {
        let waiting = self.awaitSlot.withLock { slot -> UnsafeContinuation<TaskOutcome, Never>? in
            if case .waiting(let c) = slot {
                slot = .empty
                return c
            }
            slot = .delivered(outcome)
            return nil
        }
        waiting?.resume(returning: outcome)
    }
}

/// A task that has ended, before its response serializer has run: what the completion path needs
/// to produce the serialized object, the handler's arguments and the didFinish event. It keeps
/// the manager alive until then.
struct TaskOutcome: @unchecked Sendable {
    let task: SessionTask
    let response: HawserResponse?
    let data: [UInt8]
    let download: DownloadTask?
    let settings: ManagerSettings
    /// The task's own error (nil on success); the serializer's error comes from ``complete()``.
    let error: (any Error)?
    let metrics: TaskMetrics?
    let destination: (@Sendable (URL, HawserResponse?) -> URL)?
    let core: ManagerCore
    /// Keeps the manager of a task that was in flight until the handler and the event have run.
    let pin: SessionManager?

    /// Off the loop: moves a download's file, then runs the serializer unless the task failed.
    /// Returns the object (a download's moved file) and the final error.
    func complete() -> (object: (any Sendable)?, error: (any Error)?) {
        var error = self.error
        var movedFile: URL? = nil
        if let download = self.download, error == nil {
            switch self.moveDownloadedFile(download) {
            case .moved(let url): movedFile = url
            case .notMoved: break
            case .failed(let e): error = e
            }
        }
        if let error { return (nil, error) }
        var object: (any Sendable)? = nil
        var failure: (any Error)? = nil
        do {
            object = try self.settings.responseSerializer.responseObject(
                for: self.response,
                data: self.download == nil ? self.data : nil
            )
        } catch {
            failure = error
        }
        if let movedFile { object = movedFile }
        return (object, failure)
    }

    /// The didFinish event (AFNetworkingTaskDidCompleteNotification), to the monitors. Its payload
    /// is built only when someone listens: it copies the body into `Data`.
    func announce(object: (any Sendable)?, error: (any Error)?) {
        let channel = self.core.channel
        guard channel.isActive else { return }
        let asset = (object as? URL).flatMap { self.download != nil ? $0 : nil }
        let info = TaskCompletionInfo(
            responseSerializer: self.settings.responseSerializer,
            responseData: self.download == nil ? Data(self.data) : nil,
            assetPath: asset,
            serializedResponse: object,
            error: error,
            metrics: self.metrics
        )
        for m in channel.all { m.task(self.task, didFinishWith: info) }
    }

    /// The async forms' end, in the awaiting task: serializes, announces, and returns the object
    /// and the response or throws the task's or the serializer's error.
    func value() throws -> (value: (any Sendable)?, response: HawserResponse) {
        let (object, failure) = self.complete()
        self.announce(object: object, error: failure)
        if let failure { throw failure }
        guard let response else { throw SessionManagerError.noRequest }
        return (object, response)
    }

    private enum MoveResult {
        case moved(URL)
        case notMoved
        case failed(any Error)
    }

    /// AFNetworking's `didFinishDownloadingToURL`: the manager's block decides first, then the
    /// task's destination; the file is moved there, and the move's outcome is reported. A file
    /// nobody wants is removed, as NSURLSession removes it.
    private func moveDownloadedFile(_ task: DownloadTask) -> MoveResult {
        guard let location = task.temporaryFileURL else { return .notMoved }
        let managerBlock = self.core.hooks.withLock { $0.downloadTaskDidFinishDownloading }
        let target = managerBlock?(task, location) ?? self.destination?(location, self.response)
        guard let target else {
            try? FileManager.default.removeItem(at: location)
            return .notMoved
        }
        let channel = self.core.channel
        do {
            try FileManager.default.moveItem(at: location, to: target)
            channel.emit { $0.downloadTask(task, didMoveFileTo: target) }
            return .moved(target)
        } catch {
            try? FileManager.default.removeItem(at: location)
            let e = SessionManagerError.cannotMoveDownloadedFile(to: target, underlying: error)
            channel.emit { $0.downloadTask(task, didFailToMoveFileTo: target, error: e) }
            return .failed(e)
        }
    }
}
