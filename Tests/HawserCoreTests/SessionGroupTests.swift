import Foundation
import HawserTestServer
import Synchronization
import Testing

@testable import HawserCore

// A session over a group of loops: the pure parts (which loop a request goes to, the shared
// per-host budget, the pool machine's events for it) without sockets, then the session itself
// against the test server.

@Suite("Session over a group of loops (pure parts)")
struct SessionGroupPureTests {
    @Test("off the loops, a request goes to the loop with the fewest in flight, the first such from the start")
    func chooserLeastBusy() {
        let counts = [3, 1, 1, 0, 2]
        #expect(LoopChooser.choose(count: 5, start: 0) { counts[$0] } == 3)
        #expect(LoopChooser.choose(count: 5, start: 4) { counts[$0] } == 3)
        let ties = [1, 0, 2, 0]
        #expect(LoopChooser.choose(count: 4, start: 0) { ties[$0] } == 1)
        #expect(LoopChooser.choose(count: 4, start: 2) { ties[$0] } == 3)
        #expect(LoopChooser.choose(count: 4, start: 3) { ties[$0] } == 3)
    }

    @Test("with every loop equally busy the pick goes round-robin with the start")
    func chooserRoundRobin() {
        let idle = [0, 0, 0]
        let picks = (0..<6).map { start in LoopChooser.choose(count: 3, start: start) { idle[$0] } }
        #expect(picks == [0, 1, 2, 0, 1, 2])
        #expect(LoopChooser.choose(count: 1, start: 7) { _ in 5 } == 0)
        #expect(LoopChooser.choose(count: 3, start: -1) { idle[$0] } == 2)
    }

    static let key = ConnectionKey(scheme: "http", host: "a.test", port: 80)
    static let other = ConnectionKey(scheme: "http", host: "b.test", port: 80)

    @Test("the budget gives at most the limit of permits per key, and wakes the loops that were refused")
    func budget() {
        var b = ConnectionBudget(limit: 2)
        #expect(b.acquire(Self.key, loop: 0) == true)
        #expect(b.acquire(Self.key, loop: 1) == true)
        #expect(b.acquire(Self.key, loop: 1) == false)
        #expect(b.acquire(Self.key, loop: 0) == false)
        #expect(b.isWanted(Self.key))
        #expect(b.acquire(Self.other, loop: 1) == true, "another key has a budget of its own")
        #expect(b.isWanted(Self.other) == false)
        #expect(b.permits(Self.key) == 2)
        #expect(b.release(Self.key) == [0, 1])
        #expect(b.isWanted(Self.key) == false)
        #expect(b.permits(Self.key) == 1)
        #expect(b.acquire(Self.key, loop: 1) == true)
        #expect(b.release(Self.key) == [])
        #expect(b.release(Self.key) == [])
        #expect(b.permits(Self.key) == 0)
        #expect(ConnectionBudget(limit: 0).limit == 1)
    }

    @Test("a connect the budget refuses blocks the origin until unblock, and its waiters keep waiting")
    func machineDeniedAndUnblocked() {
        typealias T = PoolStateMachineTests
        var h = T.Harness()
        let r1 = T.Req("r1")
        let r2 = T.Req("r2")
        let origin = h.m.origin(for: T.key)
        #expect(h.submit(r1) == ["connect 0 a.test"])
        h.m.connectDenied(origin: origin)
        #expect(h.m.connectingCount == 0)
        #expect(h.submit(r2) == [], "blocked: no connect while the budget is held elsewhere")
        #expect(h.m.waitingCount == 2)
        h.m.unblock(origin, into: &h.actions)
        #expect(h.take() == ["connect 0 a.test", "connect 0 a.test"])
        #expect(h.connected(T.Conn("c1")) == ["execute r1 on c1"])
    }

