// A bandwidth limit as a token bucket on the event loop's clock (a pure value: no timer, no
// socket). A limited task reads or writes at most `available(now:)` bytes, spends what moved, and
// when the bucket is empty stops reading or writing and arms one loop timer for
// `nanosecondsUntilFull()`: the loop sleeps until then, nothing polls or sleeps a thread.

/// Tokens are bytes; the bucket holds at most `capacity` of them and fills at `rate` a second.
/// The credit is kept in byte-nanoseconds (bytes × 10⁹), so that refilling is exact integer
/// arithmetic: no rounding drift, and a test in virtual time can assert the byte.
struct TokenBucket: Sendable, Hashable {
    /// Bytes per second.
    let rate: UInt64
    /// The most bytes that may move at once (the burst): an eighth of a second's worth, at least
    /// one byte and at most 4 MiB. An empty bucket waits until it is full again, so a transfer
    /// held at its limit wakes about eight times a second.
    let capacity: UInt64
    /// Byte-nanoseconds of credit, at most `capacity × 10⁹`.
    private var credit: UInt64
    /// The loop-clock instant `credit` was last brought up to date.
    private var refilledAt: UInt64

    private static let nanosPerSecond: UInt64 = 1_000_000_000
    private static let maximumCapacity: UInt64 = 4 * 1024 * 1024

    /// The burst a limit of `rate` bytes a second allows.
    static func capacity(forRate rate: UInt64) -> UInt64 {
        max(1, min(rate / 8, Self.maximumCapacity))
    }

    /// A full bucket for `bytesPerSecond` (more than 0) at the loop-clock instant `now`.
    init(bytesPerSecond: Int64, now: UInt64) {
        precondition(bytesPerSecond > 0, "a bandwidth limit is more than 0 bytes a second")
        self.rate = UInt64(bytesPerSecond)
        self.capacity = Self.capacity(forRate: self.rate)
        self.credit = self.capacity * Self.nanosPerSecond
        self.refilledAt = now
    }

    private var fullCredit: UInt64 { self.capacity * Self.nanosPerSecond }

    /// Brings the credit up to `now` (an earlier `now` changes nothing).
    private mutating func refill(now: UInt64) {
        guard now > self.refilledAt else { return }
        let elapsed = now - self.refilledAt
        self.refilledAt = now
        // elapsed × rate may overflow; it is only computed when it is below the missing credit.
        if elapsed >= self.nanosecondsUntilFull() {
            self.credit = self.fullCredit
        } else {
            self.credit += elapsed * self.rate
        }
    }

    /// The bytes that may move at `now`.
    mutating func available(now: UInt64) -> Int {
        self.refill(now: now)
        return Int(self.credit / Self.nanosPerSecond)
    }

    /// `bytes` moved at `now` (at most what ``available(now:)`` allowed; more empties the bucket).
    mutating func spend(_ bytes: Int, now: UInt64) {
        self.refill(now: now)
        let cost = UInt64(max(0, bytes)).multipliedReportingOverflow(by: Self.nanosPerSecond)
        self.credit = cost.overflow || cost.partialValue >= self.credit ? 0 : self.credit - cost.partialValue
    }

    /// Whether nothing may move until the bucket refills (less than one byte of credit).
    var isEmpty: Bool { self.credit < Self.nanosPerSecond }

    /// Nanoseconds from the last refill until the bucket is full again (0 when it is full).
    func nanosecondsUntilFull() -> UInt64 {
        let missing = self.fullCredit - self.credit
        return missing / self.rate + (missing % self.rate == 0 ? 0 : 1)
    }
}
