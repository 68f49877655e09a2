import Testing

// The task lifecycle machine without sockets: every transition, one scenario per test, as the
// engine's HTTP1ConnectionStateMachine is tested.
@testable import Hawser

/// A stand-in for the engine's RequestTask.
private final class Engine: CustomStringConvertible, @unchecked Sendable {
    let name: String
    init(_ name: String) { self.name = name }
    var description: String { self.name }
}

private struct Failure: Error, CustomStringConvertible {
    let what: String
    init(_ what: String) { self.what = what }
    var description: String { self.what }
}

private typealias Machine = TaskLifecycle<Engine>
private typealias Engine_ = Engine

/// What one input did: `ignored` (resume, suspend and cancel report that nothing changed), else
/// the actions it appended to an empty buffer.
private enum Answer {
    case ignored
    case actions([Machine.Action])
}

/// An answer as text, so a scenario reads as a transcript (the actions carry errors, which are not
/// Equatable): "ignored", "none" (nothing appended), or the actions.
private func show(_ answer: Answer) -> String {
    switch answer {
    case .ignored: return "ignored"
    case .actions(let actions) where actions.isEmpty: return "none"
    case .actions(let actions): return actions.map(show).joined(separator: ", ")
    }
}

private func show(_ action: Machine.Action) -> String {
    switch action {
    case .waitForConnectivity(let a): return "waitForConnectivity(\(a))"
    case .prepare(let a): return "prepare(\(a))"
    case .launch(let a): return "launch(\(a))"
    case .resumeReading(let e): return "resumeReading(\(e))"
    case .pauseReading(let e): return "pauseReading(\(e))"
    case .cancelEngine(let e, let error): return "cancelEngine(\(e), \(error))"
    case .restart(let a): return "restart(\(a))"
    case .askRetrier(let a, let error): return "askRetrier(\(a), \(error.map { "\($0)" } ?? "nil"))"
    case .scheduleRetry(let a, let d): return "scheduleRetry(\(a), \(d))"
    case .complete(let error): return "complete(\(error.map { "\($0)" } ?? "nil"))"
    }
}

// Each input with its actions as an ``Answer`` (the machine appends them to the caller's buffer).
extension TaskLifecycle where Engine == Engine_ {
    fileprivate mutating func answerIfChanged(_ input: (inout Self, inout [Action]) -> Bool) -> Answer {
        var actions: [Action] = []
        guard input(&self, &actions) else { return .ignored }
        return .actions(actions)
    }

    fileprivate mutating func answer(_ input: (inout Self, inout [Action]) -> Void) -> Answer {
        var actions: [Action] = []
        input(&self, &actions)
        return .actions(actions)
    }

    fileprivate mutating func resume(networkDown: Bool, needsPreparation: Bool) -> Answer {
        self.answerIfChanged { $0.resume(networkDown: networkDown, needsPreparation: needsPreparation, into: &$1) }
    }

    fileprivate mutating func suspend() -> Answer {
        self.answerIfChanged { $0.suspend(into: &$1) }
    }

    fileprivate mutating func cancel(_ error: any Error) -> Answer {
        self.answerIfChanged { $0.cancel(error, into: &$1) }
    }

    fileprivate mutating func connectivityReturned(attempt: Int, needsPreparation: Bool) -> Answer {
        self.answer { $0.connectivityReturned(attempt: attempt, needsPreparation: needsPreparation, into: &$1) }
    }

    fileprivate mutating func connectivityTimedOut(attempt: Int, error: any Error) -> Answer {
        self.answer { $0.connectivityTimedOut(attempt: attempt, error: error, into: &$1) }
    }

    fileprivate mutating func prepared(attempt: Int) -> Answer {
        self.answer { $0.prepared(attempt: attempt, into: &$1) }
    }

    fileprivate mutating func preparationFailed(attempt: Int, error: any Error) -> Answer {
        self.answer { $0.preparationFailed(attempt: attempt, error: error, into: &$1) }
    }

