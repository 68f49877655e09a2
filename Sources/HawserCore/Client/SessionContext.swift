// What a session's tasks, connections and pool share on one of its loops, apart from the pool's
// own bookkeeping: the configuration, the delegates, the TLS context, Digest nonce counts (the
// session's one authenticator, thread-safe), and the loop's one read buffer. Loop-confined; a
// session over several loops has one per loop.
import HawserAuth
import HawserBase
import HawserCache
import HawserCoding
import HawserPosix
import HawserProxy
import HawserTLS

/// `@unchecked Sendable`: its fields are immutable or thread-safe (the Digest authenticator),
/// except `readBufferOwner`, `tlsContext` and `tlsContextWaiters`, which are used only on `loop`
/// (left out of a `LoopBound`: the buffer owner is read per received chunk).
final class SessionContext: @unchecked Sendable {
    let loop: EventLoop
    let configuration: SessionConfiguration
    /// The session-level delegate, asked about challenges the task's delegate leaves alone.
    let sessionDelegate: (any SessionDelegate)?
    weak var session: Session?
    /// Nonce counts of the Digest challenges this session answered (one for the session: every
    /// loop's context holds the same, thread-safe one).
    let digestAuthenticator: DigestAuthenticator
    /// The one receive buffer all of this session's connections read into (they share a thread,
    /// so one at a time), and which connection holds it right now.
    let readBuffer: ReadBuffer
    var readBufferOwner: ObjectIdentifier?
    /// The TLS context for https origins, made on first use (or the error making it gave), and
    /// the connects waiting while the IO pool makes it.
    private var tlsContext: Result<TLSContext, HawserError>?
    private var tlsContextWaiters: [(Result<TLSContext, HawserError>) -> Void] = []
    /// Nanosecond forms of the configuration's timeouts (read for every task).
    let idleTimeoutNanos: UInt64
    let resourceTimeoutNanos: UInt64
    let expectContinueNanos: UInt64
    /// What every task reads of the configuration, kept apart: reading them through
    /// `configuration` made the compiler copy the whole configuration (retains included) per read.
    let urlCache: HTTPCache?
    let automaticallyDecodesContent: Bool
    let decodingLimits: DecodingLimits
    let httpShouldSetCookies: Bool
    let httpCookieStorage: CookieJar?
    let redirects: RedirectConfiguration
    /// Answers requests before any IO (tests); nil for every session that does not set one.
    let responder: (any HTTPResponder)?
    /// The session's bandwidth limits (0: none).
    let maximumReceiveBytesPerSecond: Int64
    let maximumSendBytesPerSecond: Int64

    init(
        loop: EventLoop,
        configuration: SessionConfiguration,
        sessionDelegate: (any SessionDelegate)?,
        digestAuthenticator: DigestAuthenticator = DigestAuthenticator()
    ) {
        self.loop = loop
        self.digestAuthenticator = digestAuthenticator
        self.configuration = configuration
        self.sessionDelegate = sessionDelegate
        self.readBuffer = ReadBuffer(capacity: configuration.readChunkSize)
        self.idleTimeoutNanos = Self.nanos(configuration.timeoutIntervalForRequest)
        self.resourceTimeoutNanos = Self.nanos(configuration.timeoutIntervalForResource)
        self.expectContinueNanos = Self.nanos(configuration.expectContinueTimeout)
        self.urlCache = configuration.urlCache
        self.automaticallyDecodesContent = configuration.automaticallyDecodesContent
        self.decodingLimits = configuration.decodingLimits
        self.httpShouldSetCookies = configuration.httpShouldSetCookies
        self.httpCookieStorage = configuration.httpCookieStorage
        self.redirects = configuration.redirects
        self.responder = configuration.responder
        self.maximumReceiveBytesPerSecond = max(0, configuration.maximumReceiveBytesPerSecond ?? 0)
        self.maximumSendBytesPerSecond = max(0, configuration.maximumSendBytesPerSecond ?? 0)
    }

