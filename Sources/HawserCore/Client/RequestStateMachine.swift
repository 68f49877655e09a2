// Theory of operation
// -------------------
// One value per task: everything a request goes through, across its exchanges (the request, then
// its follow-ups: a redirect, an authentication answer, the 417 retry, a stale-connection replay),
// and everything one exchange goes through on its connection. It knows nothing of sockets, timers
// or delegates: the shells (RequestTask for the task, HTTP1Connection for the wire) report events
// and run the actions they get back.
//
// The task:
//
//   initialized ─submit─▶ waitingForConnection ─connection─▶ executing ─response ended─▶ finished
//        │                     ▲   │                          │  │  │
//        │                     │   └─fail/cancel/timeout──────┼──┼──┼──▶ finished (failed)
//        │                     ├────────follow-up─────────────┘  │  │
//        │                     ├────────stale replay (once)──────┘  │
//        │                     └──body stream given── awaitingBodyStream ◀─ ended, a 307/308 needs a new stream
//        └─served from the cache──▶ finished
//
// One exchange (inside `executing`):
//   sending:   writing ─▶ (waitingForContinue ─100/timeout─▶) writing ─written─▶ sent
//                               └─final status first─▶ withheld (the body is never sent)
//   receiving: waitingForHead ─final head─▶ (awaitingDecision ─answer─▶) body ─end─▶ (done)
//
// What the end of the response leads to is decided when its head arrives: completion, a follow-up
// request (the body is drained, not delivered), or waiting for a new body stream.

/// The pure state machine of one request task.
struct RequestStateMachine {
    enum Lifecycle: Sendable, Hashable {
        /// Created. Next: waitingForConnection, finished (served from the cache, or failed).
        case initialized
        /// In the pool's queue. Next: executing, finished.
        case waitingForConnection
        /// An exchange is on a connection. Next: waitingForConnection (follow-up, replay),
        /// awaitingBodyStream, finished.
        case executing
        /// The response ended; a 307/308 must send its streamed body again and the delegate was
        /// asked for a new stream. Next: waitingForConnection, finished.
        case awaitingBodyStream
        /// Final: the delegate was told, exactly once.
        case finished
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

    enum Receiving: Sendable, Hashable {
        case waitingForHead
        /// A final head is with a delegate (a redirect or a challenge); reading is held.
        case awaitingDecision
        case body
        case ended
    }

    /// What the end of the current response leads to.
    enum AfterResponse: Sendable {
        case complete
        /// Another request replaces this one (its body is drained, not delivered).
        /// `countsAsRedirect` is false for authentication answers and the 417 retry.
        case followUp(HTTPClientRequest, countsAsRedirect: Bool)
        /// A redirect that must resend a streamed body: the delegate is finding a new stream.
        case awaitBodyStream(HTTPClientRequest)
    }

    /// How the body of one exchange goes out.
    enum BodyPlan: Sendable, Hashable {
        case none
        /// In memory; small bodies go in the head's write.
        case bytes
        /// From the producer, with back-pressure.
        case stream
    }

    /// A final head as the shell classified it (cookies stored, rules applied).
    enum HeadKind: Sendable {
        /// Deliver it as the response.
        case deliver
        /// 417 to a request whose body waited for 100 Continue: send it again without the expectation.
        case retryWithoutExpectation(HTTPClientRequest)
        /// A redirect to follow, once the delegate agrees (`proposed` is what the rules give).
        case redirect(proposed: HTTPClientRequest)
        /// A 401/407 the delegates and credential store may answer.
        case challenge
        /// A response that must not be followed or delivered (a refused redirect target).
        case failure(HawserError)
    }

    /// A delegate's answer about a redirect or a challenge.
    enum Decision: Sendable {
        case deliver
        case followUp(HTTPClientRequest, countsAsRedirect: Bool)
        /// Follow, but the streamed body must be given again first.
        case needBodyStream(HTTPClientRequest)
        case fail(HawserError)
    }