    fileprivate mutating func engineStarted(attempt: Int, engine: Engine) -> Answer {
        self.answer { $0.engineStarted(attempt: attempt, engine: engine, into: &$1) }
    }

    fileprivate mutating func engineCompleted(attempt: Int, error: (any Error)?, restart: Bool, retry: Bool) -> Answer {
        self.answer { $0.engineCompleted(attempt: attempt, error: error, restart: restart, retry: retry, into: &$1) }
    }

    fileprivate mutating func restartDue(attempt: Int, networkDown: Bool, needsPreparation: Bool) -> Answer {
        self.answer {
            $0.restartDue(attempt: attempt, networkDown: networkDown, needsPreparation: needsPreparation, into: &$1)
        }
    }

    fileprivate mutating func retryDecided(
        attempt: Int,
        delay: Double?,
        networkDown: Bool,
        needsPreparation: Bool
    ) -> Answer {
        self.answer {
            $0.retryDecided(
                attempt: attempt,
                delay: delay,
                networkDown: networkDown,
                needsPreparation: needsPreparation,
                into: &$1
            )
        }
    }

    fileprivate mutating func retryDelayElapsed(attempt: Int, networkDown: Bool, needsPreparation: Bool) -> Answer {
        self.answer {
            $0.retryDelayElapsed(
                attempt: attempt,
                networkDown: networkDown,
                needsPreparation: needsPreparation,
                into: &$1
            )
        }
    }
}

private let cancelled = Failure("cancelled")
private let lost = Failure("connection lost")
private let timedOut = Failure("timed out")

/// A machine resumed into `running(1)` with engine `e1`.
private func running(_ e1: Engine) -> Machine {
    var m = Machine()
    _ = m.resume(networkDown: false, needsPreparation: false)
    _ = m.engineStarted(attempt: 1, engine: e1)
    return m
}

@Suite struct TaskLifecycleTests {
    // MARK: - Starting

    @Test func aNewTaskIsSuspendedAndIdle() {
        let m = Machine()
        #expect(m.state == .suspended)
        guard case .idle = m.phase else {
            Issue.record("\(m.phase)")
            return
        }
        #expect(m.attempt == 0 && m.retryCount == 0 && m.engine == nil)
    }

    @Test func resumeLaunchesTheFirstAttemptOnceAndAgainDoesNothing() {
        var m = Machine()
        #expect(show(m.resume(networkDown: false, needsPreparation: false)) == "launch(1)")
        #expect(m.state == .running && m.attempt == 1)
        #expect(show(m.resume(networkDown: false, needsPreparation: false)) == "ignored")
        let e1 = Engine("e1")
        #expect(show(m.engineStarted(attempt: 1, engine: e1)) == "none")
        #expect(m.engine === e1)
        #expect(show(m.engineStarted(attempt: 1, engine: Engine("again"))) == "none", "a second handle is ignored")
        #expect(m.engine === e1)
    }

    @Test func withAnAdapterTheAttemptIsPreparedFirst() {
        var m = Machine()
        #expect(show(m.resume(networkDown: false, needsPreparation: true)) == "prepare(1)")
        #expect(m.state == .running)
        #expect(show(m.prepared(attempt: 2)) == "none", "a stale preparation is ignored")
        #expect(show(m.prepared(attempt: 1)) == "launch(1)")
        #expect(show(m.prepared(attempt: 1)) == "none", "prepared only once")
    }

    @Test func aFailedPreparationCompletesTheTask() {
        var m = Machine()
        _ = m.resume(networkDown: false, needsPreparation: true)
        #expect(show(m.preparationFailed(attempt: 1, error: Failure("adapter threw"))) == "complete(adapter threw)")
        #expect(m.state == .completed)
        // Launching can fail too, before the engine returned a handle (the session is invalidated).
        var n = Machine()
        _ = n.resume(networkDown: false, needsPreparation: false)
        #expect(show(n.preparationFailed(attempt: 1, error: Failure("invalidated"))) == "complete(invalidated)")
        #expect(show(n.engineStarted(attempt: 1, engine: Engine("late"))) == "none")
    }

