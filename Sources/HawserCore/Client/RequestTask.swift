import HawserAuth
import HawserBase
import HawserCache
import HawserCoding
import HawserHTTP1
import HawserPosix
import Synchronization

// The IO shell around RequestStateMachine for one task: it feeds the machine what the connection
// and the delegates report, and runs what the machine answers — on the connection (write, hold
// or send the body, read or stop reading, abort), with the pool (queue, replay), and with the
// delegate (heads, body, decisions, the one completion). Loop-confined, but for the thread-safe
// handle methods.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One request being executed by a ``Session``. Thread-safe handle; the task's working state
/// is confined to the session's event loop.
public final class RequestTask: @unchecked Sendable {
    /// The request as given.
    public let originalRequest: HTTPClientRequest
    /// The request being executed: the original one, or where redirects led (NSURLSessionTask's
    /// currentRequest). Changes only on the event loop; read it from delegate callbacks.
    public internal(set) var request: HTTPClientRequest
    /// The loop this task runs on.
    public let eventLoop: EventLoop
    let delegate: any ResponseDelegate
    unowned(unsafe) let context: SessionContext
    unowned(unsafe) let pool: ConnectionPool

    // Loop-confined state. Swift checks exclusive access to a class's stored properties at run
    // time; in release builds the hottest of them opt out with `@exclusivity(unchecked)` (the
    // checks cost about an eighth of a keep-alive request's instructions:
    // Benchmarks/results/2026-11-27-engine-regression/). Debug builds, where the tests run, keep
    // every check. Nothing here can overlap: the state machines return actions that are
    // performed after the mutation that produced them has returned. The hot fields:
    // - `connection`: the connection the current exchange runs on;
    // - `timer`: the task's one timer, due at the earlier of the idle timeout and the total
    //   deadline (or the responder's answer, due after its delay);
    // - `cache`: the cache's part of the task (CacheExchange.swift);
    // - `decoder`: undoes the response's Content-Encoding as body bytes arrive;
    // - `observation`: what watches this task (instrumentation, a logger); nil for most tasks,
    //   and then the request path checks this one optional and nothing else.
    #if DEBUG
    var machine = RequestStateMachine()
    private(set) var connection: HTTP1Connection?
    var metrics = TaskMetrics()
    var timer: Scheduled?
    var cache = CacheExchange()
    var decoder: ContentDecoder?
    var observation: RequestObservation?
    #else
    @exclusivity(unchecked) var machine = RequestStateMachine()
    @exclusivity(unchecked) private(set) var connection: HTTP1Connection?
    @exclusivity(unchecked) var metrics = TaskMetrics()
    @exclusivity(unchecked) var timer: Scheduled?
    @exclusivity(unchecked) var cache = CacheExchange()
    @exclusivity(unchecked) var decoder: ContentDecoder?
    @exclusivity(unchecked) var observation: RequestObservation?
    #endif
    /// The current request as it goes on the wire (Session.prepare).
    var prepared: Session.Prepared
    /// The pool's origin for `prepared.key`.
    var origin: ConnectionPool.Machine.OriginID = 0
    var continueTimer: Scheduled?
    /// The task's bandwidth limits (RequestTimers.swift; nil: none, the usual case: then the
    /// IO path checks these optionals and nothing else).
    var receiveLimit: BandwidthLimit?
    var sendLimit: BandwidthLimit?
    /// The 401/407 part of the task: rounds per direction, the answer being decided.
    var auth = ChallengeExchange()
    /// The final head's delivery was queued behind running actions (the connection read it
    /// inside one): reading stops until it is delivered.
    private var headQueued = false
    /// The sink of the current streamed body, if any.
    var bodySink: BodyStreamSink?
    /// The task's observer, if any (set before the task starts).
    var observer: (any RequestObserver)? {
        get { self.observation?.observer }
        set { self.observation = newValue.map(RequestObservation.init) }
    }

    /// Set from any thread so a cancel that races with completion is decided once, on the loop.
    let cancelRequested = Atomic<Bool>(false)

    init(
        request: HTTPClientRequest,
        prepared: Session.Prepared,
        context: SessionContext,
        pool: ConnectionPool,
        delegate: any ResponseDelegate
    ) {
        self.request = request
        self.originalRequest = request
        self.prepared = prepared
        self.eventLoop = context.loop
        self.context = context
        self.pool = pool
        self.delegate = delegate
    }