    enum Action: Sendable {
        case none
        /// Ask the pool for a connection (`fresh`: a newly opened one, for a replay).
        case requestConnection(fresh: Bool)
        /// Write the head and the body; with `holdBody` the body waits for 100 Continue (arm the
        /// continue timer).
        case writeRequest(holdBody: Bool)
        /// Send the body held back for 100 Continue.
        case sendHeldBody
        /// Tell the delegate about the interim head (the caller has it).
        case forwardInterim
        /// Deliver the final head (and set up decoding and caching).
        case deliverHead(dropHeldBody: Bool)
        /// Deliver the final head a delegate was asked about, then resume reading.
        case deliverDecidedHead
        /// A final head arrived while the body was held: drop it (the connection closes after).
        case dropHeldBody
        /// Ask the delegate about a redirect; reading is held until `decided`.
        case askRedirect(proposed: HTTPClientRequest, dropHeldBody: Bool)
        /// Ask the delegates about a 401/407; reading is held until `decided`.
        case askChallenge(dropHeldBody: Bool)
        /// Ask the delegate for a new body stream.
        case askBodyStream
        /// Reading resumes (a decision came, or the consumer resumed).
        case updateReading
        /// Send `request` as the next exchange (prepare it, then ask for a connection).
        case restart(HTTPClientRequest, countsAsRedirect: Bool)
        /// Replay the exchange once on a new connection (a stale kept-alive connection died).
        case retry
        /// Complete the task successfully.
        case succeed
        /// Complete the task with `error`; `closeConnection`: the exchange's connection cannot be
        /// reused; `leaveQueue`: the task is in the pool's queue.
        case fail(HawserError, closeConnection: Bool, leaveQueue: Bool)
        /// Arm the task's one timer for the instant `at` (loop-clock nanoseconds).
        case armTimer(at: UInt64)
    }

    /// A task's two time limits, in the loop clock's nanoseconds: the idle timeout (between two
    /// bytes moving, timeoutIntervalForRequest) and the total deadline (the whole task,
    /// timeoutIntervalForResource). One timer serves both: it is due at the earlier of the two.
    struct Timeouts: Sendable, Hashable {
        /// The most time allowed between two bytes moving.
        var idle: UInt64
        /// The most time the whole task may take.
        var total: UInt64
        /// When the task started plus `total`: the instant the total deadline passes.
        var deadline: UInt64

        init(start: UInt64, idle: UInt64, total: UInt64) {
            self.idle = idle
            self.total = total
            let (sum, overflow) = start.addingReportingOverflow(total)
            self.deadline = overflow ? .max : sum
        }

        /// When the timer is next due, the last byte having moved at `lastActivity`.
        func due(lastActivity: UInt64) -> UInt64 {
            let (idleDue, overflow) = lastActivity.addingReportingOverflow(self.idle)
            return min(overflow ? .max : idleDue, self.deadline)
        }
    }

    private(set) var lifecycle: Lifecycle = .initialized
    private(set) var sending: Sending = .notStarted
    private(set) var receiving: Receiving = .waitingForHead
    private(set) var after: AfterResponse = .complete
    /// The consumer paused reading (back-pressure).
    private(set) var consumerPaused = false
    /// The current exchange was replayed once already.
    private(set) var retriedThisExchange = false
    /// The next connection must be a new one.
    private(set) var needsFreshConnection = false
    /// How this exchange's body goes out, and whether it waits for 100 Continue.
    private var bodyPlan: BodyPlan = .none
    private var expectsContinue = false

    /// Whether the connection should stop reading for this task.
    var readingSuspended: Bool { self.consumerPaused || self.receiving == .awaitingDecision }
    /// Whether body bytes are the delegate's (false while a follow-up's response drains).
    var deliversBody: Bool {
        if case .complete = self.after { return true }
        return false
    }
    var isFinished: Bool { self.lifecycle == .finished }

    // MARK: - Task events

    /// The task is handed to the session. `servedFromCache`: the cache answered (or refused)
    /// without the network, and the shell completes the task itself.
    mutating func submit(plan: BodyPlan, expectsContinue: Bool, servedFromCache: Bool) -> Action {
        guard self.lifecycle == .initialized else { return .none }
        if servedFromCache {
            self.lifecycle = .finished
            return .none
        }
        self.bodyPlan = plan
        self.expectsContinue = expectsContinue
        self.lifecycle = .waitingForConnection
        return .requestConnection(fresh: false)
    }

