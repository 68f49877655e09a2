// The lifecycle of a SessionTask as a value: suspended / running / cancelling / completed, the
// attempts behind it (restarts, retries), and the wait for connectivity. Inputs come in as
// mutating methods; each appends what the task must do next to the caller's buffer (`into
// actions: inout [Action]`, the shape of every machine; an input that needs nothing appends
// nothing). No sockets, clocks, locks or callbacks: the task (`SessionTask`) feeds it under its
// lock and performs the actions outside, from a buffer reused from input to input.
//
// Phases and their transitions (docs/AFNETWORKING.md, "Tasks"):
//
//   idle ──resume──▶ waitingForConnectivity(n) ──connectivityReturned──▶ preparing(n) ──prepared──▶ running(n)
//     │                      │ connectivityTimedOut                  │ (adapter)                │
//     │ resume               ▼                                       ▼ preparationFailed         │ engineCompleted
//     └─────────────────▶ preparing(1) / running(1)               completed ◀────────────────────┤
//                                                                                               │
//   running(n) ──engineCompleted(restart)──▶ restarting(n) ──restartDue──▶ preparing(n+1) / waiting(n+1)
//   running(n) ──engineCompleted(retry)────▶ retryPending(n) ──retryDecided(delay)──▶ retryDelay(n) ──retryDelayElapsed──▶ preparing(n+1) / waiting(n+1)
//                                                           ──retryDecided(now)────▶ preparing(n+1) / waiting(n+1)
//                                                           ──retryDecided(nil)────▶ completed
//
// `cancel` in any phase but `running` completes at once; in `running` it cancels the engine's
// attempt, whose completion then completes the task with the cancel's error. `suspend` and
// `resume` only change the user's intent (and pause or resume reading while an attempt runs).

/// The state machine behind one ``SessionTask``. `Engine` is the handle of a running attempt (the
/// engine's `RequestTask`; tests use their own type).
struct TaskLifecycle<Engine> {
    enum Phase {
        /// Created; never resumed.
        case idle
        /// Resumed while the network was down (`waitsForConnectivity`); attempt `attempt` waits.
        case waitingForConnectivity(attempt: Int)
        /// The interceptor's adapter is preparing attempt `attempt`.
        case preparing(attempt: Int)
        /// Attempt `attempt` was handed to the engine; `engine` once `execute` returned its handle.
        case running(attempt: Int, engine: Engine?)
        /// The engine asked for attempt `attempt` to be sent again from the start (a download's
        /// Range was refused); the restart runs on the next turn of the event loop.
        case restarting(attempt: Int)
        /// Attempt `attempt` failed and the retrier is deciding; `error` is the attempt's.
        case retryPending(attempt: Int, error: (any Error)?)
        /// The retrier asked for another attempt after a delay; `error` is the failed attempt's.
        case retryDelay(attempt: Int, error: (any Error)?)
        /// Done. Final.
        case completed
    }

    /// What the task does after an input (at most one per input).
    enum Action {
        /// Wait for the network to become reachable before attempt `attempt` (observe the
        /// reachability manager, arm the resource timeout).
        case waitForConnectivity(attempt: Int)
        /// Run the interceptor's adapter for attempt `attempt`, then feed ``prepared(attempt:)``.
        case prepare(attempt: Int)
        /// Hand attempt `attempt` to the engine, then feed ``engineStarted(attempt:engine:)``.
        case launch(attempt: Int)
        /// Resume reading the running attempt's response.
        case resumeReading(Engine)
        /// Stop reading the running attempt's response (back-pressure).
        case pauseReading(Engine)
        /// Cancel the running attempt with `error`; its completion completes the task.
        case cancelEngine(Engine, any Error)
        /// Schedule ``restartDue(attempt:networkDown:)`` on the event loop (not from inside the
        /// engine's completion callback).
        case restart(attempt: Int)
        /// Ask the retrier about attempt `attempt` (its error: `error`), then feed ``retryDecided(attempt:delay:networkDown:)``.
        case askRetrier(attempt: Int, error: (any Error)?)
        /// Schedule ``retryDelayElapsed(attempt:networkDown:)`` after `delay` seconds.
        case scheduleRetry(attempt: Int, delay: Double)
        /// The task is complete, with `error` (nil: success). Cancel any timer or observation.
        case complete(error: (any Error)?)
    }

    private(set) var phase: Phase = .idle
    /// The user's intent: tasks start suspended, `resume()` clears it, `suspend()` sets it.
    private(set) var isSuspended = true
    /// Set by the first `cancel`: the error the task completes with.
    private(set) var cancelError: (any Error)?
    /// The number of the last attempt started (0 before the first).
    private(set) var attempt = 0
    /// How many times a retrier sent the task again.
    private(set) var retryCount = 0

