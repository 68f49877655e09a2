// Keep-alive connections per origin, a per-origin limit with a FIFO wait queue, idle
// timeouts, and the one retry of an idempotent request whose reused connection turned
// out to be dead. Loop-confined: every method runs on the session's event loop.
import HawserAuth
import HawserBase
import HawserCache
import HawserCookies
import HawserHTTP1
import HawserPosix
import HawserReachability
import HawserTLS
final class ConnectionPool: @unchecked Sendable {
    /// A class, so the pool changes it in place through a dictionary read: mutating a struct
    /// value through the dictionary's subscript runs its modify coroutine, whose frame (holding
    /// a copy of the large key) is heap-allocated, on every dispatch and every release.
    private final class Origin {
        var idle: [HTTP1Connection] = []
        var waiting = CircularQueue<RequestTask>()
        /// Live connections plus connects in progress: what the per-host limit counts.
        var total = 0
        var connecting = 0
    }

    let loop: EventLoop
    let configuration: SessionConfiguration
    private var origins: [ConnectionKey: Origin] = [:]
    private var connections: [ObjectIdentifier: HTTP1Connection] = [:]
    private var connectors: [ObjectIdentifier: Connector] = [:]
    private var tasks: [ObjectIdentifier: RequestTask] = [:]
    private(set) var isShutDown = false
    /// The one receive buffer all of this pool's connections read into (they share a thread,
    /// so one at a time), and which connection holds it right now.
    let readBuffer: ReadBuffer
    var readBufferOwner: ObjectIdentifier?
    /// The session-level delegate, asked about challenges the task's delegate leaves alone.
    let sessionDelegate: (any SessionDelegate)?
    weak var session: Session?
    /// Nonce counts of the Digest challenges this session answered.
    let digestAuthenticator = DigestAuthenticator()
    /// The TLS context for https origins, made on first use (or the error making it gave).
    private var tlsContext: Result<TLSContext, HawserError>?

    init(loop: EventLoop, configuration: SessionConfiguration, sessionDelegate: (any SessionDelegate)? = nil) {
        self.loop = loop
        self.configuration = configuration
        self.sessionDelegate = sessionDelegate
        self.readBuffer = ReadBuffer(capacity: configuration.readChunkSize)
    }

    // MARK: - Introspection (tests, diagnostics)

    struct Snapshot: Sendable, Hashable {
        var openConnections: Int
        var idleConnections: Int
        var waitingTasks: Int
        var runningTasks: Int
        var connecting: Int
    }

    func snapshot() -> Snapshot {
        var idle = 0, waiting = 0, connecting = 0
        for o in self.origins.values {
            idle += o.idle.count
            waiting += o.waiting.count
            connecting += o.connecting
        }
        return Snapshot(openConnections: self.connections.count, idleConnections: idle, waitingTasks: waiting,
                        runningTasks: self.tasks.count, connecting: connecting)
    }

    // MARK: - Tasks

    func submit(_ task: RequestTask) {
        self.loop.assertInLoop()
        if self.isShutDown {
            task.finish(.failure(HawserError(.sessionShutDown, "the session has been shut down", url: task.request.url)))
            return
        }
        self.tasks[ObjectIdentifier(task)] = task
        task.start(configuration: self.configuration)
        if self.configuration.urlCache != nil, task.consultCache() { return }
        self.dispatch(task, front: false)
    }

    /// The origin for `key`, made on first use (one hash lookup when it exists).
    private func origin(for key: ConnectionKey) -> Origin {
        if let o = self.origins[key] { return o }
        let o = Origin()
        self.origins[key] = o
        return o
    }

    private func dispatch(_ task: RequestTask, front: Bool) {
        let key = task.key
        let origin = self.origin(for: key)
        if task.needsFreshConnection {
            // Make room for the new connection: an idle one is closed if the limit is reached.
            if origin.total >= self.configuration.maximumConnectionsPerHost, !origin.idle.isEmpty {
                origin.idle.removeFirst().close()
            }
        } else {
            while let c = origin.idle.popLast() {
                if c.isClosed { continue }
                c.execute(task)
                return
            }
        }
        task.state = .queued
        if front {
            origin.waiting.prepend(task)
        } else {
            origin.waiting.append(task)
        }
        self.connectIfNeeded(key)
    }

