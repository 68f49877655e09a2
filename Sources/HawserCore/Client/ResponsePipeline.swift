// What a final head means for the task, and what the delegates decide about it: cookies are
// stored, the 417 retry, 401/407 challenges and redirects are classified for the request state
// machine, the delegates are asked (reading held meanwhile), and a delivered response is decoded
// and recorded for the cache on its way to the delegate. Loop-confined.
import HawserAuth
import HawserBase
import HawserCoding
import HawserHTTP1
import HawserPosix

extension RequestTask {
    /// Classifies a final head for the machine (and stores its cookies).
    func classify(_ head: HTTPResponseHead) -> RequestStateMachine.HeadKind {
        let context = self.context
        if self.request.shouldHandleCookies ?? context.httpShouldSetCookies,
            let jar = context.httpCookieStorage,
            head.headers.contains(name: "Set-Cookie")
        {
            jar.setCookies(fromResponseHeaders: head.headers, for: self.request.url)
        }
        switch ResponseClassification.classify(
            head,
            request: self.request,
            bodyWasWithheld: self.machine.bodyWasWithheld,
            redirectsSoFar: self.metrics.redirectCount,
            redirects: context.redirects
        ) {
        case .head(let decided):
            return decided
        case .challenge(let isProxy, let challenges, let otherwise):
            guard let plan = self.planAuthentication(head, challenges, isProxy: isProxy) else { return otherwise }
            self.auth.pending = plan
            return .challenge
        }
    }

    // MARK: - Delivering

    /// Delivers the final head: sets up decoding and cache recording (a 304 turns into the
    /// stored response).
    func deliverHead(_ head: HTTPResponseHead) {
        let context = self.context
        self.decoder = nil
        switch BodyDecoding.plan(for: head, method: self.request.method, automatic: context.automaticallyDecodesContent)
        {
        case .identity:
            break
        case .decode(let coding):
            do {
                let d = try ContentDecoder(contentEncoding: coding, limits: context.decodingLimits)
                if !d.codings.isEmpty { self.decoder = d }
            } catch {
                self.fail(error)
                return
            }
        case .refuse(let error):
            self.fail(error.with(url: self.request.url))
            return
        }
        var delivered = head
        if context.urlCache != nil {
            delivered = self.cacheHead(head)
            if self.machine.isRevalidated { self.decoder = nil }
        }
        self.delegate.task(self, didReceiveHead: delivered)
    }

    /// How many body bytes the delegate will get after `head`, the head it is being given
    /// (ask from `task(_:didReceiveHead:)`), when the head says so before any body byte arrived:
    /// 0 when the response has none (an answer to HEAD, 204, 304); its `Content-Length` when the
    /// body reaches the delegate as it is framed on the wire. nil when nothing bounds it yet:
    /// a chunked or close-delimited body, a body the session decodes (a coded body's
    /// Content-Length counts coded bytes, not what the delegate gets; the decoded size is
    /// known only as it arrives), and a body served from the cache.
    package func deliveredBodyLength(of head: HTTPResponseHead) -> Int64? {
        if self.request.method == .head || head.status == 204 || head.status == 304 { return 0 }
        if self.decoder != nil || self.machine.lifecycle == .servingFromCache || self.machine.isRevalidated {
            return nil
        }
        return head.headers.contentLength.map(Int64.init)
    }

    /// Body bytes of the delivered response: decoded, recorded for the cache, delivered.
    func deliverBody(_ bytes: UnsafeRawBufferPointer) {
        guard self.decoder != nil else {
            if self.cache.recording != nil { self.recordForCache(bytes) }
            self.delegate.task(self, didReceiveBody: bytes)
            return
        }
        do {
            try self.decoder!.decode(bytes) { (chunk: UnsafeRawBufferPointer) throws(HawserError) in
                guard !self.isFinished else { return }
                if self.cache.recording != nil { self.recordForCache(chunk) }
                self.delegate.task(self, didReceiveBody: chunk)
            }
        } catch {
            self.decoder = nil
            self.fail(error)
        }
    }

    // MARK: - Decisions

    /// Runs `decision` on the loop once a delegate answered (from any thread).
    private func decide(_ decision: RequestStateMachine.Decision) {
        let body: @Sendable () -> Void = { [self] in
            self.machine.decided(decision, into: &self.pool.requestQueue.scratch)
            self.runActions()
        }
        if self.eventLoop.inEventLoop { self.eventLoop.executeInLoop(body) } else { self.eventLoop.execute(body) }
    }

