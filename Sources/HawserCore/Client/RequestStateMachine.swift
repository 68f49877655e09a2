// Theory of operation
// -------------------
// One value per task: everything a request goes through, across its exchanges (the request, then
// its follow-ups: a redirect, an authentication answer, the 417 retry, a stale-connection replay),
// everything one exchange goes through on its connection, and the task's two time limits. It
// knows nothing of sockets, timers or delegates: the shell (RequestTask) reports events with the
// instants they happened at and runs the actions it gets back, in order, from one queue.
//
// The task (one enum, `State`; an exchange's progress is the payload of the states that have one):
//
//   initialized ─submit─▶ waitingForConnection ─connection─▶ executing ─response ended─▶ finished
//     │   │                    ▲   │                          │  │  │  │
//     │   │                    │   └─fail/cancel/timeout──────┼──┼──┼──┼─▶ finished (failed)
//     │   │                    ├────────follow-up─────────────┘  │  │  │
//     │   │                    ├────────stale replay (once)──────┘  │  │
//     │   │                    └──body stream given── awaitingBodyStream(hop) ◀─ ended, a 307/308 needs a new stream
//     │   ├─served from the cache──▶ servingFromCache ─body delivered─▶ finished
//     │   │                             executing ─a 304 ended──┘ (the revalidated stored body)
//     │   └─the responder answered──▶ answeringFromResponder ─delivered, failed, cancelled─▶ finished
//     └─a cache that may not load──▶ finished
//
// One exchange (inside `executing`):
//   sending:   writing ─▶ (waitingForContinue ─100/timer─▶) writing ─written─▶ sent
//                               └─final status first─▶ withheld (the body is never sent)
//   receiving: waitingForHead ─final head─▶ (awaitingDecision(head, at) ─answer─▶) body ─end─▶ (done)
//
// What the end of the response leads to is decided when its head arrives: completion, a follow-up
// request (the body is drained, not delivered), or waiting for a new body stream. The actions carry
// the heads the shell acts on (a head to deliver, a redirect to ask about); a head the delegates
// decide about is kept in `awaitingDecision`, and a followed redirect's hop (its status, when its
// head came) rides in `after`, `awaitingBodyStream` and `restart`, so the shell keeps no copy.
//
// Events from the engine (the connection, the pool, the shell's own steps) that cannot happen in a
// state are programming errors: they trap in debug builds (`impossible`) and are dropped in
// release builds. Events that can race with the end of the task (a delegate answering after a
// cancel, a timer already due, a late pause) are dropped once the task is finished, and a
// delegate's answer that no longer applies (given twice) is dropped: that is their defined
// meaning, not an error.

/// The pure state machine of one request task.
///
/// The cases that carry an `HTTPClientRequest` or a `HawserError` are `indirect`: both hold
/// Foundation's `URL`, whose layout is known only at run time, and one such payload would make
/// every state, exchange and action a type the compiler copies through run-time value witnesses.
/// Boxed, those payloads are one reference, allocated only on the paths that build them (a
/// follow-up, a failure), and the keep-alive path copies plain words.
struct RequestStateMachine {
    /// Where the task is.
    enum State: Sendable {
        /// Created (or a follow-up being prepared). Next: waitingForConnection, servingFromCache,
        /// finished.
        case initialized
        /// In the pool's queue, with the exchange it will run. Next: executing, finished.
        case waitingForConnection(Exchange)
        /// An exchange is on a connection. Next: waitingForConnection (follow-up, replay),
        /// awaitingBodyStream, servingFromCache (a 304 ended), finished.
        case executing(Exchange)
        /// The response ended; a 307/308 must send its streamed body again and the delegate was
        /// asked for a new stream (the payload: that redirect, for its ``RedirectHop``). Next:
        /// initialized (the follow-up), finished.
        case awaitingBodyStream(Redirection)
        /// A stored response's body is being delivered, a chunk a turn (a fresh hit, or the body
        /// a 304 revalidated). `interrupted`: a cancel or `fail(with:)` that came meanwhile, which
        /// ends the task at the next chunk. Next: finished.
        indirect case servingFromCache(interrupted: HawserError?)
        /// The session's responder answered (``HTTPResponder``): its answer is due after its delay,
        /// then its body a piece a turn. A cancel, `fail(with:)`, a shutdown or a failure answer
        /// ends it at once (nothing is mid-write: a pending delivery is a timer or a turn that
        /// then finds the task finished). Next: finished.
        case answeringFromResponder
        /// Final: the delegate was told, exactly once.
        case finished
    }

