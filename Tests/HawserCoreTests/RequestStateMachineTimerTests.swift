// The request state machine's timers and its cache-serving state, without sockets or clocks:
// each timer event carries the instant it fired at, and the machine decides from the instants
// which limit passed (the idle timeout or the total deadline). docs/STATE-MACHINES.md's "The
// task's timer" and "Serving from the cache" tables.
import Foundation
import HawserHTTP1
import Testing

@testable import HawserCore

@Suite("Request state machine: timers and serving from the cache (pure)")
struct RequestStateMachineTimerTests {
    typealias Machine = RequestStateMachine
    typealias T = RequestStateMachineTests

    /// A machine started at 100 with an idle timeout of 5 and a total of 12 (deadline 112).
    static func started() -> Machine {
        Machine(start: 100, timeouts: Machine.Timeouts(start: 100, idle: 5, total: 12))
    }

    static func running() -> Machine {
        var m = Self.started()
        _ = T.on(&m) { $0.submit(plan: .none, expectsContinue: false, into: &$1) }
        _ = T.on(&m) { $0.connectionAssigned(now: 100, into: &$1) }
        return m
    }

    static func fire(_ m: inout Machine, at now: UInt64, throttled: Bool = false) -> String {
        T.on(&m) { $0.timerFired(now: now, throttled: throttled, into: &$1) }
    }

    @Test("Timeouts: due at the earlier limit, without overflow")
    func timeoutsDue() {
        let t = Machine.Timeouts(start: 100, idle: 5, total: 12)
        #expect(t.deadline == 112)
        #expect(t.due(lastActivity: 100) == 105, "idle first")
        #expect(t.due(lastActivity: 110) == 112, "then the deadline")
        #expect(Machine.Timeouts(start: .max - 1, idle: .max, total: .max).deadline == .max, "no overflow")
        #expect(Machine.Timeouts(start: 0, idle: .max, total: 10).due(lastActivity: 5) == 10)
    }

    @Test("Timeouts: the request's limits (seconds) win over the session's; each falls back on its own")
    func timeoutsFromRequest() {
        var request = HTTPClientRequest(url: URL(string: "http://a.test/")!)
        let session = Machine.Timeouts(start: 10, request: request, idle: 60_000, total: 90_000)
        #expect(session.idle == 60_000 && session.total == 90_000 && session.deadline == 90_010)
        request.timeoutInterval = 2.5
        let idleOnly = Machine.Timeouts(start: 10, request: request, idle: 60_000, total: 90_000)
        #expect(idleOnly.idle == 2_500_000_000 && idleOnly.total == 90_000)
        request.timeoutIntervalForResource = 0.000_001
        let both = Machine.Timeouts(start: 10, request: request, idle: 60_000, total: 90_000)
        #expect(both.idle == 2_500_000_000 && both.total == 1_000 && both.deadline == 1_010)
    }

    @Test("bytes that keep moving re-arm the timer, but the total deadline fails the task")
    func totalDeadline() {
        // A byte every 4: the idle timeout (5) never passes; the timer re-arms each time.
        var m = Self.running()
        _ = T.on(&m) { $0.finalHead(T.head(200), .deliver, into: &$1) }
        m.activity(at: 104)
        #expect(Self.fire(&m, at: 105) == "armTimer(109)")
        m.activity(at: 108)
        #expect(Self.fire(&m, at: 109) == "armTimer(112)", "the deadline is nearer")
        m.activity(at: 111)
        #expect(Self.fire(&m, at: 112) == "fail(resourceTimeout,close)")
        #expect(m.lifecycle == .finished)
        #expect(Self.fire(&m, at: 200) == "", "finished: nothing")
    }

