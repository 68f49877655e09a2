import Dispatch
import HawserCore
import Synchronization

// AFURLSessionManager: owns a Session, creates tasks (each with its TaskDelegate), keeps the
// tasks that have not completed, and calls the session- and task-level blocks.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

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
    var taskWillPerformHTTPRedirection:
        (@Sendable (SessionTask, HawserResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    var taskDidReceiveAuthenticationChallenge:
        (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)?
    var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)?
    var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)?
    var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)?
    var dataTaskDidReceiveResponse: (@Sendable (DataTask, HawserResponse) -> ResponseDisposition)?
    var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)?
    var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)?
    var dataTaskWillCacheResponse: (@Sendable (DataTask, HawserResponse) -> Bool)?
    var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)?
    var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)?
    var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)?

    /// Whether an observe-only block is set (then the block adapter joins the event channel).
    var observes: Bool {
        self.sessionDidBecomeInvalid != nil || self.taskDidSendBodyData != nil || self.taskDidComplete != nil
            || self.taskDidFinishCollectingMetrics != nil || self.dataTaskDidBecomeDownloadTask != nil
            || self.dataTaskDidReceiveData != nil || self.downloadTaskDidWriteData != nil
            || self.downloadTaskDidResume != nil
    }
}

/// A manager's settings at one moment. Replaced as a whole when one changes, so a task takes
/// them with one reference when it is made (AFNetworking's manager hands its response serializer
/// and completion queue to each task's delegate).
final class ManagerSettings: Sendable {
    struct Values {
        var responseSerializer: any ResponseSerialization
        var completionQueue: DispatchQueue?
        var completionGroup: DispatchGroup?
        var interceptor: (any RequestInterceptor)?
        var securityPolicy: SecurityPolicy = .default
    }
    let values: Values

    init(_ values: Values) { self.values = values }

    var responseSerializer: any ResponseSerialization { self.values.responseSerializer }
    var completionQueue: DispatchQueue? { self.values.completionQueue }
    var completionGroup: DispatchGroup? { self.values.completionGroup }
    var interceptor: (any RequestInterceptor)? { self.values.interceptor }
    var securityPolicy: SecurityPolicy { self.values.securityPolicy }

    /// These settings with one change.
    func with(_ change: (inout Values) -> Void) -> ManagerSettings {
        var v = self.values
        change(&v)
        return ManagerSettings(v)
    }
}

/// What a manager's tasks need of it: the registry, settings, flags, blocks and event channel.
/// Tasks and their delegates hold it strongly; nothing holds it weakly, so its reference counting
/// stays on the fast path (a weak reference gives an object a side table, and every retain of it
/// then takes the slow path — the manager, which tasks and the session delegate reference
/// weakly, is touched only when a task starts and ends).
final class ManagerCore: @unchecked Sendable {
    struct Registry {
        /// The tasks that have not completed, by identifier.
        var tasks: [Int: SessionTask] = [:]
        var session: Session
        /// Invalidated without a reset: later tasks fail.
        var invalidated = false
        /// The tasks an invalidation waits for; nil when none is pending.
        var waitingForInvalidation: Set<Int>?
        /// Sessions to shut down once the invalidation's tasks have ended.
        var retiring: [Session] = []
    }

    let configuration: SessionConfiguration
    let eventLoop: EventLoop?
    /// The group the manager's sessions span, when it was made with one (else `eventLoop`, or,
    /// when that is nil too, every loop of `EventLoopGroup.shared`).
    let eventLoopGroup: EventLoopGroup?
    /// Answers the session-level challenges of every session this manager makes; holds the
    /// manager weakly (the session keeps its delegate strongly).
    let sessionDelegate: ManagerSessionDelegate
    let registry: Mutex<Registry>
    let identifiers = Atomic<Int>(0)
    let reachabilityState = Locked<NetworkReachabilityManager?>(nil)
    let hooks = Locked(ManagerHooks())
    let settings: Mutex<ManagerSettings>
    /// Read on every resume and completion: an atomic load, not a lock.
    let waitsFlag = Atomic<Bool>(false)
    let interceptorSet = Atomic<Bool>(false)
    let responseBlockSet = Atomic<Bool>(false)
    /// The one event channel: monitors, the block adapter, the event hub.
    let channel: MonitorChannel
    /// The default completion queue: a serial queue of this manager. AFNetworking uses the main
    /// queue, but a command-line program or server on Linux often never runs the main queue
    /// (`dispatchMain()` / a RunLoop), and completions would never arrive.
    let defaultCompletionQueue: DispatchQueue
    /// The manager, for a task that starts (it holds its manager until it completes).
    weak var owner: SessionManager?

