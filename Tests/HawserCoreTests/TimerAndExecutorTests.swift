import HawserTestServer
import Synchronization
import Testing

@testable import HawserCore
@testable import HawserPosix

extension NetworkTests {
    @Suite("Timers under load and the loop as task executor", .serialized)
    struct TimerAndExecutorTests {
        @Test("cancelled long timers do not pile up in the heap")
        func cancelledTimersAreCompacted() throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let count = try loop.submitAndWait { () -> Int in
                for _ in 0..<10_000 {
                    let t = loop.schedule(in: 7 * 24 * 3_600 * 1_000_000_000) {}
                    t.cancel()
                }
                return loop.timerHeapCount
            }
            #expect(count <= 200, "heap holds \(count) entries after 10,000 cancelled timers")
        }

        @Test("2,000 requests leave a bounded number of timer entries behind")
        func requestsDoNotLeakTimers() async throws {
            try await expectNoFDLeak {
                let server = try TestServer()
                defer { server.shutdown() }
                let loop = try EventLoop()
                let session = Session(eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                for _ in 0..<2_000 {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                }
                let entries = try loop.submitAndWait { loop.timerHeapCount }
                #expect(entries <= 200, "\(entries) timer entries after 2,000 requests")
            }
        }

        @Test("an idle pooled connection is closed at exactly idleConnectionTimeout after its last use")
        func idleConnectionTimeout() async throws {
            let second: UInt64 = 1_000_000_000
            try await expectNoFDLeak {
                let server = try TestServer()
                defer { server.shutdown() }
                var config = SessionConfiguration()
                config.idleConnectionTimeout = 60
                let loop = try EventLoop(clock: ManualClock())
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                // 30 s later a second use of the same connection: its one timer (armed at the first
                // release) then finds it idle for only 30 s and re-arms for the rest.
                try loop.advanceTime(by: 30 * second)
                let second1 = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(second1.metrics.isReusedConnection)
                #expect(session.poolStatistics().idleConnections == 1)
                try loop.advanceTime(by: 60 * second - 1)
                #expect(session.poolStatistics().openConnections == 1, "idle for a nanosecond less than the timeout")
                try loop.advanceTime(by: 1)
                #expect(session.poolStatistics().openConnections == 0)
                let third = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(third.metrics.isReusedConnection == false)
            }
        }

        @Test("with the loop as task executor, a request is awaited without leaving the loop thread")
        func loopAsTaskExecutor() async throws {
            try await expectNoFDLeak {
                let server = try TestServer()
                defer { server.shutdown() }
                let loop = try EventLoop()
                let session = Session(eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                let (before, after, status) = try await withTaskExecutorPreference(loop) {
                    let before = loop.inEventLoop
                    let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    return (before, loop.inEventLoop, r.status)
                }
                #expect(before && after)
                #expect(status == 200)
            }
        }

        @Test("releasing a Session fails its pending task with sessionShutDown and frees its pool")
        func releasedSession() async throws {
            let server = try ScriptedServer([[.readRequest(), .hang]])
            defer { server.stop() }
            try await expectNoFDLeak {
                let loop = try EventLoop()
                defer { loop.shutdown() }
                let d = RecordingDelegate()
                do {
                    let session = Session(eventLoop: loop)
                    session.execute(HTTPClientRequest(url: url(server.baseURL + "/")), delegate: d)
                    #expect(try loop.submitAndWait { loop.shutdownHookCount } == 1)
                }
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(d.error?.code == .sessionShutDown)
                #expect(try loop.submitAndWait { loop.shutdownHookCount } == 0)
            }
        }

        @Test("a request on a session whose loop has shut down completes at once, exactly once")
        func deadLoop() async throws {
            let loop = try EventLoop()
            let session = Session(eventLoop: loop)
            loop.shutdown()
            #expect(loop.isShutDown)
            let d = RecordingDelegate()
            session.execute(HTTPClientRequest(url: url("http://127.0.0.1:1/")), delegate: d)
            let r = await d.wait()
            #expect(r.completions == 1)
            #expect(d.error?.code == .sessionShutDown)
            // Work submitted to the dead loop is dropped, never run and never written to its old eventfd.
            let ran = Mutex(false)
            loop.execute { ran.withLock { $0 = true } }
            #expect(ran.withLock { $0 } == false)
        }
    }
}
