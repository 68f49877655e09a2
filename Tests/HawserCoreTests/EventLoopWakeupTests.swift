import Dispatch
import HawserPosix
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension NetworkTests {
    /// The loop's wake-up protocol: work submitted from other threads costs an eventfd write only
    /// when the loop sleeps, and is never left behind when the loop goes to sleep at the same
    /// moment.
    @Suite("EventLoop wake-ups")
    struct EventLoopWakeupTests {
        /// Waits for `semaphore`; false when it was not signalled within `seconds` (a lost job:
        /// the loop slept with it queued). A bound against hanging, not a timing assertion.
        private static func signalled(_ semaphore: DispatchSemaphore, within seconds: Int = 20) -> Bool {
            semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
        }

        /// Runs one job on `loop` and waits for it, bounded (`submitAndWait` would hang on a lost job).
        private static func ranJob(on loop: EventLoop) -> Bool {
            let done = DispatchSemaphore(value: 0)
            loop.execute { done.signal() }
            return Self.signalled(done)
        }

        @Test("work submitted while the loop runs a task wakes nothing: no eventfd write, every job runs")
        func noWriteWhileAwake() throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            #expect(Self.ranJob(on: loop))  // the loop is up and idle
            let inTask = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            loop.execute {
                inTask.signal()
                release.wait()  // holds the loop awake, inside its turn
            }
            #expect(Self.signalled(inTask))
            let before = loop.wakeupWrites
            let ran = Atomic<Int>(0)
            let all = DispatchSemaphore(value: 0)
            for _ in 0..<100 {
                loop.execute { if ran.add(1, ordering: .relaxed).newValue == 100 { all.signal() } }
            }
            let writesWhileAwake = loop.wakeupWrites - before
            release.signal()
            #expect(Self.signalled(all))
            #expect(ran.load(ordering: .relaxed) == 100)
            #expect(writesWhileAwake == 0)
        }

        @Test(
            "ping-pong from 4 threads: a job queued while the loop is about to sleep is never lost",
            arguments: [false, true]
        )
        func pingPongNeverLost(withTimers: Bool) throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let threads = 4
            let rounds = 20_000
            let ran = Atomic<Int>(0)
            let lost = Atomic<Int>(0)
            let group = DispatchGroup()
            // A far timer makes the loop sleep with a timeout instead of forever.
            let far = withTimers ? loop.schedule(in: 3_600_000_000_000) {} : nil
            for _ in 0..<threads {
                group.enter()
                let thread = Thread {
                    let done = DispatchSemaphore(value: 0)
                    for _ in 0..<rounds {
                        // Each job is queued right after the previous one ran: the loop is then
                        // between its last look at the queue and epoll_wait, or asleep.
                        loop.execute {
                            ran.add(1, ordering: .relaxed)
                            done.signal()
                        }
                        if !Self.signalled(done) {
                            lost.add(1, ordering: .relaxed)
                            break
                        }
                    }
                    group.leave()
                }
                thread.start()
            }
            group.wait()
            far?.cancel()
            #expect(lost.load(ordering: .relaxed) == 0)
            #expect(ran.load(ordering: .relaxed) == threads * rounds)
        }
    }
}

/// A plain pthread of its own for each submitter (Foundation's Thread is not in
/// FoundationEssentials; Dispatch's pool may not run four blocking jobs at once on two cores).
private final class Thread: @unchecked Sendable {
    private let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func start() {
        let box = Unmanaged.passRetained(self)
        var tid = pthread_t()
        let rc = pthread_create(
            &tid,
            nil,
            { arg in
                let thread = Unmanaged<Thread>.fromOpaque(arg!).takeRetainedValue()
                thread.body()
                return nil
            },
            box.toOpaque()
        )
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_detach(tid)
    }
}
