// The two engines behind `hawser load`: raw sockets on N loops, and the Session API on one.
import HawserCore
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ v: T) { self.value = v }
}

/// How the requests of a run are spread over its connections.
struct LoadPlan {
    var connections: Int
    /// -n; nil: until stopped.
    var total: Int?
    /// -R in all; nil: closed loop.
    var rate: Double?
    var order: LoadOptions.Order
    /// --timeout in seconds.
    var timeout: Double?

    /// Requests connection `i` may start: -n split exactly (the first n % c get one more).
    func quota(_ i: Int) -> Int {
        guard let n = self.total else { return Int.max }
        return n / self.connections + (i < n % self.connections ? 1 : 0)
    }

    /// Connection `i`'s schedule from `origin` (nil: closed loop): rate/c each, phases spread.
    func schedule(_ i: Int, origin: UInt64) -> OpenLoopSchedule? {
        guard let r = self.rate else { return nil }
        let each = r / Double(self.connections)
        return OpenLoopSchedule(
            start: origin,
            ratePerSecond: each,
            phase: OpenLoopSchedule.phase(index: i, of: self.connections, ratePerSecond: each)
        )
    }
}

/// The raw engine: connections spread round-robin over `threads` loops.
final class RawLoadEngine: LoadEngine {
    let group: EventLoopGroup
    let recorders: [(EventLoop, LoadRecorder)]
    private var connections: [UncheckedBox<RawLoadConnection>] = []
    private let plan: LoadPlan

    init(threads: Int, address: SocketAddress, requests: [EncodedLoadRequest], plan: LoadPlan) throws {
        // With the global-executor work merged, this is where the tool would run
        // `try EventLoopGroup.shared.installAsGlobalExecutor()` on the group it loads from, so
        // that Swift tasks (none on the raw path today) share the load's loops.
        self.group = try EventLoopGroup(numberOfThreads: threads)
        self.plan = plan
        self.recorders = self.group.loops.map { ($0, LoadRecorder()) }
        for (_, r) in self.recorders { r.closedLoop = plan.rate == nil }
        let timeout = plan.timeout.map { UInt64($0 * 1e9) }
        for i in 0..<plan.connections {
            let li = i % threads
            let c = RawLoadConnection(
                loop: self.group.loops[li],
                address: address,
                requests: requests,
                picker: RequestPicker(count: requests.count, order: plan.order, seed: i),
                recorder: self.recorders[li].1,
                quota: plan.quota(i),
                schedule: nil,
                timeout: timeout
            )
            self.connections.append(UncheckedBox(c))
        }
    }

    /// Opens every connection before the run starts (not measured), loop by loop.
    func connectAll() {
        for (li, (loop, _)) in self.recorders.enumerated() {
            let mine = UncheckedBox(
                self.connections.enumerated().filter { $0.offset % self.recorders.count == li }.map(\.element)
            )
            _ = try? loop.submitAndWait { for c in mine.value { c.value.preconnect() } }
        }
    }

    func start(at origin: UInt64, onDone: @escaping @Sendable () -> Void) {
        let remaining = Atomic<Int>(self.connections.count)
        let done = UncheckedBox(onDone)
        let count = self.recorders.count
        for (i, box) in self.connections.enumerated() {
            let schedule = self.plan.schedule(i, origin: origin)
            self.recorders[i % count].0.execute {
                box.value.schedule = schedule
                box.value.start {
                    if remaining.subtract(1, ordering: .relaxed).newValue == 0 { done.value() }
                }
            }
        }
    }

    func stop() {
        let count = self.recorders.count
        for (i, box) in self.connections.enumerated() {
            self.recorders[i % count].0.execute { box.value.stop() }
        }
    }

    func shutdown() {
        self.group.shutdown()
    }
}