    init(
        configuration: SessionConfiguration,
        eventLoop: EventLoop?,
        eventLoopGroup: EventLoopGroup? = nil,
        eventMonitors: [any EventMonitor]
    ) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.eventLoopGroup = eventLoopGroup
        let sessionDelegate = ManagerSessionDelegate()
        self.sessionDelegate = sessionDelegate
        self.registry = Mutex(
            Registry(
                session: Self.makeSession(configuration, eventLoop, eventLoopGroup, sessionDelegate)
            )
        )
        self.settings = Mutex(ManagerSettings(.init(responseSerializer: ManagerDefaults.responseSerializer)))
        self.channel = MonitorChannel(eventMonitors)
        self.defaultCompletionQueue = DispatchQueue(label: "hawser.session-manager.completion")
    }

    func makeSession() -> Session {
        Self.makeSession(self.configuration, self.eventLoop, self.eventLoopGroup, self.sessionDelegate)
    }

    private static func makeSession(
        _ configuration: SessionConfiguration,
        _ eventLoop: EventLoop?,
        _ eventLoopGroup: EventLoopGroup?,
        _ delegate: ManagerSessionDelegate
    ) -> Session {
        if let eventLoopGroup {
            return Session(configuration: configuration, eventLoopGroup: eventLoopGroup, delegate: delegate)
        }
        return Session(configuration: configuration, eventLoop: eventLoop, delegate: delegate)
    }

    var currentSettings: ManagerSettings { self.settings.withLock { $0 } }

    func updateSettings(_ change: (inout ManagerSettings.Values) -> Void) {
        self.settings.withLock { $0 = $0.with(change) }
    }

    var interceptor: (any RequestInterceptor)? { self.currentSettings.interceptor }

    /// Whether each attempt goes through the interceptor (its adapter, then its retrier).
    var needsPreparation: Bool { self.interceptorSet.load(ordering: .acquiring) }

    /// Whether a `dataTaskDidReceiveResponse` block is set (read on every response head).
    var hasResponseBlock: Bool { self.responseBlockSet.load(ordering: .acquiring) }

    /// The reachability manager if one was made or set, without making one.
    var existingReachabilityManager: NetworkReachabilityManager? { self.reachabilityState.withLock { $0 } }

    /// Whether the next attempt must wait for the network.
    var mustWaitForConnectivity: Bool {
        guard self.waitsFlag.load(ordering: .acquiring) else { return false }
        return self.existingReachabilityManager?.networkReachabilityStatus == .notReachable
    }

    func nextIdentifier() -> Int {
        self.identifiers.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// The session to launch an attempt on; throws once the manager was invalidated (not reset).
    func activeSession() throws(SessionManagerError) -> Session {
        let s = self.registry.withLock { $0.invalidated ? nil : $0.session }
        guard let s else { throw .sessionInvalidated }
        return s
    }

    /// Forgets a completed task. Returns true when that was the last task an invalidation waited for.
    func unregister(_ task: SessionTask) -> Bool {
        self.registry.withLock { r in
            if r.tasks[task.taskIdentifier] === task { r.tasks[task.taskIdentifier] = nil }
            guard r.waitingForInvalidation != nil else { return false }
            r.waitingForInvalidation!.remove(task.taskIdentifier)
            return r.waitingForInvalidation!.isEmpty
        }
    }

    /// The invalidation's tasks have all ended: shut the retired sessions down and report it.
    func finishInvalidation() {
        let retiring = self.registry.withLock { r -> [Session]? in
            guard r.waitingForInvalidation != nil else { return nil }
            r.waitingForInvalidation = nil
            defer { r.retiring = [] }
            return r.retiring
        }
        guard let retiring else { return }
        for session in retiring {
            // On its loop: from there `shutdown()` does not block.
            session.eventLoop.execute { session.shutdown() }
        }
        self.channel.emit { $0.sessionDidInvalidate(error: nil) }
    }
}

/// The AFURLSessionManager role: creates and runs data, upload and download tasks on a HawserCore
/// `Session`, keeps a `TaskDelegate` per task (accumulated body, progress, completion),
/// serializes responses, and reports every step to its ``EventMonitor``s, blocks and observers.
///
/// Completion handlers run on ``completionQueue`` inside ``completionGroup``, right after the
/// response serializer. Block properties are called on the session's event loop (keep them
/// quick) unless documented otherwise.
///
/// **Lifetime.** A task that was resumed keeps its manager, and so the manager's session, alive
/// until it completes — as NSURLSession keeps its delegate until it is invalidated. So
/// `HTTPSessionManager().get(…)` completes although nothing holds the manager. A manager released
/// with tasks that were never resumed cancels them (each completes with a `.cancelled` error
/// saying so) and frees its session. ``invalidateSessionCancelingTasks(_:resetSession:)`` ends a
/// manager's session as AFNetworking's does.
public class SessionManager: @unchecked Sendable {
    /// The session configuration the manager's sessions are made with.
    public let configuration: SessionConfiguration
    let core: ManagerCore
    private let hub = EventHub()
    private let blockMonitor: BlockMonitor

