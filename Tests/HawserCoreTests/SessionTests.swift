import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    /// End-to-end through the engine against the project's test server on loopback.
    /// Serialized: the fd-leak checks count the whole process's descriptors.
    @Suite("Session against the test server", .serialized)
    struct SessionTests {
        @Test("GET returns status, headers and body")
        func simpleGet() async throws {
            try await withServer { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(r.status == 200)
                #expect(r.headers["Content-Type"] == "text/plain")
                #expect(String(decoding: r.body, as: UTF8.self) == "Hello, World!")
                #expect(r.metrics.isReusedConnection == false)
                #expect(r.metrics.connectEnd != nil && r.metrics.responseStart != nil && r.metrics.responseEnd != nil)
            }
        }

        @Test("sequential requests reuse one keep-alive connection")
        func keepAliveReuse() async throws {
            try await withServer { server, session in
                var reused: [Bool] = []
                for _ in 0..<20 {
                    let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                    reused.append(r.metrics.isReusedConnection)
                }
                #expect(reused == [false] + Array(repeating: true, count: 19))
                #expect(server.acceptedConnections == 1)
            }
        }

        @Test(
            "a large Content-Length body arrives byte for byte",
            arguments: [0, 1, 65_535, 65_536, 4 * 1024 * 1024 + 7]
        )
        func largeBody(size: Int) async throws {
            try await withServer { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/bytes/\(size)")))
                #expect(r.body.count == size)
                #expect(r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
            }
        }

        @Test("a chunked body is de-chunked", arguments: [1, 100, 4096])
        func chunkedBody(chunk: Int) async throws {
            try await withServer { server, session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/bytes/100000?chunk=\(chunk)"))
                )
                #expect(r.headers["Transfer-Encoding"] == "chunked")
                #expect(r.body == (0..<100_000).map { UInt8($0 % 251) })
            }
        }

        @Test("POST sends the body with Content-Length and the server sees it all")
        func postBody() async throws {
            try await withServer { server, session in
                let body = (0..<200_000).map { UInt8($0 % 7) }
                let r = try await session.response(
                    for: HTTPClientRequest(
                        method: .post,
                        url: url(server.baseURL + "/echo"),
                        headers: ["X-Custom": "yes"],
                        body: .bytes(body)
                    )
                )
                #expect(r.headers["X-Echo-Method"] == "POST")
                #expect(r.headers["X-Echo-H-Content-Length"] == "200000")
                #expect(r.headers["X-Echo-H-X-Custom"] == "yes")
                #expect(r.body == body)
            }
        }

        @Test("compressesBody sends the gzip-coded bytes the head announces, and the connection stays usable")
        func compressedBodyGoesOutCoded() async throws {
            try await withServer { server, session in
                let payload = Array(String(repeating: "compress me ", count: 500).utf8)
                var request = HTTPClientRequest(
                    method: .post,
                    url: url(server.baseURL + "/echo"),
                    headers: ["Content-Length": "1"],
                    body: .bytes(payload)
                )
                request.compressesBody = true
                let r = try await session.response(for: request)
                #expect(r.headers["X-Echo-H-Content-Encoding"] == "gzip")
                let announced = try #require(Int(r.headers["X-Echo-H-Content-Length"] ?? ""))
                #expect(announced < payload.count / 4, "the head announces the coded length, not the caller's field")
                #expect(
                    r.headers["X-Echo-Body-Length"] == String(announced),
                    "the server read exactly the announced bytes"
                )
                #expect(
                    try decodeAll("gzip", [r.body[...]]).bytes == payload,
                    "what went out is the payload, gzip-coded"
                )
                // The same connection carries the next request: nothing was left over on it.
                let next = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(next.status == 200 && next.metrics.isReusedConnection)
            }
        }

        @Test("a streamed body without a length goes out chunked; with a length, as Content-Length")
        func streamedBodies() async throws {
            try await withServer { server, session in
                let parts: [[UInt8]] = [
                    Array("alpha-".utf8), Array(repeating: 0x41, count: 100_000), Array("-omega".utf8),
                ]
                let whole = parts.flatMap { $0 }
                let chunked = try await session.response(
                    for: HTTPClientRequest(
                        method: .put,
                        url: url(server.baseURL + "/echo"),
                        body: .stream(length: nil) { w in for p in parts { try await w.write(p) } }
                    )
                )
                #expect(chunked.headers["X-Echo-H-Transfer-Encoding"] == "chunked")
                #expect(chunked.body == whole)
                let sized = try await session.response(
                    for: HTTPClientRequest(
                        method: .put,
                        url: url(server.baseURL + "/echo"),
                        body: .stream(length: Int64(whole.count)) { w in for p in parts { try await w.write(p) } }
                    )
                )
                #expect(sized.headers["X-Echo-H-Content-Length"] == String(whole.count))
                #expect(sized.body == whole)
            }
        }

        @Test("a streamed body that writes less than its declared length fails the task")
        func streamedBodyTooShort() async throws {
            try await withServer { server, session in
                await #expect(throws: HawserError.self) {
                    _ = try await session.response(
                        for: HTTPClientRequest(
                            method: .put,
                            url: url(server.baseURL + "/echo"),
                            body: .stream(length: 10) { w in try await w.write([1, 2, 3]) }
                        )
                    )
                }
            }
        }

        @Test("HEAD, 204 and 304 have no body even when headers announce one")
        func bodylessResponses() async throws {
            try await withServer { server, session in
                let head = try await session.response(
                    for: HTTPClientRequest(method: .head, url: url(server.baseURL + "/bytes/1000"))
                )
                #expect(head.status == 200)
                #expect(head.headers["Content-Length"] == "1000")
                #expect(head.body.isEmpty)
                for code in [204, 304] {
                    let r = try await session.response(
                        for: HTTPClientRequest(url: url(server.baseURL + "/status/\(code)"))
                    )
                    #expect(r.status == code)
                    #expect(r.body.isEmpty)
                }
                // The connection survived all three.
                #expect(server.acceptedConnections == 1)
            }
        }

        @Test("interim 100 and 103 heads reach the delegate before the final head")
        func interimHeads() async throws {
            try await withServer { server, session in
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/interim")), delegate: d)
                let r = await d.wait()
                #expect(r.interim == [100, 103])
                #expect(r.head?.status == 200)
                #expect(String(decoding: r.body, as: UTF8.self) == "final")
                #expect(r.completions == 1)
            }
        }

        @Test("a close-delimited body ends with the connection, and the next request opens a new one")
        func closeDelimited() async throws {
            try await withServer { server, session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/close-delimited/5000"))
                )
                #expect(r.body == (0..<5000).map { UInt8($0 % 251) })
                let again = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(again.metrics.isReusedConnection == false)
                #expect(server.acceptedConnections == 2)
            }
        }

        @Test("many concurrent requests are served within the per-host connection limit")
        func concurrencyLimit() async throws {
            try await withServer({ $0.maximumConnectionsPerHost = 4 }) { server, session in
                let statuses = try await withThrowingTaskGroup(of: Int.self) { g in
                    for i in 0..<200 {
                        g.addTask {
                            try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/bytes/\(i)")))
                                .body.count
                        }
                    }
                    var sizes: [Int] = []
                    for try await s in g { sizes.append(s) }
                    return sizes
                }
                #expect(statuses.sorted() == Array(0..<200))
                #expect(server.acceptedConnections <= 4)
                let stats = session.poolStatistics()
                #expect(stats.waitingTasks == 0 && stats.runningTasks == 0)
            }
        }

        @Test("an invalid request fails through the delegate exactly once")
        func invalidRequest() async throws {
            try await withServer { _, session in
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("ftp://127.0.0.1/x")), delegate: d)
                _ = await d.wait()
                #expect(d.error?.code == .unsupportedURL && d.error?.urlErrorCode == -1002, "NSURLErrorUnsupportedURL")
                let bad = RecordingDelegate()
                session.execute(
                    HTTPClientRequest(url: url("http://127.0.0.1:1/x"), headers: ["X-Bad": "a\r\nInjected: 1"]),
                    delegate: bad
                )
                _ = await bad.wait()
                #expect(bad.error?.code == .invalidRequest)
                #expect(bad.record.withLock { $0.completions } == 1)
            }
        }

        @Test("connecting to a closed port fails with cannotConnect")
        func connectionRefused() async throws {
            // Bind a port, then close it: nothing listens there now.
            let probe = try TestServer()
            let port = probe.port
            probe.shutdown()
            try await withServer { _, session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url("http://127.0.0.1:\(port)/")))
                    Issue.record("expected a connect failure")
                } catch let error as HawserError {
                    #expect(error.code == .cannotConnect)
                }
            }
        }

        @Test("IPv6 loopback works")
        func ipv6() async throws {
            try await withServer(host: "::1") { server, session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://[::1]:\(server.port)/hello"))
                )
                #expect(r.status == 200)
                #expect(r.metrics.remoteAddress?.family == AF_INET6)
            }
        }

        @Test("upload progress rises as bytes reach the socket and ends at the body's size")
        func uploadProgress() async throws {
            try await withServer { server, session in
                let body = [UInt8](repeating: 3, count: 3 * 1024 * 1024)
                let d = RecordingDelegate()
                session.execute(
                    HTTPClientRequest(method: .post, url: url(server.baseURL + "/echo"), body: .bytes(body)),
                    delegate: d
                )
                let r = await d.wait()
                #expect(r.completions == 1 && r.body.count == body.count)
                #expect(!r.sentProgress.isEmpty)
                #expect(zip(r.sentProgress, r.sentProgress.dropFirst()).allSatisfy { $0 < $1 })
                #expect(r.sentProgress.last == Int64(body.count))
            }
        }
    }
}