    /// NSURLSessionTaskState, as the task's `state` reports it.
    var state: SessionTaskState {
        if case .completed = self.phase { return .completed }
        if self.cancelError != nil { return .canceling }
        return self.isSuspended ? .suspended : .running
    }

    var isCompleted: Bool {
        if case .completed = self.phase { return true }
        return false
    }

    /// The engine handle of the running attempt, if any.
    var engine: Engine? {
        if case .running(_, let e) = self.phase { return e }
        return nil
    }

    // MARK: - User inputs

    /// `resume()`. Returns false when nothing changed (already running, cancelling or completed);
    /// otherwise the task was suspended and is now running, and the action says what to start.
    /// - Parameters:
    ///   - networkDown: the task must wait for connectivity before an attempt (`waitsForConnectivity`
    ///     and the reachability manager reports the network not reachable).
    ///   - needsPreparation: an adapter must run before each attempt.
    @discardableResult
    mutating func resume(networkDown: Bool, needsPreparation: Bool, into actions: inout [Action]) -> Bool {
        guard self.isSuspended, self.cancelError == nil, !self.isCompleted else { return false }
        self.isSuspended = false
        switch self.phase {
        case .idle:
            self.nextAttempt(networkDown: networkDown, needsPreparation: needsPreparation, into: &actions)
        case .running(_, let engine?):
            actions.append(.resumeReading(engine))
        case .running(_, nil), .waitingForConnectivity, .preparing, .restarting, .retryPending, .retryDelay:
            // Nothing runs that reads: the next attempt starts unpaused.
            break
        case .completed:
            return false
        }
        return true
    }

    /// `suspend()`. Returns false when nothing changed (already suspended, cancelling or completed).
    @discardableResult
    mutating func suspend(into actions: inout [Action]) -> Bool {
        guard !self.isSuspended, self.cancelError == nil, !self.isCompleted else { return false }
        self.isSuspended = true
        // An attempt that starts later starts paused (see `engineStarted`).
        if case .running(_, let engine?) = self.phase { actions.append(.pauseReading(engine)) }
        return true
    }

    /// `cancel()`. Returns false when the task was already cancelling or completed. Between
    /// attempts the task completes at once; a running attempt is cancelled and its completion
    /// completes the task with `error`.
    @discardableResult
    mutating func cancel(_ error: any Error, into actions: inout [Action]) -> Bool {
        guard self.cancelError == nil, !self.isCompleted else { return false }
        self.cancelError = error
        switch self.phase {
        case .running(_, let engine?):
            actions.append(.cancelEngine(engine, error))
        case .running(_, nil):
            // `execute` has not returned the handle yet: `engineStarted` cancels it.
            break
        case .idle, .waitingForConnectivity, .preparing, .restarting, .retryPending, .retryDelay:
            self.phase = .completed
            actions.append(.complete(error: error))
        case .completed:
            return false
        }
        return true
    }

    // MARK: - Connectivity

    /// The network became reachable while attempt `attempt` waited.
    mutating func connectivityReturned(attempt: Int, needsPreparation: Bool, into actions: inout [Action]) {
        guard case .waitingForConnectivity(let a) = self.phase, a == attempt else { return }
        self.start(attempt, needsPreparation: needsPreparation, into: &actions)
    }

    /// The resource timeout passed while attempt `attempt` waited for the network.
    mutating func connectivityTimedOut(attempt: Int, error: any Error, into actions: inout [Action]) {
        guard case .waitingForConnectivity(let a) = self.phase, a == attempt else { return }
        self.phase = .completed
        actions.append(.complete(error: error))
    }

    // MARK: - Attempts

    /// The adapter produced attempt `attempt`'s request.
    mutating func prepared(attempt: Int, into actions: inout [Action]) {
        guard case .preparing(let a) = self.phase, a == attempt else { return }
        self.phase = .running(attempt: attempt, engine: nil)
        actions.append(.launch(attempt: attempt))
    }

    /// Preparing attempt `attempt` failed (the adapter threw, the manager's session is gone, the
    /// request is unusable): the task completes with `error`.
    mutating func preparationFailed(attempt: Int, error: any Error, into actions: inout [Action]) {
        switch self.phase {
        case .preparing(let a) where a == attempt, .running(let a, nil) where a == attempt:
            self.phase = .completed
            actions.append(.complete(error: error))
        default:
            return
        }
    }