    static func nanos(_ seconds: Double) -> UInt64 {
        // `!(seconds > 0)` also catches NaN, which UInt64(_:) would trap on.
        if !(seconds > 0) { return 0 }
        if seconds > 1e9 { return UInt64(1e18) }
        return UInt64(seconds * 1e9)
    }

    /// Calls `body` on the loop with the TLS context for https origins: at once when it is made,
    /// else once the IO pool has made it. Making it reads files — the client identity's
    /// certificate and key, and the trust stores the session's evaluators will use (the system
    /// bundle) — so it never runs on the loop. Once per session; a failure is kept as well.
    func withClientTLSContext(_ body: @escaping (Result<TLSContext, HawserError>) -> Void) {
        if let made = self.tlsContext {
            body(made)
            return
        }
        self.tlsContextWaiters.append(body)
        guard self.tlsContextWaiters.count == 1 else { return }
        let configuration = self.configuration
        BlockingIOPool.shared.submit(
            key: "session-tls-context-\(ObjectIdentifier(self))",
            on: self.loop,
            { Self.makeClientTLSContext(configuration) }
        ) { [self] made in
            self.tlsContext = made
            let waiters = self.tlsContextWaiters
            self.tlsContextWaiters = []
            for waiter in waiters { waiter(made) }
        }
    }

    /// Off the loop: the context, and the trust stores loaded for the first evaluations.
    private static func makeClientTLSContext(
        _ configuration: SessionConfiguration
    ) -> Result<TLSContext, HawserError> {
        let made = Result { () throws(TLSError) in try TLSContext(client: configuration.tls) }.mapError {
            HawserError($0)
        }
        guard case .success = made else { return made }
        (configuration.serverTrustEvaluator ?? DefaultTrustEvaluator()).loadTrustStores()
        if let proxyEvaluator = configuration.proxyTrustEvaluator { proxyEvaluator.loadTrustStores() }
        return made
    }

    /// A challenge for `task`: its delegate first; if that performs default handling, the
    /// session's delegate; `answer` gets what the last one in line said.
    func askChallenge(
        _ challenge: AuthenticationChallenge,
        for task: RequestTask,
        _ answer: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        let askSession = self.sessionAsker(challenge, answer)
        task.delegate.task(task, didReceive: challenge) { disposition in
            guard case .performDefaultHandling = disposition else {
                answer(disposition)
                return
            }
            askSession()
        }
    }

    /// Asks the session's delegate (on the loop), or answers default handling when there is none.
    private func sessionAsker(
        _ challenge: AuthenticationChallenge,
        _ answer: @escaping @Sendable (ChallengeDisposition) -> Void
    ) -> @Sendable () -> Void {
        let loop = self.loop
        let context = LoopBound(handingOver: self, to: loop)
        return {
            let ask: @Sendable () -> Void = {
                guard let delegate = context.value.sessionDelegate, let session = context.value.session else {
                    answer(.performDefaultHandling)
                    return
                }
                delegate.session(session, didReceive: challenge, completion: answer)
            }
            if loop.inEventLoop { ask() } else { loop.execute(ask) }
        }
    }

    // MARK: - Server trust

    /// Decides about an https proxy's chain after the handshake with it: the configuration's
    /// `proxyTrustEvaluator` (a `DefaultTrustEvaluator` when nil) for the proxy's host name.
    /// Delegates are not asked: their server-trust challenges are about origins. `decide` runs
    /// at once, on the loop.
    func evaluateProxyTrust(
        _ proxy: ProxyServer,
        _ chain: Result<[Certificate], CertificateError>,
        _ decide: (HawserError?) -> Void
    ) {
        let certificates: [Certificate]
        switch chain {
        case .success(let list):
            certificates = list
        case .failure(let error):
            decide(
                HawserError(
                    .secureConnectionFailed,
                    "the proxy \(proxy) sent a certificate that cannot be parsed: \(error)",
                    underlying: error
                )
            )
            return
        }
        if certificates.isEmpty {
            decide(HawserError(.secureConnectionFailed, "the proxy \(proxy) sent no certificate"))
            return
        }
        let evaluator = self.configuration.proxyTrustEvaluator ?? DefaultTrustEvaluator()
        do throws(TrustFailure) {
            try evaluator.evaluate(ServerTrust(host: proxy.host, certificates: certificates), forHost: proxy.host)
            decide(nil)
        } catch {
            var e = HawserError(
                .serverCertificateUntrusted,
                "the certificate of the proxy \(proxy) is not trusted: \(error.message)",
                underlying: error
            )
            e.peerTrust = ServerTrust(host: proxy.host, certificates: certificates)
            decide(e)
        }
    }

