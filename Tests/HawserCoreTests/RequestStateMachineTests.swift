// The request state machine without sockets: a task's lifecycle across exchanges and one
// exchange's sending and receiving, event by event. Every transition of docs/STATE-MACHINES.md's
// request tables has a test here or in RequestStateMachineTimerTests.swift (the timers and the
// cache-serving state).
import Foundation
import HawserHTTP1
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
        case .requestConnection(let fresh): return fresh ? "requestFreshConnection" : "requestConnection"
        case .writeRequest(let hold): return hold ? "writeHeadHoldingBody" : "writeRequest"
        case .sendHeldBody: return "sendHeldBody"
        case .forwardInterim(let head): return "forwardInterim(\(head.status))"
        case .deliverHead(let head, let drop):
            return drop ? "dropHeldBody+deliverHead(\(head.status))" : "deliverHead(\(head.status))"
        case .deliverDecidedHead(let head): return "deliverDecidedHead(\(head.status))"
        case .dropHeldBody: return "dropHeldBody"
        case .askRedirect(let head, _, let drop):
            return drop ? "dropHeldBody+askRedirect(\(head.status))" : "askRedirect(\(head.status))"
        case .askChallenge(let drop): return drop ? "dropHeldBody+askChallenge" : "askChallenge"
        case .askBodyStream(_, let status): return "askBodyStream(\(status))"
        case .updateReading: return "updateReading"
        case .restart(_, let hop):
            return hop.map { "restart(redirect \($0.status) at \($0.headAt))" } ?? "restart"
        case .retry: return "retry"
        case .succeed(let trailers): return trailers.map { "succeed(\($0.count) trailers)" } ?? "succeed"
        case .serveRevalidatedBody: return "serveRevalidatedBody"
        case .finishCachedResponse: return "finishCachedResponse"
        case .fail(let e, let close, let leave):
            return "fail(\(e.code)\(close ? ",close" : "")\(leave ? ",leaveQueue" : ""))"
        case .armTimer(let at): return "armTimer(\(at))"
        }
    }

    /// Runs one event on `m` and gives its actions as words, joined by a space ("" for none).
    static func on(_ m: inout Machine, _ event: (inout Machine, inout [Machine.Action]) -> Void) -> String {
        var actions: [Machine.Action] = []
        event(&m, &actions)
        return actions.map(Self.word).joined(separator: " ")
    }

    static func head(_ status: Int) -> HTTPResponseHead { HTTPResponseHead(status: status) }

    /// A machine waiting for its connection.
    static func queued(plan: Machine.BodyPlan = .none, expects: Bool = false) -> Machine {
        var m = Machine()
        _ = Self.on(&m) { $0.submit(plan: plan, expectsContinue: expects, into: &$1) }
        return m
    }

    /// A machine whose exchange runs on a connection.
    static func running(plan: Machine.BodyPlan = .none, expects: Bool = false) -> Machine {
        var m = Self.queued(plan: plan, expects: expects)
        _ = Self.on(&m) { $0.connectionAssigned(now: 0, into: &$1) }
        return m
    }

    @Test("start arms the task's timer at the earlier limit; submit asks for a connection")
    func startAndSubmit() {
        var m = Machine(start: 100, timeouts: Machine.Timeouts(start: 100, idle: 5, total: 12))
        #expect(Self.on(&m) { $0.start(into: &$1) } == "armTimer(105)")
        #expect(m.lifecycle == .initialized)
        #expect(Self.on(&m) { $0.submit(plan: .none, expectsContinue: false, into: &$1) } == "requestConnection")
        #expect(m.lifecycle == .waitingForConnection)
        #expect(!m.isFinished)
    }

    @Test("the cache answers: serving from the cache; a cache that may not load finishes at once")
    func answeredWithoutNetwork() {
        var cached = Machine()
        cached.servedFromCache()
        #expect(cached.lifecycle == .servingFromCache)
        #expect(cached.isFinished, "no network work is left")
        #expect(!cached.deliversBody, "no network body")

        var refused = Machine()
        refused.answeredElsewhere()
        #expect(refused.lifecycle == .finished)
    }

    @Test("a cancel while the cache was consulted: the late submit does nothing")
    func submitAfterCancel() {
        var m = Machine()
        #expect(Self.on(&m) { $0.fail(HawserError(.cancelled, "c"), into: &$1) } == "fail(cancelled)")
        #expect(Self.on(&m) { $0.submit(plan: .none, expectsContinue: false, into: &$1) } == "")
        m.servedFromCache()
        #expect(m.lifecycle == .finished)
    }

    @Test("a connection: the request is written; a body waits for 100 Continue only when expected")
    func connectionAssigned() {
        var plain = Self.queued(plan: .bytes)
        #expect(Self.on(&plain) { $0.connectionAssigned(now: 7, into: &$1) } == "writeRequest")
        #expect(plain.lifecycle == .executing && plain.sending == .writing)
        #expect(plain.lastActivity == 7, "the idle clock starts with the exchange")
        plain.requestWritten()
        #expect(plain.sending == .sent)

        var expecting = Self.queued(plan: .stream, expects: true)
        #expect(Self.on(&expecting) { $0.connectionAssigned(now: 0, into: &$1) } == "writeHeadHoldingBody")
        #expect(expecting.sending == .waitingForContinue)
        expecting.requestWritten()
        #expect(expecting.sending == .waitingForContinue, "only writing moves to sent")

        // No body: nothing to hold even when expected.
        var bodiless = Self.queued(plan: .none, expects: true)
        #expect(Self.on(&bodiless) { $0.connectionAssigned(now: 0, into: &$1) } == "writeRequest")
    }

    @Test("100 Continue sends the held body and is forwarded; other interim heads are forwarded")
    func interimHeads() {
        var m = Self.running(plan: .bytes, expects: true)
        #expect(
            Self.on(&m) { $0.interimHead(Self.head(103), switchingError: Self.switching, into: &$1) }
                == "forwardInterim(103)"
        )
        #expect(m.sending == .waitingForContinue, "103 does not release the body")
        #expect(
            Self.on(&m) { $0.interimHead(Self.head(100), switchingError: Self.switching, into: &$1) }
                == "sendHeldBody forwardInterim(100)"
        )
        #expect(m.sending == .writing)
        #expect(
            Self.on(&m) { $0.interimHead(Self.head(100), switchingError: Self.switching, into: &$1) }
                == "forwardInterim(100)",
            "the body went already"
        )
    }

    @Test("the continue timer sends the held body, once; it does nothing when the body went")
    func continueTimer() {
        var timed = Self.running(plan: .bytes, expects: true)
        #expect(Self.on(&timed) { $0.continueTimerFired(now: 1, into: &$1) } == "sendHeldBody")
        #expect(timed.sending == .writing)
        #expect(Self.on(&timed) { $0.continueTimerFired(now: 2, into: &$1) } == "")

        var withheld = Self.running(plan: .bytes, expects: true)
        _ = Self.on(&withheld) { $0.finalHead(Self.head(200), .deliver, into: &$1) }
        #expect(Self.on(&withheld) { $0.continueTimerFired(now: 1, into: &$1) } == "", "the body was dropped")
    }

    @Test("a 101 fails the task and closes the connection; later events are dropped")
    func switchingProtocols() {
        var m = Self.running()
        #expect(
            Self.on(&m) { $0.interimHead(Self.head(101), switchingError: Self.switching, into: &$1) }
                == "fail(protocolError,close)"
        )
        #expect(m.isFinished)
        #expect(Self.on(&m) { $0.finalHead(Self.head(200), .deliver, into: &$1) } == "")
    }

    @Test("a final head is delivered (the action carries it), the end succeeds; one before the held body drops it")
    func finalHead() {
        var m = Self.running()
        #expect(Self.on(&m) { $0.finalHead(Self.head(203), .deliver, into: &$1) } == "deliverHead(203)")
        guard case .body = m.receiving else {
            Issue.record("not receiving the body: \(m.receiving)")
            return
        }
        #expect(m.deliversBody)
        #expect(Self.on(&m) { $0.responseEnded(into: &$1) } == "succeed")
        #expect(m.lifecycle == .finished)

        var early = Self.running(plan: .bytes, expects: true)
        #expect(early.bodyWasWithheld)
        #expect(
            Self.on(&early) { $0.finalHead(Self.head(200), .deliver, into: &$1) } == "dropHeldBody+deliverHead(200)"
        )
        #expect(early.sending == .withheld)
    }

    @Test("the trailers of a chunked body ride on the success; a follow-up's are dropped with its body")
    func trailers() {
        var m = Self.running()
        _ = Self.on(&m) { $0.finalHead(Self.head(200), .deliver, into: &$1) }
        var actions: [Machine.Action] = []
        m.responseEnded(trailers: ["Server-Timing": "db;dur=53", "Digest": "x"], into: &actions)
        guard case .succeed(let trailers?)? = actions.first, actions.count == 1 else {
            Issue.record("no succeed with trailers: \(actions.map(Self.word))")
            return
        }
        #expect(trailers["Server-Timing"] == "db;dur=53" && trailers.count == 2)

        var followed = Self.running()
        _ = Self.on(&followed) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&followed) { $0.decided(.followUp(Self.next, countsAsRedirect: true), into: &$1) }
        #expect(
            Self.on(&followed) { $0.responseEnded(trailers: ["Digest": "x"], into: &$1) }
                == "restart(redirect 302 at 0)"
        )
    }

    @Test("417 to a withheld body: its body is drained, then the request goes again without the expectation")
    func expectationFailed() {
        var m = Self.running(plan: .bytes, expects: true)
        #expect(
            Self.on(&m) { $0.finalHead(Self.head(417), .retryWithoutExpectation(Self.next), into: &$1) }
                == "dropHeldBody"
        )
        #expect(!m.deliversBody)
        var actions: [Machine.Action] = []
        m.responseEnded(into: &actions)
        guard case .restart(let again, let hop)? = actions.first else {
            Issue.record("no restart: \(actions.map(Self.word))")
            return
        }
        #expect(again.url == Self.next.url)
        #expect(hop == nil, "not a redirect")
        #expect(m.lifecycle == .initialized)
        #expect(
            Self.on(&m) { $0.followUpPrepared(plan: .bytes, expectsContinue: false, now: 9, into: &$1) }
                == "requestConnection"
        )
        #expect(m.lastActivity == 9)
        _ = Self.on(&m) { $0.connectionAssigned(now: 10, into: &$1) }
        #expect(m.deliversBody, "the follow-up's response is delivered")

        var sent = Self.running(plan: .bytes)
        #expect(
            Self.on(&sent) { $0.finalHead(Self.head(417), .retryWithoutExpectation(Self.next), into: &$1) } == "",
            "no held body to drop"
        )
    }

    @Test(
        "a redirect: the machine keeps its head and instant while the delegate decides; following restarts with the hop"
    )
    func redirectFollowed() {
        var m = Self.running()
        m.activity(at: 42)  // the head's bytes were read at 42
        #expect(
            Self.on(&m) { $0.finalHead(Self.head(307), .redirect(proposed: Self.next), into: &$1) }
                == "askRedirect(307)"
        )
        guard case .awaitingDecision(let kept, let at) = m.receiving else {
            Issue.record("not deciding: \(m.receiving)")
            return
        }
        #expect(kept.status == 307 && at == 42)
        #expect(m.readingSuspended)
        m.activity(at: 50)  // bytes after the head do not move the hop's instant
        #expect(Self.on(&m) { $0.decided(.followUp(Self.next, countsAsRedirect: true), into: &$1) } == "updateReading")
        #expect(!m.readingSuspended && !m.deliversBody)
        #expect(Self.on(&m) { $0.responseEnded(into: &$1) } == "restart(redirect 307 at 42)")
        #expect(m.lifecycle == .initialized)
    }

    @Test("a redirect the delegate refuses is delivered as the response; a refused target fails")
    func redirectRefused() {
        var m = Self.running()
        _ = Self.on(&m) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        #expect(Self.on(&m) { $0.decided(.deliver, into: &$1) } == "deliverDecidedHead(302)", "the kept head")
        #expect(m.deliversBody)
        #expect(Self.on(&m) { $0.responseEnded(into: &$1) } == "succeed")

        var bad = Self.running()
        _ = Self.on(&bad) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        #expect(
            Self.on(&bad) { $0.decided(.fail(HawserError(.redirectRefused, "no")), into: &$1) }
                == "fail(redirectRefused,close)"
        )

        var rules = Self.running()
        #expect(
            Self.on(&rules) { $0.finalHead(Self.head(302), .failure(HawserError(.tooManyRedirects, "17")), into: &$1) }
                == "fail(tooManyRedirects,close)"
        )
        #expect(rules.lifecycle == .finished)
    }

    @Test("a held body and a redirect or a challenge: the body is dropped with the question")
    func heldBodyAndDecision() {
        var redirect = Self.running(plan: .bytes, expects: true)
        #expect(
            Self.on(&redirect) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
                == "dropHeldBody+askRedirect(302)"
        )
        var challenge = Self.running(plan: .bytes, expects: true)
        #expect(
            Self.on(&challenge) { $0.finalHead(Self.head(401), .challenge, into: &$1) } == "dropHeldBody+askChallenge"
        )
        #expect(challenge.sending == .withheld)
    }

    @Test("a 307 with a streamed body: a new stream before the end, or after it, or none; the hop rides along")
    func newBodyStream() {
        // The stream comes while the redirect's body still drains.
        var before = Self.running(plan: .stream)
        before.activity(at: 5)
        _ = Self.on(&before) { $0.finalHead(Self.head(307), .redirect(proposed: Self.next), into: &$1) }
        #expect(
            Self.on(&before) { $0.decided(.needBodyStream(Self.next), into: &$1) } == "askBodyStream(307) updateReading"
        )
        #expect(before.awaitedBodyStreamRequest?.url == Self.next.url)
        #expect(!before.deliversBody)
        #expect(Self.on(&before) { $0.bodyStreamProvided(Self.next, missing: Self.switching, into: &$1) } == "")
        #expect(Self.on(&before) { $0.responseEnded(into: &$1) } == "restart(redirect 307 at 5)")

        // The redirect's response ends first: the task waits for the stream, keeping the hop.
        var after = Self.running(plan: .stream)
        after.activity(at: 6)
        _ = Self.on(&after) { $0.finalHead(Self.head(308), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&after) { $0.decided(.needBodyStream(Self.next), into: &$1) }
        after.activity(at: 9)
        #expect(Self.on(&after) { $0.responseEnded(into: &$1) } == "")
        #expect(after.lifecycle == .awaitingBodyStream)
        guard case .awaitingBodyStream(let hop) = after.state else {
            Issue.record("not awaiting a body stream: \(after.lifecycle)")
            return
        }
        #expect(hop == Machine.Redirection(status: 308, headAt: 6))
        #expect(
            Self.on(&after) { $0.bodyStreamProvided(Self.next, missing: Self.switching, into: &$1) }
                == "restart(redirect 308 at 6)"
        )

        // None given, after the end: the task fails (nothing to close: the response ended).
        let missing = HawserError(.invalidRequest, "no stream")
        var none = Self.running(plan: .stream)
        _ = Self.on(&none) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&none) { $0.decided(.needBodyStream(Self.next), into: &$1) }
        _ = Self.on(&none) { $0.responseEnded(into: &$1) }
        #expect(Self.on(&none) { $0.bodyStreamProvided(nil, missing: missing, into: &$1) } == "fail(invalidRequest)")
        #expect(Self.on(&none) { $0.bodyStreamProvided(Self.next, missing: missing, into: &$1) } == "", "finished")

        // None given before the end: the task fails and the connection closes.
        var early = Self.running(plan: .stream)
        _ = Self.on(&early) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&early) { $0.decided(.needBodyStream(Self.next), into: &$1) }
        #expect(
            Self.on(&early) { $0.bodyStreamProvided(nil, missing: missing, into: &$1) } == "fail(invalidRequest,close)"
        )
    }

    @Test("a challenge: reading waits; an answer with credentials follows up without counting as a redirect")
    func challenge() {
        var m = Self.running()
        #expect(Self.on(&m) { $0.finalHead(Self.head(401), .challenge, into: &$1) } == "askChallenge")
        #expect(m.readingSuspended)
        #expect(Self.on(&m) { $0.decided(.followUp(Self.next, countsAsRedirect: false), into: &$1) } == "updateReading")
        #expect(Self.on(&m) { $0.responseEnded(into: &$1) } == "restart")
    }

    @Test("a stale connection: one replay per exchange, on a new connection, before any response byte")
    func staleReplay() {
        let lost = HawserError(.connectionLost, "closed")
        var m = Self.running()
        #expect(Self.on(&m) { $0.connectionFailed(lost, retryable: true, into: &$1) } == "retry")
        #expect(m.lifecycle == .waitingForConnection)
        #expect(m.exchange?.fresh == true && m.exchange?.retried == true)
        #expect(Self.on(&m) { $0.connectionAssigned(now: 0, into: &$1) } == "writeRequest")
        #expect(m.exchange?.fresh == false)
        #expect(
            Self.on(&m) { $0.connectionFailed(lost, retryable: true, into: &$1) }
                == "fail(connectionLost)",
            "once per exchange"
        )

        // The next exchange (a redirect) has a replay of its own.
        var chain = Self.running()
        _ = Self.on(&chain) { $0.connectionFailed(lost, retryable: true, into: &$1) }
        _ = Self.on(&chain) { $0.connectionAssigned(now: 0, into: &$1) }
        _ = Self.on(&chain) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&chain) { $0.decided(.followUp(Self.next, countsAsRedirect: true), into: &$1) }
        _ = Self.on(&chain) { $0.responseEnded(into: &$1) }
        _ = Self.on(&chain) { $0.followUpPrepared(plan: .none, expectsContinue: false, now: 0, into: &$1) }
        #expect(chain.exchange?.retried == false)
        _ = Self.on(&chain) { $0.connectionAssigned(now: 0, into: &$1) }
        #expect(Self.on(&chain) { $0.connectionFailed(lost, retryable: true, into: &$1) } == "retry")

        // Not retryable (the connection machine says so), not replayable (a stream), or the
        // response had begun: the task fails.
        var notRetryable = Self.running()
        #expect(
            Self.on(&notRetryable) { $0.connectionFailed(lost, retryable: false, into: &$1) }
                == "fail(connectionLost)"
        )
        var stream = Self.running(plan: .stream)
        #expect(
            Self.on(&stream) { $0.connectionFailed(lost, retryable: true, into: &$1) }
                == "fail(connectionLost)"
        )
        var begun = Self.running()
        _ = Self.on(&begun) { $0.finalHead(Self.head(200), .deliver, into: &$1) }
        #expect(
            Self.on(&begun) { $0.connectionFailed(lost, retryable: true, into: &$1) }
                == "fail(connectionLost)"
        )
    }

    @Test("cancellation from anywhere completes once: what to undo depends on where the task is")
    func failEverywhere() {
        let cancelled = HawserError(.cancelled, "cancelled")
        var created = Machine()
        #expect(Self.on(&created) { $0.fail(cancelled, into: &$1) } == "fail(cancelled)")
        var queued = Self.queued()
        #expect(Self.on(&queued) { $0.fail(cancelled, into: &$1) } == "fail(cancelled,leaveQueue)")
        var executing = Self.running()
        #expect(Self.on(&executing) { $0.fail(cancelled, into: &$1) } == "fail(cancelled,close)")
        var deciding = Self.running()
        _ = Self.on(&deciding) { $0.finalHead(Self.head(401), .challenge, into: &$1) }
        #expect(Self.on(&deciding) { $0.fail(cancelled, into: &$1) } == "fail(cancelled,close)")
        #expect(Self.on(&deciding) { $0.decided(.deliver, into: &$1) } == "", "a late decision changes nothing")
        var awaiting = Self.running(plan: .stream)
        _ = Self.on(&awaiting) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        _ = Self.on(&awaiting) { $0.decided(.needBodyStream(Self.next), into: &$1) }
        _ = Self.on(&awaiting) { $0.responseEnded(into: &$1) }
        #expect(Self.on(&awaiting) { $0.fail(cancelled, into: &$1) } == "fail(cancelled)")
        var done = Self.running()
        _ = Self.on(&done) { $0.finalHead(Self.head(200), .deliver, into: &$1) }
        _ = Self.on(&done) { $0.responseEnded(into: &$1) }
        #expect(Self.on(&done) { $0.fail(cancelled, into: &$1) } == "")
        #expect(Self.on(&done) { $0.responseEnded(into: &$1) } == "", "late events after the end are dropped")
        #expect(Self.on(&done) { $0.connectionAssigned(now: 0, into: &$1) } == "")
        #expect(Self.on(&done) { $0.fail(cancelled, into: &$1) } == "", "twice is once")
    }

    @Test("reading: the consumer pauses and resumes; a pending decision holds reading too")
    func reading() {
        var m = Self.running()
        #expect(Self.on(&m) { $0.pauseReading(into: &$1) } == "updateReading")
        #expect(Self.on(&m) { $0.pauseReading(into: &$1) } == "")
        #expect(m.readingSuspended)
        _ = Self.on(&m) { $0.finalHead(Self.head(302), .redirect(proposed: Self.next), into: &$1) }
        #expect(Self.on(&m) { $0.resumeReading(into: &$1) } == "updateReading")
        #expect(m.readingSuspended, "the decision still holds it")
        _ = Self.on(&m) { $0.decided(.deliver, into: &$1) }
        #expect(!m.readingSuspended)
        _ = Self.on(&m) { $0.responseEnded(into: &$1) }
        #expect(Self.on(&m) { $0.pauseReading(into: &$1) } == "", "finished")

        var early = Self.queued()
        #expect(
            Self.on(&early) { $0.pauseReading(into: &$1) } == "updateReading",
            "a consumer may pause before the response"
        )
        _ = Self.on(&early) { $0.connectionAssigned(now: 0, into: &$1) }
        #expect(early.readingSuspended, "the pause outlives the state it began in")
    }
}
