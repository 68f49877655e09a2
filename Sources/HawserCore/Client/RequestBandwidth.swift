// A task's bandwidth limits: token buckets for receiving and sending (the request's limits,
// else the session's), and the timers that resume the connection when a bucket is full again.
// Without a limit the IO path checks two optionals and nothing else. Loop-confined.
import HawserPosix

extension RequestTask {
    // MARK: - Bandwidth limits

    /// The request's limits, else the session's (0: none); the buckets last the whole task.
    func setUpBandwidthLimits(now: UInt64) {
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
    func spendReceiveBudget(_ n: Int) {
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

    func cancelBandwidthTimers() {
        self.receiveTimer?.cancel()
        self.receiveTimer = nil
        self.sendTimer?.cancel()
        self.sendTimer = nil
    }
}