    @Test("closeIdle closes the least recently used idle connection, and nothing when none is idle")
    func machineCloseIdle() {
        typealias T = PoolStateMachineTests
        var h = T.Harness()
        let origin = h.m.origin(for: T.key)
        h.m.closeIdle(origin, into: &h.actions)
        #expect(h.take() == [])
        let c1 = T.Conn("c1")
        let c2 = T.Conn("c2")
        _ = h.submit(T.Req("r1"))
        _ = h.submit(T.Req("r2"))
        #expect(h.connected(c1) == ["execute r1 on c1"])
        #expect(h.connected(c2) == ["execute r2 on c2"])
        #expect(h.released(c1, now: 1) == ["timer c1 60"])
        #expect(h.released(c2, now: 2) == ["timer c2 60"])
        h.m.closeIdle(origin, into: &h.actions)
        #expect(h.take() == ["close c1"], "the least recently used goes first")
        #expect(h.m.idleCount == 1 && h.m.connectionCount == 1)
        #expect(h.closed(c1) == [], "already forgotten: its close report changes nothing")
        #expect(h.submit(T.Req("r3")) == ["execute r3 on c2"])
    }
}

extension NetworkTests {
    /// The session over several loops against the test server. Serialized: the fd-leak checks
    /// count the whole process's descriptors.
    @Suite("Session over a group of loops", .serialized)
    struct SessionGroupTests {
        /// A session over `count` loops of its own (with manual clocks when asked), and a server.
        static func withGroup(
            loops count: Int = 2,
            manualClock: Bool = false,
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (TestServer, Session, [EventLoop]) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                var config = SessionConfiguration()
                configure(&config)
                let server = try TestServer()
                let loops = try (0..<count).map { i in
                    try EventLoop(name: "group-test-\(i)", clock: manualClock ? ManualClock() : nil)
                }
                let session = Session(configuration: config, eventLoops: loops)
                do {
                    try await body(server, session, loops)
                } catch {
                    session.shutdown()
                    for l in loops { l.shutdown() }
                    server.shutdown()
                    throw error
                }
                session.shutdown()
                for l in loops { l.shutdown() }
                server.shutdown()
            }
        }

        /// Starts `request` and reports, on completion, the task's loop index and whether the
        /// completion ran on that loop's thread.
        /// Starts `request` and reports, on completion, the index of the loop whose thread ran the
        /// completion (nil: none of them) and whether that is the task's loop;
        /// `runningAfterExecute`: the session's running tasks as counted right after `execute`
        /// returned, on the calling thread.
        static func run(
            _ session: Session,
            _ loops: [EventLoop],
            _ request: HTTPClientRequest
        ) async -> (
            loop: Int?, onItsThread: Bool, runningAfterExecute: Int, result: Result<HTTPClientResponse, HawserError>
        ) {
            let box = Mutex<(task: RequestTask?, running: Int)>((nil, 0))
            let (ran, result) = await withCheckedContinuation {
                (cont: CheckedContinuation<(Int?, Result<HTTPClientResponse, HawserError>), Never>) in
                let task = session.execute(request) { result in
                    cont.resume(returning: (loops.firstIndex { $0.inEventLoop }, result))
                }
                box.withLock { $0.task = task }
                let running = session.poolStatistics().runningTasks
                box.withLock { $0.running = running }
            }
            let (task, running) = box.withLock { ($0.task, $0.running) }
            let taskLoop = task.flatMap { t in loops.firstIndex { $0 === t.eventLoop } }
            return (ran, ran != nil && ran == taskLoop, running, result)
        }

        @Test("a request from a task running on loop K is served by loop K's connections, submitted with no hop")
        func affinity() async throws {
            try await Self.withGroup(loops: 3) { server, session, loops in
                for k in [2, 0, 1, 2, 1] {
                    let served = await withTaskExecutorPreference(loops[k]) {
                        await Self.run(session, loops, HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    }
                    #expect(
                        served.loop == k,
                        "a task on loop \(k) was served on loop \(String(describing: served.loop))"
                    )
                    #expect(served.onItsThread)
                    // Submitted on the spot: the loop's pool held it when execute returned.
                    #expect(served.runningAfterExecute == 1, "the request was not in loop \(k)'s pool yet")
                    #expect((try? served.result.get())?.status == 200)
                }
                // Each of the three loops opened its own connection, and reused it.
                let stats = session.poolStatistics()
                #expect(stats.openConnections == 3 && stats.idleConnections == 3, "\(stats)")
                #expect(stats.runningTasks == 0)
                #expect(server.acceptedConnections == 3)
            }
        }

