// The request state machine without sockets: a task's lifecycle across exchanges and one
// exchange's sending and receiving, event by event. Every transition of docs/STATE-MACHINES.md's
// request tables has a test here.
import Foundation
import Testing

@testable import HawserCore

@Suite("Request state machine (pure)")
struct RequestStateMachineTests {
    typealias Machine = RequestStateMachine

    static let next = HTTPClientRequest(url: URL(string: "http://a.test/next")!)
    static let switching = HawserError(.protocolError, "101")

    /// The action as a word (the payloads are checked where they matter).
    static func word(_ a: Machine.Action) -> String {
        switch a {
        case .none: return "none"
        case .requestConnection(let fresh): return fresh ? "requestFreshConnection" : "requestConnection"
        case .writeRequest(let hold): return hold ? "writeHeadHoldingBody" : "writeRequest"
        case .sendHeldBody: return "sendHeldBody"
        case .forwardInterim: return "forwardInterim"
        case .deliverHead(let drop): return drop ? "dropHeldBody+deliverHead" : "deliverHead"
        case .deliverDecidedHead: return "deliverDecidedHead"
        case .dropHeldBody: return "dropHeldBody"
        case .askRedirect(_, let drop): return drop ? "dropHeldBody+askRedirect" : "askRedirect"
        case .askChallenge(let drop): return drop ? "dropHeldBody+askChallenge" : "askChallenge"
        case .askBodyStream: return "askBodyStream"
        case .updateReading: return "updateReading"
        case .restart(_, let counts): return counts ? "restart(redirect)" : "restart"
        case .retry: return "retry"
        case .succeed: return "succeed"
        case .fail(let e, let close, let leave):
            return "fail(\(e.code)\(close ? ",close" : "")\(leave ? ",leaveQueue" : ""))"
        case .armTimer(let at): return "armTimer(\(at))"
        }
    }

    /// A machine whose exchange runs on a connection.
    static func running(plan: Machine.BodyPlan = .none, expects: Bool = false) -> Machine {
        var m = Machine()
        _ = m.submit(plan: plan, expectsContinue: expects, servedFromCache: false)
        _ = m.connectionAssigned()
        return m
    }

    @Test("submit: a connection is asked for; a cache answer finishes at once")
    func submit() {
        var m = Machine()
        #expect(Self.word(m.submit(plan: .none, expectsContinue: false, servedFromCache: false)) == "requestConnection")
        #expect(m.lifecycle == .waitingForConnection)
        #expect(Self.word(m.submit(plan: .none, expectsContinue: false, servedFromCache: false)) == "none", "once")

        var cached = Machine()
        #expect(Self.word(cached.submit(plan: .none, expectsContinue: false, servedFromCache: true)) == "none")
        #expect(cached.isFinished)
    }

    @Test("a connection: the request is written; a body waits for 100 Continue only when expected")
    func connectionAssigned() {
        var plain = Machine()
        _ = plain.submit(plan: .bytes, expectsContinue: false, servedFromCache: false)
        #expect(Self.word(plain.connectionAssigned()) == "writeRequest")
        #expect(plain.lifecycle == .executing && plain.sending == .writing)
        plain.requestWritten()
        #expect(plain.sending == .sent)

        var expecting = Machine()
        _ = expecting.submit(plan: .stream, expectsContinue: true, servedFromCache: false)
        #expect(Self.word(expecting.connectionAssigned()) == "writeHeadHoldingBody")
        #expect(expecting.sending == .waitingForContinue)
        #expect(Self.word(expecting.connectionAssigned()) == "none", "not twice")

        // No body: nothing to hold even when expected.
        var bodiless = Machine()
        _ = bodiless.submit(plan: .none, expectsContinue: true, servedFromCache: false)
        #expect(Self.word(bodiless.connectionAssigned()) == "writeRequest")
    }

    @Test("100 Continue or the timer sends the held body, once; other interim heads are forwarded")
    func continueAndInterim() {
        var m = Self.running(plan: .bytes, expects: true)
        #expect(Self.word(m.interimHead(status: 103, switchingError: Self.switching)) == "forwardInterim")
        #expect(Self.word(m.interimHead(status: 100, switchingError: Self.switching)) == "sendHeldBody")
        #expect(m.sending == .writing)
        #expect(Self.word(m.continueTimerFired()) == "none", "the body went already")
        #expect(Self.word(m.interimHead(status: 100, switchingError: Self.switching)) == "forwardInterim")

        var timed = Self.running(plan: .bytes, expects: true)
        #expect(Self.word(timed.continueTimerFired()) == "sendHeldBody")
        #expect(Self.word(timed.continueTimerFired()) == "none")
    }

