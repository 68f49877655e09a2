import CHawser
// Theory of operation
// -------------------
// One EventLoop = one thread + one epoll instance (level-triggered) + one eventfd.
//
// * Work from other threads goes into `pending` under a mutex. The submitter writes the
//   eventfd (after releasing the mutex) only when the loop is asleep in epoll_wait, or about
//   to be, and no wake-up is already on its way: the loop says so under the same mutex
//   (`Pending.asleep`) after its last look at `pending`, and clears it as soon as epoll_wait
//   returns. Work submitted while the loop is busy (dispatching events, resuming the tasks
//   that wait for them) costs no system call: the loop looks at `pending` again before it
//   sleeps. A burst of submissions to a sleeping loop costs one write(2) (`Pending.woken`).
// * The eventfd is registered edge-triggered: every write is an event, and the loop never
//   reads it (its counter only grows; a write that would overflow it reads it back to 0).
// * Timers live in a binary min-heap keyed by deadline. Cancelling marks the timer dead
//   (O(1)); dead timers are dropped when they reach the top. The epoll_wait timeout is the
//   time to the earliest live timer, so an idle loop with no timers blocks forever and
//   uses no CPU.
// * File descriptors are registered with a handler object. The epoll user data packs a
//   32-bit registration generation with the fd, so an event for an fd that was closed and
//   reused within one epoll_wait batch is dropped instead of reaching the wrong handler.
// * Everything registered with a loop (handlers, timers, connections) is confined to the
//   loop's thread. Types that are `@unchecked Sendable` here are so because of that rule,
//   checked with `assertInLoop()` in debug builds.
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Receives readiness events for a file descriptor registered with an ``EventLoop``.
/// Called on the loop's thread only.
public protocol EventLoopIOHandler: AnyObject {
    /// The descriptor is readable, or has hung up / errored (a read will say which).
    func ioReadable()
    /// The descriptor is writable, or has errored (a write will say which).
    func ioWritable()
}

/// The error pending work fails with when its event loop shuts down.
public struct EventLoopShutdownError: Error, Sendable, CustomStringConvertible {
    public var description: String { "the event loop has shut down" }
}

/// A misuse of an ``EventLoop`` that would otherwise hang.
public struct EventLoopError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was misused.
    public enum Code: Sendable, Equatable {
        /// A synchronous wait (``EventLoop/submitAndWait(_:)``) for work on a loop was made on
        /// that loop's own thread: the work could only run after the wait, which would never end.
        case waitOnOwnLoop
    }

    /// What was misused.
    public let code: Code
    /// The name of the loop concerned.
    public let loopName: String

    /// Creates the error for `code` on the loop named `loopName`.
    public init(code: Code, loopName: String) {
        self.code = code
        self.loopName = loopName
    }

    /// A sentence that says what went wrong and what to do.
    public var description: String {
        switch self.code {
        case .waitOnOwnLoop:
            return "a synchronous wait for work on event loop '\(self.loopName)' was made on that loop's own thread, "
                + "where the work can never run while the thread waits; await the work instead, "
                + "or wait from a thread that is not the loop's (withTaskExecutorPreference(BlockingIOPool.shared))"
        }
    }
}

/// A single-threaded epoll event loop.
public final class EventLoop: @unchecked Sendable {
    private let epfd: Int32
    private let wakeFD: Int32
    private var thread: pthread_t? = nil
    private let threadID = Atomic<UInt>(0)

    private struct Pending {
        var tasks: [LoopWork] = []
        /// Set (under the lock) before the eventfd is closed: from then on nothing writes to it.
        var closed = false
        /// A submitter already took the duty to write the eventfd for the current sleep.
        var woken = false
    }
    private let pending = Mutex(Pending())
    /// The loop is in epoll_wait or on its way there with nothing left to run: set under
    /// `pending`'s lock after the loop found no work there, cleared (with no lock) when
    /// epoll_wait returns. Read under the lock by submitters, so one that queues work after the
    /// loop's last look sees it set and wakes the loop; a stale `true` costs a needless write.
    private let asleep = Atomic<Bool>(false)
    /// Writes to the eventfd so far (tests, diagnostics).
    private let wakeups = Atomic<Int>(0)
    /// Submitters that took the wake-up duty under the lock and have not finished writing the eventfd.
    private let wakersInFlight = Atomic<Int>(0)
    private let stopRequested = Atomic<Bool>(false)
    /// Set when this loop's group is the global executor: global jobs enqueued on this thread stay here.
    let servesGlobalExecutor = Atomic<Bool>(false)

