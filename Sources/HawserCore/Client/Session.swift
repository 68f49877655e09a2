import HawserAuth
import HawserBase
import HawserCoding
import HawserCookies
import HawserHTTP1
import HawserPosix
import HawserProxy
import HawserTLS
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if Logging
import Logging
#endif

/// The engine's client (the NSURLSession role): executes requests over keep-alive connection
/// pools, one on each of its event loops.
///
/// A session spans a group of loops (``eventLoops``): by default every loop of
/// `EventLoopGroup/shared`, or the loops of the group given to
/// ``init(configuration:eventLoopGroup:delegate:)``, or the one loop given to
/// ``init(configuration:eventLoop:delegate:)``. Each loop has its own connections. A request made
/// from a task (or callback) running on one of the session's loops is served by that loop's
/// connections, with no thread hop; a request made anywhere else goes to the loop with the fewest
/// of the session's requests in flight (ties broken round-robin). A task's connection, delegate
/// callbacks and completion all run on its loop (``RequestTask/eventLoop``).
///
/// The session's settings hold for the session as a whole, whatever loop serves a request: the
/// per-host connection limit (`SessionConfiguration/maximumConnectionsPerHost`) counts the
/// connections of every loop, ``poolStatistics()`` and the pool counts an instrumentation hears
/// are sums over the loops, and the cookie jar, the cache and the Digest nonce counts are the
/// session's one each. Idle connections close after the idle timeout on whichever loop they are.
///
/// A session is cheap to keep and safe to share between threads.
///
/// A program that wants one session without managing its lifetime uses ``shared``
/// (URLSession's `shared`, AsyncHTTPClient's `HTTPClient.shared`).
public final class Session: Sendable {
    /// The process's shared session: the default configuration (``SessionConfiguration/default``,
    /// so the environment's proxies, an in-memory cookie jar, no cache), no delegate, over every
    /// loop of `EventLoopGroup/shared`. Made on first use and never shut down: ``shutdown()`` on it does
    /// nothing, since other parts of the program may be using it (AsyncHTTPClient's shared
    /// client refuses `shutdown` the same way). A program that needs other settings, a delegate,
    /// or a session it can shut down makes its own ``init(configuration:eventLoop:delegate:)``.
    ///
    /// Its cookie jar is shared by every request made through it, whoever makes them. A
    /// `SessionManager` (the `Hawser` module) always makes a session of its own: its session
    /// delegate answers challenges for the manager's blocks, which the shared session has none of.
    public static let shared = Session(configuration: .default, eventLoop: nil, delegate: nil, isShared: true)

    /// Whether this is ``shared``, the session ``shutdown()`` leaves running.
    public let isShared: Bool
    /// The settings this session was created with.
    public let configuration: SessionConfiguration
    /// The session's first loop (of a one-loop session, its loop): a task that prefers it as its
    /// executor (`withTaskExecutorPreference(session.eventLoop)`) makes its requests there with
    /// no thread hop. Each request runs on the loop ``RequestTask/eventLoop`` names.
    public let eventLoop: EventLoop
    /// The loops this session runs connections on, each with a pool of its own.
    public let eventLoops: [EventLoop]
    /// The first loop's context and pool (a one-loop session's only ones: its request path reads
    /// these and nothing of the others).
    private let context: SessionContext
    private let pool: ConnectionPool
    /// Every loop's context and pool, by loop index.
    private let contexts: [SessionContext]
    private let pools: [ConnectionPool]
    /// Where the next pick of a loop for a request made off the loops starts (ties round-robin).
    private let pickStart = Atomic<Int>(0)
    /// The configuration's instrumentation, read once here.
    private let instrumentation: (any RequestInstrumentation)?
    /// Whether a task can have an observer at all (an instrumentation or a logger is set): a
    /// flag, so that the common case reads no existential per request.
    private let observes: Bool
    /// Whether a request's wire fields are collected as its head is encoded (a cache or a
    /// responder reads them), read once here.
    private let collectsWireHeaders: Bool
    #if Logging
    /// The configuration's logger, read once here (nil: no log call on the request path).
    private let logger: Logger?
    #endif

    /// Creates a session on `eventLoop` alone, or, when it is nil (the default), over every loop
    /// of `EventLoopGroup/shared`.
    ///
    /// `delegate` (kept strongly for the session's life, as NSURLSession keeps its delegate)
    /// answers the challenges a task's delegate leaves to default handling.
    public convenience init(
        configuration: SessionConfiguration = .default,
        eventLoop: EventLoop? = nil,
        delegate: (any SessionDelegate)? = nil
    ) {
        self.init(
            configuration: configuration,
            loops: eventLoop.map { [$0] } ?? EventLoopGroup.shared.loops,
            delegate: delegate,
            isShared: false
        )
    }