    var isFinished: Bool { self.machine.isFinished }
    /// Whether the connection must stop reading for this task: the machine holds reading
    /// (back-pressure, a decision), or the final head waits in the action queue (its body must
    /// not overtake it).
    var readingSuspended: Bool { self.headQueued || self.machine.readingSuspended }
    /// Whether the connection must not read from its socket for this task: reading is
    /// suspended or the receive limit holds it.
    var holdsSocketReading: Bool { self.readingSuspended || self.receiveLimit?.throttled == true }

    // MARK: - Starting

    /// Hands the task to its session: arms its timer, consults the cache, then asks for a connection.
    func submit() {
        guard self.pool.register(self) else {
            self.complete(.failure(HawserError(.sessionShutDown, "the session has been shut down")))
            return
        }
        let now = self.eventLoop.now
        self.metrics.fetchStart = now
        let limits = RequestStateMachine.Timeouts(
            start: now,
            request: self.request,
            idle: self.context.idleTimeoutNanos,
            total: self.context.resourceTimeoutNanos
        )
        self.machine = RequestStateMachine(start: now, timeouts: limits)
        if let responder = self.context.responder, self.answerFromResponder(responder) { return }
        self.machine.start(into: &self.pool.requestQueue.scratch)
        self.runActions()
        self.setUpBandwidthLimits(now: now)
        self.origin = self.pool.origin(for: self.prepared.key)
        guard self.context.urlCache != nil else {
            self.submitToPool()
            return
        }
        self.consultCache()
    }

    /// The task goes to the pool (the cache did not answer).
    func submitToPool() {
        self.machine.submit(
            plan: self.prepared.plan,
            expectsContinue: self.prepared.expectsContinue,
            into: &self.pool.requestQueue.scratch
        )
        self.runActions()
    }

    // MARK: - Running actions

    /// Queues the actions the machine just wrote (in the loop's queue's scratch) and, unless
    /// the queue is being drained already (an action raised this event), drains it: one loop
    /// runs every action, in order, and actions never run inside running ones.
    func runActions() {
        let pool = self.pool
        if pool.requestQueue.scratch.isEmpty { return }
        if pool.requestQueue.draining {
            for action in pool.requestQueue.scratch { pool.requestQueue.pending.append((self, action)) }
            pool.requestQueue.scratch.removeAllKeepingStorage()
            return
        }
        pool.requestQueue.draining = true
        // This event's actions run first, from the buffer they were written to; what they raise
        // queues behind them in `pending`.
        var batch = pool.requestQueue.takeScratch()
        for action in batch { self.perform(action) }
        pool.requestQueue.returnScratch(&batch)
        var i = 0
        while i < pool.requestQueue.pending.count {
            let (task, action) = pool.requestQueue.pending[i]
            i += 1
            task.perform(action)
        }
        pool.requestQueue.pending.removeAllKeepingStorage()
        pool.requestQueue.draining = false
    }

