import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    /// `SessionConfiguration.responder`: answers in-process, before any IO.
    @Suite("Responder (test doubles)", .serialized)
    struct ResponderTests {
        static let second: UInt64 = 1_000_000_000

        /// A session with `stub` as its responder, on a loop of its own (virtual time when `virtual`).
        static func withStubbedSession(
            _ stub: any HTTPResponder,
            virtual: Bool = false,
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                var config = SessionConfiguration()
                config.proxy = .none
                config.responder = stub
                configure(&config)
                let loop = virtual ? try EventLoop(clock: ManualClock()) : try EventLoop()
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                try await body(session)
            }
        }

        static func run(_ session: Session, _ request: HTTPClientRequest) async -> RecordingDelegate.Record {
            let d = RecordingDelegate()
            session.execute(request, delegate: d)
            return await d.wait()
        }

        static func descriptorCount() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
        }

        @Test("routes answer by path or absolute URL, by method, with or without the query; the last added wins")
        func routes() async throws {
            let stub = StubResponder()
            stub.on(.get, "/users/1", .json(#"{"id":1}"#))
            stub.on(.post, "/users/1", .response(status: 201, body: "made"))
            stub.on("http://api.test/search?q=a", .response(status: 200, body: "a"))
            stub.on("http://api.test/search", .response(status: 200, body: "any query"))
            stub.on("/override", .response(status: 500))
            stub.on("/override", .response(status: 204))
            try await Self.withStubbedSession(stub) { session in
                let get = try await session.response(for: HTTPClientRequest(url: url("http://api.test/users/1?x=1")))
                #expect(get.status == 200)
                #expect(get.headers["Content-Type"] == "application/json")
                #expect(String(decoding: get.body, as: UTF8.self) == #"{"id":1}"#)
                let post = try await session.response(
                    for: HTTPClientRequest(method: .post, url: url("https://other.test/users/1"))
                )
                #expect(post.status == 201 && String(decoding: post.body, as: UTF8.self) == "made")
                let a = try await session.response(for: HTTPClientRequest(url: url("http://api.test/search?q=a")))
                #expect(String(decoding: a.body, as: UTF8.self) == "any query", "the later route wins")
                let o = try await session.response(for: HTTPClientRequest(url: url("http://api.test/override")))
                #expect(o.status == 204)
            }
        }

        @Test("a route with several answers gives them in turn, then repeats the last")
        func sequence() async throws {
            let stub = StubResponder()
            stub.on(
                "/flaky",
                [.failure(.connectionLost, "reset by the stub"), .response(status: 503), .response(status: 200)]
            )
            try await Self.withStubbedSession(stub) { session in
                let request = HTTPClientRequest(url: url("http://api.test/flaky"))
                do {
                    _ = try await session.response(for: request)
                    Issue.record("the first answer is a failure")
                } catch let error as HawserError {
                    #expect(error.code == .connectionLost)
                    #expect(error.message == "reset by the stub")
                    #expect(error.url?.absoluteString == "http://api.test/flaky", "the task's URL is filled in")
                }
                #expect(try await session.response(for: request).status == 503)
                #expect(try await session.response(for: request).status == 200)
                #expect(try await session.response(for: request).status == 200)
            }
        }

        @Test("a closure answers what no route matches; unmatched requests fail with resourceUnavailable")
        func closureAndUnmatched() async throws {
            let stub = StubResponder { request in
                request.url.path.hasPrefix("/echo/")
                    ? .response(status: 200, body: String(request.url.path.dropFirst(6))) : nil
            }
            try await Self.withStubbedSession(stub) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url("http://api.test/echo/hi")))
                #expect(String(decoding: r.body, as: UTF8.self) == "hi")
                do {
                    _ = try await session.response(
                        for: HTTPClientRequest(method: .delete, url: url("http://api.test/x"))
                    )
                    Issue.record("an unmatched request succeeded")
                } catch let error as HawserError {
                    #expect(error.code == .resourceUnavailable)
                    #expect(error.message.contains("DELETE http://api.test/x"))
                }
            }
        }

        @Test("unmatched = .network sends what no route answers to the real server")
        func passThrough() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let stub = StubResponder(unmatched: .network)
            stub.on("/stubbed", .response(status: 299))
            try await Self.withStubbedSession(stub) { session in
                let s = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/stubbed")))
                #expect(s.status == 299)
                let n = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(String(decoding: n.body, as: UTF8.self) == "Hello, World!")
                #expect(server.requestCount(target: "/stubbed") == 0, "the stubbed request never reached the server")
                #expect(server.requestCount(target: "/hello") == 1)
            }
        }

        @Test("no IO: no descriptor opened, no connection, for a port nothing listens on")
        func noIO() async throws {
            let stub = StubResponder()
            stub.on("/", .response(status: 200, body: "from the stub"))
            try await Self.withStubbedSession(stub) { session in
                _ = session.poolStatistics()  // the loop is up before counting
                let before = Self.descriptorCount()
                for _ in 0..<5 {
                    let r = try await session.response(for: HTTPClientRequest(url: url("http://127.0.0.1:9/")))
                    #expect(r.status == 200)
                    #expect(
                        r.metrics.connectStart == nil && r.metrics.remoteAddress == nil && r.metrics.bytesReceived == 0
                    )
                }
                #expect(Self.descriptorCount() == before)
                let stats = session.poolStatistics()
                #expect(stats.openConnections == 0 && stats.connecting == 0 && stats.runningTasks == 0)
            }
        }

        @Test("the responder sees the request as it would go on the wire; Set-Cookie goes in the jar")
        func wireFieldsAndCookies() async throws {
            let stub = StubResponder()
            stub.on("/login", .response(status: 200, headers: ["Set-Cookie": "sid=abc; Path=/"]))
            stub.on("/me", .response(status: 200))
            try await Self.withStubbedSession(stub) { session in
                _ = try await session.response(for: HTTPClientRequest(url: url("http://api.test/login")))
                _ = try await session.response(
                    for: HTTPClientRequest(url: url("http://api.test/me"), headers: ["X-Mine": "1"])
                )
                let seen = stub.requests
                #expect(seen.count == 2)
                let me = try #require(seen.last)
                #expect(me.headers["Cookie"] == "sid=abc")
                #expect(me.headers["Host"] == "api.test")
                #expect(me.headers["X-Mine"] == "1")
                #expect(me.headers["User-Agent"] == HawserVersion.userAgentProduct)
                #expect(seen.first?.headers["Cookie"] == nil)
            }
        }

        @Test("a delay runs on the loop's clock: nothing before it, the answer at it (virtual time)")
        func delayInVirtualTime() async throws {
            let stub = StubResponder()
            stub.on("/slow", .response(status: 200, body: "late", delay: 5))
            try await Self.withStubbedSession(stub, virtual: true) { session in
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("http://api.test/slow")), delegate: d)
                try session.eventLoop.advanceTime(by: 5 * Self.second - 1)
                #expect(d.record.withLock { $0.completions } == 0, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.head?.status == 200)
                #expect(String(decoding: r.body, as: UTF8.self) == "late")
                let m = try #require(r.metrics)
                #expect(m.responseEnd == m.fetchStart + 5 * Self.second)
            }
        }

        @Test("a delay past the idle timeout fails with idleTimeout at the timeout, as a silent server")
        func delayPastTimeout() async throws {
            let stub = StubResponder()
            stub.on("/never", .response(status: 200, delay: 3600))
            try await Self.withStubbedSession(stub, virtual: true, { $0.timeoutIntervalForRequest = 10 }) { session in
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("http://api.test/never")), delegate: d)
                try session.eventLoop.advanceTime(by: 10 * Self.second - 1)
                #expect(d.record.withLock { $0.completions } == 0)
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(d.error?.code == .idleTimeout)
                #expect(d.error?.message.contains("the responder's answer came later") == true)
                #expect(r.head == nil)
            }
        }

        @Test("cancelling during a delay ends the task at once with cancelled, exactly once")
        func cancelDuringDelay() async throws {
            let stub = StubResponder()
            stub.on("/slow", .response(status: 200, delay: 30))
            try await Self.withStubbedSession(stub, virtual: true) { session in
                let d = RecordingDelegate()
                let task = session.execute(HTTPClientRequest(url: url("http://api.test/slow")), delegate: d)
                task.cancel()
                let r = await d.wait()
                #expect(d.error?.code == .cancelled)
                try session.eventLoop.advanceTime(by: 60 * Self.second)
                #expect(d.record.withLock { $0.completions } == 1, "the delayed answer did not complete it again")
                #expect(r.head == nil)
                #expect(stub.requests.count == 1, "the responder, not the network, had the task")
            }
        }

        @Test("the session's shutdown during a delay fails the task with sessionShutDown")
        func shutdownDuringDelay() async throws {
            let stub = StubResponder()
            stub.on("/slow", .response(status: 200, delay: 30))
            try await Self.withStubbedSession(stub, virtual: true) { session in
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("http://api.test/slow")), delegate: d)
                _ = session.poolStatistics()  // the task reached the loop
                session.shutdown()
                _ = await d.wait()
                #expect(d.error?.code == .sessionShutDown)
                #expect(stub.requests.count == 1, "the responder, not the network, had the task")
            }
        }

        @Test("a body in chunks reaches the delegate a piece at a time; HEAD gets no body")
        func chunksAndHead() async throws {
            let stub = StubResponder()
            let body = (0..<10).map { UInt8($0) }
            stub.on("/data", StubAnswer.response(status: 200, body: body).inChunks(of: 4))
            try await Self.withStubbedSession(stub) { session in
                let totals = Mutex<[Int]>([])
                let d = RecordingDelegate()
                d.onBody = { _, total in totals.withLock { $0.append(total) } }
                session.execute(HTTPClientRequest(url: url("http://api.test/data")), delegate: d)
                let r = await d.wait()
                #expect(r.body == body)
                #expect(totals.withLock { $0 } == [4, 8, 10])
                let head = await Self.run(session, HTTPClientRequest(method: .head, url: url("http://api.test/data")))
                #expect(head.head?.status == 200 && head.body.isEmpty && head.completions == 1)
            }
        }

        @Test("a delegate that fails the task mid-body ends it with its error, once")
        func failMidBody() async throws {
            let stub = StubResponder()
            stub.on("/data", StubAnswer.response(status: 200, body: Array(repeating: 7, count: 12)).inChunks(of: 4))
            try await Self.withStubbedSession(stub) { session in
                let d = RecordingDelegate()
                d.onBody = { task, total in
                    if total == 4 { task.fail(with: HawserError(.limitExceeded, "enough")) }
                }
                session.execute(HTTPClientRequest(url: url("http://api.test/data")), delegate: d)
                let r = await d.wait()
                #expect(d.error?.code == .limitExceeded)
                #expect(r.body.count == 4)
                #expect(r.completions == 1)
            }
        }
    }
}
