import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    /// Broken peers, timeouts and cancellation. Every test asserts the error kind and that the
    /// delegate was completed exactly once; the suite checks for leaked descriptors.
    @Suite("Faults, timeouts and cancellation", .serialized)
    struct FaultTests {
        static func withSession(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                var config = SessionConfiguration()
                configure(&config)
                let loop = try EventLoop()
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                try await body(session)
            }
        }

        /// Like `withSession`, on a loop whose time moves only through `advanceTime(by:)`.
        static func withVirtualSession(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session, ManualClock) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                var config = SessionConfiguration()
                configure(&config)
                let clock = ManualClock()
                let loop = try EventLoop(clock: clock)
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                try await body(session, clock)
            }
        }

        static let second: UInt64 = 1_000_000_000

        /// Runs one request with a recording delegate and returns the record.
        static func run(_ session: Session, _ request: HTTPClientRequest) async -> RecordingDelegate.Record {
            let d = RecordingDelegate()
            session.execute(request, delegate: d)
            return await d.wait()
        }

        static func error(_ r: RecordingDelegate.Record) -> HawserError? {
            if case .failure(let e)? = r.result { return e }
            return nil
        }

        @Test(
            "truncation at each stage is connectionLost, never a success",
            arguments: [
                "HTTP/1.1 200 OK\r\nContent-Le",  // mid-head
                "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234",  // mid Content-Length body
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",  // mid chunk
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",  // before last chunk
                "",  // nothing at all
            ]
        )
        func truncation(_ prefix: String) async throws {
            let server = try ScriptedServer([[.readRequest(), .sendText(prefix), .close]])
            defer { server.stop() }
            try await Self.withSession { session in
                let r = await Self.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .connectionLost)
            }
        }

        @Test("a reset mid-response is connectionLost")
        func reset() async throws {
            let server = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"), .reset]
            ])
            defer { server.stop() }
            try await Self.withSession { session in
                let r = await Self.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .connectionLost)
            }
        }

        @Test(
            "smuggling-relevant framing is a protocolError that names the rule",
            arguments: [
                ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer-Encoding"),
                ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef", "Content-Length"),
                ("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nabcde", "colon"),
                ("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nabcde", "Content-Length"),
                ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", "chunk"),
                ("SMTP ready\r\n\r\n", "status"),
            ]
        )
        func smuggling(_ response: String, _ mentions: String) async throws {
            let server = try ScriptedServer([[.readRequest(), .sendText(response), .waitForClose]])
            defer { server.stop() }
            try await Self.withSession { session in
                let r = await Self.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                let e = try #require(Self.error(r))
                #expect(e.code == .protocolError)
                #expect(e.underlying is HTTP1ParseError)
                #expect(e.message.lowercased().contains(mentions.lowercased()), "message was: \(e.message)")
            }
        }

        @Test("a server that never answers hits the idle timeout at exactly timeoutIntervalForRequest")
        func idleTimeout() async throws {
            let server = try ScriptedServer([[.readRequest(), .hang]])
            defer { server.stop() }
            try await Self.withVirtualSession({ $0.timeoutIntervalForRequest = 60 }) { session, clock in
                let t0 = clock.now
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/")), delegate: d)
                #expect(await eventually { server.requestCount == 1 }, "the request reached the server")
                try session.eventLoop.advanceTime(by: 60 * Self.second - 1)
                #expect(d.record.withLock { $0.completions } == 0, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .idleTimeout)
                #expect(r.metrics?.responseEnd == t0 + 60 * Self.second)
            }
        }

        @Test("bytes that keep coming keep the idle timer alive, but the resource timer fires at its instant")
        func resourceTimeout() async throws {
            let first = ScriptedServer.Gate()
            let second = ScriptedServer.Gate()
            let server = try ScriptedServer([
                [
                    .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\na"),
                    .gate(first), .sendText("b"), .gate(second), .sendText("c"), .hang,
                ]
            ])
            defer { server.stop() }
            try await Self.withVirtualSession({
                $0.timeoutIntervalForRequest = 5
                $0.timeoutIntervalForResource = 12
            }) { session, clock in
                let t0 = clock.now
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/")), delegate: d)
                #expect(await eventually { d.record.withLock { $0.body.count } == 1 })
                // Each byte comes 4 s after the last: under the 5 s idle timeout every time.
                try session.eventLoop.advanceTime(by: 4 * Self.second)
                first.openGate()
                #expect(await eventually { d.record.withLock { $0.body.count } == 2 })
                try session.eventLoop.advanceTime(by: 4 * Self.second)
                second.openGate()
                #expect(await eventually { d.record.withLock { $0.body.count } == 3 })
                try session.eventLoop.advanceTime(by: 4 * Self.second - 1)
                #expect(d.record.withLock { $0.completions } == 0, "12 s minus a nanosecond: still running")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .resourceTimeout)
                #expect(clock.now == t0 + 12 * Self.second)
            }
        }

        @Test("a trickled response (one byte at a time) parses correctly")
        func trickle() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/fault/trickle")))
                #expect(String(decoding: r.body, as: UTF8.self) == "0123456789")
            }
        }

        @Test("a connect that never completes hits the connect timeout at exactly connectTimeout")
        func connectTimeout() async throws {
            let full = try FullBacklogListener()
            defer { full.close() }
            try await Self.withVirtualSession({ $0.connectTimeout = 30 }) { session, clock in
                let t0 = clock.now
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("http://127.0.0.1:\(full.port)/")), delegate: d)
                #expect(session.poolStatistics().connecting == 1)
                try session.eventLoop.advanceTime(by: 30 * Self.second - 1)
                #expect(d.record.withLock { $0.completions } == 0, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .connectTimeout)
                #expect(clock.now == t0 + 30 * Self.second)
                #expect(session.poolStatistics().connecting == 0)
            }
        }

        @Test("cancel while queued, connecting, mid-head and mid-body: exactly one cancelled completion")
        func cancellationEverywhere() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession({ $0.maximumConnectionsPerHost = 1 }) { session in
                // Occupy the only connection so the next task queues.
                let blocker = RecordingDelegate()
                let blockTask = session.execute(
                    HTTPClientRequest(url: url(server.baseURL + "/fault/no-answer")),
                    delegate: blocker
                )
                let queued = RecordingDelegate()
                let queuedTask = session.execute(
                    HTTPClientRequest(url: url(server.baseURL + "/hello")),
                    delegate: queued
                )
                #expect(session.poolStatistics().waitingTasks >= 1)
                queuedTask.cancel()
                let q = await queued.wait()
                #expect(q.completions == 1 && Self.error(q)?.code == .cancelled)

                // Mid-head: the blocker has sent its request and waits for a head that never comes.
                blockTask.cancel()
                let b = await blocker.wait()
                #expect(b.completions == 1 && Self.error(b)?.code == .cancelled)

                // Mid-body: cancel from the body callback after the first bytes.
                let mid = RecordingDelegate()
                mid.onBody = { task, _ in task.cancel() }
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/bytes/10000000")), delegate: mid)
                let m = await mid.wait()
                #expect(m.completions == 1 && Self.error(m)?.code == .cancelled)
                #expect(m.body.count < 10_000_000)

                // Right after submission (resolving/connecting): cancel at once.
                for _ in 0..<20 {
                    let d = RecordingDelegate()
                    session.execute(HTTPClientRequest(url: url(server.baseURL + "/hello")), delegate: d).cancel()
                    let r = await d.wait()
                    #expect(r.completions == 1)
                    #expect(Self.error(r)?.code == .cancelled || r.head?.status == 200)
                }

                // The pool is consistent afterwards: a normal request still works.
                let ok = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(ok.status == 200)
                let stats = session.poolStatistics()
                #expect(stats.runningTasks == 0 && stats.waitingTasks == 0)
            }
        }

        @Test("cancelling the Swift task cancels the request")
        func asyncCancellation() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession { session in
                let t = Task {
                    try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/fault/no-answer")))
                }
                // Wait until the request is actually running on a connection.
                while session.poolStatistics().runningTasks == 0 { await Task.yield() }
                t.cancel()
                do {
                    _ = try await t.value
                    Issue.record("expected cancellation")
                } catch let e as HawserError {
                    #expect(e.code == .cancelled)
                }
            }
        }

        @Test("a kept-alive connection the server dropped is retried once for GET")
        func staleConnectionRetry() async throws {
            let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            // Connection 1 answers once, then closes when the second request arrives (the race);
            // connection 2 answers normally.
            let server = try ScriptedServer([
                [.readRequest(), .sendText(ok), .readRequest(), .close],
                [.readRequest(), .sendText(ok), .waitForClose],
            ])
            defer { server.stop() }
            try await Self.withSession { session in
                let first = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/a")))
                #expect(first.metrics.retryCount == 0)
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/b")))
                #expect(String(decoding: second.body, as: UTF8.self) == "ok")
                #expect(second.metrics.retryCount == 1)
                #expect(second.metrics.isReusedConnection == false)
            }
        }

        @Test("the same race for POST is not retried: it fails with connectionLost")
        func staleConnectionNoRetryForPost() async throws {
            let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            let server = try ScriptedServer([[.readRequest(), .sendText(ok), .readRequest(body: 3), .close]])
            defer { server.stop() }
            try await Self.withSession { session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/a")))
                let r = await Self.run(
                    session,
                    HTTPClientRequest(method: .post, url: url(server.baseURL + "/b"), body: .bytes([1, 2, 3]))
                )
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .connectionLost)
            }
        }

        @Test("an idle pooled connection closed by the server is dropped, not reused")
        func idleConnectionClosedByServer() async throws {
            let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            let server = try ScriptedServer([
                [.readRequest(), .sendText(ok), .close],
                [.readRequest(), .sendText(ok), .waitForClose],
            ])
            defer { server.stop() }
            try await Self.withSession { session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/a")))
                // Wait until the loop has seen the FIN and dropped the idle connection.
                while session.poolStatistics().openConnections > 0 { await Task.yield() }
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/b")))
                #expect(r.metrics.retryCount == 0)
                #expect(r.metrics.isReusedConnection == false)
            }
        }

        @Test("a buffered body over maximumBufferedBodySize fails with limitExceeded")
        func bufferedLimit() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession({ $0.maximumBufferedBodySize = 1000 }) { session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/bytes/5000")))
                    Issue.record("expected limitExceeded")
                } catch let error as HawserError {
                    #expect(error.code == .limitExceeded)
                }
            }
        }

        @Test("pausing reading stops the body until resumed (back-pressure)")
        func backPressure() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession { session in
                let d = RecordingDelegate()
                let paused = Atomic<Bool>(false)
                let sizeAtPause = Atomic<Int>(0)
                d.onBody = { task, total in
                    if !paused.exchange(true, ordering: .relaxed) {
                        sizeAtPause.store(total, ordering: .relaxed)
                        task.pauseReading()
                    }
                }
                let task = session.execute(HTTPClientRequest(url: url(server.baseURL + "/bytes/8000000")), delegate: d)
                while !paused.load(ordering: .relaxed) { await Task.yield() }
                // While paused, the loop delivers at most what was already buffered in one read.
                try session.eventLoop.submitAndWait {}
                let during = d.record.withLock { $0.body.count }
                #expect(during - sizeAtPause.load(ordering: .relaxed) <= 64 * 1024)
                #expect(d.record.withLock { $0.completions } == 0)
                task.resumeReading()
                let r = await d.wait()
                #expect(r.body.count == 8_000_000)
                #expect(r.completions == 1)
            }
        }

        @Test("cancel while writing a large body that the server never reads")
        func cancelWhileWriting() async throws {
            let server = try ScriptedServer([[.stall]])
            defer { server.stop() }
            try await Self.withSession { session in
                let d = RecordingDelegate()
                let body = [UInt8](repeating: 7, count: 64 * 1024 * 1024)
                let task = session.execute(
                    HTTPClientRequest(method: .put, url: url(server.baseURL + "/"), body: .bytes(body)),
                    delegate: d
                )
                // Wait until the loop has written some of it and is blocked on a full socket.
                while d.record.withLock({ $0.sentProgress.isEmpty }) && session.poolStatistics().runningTasks > 0 {
                    try session.eventLoop.submitAndWait {}
                    await Task.yield()
                }
                task.cancel()
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(Self.error(r)?.code == .cancelled)
            }
        }

        @Test("cancel while resolving a name: exactly one completion; names record DNS timings")
        func cancelWhileResolving() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withSession { session in
                // A name goes through the resolver threads; cancelling at once lands while it resolves
                // (or, if the resolver is quicker, later): either way one completion.
                for _ in 0..<10 {
                    let d = RecordingDelegate()
                    session.execute(HTTPClientRequest(url: url("http://localhost:\(server.port)/hello")), delegate: d)
                        .cancel()
                    let r = await d.wait()
                    #expect(r.completions == 1)
                    #expect(Self.error(r)?.code == .cancelled || r.head?.status == 200)
                }
                // A connection made for a name carries DNS timings in its first task's metrics.
                let fresh = Session(eventLoop: session.eventLoop)
                defer { fresh.shutdown() }
                let ok = try await fresh.response(
                    for: HTTPClientRequest(url: url("http://localhost:\(server.port)/hello"))
                )
                #expect(ok.status == 200)
                #expect(ok.metrics.domainLookupStart != nil && ok.metrics.domainLookupEnd != nil)
                #expect(ok.metrics.domainLookupEnd! >= ok.metrics.domainLookupStart!)
                #expect(
                    ok.metrics.remoteAddress?.ipAddress == "127.0.0.1" || ok.metrics.remoteAddress?.ipAddress == "::1"
                )
            }
        }
    }
}