    /// Runs one action of the machine.
    private func perform(_ action: RequestStateMachine.Action) {
        switch action {
        case .requestConnection(let fresh):
            self.pool.request(self, fresh: fresh)
        case .writeRequest(let holdBody):
            guard let c = self.connection else { return }
            if holdBody { self.armContinueTimer() }
            if self.observation != nil {
                self.observation!.exchangeStarted(
                    request: self.request,
                    prepared: self.prepared,
                    remoteAddress: self.metrics.remoteAddress,
                    reused: c.isReused
                )
            }
            c.writeRequest(head: self.prepared.head, body: self.prepared.body, holdBody: holdBody)
        case .sendHeldBody:
            self.cancelContinueTimer()
            self.connection?.sendHeldBody()
        case .dropHeldBody:
            self.dropHeldBody()
        case .forwardInterim(let head):
            self.delegate.task(self, didReceiveInterimHead: head)
        case .deliverHead(let head, let dropHeld):
            if dropHeld { self.dropHeldBody() }
            self.deliverHead(head)
            if self.headQueued {
                self.headQueued = false
                if !self.isFinished { self.resumeConnectionReading() }
            }
        case .deliverDecidedHead(let head):
            self.deliverHead(head)
            if !self.isFinished { self.resumeConnectionReading() }
        case .askRedirect(let head, let proposed, let dropHeld):
            if dropHeld { self.dropHeldBody() }
            self.connection?.updateReadInterest()
            self.askRedirect(head, proposed)
        case .askChallenge(let dropHeld):
            if dropHeld { self.dropHeldBody() }
            self.connection?.updateReadInterest()
            self.askChallenge()
        case .askBodyStream(let chosen, let status):
            self.askBodyStream(chosen, status: status)
        case .updateReading:
            self.resumeConnectionReading()
        case .restart(let next, let redirect):
            self.restart(with: next, redirect: redirect)
        case .retry:
            let replayed = "the request is replayed on a new connection; this body stream is no longer read"
            self.detachConnection(HawserError(.cancelled, replayed))
            self.metrics.retryCount += 1
            self.observation?.nextExchange = .retry
            self.pool.request(self, fresh: true)
        case .succeed(let trailers):
            self.finishSuccessfully(trailers)
        case .serveRevalidatedBody:
            self.detachConnection(.requestBodyCutShort)
            self.deliverRevalidatedBody()
        case .finishCachedResponse:
            self.complete(.success(nil))
        case .fail(let error, let closeConnection, let leaveQueue):
            if leaveQueue { self.pool.cancel(self) }
            if closeConnection, let c = self.connection { c.abort(self) }
            self.detachConnection(error)
            self.complete(.failure(error.with(url: self.request.url)))
        case .armTimer(let at):
            self.armTimer(at: at, now: self.eventLoop.now)
        }
    }

    private func dropHeldBody() {
        self.cancelContinueTimer()
        self.connection?.dropHeldBody()
    }

    /// Reading may resume (a decision came, or the consumer resumed): new and buffered bytes.
    private func resumeConnectionReading() {
        guard let c = self.connection else { return }
        if self.machine.readingSuspended {
            c.updateReadInterest()
        } else {
            self.machine.activity(at: self.eventLoop.now)
            c.resumeAfterPause()
        }
    }

    /// The exchange is over: its connection and body stream are no longer this task's; a write
    /// from the stream's producer throws `error` from now on (made only when there is a stream).
    func detachConnection(_ error: @autoclosure () -> HawserError) {
        self.cancelContinueTimer()
        self.connection = nil
        guard let sink = self.bodySink else { return }
        sink.exchangeEnded(error())
        self.bodySink = nil
    }

    // MARK: - Events from the connection

    /// The pool put the current exchange on `connection`.
    func connectionAssigned(_ connection: HTTP1Connection) {
        self.connection = connection
        let now = self.eventLoop.now
        self.metrics.connectionAssigned(
            reused: connection.isReused,
            remoteAddress: connection.remoteAddress,
            timings: connection.connectTimings,
            at: now
        )
        self.machine.connectionAssigned(now: now, into: &self.pool.requestQueue.scratch)
        self.runActions()
    }

    func requestWritten() {
        self.metrics.requestEnd = self.eventLoop.now
        self.machine.requestWritten()
    }

    /// `n` bytes were handed to the socket; `bodyTotal`: request-body bytes so far, when this
    /// write carried some.
    func wroteBytes(_ n: Int, bodyTotal: Int64?) {
        self.metrics.bytesSent += Int64(n)
        let now = self.eventLoop.now
        self.machine.activity(at: now)
        if self.sendLimit != nil { self.spendSendBudget(n) }
        if let bodyTotal {
            self.delegate.task(self, didSendBodyBytes: bodyTotal, expected: self.prepared.body?.knownLength)
        }
    }

    func receivedBytes(_ n: Int) {
        self.metrics.bytesReceived += Int64(n)
        let now = self.eventLoop.now
        self.machine.activity(at: now)
        if self.metrics.responseStart == nil { self.metrics.responseStart = now }
        if self.receiveLimit != nil { self.spendReceiveBudget(n) }
    }

    func receivedInterim(_ head: HTTPResponseHead) {
        self.machine.interimHead(
            head,
            switchingError: ResponseClassification.switchingProtocolsError(
                head,
                request: self.request,
                peer: self.metrics.remoteAddress.map { "\($0)" } ?? self.prepared.key.description
            ),
            into: &self.pool.requestQueue.scratch
        )
        self.runActions()
    }

