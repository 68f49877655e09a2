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

    // Loop-confined state.
    // Loop-confined state. Swift checks exclusive access to a class's stored properties at run
    // time; in release builds the hottest of them opt out with `@exclusivity(unchecked)` (the
    // checks cost about an eighth of a keep-alive request's instructions:
    // Benchmarks/results/2026-11-27-engine-regression/). Debug builds, where the tests run, keep
    // every check. Nothing here can overlap: the state machines return actions that are
    // performed after the mutation that produced them has returned.
    #if DEBUG
    var machine = RequestStateMachine()
    #else
    @exclusivity(unchecked) var machine = RequestStateMachine()
    #endif
    /// The connection the current exchange runs on.
    #if DEBUG
    private var connection: HTTP1Connection?
    #else
    @exclusivity(unchecked) private var connection: HTTP1Connection?
    #endif
    #if DEBUG
    var metrics = TaskMetrics()
    #else
    @exclusivity(unchecked) var metrics = TaskMetrics()
    #endif
    /// The current request as it goes on the wire (Session.prepare).
    var prepared: Session.Prepared
    /// The pool's origin for `prepared.key`.
    var origin: ConnectionPool.Machine.OriginID = 0
    /// The final head being classified, decided about or delivered.
    var decidingHead: HTTPResponseHead?
    /// A responder's answer is pending or being delivered (``HTTPResponder``).
    var stubbing = false
    /// The responder's answer (or the next piece of its body), due on the loop's clock.
    var stubDelivery: Scheduled?
    /// When the head of the redirect being decided arrived (for its ``RedirectHop``).
    var redirectHeadAt: UInt64?
    /// The 401/407 answer being decided.
    var pendingChallenge: ChallengePlan?
    #if DEBUG
    var lastActivity: UInt64 = 0
    #else
    @exclusivity(unchecked) var lastActivity: UInt64 = 0
    #endif
    /// The idle timeout and the total deadline (the request's, else the session's).
    var timeouts = RequestStateMachine.Timeouts(start: 0, idle: 0, total: 0)
    /// The task's one timer: due at the earlier of the idle timeout and the total deadline.
    #if DEBUG
    private var timer: Scheduled?
    #else
    @exclusivity(unchecked) private var timer: Scheduled?
    #endif
    private var continueTimer: Scheduled?
    /// The task's bandwidth limits (nil: none, the usual case: then the IO path checks these
    /// optionals and nothing else), whether each has stopped the connection, and the timer that
    /// resumes it when the bucket is full again.
    private(set) var receiveBucket: TokenBucket?
    private(set) var sendBucket: TokenBucket?
    /// The receive limit holds the socket's reading (the bytes already read are still delivered).
    private(set) var receiveThrottled = false
    /// The send limit holds the connection's writing.
    private(set) var sendThrottled = false
    private var receiveTimer: Scheduled?
    private var sendTimer: Scheduled?
    /// 401/407 rounds of this task (loop-breaker and previousFailureCount), per direction.
    var serverAuthAttempts: AuthenticationAttempts?
    var proxyAuthAttempts: AuthenticationAttempts?
    /// The stored response a conditional request revalidates (a 304 serves it).
    var cacheCandidate: CachedResponse?
    /// A response being stored: its head (Content-Encoding removed: the body is kept decoded),
    /// the body so far, and when the request went out. nil when it is not to be stored, or
    /// after the body outgrew what the cache would keep.
    #if DEBUG
    var cacheRecording: (head: HTTPResponseHead, body: [UInt8], requestTime: Date)?
    #else
    @exclusivity(unchecked) var cacheRecording: (head: HTTPResponseHead, body: [UInt8], requestTime: Date)?
    #endif
    /// The network body is ignored: a cached response was delivered in its place (after a 304).
    var servedFromCache = false
    /// The stored body a 304 revalidated: delivered when the 304 ends, a chunk a turn.
    var pendingCachedBody: [UInt8]?
    /// A stored response is being delivered (its machine is finished already).
    var servingFromCache = false
    /// A cancel or `fail(with:)` that arrived while a stored body was being delivered.
    var cacheServeError: HawserError?
    var requestTime = Date()
    /// Undoes the response's Content-Encoding as body bytes arrive.
    #if DEBUG
    var decoder: ContentDecoder?
    #else
    @exclusivity(unchecked) var decoder: ContentDecoder?
    #endif
    /// The sink of the current streamed body, if any.
    private var bodySink: BodyStreamSink?
    /// What watches this task (instrumentation, a logger); nil for most tasks, and then the
    /// request path checks this one optional and nothing else.
    #if DEBUG
    var observer: (any RequestObserver)?
    #else
    @exclusivity(unchecked) var observer: (any RequestObserver)?
    #endif
    /// Why the next exchange starts, and how many started (for the observer only).
    var nextExchange: ExchangeReason = .initial
    private var exchangeCount = 0
    /// The last final status received (for the observer only).
    private var lastStatus: Int?

    /// Set from any thread so a cancel that races with completion is decided once, on the loop.
    private let cancelRequested = Atomic<Bool>(false)

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

    /// Cancels the task. Whatever it is doing (queued, resolving, connecting, writing, mid-head,
    /// mid-body), it ends exactly once with a `.cancelled` error. Safe from any thread; idempotent.
    public func cancel() {
        if self.cancelRequested.exchange(true, ordering: .relaxed) { return }
        self.onLoop { self.fail(HawserError(.cancelled, "the task was cancelled")) }
    }

    /// Ends the task with `error` (e.g. a delegate that refuses the response). Like ``cancel()``,
    /// it completes the task exactly once and closes its connection. Safe from any thread.
    public func fail(with error: HawserError) {
        if self.cancelRequested.exchange(true, ordering: .relaxed) { return }
        self.onLoop { self.fail(error) }
    }

    /// The request head as encoded for the wire, for the request being executed: the caller's
    /// fields and what the session added (Host, framing, cookies, Accept-Encoding…). Read it
    /// from delegate callbacks, on the event loop.
    public var wireRequestHead: [UInt8] { self.prepared.head }

    /// The metrics gathered so far (the connection, TLS, and the timings reached). Read it from
    /// delegate callbacks, on the event loop.
    public var currentMetrics: TaskMetrics { self.metrics }

    /// Stops reading the response from the socket until ``resumeReading()``. Safe from any thread.
    public func pauseReading() {
        self.onLoop { self.run(self.machine.pauseReading()) }
    }

    /// Resumes reading after ``pauseReading()``. Safe from any thread.
    public func resumeReading() {
        self.onLoop { self.run(self.machine.resumeReading()) }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop { body() } else { self.eventLoop.execute(body) }
    }

    var isFinished: Bool { self.machine.isFinished }
    var readingSuspended: Bool { self.machine.readingSuspended }
    /// Whether the connection must not read from its socket for this task: the machine holds
    /// reading (back-pressure, a decision) or the receive limit does.
    var holdsSocketReading: Bool { self.machine.readingSuspended || self.receiveThrottled }

    // MARK: - Starting

    /// Hands the task to its session: arms its timer, consults the cache, then asks for a connection.
    func submit() {
        guard self.pool.register(self) else {
            self.complete(.failure(HawserError(.sessionShutDown, "the session has been shut down")))
            return
        }
        let now = self.eventLoop.now
        self.metrics.fetchStart = now
        self.lastActivity = now
        self.timeouts = RequestStateMachine.Timeouts(
            start: now,
            idle: self.request.timeoutInterval.map(SessionContext.nanos) ?? self.context.idleTimeoutNanos,
            total: self.request.timeoutIntervalForResource.map(SessionContext.nanos)
                ?? self.context.resourceTimeoutNanos
        )
        if let responder = self.context.responder, self.answerFromResponder(responder) { return }
        self.armTimer(at: self.timeouts.due(lastActivity: now), now: now)
        self.setUpBandwidthLimits(now: now)
        self.origin = self.pool.origin(for: self.prepared.key)
        guard self.context.urlCache != nil else {
            self.run(
                self.machine.submit(
                    plan: self.prepared.plan,
                    expectsContinue: self.prepared.expectsContinue,
                    servedFromCache: false
                )
            )
            return
        }
        self.consultCache { [self] served in
            self.run(
                self.machine.submit(
                    plan: self.prepared.plan,
                    expectsContinue: self.prepared.expectsContinue,
                    servedFromCache: served
                )
            )
        }
    }

    // MARK: - Running actions

    func run(_ action: RequestStateMachine.Action) {
        switch action {
        case .none:
            break
        case .requestConnection(let fresh):
            self.pool.request(self, fresh: fresh)
        case .writeRequest(let holdBody):
            guard let c = self.connection else { return }
            if holdBody {
                self.continueTimer = self.eventLoop.scheduleInLoop(in: self.context.expectContinueNanos) {
                    [unowned(unsafe) self] in
                    self.continueTimer = nil
                    self.run(self.machine.continueTimerFired())
                }
            }
            if let observer = self.observer { self.exchangeStarting(observer, on: c) }
            c.writeRequest(head: self.prepared.head, body: self.prepared.body, holdBody: holdBody)
        case .sendHeldBody:
            self.cancelContinueTimer()
            self.connection?.sendHeldBody()
        case .dropHeldBody:
            self.cancelContinueTimer()
            self.connection?.dropHeldBody()
        case .forwardInterim:
            break  // receivedInterim, which has the head, delivers it
        case .deliverHead(let dropHeld):
            if dropHeld { self.run(.dropHeldBody) }
            self.deliverHead()
        case .deliverDecidedHead:
            self.deliverHead()
            if !self.isFinished { self.resumeConnectionReading() }
        case .askRedirect(let proposed, let dropHeld):
            if dropHeld { self.run(.dropHeldBody) }
            self.connection?.updateReadInterest()
            self.askRedirect(proposed)
        case .askChallenge(let dropHeld):
            if dropHeld { self.run(.dropHeldBody) }
            self.connection?.updateReadInterest()
            self.askChallenge()
        case .askBodyStream:
            self.askBodyStream()
            self.resumeConnectionReading()
        case .updateReading:
            self.resumeConnectionReading()
        case .restart(let next, let countsAsRedirect):
            self.restart(with: next, countsAsRedirect: countsAsRedirect)
        case .retry:
            self.detachConnection(
                HawserError(
                    .cancelled,
                    "the request is replayed on a new connection; this body stream is no longer read"
                )
            )
            self.metrics.retryCount += 1
            if self.observer != nil { self.nextExchange = .retry }
            self.pool.request(self, fresh: true)
        case .succeed:
            self.finishSuccessfully()
        case .fail(let error, let closeConnection, let leaveQueue):
            if leaveQueue { self.pool.cancel(self) }
            if closeConnection, let c = self.connection { c.abort(self) }
            self.detachConnection(error)
            self.complete(.failure(error.with(url: self.request.url)))
        case .armTimer(let at):
            self.armTimer(at: at, now: self.eventLoop.now)
        }
    }

    private func cancelContinueTimer() {
        self.continueTimer?.cancel()
        self.continueTimer = nil
    }

    /// Reading may resume (a decision came, or the consumer resumed): new and buffered bytes.
    private func resumeConnectionReading() {
        guard let c = self.connection else { return }
        if self.machine.readingSuspended {
            c.updateReadInterest()
        } else {
            self.lastActivity = self.eventLoop.now
            c.resumeAfterPause()
        }
    }

    /// The exchange is over: its connection and body stream are no longer this task's; a write
    /// from the stream's producer throws `error` from now on.
    func detachConnection(_ error: HawserError) {
        self.cancelContinueTimer()
        self.connection = nil
        self.bodySink?.exchangeEnded(error)
        self.bodySink = nil
    }

    // MARK: - Events from the connection

    /// The pool put the current exchange on `connection`.
    func connectionAssigned(_ connection: HTTP1Connection) {
        self.connection = connection
        let now = self.eventLoop.now
        self.metrics.isReusedConnection = connection.isReused
        self.metrics.remoteAddress = connection.remoteAddress
        if !connection.isReused {
            let t = connection.connectTimings
            self.metrics.domainLookupStart = t.domainLookupStart
            self.metrics.domainLookupEnd = t.domainLookupEnd
            self.metrics.connectStart = t.connectStart
            self.metrics.connectEnd = t.connectEnd
            self.metrics.secureConnectionStart = t.secureConnectionStart
            self.metrics.secureConnectionEnd = t.secureConnectionEnd
            self.metrics.isResumedTLSSession = t.tlsResumed
            self.metrics.connectAttempts = t.attempts
        }
        self.metrics.tlsProtocolVersion = connection.connectTimings.tlsProtocol
        self.metrics.tlsCipherSuite = connection.connectTimings.tlsCipherSuite
        self.metrics.tlsALPN = connection.connectTimings.tlsALPN
        self.metrics.requestStart = now
        self.lastActivity = now
        self.run(self.machine.connectionAssigned())
    }

    func requestWritten() {
        self.metrics.requestEnd = self.eventLoop.now
        self.machine.requestWritten()
    }

    /// `n` bytes were handed to the socket; `bodyTotal`: request-body bytes so far, when this
    /// write carried some.
    func wroteBytes(_ n: Int, bodyTotal: Int64?) {
        self.metrics.bytesSent += Int64(n)
        self.lastActivity = self.eventLoop.now
        if self.sendBucket != nil { self.sendBucket!.spend(n, now: self.lastActivity) }
        if let bodyTotal {
            self.delegate.task(self, didSendBodyBytes: bodyTotal, expected: self.prepared.body?.knownLength)
        }
    }

    func receivedBytes(_ n: Int) {
        self.metrics.bytesReceived += Int64(n)
        self.lastActivity = self.eventLoop.now
        if self.metrics.responseStart == nil { self.metrics.responseStart = self.lastActivity }
        if self.receiveBucket != nil { self.spendReceiveBudget(n) }
    }

    func receivedInterim(_ head: HTTPResponseHead) {
        let action = self.machine.interimHead(status: head.status, switchingError: self.switchingProtocolsError(head))
        self.run(action)
        if !self.isFinished { self.delegate.task(self, didReceiveInterimHead: head) }
    }

    /// A 101 ends the exchange and hands the connection to another protocol, which the engine
    /// does not implement: a protocol error that names the 101, never an empty success.
    private func switchingProtocolsError(_ head: HTTPResponseHead) -> HawserError {
        let to = head.headers["Upgrade"].map { " to '\($0)'" } ?? ""
        let asked =
            self.request.headers.contains(name: "Upgrade")
            ? "the request asked for an upgrade, but Hawser speaks HTTP/1.1 only and cannot switch"
            : "the request asked for no upgrade"
        let from = self.metrics.remoteAddress.map { "\($0)" } ?? self.prepared.key.description
        return HawserError(.protocolError, "\(from) answered 101 Switching Protocols\(to): \(asked)")
    }

    func receivedHead(_ head: HTTPResponseHead) {
        if let observer = self.observer {
            self.lastStatus = head.status
            observer.receivedHead(head)
        }
        self.run(self.machine.finalHead(self.classify(head)))
    }

    func receivedBody(_ bytes: UnsafeRawBufferPointer) {
        guard self.machine.deliversBody, !self.servedFromCache else { return }
        self.deliverBody(bytes)
    }

    func responseEnded(trailers: HTTPHeaders?) {
        self.metrics.responseEnd = self.eventLoop.now
        self.connection = nil
        self.pendingTrailers = trailers
        self.run(self.machine.responseEnded())
    }

    private var pendingTrailers: HTTPHeaders?

    /// The parser refused the response (malformed, or over a limit).
    func responseInvalid(_ error: HawserError) {
        self.fail(error)
    }

    func connectionFailed(_ error: HawserError, retryable: Bool) {
        let replayable: Bool
        switch self.prepared.body {
        case nil, .bytes?: replayable = true
        case .stream?: replayable = false
        }
        // The connection closed itself: forget it before the machine's answer runs.
        self.connection = nil
        self.run(
            self.machine.connectionFailed(
                error.with(url: self.request.url),
                retryable: retryable,
                replayable: replayable
            )
        )
    }

    // MARK: - Streamed request bodies

    /// The connection is ready for a streamed body: the producer runs as a Swift task; its writes
    /// hop to the loop and wait for the socket.
    func startBodyStream(_ producer: @escaping @Sendable (RequestBodyWriter) async throws -> Void) {
        let sink = BodyStreamSink(task: self)
        self.bodySink = sink
        Task {
            let failure: HawserError?
            do {
                try await producer(RequestBodyWriter(sink: sink))
                failure = nil
            } catch let e as HawserError {
                failure = e
            } catch {
                failure = HawserError(.invalidRequest, "the request body stream failed: \(error)")
            }
            await sink.producerReturned(failure)
        }
    }

    /// The body stream broke a rule (longer or shorter than declared) or threw.
    func bodyStreamFailed(_ error: HawserError) {
        self.fail(error)
    }

    fileprivate func sinkWrite(_ sink: BodyStreamSink, _ bytes: [UInt8], _ completion: @escaping (HawserError?) -> Void)
    {
        guard self.bodySink === sink, let c = self.connection else {
            completion(sink.endedError ?? HawserError(.cancelled, "the task is no longer running"))
            return
        }
        c.writeBodyChunk(bytes, for: self, completion: completion)
    }

    fileprivate func sinkFinished(_ sink: BodyStreamSink, _ failure: HawserError?) {
        guard self.bodySink === sink else { return }
        if let failure {
            self.fail(failure)
            return
        }
        self.connection?.finishBodyStream(for: self)
    }

    // MARK: - Bandwidth limits

    /// The request's limits, else the session's (0: none); the buckets last the whole task.
    private func setUpBandwidthLimits(now: UInt64) {
        let receive = self.request.maximumReceiveBytesPerSecond ?? self.context.maximumReceiveBytesPerSecond
        if receive > 0 { self.receiveBucket = TokenBucket(bytesPerSecond: receive, now: now) }
        let send = self.request.maximumSendBytesPerSecond ?? self.context.maximumSendBytesPerSecond
        if send > 0 { self.sendBucket = TokenBucket(bytesPerSecond: send, now: now) }
    }

    /// How many bytes the connection may read for this task now (its read size is capped to it);
    /// `Int.max` without a receive limit.
    func receiveAllowance() -> Int {
        guard self.receiveBucket != nil else { return .max }
        return self.receiveBucket!.available(now: self.eventLoop.now)
    }

    /// `n` bytes were read under the receive limit: once the bucket is empty, reading stops (the
    /// connection drops its read interest) until the timer finds it full again.
    private func spendReceiveBudget(_ n: Int) {
        let now = self.eventLoop.now
        self.receiveBucket!.spend(n, now: now)
        guard self.receiveBucket!.isEmpty, !self.receiveThrottled else { return }
        self.receiveThrottled = true
        self.connection?.updateReadInterest()
        self.receiveTimer = self.eventLoop.scheduleInLoop(in: self.receiveBucket!.nanosecondsUntilFull()) {
            [unowned(unsafe) self] in
            self.receiveTimer = nil
            self.receiveThrottled = false
            if self.isFinished { return }
            self.connection?.resumeAfterPause()
        }
    }

    /// How many bytes the connection may write for this task now; `Int.max` without a send
    /// limit. At 0 the task holds the connection's writing and arms the timer that resumes it.
    func sendAllowance() -> Int {
        guard self.sendBucket != nil else { return .max }
        if self.sendThrottled { return 0 }
        let allowed = self.sendBucket!.available(now: self.eventLoop.now)
        if allowed > 0 { return allowed }
        self.sendThrottled = true
        self.sendTimer = self.eventLoop.scheduleInLoop(in: self.sendBucket!.nanosecondsUntilFull()) {
            [unowned(unsafe) self] in
            self.sendTimer = nil
            self.sendThrottled = false
            if self.isFinished { return }
            self.connection?.resumeWriting()
        }
        return 0
    }

    private func cancelBandwidthTimers() {
        self.receiveTimer?.cancel()
        self.receiveTimer = nil
        self.sendTimer?.cancel()
        self.sendTimer = nil
    }

    // MARK: - Timers

    /// One timer per task for both limits, re-armed lazily: activity only updates
    /// `lastActivity`, and when the timer fires early the machine says which limit is now
    /// nearest. A busy download costs no timer work per read, and a task costs one heap entry,
    /// not two.
    private func armTimer(at due: UInt64, now: UInt64) {
        self.timer = self.eventLoop.scheduleInLoop(in: due > now ? due - now : 0) { [unowned(unsafe) self] in
            self.timerFired()
        }
    }

    private func timerFired() {
        self.timer = nil
        // Held by its own bandwidth limit, the task is not idle: the peer is not to blame.
        if self.receiveThrottled || self.sendThrottled { self.lastActivity = self.eventLoop.now }
        let timeouts = self.timeouts
        let action = self.machine.timerFired(
            now: self.eventLoop.now,
            lastActivity: &self.lastActivity,
            timeouts: timeouts,
            deadlineError: HawserError(
                .resourceTimeout,
                "the total deadline passed: the task did not finish within \(Self.seconds(timeouts.total)) s (timeoutIntervalForResource), counted from its start across connecting, redirects and retries; bytes still arriving do not extend it"
            ),
            idleError: HawserError(
                .idleTimeout,
                "no data moved for \(Self.seconds(timeouts.idle)) s (the idle timeout, timeoutIntervalForRequest)"
            )
        )
        self.run(action)
    }

    /// `nanos` as seconds for a message: "0.5", "60", "604800".
    private static func seconds(_ nanos: UInt64) -> String {
        let s = Double(nanos) / 1e9
        return s == s.rounded() && s < 1e15 ? String(Int64(s)) : String(s)
    }

    // MARK: - Ending

    /// Ends the task with an error, from wherever it is. Idempotent.
    func fail(_ error: HawserError) {
        if self.stubbing, self.interruptStub(error) { return }
        if self.servingFromCache, self.cacheServeError == nil { self.cacheServeError = error }
        self.run(self.machine.fail(error))
    }

    /// The pool failed the task while it waited (a connect failed, or the session shut down).
    func failWaiting(_ error: HawserError) {
        if self.stubbing, self.interruptStub(error) { return }
        self.run(self.machine.fail(error))
    }

    /// The response ended and was the last: finish decoding, store it in the cache, complete.
    private func finishSuccessfully() {
        var result: Result<HTTPHeaders?, HawserError> = .success(self.pendingTrailers)
        self.pendingTrailers = nil
        if self.decoder != nil {
            // A coded stream that stops early is a truncated body even if the framing was complete.
            do {
                try self.decoder!.finish()
            } catch {
                result = .failure(error.with(url: self.request.url))
            }
            self.decoder = nil
        }
        if case .success = result, let recording = self.cacheRecording {
            self.cacheRecording = nil
            self.storeInCache(recording)
        }
        self.detachConnection(HawserError(.invalidRequest, "the response ended before the request body was complete"))
        if let body = self.pendingCachedBody {
            // A 304 ended: its stored body goes out like a fresh hit's, at most a chunk a turn,
            // and the last chunk completes the task.
            self.pendingCachedBody = nil
            self.deliverRevalidatedBody(body)
            return
        }
        self.complete(result)
    }

    /// Tells the delegate, exactly once (the machine is finished), and releases the timers.
    func complete(_ result: Result<HTTPHeaders?, HawserError>) {
        self.timer?.cancel()
        self.timer = nil
        self.cancelContinueTimer()
        if self.receiveTimer != nil || self.sendTimer != nil { self.cancelBandwidthTimers() }
        if self.metrics.responseEnd == nil { self.metrics.responseEnd = self.eventLoop.now }
        self.pool.taskFinished(self)
        if let observer = self.observer { self.observerCompleted(observer, result) }
        self.delegate.task(self, didCompleteWith: result, metrics: self.metrics)
    }

    /// Tells the observer a head is going out on `connection`.
    private func exchangeStarting(_ observer: any RequestObserver, on connection: HTTP1Connection) {
        observer.exchangeStarted(
            ExchangeInfo(
                reason: self.nextExchange,
                resendCount: self.exchangeCount,
                request: self.request,
                wireHead: self.prepared.head,
                remoteAddress: self.metrics.remoteAddress,
                reusedConnection: connection.isReused,
                cookiesLeftOut: self.prepared.cookiesLeftOut
            )
        )
        self.exchangeCount += 1
    }

    /// Tells the observer the task ended (before the delegate, so a log line or a span's end
    /// comes before whatever the completion does), and lets it go.
    private func observerCompleted(_ observer: any RequestObserver, _ result: Result<HTTPHeaders?, HawserError>) {
        self.observer = nil
        switch result {
        case .success: observer.completed(error: nil, status: self.lastStatus, metrics: self.metrics)
        case .failure(let e): observer.completed(error: e, status: self.lastStatus, metrics: self.metrics)
        }
    }

    /// The task never reached its loop (the loop had shut down): complete on the caller's thread.
    func completeWithoutLoop(_ error: HawserError) {
        // The machine moves to failed; its action (complete) is what the lines below do, here
        // on the caller's thread: no connection, timer or pool ever saw this task.
        _ = self.machine.fail(error)
        if let observer = self.observer { self.observerCompleted(observer, .failure(error)) }
        self.delegate.task(self, didCompleteWith: .failure(error), metrics: self.metrics)
    }
}

