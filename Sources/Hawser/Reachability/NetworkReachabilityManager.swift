import HawserCore
import HawserReachability
import Synchronization

// AFNetworkReachabilityManager's API on Linux: HawserReachability's RouteMonitor asks the kernel over
// netlink whether a usable route exists (and re-asks on every link, address or route change);
// this type maps that answer to AFNetworking's statuses and delivers it AFNetworking's ways:
// a status block, process-wide observers (where AF posts its notification; HawserFoundation
// turns them into that notification), and here also an observer API and an AsyncStream.
#if canImport(Dispatch)
import Dispatch
#endif

/// Watches whether the network, or one host, can be reached, like AFNetworking's
/// `AFNetworkReachabilityManager` (and Alamofire's `NetworkReachabilityManager`).
///
/// Reachability means "the kernel has a usable route": a route to the destination (the default
/// route when no host is given), leaving through an interface that is up, has a carrier and has
/// an address. It does not mean a server answers: a request can still fail, and AFNetworking's
/// advice stands: do not check reachability before a request, use it to retry after a failure.
///
/// ```swift
/// let manager = NetworkReachabilityManager.shared
/// manager.setReachabilityStatusChangeBlock { status in print(status) }
/// manager.startMonitoring()
/// ```
///
/// Status mapping on Linux:
/// - ``NetworkReachabilityStatus/reachableViaWiFi``: the route leaves through a Wi-Fi interface
///   (sysfs `wireless` or `DEVTYPE=wlan`; only detectable in the process's own namespace).
/// - ``NetworkReachabilityStatus/reachableViaEthernet``: any other interface: Ethernet, veth,
///   bridges, loopback, tunnels. ``interface`` tells which.
/// - ``NetworkReachabilityStatus/reachableViaWWAN`` is kept for source compatibility and never
///   reported: Linux has no cellular interface type.
///
/// Threads: the status block, the observers and the process observers (the notification) run on ``callbackQueue`` (a
/// serial queue), one change at a time, in order. When ``stopMonitoring()`` returns, none of them
/// is running (unless it is the caller) and none will run for that monitoring session.
///
/// Containers: `networkNamespace` (a path like `/var/run/netns/NAME` or `/proc/PID/ns/net`)
/// watches another network namespace's routes and links (entering it needs `CAP_SYS_ADMIN`).
public final class NetworkReachabilityManager: @unchecked Sendable {
    /// AFNetworking's `AFNetworkReachabilityStatus`, with the same raw values, plus Ethernet.
    public enum NetworkReachabilityStatus: Int, Sendable, Hashable, CustomStringConvertible {
        /// Not known yet (not monitoring, or the first answer has not arrived).
        case unknown = -1
        /// No usable route.
        case notReachable = 0
        /// Never reported on Linux (kept so AFNetworking-style code compiles).
        case reachableViaWWAN = 1
        /// Reachable through a Wi-Fi interface.
        case reachableViaWiFi = 2
        /// Reachable through a wired or other non-Wi-Fi interface (Ethernet, veth, loopback, tunnels).
        case reachableViaEthernet = 3

        /// AFNetworking's `AFStringFromNetworkReachabilityStatus` text.
        public var localizedDescription: String {
            switch self {
            case .unknown: return "Unknown"
            case .notReachable: return "Not Reachable"
            case .reachableViaWWAN: return "Reachable via WWAN"
            case .reachableViaWiFi: return "Reachable via WiFi"
            case .reachableViaEthernet: return "Reachable via Ethernet"
            }
        }

        public var description: String { self.localizedDescription }

        /// True for every reachable case.
        public var isReachable: Bool {
            switch self {
            case .reachableViaWWAN, .reachableViaWiFi, .reachableViaEthernet: return true
            case .unknown, .notReachable: return false
            }
        }

        /// Maps the engine's answer.
        public init(_ route: RouteStatus) {
            switch route {
            case .unknown: self = .unknown
            case .notReachable: self = .notReachable
            case .reachable(let via): self = via.kind == .wifi ? .reachableViaWiFi : .reachableViaEthernet
            }
        }
    }

    /// One delivered change: the status, the interface of the route (nil unless reachable) and,
    /// when not reachable, the kernel-side reason.
    public struct Change: Sendable, Hashable {
        /// The new status.
        public var status: NetworkReachabilityStatus
        /// The interface the default route now leaves through; nil unless reachable.
        public var interface: NetworkInterface?
        /// When not reachable, which check failed, in words (no route, a route that is not
        /// unicast, a route without an output interface…); nil otherwise.
        public var reason: String?
    }

    /// A registered observer; pass it to ``removeObserver(_:)``.
    public struct Observation: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    /// The `userInfo` key of the `reachabilityDidChange` notification (HawserFoundation) that
    /// holds the status (AF's `AFNetworkingReachabilityNotificationStatusItem`).
    public static let statusUserInfoKey = "HawserNetworkingReachabilityNotificationStatusItem"