    /// The pool gave the task a connection.
    mutating func connectionAssigned() -> Action {
        guard self.lifecycle == .waitingForConnection else { return .none }
        self.lifecycle = .executing
        self.sending = .writing
        self.receiving = .waitingForHead
        self.needsFreshConnection = false
        let hold = self.expectsContinue && self.bodyPlan != .none
        if hold { self.sending = .waitingForContinue }
        return .writeRequest(holdBody: hold)
    }

    /// Head and body were handed to the socket.
    mutating func requestWritten() {
        if self.lifecycle == .executing, self.sending == .writing { self.sending = .sent }
    }

    /// The 100-continue timer fired: the body goes anyway.
    mutating func continueTimerFired() -> Action {
        guard self.lifecycle == .executing, self.sending == .waitingForContinue else { return .none }
        self.sending = .writing
        return .sendHeldBody
    }

    /// An interim (1xx) head.
    mutating func interimHead(status: Int, switchingError: @autoclosure () -> HawserError) -> Action {
        guard self.lifecycle == .executing, self.receiving == .waitingForHead else { return .none }
        if status == 101 {
            // The connection now speaks another protocol, which the engine does not implement.
            return self.fail(switchingError())
        }
        if status == 100, self.sending == .waitingForContinue {
            self.sending = .writing
            return .sendHeldBody
        }
        return .forwardInterim
    }

    /// The final head, as the shell classified it.
    mutating func finalHead(_ kind: HeadKind) -> Action {
        guard self.lifecycle == .executing, self.receiving == .waitingForHead else { return .none }
        let dropHeld = self.sending == .waitingForContinue
        if dropHeld { self.sending = .withheld }
        switch kind {
        case .deliver:
            self.receiving = .body
            return .deliverHead(dropHeldBody: dropHeld)
        case .retryWithoutExpectation(let again):
            self.receiving = .body
            self.after = .followUp(again, countsAsRedirect: false)
            return dropHeld ? .dropHeldBody : .none
        case .redirect(let proposed):
            self.receiving = .awaitingDecision
            return .askRedirect(proposed: proposed, dropHeldBody: dropHeld)
        case .challenge:
            self.receiving = .awaitingDecision
            return .askChallenge(dropHeldBody: dropHeld)
        case .failure(let error):
            return self.fail(error)
        }
    }

    /// Whether the body of the exchange's final head was withheld (it waited for 100 Continue
    /// and a final status came first): a 417 then means "send it again without expecting".
    var bodyWasWithheld: Bool { self.sending == .withheld || self.sending == .waitingForContinue }

    /// A delegate answered about the head held in `awaitingDecision`.
    mutating func decided(_ decision: Decision) -> Action {
        guard self.lifecycle == .executing, self.receiving == .awaitingDecision else { return .none }
        self.receiving = .body
        switch decision {
        case .deliver:
            return .deliverDecidedHead
        case .followUp(let next, let counts):
            self.after = .followUp(next, countsAsRedirect: counts)
            return .updateReading
        case .needBodyStream(let next):
            self.after = .awaitBodyStream(next)
            return .askBodyStream
        case .fail(let error):
            return self.fail(error)
        }
    }

    /// The delegate gave the new body stream a redirect needs (nil: it has none).
    mutating func bodyStreamProvided(_ next: HTTPClientRequest?, missing: @autoclosure () -> HawserError) -> Action {
        guard case .awaitBodyStream = self.after, self.lifecycle == .executing || self.lifecycle == .awaitingBodyStream
        else {
            return .none
        }
        guard let next else { return self.fail(missing()) }
        if self.lifecycle == .awaitingBodyStream {
            // The redirect's response already ended: go now.
            return self.beginFollowUp(next, countsAsRedirect: true)
        }
        self.after = .followUp(next, countsAsRedirect: true)
        return .none
    }

