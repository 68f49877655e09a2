// The session engine with async callers (`--engine session --api async`): `connections` Swift
// tasks, each awaiting `Session.response(for:)` in a loop, the way an application calls Hawser;
// with -t N the session spans N loops (each with its own connections).
// Where those tasks run is `--executor`: on the event loops installed as the global executor
// (installed, the default), on the default executor (default: the tool leaves the runtime's
// executor alone), or on the default executor with each task preferring the session's loop (loop).
import HawserCore
import Synchronization

/// `connections` async callers over one `Session` on `threads` loops.
final class AsyncSessionLoadEngine: LoadEngine, @unchecked Sendable {
    let session: Session
    /// The session's loops (-t): with more than one, one session spans them all.
    let loops: [EventLoop]
    /// The loops are the engine's own (shut down at the end), not the shared group's.
    private let ownsLoops: Bool
    /// The callers run on several threads: every record goes through `lock`.
    private let recorder = LoadRecorder()
    private let lock = Mutex(())
    private let requests: [HTTPClientRequest]
    private let plan: LoadPlan
    private let executor: LoadOptions.Executor
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let running = Atomic<Int>(0)
    private let onDone = Mutex<(@Sendable () -> Void)?>(nil)

    var recorders: [(EventLoop, LoadRecorder)] { [(self.loops[0], self.recorder)] }

    init(
        configuration: SessionConfiguration,
        requests: [HTTPClientRequest],
        plan: LoadPlan,
        threads: Int,
        executor: LoadOptions.Executor
    ) throws {
        var config = configuration
        config.maximumConnectionsPerHost = plan.connections
        if let t = plan.timeout { config.timeoutIntervalForResource = t }
        let shared = EventLoopGroup.shared
        if executor == .installed && shared.isGlobalExecutor && threads <= shared.loops.count {
            // The session on loops that run the callers: a caller is served by the connections
            // of the loop it runs on, with no hand-off.
            self.loops = Array(shared.loops.prefix(threads))
            self.ownsLoops = false
        } else {
            self.loops = try (0..<threads).map { try EventLoop(name: "hawser-load-\($0)") }
            self.ownsLoops = true
        }
        self.session =
            self.loops.count == 1
            ? Session(configuration: config, eventLoop: self.loops[0])
            : Session(configuration: config, eventLoops: self.loops)
        self.recorder.closedLoop = plan.rate == nil
        self.requests = requests
        self.plan = plan
        self.executor = executor
    }

    func read<T: Sendable>(_ index: Int, _ body: @escaping @Sendable (LoadRecorder) -> T) -> T {
        self.lock.withLock { _ in body(self.recorder) }
    }

    func start(at origin: UInt64, onDone: @escaping @Sendable () -> Void) {
        self.onDone.withLock { $0 = onDone }
        self.running.store(self.plan.connections, ordering: .relaxed)
        for i in 0..<self.plan.connections {
            if self.executor == .loop {
                // Caller i prefers loop i mod t: it is served by that loop's connections.
                Task(executorPreference: self.loops[i % self.loops.count]) { await self.caller(i, origin: origin) }
            } else {
                Task.detached { await self.caller(i, origin: origin) }
            }
        }
    }

    private func caller(_ i: Int, origin: UInt64) async {
        defer {
            if self.running.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { self.finish() }
        }
        var schedule = self.plan.schedule(i, origin: origin)
        var picker = RequestPicker(count: self.requests.count, order: self.plan.order, seed: i)
        let quota = self.plan.quota(i)
        var started = 0
        while started < quota && !self.stopped.load(ordering: .relaxed) {
            let sent = TaskMetrics.now()
            var intended = sent
            if schedule != nil {
                switch schedule!.next(now: sent) {
                case .send(let at): intended = at
                case .wait(let until):
                    try? await Task.sleep(nanoseconds: until > sent ? until - sent : 0)
                    continue
                }
            }
            started += 1
            let request = self.requests[picker.next()]
            do {
                let r = try await self.session.response(for: request)
                let done = TaskMetrics.now()
                let bytes = UInt64(max(0, r.metrics.bytesReceived))
                self.lock.withLock { _ in
                    self.recorder.response(status: r.status, bytes: bytes, intended: intended, sent: sent, now: done)
                }
            } catch {
                guard !self.stopped.load(ordering: .relaxed) else { return }
                let done = TaskMetrics.now()
                self.lock.withLock { _ in
                    self.recorder.error(LoadErrorClassifier.kind(of: error), error.description, now: done)
                }
                // A closed loop pauses 10 ms after a failure, so a refusing server is not hammered.
                if schedule == nil { try? await Task.sleep(nanoseconds: 10_000_000) }
            }
        }
    }

    private func finish() {
        guard !self.finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let d = self.onDone.withLock { d in
            defer { d = nil }
            return d
        }
        d?()
    }

    /// The -d deadline: the run ends now; callers stop after the request they are awaiting.
    func stop() {
        self.stopped.store(true, ordering: .relaxed)
        self.finish()
    }

    func shutdown() {
        self.session.shutdown()
        if self.ownsLoops { for l in self.loops { l.shutdown() } }
    }
}