    /// One exchange: how its body goes out, how far sending and receiving are, what its end leads to.
    struct Exchange: Sendable {
        var plan: BodyPlan
        var expectsContinue: Bool
        var sending: Sending = .notStarted
        var receiving: Receiving = .waitingForHead
        var after: AfterResponse = .complete
        /// This exchange was replayed once already.
        var retried = false
        /// The next connection must be a new one (a replay).
        var fresh = false
        /// A 304 turned the response into the stored one: the network body is not delivered.
        var revalidated = false
    }

    /// The states without their payloads.
    enum Lifecycle: Sendable, Hashable {
        case initialized, waitingForConnection, executing, awaitingBodyStream, servingFromCache
        case answeringFromResponder, finished
    }

    /// A redirect being followed, for its ``RedirectHop``: its status, and when its head came
    /// (loop-clock nanoseconds).
    struct Redirection: Sendable, Hashable {
        var status: Int
        var headAt: UInt64
    }

    enum Sending: Sendable, Hashable {
        case notStarted
        /// Head (and body) being written.
        case writing
        /// Head written; the body waits for 100 Continue, a final status or the timer.
        case waitingForContinue
        /// Everything was handed to the socket.
        case sent
        /// A final status came before the body was sent: it never will be.
        case withheld
    }

    /// Matched by case (`if case`): one holds the head a decision is about.
    enum Receiving: Sendable {
        case waitingForHead
        /// A final head (that came at `at`) is with a delegate (a redirect or a challenge);
        /// reading is held. Boxed: only a redirect or a challenge pays for keeping the head.
        indirect case awaitingDecision(HTTPResponseHead, at: UInt64)
        case body
        case ended
    }

    /// What the end of the current response leads to. Boxed (`indirect`): the plain response
    /// (`complete`) carries nothing, and a follow-up pays for its request.
    indirect enum AfterResponse: Sendable {
        case complete
        /// Another request replaces this one (its body is drained, not delivered). `redirect`:
        /// the redirect followed (nil for authentication answers and the 417 retry).
        case followUp(HTTPClientRequest, redirect: Redirection?)
        /// A redirect that must resend a streamed body: the delegate is finding a new stream.
        case awaitBodyStream(HTTPClientRequest, redirect: Redirection)
    }

    /// How the body of one exchange goes out.
    enum BodyPlan: Sendable, Hashable {
        case none
        /// In memory; small bodies go in the head's write.
        case bytes
        /// From the producer, with back-pressure.
        case stream
    }

    /// A final head as ``ResponseClassification`` classified it.
    enum HeadKind: Sendable {
        /// Deliver it as the response.
        case deliver
        /// 417 to a request whose body waited for 100 Continue: send it again without the expectation.
        indirect case retryWithoutExpectation(HTTPClientRequest)
        /// A redirect to follow, once the delegate agrees (`proposed` is what the rules give).
        indirect case redirect(proposed: HTTPClientRequest)
        /// A 401/407 the delegates and credential store may answer.
        case challenge
        /// A response that must not be followed or delivered (a refused redirect target).
        indirect case failure(HawserError)
    }

    /// A delegate's answer about a redirect or a challenge.
    enum Decision: Sendable {
        case deliver
        indirect case followUp(HTTPClientRequest, countsAsRedirect: Bool)
        /// Follow, but the streamed body must be given again first.
        indirect case needBodyStream(HTTPClientRequest)
        indirect case fail(HawserError)
    }

