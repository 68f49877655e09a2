import Synchronization

/// Time that moves only when told: give one to an ``EventLoop`` and its timers fire, and its
/// ``EventLoop/now`` advances, only through ``EventLoop/advanceTime(by:)``. Sockets, DNS and
/// everything else still happen in real time; only the clock is virtual, so a test of a timeout
/// asserts the exact instant it fires, not that it fired "soon enough" (swift-nio's
/// `NIOAsyncTestingEventLoop` does the same).
public final class ManualClock: Sendable {
    private let nanoseconds: Atomic<UInt64>

    /// A clock that reads `start` nanoseconds until it is advanced. The default is one second,
    /// so that "zero" durations and unset metrics (0) are told apart.
    public init(start: UInt64 = 1_000_000_000) {
        self.nanoseconds = Atomic(start)
    }

    /// The current virtual time, in nanoseconds.
    public var now: UInt64 { self.nanoseconds.load(ordering: .acquiring) }

    func advance(by delta: UInt64) {
        self.nanoseconds.add(delta, ordering: .acquiringAndReleasing)
    }
}
