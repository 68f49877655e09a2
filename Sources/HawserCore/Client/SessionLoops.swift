// A session over a group of event loops: one pool per loop (its own PoolStateMachine and
// connections, loop-confined as before), and what the pools share across loops, kept here:
//
// - LoopChooser (pure): which loop a request made off the session's loops goes to.
// - ConnectionBudget (pure): the session-wide per-host connection limit, as permits counted by
//   connection key, and which loops wait for one.
// - PoolGroup: the budget under a lock, the pools (weakly), the summed pool counts an
//   instrumentation sees, and the wake-ups it sends from one loop to another.
//
// A pool asks the budget for a permit before each connect its machine decides on, and gives it
// back when the connection (or the connect) ends. A pool refused a permit tells its machine (the
// origin waits: `connectDenied`), is noted as starving for that key, and asks the other loops
// to close an idle connection of that key, if they have one; a released connection of a key
// some loop starves for is closed rather than parked. Every permit given back wakes the loops
// starving for its key, which try again. A one-loop session has no group: its machine's own
// limit is the session's, and none of this runs.
import HawserPosix
import Synchronization

/// Picks the loop for a request made off the session's loops: the one with the fewest requests
/// in flight, ties broken round-robin (from a position that moves by one per pick). Pure.
struct LoopChooser {
    /// The index of the loop to use among `count` loops, given each one's requests in flight:
    /// the least, the first such from `start` (taken modulo `count`) onwards.
    static func choose(count n: Int, start: Int, inFlight: (Int) -> Int) -> Int {
        precondition(n > 0, "a session has at least one loop")
        let first = ((start % n) + n) % n
        var best = first
        var bestCount = inFlight(first)
        var i = 1
        while i < n && bestCount > 0 {
            let j = (first + i) % n
            let c = inFlight(j)
            if c < bestCount {
                best = j
                bestCount = c
            }
            i += 1
        }
        return best
    }
}

/// The session-wide per-host connection limit over several loops: permits counted by connection
/// key, at most `limit` at a time for each key, and which loops wait for one. Pure.
struct ConnectionBudget {
    let limit: Int
    private(set) var held: [ConnectionKey: Int] = [:]
    /// The loops refused a permit for a key, that wait for one to come back.
    private(set) var starving: [ConnectionKey: Set<Int>] = [:]

    init(limit: Int) { self.limit = max(1, limit) }

    /// A permit for a connection to `key`, for loop `loop`: true when one was free; false when
    /// the limit is reached, and `loop` is noted as waiting for `key`.
    mutating func acquire(_ key: ConnectionKey, loop: Int) -> Bool {
        let n = self.held[key, default: 0]
        if n < self.limit {
            self.held[key] = n + 1
            return true
        }
        self.starving[key, default: []].insert(loop)
        return false
    }

    /// A permit for `key` comes back (its connection or connect ended). Returns the loops that
    /// waited for one: each is to try again (and is no longer noted as waiting).
    mutating func release(_ key: ConnectionKey) -> Set<Int> {
        let n = self.held[key, default: 0]
        if n <= 1 { self.held.removeValue(forKey: key) } else { self.held[key] = n - 1 }
        return self.starving.removeValue(forKey: key) ?? []
    }

    /// Whether some loop waits for a permit for `key`.
    func isWanted(_ key: ConnectionKey) -> Bool { self.starving[key] != nil }

    /// How many keys some loop waits for.
    var wantedKeys: Int { self.starving.count }

    /// Permits held for `key`.
    func permits(_ key: ConnectionKey) -> Int { self.held[key, default: 0] }
}

/// What the pools of one session share across its loops (see the note at the top of this file).
///
/// `@unchecked Sendable`: what the loops share is in a `Mutex` and an `Atomic`; `pools` is set
/// once by `attach(_:)`, before any request, and only read after.
final class PoolGroup: @unchecked Sendable {
    private struct Shared {
        var budget: ConnectionBudget
        var counts: [PoolCounts]
        var reported = PoolCounts(open: 0, idle: 0)
    }

    private let shared: Mutex<Shared>
    /// `shared.budget.wantedKeys > 0`, readable without the lock (on every released connection).
    private let wanted = Atomic<Int>(0)
    /// The pools, by loop index. Weak: the session holds them; a wake-up that finds one gone
    /// does nothing. Set once, before any request.
    private var pools: [Weak] = []
    private let instrumentation: (any RequestInstrumentation)?

    private struct Weak {
        weak var pool: ConnectionPool?
    }

    init(loops: Int, limit: Int, instrumentation: (any RequestInstrumentation)?) {
        self.shared = Mutex(
            Shared(
                budget: ConnectionBudget(limit: limit),
                counts: Array(repeating: PoolCounts(open: 0, idle: 0), count: loops)
            )
        )
        self.instrumentation = instrumentation
    }

    func attach(_ pools: [ConnectionPool]) {
        self.pools = pools.map { Weak(pool: $0) }
    }

    /// A permit for a connection to `key` on loop `loop`, or false (then the loops holding
    /// connections to `key` are asked to give up an idle one).
    func acquire(_ key: ConnectionKey, loop: Int) -> Bool {
        let granted = self.shared.withLock { s -> Bool in
            let ok = s.budget.acquire(key, loop: loop)
            if !ok { self.wanted.store(s.budget.wantedKeys, ordering: .relaxed) }
            return ok
        }
        if !granted {
            for (i, p) in self.pools.enumerated() where i != loop {
                guard let pool = p.pool else { continue }
                let transfer = LoopBound(handingOver: pool, to: pool.loop)
                pool.loop.execute { transfer.value.yieldIdle(key) }
            }
        }
        return granted
    }

    /// A permit for `key` comes back: the loops that waited for one try again.
    func release(_ key: ConnectionKey) {
        let wake = self.shared.withLock { s -> Set<Int> in
            let w = s.budget.release(key)
            if !w.isEmpty { self.wanted.store(s.budget.wantedKeys, ordering: .relaxed) }
            return w
        }
        for i in wake {
            guard let pool = self.pools[i].pool else { continue }
            let transfer = LoopBound(handingOver: pool, to: pool.loop)
            pool.loop.execute { transfer.value.permitAvailable(key) }
        }
    }

    /// Whether some loop waits for a permit for `key` (one atomic load when none does).
    func isWanted(_ key: ConnectionKey) -> Bool {
        guard self.wanted.load(ordering: .relaxed) > 0 else { return false }
        return self.shared.withLock { $0.budget.isWanted(key) }
    }

    /// Loop `loop`'s pool counts changed: the instrumentation hears the session's sums (under
    /// the lock, so that the sums it hears are in order), when they changed.
    func countsChanged(_ counts: PoolCounts, loop: Int) {
        guard let instrumentation = self.instrumentation else { return }
        self.shared.withLock { s in
            s.counts[loop] = counts
            var sum = PoolCounts(open: 0, idle: 0)
            for c in s.counts {
                sum.open += c.open
                sum.idle += c.idle
            }
            guard sum != s.reported else { return }
            s.reported = sum
            instrumentation.poolCountsChanged(sum)
        }
    }
}
