// What happens to a response between the parser and the delegate: redirects are followed
// (the redirect's body is drained and the task starts again with the next request), and the
// delegate's decisions are awaited with reading held. Loop-confined.
import HawserHTTP1
import HawserAuth
import HawserBase
import HawserCache
import HawserCoding
import HawserCookies
import HawserPosix
import HawserProxy
import HawserTLS

extension RequestTask {
    /// A final response head from the connection.
    func receivedHead(_ head: HTTPResponseHead) {
        // Fields are read through the pool, not from a local copy of the whole configuration:
        // this runs for every response.
        let pool = self.pool
        if self.request.shouldHandleCookies ?? pool.configuration.httpShouldSetCookies, let jar = pool.configuration.httpCookieStorage,
           head.headers.contains(name: "Set-Cookie") {
            jar.setCookies(fromResponseHeaders: head.headers, for: self.request.url)
        }
        if head.status == 417, self.bodyWithheld {
            // 417 Expectation Failed: the server will not do 100-continue; send it again without
            // the expectation (RFC 9110 §10.1.1), once.
            self.bodyWithheld = false
            var again = self.request
            again.expectsContinue = false
            again.headers.remove(name: "Expect")
            self.followUp = again
            self.countsFollowUpAsRedirect = false
            return
        }
        self.bodyWithheld = false
        if head.status == 401 || head.status == 407 {
            let isProxy = head.status == 407
            let challenges = HTTPAuthChallenge.parse(head.headers, proxy: isProxy)
            if !challenges.isEmpty, self.decideAuthentication(head, challenges, isProxy: isProxy) { return }
        }
        switch Redirect.nextRequest(after: self.request, response: head, redirectsSoFar: self.metrics.redirectCount,
                                    configuration: pool.configuration.redirects) {
        case nil:
            self.deliverHead(head)
        case .failure(let error)?:
            self.fail(error)
        case .success(let next)?:
            self.decideRedirect(head, next)
        }
    }

    /// Body bytes from the connection: swallowed while a followed redirect's body drains.
    func receivedBody(_ bytes: UnsafeRawBufferPointer) {
        if self.followUp != nil || self.drainingResponse || self.servedFromCache { return }
        guard self.decoder != nil else {
            if self.cacheRecording != nil { self.recordForCache(bytes) }
            self.delegate.task(self, didReceiveBody: bytes)
            return
        }
        do {
            try self.decoder!.decode(bytes) { (chunk: UnsafeRawBufferPointer) throws(HawserError) in
                guard !self.isFinished else { return }
                if self.cacheRecording != nil { self.recordForCache(chunk) }
                self.delegate.task(self, didReceiveBody: chunk)
            }
        } catch {
            self.decoder = nil
            self.fail(error)
        }
    }

    func deliverHead(_ head: HTTPResponseHead) {
        let pool = self.pool
        self.decoder = nil
        if pool.configuration.automaticallyDecodesContent, self.request.method != .head,
           head.status != 204, head.status != 304,
           let coding = head.headers["Content-Encoding"], ContentDecoder.canDecode(contentEncoding: coding) {
            do {
                let d = try ContentDecoder(contentEncoding: coding, limits: pool.configuration.decodingLimits)
                if !d.codings.isEmpty { self.decoder = d }
            } catch {
                self.fail(error)
                return
            }
        }
        var delivered = head
        if pool.configuration.urlCache != nil {
            delivered = self.cacheHead(head)
            if self.servedFromCache { self.decoder = nil }
        }
        self.delegate.task(self, didReceiveHead: delivered)
        if let body = self.pendingCachedBody {
            self.pendingCachedBody = nil
            if !body.isEmpty, !self.isFinished { body.withUnsafeBytes { self.delegate.task(self, didReceiveBody: $0) } }
        }
    }

    /// Holds reading while `decide` runs; `decide` gets a resume function to call exactly once,
    /// from any thread, with what to do on the loop.
    private func awaitDecision(_ decide: (_ resume: @escaping @Sendable (@escaping @Sendable (RequestTask) -> Void) -> Void) -> Void) {
        self.decisionPending = true
        // Stop reading now: what follows (the body, or the server's close) must wait for the answer.
        if case .executing(let c) = self.state { c.updateReadInterest() }
        let loop = self.eventLoop
        decide { action in
            let body: @Sendable () -> Void = { [self] in
                guard !self.isFinished, self.decisionPending else { return }
                self.decisionPending = false
                action(self)
                guard !self.isFinished else { return }
                self.lastActivity = self.eventLoop.now
                if case .executing(let c) = self.state { c.resumeAfterPause() }
            }
            if loop.inEventLoop { loop.executeInLoop(body) } else { loop.execute(body) }
        }
    }

