@testable import HawserCore
import HawserTestServer
import Synchronization
import Testing

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
                defer { session.shutdown(); loop.shutdown() }
                for _ in 0..<2_000 {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                }
                let entries = try loop.submitAndWait { loop.timerHeapCount }
                #expect(entries <= 200, "\(entries) timer entries after 2,000 requests")
            }
        }

        @Test("an idle pooled connection is closed after idleConnectionTimeout")
        func idleConnectionTimeout() async throws {
            try await expectNoFDLeak {
                let server = try TestServer()
                defer { server.shutdown() }
                var config = SessionConfiguration()
                config.idleConnectionTimeout = 0.1
                let loop = try EventLoop()
                let session = Session(configuration: config, eventLoop: loop)
                defer { session.shutdown(); loop.shutdown() }
                // Two uses of one connection: the second re-arms nothing, the first timer serves both.
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(second.metrics.isReusedConnection)
                #expect(session.poolStatistics().idleConnections == 1)
                let closed = AsyncStreamBox()
                loop.schedule(in: 400_000_000) { closed.signal() }
                await closed.wait()
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
                defer { session.shutdown(); loop.shutdown() }
                let (before, after, status) = try await withTaskExecutorPreference(loop) {
                    let before = loop.inEventLoop
                    let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    return (before, loop.inEventLoop, r.status)
                }
                #expect(before && after)
                #expect(status == 200)
            }
        }
    }
}
