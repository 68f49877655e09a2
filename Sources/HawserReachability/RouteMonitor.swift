// Reachability from the kernel's routing table, watched over netlink.
//
// Theory of operation
// -------------------
// A monitor owns two NETLINK_ROUTE sockets, both non-blocking and close-on-exec:
//   * the *event* socket joins the link, IPv4/IPv6 address and IPv4/IPv6 route multicast
//     groups. Any message on it (or ENOBUFS, which means notifications were dropped) only
//     marks the state dirty; bursts (a link going down removes its addresses and routes, one
//     message each) are coalesced by a short timer into one evaluation.
//   * the *query* socket has no groups, so nothing but answers to our own requests ever lands
//     on it and one outstanding request cannot overflow it. Requests go out one at a time (the
//     kernel runs one dump per socket).
// An evaluation asks the kernel: RTM_GETROUTE for each destination (the default route of
// each family when no host is given; the host's addresses, resolved off the loop with
// getaddrinfo on every evaluation, otherwise), then dumps links and addresses. The path is
// usable when the route is unicast or local, and its output interface is up, running (has a
// carrier) and holds a usable address. The result is delivered only when it changes.
//
// All of this runs on one event loop thread. The public `RouteMonitor` is the owner: it
// opens and closes sockets, and its `stop()` returns only when no handler can run any more
// and both sockets are closed (it waits for the loop unless called on it).
//
// A monitor can watch another network namespace (a container's): its sockets are created on a
// short-lived thread that enters the namespace with setns(2) and leaves it again; a socket
// stays bound to the namespace it was created in, so every query and notification on it is
import HawserPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What kind of network interface a usable route leaves through.
public enum InterfaceKind: Sendable, Hashable, CustomStringConvertible {
    /// Ethernet (and anything else with an Ethernet hardware type: veth, bridges, most VMs' NICs).
    case wired
    /// Wi-Fi: the interface has `/sys/class/net/IF/wireless` or `DEVTYPE=wlan` in its uevent.
    /// Only detectable for interfaces of the process's own namespace (sysfs shows that one).
    case wifi
    /// The loopback interface (the destination is this host).
    case loopback
    /// Anything else: tunnels, PPP, WireGuard, … (Linux has no cellular/WWAN type to report).
    case other

    public var description: String {
        switch self {
        case .wired: return "wired"
        case .wifi: return "Wi-Fi"
        case .loopback: return "loopback"
        case .other: return "other"
        }
    }
}

/// The interface a usable route leaves through.
public struct NetworkInterface: Sendable, Hashable, CustomStringConvertible {
    /// The kernel's interface index (in the monitored namespace).
    public var index: Int32
    /// The interface name (`eth0`, `wlan0`, …).
    public var name: String
    /// Wired, Wi-Fi, loopback or other.
    public var kind: InterfaceKind

    /// Creates a description of an interface from its index, name and kind.
    public init(index: Int32, name: String, kind: InterfaceKind) {
        self.index = index
        self.name = name
        self.kind = kind
    }

    public var description: String { "\(self.name) (#\(self.index), \(self.kind))" }
}

/// The answer to "is there a usable route to the target?".
public enum RouteStatus: Sendable, Hashable, CustomStringConvertible {
    /// Not evaluated yet (or the monitor could not ask the kernel).
    case unknown
    /// No usable route; the reason says which check failed.
    case notReachable(reason: String)
    /// A usable route through this interface.
    case reachable(via: NetworkInterface)

    /// True for `.reachable`.
    public var isReachable: Bool {
        if case .reachable = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .unknown: return "unknown"
        case .notReachable(let r): return "not reachable (\(r))"
        case .reachable(let i): return "reachable via \(i)"
        }
    }
}

/// What a ``RouteMonitor`` watches the route to.
public enum RouteTarget: Sendable, Hashable, CustomStringConvertible {
    /// The default route of either IP family ("is this machine on a network at all").
    case defaultRoute
    /// A numeric IPv4 or IPv6 address (the port is ignored).
    case address(SocketAddress)
    /// A host name, resolved with getaddrinfo off the loop, again on every change.
    case host(String)

    public var description: String {
        switch self {
        case .defaultRoute: return "the default route"
        case .address(let a): return a.ipAddress
        case .host(let h): return h
        }
    }
}

/// Why a ``RouteMonitor`` could not be created or started.
public struct RouteMonitorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What failed, in words.
    public var message: String
    /// The errno of the failing system call, if one failed.
    public var errnoCode: Int32?

    /// Creates an error that says what failed, with the errno of the failing call when there was one.
    public init(_ message: String, errnoCode: Int32? = nil) {
        self.message = message
        self.errnoCode = errnoCode
    }

    public var description: String {
        if let e = self.errnoCode { return "\(self.message): \(String(cString: strerror(e))) (errno \(e))" }
        return self.message
    }
}

/// Watches whether a usable route to a target exists, on an `EventLoop`, through netlink.
///
/// ```swift
/// let monitor = try RouteMonitor(target: .host("example.com"))
/// try monitor.start { status in print(status) }   // on the loop's thread
/// …
/// monitor.stop()                                  // no handler call after this returns
/// ```
///
/// - The handler runs on the monitor's event loop thread, once with the first result and then
///   whenever the result changes. It must not block.
/// - `networkNamespace` (a path such as `/var/run/netns/NAME` or `/proc/PID/ns/net`) watches
///   another network namespace, e.g. a container's. Entering it needs `CAP_SYS_ADMIN`. Host
///   names are still resolved with this process's resolver configuration.
/// - `stop()` (and `deinit`) close both sockets; the monitor can be started again.
public final class RouteMonitor: @unchecked Sendable {
    /// What the monitor watches.
    public let target: RouteTarget
    /// The network namespace watched (nil: the process's own).
    public let networkNamespace: String?
    /// The loop the monitor runs on.
    public let eventLoop: EventLoop
    /// How long a burst of netlink notifications is gathered before one re-evaluation.
    public let coalescingDelay: Duration