    /// A manager for the default route, shared by the process (AFNetworking's `sharedManager`).
    public static let shared = NetworkReachabilityManager()

    /// What is watched: the default route, an address or a host name.
    public let target: RouteTarget
    /// The network namespace watched (nil: this process's).
    public let networkNamespace: String?
    /// The serial queue the status block, observers and process observers run on.
    public let callbackQueue: DispatchQueue
    /// The event loop the netlink sockets run on.
    public let eventLoop: EventLoop

    private struct State {
        var monitor: RouteMonitor?
        var monitoring = false
        var session: UInt64 = 0
        var status: NetworkReachabilityStatus = .unknown
        var interface: NetworkInterface?
        var lastError: RouteMonitorError?
    }
    private let state = Mutex(State())
    private let shared: Shared

    // MARK: - Creating

    /// Watches `target` (in `networkNamespace`, when given). Opens the netlink sockets now, so a
    /// missing namespace or a kernel without netlink fails here, with the reason.
    ///
    /// - Parameters:
    ///   - target: the default route, a numeric address or a host name.
    ///   - networkNamespace: a network-namespace file to watch instead of this process's namespace.
    ///   - callbackQueue: where the status block, observers and process observers run (default: a
    ///     private serial queue).
    ///   - eventLoop: the loop the sockets run on (default: one of the shared group's).
    public convenience init(
        target: RouteTarget,
        networkNamespace: String? = nil,
        callbackQueue: DispatchQueue? = nil,
        eventLoop: EventLoop = EventLoopGroup.shared.next()
    ) throws(RouteMonitorError) {
        let monitor = try RouteMonitor(target: target, networkNamespace: networkNamespace, eventLoop: eventLoop)
        self.init(
            target: target,
            networkNamespace: networkNamespace,
            callbackQueue: callbackQueue,
            eventLoop: eventLoop,
            monitor: monitor,
            error: nil
        )
    }

    /// Watches the default route (AFNetworking's `manager`: the "zero address"). Never fails:
    /// if netlink cannot be opened now, ``startMonitoring()`` tries again and reports why.
    public convenience init() {
        let loop = EventLoopGroup.shared.next()
        do {
            let monitor = try RouteMonitor(target: .defaultRoute, eventLoop: loop)
            self.init(
                target: .defaultRoute,
                networkNamespace: nil,
                callbackQueue: nil,
                eventLoop: loop,
                monitor: monitor,
                error: nil
            )
        } catch {
            self.init(
                target: .defaultRoute,
                networkNamespace: nil,
                callbackQueue: nil,
                eventLoop: loop,
                monitor: nil,
                error: error
            )
        }
    }

    /// Watches the route to a host name (AFNetworking's `managerForDomain:`). The name is
    /// resolved off the loop, again after every network change. Returns nil for an empty or
    /// over-long name, or when netlink cannot be opened.
    public convenience init?(domain: String) {
        guard let m = try? RouteMonitor(target: .host(domain)) else { return nil }
        self.init(
            target: .host(domain),
            networkNamespace: nil,
            callbackQueue: nil,
            eventLoop: m.eventLoop,
            monitor: m,
            error: nil
        )
    }

    /// Watches the route to a numeric IPv4 or IPv6 address (AFNetworking's `managerForAddress:`).
    /// Returns nil when `address` is not a numeric address, or when netlink cannot be opened.
    public convenience init?(address: String) {
        guard let a = SocketAddress(ipAddress: address, port: 0),
            let m = try? RouteMonitor(target: .address(a))
        else { return nil }
        self.init(
            target: .address(a),
            networkNamespace: nil,
            callbackQueue: nil,
            eventLoop: m.eventLoop,
            monitor: m,
            error: nil
        )
    }

    private init(
        target: RouteTarget,
        networkNamespace: String?,
        callbackQueue: DispatchQueue?,
        eventLoop: EventLoop,
        monitor: RouteMonitor?,
        error: RouteMonitorError?
    ) {
        self.target = target
        self.networkNamespace = networkNamespace
        self.callbackQueue = callbackQueue ?? DispatchQueue(label: "hawser.reachability")
        self.eventLoop = eventLoop
        self.shared = Shared()
        self.state.withLock {
            $0.monitor = monitor
            $0.lastError = error
        }
        self.shared.owner = WeakManager(self)
    }

    deinit {
        self.stopMonitoring()
        self.shared.finishStreams()
    }

    // MARK: - Status

    /// The current status (``NetworkReachabilityStatus/unknown`` until the first answer). It
    /// changes on ``callbackQueue`` just before the block and observers run.
    public var networkReachabilityStatus: NetworkReachabilityStatus { self.state.withLock { $0.status } }

