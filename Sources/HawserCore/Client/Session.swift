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
            let transfer = UnsafeTransfer(pool)
            let loop = pool.loop
            loop.execute { loop.onShutdown(for: ObjectIdentifier(transfer.value)) { transfer.value.shutdown() } }
        }
    }

    /// Releasing a session shuts it down: pending tasks fail with `sessionShutDown`, connections
    /// close, and the pools are freed (nothing of them stays behind on the loops).
    deinit {
        for (pool, context) in zip(self.pools, self.contexts) {
            let transfer = UnsafeTransfer((pool, context))
            let loop = pool.loop
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
            prepared = try Self.prepare(request, configuration: self.configuration, addedFields: addedFields)
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
            let pool = UnsafeTransfer(p)
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
            let pool = UnsafeTransfer(p)
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

    /// `body` gzip-compressed (byte bodies; a stream is refused with a clear error).
    static func gzipped(_ body: RequestBody) throws(HawserError) -> RequestBody {
        switch body {
        case .bytes(let b):
            return .bytes(try GzipEncoder.compress(b))
        case .stream:
            throw HawserError(
                .invalidRequest,
                "compressesBody works on byte bodies; compress a streamed body in its producer (GzipEncoder)"
            )
        }
    }

    /// A request as it goes on the wire: where (the connection key), the encoded head, the body
    /// to send (gzip-coded when the request asks for `compressesBody`), and whether the body waits
    /// for 100 Continue — decided once, here, for the head and for the exchange.
    struct Prepared {
        var key: ConnectionKey
        var head: [UInt8]
        var body: RequestBody?
        var expectsContinue: Bool
        /// Cookies the jar's caps kept out of the head's `Cookie` field (nil: none).
        var cookiesLeftOut: CookiesLeftOut?

        var plan: RequestStateMachine.BodyPlan {
            switch self.body {
            case nil: return .none
            case .bytes?: return .bytes
            case .stream?: return .stream
            }
        }
    }

    /// Whether `request` waits for 100 Continue before its body (RFC 9110 §10.1.1).
    static func expectsContinue(_ request: HTTPClientRequest, configuration: SessionConfiguration) -> Bool {
        guard let body = request.body else { return false }
        if let explicit = request.expectsContinue { return explicit }
        if request.headers["Expect"]?.lowercased() == "100-continue" { return true }
        guard let threshold = configuration.expectContinueThreshold else { return false }
        guard let length = body.knownLength else { return true }
        return length >= threshold
    }

    /// What `request` becomes on the wire.
    /// `addedFields`: an observer's fields (`traceparent`), added unless the request sets them.
    static func prepare(
        _ request: HTTPClientRequest,
        configuration: SessionConfiguration,
        addedFields: [(name: String, value: String)]? = nil
    ) throws(HawserError) -> Prepared {
        var info = try request.wireInfo()
        var body = request.body
        var extra: [(name: String, value: String)] = []
        if let addedFields {
            for field in addedFields where !request.headers.contains(name: field.name) { extra.append(field) }
        }
        if request.compressesBody, let b = body, !request.headers.contains(name: "Content-Encoding") {
            body = try Self.gzipped(b)
            extra.append(("Content-Encoding", "gzip"))
        }
        let target: ProxyTarget?
        do {
            target = try configuration.proxy.proxy(for: request.url)
        } catch {
            let origin = error.variable == nil ? "the proxy setting" : "the proxy from the environment"
            throw HawserError(
                .proxyError,
                "cannot use \(origin): \(error.message)",
                url: request.url,
                underlying: error
            )
        }
        if let proxy = target {
            info.key.proxy = proxy
            if proxy.mode == .forward {
                // RFC 9112 §3.2.2: absolute-form to a forward proxy, without user info or fragment.
                let portPart = request.url.port.map { ":\($0)" } ?? ""
                let host = info.key.host.utf8.contains(UInt8(ascii: ":")) ? "[\(info.key.host)]" : info.key.host
                info.target = "http://\(host)\(portPart)\(info.target)"
                if let credentials = proxy.server.credentials, !request.headers.contains(name: "Proxy-Authorization") {
                    extra.append(("Proxy-Authorization", credentials.basicAuthorization))
                }
            }
        }
        let expects = body != nil && Self.expectsContinue(request, configuration: configuration)
        var cookiesLeftOut: CookiesLeftOut? = nil
        let head = try Self.encodeHead(
            request,
            body: body,
            expectsContinue: expects,
            extra: extra,
            target: info.target,
            hostHeader: info.hostHeader,
            configuration: configuration,
            cookiesLeftOut: &cookiesLeftOut
        )
        return Prepared(
            key: info.key,
            head: head,
            body: body,
            expectsContinue: expects,
            cookiesLeftOut: cookiesLeftOut
        )
    }

    /// Writes the head straight into bytes: the request line, `Host` first (RFC 9112 §3.2), the
    /// caller's fields, then what the session adds when the caller did not set it. No
    /// `HTTPHeaders` is built on the way; every field is checked as ``HTTP1Encoder`` checks them.
    private static func encodeHead(
        _ request: HTTPClientRequest,
        body: RequestBody?,
        expectsContinue: Bool,
        extra: [(name: String, value: String)],
        target: String,
        hostHeader: String,
        configuration: SessionConfiguration,
        cookiesLeftOut: inout CookiesLeftOut?
    ) throws(HawserError) -> [UInt8] {
        let headers = request.headers
        var out: [UInt8] = []
        out.reserveCapacity(256)
        do throws(HTTP1EncodeError) {
            try HTTP1Encoder.writeRequestLine(method: request.method, target: target, into: &out)
            if !headers.contains(name: "Host") {
                try HTTP1Encoder.writeField(name: "Host", value: hostHeader, into: &out)
            }
            // The body's framing is the session's to write; the caller's framing fields are dropped.
            let framesBody = body != nil
            try HTTP1Encoder.writeFields(headers, omittingFraming: framesBody, into: &out)
            for field in extra {
                try HTTP1Encoder.writeField(name: field.name, value: field.value, into: &out)
            }
            for field in configuration.httpAdditionalHeaders where !headers.contains(name: field.name) {
                try HTTP1Encoder.writeField(name: field.name, value: field.value, into: &out)
            }
            if request.shouldHandleCookies ?? configuration.httpShouldSetCookies,
                let jar = configuration.httpCookieStorage,
                !headers.contains(name: "Cookie"), let cookies = jar.cookieHeader(for: request.url)
            {
                // Byte for byte as the jar holds them: cookie octets need not be UTF-8.
                if cookies.cookieCount > 0 {
                    try HTTP1Encoder.writeField(name: "Cookie", valueBytes: cookies.value, into: &out)
                }
                if cookies.omittedCount > 0 {
                    cookiesLeftOut = CookiesLeftOut(
                        sent: cookies.cookieCount,
                        omitted: cookies.omittedCount,
                        maxBytes: cookies.maxBytes,
                        maxCount: cookies.maxCount
                    )
                }
            }
            if configuration.automaticallyDecodesContent, !headers.contains(name: "Accept-Encoding") {
                // A byte range of a coded representation cannot be decoded on its own (and its
                // offsets count coded bytes): a Range request asks for the identity coding.
                let accept = headers.contains(name: "Range") ? "identity" : ContentDecoder.acceptEncoding
                try HTTP1Encoder.writeField(name: "Accept-Encoding", value: accept, into: &out)
            }
            if let body {
                if expectsContinue, !headers.contains(name: "Expect") {
                    try HTTP1Encoder.writeField(name: "Expect", value: "100-continue", into: &out)
                }
                if let length = body.knownLength {
                    try HTTP1Encoder.writeField(name: "Content-Length", value: String(length), into: &out)
                } else {
                    try HTTP1Encoder.writeField(name: "Transfer-Encoding", value: "chunked", into: &out)
                }
            } else if request.method == .post || request.method == .put || request.method == .patch {
                // RFC 9110 §8.6: a user agent SHOULD send Content-Length 0 when a method defines a body.
                if !headers.contains(name: "Content-Length") {
                    try HTTP1Encoder.writeField(name: "Content-Length", value: "0", into: &out)
                }
            }
            HTTP1Encoder.writeEndOfHead(into: &out)
        } catch {
            throw HawserError(
                .invalidRequest,
                "cannot encode the request: \(error)",
                url: request.url,
                underlying: error
            )
        }
        return out
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

/// Collects a response in memory for the buffered APIs. Loop-confined.
///
/// It never holds more than `limit` bytes, nor reserves more: a body that declares more (its
/// Content-Length, when the delegate gets the body as framed) is refused at the head, before a
/// byte of it is read, and the connection is closed; a body of unknown length (chunked,
/// close-delimited, decoded) is refused as soon as one more byte would go past the limit, and
/// the buffer grows by doubling but never past the limit.
final class BufferedResponseCollector: ResponseDelegate, @unchecked Sendable {
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private let limit: Int
    private let completion: @Sendable (Result<HTTPClientResponse, HawserError>) -> Void

    init(limit: Int, completion: @escaping @Sendable (Result<HTTPClientResponse, HawserError>) -> Void) {
        self.limit = limit
        self.completion = completion
    }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.head = head
        guard let length = task.deliveredBodyLength(of: head), length > 0 else { return }
        if length > Int64(self.limit) {
            task.fail(
                HawserError(
                    .limitExceeded,
                    "the response declares a \(length)-byte body (Content-Length), larger than maximumBufferedBodySize (\(self.limit) bytes); refused before reading it"
                )
            )
            return
        }
        self.body.reserveCapacity(Int(length))
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        let needed = self.body.count + bytes.count
        if needed > self.limit {
            task.fail(
                HawserError(
                    .limitExceeded,
                    "the response body is larger than maximumBufferedBodySize (\(self.limit) bytes): more than that arrived"
                )
            )
            return
        }
        if needed > self.body.capacity {
            // Grow as append would (doubling), but never reserve past the limit.
            self.body.reserveCapacity(min(self.limit, max(needed, 2 * self.body.capacity)))
        }
        self.body.append(contentsOf: bytes)
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        switch result {
        case .success:
            guard let head = self.head else {
                self.completion(
                    .failure(HawserError(.protocolError, "the response ended without a head", url: task.request.url))
                )
                return
            }
            self.completion(.success(HTTPClientResponse(head: head, body: self.body, metrics: metrics)))
        case .failure(let e):
            self.completion(.failure(e))
        }
        self.body = []
    }
}