    @Test("the deadline fails the task wherever it is, undoing what that place needs")
    func deadlineEverywhere() {
        var created = Self.started()
        #expect(Self.fire(&created, at: 112) == "fail(resourceTimeout)")
        var queued = Self.started()
        _ = T.on(&queued) { $0.submit(plan: .none, expectsContinue: false, into: &$1) }
        #expect(Self.fire(&queued, at: 112) == "fail(resourceTimeout,leaveQueue)")
        var awaiting = Self.running()
        _ = T.on(&awaiting) { $0.finalHead(T.head(302), .redirect(proposed: T.next), into: &$1) }
        _ = T.on(&awaiting) { $0.decided(.needBodyStream(T.next), into: &$1) }
        _ = T.on(&awaiting) { $0.responseEnded(into: &$1) }
        #expect(Self.fire(&awaiting, at: 112) == "fail(resourceTimeout)")
        // The deadline wins even when the idle timeout passed at the same instant.
        var both = Self.running()
        #expect(Self.fire(&both, at: 112) == "fail(resourceTimeout,close)")
    }

    @Test(
        "the machine names the limit that passed: the deadline's message counts from the start, the idle one names the gap"
    )
    func messages() {
        var deadline = Self.running()
        var actions: [Machine.Action] = []
        deadline.timerFired(now: 112, throttled: false, into: &actions)
        guard case .fail(let e, _, _)? = actions.first else {
            Issue.record("no failure")
            return
        }
        #expect(e.code == .resourceTimeout)
        #expect(e.message.contains("timeoutIntervalForResource"))

        var idle = Self.running()
        actions.removeAll()
        idle.timerFired(now: 105, throttled: false, into: &actions)
        guard case .fail(let i, _, _)? = actions.first else {
            Issue.record("no failure")
            return
        }
        #expect(i.code == .idleTimeout)
        #expect(i.message.contains("timeoutIntervalForRequest"))
        #expect(Machine.seconds(500_000_000) == "0.5" && Machine.seconds(60_000_000_000) == "60")
    }

    @Test("no byte for the idle timeout fails with idleTimeout; an early timer is armed again")
    func idle() {
        var m = Self.running()
        #expect(Self.fire(&m, at: 104) == "armTimer(105)", "early: armed again")
        #expect(Self.fire(&m, at: 105) == "fail(idleTimeout,close)")
    }

    @Test(
        "suspended reading (a pause, a decision) and the task's own bandwidth limit stop the idle clock, not the deadline"
    )
    func idleClockStops() {
        var paused = Self.running()
        _ = T.on(&paused) { $0.pauseReading(into: &$1) }
        #expect(Self.fire(&paused, at: 105) == "armTimer(110)")
        #expect(paused.lastActivity == 105, "the idle clock restarts while reading is suspended")
        #expect(Self.fire(&paused, at: 110) == "armTimer(112)")
        #expect(Self.fire(&paused, at: 112) == "fail(resourceTimeout,close)")

        var deciding = Self.running()
        _ = T.on(&deciding) { $0.finalHead(T.head(401), .challenge, into: &$1) }
        #expect(Self.fire(&deciding, at: 107) == "armTimer(112)")
        #expect(Self.fire(&deciding, at: 112) == "fail(resourceTimeout,close)")

        var throttled = Self.running()
        #expect(Self.fire(&throttled, at: 106, throttled: true) == "armTimer(111)", "held by its own limit: not idle")
        #expect(Self.fire(&throttled, at: 111) == "fail(idleTimeout,close)", "unthrottled, the idle clock runs again")
    }

    // MARK: - Serving from the cache

    @Test("a stored body is served a chunk at a time; the last chunk finishes the task once")
    func servingFromCache() {
        var m = Self.started()
        m.servedFromCache()
        var actions: [Machine.Action] = []
        let first = m.cachedChunkDue(into: &actions)
        #expect(first && actions.isEmpty)
        #expect(T.on(&m) { $0.cachedBodyDelivered(into: &$1) } == "finishCachedResponse")
        #expect(m.lifecycle == .finished)
        let afterEnd = m.cachedChunkDue(into: &actions)
        #expect(!afterEnd, "the real end stops the serving path")
        #expect(T.on(&m) { $0.cachedBodyDelivered(into: &$1) } == "", "once")
        #expect(Self.fire(&m, at: 500) == "")
    }