    var eventLoop: EventLoop? { self.core.eventLoop }
    var eventLoopGroup: EventLoopGroup? { self.core.eventLoopGroup }
    var hooks: Locked<ManagerHooks> { self.core.hooks }
    var channel: MonitorChannel { self.core.channel }
    var defaultCompletionQueue: DispatchQueue { self.core.defaultCompletionQueue }

    /// Creates a manager with its own `Session` (AFURLSessionManager `initWithSessionConfiguration:`).
    /// - Parameters:
    ///   - configuration: the engine settings (timeouts, limits, additional headers).
    ///   - eventLoop: the one loop the session runs on (default: nil, the session spans every
    ///     loop of the shared group).
    ///   - eventMonitors: monitors that see every step of every task.
    public init(
        configuration: SessionConfiguration = .default,
        eventLoop: EventLoop? = nil,
        eventMonitors: [any EventMonitor] = []
    ) {
        self.configuration = configuration
        self.core = ManagerCore(configuration: configuration, eventLoop: eventLoop, eventMonitors: eventMonitors)
        self.blockMonitor = BlockMonitor(hooks: self.core.hooks)
        self.core.sessionDelegate.manager = self
        self.core.owner = self
    }

    /// Creates a manager whose session spans every loop of `eventLoopGroup` (see `Session`): a
    /// task made from code running on one of the loops is served by that loop's connections.
    /// - Parameters:
    ///   - configuration: the engine settings (timeouts, limits, additional headers).
    ///   - eventLoopGroup: the loops the session runs on.
    ///   - eventMonitors: monitors that see every step of every task.
    public init(
        configuration: SessionConfiguration = .default,
        eventLoopGroup: EventLoopGroup,
        eventMonitors: [any EventMonitor] = []
    ) {
        self.configuration = configuration
        self.core = ManagerCore(
            configuration: configuration,
            eventLoop: nil,
            eventLoopGroup: eventLoopGroup,
            eventMonitors: eventMonitors
        )
        self.blockMonitor = BlockMonitor(hooks: self.core.hooks)
        self.core.sessionDelegate.manager = self
        self.core.owner = self
    }

    deinit {
        // Only tasks that were never resumed can be left: a resumed task holds its manager.
        let error = HawserError(.cancelled, "the SessionManager was released before this task was resumed")
        let pending = self.core.registry.withLock { Array($0.tasks.values) }
        for task in pending { task.cancel(with: error) }
    }

    // MARK: - Settings

    /// The engine session tasks run on (AFURLSessionManager.session). After
    /// ``invalidateSessionCancelingTasks(_:resetSession:)`` without a reset it is still the
    /// invalidated session (readable, as in AFNetworking); with a reset, the new one.
    public var session: Session { self.core.registry.withLock { $0.session } }

    /// Validates and decodes responses (AFURLSessionManager.responseSerializer). Read when a task
    /// is created: changing it does not affect tasks already created.
    public var responseSerializer: any ResponseSerialization {
        get { self.core.currentSettings.responseSerializer }
        set { self.core.updateSettings { $0.responseSerializer = newValue } }
    }

    /// Where completion handlers run. nil (the default) means a serial queue of this manager —
    /// not the main queue as in AFNetworking (see ``SessionManager``).
    public var completionQueue: DispatchQueue? {
        get { self.core.currentSettings.completionQueue }
        set { self.core.updateSettings { $0.completionQueue = newValue } }
    }

    /// The group completion handlers run in; nil means a private process-wide group.
    public var completionGroup: DispatchGroup? {
        get { self.core.currentSettings.completionGroup }
        set { self.core.updateSettings { $0.completionGroup = newValue } }
    }

    /// Adapts each request before it is sent and decides about retries after failures. Its
    /// `adapt` and `retry` run on the session's event loop (they are async; they must not block).
    public var interceptor: (any RequestInterceptor)? {
        get { self.core.interceptor }
        set {
            self.core.updateSettings { $0.interceptor = newValue }
            self.core.interceptorSet.store(newValue != nil, ordering: .releasing)
        }
    }

    /// Decides about servers' certificate chains (AFURLSessionManager.securityPolicy). Default:
    /// `SecurityPolicy/default` (the chain must verify against the system store and name the
    /// host). Used for every server-trust challenge that no challenge block answers, as
    /// AFURLSessionManager does: an accepted chain is trusted (`.useServerTrust`), a refused one
    /// fails the task with `HawserError` `.serverCertificateUntrusted` (-1202) carrying the URL,
    /// the chain (`peerCertificates`) and the `TrustFailure` saying why. Read at each TLS
    /// handshake; a pooled connection that was already accepted is reused without a new check.
    /// It replaces the configuration's `serverTrustEvaluator` for this manager's tasks.
    ///
    /// Set it with ``setSecurityPolicy(_:)``, which an ``HTTPSessionManager`` uses to refuse a
    /// pinning policy on a base URL that is not https (AFNetworking raises there).
    public var securityPolicy: SecurityPolicy { self.core.currentSettings.securityPolicy }