    /// The interface of the usable route, nil unless reachable.
    public var interface: NetworkInterface? { self.state.withLock { $0.interface } }

    /// Whether the network (or host) is reachable.
    public var isReachable: Bool { self.networkReachabilityStatus.isReachable }

    /// Always false on Linux (no cellular interface type).
    public var isReachableViaWWAN: Bool { self.networkReachabilityStatus == .reachableViaWWAN }

    /// Whether the route leaves through Wi-Fi.
    public var isReachableViaWiFi: Bool { self.networkReachabilityStatus == .reachableViaWiFi }

    /// Whether the route leaves through a wired or other non-Wi-Fi interface.
    public var isReachableViaEthernet: Bool { self.networkReachabilityStatus == .reachableViaEthernet }

    /// The current status as text ("Reachable via WiFi", …), AFNetworking's wording.
    public var localizedNetworkReachabilityStatusString: String { self.networkReachabilityStatus.localizedDescription }

    /// Why monitoring could not start (the netlink sockets could not be opened), if it could not.
    public var monitoringError: RouteMonitorError? { self.state.withLock { $0.lastError } }

    // MARK: - Monitoring

    /// Sets the block run on ``callbackQueue`` with each new status (replacing any earlier block).
    public func setReachabilityStatusChangeBlock(_ block: (@Sendable (NetworkReachabilityStatus) -> Void)?) {
        self.shared.setBlock(block)
    }

    /// Starts monitoring (stopping an earlier session first). The status becomes ``NetworkReachabilityStatus/unknown``
    /// until the first answer. Returns false, and sets ``monitoringError``, when the netlink
    /// sockets cannot be opened (e.g. the namespace was deleted).
    @discardableResult
    public func startMonitoring() -> Bool {
        self.stopMonitoring()
        let created: Result<RouteMonitor, RouteMonitorError> = {
            if let m = self.state.withLock({ $0.monitor }) { return .success(m) }
            return Result { () throws(RouteMonitorError) in
                try RouteMonitor(
                    target: self.target,
                    networkNamespace: self.networkNamespace,
                    eventLoop: self.eventLoop
                )
            }
        }()
        let monitor: RouteMonitor
        switch created {
        case .success(let m): monitor = m
        case .failure(let e):
            self.state.withLock { $0.lastError = e }
            return false
        }
        let session = self.state.withLock { s -> UInt64 in
            s.monitor = monitor
            s.monitoring = true
            s.session &+= 1
            s.status = .unknown
            s.interface = nil
            s.lastError = nil
            return s.session
        }
        self.shared.open(session: session)
        let queue = self.callbackQueue
        let shared = self.shared
        do {
            try monitor.start { route in
                var reason: String?
                var interface: NetworkInterface?
                switch route {
                case .notReachable(let r): reason = r
                case .reachable(let i): interface = i
                case .unknown: break
                }
                let change = Change(status: NetworkReachabilityStatus(route), interface: interface, reason: reason)
                queue.async { shared.deliver(change, session: session) }
            }
        } catch {
            self.shared.close()
            self.state.withLock {
                $0.monitoring = false
                $0.lastError = error
            }
            return false
        }
        return true
    }

    /// Stops monitoring and closes the netlink sockets. When this returns, the status block and
    /// observers are not running (unless this is called from one of them) and are not called
    /// again for this session. The status keeps its last value. Safe to call more than once.
    public func stopMonitoring() {
        let monitor = self.state.withLock { s -> RouteMonitor? in
            guard s.monitoring else { return nil }
            s.monitoring = false
            return s.monitor
        }
        guard let monitor else { return }
        self.shared.close()
        monitor.stop()
    }

    /// Whether ``startMonitoring()`` is in effect.
    public var isMonitoring: Bool { self.state.withLock { $0.monitoring } }

    fileprivate func apply(_ change: Change, session: UInt64) -> Bool {
        self.state.withLock { s in
            guard s.monitoring, s.session == session else { return false }
            if s.status == change.status && s.interface == change.interface { return false }
            let statusChanged = s.status != change.status
            s.status = change.status
            s.interface = change.interface
            return statusChanged
        }
    }

    // MARK: - Observing

    /// Registers `observer`, run on ``callbackQueue`` with every status change after the status
    /// block. Keep the returned token to remove it.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (Change) -> Void) -> Observation {
        self.shared.addObserver(observer)
    }

    /// Removes an observer; when this returns it is not running (unless this is called from it).
    public func removeObserver(_ observation: Observation) {
        self.shared.removeObserver(observation)
    }

    /// The status changes as an async sequence, starting with the next change. The stream ends
    /// when the manager is deallocated or the consuming task stops iterating; each call returns
    /// a new, independent stream. Changes are buffered (newest 16) if the consumer is slow.
    public func changes() -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream<Change>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let token = self.shared.addStream(continuation)
        continuation.onTermination = { [weak shared = self.shared] _ in shared?.removeStream(token) }
        return stream
    }
}