    /// Whether connections to `host` ask for a stapled OCSP response: the configuration says so,
    /// the evaluator for `host` checks one, or the session's delegate asks (a manager whose
    /// security policy checks one).
    func requestsStapledOCSP(forHost host: String) -> Bool {
        if self.configuration.tls.requestsStapledOCSP { return true }
        if (self.configuration.serverTrustEvaluator ?? DefaultTrustEvaluator()).requestsStapledOCSP(forHost: host) {
            return true
        }
        guard let delegate = self.sessionDelegate, let session = self.session else { return false }
        return delegate.session(session, requestsStapledOCSPForHost: host)
    }

    /// Decides about a server's chain after a handshake: `task`'s delegate first (the task first
    /// in line for the origin the connection is opened for), then the session's delegate, then
    /// the configuration's evaluator. `decide` runs on the loop, exactly once.
    func evaluateTrust(
        _ key: ConnectionKey,
        _ chain: Result<[Certificate], CertificateError>,
        stapledOCSPResponse: [UInt8]? = nil,
        task: RequestTask?,
        _ decide: @escaping (HawserError?) -> Void
    ) {
        let certificates: [Certificate]
        switch chain {
        case .success(let list):
            certificates = list
        case .failure(let error):
            decide(
                HawserError(
                    .secureConnectionFailed,
                    "\(key.host):\(key.port) sent a certificate that cannot be parsed: \(error)",
                    underlying: error
                )
            )
            return
        }
        if certificates.isEmpty {
            decide(HawserError(.secureConnectionFailed, "\(key.host):\(key.port) sent no certificate"))
            return
        }
        let trust = ServerTrust(host: key.host, certificates: certificates, stapledOCSPResponse: stapledOCSPResponse)
        let evaluator = self.configuration.serverTrustEvaluator ?? DefaultTrustEvaluator()
        let untrusted = { @Sendable (failure: TrustFailure) -> HawserError in
            var e = HawserError(
                .serverCertificateUntrusted,
                "the certificate of \(key.host):\(key.port) is not trusted: \(failure.message)",
                underlying: failure
            )
            e.peerTrust = trust
            return e
        }
        let loop = self.loop
        let decideOnLoop = LoopBound(decide, loop: loop)
        let answer: @Sendable (ChallengeDisposition) -> Void = { disposition in
            let result: HawserError?
            switch disposition {
            case .useServerTrust, .useCredential:
                result = nil
            case .refuseServerTrust(let failure):
                result = untrusted(failure)
            case .rejectProtectionSpace:
                result = untrusted(TrustFailure(.other, "the challenge handler rejected the server's certificate"))
            case .cancelAuthenticationChallenge:
                var e = HawserError(.cancelled, "the server-trust challenge for \(key.host) was cancelled")
                e.peerTrust = trust
                result = e
            case .performDefaultHandling:
                do throws(TrustFailure) {
                    try evaluator.evaluate(trust, forHost: key.host)
                    result = nil
                } catch {
                    result = untrusted(error)
                }
            }
            if loop.inEventLoop { decideOnLoop.value(result) } else { loop.execute { decideOnLoop.value(result) } }
        }
        let space = ProtectionSpace(
            host: key.host,
            port: key.port,
            urlScheme: .https,
            realm: nil,
            authenticationMethod: .serverTrust
        )
        let challenge = AuthenticationChallenge(protectionSpace: space, serverTrust: trust)
        if let task {
            self.askChallenge(challenge, for: task, answer)
        } else {
            self.sessionAsker(challenge, answer)()
        }
    }
}