    /// Sends a task that is already the pool's again, with a new request (a followed redirect).
    func redispatch(_ task: RequestTask) {
        if self.isShutDown {
            task.finish(.failure(HawserError(.sessionShutDown, "the session has been shut down", url: task.request.url)))
            return
        }
        self.dispatch(task, front: false)
    }

    /// Replays `task` once on a newly opened connection (its reused one was dead).
    func retry(_ task: RequestTask) {
        task.state = .created
        task.needsFreshConnection = true
        self.dispatch(task, front: true)
    }

    func removeWaiting(_ task: RequestTask) {
        _ = self.origins[task.key]?.waiting.removeFirst(where: { $0 === task })
    }

    func taskFinished(_ task: RequestTask) {
        self.tasks.removeValue(forKey: ObjectIdentifier(task))
    }

    // MARK: - Connections

    private func connectIfNeeded(_ key: ConnectionKey) {
        guard let origin = self.origins[key] else { return }
        while origin.waiting.count > origin.connecting, origin.total < self.configuration.maximumConnectionsPerHost {
            var context: TLSContext? = nil
            if key.scheme == "https" {
                switch self.clientTLSContext() {
                case .success(let c): context = c
                case .failure(let error):
                    self.failNextWaiting(key, error, reconnect: false)
                    continue
                }
            }
            origin.total += 1
            origin.connecting += 1
            let connector = Connector(key: key, loop: self.loop, timeoutSeconds: self.configuration.connectTimeout,
                                      dnsOverride: self.configuration.dnsOverride, tlsContext: context,
                                      trustHook: context == nil ? nil : { [unowned(unsafe) self] connector, chain, decide in
                                          self.evaluateTrust(connector.key, chain, decide)
                                      }) {
                [unowned(unsafe) self] connector, result in
                self.connectors.removeValue(forKey: ObjectIdentifier(connector))
                self.connectFinished(key: key, result: result)
            }
            self.connectors[ObjectIdentifier(connector)] = connector
            connector.start()
        }
    }

    private func connectFinished(key: ConnectionKey, result: Result<Connector.Established, HawserError>) {
        self.origin(for: key).connecting -= 1
        switch result {
        case .success(let r):
            let c = HTTP1Connection(fd: r.fd, remoteAddress: r.address, key: key, loop: self.loop, pool: self,
                                    configuration: self.configuration, timings: r.timings, tls: r.tls)
            do {
                try self.loop.register(fd: r.fd, handler: c, readable: true, writable: false)
            } catch {
                Posix.close(r.fd)
                self.origin(for: key).total -= 1
                self.failNextWaiting(key, HawserError(.ioError, "cannot register the connection: \(error)", underlying: error))
                return
            }
            self.connections[ObjectIdentifier(c)] = c
            if self.isShutDown {
                c.close()
                return
            }
            self.release(c)
        case .failure(let error):
            self.origin(for: key).total -= 1
            self.failNextWaiting(key, error)
        }
    }

    private func failNextWaiting(_ key: ConnectionKey, _ error: HawserError, reconnect: Bool = true) {
        if let t = self.origins[key]?.waiting.popFirst() {
            t.state = .created
            t.finish(.failure(error.with(url: t.request.url)))
        }
        // The others get their own attempt.
        if reconnect { self.connectIfNeeded(key) }
    }

    // MARK: - TLS

    private func clientTLSContext() -> Result<TLSContext, HawserError> {
        if let c = self.tlsContext { return c }
        let made = Result { () throws(TLSError) in try TLSContext(client: self.configuration.tls) }.mapError { HawserError($0) }
        self.tlsContext = made
        return made
    }