    @Test("a cancel while a stored body is served ends it at the next chunk with that error, once")
    func servingInterrupted() {
        let cancelled = HawserError(.cancelled, "cancelled")
        var m = Self.started()
        m.servedFromCache()
        #expect(T.on(&m) { $0.fail(cancelled, into: &$1) } == "", "the chunk in flight finishes first")
        #expect(T.on(&m) { $0.fail(HawserError(.idleTimeout, "later"), into: &$1) } == "", "the first error wins")
        #expect(Self.fire(&m, at: 200) == "", "no timeout while a stored body is served")
        var actions: [Machine.Action] = []
        let due = m.cachedChunkDue(into: &actions)
        #expect(!due)
        #expect(actions.map(T.word) == ["fail(cancelled)"])
        #expect(m.lifecycle == .finished)

        // An interruption during the last chunk: the end reports the error, not success.
        var last = Self.started()
        last.servedFromCache()
        _ = T.on(&last) { $0.fail(cancelled, into: &$1) }
        #expect(T.on(&last) { $0.cachedBodyDelivered(into: &$1) } == "fail(cancelled)")
    }

    @Test("a 304 that revalidated: the network body is not delivered, and its end serves the stored body")
    func revalidated() {
        var m = Self.running()
        _ = T.on(&m) { $0.finalHead(T.head(200), .deliver, into: &$1) }
        m.revalidated()
        #expect(m.isRevalidated && !m.deliversBody)
        #expect(T.on(&m) { $0.responseEnded(into: &$1) } == "serveRevalidatedBody")
        #expect(m.lifecycle == .servingFromCache)
        #expect(T.on(&m) { $0.cachedBodyDelivered(into: &$1) } == "finishCachedResponse")
    }

    // MARK: - Answering from the responder

    @Test("the responder answers: no request goes out; its delivered answer succeeds once")
    func responderAnswered() {
        var m = Machine(start: 100, timeouts: Machine.Timeouts(start: 100, idle: 5, total: 12))
        m.answeredByResponder()
        #expect(m.lifecycle == .answeringFromResponder)
        #expect(m.answersFromResponder && m.isFinished, "no network work")
        #expect(!m.readingSuspended && !m.deliversBody)
        #expect(T.on(&m) { $0.pauseReading(into: &$1) } == "", "nothing to pause")
        #expect(Self.fire(&m, at: 200) == "", "its delay is not a timeout (the shell bounds it)")
        #expect(T.on(&m) { $0.responderDelivered(into: &$1) } == "succeed")
        #expect(m.lifecycle == .finished && !m.answersFromResponder)
        #expect(T.on(&m) { $0.responderDelivered(into: &$1) } == "", "once")
        #expect(T.on(&m) { $0.fail(HawserError(.cancelled, "late"), into: &$1) } == "", "after the end")
    }

    @Test("a cancel, a failure answer or the delegate's fail(with:) ends the responder's answer at once, once")
    func responderInterrupted() {
        var m = Machine()
        m.answeredByResponder()
        #expect(T.on(&m) { $0.fail(HawserError(.cancelled, "c"), into: &$1) } == "fail(cancelled)", "now, not later")
        #expect(m.lifecycle == .finished && !m.answersFromResponder, "a pending delivery finds it over")
        #expect(T.on(&m) { $0.responderDelivered(into: &$1) } == "", "the last piece's end is dropped")
        #expect(T.on(&m) { $0.fail(HawserError(.idleTimeout, "later"), into: &$1) } == "", "the first error wins")

        var failed = Machine()
        failed.answeredByResponder()
        #expect(T.on(&failed) { $0.fail(HawserError(.cannotConnect, "refused"), into: &$1) } == "fail(cannotConnect)")
    }
}