    /// Asks the delegate about following the redirect `head`; reading waits for the answer.
    func askRedirect(_ head: HTTPResponseHead, _ proposed: HTTPClientRequest) {
        let keepsBody = proposed.body != nil
        let redirected = self.request
        let rules = self.context.configuration.redirects
        // RequestTask is Sendable: the answer may come from any thread; `decide` hops to the loop.
        let task = self
        self.delegate.task(self, willPerformRedirection: head, newRequest: proposed) { answer in
            guard let answer else {
                // Refused: the redirect response is the final response.
                task.decide(.deliver)
                return
            }
            switch Redirect.checkRewrite(answer, proposed: proposed, from: redirected, configuration: rules) {
            case .success(let chosen):
                if keepsBody, case .stream? = chosen.body {
                    // A streamed body cannot be replayed: the delegate must give a new one.
                    task.decide(.needBodyStream(chosen))
                } else {
                    task.decide(.followUp(chosen, countsAsRedirect: true))
                }
            case .failure(let error):
                task.decide(.fail(error))
            }
        }
    }

    /// Asks the delegate for the body stream the 307/308 of `status` must send again.
    func askBodyStream(_ chosen: HTTPClientRequest, status: Int) {
        let task = LoopBound(self, loop: self.eventLoop)
        self.delegate.task(
            self,
            needNewBodyStream: { body in
                task.loop.execute {
                    let me = task.value
                    var next = chosen
                    next.body = body
                    let missing = HawserError(
                        .invalidRequest,
                        "the \(status) redirect needs the request body again, but it was a stream and needNewBodyStream gave none",
                        url: me.request.url
                    )
                    me.machine.bodyStreamProvided(
                        body == nil ? nil : next,
                        missing: missing,
                        into: &me.pool.requestQueue.scratch
                    )
                    me.runActions()
                }
            }
        )
    }

    // MARK: - 401 / 407

    /// Records the 401/407 round and plans its answer (ChallengeExchange); nil when the
    /// response is to be delivered as it is.
    private func planAuthentication(
        _ head: HTTPResponseHead,
        _ challenges: [HTTPAuthChallenge],
        isProxy: Bool
    ) -> ChallengeExchange.Plan? {
        let configuration = self.context.configuration
        let proxy = self.prepared.key.proxy?.server
        return self.auth.plan(
            head,
            challenges,
            isProxy: isProxy,
            request: self.request,
            maximumFailures: configuration.maximumAuthenticationFailures,
            proxy: proxy.map { server in
                (
                    host: server.host, port: server.port,
                    credentials: server.credentials.map { (user: $0.user, password: $0.password) }
                )
            },
            store: configuration.urlCredentialStorage
        )
    }

    /// Asks the delegates about the planned challenge; reading waits for the answer.
    func askChallenge() {
        guard let plan = self.auth.pending else { return }
        self.auth.pending = nil
        let task = self  // Sendable; the answer hops to the loop
        let storage = self.context.configuration.urlCredentialStorage
        self.context.askChallenge(plan.authenticationChallenge, for: self) { disposition in
            task.eventLoop.execute {
                task.decide(
                    ChallengeExchange.decision(
                        disposition,
                        plan,
                        request: task.request,
                        digest: task.context.digestAuthenticator
                    )
                )
                if case .useCredential(let credential) = disposition, credential.persistence != .none {
                    storage?.set(credential, for: plan.space)
                }
            }
        }
    }

    // MARK: - Follow-ups

    /// Starts the task again with `next` (a followed `redirect`, an authentication answer, the
    /// 417 retry): a new head, possibly another origin, the same timers and delegate.
    func restart(with next: HTTPClientRequest, redirect: RequestStateMachine.Redirection?) {
        self.detachConnection(HawserError(.cancelled, "the request was redirected; this body stream is no longer read"))
        let prepared: Session.Prepared
        do {
            prepared = try Session.prepare(
                next,
                configuration: self.context.configuration,
                addedFields: self.observer?.headerFields
            )
        } catch {
            self.fail(error.with(url: next.url))
            return
        }
        if let redirect { self.recordRedirect(redirect, to: next) }
        self.request = next
        self.prepared = prepared
        self.observation?.nextExchange = redirect != nil ? .redirect : .resend
        if self.pool.isShutDown {
            self.fail(HawserError(.sessionShutDown, "the session has been shut down", url: next.url))
            return
        }
        self.origin = self.pool.origin(for: prepared.key)
        self.machine.followUpPrepared(
            plan: prepared.plan,
            expectsContinue: prepared.expectsContinue,
            now: self.eventLoop.now,
            into: &self.pool.requestQueue.scratch
        )
        self.runActions()
    }

    /// Keeps the redirect being followed (from `self.request`, its head's status and instant,
    /// to `next`) in the metrics. Off the common path: only a followed redirect gets here.
    private func recordRedirect(_ redirect: RequestStateMachine.Redirection, to next: HTTPClientRequest) {
        let now = self.eventLoop.now
        let hop = RedirectHop(
            url: self.request.url,
            method: self.request.method,
            statusCode: redirect.status,
            location: next.url,
            start: self.metrics.redirects.last?.end ?? self.metrics.fetchStart,
            requestStart: self.metrics.requestStart,
            responseStart: redirect.headAt,
            end: now,
            isReusedConnection: self.metrics.isReusedConnection
        )
        self.metrics.redirects.append(hop)
        self.metrics.redirectCount += 1
    }
}
