// The IO shell around PoolStateMachine: it opens connections (Connector), runs requests on them,
// closes them and arms their idle timers, as the machine says. Loop-confined. A session over a
// group of loops has one per loop; they share a PoolGroup (SessionLoops.swift): the session-wide
// per-host budget, the summed counts, and the wake-ups between loops.
import HawserBase
import HawserPosix
import HawserProxy
import HawserTLS
import Synchronization

final class ConnectionPool: @unchecked Sendable {
    typealias Machine = PoolStateMachine<RequestTask, HTTP1Connection>

    let loop: EventLoop
    unowned(unsafe) let context: SessionContext
    // Loop-confined state. Swift checks exclusive access to a class's stored properties at run
    // time; in release builds the hottest of them opt out with `@exclusivity(unchecked)` (the
    // checks cost about an eighth of a keep-alive request's instructions:
    // Benchmarks/results/2026-11-27-engine-regression/). Debug builds, where the tests run, keep
    // every check. Nothing here can overlap: the state machines return actions that are
    // performed after the mutation that produced them has returned.
    #if DEBUG
    private var machine: Machine
    #else
    @exclusivity(unchecked) private var machine: Machine
    #endif
    /// The machine's actions, reused from event to event (no allocation per request), and
    /// whether they are being run (events reported meanwhile queue their actions behind).
    #if DEBUG
    private var actions: [Machine.Action] = []
    #else
    @exclusivity(unchecked) private var actions: [Machine.Action] = []
    #endif
    #if DEBUG
    private var running = false
    #else
    @exclusivity(unchecked) private var running = false
    #endif
    private var connectors: [ObjectIdentifier: Connector] = [:]
    /// Keys of closed connections whose places go back to the session's budget at the end of
    /// the current run (a pool of a group only).
    private var pendingReleases: [ConnectionKey] = []
    /// The actions of this loop's request machines (RequestActionQueue.swift).
    #if DEBUG
    var requestQueue = RequestActionQueue()
    #else
    @exclusivity(unchecked) var requestQueue = RequestActionQueue()
    #endif
    /// Every live task, so that shutdown can fail each one, wherever it is.
    #if DEBUG
    private var tasks: [ObjectIdentifier: RequestTask] = [:]
    #else
    @exclusivity(unchecked) private var tasks: [ObjectIdentifier: RequestTask] = [:]
    #endif
    /// Idle timers by connection (one long-lived timer each, re-armed lazily by the machine).
    #if DEBUG
    private var idleTimers: [ObjectIdentifier: Scheduled] = [:]
    #else
    @exclusivity(unchecked) private var idleTimers: [ObjectIdentifier: Scheduled] = [:]
    #endif
    /// Told when the connection counts change (nil: no one is, and nothing is counted).
    private let instrumentation: (any RequestInstrumentation)?
    /// `instrumentation != nil`, as a flag the pool's loop reads without copying an existential.
    private let reportsCounts: Bool
    private var reportedCounts = PoolCounts(open: 0, idle: 0)
    /// What the pools of a session over several loops share (nil: a one-loop session).
    let group: PoolGroup?
    /// This pool's loop's index in the session's group.
    let index: Int
    /// Requests given to this pool and not finished, for choosing a loop (counted only in a
    /// group: a one-loop session has nothing to choose).
    let inFlight = Atomic<Int>(0)
    /// The counts as of the end of the pool's last event, readable from any thread (kept only
    /// in a group: the statistics of another loop's pool, read from a loop).
    private let publishedOpen = Atomic<Int>(0)
    private let publishedIdle = Atomic<Int>(0)
    private let publishedWaiting = Atomic<Int>(0)
    private let publishedConnecting = Atomic<Int>(0)

    init(context: SessionContext, group: PoolGroup? = nil, index: Int = 0) {
        self.loop = context.loop
        self.context = context
        self.group = group
        self.index = index
        self.machine = Machine(
            maximumPerOrigin: context.configuration.maximumConnectionsPerHost,
            idleTimeout: SessionContext.nanos(context.configuration.idleConnectionTimeout)
        )
        self.actions.reserveCapacity(8)
        self.instrumentation = context.configuration.instrumentation
        self.reportsCounts = self.instrumentation != nil
    }

    /// The counts as of the end of this pool's last event; from any thread (a pool of a group).
    func publishedSnapshot() -> Snapshot {
        Snapshot(
            openConnections: self.publishedOpen.load(ordering: .relaxed),
            idleConnections: self.publishedIdle.load(ordering: .relaxed),
            waitingTasks: self.publishedWaiting.load(ordering: .relaxed),
            runningTasks: self.inFlight.load(ordering: .relaxed),
            connecting: self.publishedConnecting.load(ordering: .relaxed)
        )
    }

    var isShutDown: Bool { self.machine.isShutDown }

    func origin(for key: ConnectionKey) -> Machine.OriginID { self.machine.origin(for: key) }

    // MARK: - Introspection (tests, diagnostics)

    struct Snapshot: Sendable, Hashable {
        var openConnections: Int
        var idleConnections: Int
        var waitingTasks: Int
        var runningTasks: Int
        var connecting: Int
    }

