// Timers and queued work of an EventLoop: the handle a scheduled task is cancelled through, the
// min-heap of scheduled tasks, and one unit of queued loop work. All of it is confined to the
// loop's thread except `Scheduled.cancel()`, which hops to the loop.
/// A handle to a scheduled task; `cancel()` is cheap and may be called from any thread.
public final class Scheduled: @unchecked Sendable {
    // Loop-confined except `cancel()`, which hops to the loop when called elsewhere.
    var cancelled = false
    var body: (() -> Void)?
    let deadline: UInt64
    unowned(unsafe) let loop: EventLoop

    init(deadline: UInt64, loop: EventLoop, body: @escaping () -> Void) {
        self.deadline = deadline
        self.loop = loop
        self.body = body
    }

    /// Cancels the task if it has not run yet. Safe from any thread.
    public func cancel() {
        if self.loop.inEventLoop {
            self.cancelOnLoop()
        } else {
            self.loop.execute { self.cancelOnLoop() }
        }
    }

    func cancelOnLoop() {
        guard !self.cancelled else { return }  // already fired or cancelled
        self.cancelled = true
        self.body = nil
        self.loop.timerCancelled()
    }
}

// MARK: - Timer heap

/// One unit of loop work: a closure, or a Swift job (the loop as a TaskExecutor). Arrays hold
/// it as a struct, so a closure is stored as it is: an array of `() -> Void` stores each one
/// behind a heap-allocated reabstraction thunk.
///
/// `@unchecked Sendable`: it crosses threads only through the loop's mutex-guarded queue, and
/// its closure is `@Sendable` unless it was queued on the loop's own thread (`executeInLoop`,
/// which asserts that).
struct LoopWork: @unchecked Sendable {
    enum Kind {
        case closure(() -> Void)
        case job(UnownedJob)
    }
    let kind: Kind

    init(_ kind: Kind) { self.kind = kind }

    @inline(__always)
    func run(on loop: EventLoop) {
        switch self.kind {
        case .closure(let body): body()
        case .job(let job): job.runSynchronously(on: loop.asUnownedTaskExecutor())
        }
    }
}

/// A binary min-heap of scheduled tasks ordered by deadline.
///
/// Cancelling is O(1): the entry is marked dead and dropped when it reaches the top. So that
/// long timeouts that are always cancelled (a task's 7-day resource timeout) cannot pile up,
/// the heap is rebuilt without its dead entries once they are more than half of it.
struct TimerHeap {
    private var items: [Scheduled] = []
    private var dead = 0

    var count: Int { self.items.count }

    mutating func removeAll() {
        self.items.removeAll()
        self.dead = 0
    }

    func peek() -> Scheduled? { self.items.first }

    /// A timer still in the heap was cancelled.
    mutating func noteCancelled() {
        self.dead += 1
    }

    /// The nearest deadline, dropping cancelled timers from the top.
    mutating func nextDeadline() -> UInt64? {
        while let top = self.items.first, top.cancelled { self.pop() }
        return self.items.first?.deadline
    }

    mutating func push(_ s: Scheduled) {
        if self.dead > 64 && self.dead * 2 > self.items.count { self.compact() }
        self.items.append(s)
        var i = self.items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            if self.items[parent].deadline <= self.items[i].deadline { break }
            self.items.swapAt(parent, i)
            i = parent
        }
    }

    private mutating func compact() {
        self.items.removeAll { $0.cancelled }
        self.dead = 0
        // Floyd's heapify.
        var i = self.items.count / 2
        while i > 0 {
            i -= 1
            self.siftDown(i)
        }
    }

    /// Removes the top entry. A popped entry that was cancelled is no longer counted dead.
    mutating func pop() {
        guard !self.items.isEmpty else { return }
        if self.items[0].cancelled && self.dead > 0 { self.dead -= 1 }
        let last = self.items.removeLast()
        guard !self.items.isEmpty else { return }
        self.items[0] = last
        self.siftDown(0)
    }

    private mutating func siftDown(_ start: Int) {
        var i = start
        let n = self.items.count
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < n && self.items[l].deadline < self.items[m].deadline { m = l }
            if r < n && self.items[r].deadline < self.items[m].deadline { m = r }
            if m == i { break }
            self.items.swapAt(i, m)
            i = m
        }
    }
}