    // MARK: - Waiting for connectivity

    @Test func resumedWhileTheNetworkIsDownItWaitsThenStarts() {
        var m = Machine()
        #expect(show(m.resume(networkDown: true, needsPreparation: false)) == "waitForConnectivity(1)")
        #expect(m.state == .running, "a waiting task is running (URLSession's waitsForConnectivity)")
        #expect(show(m.connectivityReturned(attempt: 2, needsPreparation: false)) == "none", "stale")
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: false)) == "launch(1)")
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: false)) == "none", "once")
        #expect(
            show(m.connectivityTimedOut(attempt: 1, error: timedOut)) == "none",
            "a timeout after the start is ignored"
        )
    }

    @Test func theNetworkReturningRunsTheAdapterWhenThereIsOne() {
        var m = Machine()
        _ = m.resume(networkDown: true, needsPreparation: true)
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: true)) == "prepare(1)")
    }

    @Test func theResourceTimeoutEndsTheWait() {
        var m = Machine()
        _ = m.resume(networkDown: true, needsPreparation: false)
        #expect(show(m.connectivityTimedOut(attempt: 1, error: timedOut)) == "complete(timed out)")
        #expect(m.state == .completed)
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: false)) == "none")
    }

    @Test func suspendedWhileWaitingTheAttemptStartsPaused() {
        var m = Machine()
        _ = m.resume(networkDown: true, needsPreparation: false)
        #expect(show(m.suspend()) == "none")
        #expect(m.state == .suspended)
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: false)) == "launch(1)")
        let e1 = Engine("e1")
        #expect(show(m.engineStarted(attempt: 1, engine: e1)) == "pauseReading(e1)")
        #expect(show(m.resume(networkDown: false, needsPreparation: false)) == "resumeReading(e1)")
    }

    // MARK: - Suspend and resume

    @Test func suspendAndResumeARunningAttempt() {
        let e1 = Engine("e1")
        var m = running(e1)
        #expect(show(m.suspend()) == "pauseReading(e1)")
        #expect(m.state == .suspended)
        #expect(show(m.suspend()) == "ignored")
        #expect(show(m.resume(networkDown: false, needsPreparation: false)) == "resumeReading(e1)")
        #expect(m.state == .running)
        #expect(show(m.resume(networkDown: false, needsPreparation: false)) == "ignored")
    }

    @Test func suspendingANeverResumedTaskChangesNothing() {
        var m = Machine()
        #expect(show(m.suspend()) == "ignored")
    }

    @Test func suspendedBeforeTheEngineAnsweredTheAttemptStartsPaused() {
        var m = Machine()
        _ = m.resume(networkDown: false, needsPreparation: false)
        #expect(show(m.suspend()) == "none")
        #expect(show(m.engineStarted(attempt: 1, engine: Engine("e1"))) == "pauseReading(e1)")
    }

    // MARK: - Cancel, in every phase

    @Test func cancelBeforeResumeCompletesAtOnce() {
        var m = Machine()
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(m.state == .completed)
        #expect(show(m.cancel(cancelled)) == "ignored")
        #expect(
            show(m.resume(networkDown: false, needsPreparation: false)) == "ignored",
            "a completed task does not start"
        )
    }

    @Test func cancelWhileWaitingForTheNetworkCompletesAtOnce() {
        var m = Machine()
        _ = m.resume(networkDown: true, needsPreparation: false)
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(show(m.connectivityReturned(attempt: 1, needsPreparation: false)) == "none")
    }

    @Test func cancelWhilePreparingCompletesAtOnce() {
        var m = Machine()
        _ = m.resume(networkDown: false, needsPreparation: true)
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(show(m.prepared(attempt: 1)) == "none", "the adapter's late answer is ignored")
    }

    @Test func cancelWhileRunningCancelsTheEngineAndItsCompletionEndsTheTask() {
        let e1 = Engine("e1")
        var m = running(e1)
        #expect(show(m.cancel(cancelled)) == "cancelEngine(e1, cancelled)")
        #expect(m.state == .canceling)
        #expect(show(m.cancel(cancelled)) == "ignored")
        #expect(show(m.suspend()) == "ignored", "a cancelling task does not suspend")
        // The engine completes — even successfully, the response having raced the cancel — and
        // the task ends with the cancel's error.
        #expect(show(m.engineCompleted(attempt: 1, error: nil, restart: false, retry: true)) == "complete(cancelled)")
        #expect(m.state == .completed)
    }

    @Test func cancelBeforeTheEngineAnsweredCancelsItWhenItDoes() {
        var m = Machine()
        _ = m.resume(networkDown: false, needsPreparation: false)
        #expect(show(m.cancel(cancelled)) == "none")
        #expect(m.state == .canceling)
        #expect(show(m.engineStarted(attempt: 1, engine: Engine("e1"))) == "cancelEngine(e1, cancelled)")
    }

    @Test func cancelDuringARestartCompletesAtOnceAndTheRestartDoesNothing() {
        let e1 = Engine("e1")
        var m = running(e1)
        #expect(show(m.engineCompleted(attempt: 1, error: nil, restart: true, retry: false)) == "restart(1)")
        #expect(m.state == .running)
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(show(m.restartDue(attempt: 1, networkDown: false, needsPreparation: false)) == "none")
        #expect(m.state == .completed && m.attempt == 1, "no second attempt")
    }

    @Test func cancelWhileTheRetrierDecidesCompletesAtOnce() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(show(m.retryDecided(attempt: 1, delay: 0, networkDown: false, needsPreparation: false)) == "none")
        #expect(m.retryCount == 0)
    }

    @Test func cancelDuringTheRetryDelayCompletesAtOnce() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        #expect(
            show(m.retryDecided(attempt: 1, delay: 2, networkDown: false, needsPreparation: false))
                == "scheduleRetry(1, 2.0)"
        )
        #expect(show(m.cancel(cancelled)) == "complete(cancelled)")
        #expect(show(m.retryDelayElapsed(attempt: 1, networkDown: false, needsPreparation: false)) == "none")
    }

    // MARK: - Completion, restarts and retries

    @Test func engineCompletions() {
        var ok = running(Engine("e1"))
        #expect(show(ok.engineCompleted(attempt: 1, error: nil, restart: false, retry: false)) == "complete(nil)")
        var failed = running(Engine("e1"))
        #expect(
            show(failed.engineCompleted(attempt: 1, error: lost, restart: false, retry: false))
                == "complete(connection lost)"
        )
        var stale = running(Engine("e1"))
        #expect(show(stale.engineCompleted(attempt: 2, error: nil, restart: false, retry: false)) == "none")
        #expect(stale.state == .running)
        var restartIgnoredOnFailure = running(Engine("e1"))
        #expect(
            show(restartIgnoredOnFailure.engineCompleted(attempt: 1, error: lost, restart: true, retry: false))
                == "complete(connection lost)",
            "only a complete response restarts"
        )
    }

    @Test func aRestartSendsTheNextAttempt() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: nil, restart: true, retry: false)
        #expect(show(m.restartDue(attempt: 1, networkDown: false, needsPreparation: false)) == "launch(2)")
        #expect(m.attempt == 2 && m.retryCount == 0, "a restart is not a retry")
        #expect(show(m.engineStarted(attempt: 2, engine: Engine("e2"))) == "none")
        #expect(
            show(m.engineCompleted(attempt: 1, error: lost, restart: false, retry: false)) == "none",
            "the first attempt is over"
        )
        #expect(show(m.engineCompleted(attempt: 2, error: nil, restart: false, retry: false)) == "complete(nil)")
    }

    @Test func aRestartWhileTheNetworkIsDownWaits() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: nil, restart: true, retry: false)
        #expect(show(m.restartDue(attempt: 1, networkDown: true, needsPreparation: false)) == "waitForConnectivity(2)")
    }

    @Test func theRetrierDecides() {
        var no = running(Engine("e1"))
        #expect(
            show(no.engineCompleted(attempt: 1, error: lost, restart: false, retry: true))
                == "askRetrier(1, connection lost)"
        )
        #expect(no.state == .running)
        #expect(
            show(no.retryDecided(attempt: 1, delay: nil, networkDown: false, needsPreparation: false))
                == "complete(connection lost)"
        )

        var now = running(Engine("e1"))
        _ = now.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        #expect(
            show(now.retryDecided(attempt: 2, delay: 0, networkDown: false, needsPreparation: false)) == "none",
            "stale"
        )
        #expect(
            show(now.retryDecided(attempt: 1, delay: 0, networkDown: false, needsPreparation: true)) == "prepare(2)",
            "the adapter runs again for a retry"
        )
        #expect(now.retryCount == 1 && now.attempt == 2)

        var later = running(Engine("e1"))
        _ = later.engineCompleted(attempt: 1, error: nil, restart: false, retry: true)  // a status ≥ 400
        #expect(
            show(later.retryDecided(attempt: 1, delay: 0.5, networkDown: false, needsPreparation: false))
                == "scheduleRetry(1, 0.5)"
        )
        #expect(later.retryCount == 0)
        #expect(show(later.retryDelayElapsed(attempt: 1, networkDown: false, needsPreparation: false)) == "launch(2)")
        #expect(later.retryCount == 1)
        #expect(
            show(later.retryDelayElapsed(attempt: 1, networkDown: false, needsPreparation: false)) == "none",
            "once"
        )
    }

    @Test func aRetryAfterConnectivityReturns() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        #expect(
            show(m.retryDecided(attempt: 1, delay: 0, networkDown: true, needsPreparation: false))
                == "waitForConnectivity(2)"
        )
        #expect(m.state == .running && m.retryCount == 1)
        #expect(show(m.connectivityReturned(attempt: 2, needsPreparation: false)) == "launch(2)")
        #expect(show(m.engineStarted(attempt: 2, engine: Engine("e2"))) == "none")
        #expect(show(m.engineCompleted(attempt: 2, error: nil, restart: false, retry: true)) == "askRetrier(2, nil)")
        #expect(
            show(m.retryDecided(attempt: 2, delay: nil, networkDown: false, needsPreparation: false)) == "complete(nil)"
        )
    }

    @Test func aDelayedRetryWhoseNetworkIsDownWaitsThenTimesOut() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        _ = m.retryDecided(attempt: 1, delay: 1, networkDown: false, needsPreparation: false)
        #expect(
            show(m.retryDelayElapsed(attempt: 1, networkDown: true, needsPreparation: false))
                == "waitForConnectivity(2)"
        )
        #expect(show(m.connectivityTimedOut(attempt: 2, error: timedOut)) == "complete(timed out)")
    }

    @Test func suspendAndResumeBetweenAttemptsOnlyChangeTheIntent() {
        var m = running(Engine("e1"))
        _ = m.engineCompleted(attempt: 1, error: lost, restart: false, retry: true)
        #expect(show(m.suspend()) == "none")
        #expect(m.state == .suspended)
        _ = m.retryDecided(attempt: 1, delay: 0, networkDown: false, needsPreparation: false)
        #expect(
            show(m.engineStarted(attempt: 2, engine: Engine("e2"))) == "pauseReading(e2)",
            "the retry starts paused"
        )
    }

    // MARK: - A data task becoming a download

    @Test func aDataTaskHandsItsAttemptToADownload() {
        let e1 = Engine("e1")
        var data = running(e1)
        data.handOver()
        #expect(data.state == .completed)
        #expect(show(data.cancel(cancelled)) == "ignored")
        var download = Machine.continuing(attempt: 1, engine: e1)
        #expect(download.state == .running && download.engine === e1 && download.attempt == 1)
        #expect(show(download.cancel(cancelled)) == "cancelEngine(e1, cancelled)")
        #expect(
            show(download.engineCompleted(attempt: 1, error: nil, restart: false, retry: false))
                == "complete(cancelled)"
        )
    }
}