    private struct State {
        var sockets: RouteSockets?
        var core: RouteMonitorCore?
        var run: UInt64 = 0
        var status: RouteStatus = .unknown
    }
    private let state = Mutex(State())
    private let gate = DeliveryGate()

    /// Creates a monitor and opens its netlink sockets (so a bad namespace fails here).
    ///
    /// - Parameters:
    ///   - target: the default route, an address or a host name.
    ///   - networkNamespace: a namespace file to watch instead of the process's own namespace.
    ///   - eventLoop: the loop to run on (default: one of the shared group's).
    ///   - coalescingDelay: how long to gather a burst of changes (default 50 ms).
    public init(
        target: RouteTarget = .defaultRoute,
        networkNamespace: String? = nil,
        eventLoop: EventLoop = EventLoopGroup.shared.next(),
        coalescingDelay: Duration = .milliseconds(50)
    ) throws(RouteMonitorError) {
        if case .host(let h) = target {
            guard !h.isEmpty, h.utf8.count <= 253, !h.utf8.contains(0) else {
                throw RouteMonitorError("'\(h)' is not a valid host name")
            }
        }
        self.target = target
        self.networkNamespace = networkNamespace
        self.eventLoop = eventLoop
        self.coalescingDelay = coalescingDelay
        let sockets = try RouteSockets.open(namespace: networkNamespace)
        self.state.withLock { $0.sockets = sockets }
    }

    deinit {
        self.stop()
        // Sockets opened by init (or a failed start) but never handed to a core.
        self.state.withLock { s in
            s.sockets?.close()
            s.sockets = nil
        }
    }

    /// The latest result (``RouteStatus/unknown`` until the first evaluation).
    public var status: RouteStatus { self.state.withLock { $0.status } }

    /// True between `start` and `stop`.
    public var isRunning: Bool { self.state.withLock { $0.core != nil } }

    /// Starts watching; `handler` runs on the loop thread with the first result and each change.
    /// Starting a running monitor replaces its handler and re-evaluates. After `stop()`, the
    /// sockets are opened again (which can fail, e.g. when the namespace has been deleted).
    public func start(_ handler: @escaping @Sendable (RouteStatus) -> Void) throws(RouteMonitorError) {
        self.stop()
        let sockets: RouteSockets = try {
            () throws(RouteMonitorError) -> RouteSockets in
            if let s = self.state.withLock({ s -> RouteSockets? in
                let r = s.sockets
                s.sockets = nil
                return r
            }) {
                return s
            }
            return try RouteSockets.open(namespace: self.networkNamespace)
        }()
        let run = self.state.withLock { s -> UInt64 in
            s.run &+= 1
            s.status = .unknown
            return s.run
        }
        self.gate.open(run: run, handler: handler)
        let core = RouteMonitorCore(
            loop: self.eventLoop,
            sockets: sockets,
            target: self.target,
            namespaced: self.networkNamespace != nil,
            delay: self.coalescingDelay
        ) {
            [gate, weakState = WeakStatus(self)] status in
            weakState.set(status, run: run)
            gate.deliver(status, run: run)
        }
        self.state.withLock { $0.core = core }
        if self.eventLoop.inEventLoop {
            core.begin()
        } else {
            let bound = LoopBound(handingOver: core, to: self.eventLoop)
            self.eventLoop.execute { bound.value.begin() }
        }
    }

    /// Stops watching and closes the sockets. When it returns, the handler is not running and
    /// will not run again. Safe from any thread, from inside the handler, and more than once.
    public func stop() {
        guard
            let core = self.state.withLock({ s -> RouteMonitorCore? in
                let c = s.core
                s.core = nil
                return c
            })
        else { return }
        self.gate.close()
        core.closeAndWait()
    }

    fileprivate func record(_ status: RouteStatus, run: UInt64) {
        self.state.withLock { s in
            if s.run == run && s.core != nil { s.status = status }
        }
    }
}

/// A weak reference to the monitor for the core's delivery closure (the core must not keep
/// its owner alive, or `deinit` could never stop it).
private final class WeakStatus: @unchecked Sendable {
    weak var monitor: RouteMonitor?
    init(_ m: RouteMonitor) { self.monitor = m }
    func set(_ status: RouteStatus, run: UInt64) { self.monitor?.record(status, run: run) }
}

/// Serialises handler calls against `close()`: a handler runs under a recursive lock and only
/// while the gate is open for its run, so once `close()` returns no handler is running or will
/// start. Recursive, so a handler may stop its own monitor.
final class DeliveryGate: @unchecked Sendable {
    private let lock = RecursiveLock()
    private var run: UInt64 = 0
    private var isOpen = false
    private var handler: (@Sendable (RouteStatus) -> Void)?

    func open(run: UInt64, handler: @escaping @Sendable (RouteStatus) -> Void) {
        self.lock.withLock {
            self.run = run
            self.isOpen = true
            self.handler = handler
        }
    }

    func close() {
        self.lock.withLock {
            self.isOpen = false
            self.handler = nil
        }
    }

    func deliver(_ status: RouteStatus, run: UInt64) {
        self.lock.withLock {
            guard self.isOpen, self.run == run, let h = self.handler else { return }
            h(status)
        }
    }
}