    enum Action: Sendable {
        /// Ask the pool for a connection (`fresh`: a newly opened one, for a replay).
        case requestConnection(fresh: Bool)
        /// Write the head and the body; with `holdBody` the body waits for 100 Continue (arm the
        /// continue timer).
        case writeRequest(holdBody: Bool)
        /// Send the body held back for 100 Continue.
        case sendHeldBody
        /// Tell the delegate about an interim (1xx) head.
        case forwardInterim(HTTPResponseHead)
        /// Deliver the final head (and set up decoding and caching).
        case deliverHead(HTTPResponseHead, dropHeldBody: Bool)
        /// Deliver the final head a delegate was asked about, then resume reading.
        case deliverDecidedHead(HTTPResponseHead)
        /// A final head arrived while the body was held: drop it (the connection closes after).
        case dropHeldBody
        /// Ask the delegate about the redirect `head`; reading is held until `decided`.
        indirect case askRedirect(HTTPResponseHead, proposed: HTTPClientRequest, dropHeldBody: Bool)
        /// Ask the delegates about a 401/407 (the plan the shell made); reading is held until `decided`.
        case askChallenge(dropHeldBody: Bool)
        /// Ask the delegate for a new body stream for `request`, which the redirect of `status` needs.
        indirect case askBodyStream(HTTPClientRequest, status: Int)
        /// Reading resumes or stops (a decision came, or the consumer paused or resumed).
        case updateReading
        /// Send `request` as the next exchange (prepare it, then report `followUpPrepared`);
        /// `redirect`: the redirect followed, to record as a hop (nil: not a redirect).
        indirect case restart(HTTPClientRequest, redirect: Redirection?)
        /// Replay the exchange once on a new connection (a stale kept-alive connection died).
        case retry
        /// Complete the task successfully (the response ended, with `trailers` if it had some;
        /// or the responder's answer was delivered).
        case succeed(trailers: HTTPHeaders?)
        /// The 304 that revalidated a stored response ended: deliver the stored body.
        case serveRevalidatedBody
        /// The stored body was delivered: complete the task successfully.
        case finishCachedResponse
        /// Complete the task with `error`; `closeConnection`: the exchange's connection cannot be
        /// reused; `leaveQueue`: the task is in the pool's queue.
        indirect case fail(HawserError, closeConnection: Bool, leaveQueue: Bool)
        /// Arm the task's one timer for the instant `at` (loop-clock nanoseconds).
        case armTimer(at: UInt64)
    }

    private(set) var state: State = .initialized
    /// The consumer paused reading (back-pressure). It belongs to the task, not to one state:
    /// a consumer may pause before the response starts and stays paused across follow-ups.
    private(set) var consumerPaused = false
    /// The idle timeout and the total deadline (the request's, else the session's).
    private(set) var timeouts: Timeouts
    /// When a byte last moved (loop-clock nanoseconds).
    private(set) var lastActivity: UInt64

    init(start: UInt64 = 0, timeouts: Timeouts = Timeouts(start: 0, idle: .max, total: .max)) {
        self.timeouts = timeouts
        self.lastActivity = start
    }

    // MARK: - Views

    var lifecycle: Lifecycle {
        switch self.state {
        case .initialized: return .initialized
        case .waitingForConnection: return .waitingForConnection
        case .executing: return .executing
        case .awaitingBodyStream: return .awaitingBodyStream
        case .servingFromCache: return .servingFromCache
        case .answeringFromResponder: return .answeringFromResponder
        case .finished: return .finished
        }
    }

    /// The current exchange (waiting for its connection or executing), if any.
    var exchange: Exchange? {
        switch self.state {
        case .waitingForConnection(let e), .executing(let e): return e
        default: return nil
        }
    }

    var sending: Sending { self.exchange?.sending ?? .notStarted }
    var receiving: Receiving { self.exchange?.receiving ?? .waitingForHead }

    /// Whether the connection should stop reading for this task.
    var readingSuspended: Bool {
        if self.consumerPaused { return true }
        if case .executing(let e) = self.state, case .awaitingDecision = e.receiving { return true }
        return false
    }