    /// Creates a session over every loop of `eventLoopGroup`: each loop opens connections of its
    /// own, and serves the requests made from tasks running on it (see ``Session``).
    ///
    /// `delegate` (kept strongly for the session's life, as NSURLSession keeps its delegate)
    /// answers the challenges a task's delegate leaves to default handling.
    public convenience init(
        configuration: SessionConfiguration = .default,
        eventLoopGroup: EventLoopGroup,
        delegate: (any SessionDelegate)? = nil
    ) {
        self.init(configuration: configuration, loops: eventLoopGroup.loops, delegate: delegate, isShared: false)
    }

    /// Creates a session over `eventLoops` (at least one), as
    /// ``init(configuration:eventLoopGroup:delegate:)`` does over a group's loops: for loops
    /// made one by one, e.g. each with a `ManualClock`.
    public convenience init(
        configuration: SessionConfiguration = .default,
        eventLoops: [EventLoop],
        delegate: (any SessionDelegate)? = nil
    ) {
        self.init(configuration: configuration, loops: eventLoops, delegate: delegate, isShared: false)
    }

    private convenience init(
        configuration: SessionConfiguration,
        eventLoop: EventLoop?,
        delegate: (any SessionDelegate)?,
        isShared: Bool
    ) {
        self.init(
            configuration: configuration,
            loops: eventLoop.map { [$0] } ?? EventLoopGroup.shared.loops,
            delegate: delegate,
            isShared: isShared
        )
    }

    private init(
        configuration: SessionConfiguration,
        loops: [EventLoop],
        delegate: (any SessionDelegate)?,
        isShared: Bool
    ) {
        precondition(!loops.isEmpty, "a session needs at least one event loop")
        self.isShared = isShared
        self.configuration = configuration
        self.instrumentation = configuration.instrumentation
        self.collectsWireHeaders = configuration.urlCache != nil || configuration.responder != nil
        #if Logging
        self.logger = configuration.logger
        self.observes = configuration.instrumentation != nil || configuration.logger != nil
        #else
        self.observes = configuration.instrumentation != nil
        #endif
        self.eventLoop = loops[0]
        self.eventLoops = loops
        let digest = DigestAuthenticator()
        let group =
            loops.count > 1
            ? PoolGroup(
                loops: loops.count,
                limit: configuration.maximumConnectionsPerHost,
                instrumentation: configuration.instrumentation
            ) : nil
        var contexts: [SessionContext] = []
        var pools: [ConnectionPool] = []
        for (i, loop) in loops.enumerated() {
            let context = SessionContext(
                loop: loop,
                configuration: configuration,
                sessionDelegate: delegate,
                digestAuthenticator: digest
            )
            contexts.append(context)
            pools.append(ConnectionPool(context: context, group: group, index: i))
        }
        group?.attach(pools)
        self.contexts = contexts
        self.pools = pools
        self.context = contexts[0]
        self.pool = pools[0]
        for (context, pool) in zip(contexts, pools) {
            context.session = self
            let loop = pool.loop
            let transfer = LoopBound(handingOver: pool, to: loop)
            loop.execute { loop.onShutdown(for: ObjectIdentifier(transfer.value)) { transfer.value.shutdown() } }
        }
    }

    /// Releasing a session shuts it down: pending tasks fail with `sessionShutDown`, connections
    /// close, and the pools are freed (nothing of them stays behind on the loops).
    deinit {
        for (pool, context) in zip(self.pools, self.contexts) {
            let loop = pool.loop
            let transfer = LoopBound(handingOver: (pool, context), to: loop)
            let body: @Sendable () -> Void = {
                transfer.value.0.shutdown()
                loop.removeShutdownHook(for: ObjectIdentifier(transfer.value.0))
                _ = transfer.value.1  // the context outlives the pool's last use
            }
            if loop.inEventLoop { loop.executeInLoop(body) } else { loop.execute(body) }
        }
    }

    /// The index of the loop for a new request: the caller's own loop when it runs on one of the
    /// session's, else the least busy (fewest requests in flight; ties round-robin).
    private func chooseLoop() -> Int {
        for i in self.pools.indices where self.pools[i].loop.inEventLoop { return i }
        let start = self.pickStart.add(1, ordering: .relaxed).newValue
        return LoopChooser.choose(count: self.pools.count, start: start) {
            self.pools[$0].inFlight.load(ordering: .relaxed)
        }
    }