    // Loop-confined state.
    // Loop-confined state. Swift checks exclusive access to a class's stored properties at run
    // time; in release builds the hottest of them opt out with `@exclusivity(unchecked)` (the
    // checks cost about an eighth of a keep-alive request's instructions:
    // Benchmarks/results/2026-11-27-engine-regression/). Debug builds, where the tests run, keep
    // every check. Nothing here can overlap: the state machines return actions that are
    // performed after the mutation that produced them has returned.
    #if DEBUG
    private var localTasks: [LoopWork] = []
    #else
    @exclusivity(unchecked) private var localTasks: [LoopWork] = []
    #endif
    /// The batch being run, swapped with `localTasks` so neither array is reallocated per round.
    #if DEBUG
    private var runningTasks: [LoopWork] = []
    #else
    @exclusivity(unchecked) private var runningTasks: [LoopWork] = []
    #endif
    /// The batch taken from `pending`, swapped in under its lock (loop thread only).
    #if DEBUG
    private var drainedTasks: [LoopWork] = []
    #else
    @exclusivity(unchecked) private var drainedTasks: [LoopWork] = []
    #endif
    #if DEBUG
    private var timers = TimerHeap()
    #else
    @exclusivity(unchecked) private var timers = TimerHeap()
    #endif
    #if DEBUG
    private var handlers: [Registration?] = []
    #else
    @exclusivity(unchecked) private var handlers: [Registration?] = []
    #endif
    private var generation: UInt32 = 0
    #if DEBUG
    private var eventsBuffer = [UInt32](repeating: 0, count: 256)
    #else
    @exclusivity(unchecked) private var eventsBuffer = [UInt32](repeating: 0, count: 256)
    #endif
    #if DEBUG
    private var dataBuffer = [UInt64](repeating: 0, count: 256)
    #else
    @exclusivity(unchecked) private var dataBuffer = [UInt64](repeating: 0, count: 256)
    #endif
    private var shutdownHooks: [ObjectIdentifier: () -> Void] = [:]
    private let finished = Mutex<Bool>(false)
    private let finishedCondition = ConditionVariable()

    private struct Registration {
        var generation: UInt32
        var handler: any EventLoopIOHandler
        var events: UInt32
    }

    /// A short name for diagnostics and the thread's name.
    public let name: String
    /// The clock of a loop made for tests; nil: CLOCK_MONOTONIC.
    private let manualClock: ManualClock?
    /// The time at the start of this turn of the loop (libuv's `uv_now`): what ``now`` returns
    /// on the loop, so a turn reads the clock once however many requests it serves.
    #if DEBUG
    private var turnStart: UInt64 = 0
    #else
    @exclusivity(unchecked) private var turnStart: UInt64 = 0
    #endif

    /// Creates a loop and starts its thread. With a `clock`, time on this loop is virtual: its
    /// timers fire only when ``advanceTime(by:)`` moves the clock past their deadline.
    public init(name: String = "hawser-loop", clock: ManualClock? = nil) throws(IOError) {
        CHawser_ignore_sigpipe()
        self.name = name
        self.manualClock = clock
        self.turnStart = clock?.now ?? CHawser_monotonic_ns()
        let ep = CHawser_epoll_create()
        if ep < 0 { throw IOError(errnoCode: CHawser_errno(), function: "epoll_create1") }
        let ev = CHawser_eventfd()
        if ev < 0 {
            let e = CHawser_errno()
            Posix.close(ep)
            throw IOError(errnoCode: e, function: "eventfd")
        }
        self.epfd = ep
        self.wakeFD = ev
        _ = CHawser_epoll_ctl(ep, CHAWSER_EPOLL_CTL_ADD, ev, CHAWSER_EPOLLIN | CHAWSER_EPOLLET, UInt64(UInt32.max))
        self.startThread()
    }

