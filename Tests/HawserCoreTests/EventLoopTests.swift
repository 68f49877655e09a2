import CHawser
import Dispatch
import HawserCore
import Synchronization
import Testing

extension NetworkTests {
    @Suite("EventLoop")
    struct EventLoopTests {
        @Test("execute from another thread runs the task on the loop thread")
        func executeRunsOnLoop() throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let onLoop = try loop.submitAndWait { loop.inEventLoop }
            #expect(onLoop)
            #expect(!loop.inEventLoop)
        }

        @Test("tasks submitted from one thread run in submission order")
        func taskOrder() throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let seen = Mutex<[Int]>([])
            for i in 0..<1000 { loop.execute { seen.withLock { $0.append(i) } } }
            try loop.submitAndWait {}
            #expect(seen.withLock { $0 } == Array(0..<1000))
        }

        @Test("timers fire in deadline order, not scheduling order")
        func timerOrder() async throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let seen = Mutex<[Int]>([])
            let done = AsyncStreamBox()
            for (i, ms) in [30, 10, 20].enumerated() {
                loop.schedule(in: UInt64(ms) * 1_000_000) {
                    let n = seen.withLock { s -> Int in
                        s.append(i)
                        return s.count
                    }
                    if n == 3 { done.signal() }
                }
            }
            await done.wait()
            #expect(seen.withLock { $0 } == [1, 2, 0])
        }

        @Test("a cancelled timer never fires, and the loop still serves later timers")
        func cancelledTimer() async throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let fired = Atomic<Int>(0)
            let done = AsyncStreamBox()
            let t = loop.schedule(in: 5_000_000) { fired.add(1, ordering: .relaxed) }
            t.cancel()
            // A later timer proves the loop passed the cancelled one's deadline.
            loop.schedule(in: 30_000_000) { done.signal() }
            await done.wait()
            #expect(fired.load(ordering: .relaxed) == 0)
        }

        @Test("a timer does not fire before its deadline")
        func timerNotEarly() async throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let start = CHawser_monotonic_ns()
            let firedAt = Mutex<UInt64>(0)
            let done = AsyncStreamBox()
            loop.schedule(in: 20_000_000) {
                firedAt.withLock { $0 = CHawser_monotonic_ns() }
                done.signal()
            }
            await done.wait()
            #expect(firedAt.withLock { $0 } - start >= 20_000_000)
        }

        @Test("shutdown joins the thread and closes the loop's descriptors")
        func shutdownClosesDescriptors() async throws {
            try await expectNoFDLeak("by an EventLoop") {
                let loop = try EventLoop()
                try loop.submitAndWait {}
                loop.shutdown()
            }
        }

        @Test(
            "work submitted from other threads while the loop shuts down runs at most once, and all of it submitted before shutdown runs"
        )
        func submittersRacingShutdown() async throws {
            try await expectNoFDLeak("by an EventLoop shut down under submissions") {
                for _ in 0..<20 {
                    let loop = try EventLoop()
                    let runs = Mutex<[Int: Int]>([:])
                    let mustRun = Mutex<Set<Int>>([])
                    let shutdownStarted = Atomic<Bool>(false)
                    let group = DispatchGroup()
                    for t in 0..<2 {
                        DispatchQueue.global().async(group: group) {
                            for i in 0..<2_000 {
                                let id = t * 10_000 + i
                                let before = !shutdownStarted.load(ordering: .acquiring)
                                loop.execute { runs.withLock { $0[id, default: 0] += 1 } }
                                // Submitted entirely before shutdown() began: the loop must run it.
                                if before, !shutdownStarted.load(ordering: .acquiring) {
                                    _ = mustRun.withLock { $0.insert(id) }
                                }
                            }
                        }
                    }
                    try loop.submitAndWait {}
                    shutdownStarted.store(true, ordering: .releasing)
                    loop.shutdown()
                    group.wait()
                    let ran = runs.withLock { $0 }
                    #expect(ran.values.allSatisfy { $0 == 1 }, "no task ran twice")
                    let missing = mustRun.withLock { $0 }.filter { ran[$0] == nil }
                    #expect(missing.isEmpty, "\(missing.count) tasks submitted before shutdown never ran")
                }
            }
        }

        @Test("shutdown runs the hooks that fail pending work")
        func shutdownFailsPendingWork() throws {
            let session: Session
            let loop = try EventLoop()
            session = Session(eventLoop: loop)
            // A request to a port that accepts but never answers stays pending until shutdown.
            let server = try ScriptedServer([[.hang]])
            defer { server.stop() }
            let d = RecordingDelegate()
            session.execute(HTTPClientRequest(url: url(server.baseURL + "/")), delegate: d)
            try loop.submitAndWait {}
            loop.shutdown()
            let r = d.record.withLock { $0 }
            #expect(r.completions == 1)
            #expect(d.error?.code == .sessionShutDown)
        }

        @Test("the resolver answers numeric addresses inline and localhost through getaddrinfo")
        func resolver() async throws {
            let literal = Mutex<[SocketAddress]>([])
            Resolver.shared.resolve(host: "127.0.0.1", port: 8080) { r in literal.withLock { $0 = (try? r.get()) ?? [] }
            }
            #expect(literal.withLock { $0 }.map(\.description) == ["127.0.0.1:8080"])
            let done = AsyncStreamBox()
            let named = Mutex<[SocketAddress]>([])
            Resolver.shared.resolve(host: "localhost", port: 80) { r in
                named.withLock { $0 = (try? r.get()) ?? [] }
                done.signal()
            }
            await done.wait()
            let addrs = named.withLock { $0 }
            #expect(!addrs.isEmpty)
            #expect(addrs.allSatisfy { $0.port == 80 && ($0.ipAddress == "127.0.0.1" || $0.ipAddress == "::1") })
        }
    }
}