/// The engine's end of a ``RequestBodyWriter``: hops each write to the loop and completes it when
/// the bytes reached the socket. One per streamed exchange; a write after the exchange ended
/// (a failure, a redirect) throws why.
final class BodyStreamSink: RequestBodySink, @unchecked Sendable {
    /// Strong: the producer may outlive the task's exchange, and must find out safely. The cycle
    /// through `task.bodySink` is broken when the exchange ends.
    private let task: RequestTask
    // Loop-confined.
    fileprivate var endedError: HawserError?

    init(task: RequestTask) { self.task = task }

    func write(_ bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
            self.task.eventLoop.execute {
                if let e = self.endedError {
                    cont.resume(throwing: e)
                    return
                }
                self.task.sinkWrite(self, bytes) { error in
                    if let error { cont.resume(throwing: error) } else { cont.resume() }
                }
            }
        }
    }

    /// The producer returned (nil) or threw.
    func producerReturned(_ failure: HawserError?) async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            self.task.eventLoop.execute {
                if self.endedError == nil { self.task.sinkFinished(self, failure) }
                cont.resume()
            }
        }
    }

    /// The exchange ended; later writes throw `error` (or the task's own error if it failed).
    func exchangeEnded(_ error: HawserError) {
        if self.endedError == nil { self.endedError = error }
    }
}