    /// The index of the session's loop the calling thread runs, if it runs one.
    private var currentLoopIndex: Int? {
        self.pools.firstIndex { $0.loop.inEventLoop }
    }

    // MARK: - Executing

    /// Starts `request`, streaming the response to `delegate` on the event loop.
    /// The delegate's completion is called exactly once, also for an invalid request.
    @discardableResult
    public func execute(_ request: HTTPClientRequest, delegate: any ResponseDelegate) -> RequestTask {
        guard self.observes else { return self.start(request, observer: nil, delegate: delegate) }
        #if Logging
        return self.start(request, observer: self.observer(for: request, logger: self.logger), delegate: delegate)
        #else
        return self.start(request, observer: self.instrumentation?.observe(request), delegate: delegate)
        #endif
    }

    #if Logging
    /// Starts `request` as ``execute(_:delegate:)`` does, logging it to `logger` instead of the
    /// configuration's logger (nil: not logged at all).
    @discardableResult
    public func execute(_ request: HTTPClientRequest, logger: Logger?, delegate: any ResponseDelegate) -> RequestTask {
        self.start(request, observer: self.observer(for: request, logger: logger), delegate: delegate)
    }

    /// Starts `request` as ``execute(_:completion:)`` does, logging it to `logger` instead of the
    /// configuration's logger (nil: not logged at all).
    @discardableResult
    public func execute(
        _ request: HTTPClientRequest,
        logger: Logger?,
        completion: @escaping @Sendable (Result<HTTPClientResponse, HawserError>) -> Void
    ) -> RequestTask {
        let collector = BufferedResponseCollector(
            limit: self.configuration.maximumBufferedBodySize,
            completion: completion
        )
        return self.execute(request, logger: logger, delegate: collector)
    }

    /// Executes `request` as ``response(for:)`` does, logging it to `logger` instead of the
    /// configuration's logger (nil: not logged at all).
    public func response(
        for request: HTTPClientRequest,
        logger: Logger?
    ) async throws(HawserError) -> HTTPClientResponse {
        try await self.response(for: request) { self.execute(request, logger: logger, completion: $0) }
    }

    /// The task's observer: the instrumentation's, and a logging one when there is a logger.
    private func observer(for request: HTTPClientRequest, logger: Logger?) -> (any RequestObserver)? {
        let instrumented = self.instrumentation?.observe(request)
        guard let logger else { return instrumented }
        let logging = LoggingObserver(logger: logger, request: request, queryLogging: self.configuration.queryLogging)
        guard let instrumented else { return logging }
        return FanOutObserver([logging, instrumented])
    }
    #endif

    /// Prepares and submits a task; `observer` watches it (nil: nothing does).
    private func start(
        _ request: HTTPClientRequest,
        observer: (any RequestObserver)?,
        delegate: any ResponseDelegate
    ) -> RequestTask {
        var failure: HawserError? = nil
        let prepared: Prepared
        // Read before the call: asked between loading the configuration and the call, the
        // observer (opaque code) would make the compiler copy the whole configuration first.
        let addedFields = observer?.headerFields
        do {
            prepared = try Self.prepare(
                request,
                configuration: self.configuration,
                collectsWireHeaders: self.collectsWireHeaders,
                addedFields: addedFields
            )
        } catch {
            failure = error
            prepared = Prepared(
                key: ConnectionKey(scheme: "http", host: "", port: 0),
                head: [],
                body: nil,
                expectsContinue: false,
                cookiesLeftOut: nil
            )
        }
        let task: RequestTask
        if self.pools.count == 1 {
            task = RequestTask(
                request: request,
                prepared: prepared,
                context: self.context,
                pool: self.pool,
                delegate: delegate
            )
        } else {
            let i = self.chooseLoop()
            task = RequestTask(
                request: request,
                prepared: prepared,
                context: self.contexts[i],
                pool: self.pools[i],
                delegate: delegate
            )
        }
        task.observer = observer
        let loop = task.eventLoop
        if loop.isShutDown {
            // The loop will never run this task: complete it here, on the caller's thread.
            task.completeWithoutLoop(
                HawserError(.sessionShutDown, "the session's event loop has shut down", url: request.url)
            )
            return task
        }
        if self.pools.count > 1 { task.pool.inFlight.add(1, ordering: .relaxed) }
        if let failure {
            Self.onLoop(loop) { task.fail(failure.with(url: request.url)) }
        } else {
            Self.onLoop(loop) { task.submit() }
        }
        return task
    }