    func receivedHead(_ head: HTTPResponseHead) {
        if self.observation != nil { self.observation!.receivedHead(head) }
        self.machine.finalHead(head, self.classify(head), into: &self.pool.requestQueue.scratch)
        // Read inside a running action: the head's delivery waits its turn, and so does reading.
        if self.pool.requestQueue.draining { self.headQueued = true }
        self.runActions()
    }

    func receivedBody(_ bytes: UnsafeRawBufferPointer) {
        guard self.machine.deliversBody else { return }
        self.deliverBody(bytes)
    }

    func responseEnded(trailers: HTTPHeaders?) {
        self.metrics.responseEnd = self.eventLoop.now
        self.connection = nil
        self.machine.responseEnded(trailers: trailers, into: &self.pool.requestQueue.scratch)
        self.runActions()
    }

    /// The parser refused the response (malformed, or over a limit).
    func responseInvalid(_ error: HawserError) {
        self.fail(error)
    }

    func connectionFailed(_ error: HawserError, retryable: Bool) {
        // The connection closed itself: forget it before the machine's answer runs.
        self.connection = nil
        self.machine.connectionFailed(
            error.with(url: self.request.url),
            retryable: retryable,
            into: &self.pool.requestQueue.scratch
        )
        self.runActions()
    }

    // MARK: - Ending

    /// Ends the task with an error, from wherever it is. Idempotent.
    func fail(_ error: HawserError) {
        self.machine.fail(error, into: &self.pool.requestQueue.scratch)
        self.runActions()
    }

    /// The pool failed the task while it waited (a connect failed, or the session shut down).
    func failWaiting(_ error: HawserError) {
        self.fail(error)
    }

    /// The response ended and was the last: finish decoding, store it in the cache, complete.
    private func finishSuccessfully(_ trailers: HTTPHeaders?) {
        var result: Result<HTTPHeaders?, HawserError> = .success(trailers)
        if self.decoder != nil {
            // A coded stream that stops early is a truncated body even if the framing was complete.
            do {
                try self.decoder!.finish()
            } catch {
                result = .failure(error.with(url: self.request.url))
            }
            self.decoder = nil
        }
        if case .success = result, let recording = self.cache.recording {
            self.cache.recording = nil
            self.storeInCache(recording)
        }
        self.detachConnection(.requestBodyCutShort)
        self.complete(result)
    }

    /// Tells the delegate, exactly once (the machine is finished), and releases the timers.
    func complete(_ result: Result<HTTPHeaders?, HawserError>) {
        self.timer?.cancel()
        self.timer = nil
        self.cancelContinueTimer()
        if self.receiveLimit != nil || self.sendLimit != nil { self.cancelBandwidthTimers() }
        if self.metrics.responseEnd == nil { self.metrics.responseEnd = self.eventLoop.now }
        self.pool.taskFinished(self)
        if let observation = self.observation { self.observerCompleted(observation, result) }
        self.delegate.task(self, didCompleteWith: result, metrics: self.metrics)
    }

    /// Tells the observer the task ended (before the delegate, so a log line or a span's end
    /// comes before whatever the completion does), and lets it go.
    private func observerCompleted(_ observation: RequestObservation, _ result: Result<HTTPHeaders?, HawserError>) {
        self.observation = nil
        observation.completed(result, metrics: self.metrics)
    }

    /// The task never reached its loop (the loop had shut down): complete on the caller's thread.
    func completeWithoutLoop(_ error: HawserError) {
        // The machine moves to failed; its action (complete) is what the lines below do, here
        // on the caller's thread: no connection, timer or pool ever saw this task.
        var ignored: [RequestStateMachine.Action] = []
        self.machine.fail(error, into: &ignored)
        if let observation = self.observation { self.observerCompleted(observation, .failure(error)) }
        self.delegate.task(self, didCompleteWith: .failure(error), metrics: self.metrics)
    }
}

extension HawserError {
    /// What a request body's producer hears when the response ended before the body was sent.
    static var requestBodyCutShort: HawserError {
        HawserError(.invalidRequest, "the response ended before the request body was complete")
    }
}