    /// Decides about a server's chain after a handshake: the delegate of the task first in line
    /// for this origin (the one the connection is for), then the session's delegate, then the
    /// configuration's evaluator. `decide` runs on the loop.
    private func evaluateTrust(_ key: ConnectionKey, _ chain: Result<[Certificate], CertificateError>,
                               _ decide: @escaping (HawserError?) -> Void) {
        let certificates: [Certificate]
        switch chain {
        case .success(let list):
            certificates = list
        case .failure(let error):
            decide(HawserError(.secureConnectionFailed, "\(key.host):\(key.port) sent a certificate that cannot be parsed: \(error)", underlying: error))
            return
        }
        if certificates.isEmpty {
            decide(HawserError(.secureConnectionFailed, "\(key.host):\(key.port) sent no certificate"))
            return
        }
        let trust = ServerTrust(host: key.host, certificates: certificates)
        let evaluator = self.configuration.serverTrustEvaluator ?? DefaultTrustEvaluator()
        let untrusted = { @Sendable (failure: TrustFailure) -> HawserError in
            var e = HawserError(.serverCertificateUntrusted,
                                "the certificate of \(key.host):\(key.port) is not trusted: \(failure.message)", underlying: failure)
            e.peerCertificates = certificates
            return e
        }
        let defaultHandling = { @Sendable () -> HawserError? in
            do throws(TrustFailure) {
                try evaluator.evaluate(trust, forHost: key.host)
                return nil
            } catch {
                return untrusted(error)
            }
        }
        let space = ProtectionSpace(host: key.host, port: key.port, urlScheme: .https, realm: nil, authenticationMethod: .serverTrust)
        let challenge = AuthenticationChallenge(protectionSpace: space, serverTrust: trust)
        let loop = self.loop
        let decideOnLoop = UnsafeTransfer(decide)
        let answer: @Sendable (ChallengeDisposition, _ next: (@Sendable () -> Void)?) -> Void = { disposition, next in
            let result: HawserError?
            switch disposition {
            case .useServerTrust, .useCredential: result = nil
            case .refuseServerTrust(let failure): result = untrusted(failure)
            case .rejectProtectionSpace:
                result = untrusted(TrustFailure(.other, "the challenge handler rejected the server's certificate"))
            case .cancelAuthenticationChallenge:
                var e = HawserError(.cancelled, "the server-trust challenge for \(key.host) was cancelled")
                e.peerCertificates = certificates
                result = e
            case .performDefaultHandling:
                if let next { next(); return }
                result = defaultHandling()
            }
            if loop.inEventLoop { decideOnLoop.value(result) } else { loop.execute { decideOnLoop.value(result) } }
        }
        let askSession: @Sendable () -> Void = { [weak session = self.session, sessionDelegate = self.sessionDelegate] in
            guard let sessionDelegate, let session else {
                answer(.performDefaultHandling, nil)
                return
            }
            sessionDelegate.session(session, didReceive: challenge) { answer($0, nil) }
        }
        guard let task = self.origins[key]?.waiting.first else {
            askSession()
            return
        }
        task.delegate.task(task, didReceive: challenge) { answer($0, askSession) }
    }

    /// A connection finished a response and can be reused: hand it the next waiting task or park it.
    func release(_ c: HTTP1Connection) {
        guard !c.isClosed else { return }
        if self.isShutDown {
            c.close()
            return
        }
        let origin = self.origin(for: c.key)
        let fresh = c.isFresh
        if let t = origin.waiting.removeFirst(where: { fresh || !$0.needsFreshConnection }) {
            if fresh { t.needsFreshConnection = false }
            c.execute(t)
            return
        }
        if !origin.waiting.isEmpty, origin.total >= self.configuration.maximumConnectionsPerHost {
            // Only replays that need a new connection wait, and there is no room to open one.
            c.close()
            return
        }
        origin.idle.append(c)
        c.startIdleTimer(self.configuration.idleConnectionTimeout)
    }

    func connectionClosed(_ c: HTTP1Connection) {
        guard self.connections.removeValue(forKey: ObjectIdentifier(c)) != nil else { return }
        if let origin = self.origins[c.key] {
            origin.total -= 1
            origin.idle.removeAll { $0 === c }
        }
        if !self.isShutDown { self.connectIfNeeded(c.key) }
    }

    // MARK: - Shutdown

    /// Fails every task with `sessionShutDown`, closes every connection and cancels connects.
    func shutdown() {
        guard !self.isShutDown else { return }
        self.isShutDown = true
        let error = HawserError(.sessionShutDown, "the session was shut down")
        for t in Array(self.tasks.values) { t.fail(error) }
        for c in Array(self.connections.values) { c.close() }
        for k in Array(self.connectors.values) { k.abort(error) }
        self.connectors.removeAll()
    }
}
