// wrk2's open-loop schedule, as a pure type driven by whatever clock the caller reads (the
// loop's time in a run, a ManualClock or plain numbers in tests).

/// The send times of one connection's requests at a constant rate: request `k` is due at
/// `start + phase + k × 1e9 / rate` nanoseconds, computed from `k` each time (never by adding
/// intervals up, so the schedule does not drift). A connection keeps one request in flight: when
/// it is free it asks ``next(now:)``, and a request whose time has passed is sent at once and
/// its latency counted from the time it was due (coordinated-omission correction). After a stall
/// the requests that fell due meanwhile go out back to back until the connection is on time again.
struct OpenLoopSchedule: Sendable, Equatable {
    /// What a free connection does now.
    enum Step: Equatable {
        /// Send the next request now; its latency counts from `intended`.
        case send(intended: UInt64)
        /// Nothing is due before `until` (a time on the same clock).
        case wait(until: UInt64)
    }

    /// The time of request 0 (the run's start plus this connection's phase).
    let origin: UInt64
    /// Nanoseconds between two requests of this connection.
    let interval: Double
    /// Requests handed out so far.
    private(set) var issued: UInt64 = 0

    /// A schedule of `ratePerSecond` requests per second from `start`, the first one `phase`
    /// nanoseconds later (connections of one run get phases spread over one interval, so that
    /// their requests do not go out in bursts).
    init(start: UInt64, ratePerSecond: Double, phase: UInt64 = 0) {
        precondition(ratePerSecond > 0 && ratePerSecond.isFinite)
        self.origin = start &+ phase
        self.interval = 1e9 / ratePerSecond
    }

    /// The phase of connection `index` of `count`, each running at `ratePerSecond`: spread evenly
    /// over one interval.
    static func phase(index: Int, of count: Int, ratePerSecond: Double) -> UInt64 {
        UInt64((1e9 / ratePerSecond) * Double(index) / Double(max(1, count)))
    }

    /// When request `k` is due.
    func intendedTime(of k: UInt64) -> UInt64 {
        self.origin &+ UInt64((Double(k) * self.interval).rounded(.down))
    }

    /// The time the next request is due.
    var nextIntended: UInt64 { self.intendedTime(of: self.issued) }

    /// What a connection that is free at `now` does: send the next request (handed out; its
    /// intended time is its due time, in the past or now) or wait until it is due.
    mutating func next(now: UInt64) -> Step {
        let due = self.nextIntended
        guard due <= now else { return .wait(until: due) }
        self.issued += 1
        return .send(intended: due)
    }
}