    private func startThread() {
        let box = Unmanaged.passRetained(self)
        var tid = pthread_t()
        let rc = pthread_create(
            &tid,
            nil,
            { arg in
                let loop = Unmanaged<EventLoop>.fromOpaque(arg!).takeRetainedValue()
                loop.threadID.store(UInt(bitPattern: Int(bitPattern: UInt(pthread_self()))), ordering: .releasing)
                CHawser_set_current_loop(Unmanaged.passUnretained(loop).toOpaque())
                CHawser_set_thread_name(loop.name)
                loop.run()
                return nil
            },
            box.toOpaque()
        )
        precondition(rc == 0, "pthread_create failed: \(rc)")
        self.thread = tid
    }

    /// The loop whose thread this is, or nil on any other thread.
    @inline(__always)
    static var currentLoop: EventLoop? {
        guard let p = CHawser_current_loop() else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(p).takeUnretainedValue()
    }

    /// True when called on this loop's thread.
    @inline(__always)
    public var inEventLoop: Bool {
        UInt(pthread_self()) == self.threadID.load(ordering: .relaxed)
    }

    @inline(__always)
    package func assertInLoop(_ file: StaticString = #fileID, _ line: UInt = #line) {
        assert(self.inEventLoop, "not on the event loop thread", file: file, line: line)
    }

    // MARK: - Submitting work