    func snapshot() -> Snapshot {
        Snapshot(
            openConnections: self.machine.connectionCount,
            idleConnections: self.machine.idleCount,
            waitingTasks: self.machine.waitingCount,
            runningTasks: self.tasks.count,
            connecting: self.machine.connectingCount
        )
    }

    // MARK: - Tasks

    /// A task joins the session (before its first request). False after shutdown.
    func register(_ task: RequestTask) -> Bool {
        if self.machine.isShutDown { return false }
        self.tasks[ObjectIdentifier(task)] = task
        return true
    }

    func taskFinished(_ task: RequestTask) {
        self.tasks.removeValue(forKey: ObjectIdentifier(task))
        if self.group != nil { self.inFlight.subtract(1, ordering: .relaxed) }
    }

    /// `task` needs a connection for its current request (`fresh`: a newly opened one).
    func request(_ task: RequestTask, fresh: Bool) {
        self.machine.submit(task, origin: task.origin, fresh: fresh, into: &self.actions)
        self.run()
    }

    /// `task` no longer waits for a connection.
    func cancel(_ task: RequestTask) {
        self.machine.cancel(task, origin: task.origin)
    }

    // MARK: - Connections

    /// A connection finished a response and may serve another. Called before the task completes,
    /// so a request issued from the completion callback can reuse it.
    func release(_ c: HTTP1Connection) {
        self.machine.released(c, now: self.loop.now, into: &self.actions)
        if let group = self.group, group.isWanted(c.key), let origin = self.machine.existingOrigin(for: c.key) {
            // Another loop waits for a place under the session's limit: an idle connection
            // here gives it one (none is idle when a waiter here took this one).
            self.machine.closeIdle(origin, into: &self.actions)
        }
        self.run()
    }

    func connectionClosed(_ c: HTTP1Connection) {
        self.idleTimers.removeValue(forKey: ObjectIdentifier(c))?.cancel()
        self.machine.closed(c, into: &self.actions)
        // The place goes back to the session's budget after this pool's counts are told (at the
        // end of the outermost run), so that the summed counts never show another loop's new
        // connection before this one's close.
        if self.group != nil { self.pendingReleases.append(c.key) }
        self.run()
    }

    // MARK: - Across loops (a session over a group)

    /// Another loop of the session waits for a place for `key`: close an idle connection to it.
    func yieldIdle(_ key: ConnectionKey) {
        guard let origin = self.machine.existingOrigin(for: key) else { return }
        self.machine.closeIdle(origin, into: &self.actions)
        self.run()
    }

    /// A place for `key` came free under the session's limit: open what the waiters need.
    func permitAvailable(_ key: ConnectionKey) {
        guard !self.machine.isShutDown, let origin = self.machine.existingOrigin(for: key) else { return }
        self.machine.unblock(origin, into: &self.actions)
        self.run()
    }

    private func run() {
        guard !self.running else { return }
        self.running = true
        var i = 0
        while i < self.actions.count {
            let action = self.actions[i]
            i += 1
            self.perform(action)
        }
        self.actions.removeAllKeepingStorage()
        self.running = false
        if self.group != nil { self.publish() }
        if self.reportsCounts, let instrumentation = self.instrumentation { self.reportCounts(to: instrumentation) }
        if !self.pendingReleases.isEmpty, let group = self.group {
            let keys = self.pendingReleases
            self.pendingReleases.removeAll()
            for key in keys { group.release(key) }
        }
    }

    /// Publishes the counts for ``publishedSnapshot()``.
    private func publish() {
        self.publishedOpen.store(self.machine.connectionCount, ordering: .relaxed)
        self.publishedIdle.store(self.machine.idleCount, ordering: .relaxed)
        self.publishedWaiting.store(self.machine.waitingCount, ordering: .relaxed)
        self.publishedConnecting.store(self.machine.connectingCount, ordering: .relaxed)
    }

    /// Tells `instrumentation` the open and idle counts if they changed since it last heard (in a
    /// group, the session's sums, through the group).
    private func reportCounts(to instrumentation: any RequestInstrumentation) {
        let counts = PoolCounts(open: self.machine.connectionCount, idle: self.machine.idleCount)
        guard counts != self.reportedCounts else { return }
        self.reportedCounts = counts
        if let group = self.group {
            group.countsChanged(counts, loop: self.index)
        } else {
            instrumentation.poolCountsChanged(counts)
        }
    }

    private func perform(_ action: Machine.Action) {
        switch action {
        case .execute(let task, let connection):
            connection.execute(task)
        case .createConnection(let origin, let key):
            if let group = self.group, !group.acquire(key, loop: self.index) {
                // The session's limit is held by other loops: wait for a place (permitAvailable).
                self.machine.connectDenied(origin: origin)
            } else {
                self.connect(origin, key)
            }
        case .closeConnection(let connection):
            self.idleTimers.removeValue(forKey: ObjectIdentifier(connection))?.cancel()
            connection.close()
        case .failRequest(let task, let error):
            task.failWaiting(error)
        case .armIdleTimer(let connection, let after):
            self.idleTimers[ObjectIdentifier(connection)] = self.loop.scheduleInLoop(in: after) {
                [unowned(unsafe) self] in
                self.idleTimers.removeValue(forKey: ObjectIdentifier(connection))
                self.machine.idleTimerFired(connection, now: self.loop.now, into: &self.actions)
                self.run()
            }
        }
    }