    /// Whether body bytes are the delegate's (false while a follow-up's response drains, or
    /// when a 304 stands for the stored response).
    var deliversBody: Bool {
        guard case .executing(let e) = self.state, !e.revalidated else { return false }
        if case .complete = e.after { return true }
        return false
    }

    /// No more network work: finished, or delivering a stored response or the responder's answer.
    var isFinished: Bool {
        switch self.state {
        case .finished, .servingFromCache, .answeringFromResponder: return true
        default: return false
        }
    }

    /// Whether a 304 made the current response the stored one.
    var isRevalidated: Bool { self.exchange?.revalidated ?? false }

    /// Whether the body of the exchange's final head was withheld (it waited for 100 Continue
    /// and a final status came first): a 417 then means "send it again without expecting".
    var bodyWasWithheld: Bool { self.sending == .withheld || self.sending == .waitingForContinue }

    /// The request a redirect's new body stream is for, while the delegate finds it.
    var awaitedBodyStreamRequest: HTTPClientRequest? {
        if case .executing(let e) = self.state, case .awaitBodyStream(let r, _) = e.after { return r }
        return nil
    }

    /// An event that cannot happen in this state: a trap in debug builds, dropped in release.
    private func impossible(_ event: StaticString) {
        assertionFailure("RequestStateMachine: \(event) in \(self.lifecycle)")
    }

    // MARK: - Task events

    /// The task starts (its clock and limits are the machine's since `init`): arm the timer.
    mutating func start(into actions: inout [Action]) {
        guard case .initialized = self.state else { return self.impossible("start") }
        actions.append(.armTimer(at: self.timeouts.due(lastActivity: self.lastActivity)))
    }

    /// The task goes to the pool (the cache did not answer, or there is none).
    mutating func submit(plan: BodyPlan, expectsContinue: Bool, into actions: inout [Action]) {
        switch self.state {
        case .initialized:
            self.state = .waitingForConnection(Exchange(plan: plan, expectsContinue: expectsContinue))
            actions.append(.requestConnection(fresh: false))
        case .finished:
            return  // cancelled while the cache was being consulted
        default:
            self.impossible("submit")
        }
    }

    /// The cache answered: its stored response is delivered instead of a request.
    mutating func servedFromCache() {
        switch self.state {
        case .initialized: self.state = .servingFromCache(interrupted: nil)
        case .finished: return
        default: self.impossible("servedFromCache")
        }
    }

    /// A cache that may not load refused the request (only-if-cached and no stored response):
    /// the shell completes the task itself, on a later turn.
    mutating func answeredElsewhere() {
        switch self.state {
        case .initialized: self.state = .finished
        case .finished: return
        default: self.impossible("answeredElsewhere")
        }
    }

    /// The session's responder answered: no request goes out; the shell delivers the answer
    /// when it is due (a failure answer is `fail(e)`).
    mutating func answeredByResponder() {
        guard case .initialized = self.state else { return self.impossible("answeredByResponder") }
        self.state = .answeringFromResponder
    }

    /// Whether the responder's answer is still to be delivered (false once a cancel, a failure
    /// or the delegate ended the task).
    var answersFromResponder: Bool {
        if case .answeringFromResponder = self.state { return true }
        return false
    }

    /// The responder's answer was delivered to its last byte: the task succeeds.
    mutating func responderDelivered(into actions: inout [Action]) {
        switch self.state {
        case .answeringFromResponder:
            self.state = .finished
            actions.append(.succeed(trailers: nil))
        case .finished:
            return  // the delegate failed or cancelled the task with the last piece
        default:
            self.impossible("responderDelivered")
        }
    }

    /// The pool gave the task a connection at `now`.
    mutating func connectionAssigned(now: UInt64, into actions: inout [Action]) {
        switch self.state {
        case .waitingForConnection(var e):
            self.lastActivity = now
            e.receiving = .waitingForHead
            e.fresh = false
            let hold = e.expectsContinue && e.plan != .none
            e.sending = hold ? .waitingForContinue : .writing
            self.state = .executing(e)
            actions.append(.writeRequest(holdBody: hold))
        case .finished:
            return
        default:
            self.impossible("connectionAssigned")
        }
    }

