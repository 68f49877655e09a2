import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    /// Requests through real proxies on loopback (tinyproxy, Dante's sockd) and scripted ones.
    @Suite("Proxies on the wire", .serialized)
    struct ProxyNetworkTests {
        static func session(
            _ proxy: ProxyConfiguration,
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session) async throws -> Void
        ) async throws {
            try await FaultTests.withSession(
                { c in
                    c.proxy = proxy
                    configure(&c)
                },
                body
            )
        }

        static func server(_ kind: ProxyServer.Kind, _ port: Int, _ credentials: ProxyCredentials? = nil) -> ProxyServer
        {
            ProxyServer(kind: kind, host: "127.0.0.1", port: port, credentials: credentials)
        }

        @Test(
            "http through tinyproxy (absolute-form), https through its CONNECT tunnel with the origin's chain evaluated"
        )
        func tinyproxy() async throws {
            let proxy = try TinyproxyFixture()
            defer { proxy.stop() }
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            let pki = try TestPKI.shared()
            let secure = try TestServer(
                host: "127.0.0.1",
                tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
            )
            defer { secure.shutdown() }
            let p = Self.server(.http, proxy.port)
            try await Self.session(
                ProxyConfiguration(httpProxy: p, httpsProxy: p),
                {
                    $0.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.root]))
                }
            ) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/echo")))
                #expect(r.status == 200)
                #expect(
                    r.headers["X-Echo-Target"] == "/echo",
                    "the proxy turned the absolute-form target back into origin-form"
                )
                let s = try await session.response(
                    for: HTTPClientRequest(url: url("https://localhost:\(secure.port)/hello"))
                )
                #expect(String(decoding: s.body, as: UTF8.self) == "Hello, World!")
                #expect(s.metrics.tlsProtocolVersion != nil)
                #expect(proxy.log.contains("CONNECT"), "the https request went through the tunnel")
            }
            // The tunnel carries the origin's chain: a policy that does not trust it refuses it.
            try await Self.session(ProxyConfiguration(httpsProxy: p)) { session in
                do {
                    _ = try await session.response(
                        for: HTTPClientRequest(url: url("https://localhost:\(secure.port)/hello"))
                    )
                    Issue.record("an untrusted origin was accepted through the tunnel")
                } catch let e as HawserError {
                    #expect(e.code == .serverCertificateUntrusted)
                    #expect(e.peerCertificates?.first == pki.valid.certificate)
                }
            }
        }

        @Test("tinyproxy with Basic auth: credentials from the proxy URL work; none is a clear 407 error for CONNECT")
        func tinyproxyAuth() async throws {
            let creds = ProxyCredentials(user: "hawser", password: "s3cret")
            let proxy = try TinyproxyFixture(credentials: creds)
            defer { proxy.stop() }
            let plain = try TestServer(host: "127.0.0.1")
            defer { plain.shutdown() }
            try await Self.session(ProxyConfiguration(httpProxy: Self.server(.http, proxy.port, creds))) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(r.status == 200)
            }
            try await Self.session(ProxyConfiguration(httpProxy: Self.server(.http, proxy.port))) { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/hello")))
                #expect(r.status == 407, "without credentials the proxy's 407 is the response")
            }
            try await Self.session(ProxyConfiguration(httpsProxy: Self.server(.http, proxy.port))) { session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url("https://127.0.0.1:\(plain.port)/")))
                    Issue.record("CONNECT without credentials succeeded")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError)
                    #expect(e.message.contains("407"))
                }
            }
        }

        @Test("a forward proxy that answers 407 then 200: the challenge is answered and the request sent again")
        func proxy407Then200() async throws {
            let challenge =
                "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\"\r\nContent-Length: 0\r\n\r\n"
            let proxy = try ScriptedServer([
                [
                    .readRequest(), .sendText(challenge), .readRequest(),
                    .sendText("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), .waitForClose,
                ]
            ])
            defer { proxy.stop() }
            let creds = ProxyCredentials(user: "u", password: "p")
            try await Self.session(
                ProxyConfiguration(httpProxy: ProxyServer(kind: .http, host: "127.0.0.1", port: proxy.port))
            ) { session in
                final class Answer: RecordingDelegate, @unchecked Sendable {
                    let spaces = Mutex<[ProtectionSpace]>([])
                    override func task(
                        _ task: RequestTask,
                        didReceive challenge: AuthenticationChallenge,
                        completion: @escaping @Sendable (ChallengeDisposition) -> Void
                    ) {
                        self.spaces.withLock { $0.append(challenge.protectionSpace) }
                        completion(
                            challenge.protectionSpace.isProxy
                                ? .useCredential(Credential(user: "u", password: "p", persistence: .none))
                                : .cancelAuthenticationChallenge
                        )
                    }
                }
                let d = Answer()
                session.execute(HTTPClientRequest(url: url("http://origin.test/path?q=1")), delegate: d)
                let rec = await d.wait()
                #expect(rec.head?.status == 200)
                let space = try #require(d.spaces.withLock { $0.first })
                #expect(
                    space.isProxy && space.host == "127.0.0.1" && space.port == proxy.port,
                    "the proxy's protection space: \(space)"
                )
                let requests = proxy.requests.map { String(decoding: $0, as: UTF8.self) }
                #expect(requests.count == 2)
                #expect(requests.first?.hasPrefix("GET http://origin.test/path?q=1 HTTP/1.1\r\n") == true)
                #expect(requests.last?.contains("Proxy-Authorization: \(creds.basicAuthorization)\r\n") == true)
            }
        }

        @Test("a proxy that refuses CONNECT is a clear error")
        func connectRefused() async throws {
            let proxy = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"), .waitForClose]
            ])
            defer { proxy.stop() }
            try await Self.session(
                ProxyConfiguration(httpsProxy: ProxyServer(kind: .http, host: "127.0.0.1", port: proxy.port))
            ) { session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url("https://example.invalid/")))
                    Issue.record("a refused CONNECT succeeded")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError)
                    #expect(e.message.contains("403"))
                    #expect(e.message.contains("example.invalid:443"))
                }
            }
        }

        @Test("SOCKS5: Dante without auth, a scripted server with username/password and remote DNS, and a refusal")
        func socks5() async throws {
            let origin = try TestServer(host: "127.0.0.1")
            defer { origin.shutdown() }
            let dante = try DanteFixture()
            defer { dante.stop() }
            try await Self.session(ProxyConfiguration(allProxy: Self.server(.socks5(remoteDNS: false), dante.port))) {
                session in
                let r = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                #expect(String(decoding: r.body, as: UTF8.self) == "Hello, World!")
            }
            let creds = ProxyCredentials(user: "sock", password: "pw")
            let scripted = try ScriptedSOCKS5Server(credentials: creds)
            defer { scripted.stop() }
            try await Self.session(
                ProxyConfiguration(allProxy: Self.server(.socks5(remoteDNS: true), scripted.port, creds))
            ) { session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://localhost:\(origin.port)/hello"))
                )
                #expect(r.status == 200)
                #expect(
                    scripted.requests.last == .init(addressType: 3, host: "localhost", port: origin.port, user: "sock"),
                    "the host name went to the proxy (remote DNS)"
                )
            }
            try await Self.session(
                ProxyConfiguration(
                    allProxy: Self.server(
                        .socks5(remoteDNS: true),
                        scripted.port,
                        ProxyCredentials(user: "sock", password: "wrong")
                    )
                )
            ) { session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                    Issue.record("wrong SOCKS credentials were accepted")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError)
                }
            }
            let refusing = try ScriptedSOCKS5Server(forcedReply: 5)
            defer { refusing.stop() }
            try await Self.session(ProxyConfiguration(allProxy: Self.server(.socks5(remoteDNS: true), refusing.port))) {
                session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                    Issue.record("a refused SOCKS CONNECT succeeded")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError)
                    #expect(e.message.lowercased().contains("refused"))
                }
            }
        }

        @Test("no_proxy bypasses the proxy; an unreachable proxy is a proxyError")
        func bypassAndUnreachable() async throws {
            let origin = try TestServer(host: "127.0.0.1")
            defer { origin.shutdown() }
            let dead = try NginxFixture.freePort()
            let config = try ProxyConfiguration.fromEnvironment([
                "http_proxy": "http://127.0.0.1:\(dead)", "no_proxy": "localhost",
            ])
            try await Self.session(config) { session in
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://localhost:\(origin.port)/hello"))
                )
                #expect(r.status == 200)
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(origin.baseURL + "/hello")))
                    Issue.record("a dead proxy answered")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError)
                }
            }
        }
    }
}
