// A task's timers: its one deadline timer (the idle timeout and the total deadline, which the
// machine tells apart), the 100-continue timer, and the holds of its bandwidth limits — one
// `BandwidthLimit` a direction (the request's limit, else the session's), each a token bucket
// and whether it holds the connection. The limit decides when the connection must stop and for
// how long; the task arms the timer and tells the connection. Without a limit the IO path checks
// two optionals and nothing else. Loop-confined.
import HawserPosix

/// One direction's limit of one task: how many bytes may move now, and when it holds the
/// connection, for how long. Pure: the caller gives the loop clock's instant and runs the timer.
struct BandwidthLimit {
    var bucket: TokenBucket
    /// The limit holds the connection until the bucket is full again.
    private(set) var throttled = false
    /// The timer that ends the hold (the task's; cancelled when the task completes).
    var timer: Scheduled?

    /// A limit of `bytesPerSecond` (more than 0), full at `now`.
    init(bytesPerSecond: Int64, now: UInt64) {
        self.bucket = TokenBucket(bytesPerSecond: bytesPerSecond, now: now)
    }

    /// The limit for one direction: the request's own (0 lifts the session's), else the
    /// session's; nil when neither limits it.
    static func chosen(request: Int64?, session: Int64, now: UInt64) -> BandwidthLimit? {
        let rate = request ?? session
        return rate > 0 ? BandwidthLimit(bytesPerSecond: rate, now: now) : nil
    }

    /// The bytes that may move at `now`: 0 while the limit holds the connection.
    mutating func allowance(now: UInt64) -> Int {
        self.throttled ? 0 : self.bucket.available(now: now)
    }

    /// `n` bytes moved at `now`. Returns the nanoseconds the connection must now wait (the bucket
    /// just ran empty: the limit holds it from here), or nil when it may go on.
    mutating func spend(_ n: Int, now: UInt64) -> UInt64? {
        self.bucket.spend(n, now: now)
        return self.holdIfEmpty()
    }

    /// Holds the connection when the bucket is empty: the nanoseconds until it is full again,
    /// or nil when it is not empty or already held.
    mutating func holdIfEmpty() -> UInt64? {
        guard self.bucket.isEmpty, !self.throttled else { return nil }
        self.throttled = true
        return self.bucket.nanosecondsUntilFull()
    }

    /// The bucket is full again: the hold ends.
    mutating func release() {
        self.throttled = false
        self.timer = nil
    }
}

extension RequestTask {
    // MARK: - The task's timer

    /// One timer per task for both limits, re-armed lazily: activity only updates
    /// `lastActivity`, and when the timer fires early the machine says which limit is now
    /// nearest. A busy download costs no timer work per read, and a task costs one heap entry,
    /// not two.
    func armTimer(at due: UInt64, now: UInt64) {
        self.timer = self.eventLoop.scheduleInLoop(in: due > now ? due - now : 0) { [unowned(unsafe) self] in
            self.timerFired()
        }
    }

    private func timerFired() {
        self.timer = nil
        // Held by its own bandwidth limit, the task is not idle: the peer is not to blame.
        self.machine.timerFired(
            now: self.eventLoop.now,
            throttled: self.throttled,
            into: &self.pool.requestQueue.scratch
        )
        self.runActions()
    }

    // MARK: - 100 Continue

    /// The body waits for 100 Continue: after the session's expect-continue timeout it goes anyway.
    func armContinueTimer() {
        self.continueTimer = self.eventLoop.scheduleInLoop(in: self.context.expectContinueNanos) {
            [unowned(unsafe) self] in
            self.continueTimer = nil
            self.machine.continueTimerFired(now: self.eventLoop.now, into: &self.pool.requestQueue.scratch)
            self.runActions()
        }
    }

    func cancelContinueTimer() {
        self.continueTimer?.cancel()
        self.continueTimer = nil
    }

    // MARK: - Bandwidth limits

    /// The request's limits, else the session's (0: none); the buckets last the whole task.
    func setUpBandwidthLimits(now: UInt64) {
        self.receiveLimit = BandwidthLimit.chosen(
            request: self.request.maximumReceiveBytesPerSecond,
            session: self.context.maximumReceiveBytesPerSecond,
            now: now
        )
        self.sendLimit = BandwidthLimit.chosen(
            request: self.request.maximumSendBytesPerSecond,
            session: self.context.maximumSendBytesPerSecond,
            now: now
        )
    }

    /// Whether either limit holds the connection (then the task is not idle: the peer is not
    /// to blame).
    var throttled: Bool { self.receiveLimit?.throttled == true || self.sendLimit?.throttled == true }

    /// How many bytes the connection may read for this task now (its read size is capped to it);
    /// `Int.max` without a receive limit.
    func receiveAllowance() -> Int {
        guard self.receiveLimit != nil else { return .max }
        return self.receiveLimit!.bucket.available(now: self.eventLoop.now)
    }

    /// `n` bytes were read under the receive limit: once the bucket is empty, reading stops (the
    /// connection drops its read interest) until the timer finds it full again.
    func spendReceiveBudget(_ n: Int) {
        guard let wait = self.receiveLimit!.spend(n, now: self.eventLoop.now) else { return }
        self.connection?.updateReadInterest()
        self.receiveLimit!.timer = self.eventLoop.scheduleInLoop(in: wait) { [unowned(unsafe) self] in
            self.receiveLimit!.release()
            if self.isFinished { return }
            self.connection?.resumeAfterPause()
        }
    }

    /// How many bytes the connection may write for this task now; `Int.max` without a send
    /// limit. At 0 the task holds the connection's writing and arms the timer that resumes it.
    func sendAllowance() -> Int {
        guard self.sendLimit != nil else { return .max }
        let allowed = self.sendLimit!.allowance(now: self.eventLoop.now)
        if allowed > 0 || self.sendLimit!.throttled { return allowed }
        guard let wait = self.sendLimit!.holdIfEmpty() else { return 0 }
        self.sendLimit!.timer = self.eventLoop.scheduleInLoop(in: wait) { [unowned(unsafe) self] in
            self.sendLimit!.release()
            if self.isFinished { return }
            self.connection?.resumeWriting()
        }
        return 0
    }

    /// `n` bytes were written: the send limit's bucket pays for them.
    func spendSendBudget(_ n: Int) {
        self.sendLimit!.bucket.spend(n, now: self.eventLoop.now)
    }

    func cancelBandwidthTimers() {
        self.receiveLimit?.timer?.cancel()
        self.receiveLimit?.timer = nil
        self.sendLimit?.timer?.cancel()
        self.sendLimit?.timer = nil
    }
}
