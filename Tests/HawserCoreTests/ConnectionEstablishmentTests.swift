// Connection establishment over real sockets: Happy Eyeballs against an address that drops
// packets (in a network namespace the test makes, on a loop with a manual clock, so the 250 ms
// stagger and the connect timeout are asserted at exact instants), the DNS override, and
// Unix-domain sockets.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension NetworkTests {
    @Suite("Connection establishment: Happy Eyeballs, DNS override, Unix sockets", .serialized)
    struct ConnectionEstablishmentTests {
        static let ms: UInt64 = 1_000_000

        /// Runs `body` with a server inside a fresh network namespace, a session whose loop
        /// lives in the same namespace on a manual clock, and the namespace's black-hole
        /// addresses (packets to them are dropped by a dummy interface: a connect to one neither
        /// succeeds nor fails).
        static func inNamespace(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session, TestServer, ManualClock, BlackHoleNamespace) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                let ns = try BlackHoleNamespace()
                defer { ns.delete() }
                let serverLoop = try EventLoop(name: "he-server")
                defer { serverLoop.shutdown() }
                try ns.enter(serverLoop)
                let server = try TestServer(host: "127.0.0.1", loop: serverLoop)
                defer { server.shutdown() }
                let clock = ManualClock()
                let loop = try EventLoop(name: "he-client", clock: clock)
                defer { loop.shutdown() }
                try ns.enter(loop)
                var c = SessionConfiguration()
                c.proxy = .none
                configure(&c)
                let session = Session(configuration: c, eventLoop: loop)
                defer { session.shutdown() }
                try await body(session, server, clock, ns)
            }
        }

        /// Starts `request` and returns once the session's loop has handed it to the pool (the
        /// submission and the statistics read are queued on the loop in that order).
        static func start(_ session: Session, _ request: HTTPClientRequest) -> RecordingDelegate {
            let d = RecordingDelegate()
            session.execute(request, delegate: d)
            _ = session.poolStatistics()
            return d
        }

        @Test("a black-holed IPv6 address first: the IPv4 attempt starts 250 ms later, wins, and the loser is closed")
        func happyEyeballsReachesTheSecondAddress() async throws {
            try await Self.inNamespace({ c in
                c.dnsOverride = ["he.test": [BlackHoleNamespace.blackHoleV6, "127.0.0.1"]]
            }) { session, server, clock, _ in
                let t0 = clock.now
                let d = Self.start(session, HTTPClientRequest(url: url("http://he.test:\(server.port)/hello")))
                #expect(session.poolStatistics().connecting == 1)
                try session.eventLoop.advanceTime(by: 250 * Self.ms - 1)
                #expect(server.acceptedConnections == 0, "the IPv4 attempt must wait for the stagger")
                #expect(d.record.withLock { $0.completions } == 0)
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.head?.status == 200)
                let m = try #require(r.metrics)
                #expect(m.remoteAddress?.ipAddress == "127.0.0.1")
                #expect(m.connectStart == t0)
                #expect(m.connectEnd == t0 + 250 * Self.ms, "connected the instant the second attempt started")
                #expect(m.connectAttempts.map(\.address.ipAddress) == [BlackHoleNamespace.blackHoleV6, "127.0.0.1"])
                #expect(m.connectAttempts.map(\.outcome) == [.abandoned, .won])
                #expect(m.connectAttempts.map(\.start) == [t0, t0 + 250 * Self.ms])
                #expect(session.poolStatistics().openConnections == 1, "the losing socket was closed")
            }
        }

        @Test("the resolver's order of families is kept: IPv4 listed first is tried first (RFC 8305 §4)")
        func resolverFamilyOrderKept() async throws {
            try await Self.inNamespace({ c in
                c.dnsOverride = ["v4first.test": ["127.0.0.1", BlackHoleNamespace.blackHoleV6]]
            }) { session, server, clock, _ in
                let t0 = clock.now
                let d = Self.start(session, HTTPClientRequest(url: url("http://v4first.test:\(server.port)/hello")))
                let r = await d.wait()
                #expect(r.head?.status == 200)
                let m = try #require(r.metrics)
                #expect(m.connectAttempts.map(\.address.ipAddress) == ["127.0.0.1"], "IPv6 was put first")
                #expect(m.connectAttempts.map(\.outcome) == [.won])
                #expect(m.connectEnd == t0, "no stagger waited for")
            }
        }

        @Test("connectionAttemptDelay sets each attempt's own delay: the next starts that long after the one before")
        func configuredAttemptDelay() async throws {
            try await Self.inNamespace({ c in
                c.connectionAttemptDelay = 0.1
                c.dnsOverride = [
                    "slow.test": [BlackHoleNamespace.blackHoleV6, BlackHoleNamespace.blackHoleV4, "::1", "127.0.0.1"]
                ]
            }) { session, server, clock, _ in
                let t0 = clock.now
                let d = Self.start(session, HTTPClientRequest(url: url("http://slow.test:\(server.port)/hello")))
                // v6 hole at t0, v4 hole at +100 ms, ::1 (refused at once) at +200 ms, and then
                // 127.0.0.1 at once after that failure, without waiting for a third delay.
                try session.eventLoop.advanceTime(by: 100 * Self.ms)
                try session.eventLoop.advanceTime(by: 100 * Self.ms - 1)
                #expect(server.acceptedConnections == 0, "the third attempt must wait for its own delay")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.head?.status == 200)
                let m = try #require(r.metrics)
                #expect(
                    m.connectAttempts.map(\.address.ipAddress) == [
                        BlackHoleNamespace.blackHoleV6, BlackHoleNamespace.blackHoleV4, "::1", "127.0.0.1",
                    ]
                )
                #expect(
                    m.connectAttempts.map(\.start) == [t0, t0 + 100 * Self.ms, t0 + 200 * Self.ms, t0 + 200 * Self.ms]
                )
                #expect(m.connectAttempts.map(\.outcome).last == .won)
            }
        }

        @Test(
            "every address black-holed: the connect timeout fires at exactly connectTimeout, with every attempt named"
        )
        func connectTimeoutInVirtualTime() async throws {
            try await Self.inNamespace({ c in
                c.connectTimeout = 5
                c.dnsOverride = ["nowhere.test": [BlackHoleNamespace.blackHoleV4, BlackHoleNamespace.blackHoleV6]]
            }) { session, _, clock, _ in
                let t0 = clock.now
                let d = Self.start(session, HTTPClientRequest(url: url("http://nowhere.test:8080/")))
                try session.eventLoop.advanceTime(by: 250 * Self.ms)
                #expect(session.poolStatistics().connecting == 1)
                try session.eventLoop.advanceTime(by: 5_000 * Self.ms - 250 * Self.ms - 1)
                #expect(d.record.withLock { $0.completions } == 0, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                let r = await d.wait()
                #expect(r.completions == 1)
                let e = try #require(d.error)
                #expect(e.code == .connectTimeout)
                #expect(e.message.contains("5.0 s"))
                #expect(e.message.contains("[\(BlackHoleNamespace.blackHoleV6)]:8080"), "\(e.message)")
                #expect(e.message.contains("\(BlackHoleNamespace.blackHoleV4):8080"), "\(e.message)")
                #expect(clock.now == t0 + 5_000 * Self.ms)
                #expect(session.poolStatistics().openConnections == 0)
                #expect(session.poolStatistics().connecting == 0)
            }
        }

        @Test("a refused first address fails fast and the next one starts at once, not after the stagger")
        func refusedAddressStartsTheNextAtOnce() async throws {
            // ::1 has nothing listening on the server's port inside the namespace: refused.
            try await Self.inNamespace({ c in
                c.dnsOverride = ["fast.test": ["::1", "127.0.0.1"]]
            }) { session, server, clock, _ in
                let t0 = clock.now
                let d = Self.start(session, HTTPClientRequest(url: url("http://fast.test:\(server.port)/hello")))
                let r = await d.wait()
                #expect(r.head?.status == 200)
                let m = try #require(r.metrics)
                #expect(m.connectAttempts.map(\.address.ipAddress) == ["::1", "127.0.0.1"])
                guard case .failed(let why)? = m.connectAttempts.first?.outcome else {
                    Issue.record("the first attempt did not fail: \(m.connectAttempts)")
                    return
                }
                #expect(why.contains("refused"), "\(why)")
                #expect(m.connectAttempts[1].start == t0, "no virtual time passed: it did not wait for the timer")
            }
        }

        @Test("the DNS override sends the connection to the given address; Host, cookies and TLS keep the name")
        func dnsOverride() async throws {
            let server = try TestServer(host: "127.0.0.1")
            defer { server.shutdown() }
            try await FaultTests.withSession({ c in
                c.dnsOverride = ["api.hawser.test": ["127.0.0.1"]]
            }) { session in
                let echo = try await session.response(
                    for: HTTPClientRequest(url: url("http://api.hawser.test:\(server.port)/echo"))
                )
                #expect(echo.status == 200)
                #expect(echo.headers["X-Echo-H-Host"] == "api.hawser.test:\(server.port)")
                #expect(echo.metrics.remoteAddress?.ipAddress == "127.0.0.1")
                #expect(echo.metrics.domainLookupStart == nil, "no resolver was asked")
                _ = try await session.response(
                    for: HTTPClientRequest(url: url("http://api.hawser.test:\(server.port)/cookies/set?k=v"))
                )
                let cookies = try await session.response(
                    for: HTTPClientRequest(url: url("http://api.hawser.test:\(server.port)/cookies"))
                )
                #expect(String(decoding: cookies.body, as: UTF8.self) == "k=v")
                #expect(
                    session.configuration.httpCookieStorage?.cookies(for: url("http://api.hawser.test/"))
                        .map(\.name) == ["k"]
                )
            }
            // An entry that is not an address is a clear error.
            try await FaultTests.withSession({ c in c.dnsOverride = ["bad.test": ["not-an-address"]] }) { session in
                let r = await FaultTests.run(
                    session,
                    HTTPClientRequest(url: url("http://bad.test:\(server.port)/hello"))
                )
                #expect(FaultTests.error(r)?.code == .invalidRequest)
                #expect(FaultTests.error(r)?.message.contains("not-an-address") == true)
            }
        }

        @Test("over TLS the override keeps SNI and the certificate check on the name")
        func dnsOverrideOverTLS() async throws {
            let p = try TestPKI.shared()
            try await TLSTests.withTLSServer(p.wildcard) { server in
                var c = try TLSTests.trustingTestRoot()
                c.dnsOverride = ["api.hawser.localhost": ["127.0.0.1"], "other.example": ["127.0.0.1"]]
                try await TLSTests.withSession(c) { session in
                    let ok = await TLSTests.get(session, "https://api.hawser.localhost:\(server.port)/hello")
                    #expect((try? ok.get())?.status == 200, "\(ok)")
                    // The same address under a name the certificate does not carry is refused.
                    guard
                        case .failure(let e) = await TLSTests.get(session, "https://other.example:\(server.port)/hello")
                    else {
                        Issue.record("a name the certificate does not carry was accepted")
                        return
                    }
                    #expect(e.code == .serverCertificateUntrusted)
                    #expect((e.underlying as? TrustFailure)?.reason == .hostnameMismatch)
                }
            }
        }

        static func socketPath() -> String {
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "hawser-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            ).path
        }

        @Test("http+unix: the request goes over the socket, Host is localhost, and the connection is pooled")
        func unixSocket() async throws {
            let path = Self.socketPath()
            let server = try TestServer(unixSocketPath: path)
            defer { server.shutdown() }
            #expect(server.baseURL.hasPrefix("http+unix://%2F"))
            try await FaultTests.withSession { session in
                let first = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/echo?x=1")))
                #expect(first.status == 200)
                #expect(first.headers["X-Echo-H-Host"] == "localhost")
                #expect(first.headers["X-Echo-Target"] == "/echo?x=1")
                #expect(first.metrics.remoteAddress?.unixPath == path)
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(second.metrics.isReusedConnection)
                #expect(server.acceptedConnections == 1)
            }
            // A socket that does not exist: cannotConnect naming it.
            try await FaultTests.withSession { session in
                let missing = Self.socketPath()
                let encoded = missing.replacingOccurrences(of: "/", with: "%2F")
                let r = await FaultTests.run(session, HTTPClientRequest(url: url("http+unix://\(encoded)/hello")))
                #expect(FaultTests.error(r)?.code == .cannotConnect)
                #expect(FaultTests.error(r)?.message.contains(missing) == true)
            }
        }

        @Test("https+unix: TLS over the socket, the certificate checked against localhost")
        func unixSocketOverTLS() async throws {
            let p = try TestPKI.shared()
            let path = Self.socketPath()
            let tls = TestServer.TLS(certificateChainPath: p.valid.chainPath, privateKeyPath: p.valid.keyPath)
            let server = try TestServer(unixSocketPath: path, tls: tls)
            defer { server.shutdown() }
            #expect(server.baseURL.hasPrefix("https+unix://"))
            try await TLSTests.withSession(try TLSTests.trustingTestRoot()) { session in
                let r = await TLSTests.get(session, server.baseURL + "/hello")
                #expect((try? r.get())?.status == 200, "\(r)")
                #expect((try? r.get())?.metrics.tlsProtocolVersion != nil)
            }
        }
    }
}