    private func decideRedirect(_ head: HTTPResponseHead, _ proposed: HTTPClientRequest) {
        let keepsBody = proposed.body != nil
        let redirected = self.request
        let rules = self.pool.configuration.redirects
        self.awaitDecision { resume in
            self.delegate.task(self, willPerformRedirection: head, newRequest: proposed) { answer in
                guard let answer else {
                    // Refused: the redirect response is the final response.
                    resume { task in task.deliverHead(head) }
                    return
                }
                let chosen: HTTPClientRequest
                switch Redirect.checkRewrite(answer, proposed: proposed, from: redirected, configuration: rules) {
                case .success(let checked):
                    chosen = checked
                case .failure(let error):
                    resume { task in task.fail(error) }
                    return
                }
                guard keepsBody, case .stream? = chosen.body else {
                    resume { task in task.followUp = chosen }
                    return
                }
                // A streamed body cannot be replayed: the delegate must give a new one.
                resume { task in
                    task.drainingResponse = true
                    task.delegate.task(task, needNewBodyStream: { body in
                        task.eventLoop.execute {
                            guard !task.isFinished else { return }
                            guard let body else {
                                task.fail(HawserError(.invalidRequest,
                                    "the \(head.status) redirect needs the request body again, but it was a stream and needNewBodyStream gave none",
                                    url: task.request.url))
                                return
                            }
                            var next = chosen
                            next.body = body
                            task.drainingResponse = false
                            if task.responseDrained {
                                task.responseDrained = false
                                task.restart(with: next)
                            } else {
                                task.followUp = next
                            }
                        }
                    })
                }
            }
        }
    }

    // MARK: - 401 / 407

    /// Asks the delegates (then the credential store) about a challenge. Returns false when the
    /// response is to be delivered as it is (nothing to answer with, or too many failures).
    private func decideAuthentication(_ head: HTTPResponseHead, _ challenges: [HTTPAuthChallenge], isProxy: Bool) -> Bool {
        let configuration = self.pool.configuration
        let chosen = HTTPAuthChallenge.strongest(of: challenges)
        let field = isProxy ? "Proxy-Authorization" : "Authorization"
        let sentCredentials = self.request.headers.contains(name: field)
        var attempts = (isProxy ? self.proxyAuthAttempts : self.serverAuthAttempts)
            ?? AuthenticationAttempts(maximumFailures: configuration.maximumAuthenticationFailures)
        let decision = attempts.record(chosen, sentCredentials: sentCredentials)
        if isProxy { self.proxyAuthAttempts = attempts } else { self.serverAuthAttempts = attempts }
        guard decision == .retry, let challenge = chosen ?? challenges.first,
              let originSpace = ProtectionSpace(url: self.request.url, challenge: challenge, isProxy: isProxy) else { return false }
        // A proxy's protection space is the proxy's, not the origin's.
        let space = isProxy && self.key.proxy != nil
            ? ProtectionSpace(host: self.key.proxy!.server.host, port: self.key.proxy!.server.port, urlScheme: .http,
                              realm: challenge.realm, authenticationMethod: originSpace.authenticationMethod, isProxy: true)
            : originSpace
        if case .stream? = self.request.body { return false }   // cannot be sent again
        var proposed: Credential? = nil
        if let store = configuration.urlCredentialStorage {
            let stored = store.credentials(for: space)
            proposed = store.defaultCredential(for: space) ?? (stored.count == 1 ? stored.first?.value : nil)
        }
        if proposed == nil, isProxy, let c = self.key.proxy?.server.credentials {
            proposed = Credential(user: c.user, password: c.password, persistence: .none)
        }
        if proposed == nil, !isProxy, let user = self.request.url.user(percentEncoded: false) {
            proposed = Credential(user: user, password: self.request.url.password(percentEncoded: false) ?? "", persistence: .none)
        }
        // A credential the server just refused is not proposed again.
        if sentCredentials, attempts.failureCount > 0, attempts.staleRetries == 0 || chosen?[parameter: "stale"]?.lowercased() != "true" {
            proposed = nil
        }
        let authChallenge = AuthenticationChallenge(protectionSpace: space, httpChallenges: challenges,
                                                    previousFailureCount: attempts.failureCount, failureResponse: head,
                                                    proposedCredential: proposed)
        let answerable = chosen != nil
        let defaultCredential = proposed
        self.awaitDecision { resume in
            self.askChallenge(authChallenge) { disposition in
                resume { task in
                    switch disposition {
                    case .useCredential(let credential):
                        task.answerChallenge(challenge, space: space, credential: credential, isProxy: isProxy, head: head)
                        if credential.persistence != .none { configuration.urlCredentialStorage?.set(credential, for: space) }
                    case .performDefaultHandling:
                        if answerable, let defaultCredential {
                            task.answerChallenge(challenge, space: space, credential: defaultCredential, isProxy: isProxy, head: head)
                        } else {
                            task.deliverHead(head)
                        }
                    case .cancelAuthenticationChallenge:
                        task.fail(HawserError(.userCancelledAuthentication,
                            "the \(head.status) challenge from \(space.host) was cancelled by its handler", url: task.request.url))
                    case .rejectProtectionSpace, .useServerTrust, .refuseServerTrust:
                        task.deliverHead(head)
                    }
                }
            }
        }
        return true
    }

