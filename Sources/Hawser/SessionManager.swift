// AFURLSessionManager: owns a Session, creates tasks, keeps one TaskDelegate per task, and calls
// the session- and task-level blocks.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import HawserCore

/// What to do with a data task once its response head arrived (NSURLSessionResponseDisposition).
public enum ResponseDisposition: Sendable, Hashable {
    /// Go on receiving the body.
    case allow
    /// Cancel the task (it completes with `.cancelled`).
    case cancel
    /// Continue as a download task: the body goes to a file (see
    /// ``SessionManager/dataTaskDidBecomeDownloadTask``); the data task's completion handler is
    /// called for the download task, with the file URL the manager's
    /// ``SessionManager/downloadTaskDidFinishDownloading`` block chose.
    case becomeDownload
}

/// The callback blocks of a manager (AFURLSessionManager's `set…Block:` methods).
struct ManagerHooks {
    var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)?
    var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)?
    var taskNeedNewBodyStream: (@Sendable (SessionTask) -> RequestBody?)?
    var taskWillPerformHTTPRedirection: (@Sendable (SessionTask, HTTPResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    var taskDidReceiveAuthenticationChallenge: (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)?
    var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?
    var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)?
    var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)?
    var dataTaskDidReceiveResponse: (@Sendable (DataTask, HTTPResponse) -> ResponseDisposition)?
    var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)?
    var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)?
    var dataTaskWillCacheResponse: (@Sendable (DataTask, HTTPResponse) -> Bool)?
    var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)?
    var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?
    var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)?
}

struct ManagerSettings {
    var responseSerializer: any ResponseSerialization
    var completionQueue: DispatchQueue?
    var completionGroup: DispatchGroup?
    var interceptor: (any RequestInterceptor)?
    var securityPolicy: SecurityPolicy = .default
    var waitsForConnectivity = false
}

/// The AFURLSessionManager role: creates and runs data, upload and download tasks on a HawserCore
/// `Session`, keeps a `TaskDelegate` per task (accumulated body, progress, completion),
/// serializes responses, and reports every step through blocks, events and event monitors.
///
/// Completion handlers run on ``completionQueue`` inside ``completionGroup``. Block properties are
/// called on the session's event loop (keep them quick) unless documented otherwise.
///
/// Releasing a manager without ``invalidateSession(cancelingPendingTasks:resetSession:)`` cancels
/// its tasks (each completes with a `.cancelled` error saying so) and frees its session.
public class SessionManager: @unchecked Sendable {
    private struct SessionState {
        var session: Session?
        var invalidated = false
        var waitingForInvalidation: Set<Int>?
        var retiredSession: Session?
    }
    private struct Entry {
        let task: SessionTask
        let delegate: TaskDelegate
    }

    /// The session configuration the manager's sessions are made with.
    public let configuration: SessionConfiguration
    private let eventLoop: EventLoop?
    /// Answers the session-level challenges of every session this manager makes; holds the
    /// manager weakly (the session keeps its delegate strongly).
    private let sessionDelegate: ManagerSessionDelegate
    private let reachabilityState = Locked<NetworkReachabilityManager?>(nil)
    private let sessionState: Locked<SessionState>
    private let entries = Locked<[Int: Entry]>([:])
    private let identifiers = Locked(0)
    let hooks = Locked(ManagerHooks())
    let settings: Locked<ManagerSettings>
    let hub = EventHub()
    private let monitorList: Locked<[any EventMonitor]>
    /// The default completion queue: a serial queue of this manager. AFNetworking uses the main
    /// queue, but a command-line program or server on Linux often never runs the main queue
    /// (`dispatchMain()` / a RunLoop), and completions would never arrive.
    let defaultCompletionQueue: DispatchQueue

