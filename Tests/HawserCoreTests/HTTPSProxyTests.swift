// `https://` proxies end to end: TLS to the project's own test proxy on loopback (TestProxy, TLS
// through OpenSSL with the test PKI), plain http origins forwarded over it, https origins through
// its CONNECT tunnel with the origin's TLS running inside the proxy's, each trust decision
// apart, proxy authentication over TLS, and the environment.
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("HTTPS proxies (TLS to the proxy, TLS inside TLS)", .serialized)
    struct HTTPSProxyTests {
        static func pki() throws -> TestPKI { try TestPKI.shared() }

        /// A TLS-speaking proxy presenting `leaf` (for 127.0.0.1 and localhost by default).
        static func proxy(_ leaf: TestPKI.Leaf? = nil, credentials: ProxyCredentials? = nil) throws -> TestProxy {
            let leaf = try leaf ?? Self.pki().valid
            return try TestProxy(
                tls: .init(certificateChainPath: leaf.chainPath, privateKeyPath: leaf.keyPath),
                credentials: credentials
            )
        }

        static func server(_ proxy: TestProxy, _ credentials: ProxyCredentials? = nil) -> ProxyServer {
            ProxyServer(kind: .https, host: proxy.host, port: proxy.port, credentials: credentials)
        }

        /// A session whose proxy and origins are trusted through the test root (the system store's
        /// stand-in), unless `configure` says otherwise.
        static func session(
            _ proxy: ProxyConfiguration,
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session) async throws -> Void
        ) async throws {
            let root = try Self.pki().root
            try await FaultTests.withSession(
                { c in
                    c.proxy = proxy
                    c.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([root]))
                    c.proxyTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([root]))
                    configure(&c)
                },
                body
            )
        }

        static func failure(_ session: Session, _ request: HTTPClientRequest) async -> HawserError? {
            do {
                let r = try await session.response(for: request)
                Issue.record("expected a failure, got \(r.status)")
                return nil
            } catch {
                return error
            }
        }

        /// Accepts any chain for any name (curl's `--proxy-insecure`).
        static var insecure: SecurityPolicy {
            var policy = SecurityPolicy(pinningMode: .none)
            policy.allowInvalidCertificates = true
            policy.validatesDomainName = false
            return policy
        }

        static func tlsOrigin(_ leaf: TestPKI.Leaf) throws -> TestServer {
            try TestServer(
                host: "127.0.0.1",
                tls: .init(certificateChainPath: leaf.chainPath, privateKeyPath: leaf.keyPath)
            )
        }

        @Test("http origin through an https proxy: absolute-form over TLS to the proxy, the proxy's chain checked")
        func forwardOverTLS() async throws {
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let origin = try TestServer(host: "127.0.0.1")
            defer { origin.shutdown() }
            try await Self.session(ProxyConfiguration(httpProxy: Self.server(proxy))) { session in
                var post = HTTPClientRequest(method: .post, url: url(origin.baseURL + "/echo?x=1"))
                post.body = .bytes(Array("through TLS".utf8))
                let r = try await session.response(for: post)
                #expect(r.status == 200)
                #expect(String(decoding: r.body, as: UTF8.self) == "through TLS")
                #expect(
                    r.headers["X-Echo-Target"] == "/echo?x=1",
                    "the proxy turned the absolute-form target into origin-form"
                )
                #expect(proxy.requestLines == ["POST \(origin.baseURL)/echo?x=1 HTTP/1.1"])
                #expect(proxy.handshakes.completed == 1)
                // A large body read through the proxy's TLS stream.
                let big = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/bytes/300000")))
                #expect(big.body == (0..<300_000).map { UInt8($0 % 251) })
            }
        }

        @Test(
            "https origin through an https proxy: CONNECT over TLS, the origin's TLS inside it, kept alive and reused"
        )
        func tlsInsideTLS() async throws {
            let pki = try Self.pki()
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let origin = try Self.tlsOrigin(pki.valid)
            defer { origin.shutdown() }
            try await Self.session(ProxyConfiguration(httpsProxy: Self.server(proxy))) { session in
                let base = "https://localhost:\(origin.port)"
                let r = try await session.response(for: HTTPClientRequest(url: url(base + "/hello")))
                #expect(String(decoding: r.body, as: UTF8.self) == "Hello, World!")
                #expect(r.metrics.tlsProtocolVersion == "TLSv1.3", "the origin's TLS, negotiated inside the tunnel")
                #expect(proxy.requestLines == ["CONNECT localhost:\(origin.port) HTTP/1.1"])
                // Many records each way across both layers: a large download and a large upload.
                let big = try await session.response(
                    for: HTTPClientRequest(url: url(base + "/bytes/1000000?chunk=7000"))
                )
                #expect(big.body == (0..<1_000_000).map { UInt8($0 % 251) })
                #expect(big.metrics.isReusedConnection, "the tunnelled connection went back to the pool and was reused")
                var put = HTTPClientRequest(method: .put, url: url(base + "/sink"))
                put.body = .bytes((0..<2_000_000).map { UInt8($0 % 251) })
                put.expectsContinue = false
                let sunk = try await session.response(for: put)
                #expect(sunk.headers["X-Sink-Length"] == "2000000")
                #expect(sunk.headers["X-Sink-Pattern"] == "ok")
                #expect(proxy.acceptedConnections == 1 && origin.acceptedConnections == 1)
                // Side by side: each concurrent request gets its own tunnel within the per-host limit.
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            try await session.response(for: HTTPClientRequest(url: url(base + "/delay/50"))).status
                        }
                    }
                    for try await status in group { #expect(status == 200) }
                }
                #expect(proxy.acceptedConnections == origin.acceptedConnections)
                #expect(proxy.handshakes == (proxy.acceptedConnections, 0))
            }
            #expect(proxy.openConnections == 0, "closing the session closed every tunnel")
        }

        @Test(
            "the proxy's chain is its own decision: refused by the default (system) store, a wrong CA and a wrong name"
        )
        func proxyTrustRefused() async throws {
            let pki = try Self.pki()
            let origin = try Self.tlsOrigin(pki.valid)
            defer { origin.shutdown() }
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let config = ProxyConfiguration(httpProxy: Self.server(proxy), httpsProxy: Self.server(proxy))
            // The origin evaluator trusts the test root; the proxy's (nil: the system store) does not.
            try await Self.session(config, { $0.proxyTrustEvaluator = nil }) { session in
                for target in ["https://localhost:\(origin.port)/hello", plain.baseURL + "/hello"] {
                    let e = try #require(await Self.failure(session, HTTPClientRequest(url: url(target))))
                    #expect(e.code == .serverCertificateUntrusted)
                    #expect(
                        e.message.contains("the proxy https://127.0.0.1:\(proxy.port)"),
                        "names the proxy: \(e.message)"
                    )
                    #expect(e.peerCertificates?.first == pki.valid.certificate, "the proxy's chain, not an origin's")
                }
            }
            try await Self.session(
                config,
                { $0.proxyTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.untrustedRoot])) }
            ) { session in
                let e = try #require(
                    await Self.failure(session, HTTPClientRequest(url: url("https://localhost:\(origin.port)/hello")))
                )
                #expect(e.code == .serverCertificateUntrusted)
                #expect(e.message.contains("proxy https://127.0.0.1:\(proxy.port)"))
            }
            #expect(proxy.requestLines.isEmpty, "no request went to an untrusted proxy")

            // The proxy's name is checked: a certificate for another name is refused.
            let misnamed = try Self.proxy(pki.wrongHost)
            defer { misnamed.shutdown() }
            try await Self.session(ProxyConfiguration(allProxy: Self.server(misnamed))) { session in
                let e = try #require(await Self.failure(session, HTTPClientRequest(url: url(plain.baseURL + "/hello"))))
                #expect(e.code == .serverCertificateUntrusted)
                #expect(e.message.contains("proxy https://127.0.0.1:\(misnamed.port)"))
                #expect(e.message.contains("127.0.0.1"))
            }
            #expect(misnamed.requestLines.isEmpty)
            // …unless the proxy's evaluator is told not to (curl's --proxy-insecure).
            try await Self.session(
                ProxyConfiguration(allProxy: Self.server(misnamed)),
                {
                    $0.proxyTrustEvaluator = Self.insecure
                }
            ) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(r.status == 200)
            }
        }

        @Test("the origin's chain inside the tunnel is decided by the origin's evaluator")
        func originTrustRefusedInsideTunnel() async throws {
            let pki = try Self.pki()
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let untrusted = try Self.tlsOrigin(pki.untrusted)
            defer { untrusted.shutdown() }
            let valid = try Self.tlsOrigin(pki.valid)
            defer { valid.shutdown() }
            try await Self.session(ProxyConfiguration(httpsProxy: Self.server(proxy))) { session in
                let e = try #require(
                    await Self.failure(
                        session,
                        HTTPClientRequest(url: url("https://localhost:\(untrusted.port)/hello"))
                    )
                )
                #expect(e.code == .serverCertificateUntrusted)
                #expect(e.message.contains("localhost:\(untrusted.port)"))
                #expect(!e.message.contains("proxy"), "the origin was refused, not the proxy: \(e.message)")
                #expect(
                    e.peerCertificates?.first == pki.untrusted.certificate,
                    "the origin's chain came through the tunnel"
                )
                #expect(untrusted.requestCount(target: "/hello") == 0)
                // The proxy was trusted: the next tunnel works.
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("https://localhost:\(valid.port)/hello"))
                )
                #expect(r.status == 200)
            }
            // A proxy trusted and an origin refused by the proxy's evaluator would have passed:
            // the origin's evaluator alone decides about the origin.
            try await Self.session(
                ProxyConfiguration(httpsProxy: Self.server(proxy)),
                {
                    $0.proxyTrustEvaluator = Self.insecure
                    $0.serverTrustEvaluator = nil
                }
            ) { session in
                let e = try #require(
                    await Self.failure(session, HTTPClientRequest(url: url("https://localhost:\(valid.port)/hello")))
                )
                #expect(e.code == .serverCertificateUntrusted)
                #expect(e.message.contains("localhost:\(valid.port)"))
            }
        }

        @Test("proxy authentication over TLS: credentials work for CONNECT and forwarding; without them a 407")
        func authenticationOverTLS() async throws {
            let pki = try Self.pki()
            let creds = ProxyCredentials(user: "hawser", password: "pr0xy s3cret")
            let proxy = try Self.proxy(credentials: creds)
            defer { proxy.shutdown() }
            let origin = try Self.tlsOrigin(pki.valid)
            defer { origin.shutdown() }
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            let good = Self.server(proxy, creds)
            try await Self.session(ProxyConfiguration(httpProxy: good, httpsProxy: good)) { session in
                let s = try await session.response(
                    for: HTTPClientRequest(url: url("https://localhost:\(origin.port)/hello"))
                )
                #expect(s.status == 200)
                let p = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/echo")))
                #expect(p.status == 200)
                #expect(p.headers["X-Echo-H-Proxy-Authorization"] == nil, "the proxy's credentials stop at the proxy")
            }
            #expect(proxy.authenticationRefusals == 0)
            let anonymous = Self.server(proxy)
            try await Self.session(ProxyConfiguration(httpProxy: anonymous, httpsProxy: anonymous)) { session in
                let e = try #require(
                    await Self.failure(session, HTTPClientRequest(url: url("https://localhost:\(origin.port)/hello")))
                )
                #expect(e.code == .proxyError)
                #expect(e.message.contains("407"))
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(r.status == 407, "a forward proxy's 407 is the response when nobody answers the challenge")
                #expect(r.headers["Proxy-Authenticate"] == "Basic realm=\"hawser-proxy\"")
            }
            #expect(proxy.authenticationRefusals == 2)
            #expect(origin.requestCount(target: "/hello") == 1 && plain.requestCount(target: "/hello") == 0)
        }

        @Test("an https:// proxy from https_proxy and all_proxy in the environment")
        func fromEnvironment() async throws {
            let pki = try Self.pki()
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let origin = try Self.tlsOrigin(pki.valid)
            defer { origin.shutdown() }
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            let config = ProxyConfiguration(environment: ["https_proxy": proxy.url, "ALL_PROXY": proxy.url + "/"])
            #expect(config.invalidSettings.isEmpty)
            #expect(config.httpsProxy == ProxyServer(kind: .https, host: "127.0.0.1", port: proxy.port))
            try await Self.session(config) { session in
                let s = try await session.response(
                    for: HTTPClientRequest(url: url("https://localhost:\(origin.port)/hello"))
                )
                #expect(s.status == 200)
                let p = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(p.status == 200)
            }
            #expect(
                proxy.requestLines == [
                    "CONNECT localhost:\(origin.port) HTTP/1.1", "GET \(plain.baseURL)/hello HTTP/1.1",
                ]
            )
        }

        @Test("a proxy variable that cannot be parsed fails the requests it would serve, naming it; the others go on")
        func unparsableEnvironment() async throws {
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            let proxy = try Self.proxy()
            defer { proxy.shutdown() }
            let config = ProxyConfiguration(environment: [
                "https_proxy": "gopher://ada:hunter2@proxy.example:70", "http_proxy": proxy.url,
                "no_proxy": "localhost",
            ])
            #expect(config.invalidSettings[.https]?.variable == "https_proxy")
            try await Self.session(config) { session in
                let e = try #require(await Self.failure(session, HTTPClientRequest(url: url("https://example.com/"))))
                #expect(e.code == .proxyError)
                #expect(e.message.contains("https_proxy"), "names the variable: \(e.message)")
                #expect(e.message.contains("gopher://ada:***@proxy.example:70"), "shows the value: \(e.message)")
                #expect(!e.message.contains("hunter2"), "but never the password")
                #expect((e.underlying as? ProxyConfigurationError)?.variable == "https_proxy")
                #expect(e.url == url("https://example.com/"))
                // http URLs use http_proxy, which is fine; no_proxy hosts go direct.
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(r.status == 200)
                #expect(proxy.requestLines == ["GET \(plain.baseURL)/hello HTTP/1.1"])
                let direct = try await session.response(
                    for: HTTPClientRequest(url: url("http://localhost:\(plain.port)/hello"))
                )
                #expect(direct.status == 200)
                #expect(proxy.requestLines.count == 1)
            }
        }

        @Test("an https:// proxy that does not speak TLS: a handshake failure naming the proxy")
        func proxyWithoutTLS() async throws {
            let plainProxy = try TestProxy()
            defer { plainProxy.shutdown() }
            let origin = try TestServer(host: "127.0.0.1")
            defer { origin.shutdown() }
            try await Self.session(
                ProxyConfiguration(httpProxy: ProxyServer(kind: .https, host: "127.0.0.1", port: plainProxy.port)),
                { $0.connectTimeout = 10 }
            ) { session in
                let e = try #require(
                    await Self.failure(session, HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                )
                #expect(e.code == .secureConnectionFailed)
                #expect(
                    e.message.contains("TLS handshake with the proxy https://127.0.0.1:\(plainProxy.port) failed"),
                    "\(e.message)"
                )
            }
            // The same proxy as http:// works (the test proxy itself is sound).
            try await Self.session(
                ProxyConfiguration(httpProxy: ProxyServer(kind: .http, host: "127.0.0.1", port: plainProxy.port))
            ) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                #expect(r.status == 200)
            }
        }
    }
}
