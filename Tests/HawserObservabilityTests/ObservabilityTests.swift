// Logging, tracing and metrics against the project's test server on loopback: what a session
// emits is caught by the in-memory ends of Recorders.swift and asserted line by line, span by
// span, metric by metric.
import Hawser
import HawserMetrics
import HawserTestServer
import HawserTestSupport
import HawserTracing
import Logging
import Metrics
import Testing
import Tracing

@testable import HawserCore

/// Serialized: the descriptor-leak checks count the whole process's descriptors.
@Suite(.serialized, .timeLimit(.minutes(2))) enum ObservabilityTests {}

extension ObservabilityTests {
    @Suite("Logging (swift-log)", .serialized)
    struct LoggingTests {
        @Test("one debug line per request, with its metadata; nothing at trace level below")
        func oneDebugLinePerRequest() async throws {
            let recorder = LogRecorder()
            try await withServer({ $0.logger = recorder.logger(level: .debug) }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/bytes/100")))
                _ = try await session.response(
                    for: HTTPClientRequest(
                        method: .post,
                        url: url(server.baseURL + "/echo"),
                        body: .bytes(Array(repeating: 7, count: 10))
                    )
                )
                let lines = recorder.lines
                #expect(lines.count == 2)
                #expect(lines.allSatisfy { $0.level == .debug && $0.message == "request finished" })
                let first = lines[0].metadata
                #expect(first["http.request.method"] == "GET")
                #expect(first["url.full"] == server.baseURL + "/bytes/100")
                #expect(first["http.response.status_code"] == "200")
                #expect(Int(first["hawser.bytes.received"] ?? "") ?? 0 > 100)
                #expect(Int(first["hawser.bytes.sent"] ?? "") ?? 0 > 0)
                #expect(first["hawser.duration.ms"] != nil)
                #expect(first["hawser.connection.reused"] == "false")
                #expect(first["error.code"] == nil)
                let second = lines[1].metadata
                #expect(second["http.request.method"] == "POST")
                #expect(second["hawser.connection.reused"] == "true")
                #expect(first["hawser.request.id"] != nil && first["hawser.request.id"] != second["hawser.request.id"])
            }
        }

        @Test("cookies the jar's caps leave out of the Cookie field: one warning naming how many and the caps")
        func cookiesLeftOutWarning() async throws {
            let recorder = LogRecorder()
            let jar = CookieJar(maxCookiesPerDomain: 1000)
            try await withServer({
                $0.logger = recorder.logger(level: .warning)
                $0.httpCookieStorage = jar
            }) { server, session in
                for i in 0..<160 { jar.setCookie(Cookie(name: "k\(i)", value: "1", domain: "127.0.0.1")) }
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/cookies")))
                #expect(String(decoding: r.body, as: UTF8.self).split(separator: ";").count == 150)
                let lines = recorder.lines
                #expect(lines.count == 1)
                let line = try #require(lines.first)
                #expect(line.level == .warning)
                #expect(
                    line.message
                        == "10 cookies left out of the Cookie header, past its cap of 8190 bytes or 150 cookies"
                )
                #expect(line.metadata["hawser.cookies.omitted"] == "10")
                #expect(line.metadata["hawser.cookies.sent"] == "150")
                #expect(line.metadata["hawser.cookies.max_bytes"] == "8190")
                #expect(line.metadata["hawser.cookies.max_count"] == "150")
                #expect(line.metadata["url.full"] == server.baseURL + "/cookies")
            }
        }