    /// Head and body were handed to the socket.
    mutating func requestWritten() {
        // Reported by the connection whatever the sending state (a withheld body ends its
        // write too): only `writing` moves.
        if case .executing(var e) = self.state, e.sending == .writing {
            e.sending = .sent
            self.state = .executing(e)
        }
    }

    /// Bytes moved at `now` (read or written): the idle clock restarts.
    mutating func activity(at now: UInt64) {
        self.lastActivity = now
    }

    /// The 100-continue timer fired at `now`: the body goes anyway.
    mutating func continueTimerFired(now: UInt64, into actions: inout [Action]) {
        // The timer is cancelled when the body goes or is dropped; one already due may still
        // fire once: then it finds the body gone and does nothing.
        guard case .executing(var e) = self.state, e.sending == .waitingForContinue else { return }
        e.sending = .writing
        self.state = .executing(e)
        actions.append(.sendHeldBody)
    }

    /// An interim (1xx) head.
    mutating func interimHead(
        _ head: HTTPResponseHead,
        switchingError: @autoclosure () -> HawserError,
        into actions: inout [Action]
    ) {
        switch self.state {
        case .executing(var e):
            guard case .waitingForHead = e.receiving else { return self.impossible("interimHead") }
            if head.status == 101 {
                // The connection now speaks another protocol, which the engine does not implement.
                return self.fail(switchingError(), into: &actions)
            }
            if head.status == 100, e.sending == .waitingForContinue {
                e.sending = .writing
                self.state = .executing(e)
                actions.append(.sendHeldBody)
            }
            actions.append(.forwardInterim(head))
        case .finished:
            return
        default:
            self.impossible("interimHead")
        }
    }

    /// The final head `head`, as classified. A head the delegates decide about is kept, with the
    /// instant it came (the last activity: its bytes were just read).
    mutating func finalHead(_ head: HTTPResponseHead, _ kind: HeadKind, into actions: inout [Action]) {
        guard case .executing(var e) = self.state, case .waitingForHead = e.receiving else {
            if case .finished = self.state { return }
            return self.impossible("finalHead")
        }
        let dropHeld = e.sending == .waitingForContinue
        if dropHeld { e.sending = .withheld }
        switch kind {
        case .deliver:
            e.receiving = .body
            self.state = .executing(e)
            actions.append(.deliverHead(head, dropHeldBody: dropHeld))
        case .retryWithoutExpectation(let again):
            e.receiving = .body
            e.after = .followUp(again, redirect: nil)
            self.state = .executing(e)
            if dropHeld { actions.append(.dropHeldBody) }
        case .redirect(let proposed):
            e.receiving = .awaitingDecision(head, at: self.lastActivity)
            self.state = .executing(e)
            actions.append(.askRedirect(head, proposed: proposed, dropHeldBody: dropHeld))
        case .challenge:
            e.receiving = .awaitingDecision(head, at: self.lastActivity)
            self.state = .executing(e)
            actions.append(.askChallenge(dropHeldBody: dropHeld))
        case .failure(let error):
            self.state = .executing(e)
            self.fail(error, into: &actions)
        }
    }

    /// The delivered final head was a 304 that revalidated a stored response: the response is
    /// the stored one, and the network body is not delivered.
    mutating func revalidated() {
        guard case .executing(var e) = self.state, case .body = e.receiving else {
            if self.isFinished { return }
            return self.impossible("revalidated")
        }
        e.revalidated = true
        self.state = .executing(e)
    }