    @Test("a 101 fails the task and closes the connection")
    func switchingProtocols() {
        var m = Self.running()
        #expect(Self.word(m.interimHead(status: 101, switchingError: Self.switching)) == "fail(protocolError,close)")
        #expect(m.isFinished)
        #expect(Self.word(m.finalHead(.deliver)) == "none")
    }

    @Test("a final head: delivered; one that came before the held body drops it (the body is withheld)")
    func finalHead() {
        var m = Self.running()
        #expect(Self.word(m.finalHead(.deliver)) == "deliverHead")
        #expect(m.receiving == .body && m.deliversBody)
        #expect(Self.word(m.finalHead(.deliver)) == "none", "one final head per exchange")
        #expect(Self.word(m.responseEnded()) == "succeed")
        #expect(m.isFinished)

        var early = Self.running(plan: .bytes, expects: true)
        #expect(early.bodyWasWithheld)
        #expect(Self.word(early.finalHead(.deliver)) == "dropHeldBody+deliverHead")
        #expect(early.sending == .withheld)
        #expect(Self.word(early.continueTimerFired()) == "none")
    }

    @Test("417 to a withheld body: the body of the 417 is drained, then the request goes again without the expectation")
    func expectationFailed() {
        var m = Self.running(plan: .bytes, expects: true)
        #expect(Self.word(m.finalHead(.retryWithoutExpectation(Self.next))) == "dropHeldBody")
        #expect(!m.deliversBody)
        guard case .restart(let again, let counts) = m.responseEnded() else {
            Issue.record("no restart")
            return
        }
        #expect(again.url == Self.next.url)
        #expect(!counts)
        #expect(m.lifecycle == .initialized)
        #expect(Self.word(m.followUpPrepared(plan: .bytes, expectsContinue: false)) == "requestConnection")
        #expect(m.deliversBody, "the follow-up's response is delivered")
    }

    @Test("a redirect: reading waits for the delegate; following drains the body and restarts as a redirect")
    func redirectFollowed() {
        var m = Self.running()
        #expect(Self.word(m.finalHead(.redirect(proposed: Self.next))) == "askRedirect")
        #expect(m.readingSuspended)
        #expect(Self.word(m.finalHead(.deliver)) == "none", "the head is decided already")
        #expect(Self.word(m.decided(.followUp(Self.next, countsAsRedirect: true))) == "updateReading")
        #expect(!m.readingSuspended && !m.deliversBody)
        #expect(Self.word(m.decided(.deliver)) == "none", "one decision")
        #expect(Self.word(m.responseEnded()) == "restart(redirect)")
    }