// MARK: - Delivery

private final class WeakManager: @unchecked Sendable {
    weak var manager: NetworkReachabilityManager?
    init(_ m: NetworkReachabilityManager) { self.manager = m }
}

/// The process-wide observers (``NetworkReachabilityManager/addProcessObserver(_:)``).
private let processObservers = Locked<
    (next: UInt64, list: [(UInt64, @Sendable (NetworkReachabilityManager, NetworkReachabilityManager.Change) -> Void)])
>((0, []))

extension NetworkReachabilityManager {
    /// Runs `observer` for every status change of every monitoring manager in the process, on
    /// that manager's callback queue, after its status block and its own observers: where
    /// AFNetworking posts `AFNetworkingReachabilityDidChangeNotification`. HawserFoundation
    /// posts `Notification.Name.reachabilityDidChange` from one of these.
    @discardableResult
    public static func addProcessObserver(
        _ observer: @escaping @Sendable (NetworkReachabilityManager, Change) -> Void
    ) -> Observation {
        processObservers.withLock { state in
            state.next &+= 1
            state.list.append((state.next, observer))
            return Observation(id: state.next)
        }
    }

    /// Stops a ``addProcessObserver(_:)`` observer; a delivery already running may still call it.
    public static func removeProcessObserver(_ observation: Observation) {
        processObservers.withLock { $0.list.removeAll { $0.0 == observation.id } }
    }
}

/// The delivery side, shared with the monitor's handler without keeping the manager alive.
/// Deliveries run under a recursive lock and only while the session is open, so `close()`
/// (which takes the lock) returns only once no delivery is running and none will start.
private final class Shared: @unchecked Sendable {
    private let lock = RecursiveLock()
    private var session: UInt64 = 0
    private var isOpen = false
    private var block: (@Sendable (NetworkReachabilityManager.NetworkReachabilityStatus) -> Void)?
    private var observers: [(UInt64, @Sendable (NetworkReachabilityManager.Change) -> Void)] = []
    private var streams: [UInt64: AsyncStream<NetworkReachabilityManager.Change>.Continuation] = [:]
    private var nextID: UInt64 = 0
    var owner: WeakManager?

    func open(session: UInt64) {
        self.lock.withLock {
            self.session = session
            self.isOpen = true
        }
    }

    func close() {
        self.lock.withLock { self.isOpen = false }
    }

    func setBlock(_ b: (@Sendable (NetworkReachabilityManager.NetworkReachabilityStatus) -> Void)?) {
        self.lock.withLock { self.block = b }
    }

    func addObserver(
        _ o: @escaping @Sendable (NetworkReachabilityManager.Change) -> Void
    ) -> NetworkReachabilityManager.Observation {
        self.lock.withLock {
            self.nextID &+= 1
            self.observers.append((self.nextID, o))
            return NetworkReachabilityManager.Observation(id: self.nextID)
        }
    }

    func removeObserver(_ o: NetworkReachabilityManager.Observation) {
        self.lock.withLock { self.observers.removeAll { $0.0 == o.id } }
    }

    func addStream(_ c: AsyncStream<NetworkReachabilityManager.Change>.Continuation) -> UInt64 {
        self.lock.withLock {
            self.nextID &+= 1
            self.streams[self.nextID] = c
            return self.nextID
        }
    }

    func removeStream(_ id: UInt64) {
        // Not under the delivery lock's wait: onTermination can run while a delivery holds it
        // on another thread, and only needs the map to be consistent.
        _ = self.lock.withLock { self.streams.removeValue(forKey: id) }
    }

    func finishStreams() {
        let all = self.lock.withLock { () -> [AsyncStream<NetworkReachabilityManager.Change>.Continuation] in
            let s = Array(self.streams.values)
            self.streams.removeAll()
            return s
        }
        for c in all { c.finish() }
    }

    /// On the callback queue: applies the change to the manager's status, then runs the block,
    /// the observers, the process observers and the streams, unless the session was closed.
    func deliver(_ change: NetworkReachabilityManager.Change, session: UInt64) {
        self.lock.withLock {
            guard self.isOpen, self.session == session, let manager = self.owner?.manager else { return }
            guard manager.apply(change, session: session) else { return }
            self.block?(change.status)
            for (_, o) in self.observers {
                guard self.isOpen, self.session == session else { return }  // a callback may stop monitoring
                o(change)
            }
            for (_, o) in processObservers.withLock({ $0.list }) {
                guard self.isOpen, self.session == session else { return }
                o(manager, change)
            }
            guard self.isOpen, self.session == session else { return }
            for c in self.streams.values { c.yield(change) }
        }
    }
}
