// What happens to a response between the parser and the delegate: redirects are followed
// (the redirect's body is drained and the task starts again with the next request), and the
// delegate's decisions are awaited with reading held. Loop-confined.
import HawserHTTP1

extension RequestTask {
    /// A final response head from the connection.
    func receivedHead(_ head: HTTPResponseHead) {
        let configuration = self.pool.configuration
        if self.request.shouldHandleCookies ?? configuration.httpShouldSetCookies, let jar = configuration.httpCookieStorage,
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
        switch Redirect.nextRequest(after: self.request, response: head, redirectsSoFar: self.metrics.redirectCount,
                                    configuration: configuration.redirects) {
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
        if self.followUp != nil || self.drainingResponse { return }
        guard self.decoder != nil else {
            self.delegate.task(self, didReceiveBody: bytes)
            return
        }
        do {
            try self.decoder!.decode(bytes) { (chunk: UnsafeRawBufferPointer) throws(HawserError) in
                guard !self.isFinished else { return }
                self.delegate.task(self, didReceiveBody: chunk)
            }
        } catch {
            self.decoder = nil
            self.fail(error)
        }
    }

    private func deliverHead(_ head: HTTPResponseHead) {
        let configuration = self.pool.configuration
        self.decoder = nil
        if configuration.automaticallyDecodesContent, self.request.method != .head,
           head.status != 204, head.status != 304,
           let coding = head.headers["Content-Encoding"], ContentDecoder.canDecode(contentEncoding: coding) {
            do {
                let d = try ContentDecoder(contentEncoding: coding, limits: configuration.decodingLimits)
                if !d.codings.isEmpty { self.decoder = d }
            } catch {
                self.fail(error)
                return
            }
        }
        self.delegate.task(self, didReceiveHead: head)
    }

    /// Holds reading while `decide` runs; `decide` gets a resume function to call exactly once,
    /// from any thread, with what to do on the loop.
    private func awaitDecision(_ decide: (_ resume: @escaping @Sendable (@escaping @Sendable (RequestTask) -> Void) -> Void) -> Void) {
        self.decisionPending = true
        let loop = self.eventLoop
        decide { action in
            let body: @Sendable () -> Void = { [self] in
                guard !self.isFinished, self.decisionPending else { return }
                self.decisionPending = false
                action(self)
                guard !self.isFinished else { return }
                self.lastActivity = TaskMetrics.now()
                if case .executing(let c) = self.state { c.resumeAfterPause() }
            }
            if loop.inEventLoop { loop.executeInLoop(body) } else { loop.execute(body) }
        }
    }

    private func decideRedirect(_ head: HTTPResponseHead, _ proposed: HTTPClientRequest) {
        let keepsBody = proposed.body != nil
        self.awaitDecision { resume in
            self.delegate.task(self, willPerformRedirection: head, newRequest: proposed) { chosen in
                guard let chosen else {
                    // Refused: the redirect response is the final response.
                    resume { task in task.deliverHead(head) }
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

    /// Starts the task again with `next` (a followed redirect): a new head, possibly another
    /// origin, the same timers and delegate.
    func restart(with next: HTTPClientRequest) {
        let configuration = self.pool.configuration
        let prepared: (key: ConnectionKey, head: [UInt8])
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
        if self.countsFollowUpAsRedirect { self.metrics.redirectCount += 1 }
        self.countsFollowUpAsRedirect = true
        self.bodyWriter?.taskEnded(.failure(HawserError(.cancelled, "the request was redirected; this body stream is no longer read")))
        self.bodyWriter = nil
        self.bodyBytesSent = 0
        self.lastActivity = TaskMetrics.now()
        self.state = .created
        self.pool.redispatch(self)
    }
}