        @Test("off the loops, requests go to the least busy loop, ties round-robin")
        func offLoopRule() async throws {
            try await Self.withGroup(loops: 2) { server, session, loops in
                // Sequential requests: each finds both loops idle, so they alternate.
                var picks: [Int] = []
                for _ in 0..<4 {
                    let r = await Self.run(session, loops, HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    #expect(r.onItsThread)
                    picks.append(r.loop ?? -1)
                }
                #expect(picks == [1, 0, 1, 0] || picks == [0, 1, 0, 1], "\(picks)")
                // Requests that stay in flight: three on loop 0 first (from its own thread), then
                // three made off the loops all go to loop 1, the least busy.
                let held = Mutex<[RequestTask]>([])
                let done = AsyncStreamBox()
                let completions = Atomic<Int>(0)
                let slow = HTTPClientRequest(url: url(server.baseURL + "/delay/600000"))
                await withTaskExecutorPreference(loops[0]) {
                    for _ in 0..<3 {
                        let t = session.execute(slow) { _ in
                            if completions.add(1, ordering: .relaxed).newValue == 6 { done.signal() }
                        }
                        held.withLock { $0.append(t) }
                    }
                }
                var offLoop: [Int] = []
                for _ in 0..<3 {
                    let t = session.execute(slow) { _ in
                        if completions.add(1, ordering: .relaxed).newValue == 6 { done.signal() }
                    }
                    held.withLock { $0.append(t) }
                    offLoop.append(loops.firstIndex { $0 === t.eventLoop } ?? -1)
                }
                #expect(offLoop == [1, 1, 1], "\(offLoop)")
                for t in held.withLock({ $0 }) { t.cancel() }
                await done.wait()
            }
        }

        /// Records the summed pool counts an instrumentation hears.
        final class CountsRecorder: RequestInstrumentation, @unchecked Sendable {
            let seen = Mutex<[PoolCounts]>([])
            func observe(_ request: HTTPClientRequest) -> (any RequestObserver)? { nil }
            func poolCountsChanged(_ counts: PoolCounts) { self.seen.withLock { $0.append(counts) } }
            var maxOpen: Int { self.seen.withLock { $0.map(\.open).max() ?? 0 } }
        }

        @Test("the per-host limit holds across loops, and every request is served", arguments: [1, 2])
        func limitAcrossLoops(limit: Int) async throws {
            let recorder = CountsRecorder()
            try await Self.withGroup(
                loops: 2,
                {
                    $0.maximumConnectionsPerHost = limit
                    $0.instrumentation = recorder
                }
            ) { server, session, loops in
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for i in 0..<16 {
                        group.addTask(executorPreference: loops[i % 2]) {
                            let r = try await session.response(
                                for: HTTPClientRequest(url: url(server.baseURL + "/delay/\(i % 3)"))
                            )
                            return r.status
                        }
                    }
                    var all: [Int] = []
                    for try await s in group { all.append(s) }
                    return all
                }
                #expect(statuses == Array(repeating: 200, count: 16))
                #expect(recorder.maxOpen <= limit, "\(recorder.seen.withLock { $0 })")
                #expect(recorder.maxOpen >= 1)
                let stats = session.poolStatistics()
                #expect(stats.openConnections <= limit)
                #expect(stats.waitingTasks == 0 && stats.runningTasks == 0, "\(stats)")
            }
        }