    /// Runs `task` on the loop's thread, soon. From the loop's own thread it runs after the
    /// current event, never re-entrantly.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        self.add(LoopWork(.closure(task)))
    }

    /// Like ``execute(_:)``, and says whether `task` was queued: false once the loop has finished
    /// (it never runs again). For work that must not be lost, such as a completion, which the
    /// caller then runs itself.
    @discardableResult
    public func executeIfRunning(_ task: @escaping @Sendable () -> Void) -> Bool {
        self.add(LoopWork(.closure(task)))
    }

    /// Runs a Swift job on the loop (the TaskExecutor role): queued as it is, with no closure
    /// around it.
    func enqueueJob(_ job: UnownedJob) {
        self.add(LoopWork(.job(job)))
    }

    /// Queues `work`: directly from the loop's own thread; from another, under the lock, waking
    /// the loop when it may be asleep. False when the loop has finished and `work` was dropped.
    @discardableResult
    private func add(_ work: LoopWork) -> Bool {
        if self.inEventLoop {
            self.localTasks.append(work)
            return true
        }
        var queued = false
        let mustWake = self.pending.withLock { p -> Bool in
            // After shutdown the task is dropped: the loop will never run again, and its
            // eventfd's number may already belong to another descriptor.
            guard !p.closed else { return false }
            p.tasks.append(work)
            queued = true
            // Awake: the loop looks at `pending` again before it sleeps. Already woken: one
            // write per sleep is enough.
            guard self.asleep.load(ordering: .relaxed), !p.woken else { return false }
            p.woken = true
            // Counted under the lock, so `finish` (which sets `closed` under it) waits for this
            // write before it closes the eventfd.
            self.wakersInFlight.add(1, ordering: .relaxed)
            return true
        }
        guard mustWake else { return queued }
        // Outside the lock: the woken loop goes straight for `pending`, and would otherwise spin
        // on the mutex while this thread is still in write(2).
        self.writeWakeFD()
        self.wakersInFlight.subtract(1, ordering: .releasing)
        return true
    }

    /// Adds 1 to the eventfd: an edge, so the loop's epoll_wait returns. The counter is never
    /// read on the loop; should it ever be full (2^64 - 2 wake-ups), it is emptied and written again.
    private func writeWakeFD() {
        self.wakeups.add(1, ordering: .relaxed)
        var one: UInt64 = 1
        if Glibc.write(self.wakeFD, &one, 8) < 0 && CHawser_errno() == EAGAIN {
            var value: UInt64 = 0
            _ = Glibc.read(self.wakeFD, &value, 8)
            _ = Glibc.write(self.wakeFD, &one, 8)
        }
    }

    /// How many times a submitter woke the loop through its eventfd (tests, diagnostics).
    package var wakeupWrites: Int { self.wakeups.load(ordering: .relaxed) }

    /// True once `shutdown()` was called: work submitted from now on is not run.
    public var isShutDown: Bool { self.stopRequested.load(ordering: .acquiring) }

    /// Loop-thread variant of `execute` for closures that are not Sendable (loop-confined state).
    package func executeInLoop(_ task: @escaping () -> Void) {
        self.assertInLoop()
        self.localTasks.append(LoopWork(.closure(task)))
    }

    // MARK: - Time

    /// The loop's time in nanoseconds: CLOCK_MONOTONIC, or the ``ManualClock`` the loop was made
    /// with. On the loop's thread it is the time this turn of the loop began (read once per
    /// turn); elsewhere it reads the clock.
    public var now: UInt64 {
        if self.inEventLoop { return self.turnStart }
        return self.readClock()
    }

    @inline(__always)
    private func readClock() -> UInt64 {
        if let manual = self.manualClock { return manual.now }
        return CHawser_monotonic_ns()
    }

    /// Moves a loop made with a ``ManualClock`` forward by `nanoseconds`, then runs, on the loop,
    /// every timer that came due and the work they queued, until none is left, and returns.
    /// Call it from a test, never from the loop itself.
    public func advanceTime(by nanoseconds: UInt64) throws {
        guard let clock = self.manualClock else {
            preconditionFailure("advanceTime(by:) needs a loop made with a ManualClock")
        }
        try self.submitAndWait {
            clock.advance(by: nanoseconds)
            self.turnStart = clock.now
            var rounds = 0
            repeat {
                self.runExpiredTimers()
                self.runTasks()
                rounds += 1
            } while rounds < 1000
                && (!self.localTasks.isEmpty || (self.timers.nextDeadline().map { $0 <= self.turnStart } ?? false))
        }
    }

    /// Runs `task` after `nanoseconds`. Returns a handle whose `cancel()` is O(1).
    @discardableResult
    public func schedule(in nanoseconds: UInt64, _ task: @escaping @Sendable () -> Void) -> Scheduled {
        let s = Scheduled(deadline: self.now &+ nanoseconds, loop: self, body: task)
        if self.inEventLoop {
            self.timers.push(s)
        } else {
            self.execute { self.timers.push(s) }
        }
        return s
    }

    /// Loop-thread variant of `schedule` for non-Sendable closures.
    package func scheduleInLoop(in nanoseconds: UInt64, _ task: @escaping () -> Void) -> Scheduled {
        self.assertInLoop()
        let s = Scheduled(deadline: self.turnStart &+ nanoseconds, loop: self, body: task)
        self.timers.push(s)
        return s
    }

    /// Runs a Swift job when CLOCK_MONOTONIC reaches `deadline` (the global executor's timed
    /// jobs: `Task.sleep`, timeouts). Reads the clock, not the turn's start, so it never fires early.
    func enqueueJob(_ job: UnownedJob, atMonotonicDeadline deadline: UInt64) {
        let s = Scheduled(deadline: deadline, loop: self, body: { self.enqueueJob(job) })
        if self.inEventLoop {
            self.timers.push(s)
        } else {
            self.execute { self.timers.push(s) }
        }
    }

    /// Runs `task` on the loop and waits for its result.
    ///
    /// Called on the loop's own thread (a task running on the loop, as every task does once the
    /// group is the global executor), the wait could never end: it throws
    /// ``EventLoopError/Code/waitOnOwnLoop`` at once instead, without running `task`.
    public func submitAndWait<T: Sendable>(_ task: @escaping @Sendable () throws -> T) throws -> T {
        if self.inEventLoop { throw EventLoopError(code: .waitOnOwnLoop, loopName: self.name) }
        let box = Mutex<Result<T, any Error>?>(nil)
        let cond = ConditionVariable()
        self.execute {
            let r = Result { try task() }
            box.withLock { $0 = r }
            cond.broadcast()
        }
        let result = box.waitUntilSet(cond)
        return try result.get()
    }

    // MARK: - Registration (loop thread only)

    /// Registers `fd` for the given interest. The handler is kept strongly until `deregister`.
    public func register(fd: Int32, handler: any EventLoopIOHandler, readable: Bool, writable: Bool) throws(IOError) {
        self.assertInLoop()
        let idx = Int(fd)
        if idx >= self.handlers.count {
            self.handlers.append(contentsOf: repeatElement(nil, count: idx - self.handlers.count + 64))
        }
        self.generation &+= 1
        if self.generation == UInt32.max { self.generation = 1 }
        let events = Self.mask(readable: readable, writable: writable)
        if CHawser_epoll_ctl(self.epfd, CHAWSER_EPOLL_CTL_ADD, fd, events, Self.userData(fd, self.generation)) != 0 {
            throw IOError(errnoCode: CHawser_errno(), function: "epoll_ctl(ADD)")
        }
        self.handlers[idx] = Registration(generation: self.generation, handler: handler, events: events)
    }

    /// Changes the interest set of a registered `fd`. A no-op when nothing changes.
    public func setInterest(fd: Int32, readable: Bool, writable: Bool) {
        self.assertInLoop()
        let idx = Int(fd)
        guard idx < self.handlers.count, let reg = self.handlers[idx] else { return }
        let events = Self.mask(readable: readable, writable: writable)
        if events == reg.events { return }
        self.handlers[idx]!.events = events
        _ = CHawser_epoll_ctl(self.epfd, CHAWSER_EPOLL_CTL_MOD, fd, events, Self.userData(fd, reg.generation))
    }

    /// Removes `fd` from the loop (does not close it).
    public func deregister(fd: Int32) {
        self.assertInLoop()
        let idx = Int(fd)
        guard idx < self.handlers.count, self.handlers[idx] != nil else { return }
        self.handlers[idx] = nil
        _ = CHawser_epoll_ctl(self.epfd, CHAWSER_EPOLL_CTL_DEL, fd, 0, 0)
    }

    @inline(__always)
    private static func mask(readable: Bool, writable: Bool) -> UInt32 {
        (readable ? CHAWSER_EPOLLIN | CHAWSER_EPOLLRDHUP : 0) | (writable ? CHAWSER_EPOLLOUT : 0)
    }

    @inline(__always)
    private static func userData(_ fd: Int32, _ generation: UInt32) -> UInt64 {
        UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    /// Registered shutdown hooks (tests, diagnostics).
    var shutdownHookCount: Int { self.shutdownHooks.count }

    package func removeShutdownHook(for owner: ObjectIdentifier) {
        self.assertInLoop()
        self.shutdownHooks.removeValue(forKey: owner)
    }

    func timerCancelled() {
        self.timers.noteCancelled()
    }

    /// Timers in the heap, live and not yet dropped dead ones (tests, diagnostics).
    var timerHeapCount: Int { self.timers.count }

    /// Registers a hook run on the loop thread when it shuts down (to fail pending work).
    /// The hook is keyed by `owner`, which removes it with `removeShutdownHook(for:)` when it goes away.
    package func onShutdown(for owner: ObjectIdentifier, _ hook: @escaping () -> Void) {
        self.assertInLoop()
        self.shutdownHooks[owner] = hook
    }

    // MARK: - Running

    private func run() {
        while true {
            // Time to wait: 0 if work is queued, the nearest timer, or forever.
            var timeout: Int32 = -1
            if !self.localTasks.isEmpty || self.stopRequested.load(ordering: .relaxed) {
                timeout = 0
            } else if let next = self.timers.nextDeadline() {
                let now = self.readClock()
                if next <= now {
                    timeout = 0
                } else if self.manualClock == nil {
                    // Round up so a timer never fires early.
                    let ms = (next - now + 999_999) / 1_000_000
                    timeout = Int32(min(ms, UInt64(Int32.max)))
                }
                // On a manual clock a future timer waits for advanceTime, not for real time.
            }
            if timeout != 0 && !self.prepareToSleep() { timeout = 0 }
            let n = self.eventsBuffer.withUnsafeMutableBufferPointer { evs in
                self.dataBuffer.withUnsafeMutableBufferPointer { data in
                    CHawser_epoll_wait(self.epfd, evs.baseAddress, data.baseAddress, Int32(evs.count), timeout)
                }
            }
            self.asleep.store(false, ordering: .relaxed)
            self.turnStart = self.readClock()
            if n > 0 {
                for i in 0..<Int(n) {
                    self.dispatch(events: self.eventsBuffer[i], data: self.dataBuffer[i])
                }
            }
            self.runExpiredTimers()
            self.runTasks()
            if self.stopRequested.load(ordering: .acquiring) {
                self.finish()
                return
            }
        }
    }

    /// The last look at `pending` before epoll_wait may block: false when work came in (run it
    /// first); true after marking the loop asleep, under the same lock submitters take, so any
    /// work queued from now on comes with a write to the eventfd.
    private func prepareToSleep() -> Bool {
        self.pending.withLock { p -> Bool in
            if !p.tasks.isEmpty { return false }
            p.woken = false
            self.asleep.store(true, ordering: .relaxed)
            return true
        }
    }

    @inline(__always)
    private func dispatch(events: UInt32, data: UInt64) {
        let fdBits = UInt32(truncatingIfNeeded: data)
        if fdBits == UInt32.max { return }  // the eventfd (edge-triggered: nothing to read)
        let fd = Int(Int32(bitPattern: fdBits))
        let gen = UInt32(truncatingIfNeeded: data >> 32)
        guard fd < self.handlers.count, let reg = self.handlers[fd], reg.generation == gen else { return }
        let handler = reg.handler
        let errorish = events & (CHAWSER_EPOLLERR | CHAWSER_EPOLLHUP) != 0
        if events & (CHAWSER_EPOLLIN | CHAWSER_EPOLLRDHUP) != 0 || (errorish && reg.events & CHAWSER_EPOLLIN != 0) {
            handler.ioReadable()
        }
        if events & CHAWSER_EPOLLOUT != 0 || (errorish && reg.events & CHAWSER_EPOLLOUT != 0) {
            // The read handler may have closed and deregistered the fd.
            guard fd < self.handlers.count, let again = self.handlers[fd], again.generation == gen else { return }
            again.handler.ioWritable()
        }
    }

    private func runExpiredTimers() {
        guard self.timers.count > 0 else { return }
        let now = self.turnStart
        while let top = self.timers.peek(), top.deadline <= now {
            self.timers.pop()
            if top.cancelled { continue }
            let body = top.body
            top.body = nil
            top.cancelled = true
            body?()
        }
    }

    private func runTasks() {
        self.runPending()
        // Tasks may enqueue more tasks; run a bounded number of rounds so IO is not starved.
        var rounds = 0
        while !self.localTasks.isEmpty && rounds < 16 {
            swap(&self.localTasks, &self.runningTasks)
            for i in self.runningTasks.indices { self.runningTasks[i].run(on: self) }
            self.runningTasks.removeAll(keepingCapacity: true)
            rounds += 1
        }
    }

    /// Runs what other threads submitted, swapping arrays under the lock (no copy, no allocation).
    private func runPending() {
        // Nothing taken: return before touching `drainedTasks`, which a caller further up the
        // stack may be iterating (advanceTime runs the loop's turn from inside a loop job).
        let took = self.pending.withLock { p -> Bool in
            if p.tasks.isEmpty { return false }
            swap(&p.tasks, &self.drainedTasks)
            return true
        }
        guard took else { return }
        for i in self.drainedTasks.indices { self.drainedTasks[i].run(on: self) }
        self.drainedTasks.removeAll(keepingCapacity: true)
    }

    // MARK: - Shutdown

    /// Stops the loop: runs the shutdown hooks (which fail pending work with a clear error),
    /// closes the epoll and eventfd descriptors, and joins the thread. Blocks until done.
    /// Must not be called from the loop's own thread.
    public func shutdown() {
        precondition(!self.inEventLoop, "shutdown() would deadlock on the loop thread")
        if self.stopRequested.exchange(true, ordering: .acquiringAndReleasing) {
            self.waitUntilFinished()
            return
        }
        self.pending.withLock { p in
            guard !p.closed else { return }
            self.writeWakeFD()
        }
        if let t = self.thread {
            pthread_join(t, nil)
            self.thread = nil
        }
    }

    private func waitUntilFinished() {
        _ = self.finished.waitUntilSet(self.finishedCondition)
    }

    private func finish() {
        // Drain anything submitted before the stop, then fail the rest through the hooks.
        self.runTasks()
        let hooks = self.shutdownHooks
        self.shutdownHooks.removeAll()
        for h in hooks.values { h() }
        self.runTasks()
        for i in 0..<self.handlers.count where self.handlers[i] != nil {
            self.handlers[i] = nil
        }
        self.timers.removeAll()
        // Work submitted after this point is dropped (see `execute`); what came before ran above.
        let late = self.pending.withLock { p -> [LoopWork] in
            p.closed = true
            let r = p.tasks
            p.tasks.removeAll()
            return r
        }
        for t in late { t.run(on: self) }
        // A submitter that counted itself before `closed` was set may still be in write(2).
        while self.wakersInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
        Posix.close(self.wakeFD)
        Posix.close(self.epfd)
        self.finished.withLock { $0 = true }
        self.finishedCondition.broadcast()
    }
}