    private func connect(_ origin: Machine.OriginID, _ key: ConnectionKey) {
        var httpsProxy: ProxyServer? = nil
        if case .https? = key.proxy?.server.kind { httpsProxy = key.proxy?.server }
        guard key.scheme == "https" || httpsProxy != nil else {
            self.connect(origin, key, tlsContext: nil, httpsProxy: nil)
            return
        }
        // The session's TLS context is made on the IO pool (it reads files): the first https
        // connect waits for it, the others find it made and go on at once.
        var waited = false
        self.context.withClientTLSContext { [self] made in
            if waited, self.machine.isShutDown {
                // Shut down meanwhile: the waiters have failed; only the connect's place is freed.
                self.machine.connectFailed(
                    origin: origin,
                    error: HawserError(.sessionShutDown, "the session was shut down"),
                    retryOthers: false,
                    into: &self.actions
                )
                self.group?.release(key)
            } else {
                self.connect(origin, key, tlsContext: made, httpsProxy: httpsProxy)
            }
            if waited { self.run() }
        }
        waited = true
    }

    private func connect(
        _ origin: Machine.OriginID,
        _ key: ConnectionKey,
        tlsContext: Result<TLSContext, HawserError>?,
        httpsProxy: ProxyServer?
    ) {
        var tls: TLSContext? = nil
        var proxyTLS: TLSContext? = nil
        if let tlsContext {
            switch tlsContext {
            case .success(let c):
                if key.scheme == "https" { tls = c }
                // The proxy's TLS comes from the same context (versions, ciphers, client identity),
                // its sessions cached under the proxy's own key.
                if httpsProxy != nil { proxyTLS = c }
            case .failure(let error):
                // Every waiter would get the same error: they fail one by one, without new attempts.
                self.machine.connectFailed(origin: origin, error: error, retryOthers: false, into: &self.actions)
                self.group?.release(key)
                return
            }
        }
        let connector = Connector(
            key: key,
            loop: self.loop,
            timeoutSeconds: self.context.configuration.connectTimeout,
            dnsOverride: self.context.configuration.dnsOverride,
            attemptDelay: SessionContext.nanos(self.context.configuration.connectionAttemptDelay),
            tlsContext: tls,
            trustHook: tls == nil
                ? nil
                : { [unowned(unsafe) self] connector, chain, decide in
                    self.context.evaluateTrust(
                        connector.key,
                        chain,
                        stapledOCSPResponse: connector.stapledOCSPResponse,
                        task: self.machine.firstWaiting(origin),
                        decide
                    )
                },
            requestsStapledOCSP: tls != nil && self.context.requestsStapledOCSP(forHost: key.host),
            proxyTLSContext: proxyTLS,
            proxyTrustHook: httpsProxy.map { server in
                { [unowned(unsafe) self] _, chain, decide in
                    self.context.evaluateProxyTrust(server, chain, decide)
                }
            }
        ) { [unowned(unsafe) self] connector, result in
            self.connectors.removeValue(forKey: ObjectIdentifier(connector))
            self.connectFinished(origin: origin, key: key, result: result)
        }
        self.connectors[ObjectIdentifier(connector)] = connector
        connector.start()
    }

    private func connectFinished(
        origin: Machine.OriginID,
        key: ConnectionKey,
        result: Result<Connector.Established, HawserError>
    ) {
        switch result {
        case .success(let r):
            let c = HTTP1Connection(
                fd: r.fd,
                remoteAddress: r.address,
                key: key,
                context: self.context,
                pool: self,
                timings: r.timings,
                tls: r.tls
            )
            do {
                try self.loop.register(fd: r.fd, handler: c, readable: true, writable: false)
            } catch {
                Posix.close(r.fd)
                self.machine.connectFailed(
                    origin: origin,
                    error: HawserError(.ioError, "cannot register the connection: \(error)", underlying: error),
                    into: &self.actions
                )
                self.run()
                self.group?.release(key)
                return
            }
            self.machine.connected(c, origin: origin, now: self.loop.now, into: &self.actions)
        case .failure(let error):
            self.machine.connectFailed(origin: origin, error: error, into: &self.actions)
            self.run()
            self.group?.release(key)
            return
        }
        self.run()
    }

    // MARK: - Shutdown

    /// Fails every pending task with `sessionShutDown`, closes every connection and cancels connects.
    func shutdown() {
        guard !self.machine.isShutDown else { return }
        self.machine.shutdown(into: &self.actions)
        self.run()
        let error = HawserError(.sessionShutDown, "the session was shut down")
        for t in Array(self.tasks.values) { t.fail(error) }
        for k in Array(self.connectors.values) { k.abort(error) }
        self.connectors.removeAll()
    }
}
