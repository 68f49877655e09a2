import Dispatch
import HawserCore
import Synchronization

// What a manager's tasks hold of it: its settings (replaced as a whole) and its core (the
// registry of tasks, the sessions, the flags read per request, the blocks and the event channel).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