        @Test("each loop's idle connections close after the idle timeout; statistics are summed")
        func idleTimeoutsAndStatistics() async throws {
            let second: UInt64 = 1_000_000_000
            try await Self.withGroup(loops: 2, manualClock: true, { $0.idleConnectionTimeout = 60 }) {
                server,
                session,
                loops in
                for k in 0..<2 {
                    _ = try await withTaskExecutorPreference(loops[k]) {
                        try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    }
                }
                var stats = session.poolStatistics()
                #expect(stats.openConnections == 2 && stats.idleConnections == 2, "\(stats)")
                try loops[0].advanceTime(by: 60 * second)
                stats = session.poolStatistics()
                #expect(stats.openConnections == 1 && stats.idleConnections == 1, "\(stats)")
                try loops[1].advanceTime(by: 60 * second - 1)
                #expect(session.poolStatistics().openConnections == 1)
                try loops[1].advanceTime(by: 1)
                #expect(session.poolStatistics().openConnections == 0)
            }
        }

        @Test("a cookie set by a response on one loop goes with a request on another")
        func cookiesAcrossLoops() async throws {
            try await Self.withGroup(loops: 2) { server, session, loops in
                let set = await withTaskExecutorPreference(loops[0]) {
                    await Self.run(
                        session,
                        loops,
                        HTTPClientRequest(url: url(server.baseURL + "/cookies/set?flavour=oat"))
                    )
                }
                #expect(set.loop == 0)
                let read = await withTaskExecutorPreference(loops[1]) {
                    await Self.run(session, loops, HTTPClientRequest(url: url(server.baseURL + "/cookies")))
                }
                #expect(read.loop == 1)
                let body = try read.result.get().body
                #expect(String(decoding: body, as: UTF8.self) == "flavour=oat")
            }
        }

        @Test("shutdown fails every loop's tasks and closes every loop's connections, leaking no descriptor")
        func shutdownEveryLoop() async throws {
            try await Self.withGroup(loops: 2) { server, session, loops in
                for k in 0..<2 {
                    _ = try await withTaskExecutorPreference(loops[k]) {
                        try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    }
                }
                let pending = Mutex<[HawserError.Code]>([])
                let done = AsyncStreamBox()
                for k in 0..<2 {
                    _ = await withTaskExecutorPreference(loops[k]) {
                        session.execute(HTTPClientRequest(url: url(server.baseURL + "/delay/600000"))) { result in
                            if case .failure(let e) = result {
                                let n = pending.withLock {
                                    $0.append(e.code)
                                    return $0.count
                                }
                                if n == 2 { done.signal() }
                            }
                        }
                    }
                }
                #expect(session.poolStatistics().runningTasks == 2)
                session.shutdown()
                await done.wait()
                #expect(pending.withLock { $0 } == [.sessionShutDown, .sessionShutDown])
                let stats = session.poolStatistics()
                #expect(stats.openConnections == 0 && stats.runningTasks == 0, "\(stats)")
                let late = await Self.run(session, loops, HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(throws: HawserError.self) { try late.result.get() }
            }
        }

        @Test("a session shut down from one of its loops shuts the other loops down too")
        func shutdownFromALoop() async throws {
            try await Self.withGroup(loops: 2) { server, session, loops in
                for k in 0..<2 {
                    _ = try await withTaskExecutorPreference(loops[k]) {
                        try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    }
                }
                #expect(session.poolStatistics().openConnections == 2)
                _ = try loops[0].submitAndWait { session.shutdown() }
                // Loop 1's pool shuts down when loop 1 runs what loop 0 sent it: wait for a turn there.
                _ = try loops[1].submitAndWait {}
                #expect(session.poolStatistics().openConnections == 0)
            }
        }

        @Test("the default session spans the shared group")
        func defaultSpansShared() {
            let session = Session()
            #expect(session.eventLoops.count == EventLoopGroup.shared.loops.count)
            #expect(zip(session.eventLoops, EventLoopGroup.shared.loops).allSatisfy { $0 === $1 })
            #expect(Session.shared.eventLoops.count == EventLoopGroup.shared.loops.count)
            let one = try! EventLoop()
            defer { one.shutdown() }
            #expect(Session(eventLoop: one).eventLoops.count == 1)
        }
    }
}