    /// The engine accepted attempt `attempt` and gave its handle.
    mutating func engineStarted(attempt: Int, engine: Engine, into actions: inout [Action]) {
        guard case .running(let a, nil) = self.phase, a == attempt else { return }
        self.phase = .running(attempt: attempt, engine: engine)
        if let error = self.cancelError {
            actions.append(.cancelEngine(engine, error))
        } else if self.isSuspended {
            actions.append(.pauseReading(engine))
        }
    }

    /// The engine completed attempt `attempt`.
    /// - Parameters:
    ///   - error: the attempt's error (nil: a response arrived completely).
    ///   - restart: the attempt must be sent again from the start (a download's Range refused).
    ///   - retry: the retrier should be asked (there is one, the attempt failed or got a status
    ///     ≥ 400, and the request can be sent again).
    mutating func engineCompleted(
        attempt: Int,
        error: (any Error)?,
        restart: Bool,
        retry: Bool,
        into actions: inout [Action]
    ) {
        guard case .running(let a, _) = self.phase, a == attempt else { return }
        if let cancelled = self.cancelError {
            // Cancelled before the engine heard of it: the task ends cancelled even if the
            // response was complete.
            self.phase = .completed
            actions.append(.complete(error: cancelled))
            return
        }
        if error == nil && restart {
            self.phase = .restarting(attempt: attempt)
            actions.append(.restart(attempt: attempt))
            return
        }
        if retry {
            self.phase = .retryPending(attempt: attempt, error: error)
            actions.append(.askRetrier(attempt: attempt, error: error))
            return
        }
        self.phase = .completed
        actions.append(.complete(error: error))
    }

    /// The restart of attempt `attempt` is due (on the event loop).
    mutating func restartDue(attempt: Int, networkDown: Bool, needsPreparation: Bool, into actions: inout [Action]) {
        guard case .restarting(let a) = self.phase, a == attempt else { return }
        self.nextAttempt(networkDown: networkDown, needsPreparation: needsPreparation, into: &actions)
    }

    /// The retrier decided about attempt `attempt`: nil = do not retry (the attempt's error ends
    /// the task), 0 = now, > 0 = after that many seconds.
    mutating func retryDecided(
        attempt: Int,
        delay: Double?,
        networkDown: Bool,
        needsPreparation: Bool,
        into actions: inout [Action]
    ) {
        guard case .retryPending(let a, let error) = self.phase, a == attempt else { return }
        guard let delay else {
            self.phase = .completed
            actions.append(.complete(error: error))
            return
        }
        if delay > 0 {
            self.phase = .retryDelay(attempt: attempt, error: error)
            actions.append(.scheduleRetry(attempt: attempt, delay: delay))
            return
        }
        self.retryCount += 1
        self.nextAttempt(networkDown: networkDown, needsPreparation: needsPreparation, into: &actions)
    }

    /// The retry delay after attempt `attempt` has passed.
    mutating func retryDelayElapsed(
        attempt: Int,
        networkDown: Bool,
        needsPreparation: Bool,
        into actions: inout [Action]
    ) {
        guard case .retryDelay(let a, _) = self.phase, a == attempt else { return }
        self.retryCount += 1
        self.nextAttempt(networkDown: networkDown, needsPreparation: needsPreparation, into: &actions)
    }

    // MARK: - A data task becoming a download

    /// The lifecycle of the download task a data task became (``ResponseDisposition/becomeDownload``):
    /// running attempt `attempt` on `engine`, resumed.
    static func continuing(attempt: Int, engine: Engine) -> TaskLifecycle {
        var l = TaskLifecycle()
        l.phase = .running(attempt: attempt, engine: engine)
        l.isSuspended = false
        l.attempt = attempt
        return l
    }

    /// The data task handed its attempt to a download task: it is done, without a completion of
    /// its own (its handler is called for the download).
    mutating func handOver() {
        self.phase = .completed
    }

    // MARK: - Helpers

    private mutating func nextAttempt(networkDown: Bool, needsPreparation: Bool, into actions: inout [Action]) {
        self.attempt += 1
        if networkDown {
            self.phase = .waitingForConnectivity(attempt: self.attempt)
            actions.append(.waitForConnectivity(attempt: self.attempt))
            return
        }
        self.start(self.attempt, needsPreparation: needsPreparation, into: &actions)
    }

    private mutating func start(_ attempt: Int, needsPreparation: Bool, into actions: inout [Action]) {
        if needsPreparation {
            self.phase = .preparing(attempt: attempt)
            actions.append(.prepare(attempt: attempt))
            return
        }
        self.phase = .running(attempt: attempt, engine: nil)
        actions.append(.launch(attempt: attempt))
    }
}

extension TaskLifecycle: Sendable where Engine: Sendable {}
extension TaskLifecycle.Phase: Sendable where Engine: Sendable {}
extension TaskLifecycle.Action: Sendable where Engine: Sendable {}