    /// Sets ``securityPolicy``. A plain `SessionManager` accepts every policy; an
    /// ``HTTPSessionManager`` refuses a pinning policy unless its base URL is https.
    /// - Throws: ``SessionManagerError/invalidSecurityPolicy(_:)`` when the policy is refused
    ///   (the previous policy stays).
    public func setSecurityPolicy(_ policy: SecurityPolicy) throws(SessionManagerError) {
        self.core.updateSettings { $0.securityPolicy = policy }
    }

    /// Watches the network (AFURLSessionManager.reachabilityManager). Made on first use for the
    /// default route; it is not started: call `startMonitoring()` on it. Setting it replaces it
    /// (it is not started or stopped for you). ``waitsForConnectivity`` consults it.
    public var reachabilityManager: NetworkReachabilityManager {
        get {
            self.core.reachabilityState.withLock { r in
                if let r { return r }
                let made = NetworkReachabilityManager()
                r = made
                return made
            }
        }
        set { self.core.reachabilityState.withLock { $0 = newValue } }
    }

    /// Whether a task resumed while ``reachabilityManager`` reports the network not reachable
    /// waits for it to become reachable before it starts (URLSessionConfiguration's
    /// `waitsForConnectivity`; not in AFNetworking). Default false.
    ///
    /// A waiting task is ``SessionTaskState/running``; it starts as soon as the status turns
    /// reachable (or unknown), and fails with `.resourceTimeout` (-1001) if the configuration's
    /// `timeoutIntervalForResource` passes first. When the status is unknown (the manager is not
    /// monitoring, or has no answer yet), tasks start at once. A retry waits the same way.
    public var waitsForConnectivity: Bool {
        get { self.core.waitsFlag.load(ordering: .acquiring) }
        set { self.core.waitsFlag.store(newValue, ordering: .releasing) }
    }

    /// Adds a monitor that sees every step of every task created afterwards or running.
    public func addEventMonitor(_ monitor: any EventMonitor) {
        self.channel.add(monitor)
    }

    func refreshBlockMonitor() {
        let observes = self.hooks.withLock { $0.observes }
        self.channel.setBlocks(observes ? self.blockMonitor : nil)
    }

    // MARK: - Copying

    /// A new manager with the same configuration and settings (AFURLSessionManager's
    /// `copyWithZone:`): its own session, no tasks, the same response serializer, security
    /// policy, completion queue and group, `waitsForConnectivity`. Serializers and policies are
    /// values, so the copy shares no mutable state with this manager; blocks, monitors,
    /// observers, the interceptor and the reachability manager are not copied. The
    /// configuration's cookie jar, cache and credential store are shared, as copies of an
    /// NSURLSessionConfiguration share theirs.
    public func copy() -> SessionManager {
        let copy =
            self.eventLoopGroup.map { SessionManager(configuration: self.configuration, eventLoopGroup: $0) }
            ?? SessionManager(configuration: self.configuration, eventLoop: self.eventLoop)
        copy.copySettings(from: self)
        return copy
    }

    func copySettings(from other: SessionManager) {
        let s = other.core.currentSettings
        self.core.updateSettings { mine in
            mine.responseSerializer = s.responseSerializer
            mine.completionQueue = s.completionQueue
            mine.completionGroup = s.completionGroup
            mine.securityPolicy = s.securityPolicy
        }
        self.waitsForConnectivity = other.waitsForConnectivity
    }

    // MARK: - Tasks