    /// Creates a manager with its own `Session` (AFURLSessionManager `initWithSessionConfiguration:`).
    /// - Parameters:
    ///   - configuration: the engine settings (timeouts, limits, additional headers).
    ///   - eventLoop: the loop the session runs on (default: the next loop of the shared group).
    ///   - eventMonitors: monitors that see every step of every task.
    public init(configuration: SessionConfiguration = .default, eventLoop: EventLoop? = nil,
                eventMonitors: [any EventMonitor] = []) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        let sessionDelegate = ManagerSessionDelegate()
        self.sessionDelegate = sessionDelegate
        self.sessionState = Locked(SessionState(session: Session(configuration: configuration, eventLoop: eventLoop,
                                                                 delegate: sessionDelegate)))
        self.settings = Locked(ManagerSettings(responseSerializer: ManagerDefaults.responseSerializer,
                                               completionQueue: nil, completionGroup: nil, interceptor: nil))
        self.monitorList = Locked(eventMonitors)
        self.defaultCompletionQueue = DispatchQueue(label: "hawser.session-manager.completion")
        sessionDelegate.manager = self
    }

    deinit {
        let error = HawserError(.cancelled, "the SessionManager was released without invalidateSession(cancelingPendingTasks:resetSession:)")
        let pending = self.entries.withLock { $0.values.map(\.task) }
        for task in pending { task.cancel(with: error) }
    }

    // MARK: - Settings

    /// The engine session tasks run on; nil after an invalidation without reset.
    public var session: Session? { self.sessionState.withLock { $0.invalidated ? nil : $0.session } }

    /// Validates and decodes responses (AFURLSessionManager.responseSerializer). Read when a task
    /// is created: changing it does not affect tasks already created.
    public var responseSerializer: any ResponseSerialization {
        get { self.settings.withLock { $0.responseSerializer } }
        set { self.settings.withLock { $0.responseSerializer = newValue } }
    }

    /// Where completion handlers run. nil (the default) means a serial queue of this manager —
    /// not the main queue as in AFNetworking (see ``SessionManager``).
    public var completionQueue: DispatchQueue? {
        get { self.settings.withLock { $0.completionQueue } }
        set { self.settings.withLock { $0.completionQueue = newValue } }
    }

    /// The group completion handlers run in; nil means a private process-wide group.
    public var completionGroup: DispatchGroup? {
        get { self.settings.withLock { $0.completionGroup } }
        set { self.settings.withLock { $0.completionGroup = newValue } }
    }

    /// Adapts each request before it is sent and decides about retries after failures.
    public var interceptor: (any RequestInterceptor)? {
        get { self.settings.withLock { $0.interceptor } }
        set { self.settings.withLock { $0.interceptor = newValue } }
    }

    /// Decides about servers' certificate chains (AFURLSessionManager.securityPolicy). Default:
    /// `SecurityPolicy.default` (the chain must verify against the system store and name the
    /// host). Used for every server-trust challenge that no challenge block answers, as
    /// AFURLSessionManager does: an accepted chain is trusted (`.useServerTrust`), a refused one
    /// fails the task with `HawserError` `.serverCertificateUntrusted` (-1202) carrying the URL,
    /// the chain (`peerCertificates`) and the `TrustFailure` saying why. Read at each TLS
    /// handshake; a pooled connection that was already accepted is reused without a new check.
    /// It replaces the configuration's `serverTrustEvaluator` for this manager's tasks.
    public var securityPolicy: SecurityPolicy {
        get { self.settings.withLock { $0.securityPolicy } }
        set { self.settings.withLock { $0.securityPolicy = newValue } }
    }

    /// Watches the network (AFURLSessionManager.reachabilityManager). Made on first use for the
    /// default route; it is not started: call `startMonitoring()` on it. Setting it replaces it
    /// (it is not started or stopped for you). ``waitsForConnectivity`` consults it.
    public var reachabilityManager: NetworkReachabilityManager {
        get {
            self.reachabilityState.withLock { r in
                if let r { return r }
                let made = NetworkReachabilityManager()
                r = made
                return made
            }
        }
        set { self.reachabilityState.withLock { $0 = newValue } }
    }

    /// The reachability manager if one was made or set, without making one.
    var existingReachabilityManager: NetworkReachabilityManager? { self.reachabilityState.withLock { $0 } }

    /// Whether a task resumed while ``reachabilityManager`` reports the network not reachable
    /// waits for it to become reachable before it starts (URLSessionConfiguration's
    /// `waitsForConnectivity`; not in AFNetworking). Default false.
    ///
    /// A waiting task is ``SessionTaskState/running``; it starts as soon as the status turns
    /// reachable (or unknown), and fails with `.timedOut` (-1001) if the configuration's
    /// `timeoutIntervalForResource` passes first. When the status is unknown (the manager is not
    /// monitoring, or has no answer yet), tasks start at once.
    public var waitsForConnectivity: Bool {
        get { self.settings.withLock { $0.waitsForConnectivity } }
        set { self.settings.withLock { $0.waitsForConnectivity = newValue } }
    }

    /// Adds a monitor that sees every step of every task created afterwards or running.
    public func addEventMonitor(_ monitor: any EventMonitor) {
        self.monitorList.withLock { $0.append(monitor) }
    }

    var monitors: [any EventMonitor] { self.monitorList.withLock { $0 } }

    // MARK: - Tasks

    /// The tasks that have not completed yet.
    public var tasks: [SessionTask] {
        self.entries.withLock { $0.values.map(\.task) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }
    /// The data tasks (upload tasks excluded) that have not completed yet.
    public var dataTasks: [DataTask] { self.tasks.compactMap { $0 is UploadTask ? nil : $0 as? DataTask } }
    /// The upload tasks that have not completed yet.
    public var uploadTasks: [UploadTask] { self.tasks.compactMap { $0 as? UploadTask } }
    /// The download tasks that have not completed yet.
    public var downloadTasks: [DownloadTask] { self.tasks.compactMap { $0 as? DownloadTask } }

    /// The upload progress of a task that has not completed; nil otherwise.
    public func uploadProgress(for task: SessionTask) -> TransferProgress? {
        self.entries.withLock { $0[task.taskIdentifier] }.flatMap { $0.task === task ? $0.delegate.uploadProgress : nil }
    }

    /// The download progress of a task that has not completed; nil otherwise.
    public func downloadProgress(for task: SessionTask) -> TransferProgress? {
        self.entries.withLock { $0[task.taskIdentifier] }.flatMap { $0.task === task ? $0.delegate.downloadProgress : nil }
    }

    /// Creates a data task (suspended: call `resume()`). `completionHandler` runs once on the
    /// completion queue with the response, the serialized object and the error. (The handler has no
    /// default, so a trailing closure is always the completion handler, never a progress block.)
    public func dataTask(with request: HTTPClientRequest,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
                         completionHandler: (@Sendable (HTTPResponse?, (any Sendable)?, (any Error)?) -> Void)?) -> DataTask {
        let task = DataTask(identifier: self.nextIdentifier(), request: request, manager: self, hub: self.hub)
        self.register(task, delegate: TaskDelegate(manager: self, completion: completionHandler),
                      upload: uploadProgress, download: downloadProgress)
        return task
    }

    /// Creates an upload task sending `bodyData` (suspended).
    public func uploadTask(with request: HTTPClientRequest, from bodyData: Data,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: (@Sendable (HTTPResponse?, (any Sendable)?, (any Error)?) -> Void)?) -> UploadTask {
        var r = request
        r.body = .bytes(Array(bodyData))
        return self.makeUpload(r, preflightError: nil, progress: progress, completion: completionHandler)
    }

    /// Creates an upload task streaming the file at `fileURL` in 64 KiB chunks (suspended). Memory
    /// stays bounded whatever the file's size. An unreadable file fails the task when it is resumed.
    public func uploadTask(with request: HTTPClientRequest, fromFile fileURL: URL,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: (@Sendable (HTTPResponse?, (any Sendable)?, (any Error)?) -> Void)?) -> UploadTask {
        var r = request
        var preflight: (any Error)? = nil
        let path = fileURL.path
        var st = stat()
        if stat(path, &st) != 0 || (st.st_mode & S_IFMT) != S_IFREG || access(path, R_OK) != 0 {
            preflight = SessionManagerError.cannotReadUploadFile(path: path, errno: errno == 0 ? EINVAL : errno)
        } else {
            let length = Int64(st.st_size)
            r.body = .stream(length: length) { writer in try await FileStreamer.stream(path: path, length: length, to: writer) }
        }
        return self.makeUpload(r, preflightError: preflight, progress: progress, completion: completionHandler)
    }

    /// Creates an upload task whose request carries its own body — typically a
    /// `RequestBody.stream` (suspended). A streamed body cannot be replayed, so such a task is
    /// never retried.
    public func uploadTask(withStreamedRequest request: HTTPClientRequest,
                           progress: (@Sendable (TransferProgress) -> Void)? = nil,
                           completionHandler: (@Sendable (HTTPResponse?, (any Sendable)?, (any Error)?) -> Void)?) -> UploadTask {
        self.makeUpload(request, preflightError: nil, progress: progress, completion: completionHandler)
    }

    private func makeUpload(_ request: HTTPClientRequest, preflightError: (any Error)?,
                            progress: (@Sendable (TransferProgress) -> Void)?,
                            completion: TaskCompletion?) -> UploadTask {
        let task = UploadTask(identifier: self.nextIdentifier(), request: request, manager: self, hub: self.hub)
        task.preflightError = preflightError
        self.register(task, delegate: TaskDelegate(manager: self, completion: completion), upload: progress, download: nil)
        return task
    }

    /// Creates a download task (suspended). The body is written to a temporary file as it arrives;
    /// at the end `destination` (given the temporary URL and the response) says where to move it,
    /// and `completionHandler` gets that URL — or the error, also when the move failed.
    public func downloadTask(with request: HTTPClientRequest,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: (@Sendable (URL, HTTPResponse?) -> URL)? = nil,
                             completionHandler: (@Sendable (HTTPResponse?, URL?, (any Error)?) -> Void)?) -> DownloadTask {
        let task = DownloadTask(identifier: self.nextIdentifier(), request: request, manager: self, hub: self.hub, resumeFrom: nil)
        self.registerDownload(task, progress: progress, destination: destination, completion: completionHandler)
        return task
    }

    /// Creates a download task that continues from `resumeData` (see ``DownloadResumeData``)
    /// with `Range` + `If-Range`: a 206 appends to the partial file, a 200 (Range ignored, or the
    /// entity changed) starts again from zero, a 416 asks again without Range. Invalid resume data
    /// fails the task when it is resumed.
    public func downloadTask(withResumeData resumeData: Data,
                             progress: (@Sendable (TransferProgress) -> Void)? = nil,
                             destination: (@Sendable (URL, HTTPResponse?) -> URL)? = nil,
                             completionHandler: (@Sendable (HTTPResponse?, URL?, (any Error)?) -> Void)?) -> DownloadTask {
        var preflight: (any Error)? = nil
        var resume: DownloadResumeData? = nil
        var request: HTTPClientRequest? = nil
        do {
            var r = try DownloadResumeData(data: resumeData)
            var headers = HTTPHeaders()
            for pair in r.headers { headers.add(name: pair[0], value: pair[1]) }
            request = HTTPClientRequest(method: .get, url: r.url, headers: headers)
            // The partial file must still hold the bytes the resume data counts; otherwise start over.
            var st = stat()
            if stat(r.temporaryFilePath, &st) != 0 || Int64(st.st_size) < r.bytesWritten {
                r.bytesWritten = 0
            }
            resume = r
        } catch {
            preflight = error
        }
        let task = DownloadTask(identifier: self.nextIdentifier(), request: request, manager: self, hub: self.hub, resumeFrom: resume)
        task.preflightError = preflight
        self.registerDownload(task, progress: progress, destination: destination, completion: completionHandler)
        return task
    }

    private func registerDownload(_ task: DownloadTask, progress: (@Sendable (TransferProgress) -> Void)?,
                                  destination: (@Sendable (URL, HTTPResponse?) -> URL)?,
                                  completion: (@Sendable (HTTPResponse?, URL?, (any Error)?) -> Void)?) {
        var wrapped: TaskCompletion? = nil
        if let completion {
            wrapped = { @Sendable (response: HTTPResponse?, object: (any Sendable)?, error: (any Error)?) in
                completion(response, object as? URL, error)
            }
        }
        self.register(task, delegate: TaskDelegate(manager: self, completion: wrapped, destination: destination),
                      upload: nil, download: progress)
    }

    private func nextIdentifier() -> Int {
        self.identifiers.withLock { i in
            i += 1
            return i
        }
    }

    private func register(_ task: SessionTask, delegate: TaskDelegate,
                          upload: (@Sendable (TransferProgress) -> Void)?, download: (@Sendable (TransferProgress) -> Void)?) {
        delegate.wire(to: task)
        if let upload { delegate.uploadProgress.addObserver(upload) }
        if let download { delegate.downloadProgress.addObserver(download) }
        task.delegateRef.withLock { $0 = delegate }
        self.entries.withLock { $0[task.taskIdentifier] = Entry(task: task, delegate: delegate) }
        self.monitors.forEach { $0.taskDidCreate(task) }
    }

    func removeDelegate(for task: SessionTask) {
        self.entries.withLock { e in
            if e[task.taskIdentifier]?.task === task { e[task.taskIdentifier] = nil }
        }
    }

    /// The data task's delegate and the engine attempt move to a new download task (AFNetworking's
    /// `didBecomeDownloadTask`). Called on the loop from the data task's response handling.
    func convertToDownload(_ dataTask: DataTask, engineTask: RequestTask, attempt: Int, response: HTTPResponse) {
        guard let delegate = dataTask.delegateRef.withLock({ d -> TaskDelegate? in defer { d = nil }; return d }) else { return }
        let download = DownloadTask(identifier: self.nextIdentifier(), request: dataTask.originalRequest, manager: self,
                                    hub: self.hub, resumeFrom: nil)
        download.core.withLock { c in
            c.state = .running
            c.attempt = attempt
            c.phase = .engine(engineTask, attempt: attempt)
            c.currentRequest = dataTask.currentRequest
            c.response = response
            c.expectedToReceive = response.expectedContentLength
        }
        download.delegateRef.withLock { $0 = delegate }
        dataTask.core.withLock { c in
            c.phase = .done
            c.state = .completed
        }
        dataTask.convertedTo.withLock { $0 = download }
        self.entries.withLock { e in
            e[dataTask.taskIdentifier] = nil
            e[download.taskIdentifier] = Entry(task: download, delegate: delegate)
        }
        download.didReceiveResponse(response, engineTask: engineTask, attempt: attempt)
        self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask }?(dataTask, download)
    }

    // MARK: - Session lifetime

    /// The session to launch an attempt on; throws once the manager was invalidated (not reset).
    func activeSession() throws(SessionManagerError) -> Session {
        let s = self.sessionState.withLock { $0.invalidated ? nil : $0.session }
        guard let s else { throw .sessionInvalidated }
        return s
    }

    /// Invalidates the manager's session (AFURLSessionManager `invalidateSessionCancelingTasks:resetSession:`).
    ///
    /// With `cancelingPendingTasks`, every task is cancelled; otherwise running tasks finish.
    /// Once the tasks that existed have completed, ``sessionDidBecomeInvalid`` is called and
    /// ``SessionEvent/sessionDidInvalidate(error:)`` posted. Without `resetSession`, later tasks
    /// fail with ``SessionManagerError/sessionInvalidated``; with it, the manager gets a fresh
    /// session at once and stays usable.
    public func invalidateSession(cancelingPendingTasks: Bool, resetSession: Bool = false) {
        let pending = self.entries.withLock { $0.values.map(\.task) }
        let finishNow = self.sessionState.withLock { s -> Bool in
            s.retiredSession = s.session
            if resetSession {
                s.session = Session(configuration: self.configuration, eventLoop: self.eventLoop, delegate: self.sessionDelegate)
                s.invalidated = false
            } else {
                s.invalidated = true
                s.session = nil
            }
            s.waitingForInvalidation = Set(pending.map(\.taskIdentifier))
            return pending.isEmpty
        }
        if cancelingPendingTasks {
            let error = HawserError(.cancelled, "the session was invalidated with its tasks cancelled")
            for t in pending { t.cancel(with: error) }
        }
        if finishNow { self.finishInvalidation() }
    }

    /// Called after every task completion (on the completion path).
    func taskFinished() {
        let ready = self.sessionState.withLock { s -> Bool in
            guard var waiting = s.waitingForInvalidation else { return false }
            let live = Set(self.entries.withLock { Array($0.keys) })
            waiting.formIntersection(live)
            s.waitingForInvalidation = waiting
            return waiting.isEmpty
        }
        if ready { self.finishInvalidation() }
    }

    private func finishInvalidation() {
        let retired = self.sessionState.withLock { s -> Session? in
            guard s.waitingForInvalidation != nil else { return nil }
            s.waitingForInvalidation = nil
            defer { s.retiredSession = nil }
            return s.retiredSession
        }
        // Releasing the last reference shuts the retired session down (its pool and connections).
        _ = retired
        self.hooks.withLock { $0.sessionDidBecomeInvalid }?(nil)
        self.monitors.forEach { $0.sessionDidInvalidate(error: nil) }
        self.hub.post(.sessionDidInvalidate(error: nil))
    }

    // MARK: - Events

    /// Calls `handler` with every event of this manager (AFNetworking's notifications), in order,
    /// on a serial queue of the manager. Thread-safe.
    @discardableResult
    public func addObserver(_ handler: @escaping @Sendable (SessionEvent) -> Void) -> SessionObserverToken {
        self.hub.add(handler)
    }

    /// Stops delivering events to the observer registered with `token`.
    public func removeObserver(_ token: SessionObserverToken) {
        self.hub.remove(token)
    }

    /// The manager's events as an AsyncSequence. Each call makes a new subscription, which ends
    /// when the consuming task stops iterating.
    public func events(bufferingPolicy: AsyncStream<SessionEvent>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<SessionEvent> {
        AsyncStream(bufferingPolicy: bufferingPolicy) { continuation in
            let token = self.hub.add { continuation.yield($0) }
            let hub = self.hub
            continuation.onTermination = { _ in hub.remove(token) }
        }
    }

    // MARK: - Blocks

    /// Called once the session was invalidated and its tasks ended (URLSession:didBecomeInvalidWithError:).
    public var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.sessionDidBecomeInvalid } }
        set { self.hooks.withLock { $0.sessionDidBecomeInvalid = newValue } }
    }
    /// Answers the challenges no task-level block answered: the server's TLS chain and, once the
    /// engine asks, 401/407 (URLSession:didReceiveChallenge:completionHandler:). Return the
    /// disposition; `.useCredential(_:)` carries the credential. With this block set, the
    /// ``securityPolicy`` is not consulted: the block decides. Called on the event loop: be quick.
    public var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)? {
        get { self.hooks.withLock { $0.sessionDidReceiveAuthenticationChallenge } }
        set { self.hooks.withLock { $0.sessionDidReceiveAuthenticationChallenge = newValue } }
    }
    /// Gives a fresh body when a 307/308 redirect must send a streamed body again
    /// (URLSession:task:needNewBodyStream:); nil fails the task. Without the block, a multipart
    /// POST's form is produced again; any other stream cannot be replayed and the task fails.
    public var taskNeedNewBodyStream: (@Sendable (SessionTask) -> RequestBody?)? {
        get { self.hooks.withLock { $0.taskNeedNewBodyStream } }
        set { self.hooks.withLock { $0.taskNeedNewBodyStream = newValue } }
    }
    /// Decides a redirect (URLSession:task:willPerformHTTPRedirection:newRequest:): given the
    /// task, the 3xx response (its `url` the URL that redirected) and the request the engine
    /// would send, return that request, a changed one, or nil to stop: then the 3xx response is
    /// the task's response. Called on the event loop: be quick.
    public var taskWillPerformHTTPRedirection: (@Sendable (SessionTask, HTTPResponse, HTTPClientRequest) -> HTTPClientRequest?)? {
        get { self.hooks.withLock { $0.taskWillPerformHTTPRedirection } }
        set { self.hooks.withLock { $0.taskWillPerformHTTPRedirection = newValue } }
    }
    /// Answers a task's challenges (URLSession:task:didReceiveChallenge:completionHandler:): the
    /// server's TLS chain on a connection opened for the task, and 401/407 once the engine asks.
    /// Return the disposition; `.useCredential(_:)` carries the credential, and
    /// `.performDefaultHandling` hands the challenge on to ``sessionDidReceiveAuthenticationChallenge``
    /// or, without it, to the ``securityPolicy`` (server trust) or the engine. With this block set,
    /// the policy is not consulted unless the block defers. Called on the event loop: be quick.
    public var taskDidReceiveAuthenticationChallenge: (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)? {
        get { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge } }
        set { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge = newValue } }
    }
    /// Upload progress: (task, bytes sent now, total sent, total expected or -1).
    public var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.taskDidSendBodyData } }
        set { self.hooks.withLock { $0.taskDidSendBodyData = newValue } }
    }
    /// A task completed, before its completion handler (URLSession:task:didCompleteWithError:).
    public var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.taskDidComplete } }
        set { self.hooks.withLock { $0.taskDidComplete = newValue } }
    }
    /// A task's metrics are final (URLSession:task:didFinishCollectingMetrics:), before didComplete.
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)? {
        get { self.hooks.withLock { $0.taskDidFinishCollectingMetrics } }
        set { self.hooks.withLock { $0.taskDidFinishCollectingMetrics = newValue } }
    }
    /// A data task's response head arrived: allow, cancel, or become a download.
    public var dataTaskDidReceiveResponse: (@Sendable (DataTask, HTTPResponse) -> ResponseDisposition)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveResponse } }
        set { self.hooks.withLock { $0.dataTaskDidReceiveResponse = newValue } }
    }
    /// A data task became a download task (after ``ResponseDisposition/becomeDownload``).
    public var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask } }
        set { self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask = newValue } }
    }
    /// A data task received body bytes (a copy; setting this block costs one copy per chunk).
    public var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveData } }
        set { self.hooks.withLock { $0.dataTaskDidReceiveData = newValue } }
    }
    /// Whether a response may be stored in the session's HTTP cache
    /// (URLSession:dataTask:willCacheResponse:; false = do not store). Called only when the
    /// configuration has a `urlCache` and the response is storable.
    public var dataTaskWillCacheResponse: (@Sendable (DataTask, HTTPResponse) -> Bool)? {
        get { self.hooks.withLock { $0.dataTaskWillCacheResponse } }
        set { self.hooks.withLock { $0.dataTaskWillCacheResponse = newValue } }
    }
    /// Where to move a finished download (given the temporary file); takes precedence over the
    /// task's destination when it returns a URL. Called on the completion path.
    public var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)? {
        get { self.hooks.withLock { $0.downloadTaskDidFinishDownloading } }
        set { self.hooks.withLock { $0.downloadTaskDidFinishDownloading = newValue } }
    }
    /// Download progress: (task, bytes written now, total written, total expected or -1).
    public var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidWriteData } }
        set { self.hooks.withLock { $0.downloadTaskDidWriteData = newValue } }
    }
    /// A download resumed: (task, file offset it continues from, expected total or -1). A server
    /// that ignored Range gives offset 0.
    public var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidResume } }
        set { self.hooks.withLock { $0.downloadTaskDidResume = newValue } }
    }

    // MARK: - async

    /// Runs a data task for `request` and returns the serialized object and the response.
    /// Cancelling the calling Swift task cancels the task.
    ///
    /// The awaiting task is the completion here: the response serializer runs in it once the
    /// task ends (still off the event loop), and ``completionQueue`` and ``completionGroup`` are
    /// not used, since there is no handler to call. The didComplete event is posted before this
    /// returns. The async forms of ``HTTPSessionManager`` (`get`, `post`, …) come through here.
    public func data(for request: HTTPClientRequest) async throws -> (value: (any Sendable)?, response: HTTPResponse) {
        let outcome: TaskOutcome = try await Self.run { done in
            let task = DataTask(identifier: self.nextIdentifier(), request: request, manager: self, hub: self.hub)
            self.register(task, delegate: TaskDelegate(manager: self, completion: nil, deliver: { done(.success($0)) }),
                          upload: nil, download: nil)
            return task
        }
        return try outcome.value()
    }

    /// Downloads `request` to the URL `destination` returns; returns that URL and the response.
    public func download(for request: HTTPClientRequest,
                         to destination: @escaping @Sendable (URL, HTTPResponse?) -> URL) async throws -> (url: URL, response: HTTPResponse) {
        try await Self.run { done in
            self.downloadTask(with: request, destination: destination) { response, url, error in
                if let error { done(.failure(error)) }
                else if let url, let response { done(.success((url, response))) }
                else { done(.failure(SessionManagerError.noRequest)) }
            }
        }
    }

    /// Bridges a task's completion handler to async/await: resumes it, cancels it with the Swift task.
    static func run<T: Sendable>(_ make: (@escaping @Sendable (Result<T, any Error>) -> Void) -> SessionTask?) async throws -> T {
        let box = Locked<SessionTask?>(nil)
        let result: Result<T, any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { (cont: CheckedContinuation<Result<T, any Error>, Never>) in
                let task = make { cont.resume(returning: $0) }
                guard let task else { return }
                let cancelled = box.withLock { b -> Bool in
                    b = task
                    return Task.isCancelled
                }
                task.resume()
                if cancelled { task.cancel() }
            }
        } onCancel: {
            box.withLock { $0 }?.cancel()
        }
        return try result.get()
    }
}

/// Reads a file in bounded chunks into a streamed request body.
enum FileStreamer {
    static let chunkSize = 64 * 1024

    static func stream(path: String, length: Int64, to writer: RequestBodyWriter) async throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw SessionManagerError.cannotReadUploadFile(path: path, errno: errno) }
        defer { close(fd) }
        var remaining = length
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, want) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SessionManagerError.cannotReadUploadFile(path: path, errno: errno)
            }
            if n == 0 {
                throw SessionManagerError.cannotReadUploadFile(path: path, errno: EIO)   // the file shrank
            }
            try await writer.write(n == chunkSize ? buffer : Array(buffer[0..<n]))
            remaining -= Int64(n)
        }
    }
}