    @Test("a redirect the delegate refuses is delivered as the response; a refused target fails")
    func redirectRefused() {
        var m = Self.running()
        _ = m.finalHead(.redirect(proposed: Self.next))
        #expect(Self.word(m.decided(.deliver)) == "deliverDecidedHead")
        #expect(m.deliversBody)
        #expect(Self.word(m.responseEnded()) == "succeed")

        var bad = Self.running()
        _ = bad.finalHead(.redirect(proposed: Self.next))
        #expect(Self.word(bad.decided(.fail(HawserError(.redirectRefused, "no")))) == "fail(redirectRefused,close)")

        var rules = Self.running()
        #expect(
            Self.word(rules.finalHead(.failure(HawserError(.tooManyRedirects, "17")))) == "fail(tooManyRedirects,close)"
        )
    }

    @Test("a 307 with a streamed body: a new stream before the end, or after it, or none")
    func newBodyStream() {
        // The stream comes while the redirect's body still drains.
        var before = Self.running(plan: .stream)
        _ = before.finalHead(.redirect(proposed: Self.next))
        #expect(Self.word(before.decided(.needBodyStream(Self.next))) == "askBodyStream")
        #expect(!before.deliversBody)
        #expect(Self.word(before.bodyStreamProvided(Self.next, missing: Self.switching)) == "none")
        #expect(Self.word(before.responseEnded()) == "restart(redirect)")

        // The redirect's response ends first: the task waits for the stream.
        var after = Self.running(plan: .stream)
        _ = after.finalHead(.redirect(proposed: Self.next))
        _ = after.decided(.needBodyStream(Self.next))
        #expect(Self.word(after.responseEnded()) == "none")
        #expect(after.lifecycle == .awaitingBodyStream)
        #expect(Self.word(after.bodyStreamProvided(Self.next, missing: Self.switching)) == "restart(redirect)")

        // None given: the task fails (nothing to close: the response ended).
        var none = Self.running(plan: .stream)
        _ = none.finalHead(.redirect(proposed: Self.next))
        _ = none.decided(.needBodyStream(Self.next))
        _ = none.responseEnded()
        let missing = HawserError(.invalidRequest, "no stream")
        #expect(Self.word(none.bodyStreamProvided(nil, missing: missing)) == "fail(invalidRequest)")
        #expect(Self.word(none.bodyStreamProvided(Self.next, missing: missing)) == "none")
    }

    @Test("a challenge: reading waits; an answer with credentials follows up without counting as a redirect")
    func challenge() {
        var m = Self.running()
        #expect(Self.word(m.finalHead(.challenge)) == "askChallenge")
        #expect(m.readingSuspended)
        #expect(Self.word(m.decided(.followUp(Self.next, countsAsRedirect: false))) == "updateReading")
        #expect(Self.word(m.responseEnded()) == "restart")

        var held = Self.running(plan: .bytes, expects: true)
        #expect(Self.word(held.finalHead(.challenge)) == "dropHeldBody+askChallenge")
    }

    @Test("a stale connection: one replay per exchange, on a new connection, before any response byte")
    func staleReplay() {
        let lost = HawserError(.connectionLost, "closed")
        var m = Self.running()
        #expect(Self.word(m.connectionFailed(lost, retryable: true, replayable: true)) == "retry")
        #expect(m.lifecycle == .waitingForConnection && m.needsFreshConnection && m.retriedThisExchange)
        #expect(Self.word(m.connectionAssigned()) == "writeRequest")
        #expect(!m.needsFreshConnection)
        #expect(
            Self.word(m.connectionFailed(lost, retryable: true, replayable: true)) == "fail(connectionLost)",
            "once per exchange"
        )

        // The next exchange (a redirect) has a replay of its own.
        var chain = Self.running()
        _ = chain.connectionFailed(lost, retryable: true, replayable: true)
        _ = chain.connectionAssigned()
        _ = chain.finalHead(.redirect(proposed: Self.next))
        _ = chain.decided(.followUp(Self.next, countsAsRedirect: true))
        _ = chain.responseEnded()
        #expect(!chain.retriedThisExchange)
        _ = chain.followUpPrepared(plan: .none, expectsContinue: false)
        _ = chain.connectionAssigned()
        #expect(Self.word(chain.connectionFailed(lost, retryable: true, replayable: true)) == "retry")

        // Not retryable (the connection machine says so), not replayable (a stream), or the
        // response had begun: the task fails.
        var notRetryable = Self.running()
        #expect(
            Self.word(notRetryable.connectionFailed(lost, retryable: false, replayable: true)) == "fail(connectionLost)"
        )
        var stream = Self.running(plan: .stream)
        #expect(Self.word(stream.connectionFailed(lost, retryable: true, replayable: false)) == "fail(connectionLost)")
        var begun = Self.running()
        _ = begun.finalHead(.deliver)
        #expect(Self.word(begun.connectionFailed(lost, retryable: true, replayable: true)) == "fail(connectionLost)")
    }

    @Test("cancellation from anywhere completes once: what to undo depends on where the task is")
    func failEverywhere() {
        let cancelled = HawserError(.cancelled, "cancelled")
        var created = Machine()
        #expect(Self.word(created.fail(cancelled)) == "fail(cancelled)")
        var queued = Machine()
        _ = queued.submit(plan: .none, expectsContinue: false, servedFromCache: false)
        #expect(Self.word(queued.fail(cancelled)) == "fail(cancelled,leaveQueue)")
        var executing = Self.running()
        #expect(Self.word(executing.fail(cancelled)) == "fail(cancelled,close)")
        var deciding = Self.running()
        _ = deciding.finalHead(.challenge)
        #expect(Self.word(deciding.fail(cancelled)) == "fail(cancelled,close)")
        #expect(Self.word(deciding.decided(.deliver)) == "none", "a late decision changes nothing")
        var awaiting = Self.running(plan: .stream)
        _ = awaiting.finalHead(.redirect(proposed: Self.next))
        _ = awaiting.decided(.needBodyStream(Self.next))
        _ = awaiting.responseEnded()
        #expect(Self.word(awaiting.fail(cancelled)) == "fail(cancelled)")
        var done = Self.running()
        _ = done.finalHead(.deliver)
        _ = done.responseEnded()
        #expect(Self.word(done.fail(cancelled)) == "none")
        #expect(Self.word(done.responseEnded()) == "none")
        #expect(Self.word(done.fail(cancelled)) == "none", "twice is once")
    }

    @Test("reading: the consumer pauses and resumes; a pending decision holds reading too")
    func reading() {
        var m = Self.running()
        #expect(Self.word(m.pauseReading()) == "updateReading")
        #expect(Self.word(m.pauseReading()) == "none")
        #expect(m.readingSuspended)
        _ = m.finalHead(.redirect(proposed: Self.next))
        #expect(Self.word(m.resumeReading()) == "updateReading")
        #expect(m.readingSuspended, "the decision still holds it")
        _ = m.decided(.deliver)
        #expect(!m.readingSuspended)
        _ = m.responseEnded()
        #expect(Self.word(m.pauseReading()) == "none", "finished")
    }

    // MARK: - The task's timer

    static let deadlineError = HawserError(.resourceTimeout, "the total deadline passed")
    static let idleError = HawserError(.idleTimeout, "no data moved")

    /// Fires `m`'s timer at `now` with an idle timeout of 5 and a total of 12 from 100.
    static func fire(_ m: inout Machine, now: UInt64, lastActivity: inout UInt64) -> String {
        Self.word(
            m.timerFired(
                now: now,
                lastActivity: &lastActivity,
                timeouts: Machine.Timeouts(start: 100, idle: 5, total: 12),
                deadlineError: Self.deadlineError,
                idleError: Self.idleError
            )
        )
    }

    @Test(
        "the timer: due at the earlier limit; bytes that keep moving re-arm it, but the total deadline fails the task"
    )
    func timerTotalDeadline() {
        let t = Machine.Timeouts(start: 100, idle: 5, total: 12)
        #expect(t.deadline == 112)
        #expect(t.due(lastActivity: 100) == 105, "idle first")
        #expect(t.due(lastActivity: 110) == 112, "then the deadline")
        #expect(Machine.Timeouts(start: .max - 1, idle: .max, total: .max).deadline == .max, "no overflow")
        #expect(Machine.Timeouts(start: 0, idle: .max, total: 10).due(lastActivity: 5) == 10)

        // A byte every 4: the idle timeout (5) never passes; the timer re-arms each time.
        var m = Self.running()
        _ = m.finalHead(.deliver)
        var last: UInt64 = 104
        #expect(Self.fire(&m, now: 105, lastActivity: &last) == "armTimer(109)")
        last = 108
        #expect(Self.fire(&m, now: 109, lastActivity: &last) == "armTimer(112)", "the deadline is nearer")
        last = 111
        #expect(Self.fire(&m, now: 112, lastActivity: &last) == "fail(resourceTimeout,close)")
        #expect(m.isFinished)
        #expect(Self.fire(&m, now: 200, lastActivity: &last) == "none", "finished: nothing")

        // Everywhere the task can be, the deadline ends it and undoes what that place needs.
        var queued = Machine()
        _ = queued.submit(plan: .none, expectsContinue: false, servedFromCache: false)
        last = 111
        #expect(Self.fire(&queued, now: 112, lastActivity: &last) == "fail(resourceTimeout,leaveQueue)")
        var awaiting = Self.running(plan: .stream)
        _ = awaiting.finalHead(.redirect(proposed: Self.next))
        _ = awaiting.decided(.needBodyStream(Self.next))
        _ = awaiting.responseEnded()
        #expect(Self.fire(&awaiting, now: 112, lastActivity: &last) == "fail(resourceTimeout)")
        // The deadline wins even when the idle timeout passed at the same instant.
        var both = Self.running()
        last = 100
        #expect(Self.fire(&both, now: 112, lastActivity: &last) == "fail(resourceTimeout,close)")
    }

    @Test(
        "the timer: no byte for the idle timeout fails with idleTimeout; suspended reading stops the idle clock, not the deadline"
    )
    func timerIdle() {
        var m = Self.running()
        var last: UInt64 = 100
        #expect(Self.fire(&m, now: 104, lastActivity: &last) == "armTimer(105)", "early: armed again")
        #expect(Self.fire(&m, now: 105, lastActivity: &last) == "fail(idleTimeout,close)")

        var paused = Self.running()
        _ = paused.pauseReading()
        last = 100
        #expect(Self.fire(&paused, now: 105, lastActivity: &last) == "armTimer(110)")
        #expect(last == 105, "the idle clock restarts while reading is suspended")
        #expect(Self.fire(&paused, now: 110, lastActivity: &last) == "armTimer(112)")
        #expect(Self.fire(&paused, now: 112, lastActivity: &last) == "fail(resourceTimeout,close)")

        var deciding = Self.running()
        _ = deciding.finalHead(.challenge)
        last = 100
        #expect(Self.fire(&deciding, now: 107, lastActivity: &last) == "armTimer(112)")
        #expect(Self.fire(&deciding, now: 112, lastActivity: &last) == "fail(resourceTimeout,close)")
    }
}
