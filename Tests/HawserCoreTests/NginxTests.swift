import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("Session against nginx", .serialized)
    struct NginxTests {
        static func withNginx(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (NginxFixture, Session) async throws -> Void
        ) async throws {
            let nginx = try NginxFixture()
            defer { nginx.stop() }
            try await expectNoFDLeak("talking to nginx") {
                var config = SessionConfiguration()
                configure(&config)
                let loop = try EventLoop()
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                try await body(nginx, session)
            }
        }

        @Test("1000 sequential GETs reuse a single keep-alive connection")
        func keepAlive() async throws {
            try await Self.withNginx { nginx, session in
                var fresh = 0
                for _ in 0..<1000 {
                    let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/hello")))
                    #expect(r.status == 200)
                    if !r.metrics.isReusedConnection { fresh += 1 }
                }
                #expect(fresh == 1)
                #expect(session.poolStatistics().openConnections == 1)
            }
        }

        @Test(
            "HTTPS to nginx: keep-alive reuse, an 8 MiB file intact, resumption on a new connection, and the trust decision"
        )
        func https() async throws {
            let pki = try TestPKI.shared()
            try await Self.withNginx({ $0.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.root])) })
            { nginx, session in
                let base = "https://localhost:\(nginx.tlsPort)"
                var fresh = 0
                for _ in 0..<200 {
                    let r = try await session.response(for: HTTPClientRequest(url: url(base + "/hello")))
                    #expect(r.status == 200)
                    if !r.metrics.isReusedConnection { fresh += 1 }
                }
                #expect(fresh == 1)
                let big = try await session.response(for: HTTPClientRequest(url: url(base + "/big.bin")))
                #expect(
                    big.body.count == 8 * 1024 * 1024
                        && big.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
                )
                let first = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                let second = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                #expect(!second.metrics.isReusedConnection)
                #expect(
                    second.metrics.isResumedTLSSession == true,
                    "nginx resumed the session (first: \(String(describing: first.metrics.isResumedTLSSession)))"
                )
                #expect(first.metrics.tlsProtocolVersion == "TLSv1.3")
            }
            try await Self.withNginx { nginx, session in
                do {
                    _ = try await session.response(
                        for: HTTPClientRequest(url: url("https://localhost:\(nginx.tlsPort)/hello"))
                    )
                    Issue.record("the system store trusted the test PKI")
                } catch let error as HawserError {
                    #expect(error.code == .serverCertificateUntrusted)
                }
            }
        }

        @Test("nginx configured for gzip, redirects and caching: decoded, followed, cached and revalidated")
        func httpCompleteness() async throws {
            try await Self.withNginx({ $0.urlCache = HTTPCache(memoryCapacity: 4 << 20) }) { nginx, session in
                let gz = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/big-gzip.txt")))
                #expect(gz.headers["Content-Encoding"] == "gzip")
                #expect(
                    String(decoding: gz.body, as: UTF8.self)
                        == String(repeating: "nginx compresses this line. ", count: 4000)
                )
                #expect(gz.metrics.bytesReceived < 10_000, "the wire carried the compressed body")

                let moved = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/moved")))
                #expect(moved.status == 200 && moved.metrics.redirectCount == 1)
                let post = try await session.response(
                    for: HTTPClientRequest(
                        method: .post,
                        url: url(nginx.baseURL + "/found-post"),
                        body: .bytes([1, 2, 3])
                    )
                )
                #expect(String(decoding: post.body, as: UTF8.self) == "POST 3", "307 kept the method and the body")

                _ = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/fresh.txt")))
                let fresh = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/fresh.txt")))
                #expect(fresh.metrics.cacheUse == .fresh)
                #expect(String(decoding: fresh.body, as: UTF8.self) == "fresh for a minute")
                _ = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/stale.txt")))
                let revalidated = try await session.response(
                    for: HTTPClientRequest(url: url(nginx.baseURL + "/stale.txt"))
                )
                #expect(revalidated.metrics.cacheUse == .validated, "nginx answered If-None-Match with 304")
                #expect(String(decoding: revalidated.body, as: UTF8.self) == "always revalidated")
            }
        }

        @Test("an 8 MiB static file arrives intact")
        func largeFile() async throws {
            try await Self.withNginx { nginx, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/big.bin")))
                #expect(r.status == 200)
                #expect(r.body.count == 8 * 1024 * 1024)
                #expect(r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
            }
        }

        @Test("500 concurrent requests complete, each exactly once, within the connection limit")
        func manyConcurrent() async throws {
            try await Self.withNginx({ $0.maximumConnectionsPerHost = 16 }) { nginx, session in
                let bodies = try await withThrowingTaskGroup(of: String.self) { g in
                    for i in 0..<500 {
                        let path = i % 2 == 0 ? "/hello" : "/json"
                        g.addTask {
                            let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + path)))
                            return String(decoding: r.body, as: UTF8.self)
                        }
                    }
                    var out: [String] = []
                    for try await b in g { out.append(b) }
                    return out
                }
                #expect(bodies.count == 500)
                #expect(bodies.filter { $0 == "Hello, World!" }.count == 250)
                #expect(bodies.filter { $0 == #"{"ok":true}"# }.count == 250)
                #expect(session.poolStatistics().openConnections <= 16)
            }
        }

        @Test("HEAD and 404 keep the connection usable; keepalive_timeout 0 closes it")
        func connectionManagement() async throws {
            try await Self.withNginx { nginx, session in
                let head = try await session.response(
                    for: HTTPClientRequest(method: .head, url: url(nginx.baseURL + "/big.bin"))
                )
                #expect(
                    head.status == 200 && head.body.isEmpty && head.headers["Content-Length"] == String(8 * 1024 * 1024)
                )
                let missing = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/nope")))
                #expect(missing.status == 404 && missing.metrics.isReusedConnection)
                let close = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/close")))
                #expect(close.headers.contains(name: "Connection", token: "close"))
                let after = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/hello")))
                #expect(after.metrics.isReusedConnection == false)
            }
        }

        @Test("POST to a static location gets nginx's 405 and the body is drained")
        func postToStatic() async throws {
            try await Self.withNginx { nginx, session in
                let r = try await session.response(
                    for: HTTPClientRequest(
                        method: .post,
                        url: url(nginx.baseURL + "/hello.txt"),
                        body: .bytes(Array(repeating: 1, count: 1000))
                    )
                )
                #expect(r.status == 405)
            }
        }
    }
}