    /// Task delegate first; if it performs default handling, the session's delegate.
    private func askChallenge(_ challenge: AuthenticationChallenge, _ answer: @escaping @Sendable (ChallengeDisposition) -> Void) {
        let pool = UnsafeTransfer(self.pool)
        let loop = self.eventLoop
        self.delegate.task(self, didReceive: challenge) { disposition in
            guard case .performDefaultHandling = disposition else {
                answer(disposition)
                return
            }
            let askSession: @Sendable () -> Void = {
                guard let sessionDelegate = pool.value.sessionDelegate, let session = pool.value.session else {
                    answer(.performDefaultHandling)
                    return
                }
                sessionDelegate.session(session, didReceive: challenge, completion: answer)
            }
            if loop.inEventLoop { askSession() } else { loop.execute(askSession) }
        }
    }

    /// Sends the request again with credentials for `challenge` (Basic or Digest); a credential
    /// that cannot be encoded fails the task with the reason.
    private func answerChallenge(_ challenge: HTTPAuthChallenge, space: ProtectionSpace, credential: Credential,
                                 isProxy: Bool, head: HTTPResponseHead) {
        let value: String
        do throws(AuthenticationError) {
            if challenge.hasScheme("Digest") {
                var target = self.request.url.path(percentEncoded: true)
                if target.isEmpty { target = "/" }
                if let q = self.request.url.query(percentEncoded: true) { target += "?" + q }
                // qop=auth-int hashes the body: a request without one has an empty body.
                var body: [UInt8]? = nil
                switch self.request.body {
                case nil: body = []
                case .bytes(let b)?: body = b
                case .stream?: body = nil
                }
                value = try self.pool.digestAuthenticator.authorization(responding: challenge, in: space, credential: credential,
                                                                        method: self.request.method, target: target, body: body)
            } else if challenge.hasScheme("Basic") {
                value = try BasicAuthentication.authorizationValue(for: credential)
            } else {
                self.deliverHead(head)
                return
            }
        } catch {
            self.fail(HawserError(.userAuthenticationRequired, "cannot answer the \(challenge.scheme) challenge of \(space.host): \(error)",
                                  url: self.request.url, underlying: error))
            return
        }
        var again = self.request
        again.headers.replaceOrAdd(name: isProxy ? "Proxy-Authorization" : "Authorization", value: value)
        self.followUp = again
        self.countsFollowUpAsRedirect = false
    }

    /// Starts the task again with `next` (a followed redirect): a new head, possibly another
    /// origin, the same timers and delegate.
    func restart(with next: HTTPClientRequest) {
        let configuration = self.pool.configuration
        let prepared: (key: ConnectionKey, head: [UInt8], body: RequestBody?)
        do {
            prepared = try Session.prepare(next, configuration: configuration)
        } catch {
            self.state = .created
            self.finish(.failure(error.with(url: next.url)))
            return
        }
        self.request = next
        self.key = prepared.key
        self.encodedHead = prepared.head
        self.wireBody = prepared.body
        if self.countsFollowUpAsRedirect { self.metrics.redirectCount += 1 }
        self.countsFollowUpAsRedirect = true
        self.bodyWriter?.taskEnded(.failure(HawserError(.cancelled, "the request was redirected; this body stream is no longer read")))
        self.bodyWriter = nil
        self.bodyBytesSent = 0
        self.retriedThisExchange = false
        self.needsFreshConnection = false
        self.lastActivity = self.eventLoop.now
        self.state = .created
        self.pool.redispatch(self)
    }
}