/// The session engine: `connections` chains of `Session.execute(_:completion:)` on the session's
/// loop, each sending its next request from the last one's completion (or when due).
final class SessionLoadEngine: LoadEngine, @unchecked Sendable {
    let loop: EventLoop
    let session: Session
    let recorders: [(EventLoop, LoadRecorder)]
    private let requests: [HTTPClientRequest]
    private let plan: LoadPlan
    // Loop-confined from start on.
    private var chains: [Chain] = []
    private var running = 0
    private var onDone: (@Sendable () -> Void)?

    final class Chain {
        var schedule: OpenLoopSchedule?
        var picker: RequestPicker
        var started = 0
        let quota: Int
        var stopped = false
        var pending: Scheduled?
        init(schedule: OpenLoopSchedule?, picker: RequestPicker, quota: Int) {
            self.schedule = schedule
            self.picker = picker
            self.quota = quota
        }
    }

    init(configuration: SessionConfiguration, requests: [HTTPClientRequest], plan: LoadPlan) throws {
        // Where `try EventLoopGroup.shared.installAsGlobalExecutor()` would go once the session
        // runs over a group (the completion chains below need no Swift executor).
        self.loop = try EventLoop(name: "hawser-load")
        var config = configuration
        config.maximumConnectionsPerHost = plan.connections
        if let t = plan.timeout { config.timeoutIntervalForResource = t }
        self.session = Session(configuration: config, eventLoop: self.loop)
        self.recorders = [(self.loop, LoadRecorder())]
        self.recorders[0].1.closedLoop = plan.rate == nil
        self.requests = requests
        self.plan = plan
    }

    func start(at origin: UInt64, onDone: @escaping @Sendable () -> Void) {
        self.loop.execute {
            self.onDone = onDone
            for i in 0..<self.plan.connections {
                self.chains.append(
                    Chain(
                        schedule: self.plan.schedule(i, origin: origin),
                        picker: RequestPicker(count: self.requests.count, order: self.plan.order, seed: i),
                        quota: self.plan.quota(i)
                    )
                )
            }
            self.running = self.chains.count
            for c in self.chains { self.next(c) }
        }
    }

    private func next(_ c: Chain) {
        guard !c.stopped else { return }
        guard c.started < c.quota else {
            self.end(c)
            return
        }
        let now = TaskMetrics.now()
        var intended = now
        if c.schedule != nil {
            switch c.schedule!.next(now: now) {
            case .send(let at): intended = at
            case .wait(let until):
                let base = self.loop.now
                c.pending = self.loop.schedule(in: until > base ? until - base : 0) { [self] in
                    c.pending = nil
                    self.next(c)
                }
                return
            }
        }
        c.started += 1
        let due = intended
        let recorder = self.recorders[0].1
        let request = self.requests[c.picker.next()]
        self.session.execute(request) { [self] result in
            guard !c.stopped else { return }
            let done = TaskMetrics.now()
            switch result {
            case .success(let r):
                recorder.response(
                    status: r.status,
                    bytes: UInt64(max(0, r.metrics.bytesReceived)),
                    intended: due,
                    sent: now,
                    now: done
                )
                self.next(c)
            case .failure(let e):
                recorder.error(LoadErrorClassifier.kind(of: e), e.description, now: done)
                // A failure may complete inside execute: go round the loop so a run of them
                // does not recurse, and pause a closed loop 10 ms so a refusing server is not
                // hammered.
                if c.schedule == nil {
                    c.pending = self.loop.schedule(in: 10_000_000) { [self] in
                        c.pending = nil
                        self.next(c)
                    }
                } else {
                    self.loop.execute { [self] in self.next(c) }
                }
            }
        }
    }

    private func end(_ c: Chain) {
        guard !c.stopped else { return }
        c.stopped = true
        c.pending?.cancel()
        c.pending = nil
        self.running -= 1
        if self.running == 0 {
            let d = self.onDone
            self.onDone = nil
            d?()
        }
    }

    func stop() {
        self.loop.execute { [self] in
            for c in self.chains { self.end(c) }
        }
    }

    func shutdown() {
        self.session.shutdown()
        self.loop.shutdown()
    }
}

extension SessionLoadEngine.Chain: @unchecked Sendable {}