    /// A delegate answered about the head held in `awaitingDecision`.
    mutating func decided(_ decision: Decision, into actions: inout [Action]) {
        // Dropped when no decision is pending: cancelled while the delegate decided, or a
        // delegate that answered twice.
        guard case .executing(var e) = self.state, case .awaitingDecision(let head, let at) = e.receiving else {
            return
        }
        e.receiving = .body
        let hop = Redirection(status: head.status, headAt: at)
        switch decision {
        case .deliver:
            self.state = .executing(e)
            actions.append(.deliverDecidedHead(head))
        case .followUp(let next, let counts):
            e.after = .followUp(next, redirect: counts ? hop : nil)
            self.state = .executing(e)
            actions.append(.updateReading)
        case .needBodyStream(let next):
            e.after = .awaitBodyStream(next, redirect: hop)
            self.state = .executing(e)
            actions.append(.askBodyStream(next, status: head.status))
            actions.append(.updateReading)
        case .fail(let error):
            self.state = .executing(e)
            self.fail(error, into: &actions)
        }
    }

    /// The delegate gave the new body stream a redirect needs (nil: it has none).
    mutating func bodyStreamProvided(
        _ next: HTTPClientRequest?,
        missing: @autoclosure () -> HawserError,
        into actions: inout [Action]
    ) {
        switch self.state {
        case .executing(var e):
            guard case .awaitBodyStream(_, let hop) = e.after else { return }  // a second answer
            guard let next else { return self.fail(missing(), into: &actions) }
            e.after = .followUp(next, redirect: hop)
            self.state = .executing(e)
        case .awaitingBodyStream(let hop):
            // The redirect's response already ended: go now.
            guard let next else { return self.fail(missing(), into: &actions) }
            self.beginFollowUp(next, redirect: hop, into: &actions)
        default:
            return  // finished, or a second answer after the follow-up began
        }
    }

    /// The response ended (the connection decided about itself already), with `trailers` if
    /// its chunked body had some.
    mutating func responseEnded(trailers: HTTPHeaders? = nil, into actions: inout [Action]) {
        guard case .executing(var e) = self.state else {
            if case .finished = self.state { return }
            return self.impossible("responseEnded")
        }
        e.receiving = .ended
        switch e.after {
        case .complete where e.revalidated:
            self.state = .servingFromCache(interrupted: nil)
            actions.append(.serveRevalidatedBody)
        case .complete:
            self.state = .finished
            actions.append(.succeed(trailers: trailers))
        case .followUp(let next, let hop):
            self.beginFollowUp(next, redirect: hop, into: &actions)
        case .awaitBodyStream(_, let hop):
            self.state = .awaitingBodyStream(hop)
        }
    }

    private mutating func beginFollowUp(_ next: HTTPClientRequest, redirect: Redirection?, into actions: inout [Action])
    {
        self.state = .initialized
        actions.append(.restart(next, redirect: redirect))
    }

    /// The follow-up request was prepared at `now`; it goes to the pool like the first one.
    mutating func followUpPrepared(plan: BodyPlan, expectsContinue: Bool, now: UInt64, into actions: inout [Action]) {
        guard case .initialized = self.state else {
            if case .finished = self.state { return }
            return self.impossible("followUpPrepared")
        }
        self.lastActivity = now
        self.state = .waitingForConnection(Exchange(plan: plan, expectsContinue: expectsContinue))
        actions.append(.requestConnection(fresh: false))
    }

    /// The connection failed under the exchange. `retryable`: the connection machine says the
    /// request may be replayed (a reused connection died before any response byte, and the
    /// method is idempotent). A streamed body cannot be sent again: that exchange is not replayed.
    mutating func connectionFailed(_ error: HawserError, retryable: Bool, into actions: inout [Action]) {
        guard case .executing(var e) = self.state else {
            if case .finished = self.state { return }
            return self.impossible("connectionFailed")
        }
        if retryable, e.plan != .stream, !e.retried, case .waitingForHead = e.receiving {
            e.retried = true
            e.fresh = true
            e.sending = .notStarted
            self.state = .waitingForConnection(e)
            actions.append(.retry)
            return
        }
        // The connection is gone already: nothing to close.
        self.state = .finished
        actions.append(.fail(error, closeConnection: false, leaveQueue: false))
    }

