import Dispatch
import HawserCore
import Synchronization

// AFURLSessionManager: owns a Session, its settings, its session lifetime and its observers.
// Its other parts: ManagerCore.swift (what tasks hold of it), SessionManager+Tasks.swift (task
// creation), ManagerBlocks.swift (the block properties), SessionEvents.swift (the event channel),
// ManagerChallenges.swift, and in Tasks/: AsyncTransfers.swift (the async API), FileStreamer.swift.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
    let blockMonitor: BlockMonitor

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
}