    /// The response ended (the connection decided about itself already).
    mutating func responseEnded() -> Action {
        guard self.lifecycle == .executing else { return .none }
        self.receiving = .ended
        switch self.after {
        case .complete:
            self.lifecycle = .finished
            return .succeed
        case .followUp(let next, let counts):
            return self.beginFollowUp(next, countsAsRedirect: counts)
        case .awaitBodyStream:
            self.lifecycle = .awaitingBodyStream
            return .none
        }
    }

    private mutating func beginFollowUp(_ next: HTTPClientRequest, countsAsRedirect: Bool) -> Action {
        self.lifecycle = .initialized
        self.sending = .notStarted
        self.receiving = .waitingForHead
        self.after = .complete
        self.retriedThisExchange = false
        self.needsFreshConnection = false
        return .restart(next, countsAsRedirect: countsAsRedirect)
    }

    /// The follow-up request was prepared; it goes to the pool like the first one.
    mutating func followUpPrepared(plan: BodyPlan, expectsContinue: Bool) -> Action {
        guard self.lifecycle == .initialized else { return .none }
        self.bodyPlan = plan
        self.expectsContinue = expectsContinue
        self.lifecycle = .waitingForConnection
        return .requestConnection(fresh: false)
    }

    /// The connection failed under the exchange. `retryable`: the connection machine says the
    /// request may be replayed (a reused connection died before any response byte, and the
    /// method is idempotent); `replayable`: the body can be sent again (not a stream).
    mutating func connectionFailed(_ error: HawserError, retryable: Bool, replayable: Bool) -> Action {
        guard self.lifecycle == .executing else { return .none }
        if retryable, replayable, !self.retriedThisExchange, self.receiving == .waitingForHead {
            self.retriedThisExchange = true
            self.needsFreshConnection = true
            self.lifecycle = .waitingForConnection
            self.sending = .notStarted
            return .retry
        }
        // The connection is gone already: nothing to close.
        self.lifecycle = .finished
        return .fail(error, closeConnection: false, leaveQueue: false)
    }

    /// Fails the task from wherever it is: cancellation, a timeout, a refused response, a body
    /// stream error. A no-op when it is finished.
    mutating func fail(_ error: HawserError) -> Action {
        let action: Action
        switch self.lifecycle {
        case .finished:
            return .none
        case .initialized, .awaitingBodyStream:
            action = .fail(error, closeConnection: false, leaveQueue: false)
        case .waitingForConnection:
            action = .fail(error, closeConnection: false, leaveQueue: true)
        case .executing:
            action = .fail(error, closeConnection: true, leaveQueue: false)
        }
        self.lifecycle = .finished
        return action
    }

    // MARK: - Timers

    /// The task's one timer fired at `now` (it is due at ``Timeouts/due(lastActivity:)``, and
    /// activity only moves `lastActivity`, so it may fire early). The total deadline is checked
    /// first and wins: bytes that keep moving never extend it. While reading is suspended (the
    /// consumer paused, a delegate deciding) the idle clock does not run: `lastActivity` moves
    /// to `now`. Otherwise the timer is armed again for whichever limit is now nearest.
    mutating func timerFired(
        now: UInt64,
        lastActivity: inout UInt64,
        timeouts: Timeouts,
        deadlineError: @autoclosure () -> HawserError,
        idleError: @autoclosure () -> HawserError
    ) -> Action {
        guard !self.isFinished else { return .none }
        if now >= timeouts.deadline { return self.fail(deadlineError()) }
        if self.readingSuspended { lastActivity = now }
        if now &- lastActivity >= timeouts.idle { return self.fail(idleError()) }
        return .armTimer(at: timeouts.due(lastActivity: lastActivity))
    }

    // MARK: - Reading

    mutating func pauseReading() -> Action {
        guard !self.consumerPaused, !self.isFinished else { return .none }
        self.consumerPaused = true
        return .updateReading
    }

    mutating func resumeReading() -> Action {
        guard self.consumerPaused, !self.isFinished else { return .none }
        self.consumerPaused = false
        return .updateReading
    }
}