    /// Fails the task from wherever it is: cancellation, a timeout, a refused response, a body
    /// stream error. While a stored body is delivered, the error ends it at its next chunk.
    mutating func fail(_ error: HawserError, into actions: inout [Action]) {
        switch self.state {
        case .finished:
            return
        case .servingFromCache(let interrupted):
            if interrupted == nil { self.state = .servingFromCache(interrupted: error) }
            return
        case .initialized, .awaitingBodyStream, .answeringFromResponder:
            actions.append(.fail(error, closeConnection: false, leaveQueue: false))
        case .waitingForConnection:
            actions.append(.fail(error, closeConnection: false, leaveQueue: true))
        case .executing:
            actions.append(.fail(error, closeConnection: true, leaveQueue: false))
        }
        self.state = .finished
    }

    // MARK: - Serving from the cache

    /// The shell is about to deliver the next chunk of a stored body: true when it may, false
    /// when the task ended instead (an interruption: its `fail` action is queued).
    mutating func cachedChunkDue(into actions: inout [Action]) -> Bool {
        guard case .servingFromCache(let interrupted) = self.state else {
            if case .finished = self.state { return false }
            self.impossible("cachedChunkDue")
            return false
        }
        guard let interrupted else { return true }
        self.state = .finished
        actions.append(.fail(interrupted, closeConnection: false, leaveQueue: false))
        return false
    }

    /// The last chunk of the stored body was delivered.
    mutating func cachedBodyDelivered(into actions: inout [Action]) {
        guard case .servingFromCache(let interrupted) = self.state else {
            if case .finished = self.state { return }
            return self.impossible("cachedBodyDelivered")
        }
        self.state = .finished
        if let interrupted {
            actions.append(.fail(interrupted, closeConnection: false, leaveQueue: false))
        } else {
            actions.append(.finishCachedResponse)
        }
    }

    // MARK: - Timers

    /// The task's one timer fired at `now` (it is due at ``Timeouts/due(lastActivity:)``, and
    /// activity only moves `lastActivity`, so it may fire early). The machine decides which
    /// limit passed: the total deadline is checked first and wins (bytes that keep moving never
    /// extend it). While reading is suspended (the consumer paused, a delegate deciding) or the
    /// task's own bandwidth limit holds it (`throttled`: the peer is not to blame) the idle
    /// clock does not run. Otherwise the timer is armed again for whichever limit is nearest.
    mutating func timerFired(now: UInt64, throttled: Bool, into actions: inout [Action]) {
        if self.isFinished { return }
        if now >= self.timeouts.deadline {
            return self.fail(
                HawserError(
                    .resourceTimeout,
                    "the total deadline passed: the task did not finish within \(Self.seconds(self.timeouts.total)) s (timeoutIntervalForResource), counted from its start across connecting, redirects and retries; bytes still arriving do not extend it"
                ),
                into: &actions
            )
        }
        if self.readingSuspended || throttled { self.lastActivity = now }
        if now &- self.lastActivity >= self.timeouts.idle {
            return self.fail(
                HawserError(
                    .idleTimeout,
                    "no data moved for \(Self.seconds(self.timeouts.idle)) s (the idle timeout, timeoutIntervalForRequest)"
                ),
                into: &actions
            )
        }
        actions.append(.armTimer(at: self.timeouts.due(lastActivity: self.lastActivity)))
    }

    /// `nanos` as seconds for a message: "0.5", "60", "604800".
    static func seconds(_ nanos: UInt64) -> String {
        let s = Double(nanos) / 1e9
        return s == s.rounded() && s < 1e15 ? String(Int64(s)) : String(s)
    }

    // MARK: - Reading

    mutating func pauseReading(into actions: inout [Action]) {
        guard !self.consumerPaused, !self.isFinished else { return }
        self.consumerPaused = true
        actions.append(.updateReading)
    }

    mutating func resumeReading(into actions: inout [Action]) {
        guard self.consumerPaused, !self.isFinished else { return }
        self.consumerPaused = false
        actions.append(.updateReading)
    }
}