        @Test("a failure logs one debug line with the error code")
        func failureLine() async throws {
            let recorder = LogRecorder()
            let closed = try TestServer()
            let deadURL = closed.baseURL + "/hello"
            closed.shutdown()
            try await withServer({ $0.logger = recorder.logger(level: .debug) }) { _, session in
                await #expect(throws: HawserError.self) {
                    _ = try await session.response(for: HTTPClientRequest(url: url(deadURL)))
                }
                let lines = recorder.lines
                #expect(lines.count == 1)
                #expect(lines.first?.level == .debug)
                #expect(lines.first?.message == "request failed")
                #expect(lines.first?.metadata["error.code"] == "cannotConnect")
                #expect(lines.first?.metadata["http.response.status_code"] == nil)
            }
        }

        @Test("trace: heads as sent and received, credentials and cookies redacted, user info not in the URL")
        func traceHeadsRedacted() async throws {
            let recorder = LogRecorder()
            try await withServer({ $0.logger = recorder.logger(level: .trace) }) { server, session in
                // Set-Cookie in the answer; the jar then sends Cookie on the next request.
                _ = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/cookies/set?session=s3cr3t"))
                )
                let withUser = server.baseURL.replacing("http://", with: "http://alice:pw0rd@")
                var request = HTTPClientRequest(url: url(withUser + "/echo"))
                request.headers.add(name: "Authorization", value: "Bearer t0ken")
                request.headers.add(name: "Proxy-Authorization", value: "Basic cHJveHk6cHc=")
                request.headers.add(name: "X-Visible", value: "shown")
                let r = try await session.response(for: request)
                #expect(r.headers["X-Echo-H-Authorization"] == "Bearer t0ken")  // sent as given
                #expect(r.headers["X-Echo-H-Cookie"] == "session=s3cr3t")

                let lines = recorder.lines
                #expect(
                    lines.map(\.message) == [
                        "request head sent", "response head received", "request finished",
                        "request head sent", "response head received", "request finished",
                    ]
                )
                // The second head as sent carries no secret (the first has the cookie's value in its
                // query, as asked; the echo's answer repeats them under other names, X-Echo-H-*,
                // which is the server's doing); no line has the URL's password.
                let sentHeads = lines[3].metadata["hawser.head"] ?? ""
                for secret in ["s3cr3t", "t0ken", "cHJveHk6cHc="] {
                    #expect(!sentHeads.contains(secret), "\(secret) leaked into a logged request head")
                }
                #expect(!lines.map { "\($0.metadata)" }.joined().contains("pw0rd"))
                #expect(!(lines[1].metadata["hawser.head"] ?? "").contains("s3cr3t"))
                let setCookieHead = lines[1].metadata["hawser.head"] ?? ""
                #expect(setCookieHead.hasPrefix("HTTP/1.1 200 OK"))
                #expect(setCookieHead.contains("Set-Cookie: <redacted>"))
                let sent = lines[3].metadata["hawser.head"] ?? ""
                #expect(sent.hasPrefix("GET /echo HTTP/1.1"))
                #expect(sent.contains("Authorization: <redacted>"))
                #expect(sent.contains("Proxy-Authorization: <redacted>"))
                #expect(sent.contains("Cookie: <redacted>"))
                #expect(sent.contains("X-Visible: shown"))
                #expect(lines[3].metadata["hawser.exchange.reason"] == "initial")
                #expect(lines[3].metadata["network.peer.address"] == "127.0.0.1:\(server.port)")
                #expect(lines[3].metadata["url.full"] == server.baseURL + "/echo")
                #expect((lines[4].metadata["hawser.head"] ?? "").hasPrefix("HTTP/1.1 200 OK\\r\\nX-Echo-Method: GET"))
                // One line per head: the fields are joined by the two characters \r\n, never a line break.
                #expect(lines.allSatisfy { !($0.metadata["hawser.head"] ?? "").contains("\n") })
                #expect(sent.contains("HTTP/1.1\\r\\nHost: "))
                // The query's value is redacted in the URL and in the request line; its name stays.
                #expect(lines[0].metadata["url.full"] == server.baseURL + "/cookies/set?session=REDACTED")
                #expect(
                    (lines[0].metadata["hawser.head"] ?? "").hasPrefix("GET /cookies/set?session=REDACTED HTTP/1.1")
                )
                for line in lines[0...3] {
                    #expect(!"\(line.metadata)".contains("s3cr3t"), "the query's value leaked into '\(line.message)'")
                }
            }
        }

        @Test("query strings: values redacted by default, kept with .verbatim; bytes outside ASCII escaped")
        func queryLoggingChoices() async throws {
            let redacted = LogRecorder()
            try await withServer({ $0.logger = redacted.logger(level: .trace) }) { server, session in
                _ = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/hello?token=abc123&flag&page=2#frag"))
                )
                let lines = redacted.lines
                #expect(lines.count == 3)
                #expect(
                    lines[0].metadata["url.full"] == server.baseURL + "/hello?token=REDACTED&REDACTED&page=REDACTED"
                )
                #expect(
                    (lines[0].metadata["hawser.head"] ?? "").hasPrefix(
                        "GET /hello?token=REDACTED&REDACTED&page=REDACTED HTTP/1.1\\r\\n"
                    )
                )
                #expect(!lines.map { "\($0.metadata)" }.joined().contains("abc123"))
            }
            let verbatim = LogRecorder()
            try await withServer({
                $0.logger = verbatim.logger(level: .trace)
                $0.queryLogging = .verbatim
            }) { server, session in
                var request = HTTPClientRequest(url: url(server.baseURL + "/echo?token=abc123"))
                request.headers.add(name: "X-Bytes", value: "a\u{E9}\\b")
                _ = try await session.response(for: request)
                let lines = verbatim.lines
                #expect(lines[0].metadata["url.full"] == server.baseURL + "/echo?token=abc123")
                let head = lines[0].metadata["hawser.head"] ?? ""
                #expect(head.hasPrefix("GET /echo?token=abc123 HTTP/1.1\\r\\n"))
                // é is two UTF-8 bytes, each written as \xNN; a backslash is doubled.
                #expect(head.contains("X-Bytes: a\\xC3\\xA9\\\\b"))
            }
        }

        @Test("no logger: no observer on the task and no line; a request's own logger wins over the session's")
        func noLoggerNothing() async throws {
            let recorder = LogRecorder()
            try await withServer { server, session in
                let done = AsyncStream<Void>.makeStream()
                let task = session.execute(HTTPClientRequest(url: url(server.baseURL + "/hello"))) { _ in
                    done.continuation.yield()
                }
                #expect(task.observer == nil)
                for await _ in done.stream { break }
            }
            try await withServer({ $0.logger = recorder.logger(level: .trace) }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")), logger: nil)
                #expect(recorder.lines.isEmpty)
                let own = LogRecorder()
                _ = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/hello")),
                    logger: own.logger(level: .debug)
                )
                #expect(recorder.lines.isEmpty)
                #expect(own.lines.count == 1)
            }
        }

        @Test("the AFNetworking layer logs through its configuration's logger")
        func managerLogs() async throws {
            let recorder = LogRecorder()
            // No descriptor count here: the manager runs on the shared loop group, which opens
            // its loops' descriptors on first use and keeps them.
            let server = try TestServer()
            defer { server.shutdown() }
            var configuration = SessionConfiguration()
            configuration.logger = recorder.logger(level: .debug)
            let m = HTTPSessionManager(baseURL: url(server.baseURL + "/"), configuration: configuration)
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            let (_, response) = try await m.get("json")
            #expect(response.statusCode == 200)
            #expect(recorder.lines.count == 1)
            #expect(recorder.lines.first?.metadata["url.full"] == server.baseURL + "/json")
        }

        @Test("a redirect: the trace lines show both exchanges; one debug line counts the redirect")
        func redirectLogged() async throws {
            let recorder = LogRecorder()
            try await withServer({ $0.logger = recorder.logger(level: .trace) }) { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/redirect/1")))
                #expect(r.status == 200)
                let lines = recorder.lines
                #expect(lines.filter { $0.level == .debug }.count == 1)
                let sent = lines.filter { $0.message == "request head sent" }
                #expect(sent.map { $0.metadata["hawser.exchange.reason"] } == ["initial", "redirect"])
                #expect(sent.last?.metadata["url.full"] == server.baseURL + "/hello")
                #expect(lines.last?.metadata["hawser.redirects"] == "1")
                #expect(lines.last?.metadata["http.response.status_code"] == "200")
            }
        }
    }

    @Suite("Tracing (swift-distributed-tracing)", .serialized)
    struct TracingTests {
        @Test("a client span with the HTTP attributes, and the server sees its traceparent")
        func clientSpan() async throws {
            let tracer = TestTracer()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { server, session in
                let withUser = server.baseURL.replacing("http://", with: "http://alice:pw0rd@")
                let r = try await session.response(for: HTTPClientRequest(url: url(withUser + "/echo?q=1")))
                #expect(tracer.spans.count == 1)
                let span = try #require(tracer.spans.first)
                let s = span.snapshot
                #expect(s.operationName == "GET")
                #expect(span.kind == .client)
                #expect(s.ended && s.endCount == 1)
                #expect(s.attributes.text("http.request.method") == "GET")
                #expect(s.attributes.text("url.full") == server.baseURL + "/echo?q=REDACTED")
                #expect(s.attributes.text("server.address") == "127.0.0.1")
                #expect(s.attributes.text("server.port") == String(server.port))
                #expect(s.attributes.text("network.peer.address") == "127.0.0.1")
                #expect(s.attributes.text("http.response.status_code") == "200")
                #expect(s.attributes.text("error.type") == nil)
                #expect(s.attributes.text("http.request.resend_count") == nil)
                #expect(s.status == nil)
                let id = span.identity
                #expect(r.headers["X-Echo-H-traceparent"] == "00-\(id.traceID)-\(id.spanID)-01")
            }
        }

        @Test("url.full keeps the query as sent with queryLogging .verbatim")
        func verbatimQuery() async throws {
            let tracer = TestTracer()
            try await withServer({
                $0.instrumentation = TracingInstrumentation(tracer: tracer, queryLogging: .verbatim)
            }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/echo?q=1")))
                let s = try #require(tracer.spans.first).snapshot
                #expect(s.attributes.text("url.full") == server.baseURL + "/echo?q=1")
            }
        }

        @Test("the span is a child of the caller's current ServiceContext")
        func childOfCurrentContext() async throws {
            let tracer = TestTracer()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { server, session in
                let parent = tracer.startSpan("parent", context: .topLevel, ofKind: .internal)
                try await ServiceContext.withValue(parent.context) {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                }
                parent.end()
                let child = try #require(tracer.spans.last)
                #expect(child.parent == parent.identity)
                #expect(child.identity.traceID == parent.identity.traceID)
            }
        }

        @Test("a failure sets error.type to the error code and the span's status to error")
        func failedSpan() async throws {
            let tracer = TestTracer()
            let closed = try TestServer()
            let deadURL = closed.baseURL + "/hello"
            closed.shutdown()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { _, session in
                await #expect(throws: HawserError.self) {
                    _ = try await session.response(for: HTTPClientRequest(url: url(deadURL)))
                }
                let s = try #require(tracer.spans.first).snapshot
                #expect(s.attributes.text("error.type") == "cannotConnect")
                #expect(s.status?.code == .error)
                #expect(s.errors.count == 1)
                #expect(s.ended)
            }
        }

        @Test("a 5xx answer is an error span with error.type the status code")
        func serverErrorSpan() async throws {
            let tracer = TestTracer()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/status/503")))
                let s = try #require(tracer.spans.first).snapshot
                #expect(s.attributes.text("http.response.status_code") == "503")
                #expect(s.attributes.text("error.type") == "503")
                #expect(s.status?.code == .error)
            }
        }

        @Test("redirects: one span, resend count, a redirect event per hop, traceparent on every hop")
        func redirectVisible() async throws {
            let tracer = TestTracer()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { server, session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/redirect-to?url=%2Fecho"))
                )
                #expect(r.status == 200)
                #expect(tracer.spans.count == 1)
                let span = try #require(tracer.spans.first)
                let s = span.snapshot
                #expect(s.attributes.text("http.request.resend_count") == "1")
                #expect(s.attributes.text("http.response.status_code") == "200")
                #expect(s.events.map(\.name) == ["http.redirect"])
                #expect(s.events.first?.attributes.text("url.full") == server.baseURL + "/echo")
                #expect(r.headers["X-Echo-H-traceparent"] == "00-\(span.identity.traceID)-\(span.identity.spanID)-01")
            }
        }

        @Test("a request's own traceparent is kept")
        func ownTraceparentKept() async throws {
            let tracer = TestTracer()
            try await withServer({ $0.instrumentation = TracingInstrumentation(tracer: tracer) }) { server, session in
                let mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
                let r = try await session.response(
                    for: HTTPClientRequest(
                        url: url(server.baseURL + "/echo"),
                        headers: ["traceparent": mine]
                    )
                )
                #expect(r.headers["X-Echo-H-traceparent"] == mine)
            }
        }
    }

    @Suite("Metrics (swift-metrics)", .serialized)
    struct MetricsTests {
        @Test("requests counted, durations timed, errors counted by type")
        func countersAndTimer() async throws {
            let factory = TestMetricsFactory()
            let closed = try TestServer()
            let deadURL = closed.baseURL + "/hello"
            closed.shutdown()
            try await withServer({ $0.instrumentation = MetricsInstrumentation(factory: factory) }) { server, session in
                for _ in 0..<3 {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                }
                await #expect(throws: HawserError.self) {
                    _ = try await session.response(for: HTTPClientRequest(url: url(deadURL)))
                }
                let ok = [("http.request.method", "GET"), ("http.response.status_class", "2xx")]
                let failed = [("http.request.method", "GET"), ("http.response.status_class", "none")]
                #expect(factory.counter("hawser.client.requests", ok)?.value.load(ordering: .relaxed) == 3)
                #expect(factory.counter("hawser.client.requests", failed)?.value.load(ordering: .relaxed) == 1)
                #expect(
                    factory.counter("hawser.client.errors", [("error.type", "cannotConnect")])?.value.load(
                        ordering: .relaxed
                    ) == 1
                )
                let durations = factory.timer("hawser.client.request.duration", ok)?.values.withLock { $0 } ?? []
                #expect(durations.count == 3)
                #expect(durations.allSatisfy { $0 > 0 })
                #expect(factory.timer("hawser.client.request.duration", failed)?.values.withLock { $0.count } == 1)
            }
        }

        @Test("requests and durations carry the method and the status class; unknown methods are _OTHER")
        func methodAndStatusClass() async throws {
            let factory = TestMetricsFactory()
            try await withServer({
                $0.instrumentation = MetricsInstrumentation(factory: factory, dimensions: [("session", "b")])
            }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/status/404")))
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/status/404")))
                _ = try await session.response(
                    for: HTTPClientRequest(method: .post, url: url(server.baseURL + "/status/503"), body: .bytes([1]))
                )
                _ = try await session.response(
                    for: HTTPClientRequest(method: HTTPMethod(rawValue: "PURGE"), url: url(server.baseURL + "/echo"))
                )
                func count(_ method: String, _ statusClass: String) -> Int64? {
                    factory.counter(
                        "hawser.client.requests",
                        [
                            ("session", "b"), ("http.request.method", method),
                            ("http.response.status_class", statusClass),
                        ]
                    )?.value.load(ordering: .relaxed)
                }
                #expect(count("GET", "4xx") == 2)
                #expect(count("POST", "5xx") == 1)
                #expect(count("_OTHER", "2xx") == 1)
                #expect(count("PURGE", "2xx") == nil)
                #expect(
                    factory.timer(
                        "hawser.client.request.duration",
                        [("session", "b"), ("http.request.method", "POST"), ("http.response.status_class", "5xx")]
                    )?.values.withLock { $0.count } == 1
                )
            }
        }

        @Test("pool gauges follow open and idle connections")
        func poolGauges() async throws {
            let factory = TestMetricsFactory()
            try await withServer({
                $0.instrumentation = MetricsInstrumentation(factory: factory, dimensions: [("session", "a")])
            }) { server, session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                let open = try #require(factory.recorder("hawser.pool.connections.open", [("session", "a")]))
                let idle = try #require(factory.recorder("hawser.pool.connections.idle", [("session", "a")]))
                #expect(open.last == 1)
                #expect(idle.last == 1)
                let stats = session.poolStatistics()
                #expect(Double(stats.openConnections) == open.last && Double(stats.idleConnections) == idle.last)
                // The server closes it (Connection: close answer): open and idle go back to 0.
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/close")))
                #expect(open.last == 0)
                #expect(idle.last == 0)
                #expect(open.values.withLock { $0 }.contains(1))
            }
        }

        @Test("tracing and metrics together through CombinedInstrumentation, with a logger")
        func combined() async throws {
            let factory = TestMetricsFactory()
            let tracer = TestTracer()
            let recorder = LogRecorder()
            try await withServer({
                $0.instrumentation = CombinedInstrumentation([
                    TracingInstrumentation(tracer: tracer), MetricsInstrumentation(factory: factory),
                ])
                $0.logger = recorder.logger(level: .debug)
            }) { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/echo")))
                #expect(r.headers["X-Echo-H-traceparent"] != nil)
                #expect(tracer.spans.count == 1)
                #expect(
                    factory.counter(
                        "hawser.client.requests",
                        [("http.request.method", "GET"), ("http.response.status_class", "2xx")]
                    )?.value.load(ordering: .relaxed) == 1
                )
                #expect(recorder.lines.count == 1)
            }
        }
    }
}