    /// The tasks that have not completed yet.
    public var tasks: [SessionTask] {
        self.core.registry.withLock { Array($0.tasks.values) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }
    /// The data tasks (upload tasks excluded) that have not completed yet.
    public var dataTasks: [DataTask] { self.tasks.compactMap { $0 is UploadTask ? nil : $0 as? DataTask } }
    /// The upload tasks that have not completed yet.
    public var uploadTasks: [UploadTask] { self.tasks.compactMap { $0 as? UploadTask } }
    /// The download tasks that have not completed yet.
    public var downloadTasks: [DownloadTask] { self.tasks.compactMap { $0 as? DownloadTask } }

    /// The upload progress of a task that has not completed; nil otherwise.
    public func uploadProgress(for task: SessionTask) -> TransferProgress? {
        self.isRegistered(task) ? task.uploadProgress : nil
    }

    /// The download progress of a task that has not completed; nil otherwise.
    public func downloadProgress(for task: SessionTask) -> TransferProgress? {
        self.isRegistered(task) ? task.downloadProgress : nil
    }

    private func isRegistered(_ task: SessionTask) -> Bool {
        self.core.registry.withLock { $0.tasks[task.taskIdentifier] === task }
    }

    /// Creates a data task (suspended: call `resume()`). `completionHandler` runs once on the
    /// completion queue with the response, the serialized object and the error. (The handler has no
    /// default, so a trailing closure is always the completion handler, never a progress block.)
    public func dataTask(
        with request: HTTPClientRequest,
        uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> DataTask {
        self.makeDataTask(
            request,
            completion: Self.completion(completionHandler),
            upload: uploadProgress,
            download: downloadProgress
        )
    }

    static func completion(
        _ handler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> TaskDelegate.Completion {
        guard let handler else { return .none }
        return .handler { _, response, object, error in handler(response, object, error) }
    }

    func makeDataTask(
        _ request: HTTPClientRequest,
        completion: TaskDelegate.Completion,
        upload: (@Sendable (TransferProgress) -> Void)? = nil,
        download: (@Sendable (TransferProgress) -> Void)? = nil,
        responseSerializer: (any ResponseSerialization)? = nil
    ) -> DataTask {
        let task = DataTask(identifier: self.core.nextIdentifier(), request: request, core: self.core)
        return self.register(
            task,
            completion: completion,
            upload: upload,
            download: download,
            responseSerializer: responseSerializer
        )
    }

    /// Creates an upload task sending `bodyData` (suspended).
    public func uploadTask(
        with request: HTTPClientRequest,
        from bodyData: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        var r = request
        r.body = .bytes(Array(bodyData))
        return self.makeUpload(
            r,
            preflightError: nil,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    /// Creates an upload task streaming the file at `fileURL` in 64 KiB chunks (suspended). Memory
    /// stays bounded whatever the file's size. An unreadable file fails the task when it is resumed.
    public func uploadTask(
        with request: HTTPClientRequest,
        fromFile fileURL: URL,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        let (r, preflight) = Self.fileUpload(request, fileURL)
        return self.makeUpload(
            r,
            preflightError: preflight,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    /// `request` with the file at `fileURL` as a streamed body, or the error that fails the task
    /// when it is resumed (a file that cannot be opened, or is not a regular file).
    static func fileUpload(_ request: HTTPClientRequest, _ fileURL: URL) -> (HTTPClientRequest, (any Error)?) {
        var r = request
        var preflight: (any Error)? = nil
        let path = fileURL.path
        var size: Int? = nil
        do throws(FileError) {
            let fd = try FileDescriptor.openForReading(path)
            defer { fd.closeIgnoringErrors() }
            size = try fd.regularFileSize()
            if size == nil { preflight = SessionManagerError.cannotReadUploadFile(path: path, errno: EINVAL) }
        } catch {
            preflight = SessionManagerError.cannotReadUploadFile(path: path, errno: error.errnoCode)
        }
        if let size {
            let length = Int64(size)
            r.body = .stream(length: length) { writer in
                try await FileStreamer.stream(path: path, length: length, to: writer)
            }
        }
        return (r, preflight)
    }

    /// Creates an upload task whose request carries its own body — typically a
    /// `RequestBody.stream` (suspended). A streamed body cannot be replayed, so such a task is
    /// never retried.
    public func uploadTask(
        withStreamedRequest request: HTTPClientRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completionHandler: (@Sendable (HawserResponse?, (any Sendable)?, (any Error)?) -> Void)?
    ) -> UploadTask {
        self.makeUpload(
            request,
            preflightError: nil,
            progress: progress,
            completion: Self.completion(completionHandler)
        )
    }

    func makeUpload(
        _ request: HTTPClientRequest,
        preflightError: (any Error)?,
        progress: (@Sendable (TransferProgress) -> Void)?,
        completion: TaskDelegate.Completion
    ) -> UploadTask {
        let task = UploadTask(identifier: self.core.nextIdentifier(), request: request, core: self.core)
        task.preflightError = preflightError
        return self.register(task, completion: completion, upload: progress, download: nil)
    }

    /// Creates a download task (suspended). The body is written to a temporary file as it arrives;
    /// at the end `destination` (given the temporary URL and the response) says where to move it,
    /// and `completionHandler` gets that URL — or the error, also when the move failed.
    public func downloadTask(
        with request: HTTPClientRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        completionHandler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> DownloadTask {
        let task = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: request,
            core: self.core,
            resumeFrom: nil
        )
        return self.register(
            task,
            completion: Self.downloadCompletion(completionHandler),
            destination: destination,
            upload: nil,
            download: progress
        )
    }

    /// Creates a download task that continues from `resumeData` (see ``DownloadResumeData``)
    /// with `Range` + `If-Range`: a 206 appends to the partial file, a 200 (Range ignored, or the
    /// entity changed) starts again from zero, a 416 asks again without Range. Invalid resume data
    /// fails the task when it is resumed.
    public func downloadTask(
        withResumeData resumeData: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        completionHandler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> DownloadTask {
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
        let task = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: request,
            core: self.core,
            resumeFrom: resume
        )
        task.preflightError = preflight
        return self.register(
            task,
            completion: Self.downloadCompletion(completionHandler),
            destination: destination,
            upload: nil,
            download: progress
        )
    }

    static func downloadCompletion(
        _ handler: (@Sendable (HawserResponse?, URL?, (any Error)?) -> Void)?
    ) -> TaskDelegate.Completion {
        guard let handler else { return .none }
        return .handler { _, response, object, error in handler(response, object as? URL, error) }
    }

    /// Gives `task` its delegate and keeps it until it completes.
    func register<T: SessionTask>(
        _ task: T,
        completion: TaskDelegate.Completion,
        destination: (@Sendable (URL, HawserResponse?) -> URL)? = nil,
        upload: (@Sendable (TransferProgress) -> Void)?,
        download: (@Sendable (TransferProgress) -> Void)?,
        responseSerializer: (any ResponseSerialization)? = nil
    ) -> T {
        let delegate = TaskDelegate(
            owner: task,
            core: self.core,
            completion: completion,
            destination: destination,
            responseSerializer: responseSerializer
        )
        task.locked.withLock { $0.delegate = delegate }
        if let upload { task.uploadProgress.addObserver(upload) }
        if let download { task.downloadProgress.addObserver(download) }
        self.core.registry.withLock { $0.tasks[task.taskIdentifier] = task }
        self.core.channel.emit { $0.taskDidCreate(task) }
        return task
    }

    /// The data task's delegate and the engine attempt move to a new download task (AFNetworking's
    /// `didBecomeDownloadTask`). Called on the loop from the data task's delegate.
    func convertToDownload(
        _ dataTask: DataTask,
        delegate: TaskDelegate,
        engine: RequestTask,
        attempt: Int,
        response: HawserResponse
    ) -> DownloadTask {
        let download = DownloadTask(
            identifier: self.core.nextIdentifier(),
            request: dataTask.originalRequest,
            core: self.core,
            resumeFrom: nil
        )
        let current = dataTask.currentRequest
        download.locked.withLock { s in
            s.lifecycle = .continuing(attempt: attempt, engine: engine)
            s.currentRequest = current
            s.response = response
            s.expectedToReceive = response.expectedContentLength
            s.delegate = delegate
        }
        dataTask.locked.withLock { s in
            s.lifecycle.handOver()
            s.delegate = nil
        }
        self.core.registry.withLock { r in
            r.tasks[dataTask.taskIdentifier] = nil
            r.tasks[download.taskIdentifier] = download
            if r.waitingForInvalidation?.remove(dataTask.taskIdentifier) != nil {
                r.waitingForInvalidation?.insert(download.taskIdentifier)
            }
        }
        return download
    }

    // MARK: - Session lifetime

    /// Invalidates the manager's session (AFURLSessionManager `invalidateSessionCancelingTasks:resetSession:`).
    ///
    /// With `cancelPendingTasks` every task is cancelled (NSURLSession's `invalidateAndCancel`);
    /// otherwise running tasks finish (`finishTasksAndInvalidate`). Once the tasks that existed
    /// have completed, ``sessionDidBecomeInvalid`` is called, ``SessionEvent/sessionDidInvalidate(error:)``
    /// posted, and the invalidated session shut down (its connections closed).
    ///
    /// Without `resetSession`, ``session`` stays the invalidated session (readable, as in
    /// AFNetworking) and tasks resumed later fail with ``SessionManagerError/sessionInvalidated``
    /// (NSURLSession raises an exception there). With it, a fresh session replaces the old one at
    /// once and the manager stays usable.
    public func invalidateSessionCancelingTasks(_ cancelPendingTasks: Bool, resetSession: Bool) {
        let pending = self.core.registry.withLock { r -> [SessionTask] in
            let pending = Array(r.tasks.values)
            r.retiring.append(r.session)
            if resetSession {
                r.session = self.core.makeSession()
                r.invalidated = false
            } else {
                r.invalidated = true
            }
            r.waitingForInvalidation = Set(pending.map(\.taskIdentifier)).union(r.waitingForInvalidation ?? [])
            return pending
        }
        if cancelPendingTasks {
            let error = HawserError(.cancelled, "the session was invalidated with its tasks cancelled")
            for t in pending { t.cancel(with: error) }
        }
        let done = self.core.registry.withLock { r -> Bool in
            r.waitingForInvalidation?.isEmpty ?? false
        }
        if done { self.core.finishInvalidation() }
    }

    /// The name this method had before it took AFNetworking's.
    @available(*, deprecated, renamed: "invalidateSessionCancelingTasks(_:resetSession:)")
    public func invalidateSession(cancelingPendingTasks: Bool, resetSession: Bool = false) {
        self.invalidateSessionCancelingTasks(cancelingPendingTasks, resetSession: resetSession)
    }

    // MARK: - Events

    /// Calls `handler` with every event of this manager (AFNetworking's notifications), in order,
    /// on a serial queue of the manager. Thread-safe.
    @discardableResult
    public func addObserver(_ handler: @escaping @Sendable (SessionEvent) -> Void) -> SessionObserverToken {
        let (token, first) = self.hub.add(handler)
        if first { self.channel.setHub(self.hub) }
        return token
    }

    /// Stops delivering events to the observer registered with `token`.
    public func removeObserver(_ token: SessionObserverToken) {
        if self.hub.remove(token) { self.channel.setHub(nil) }
    }

    /// The manager's events as an AsyncSequence. Each call makes a new subscription, which ends
    /// when the consuming task stops iterating.
    public func events(
        bufferingPolicy: AsyncStream<SessionEvent>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<SessionEvent> {
        AsyncStream(bufferingPolicy: bufferingPolicy) { continuation in
            let token = self.addObserver { continuation.yield($0) }
            continuation.onTermination = { [weak self] _ in self?.removeObserver(token) }
        }
    }

    // MARK: - Blocks

    /// Called once the session was invalidated and its tasks ended (URLSession:didBecomeInvalidWithError:).
    public var sessionDidBecomeInvalid: (@Sendable ((any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.sessionDidBecomeInvalid } }
        set {
            self.hooks.withLock { $0.sessionDidBecomeInvalid = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// Answers the challenges no task-level block answered: the server's TLS chain and, once the
    /// engine asks, 401/407 (URLSession:didReceiveChallenge:completionHandler:). Return the
    /// disposition; `.useCredential(_:)` carries the credential. With this block set, the
    /// ``securityPolicy`` is not consulted: the block decides. Called on the event loop: be quick.
    public var sessionDidReceiveAuthenticationChallenge: (@Sendable (AuthenticationChallenge) -> ChallengeDisposition)?
    {
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
    public var taskWillPerformHTTPRedirection:
        (@Sendable (SessionTask, HawserResponse, HTTPClientRequest) -> HTTPClientRequest?)?
    {
        get { self.hooks.withLock { $0.taskWillPerformHTTPRedirection } }
        set { self.hooks.withLock { $0.taskWillPerformHTTPRedirection = newValue } }
    }
    /// Answers a task's challenges (URLSession:task:didReceiveChallenge:completionHandler:): the
    /// server's TLS chain on a connection opened for the task, and 401/407 once the engine asks.
    /// Return the disposition; `.useCredential(_:)` carries the credential, and
    /// `.performDefaultHandling` hands the challenge on to ``sessionDidReceiveAuthenticationChallenge``
    /// or, without it, to the ``securityPolicy`` (server trust) or the engine. With this block set,
    /// the policy is not consulted unless the block defers. Called on the event loop: be quick.
    public var taskDidReceiveAuthenticationChallenge:
        (@Sendable (SessionTask, AuthenticationChallenge) -> ChallengeDisposition)?
    {
        get { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge } }
        set { self.hooks.withLock { $0.taskDidReceiveAuthenticationChallenge = newValue } }
    }
    /// Upload progress: (task, bytes sent now, total sent, total expected or -1).
    public var taskDidSendBodyData: (@Sendable (SessionTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.taskDidSendBodyData } }
        set {
            self.hooks.withLock { $0.taskDidSendBodyData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A task completed, before its completion handler (URLSession:task:didCompleteWithError:).
    /// Called where the task completed (usually the event loop): be quick.
    public var taskDidComplete: (@Sendable (SessionTask, (any Error)?) -> Void)? {
        get { self.hooks.withLock { $0.taskDidComplete } }
        set {
            self.hooks.withLock { $0.taskDidComplete = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A task's metrics are final (URLSession:task:didFinishCollectingMetrics:), before didComplete.
    public var taskDidFinishCollectingMetrics: (@Sendable (SessionTask, TaskMetrics) -> Void)? {
        get { self.hooks.withLock { $0.taskDidFinishCollectingMetrics } }
        set {
            self.hooks.withLock { $0.taskDidFinishCollectingMetrics = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A data task's response head arrived: allow, cancel, or become a download.
    public var dataTaskDidReceiveResponse: (@Sendable (DataTask, HawserResponse) -> ResponseDisposition)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveResponse } }
        set {
            self.hooks.withLock { $0.dataTaskDidReceiveResponse = newValue }
            self.core.responseBlockSet.store(newValue != nil, ordering: .releasing)
        }
    }
    /// A data task became a download task (after ``ResponseDisposition/becomeDownload``).
    public var dataTaskDidBecomeDownloadTask: (@Sendable (DataTask, DownloadTask) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask } }
        set {
            self.hooks.withLock { $0.dataTaskDidBecomeDownloadTask = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A data task received body bytes (a copy; setting this block costs one copy per chunk).
    public var dataTaskDidReceiveData: (@Sendable (DataTask, Data) -> Void)? {
        get { self.hooks.withLock { $0.dataTaskDidReceiveData } }
        set {
            self.hooks.withLock { $0.dataTaskDidReceiveData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// Whether a response may be stored in the session's HTTP cache
    /// (URLSession:dataTask:willCacheResponse:; false = do not store). Called only when the
    /// configuration has a `urlCache` and the response is storable.
    public var dataTaskWillCacheResponse: (@Sendable (DataTask, HawserResponse) -> Bool)? {
        get { self.hooks.withLock { $0.dataTaskWillCacheResponse } }
        set { self.hooks.withLock { $0.dataTaskWillCacheResponse = newValue } }
    }
    /// Where to move a finished download (given the temporary file); takes precedence over the
    /// task's destination when it returns a URL. Called on the completion queue (or in the
    /// awaiting task), before the completion handler.
    public var downloadTaskDidFinishDownloading: (@Sendable (DownloadTask, URL) -> URL?)? {
        get { self.hooks.withLock { $0.downloadTaskDidFinishDownloading } }
        set { self.hooks.withLock { $0.downloadTaskDidFinishDownloading = newValue } }
    }
    /// Download progress: (task, bytes written now, total written, total expected or -1).
    public var downloadTaskDidWriteData: (@Sendable (DownloadTask, Int64, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidWriteData } }
        set {
            self.hooks.withLock { $0.downloadTaskDidWriteData = newValue }
            self.refreshBlockMonitor()
        }
    }
    /// A download resumed: (task, file offset it continues from, expected total or -1). A server
    /// that ignored Range gives offset 0.
    public var downloadTaskDidResume: (@Sendable (DownloadTask, Int64, Int64) -> Void)? {
        get { self.hooks.withLock { $0.downloadTaskDidResume } }
        set {
            self.hooks.withLock { $0.downloadTaskDidResume = newValue }
            self.refreshBlockMonitor()
        }
    }

    // MARK: - async

    /// Runs a data task for `request` and returns the serialized object and the response.
    /// Cancelling the calling Swift task cancels the task.
    ///
    /// The awaiting task is the completion here: the response serializer runs in it once the
    /// task ends (off the event loop), and ``completionQueue`` and ``completionGroup`` are not
    /// used, since there is no handler to call. The didFinish event is sent before this returns.
    /// The async forms of ``HTTPSessionManager`` (`get`, `post`, …) come through here.
    ///
    /// `responseSerializer`, when given, validates and decodes this response instead of the
    /// manager's ``responseSerializer``, which stays as it is: concurrent calls with different
    /// serializers share nothing.
    public func data(
        for request: HTTPClientRequest,
        responseSerializer: (any ResponseSerialization)? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let task = self.makeDataTask(request, completion: .awaiting, responseSerializer: responseSerializer)
        return try await Self.outcome(of: task).value()
    }

    /// Resumes a task made with the `.awaiting` completion and waits for its outcome. Cancelling
    /// the calling Swift task cancels the task.
    static func outcome(of task: SessionTask) async -> TaskOutcome {
        guard let delegate = task.delegate else {
            preconditionFailure("an awaited task is resumed once, right after it was made")
        }
        return await withTaskCancellationHandler {
            // Unsafe is sound: the lifecycle completes a task exactly once, and the delegate's
            // slot hands the outcome over once, whichever of the two arrives first.
            await withUnsafeContinuation { (continuation: UnsafeContinuation<TaskOutcome, Never>) in
                delegate.install(continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }
}

/// Reads a file in bounded chunks into a streamed request body.
enum FileStreamer {
    static let chunkSize = 64 * 1024

    static func stream(path: String, length: Int64, to writer: RequestBodyWriter) async throws {
        let fd: FileDescriptor
        do throws(FileError) { fd = try FileDescriptor.openForReading(path) } catch {
            throw SessionManagerError.cannotReadUploadFile(path: path, errno: error.errnoCode)
        }
        defer { fd.closeIgnoringErrors() }
        var remaining = length
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while remaining > 0 {
            let want = Int(min(Int64(chunkSize), remaining))
            let read: Result<Int, FileError> = buffer.withUnsafeMutableBytes { raw in
                do throws(FileError) {
                    return .success(try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want])))
                } catch {
                    return .failure(error)
                }
            }
            let n: Int
            switch read {
            case .success(let count): n = count
            case .failure(let e): throw SessionManagerError.cannotReadUploadFile(path: path, errno: e.errnoCode)
            }
            if n == 0 {
                throw SessionManagerError.cannotReadUploadFile(path: path, errno: EIO)  // the file shrank
            }
            try await writer.write(n == chunkSize ? buffer : Array(buffer[0..<n]))
            remaining -= Int64(n)
        }
    }
}