    /// Starts `request` and collects the whole response in memory (up to
    /// `maximumBufferedBodySize`). `completion` runs exactly once, on the event loop.
    @discardableResult
    public func execute(
        _ request: HTTPClientRequest,
        completion: @escaping @Sendable (Result<HTTPClientResponse, HawserError>) -> Void
    ) -> RequestTask {
        let collector = BufferedResponseCollector(
            limit: self.configuration.maximumBufferedBodySize,
            completion: completion
        )
        return self.execute(request, delegate: collector)
    }

    /// Executes `request` and returns the whole response. Cancelling the calling Swift task
    /// cancels the request.
    public func response(for request: HTTPClientRequest) async throws(HawserError) -> HTTPClientResponse {
        try await self.response(for: request) { self.execute(request, completion: $0) }
    }

    /// Runs what `start` starts (an `execute` with a completion) as an async call, cancellable.
    private func response(
        for request: HTTPClientRequest,
        start: (@escaping @Sendable (Result<HTTPClientResponse, HawserError>) -> Void) -> RequestTask
    )
        async throws(HawserError) -> HTTPClientResponse
    {
        let handle = Mutex<RequestTask?>(nil)
        let result: Result<HTTPClientResponse, HawserError> = await withTaskCancellationHandler {
            // Unsafe is sound: `execute` calls its completion exactly once on every path (what
            // the exactly-once tests hold it to); the checked form allocates per request.
            await withUnsafeContinuation { (cont: UnsafeContinuation<Result<HTTPClientResponse, HawserError>, Never>) in
                let t = start { cont.resume(returning: $0) }
                let alreadyCancelled = handle.withLock { h -> Bool in
                    h = t
                    return Task.isCancelled
                }
                if alreadyCancelled { t.cancel() }
            }
        } onCancel: {
            handle.withLock { $0 }?.cancel()
        }
        return try result.get()
    }

    /// Fails every pending task with `sessionShutDown` and closes every connection, on every loop
    /// of the session; later requests fail at once. Called off the session's loops, it blocks
    /// until every loop is done. Called on one of them, it shuts that loop's pool down at once
    /// and the other loops' as soon as they run (it never waits for another loop there).
    ///
    /// On ``shared`` it does nothing: the shared session lives as long as the process, and the
    /// code that calls `shutdown()` on it is not the only code using it.
    public func shutdown() {
        if self.isShared { return }
        let onOwnLoop = self.currentLoopIndex != nil
        for p in self.pools {
            let pool = LoopBound(handingOver: p, to: p.loop)
            if p.loop.inEventLoop {
                pool.value.shutdown()
            } else if onOwnLoop {
                p.loop.execute { pool.value.shutdown() }
            } else {
                _ = try? p.loop.submitAndWait { pool.value.shutdown() }
            }
        }
    }

    /// Pool state summed over the session's loops, for tests and diagnostics. Called off the
    /// session's loops, each loop's counts are read on that loop (it waits for each). Called on
    /// one of them, that loop's counts are read directly and the other loops' as they were at the
    /// end of their last event (it never waits for another loop there).
    public func poolStatistics() -> PoolStatistics {
        var total = PoolStatistics()
        let onOwnLoop = self.currentLoopIndex != nil
        for p in self.pools {
            let pool = LoopBound(handingOver: p, to: p.loop)
            let s: ConnectionPool.Snapshot?
            if p.loop.inEventLoop {
                s = p.snapshot()
            } else if onOwnLoop {
                s = p.publishedSnapshot()
            } else {
                s = try? p.loop.submitAndWait { pool.value.snapshot() }
            }
            guard let s else { continue }
            total.openConnections += s.openConnections
            total.idleConnections += s.idleConnections
            total.waitingTasks += s.waitingTasks
            total.runningTasks += s.runningTasks
            total.connecting += s.connecting
        }
        return total
    }

    private static func onLoop(_ loop: EventLoop, _ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }
}

/// Counts of a session's pool.
public struct PoolStatistics: Sendable, Hashable {
    /// Connections open, in use or idle (connects in progress not included).
    public var openConnections = 0
    /// Open connections kept alive with no task, ready for reuse.
    public var idleConnections = 0
    /// Tasks queued for a connection (every connection of their origin busy, the per-host limit reached).
    public var waitingTasks = 0
    /// Tasks the pool holds that have not completed, waiting ones included.
    public var runningTasks = 0
    /// Connections being set up: resolving, connecting, or in a proxy or TLS handshake.
    public var connecting = 0
}
