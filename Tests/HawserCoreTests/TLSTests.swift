// HTTPS end to end: real TLS servers (the project's test server with OpenSSL, and broken
// peers), certificates from the test PKI generated at test time.
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("TLS against real servers", .serialized)
    struct TLSTests {
        static func pki() throws -> TestPKI { try TestPKI.shared() }

        /// A configuration that trusts the test root (the test's stand-in for the system store).
        static func trustingTestRoot(
            _ configure: (inout SessionConfiguration) -> Void = { _ in }
        ) throws -> SessionConfiguration {
            var c = SessionConfiguration()
            c.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([try Self.pki().root]))
            configure(&c)
            return c
        }

        static func withTLSServer(
            _ leaf: TestPKI.Leaf,
            intermediate: Bool = true,
            minimum: TLSVersion = .tls1_2,
            maximum: TLSVersion? = nil,
            clientCA: String? = nil,
            _ body: (TestServer) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                let tls = TestServer.TLS(
                    certificateChainPath: intermediate ? leaf.chainPath : leaf.certificatePath,
                    privateKeyPath: leaf.keyPath,
                    minimumVersion: minimum,
                    maximumVersion: maximum,
                    clientCAPath: clientCA
                )
                let server = try TestServer(host: "127.0.0.1", tls: tls)
                defer { server.shutdown() }
                try await body(server)
            }
        }

        static func withSession(
            _ configuration: SessionConfiguration,
            delegate: (any SessionDelegate)? = nil,
            _ body: (Session) async throws -> Void
        ) async throws {
            let loop = try EventLoop()
            let session = Session(configuration: configuration, eventLoop: loop, delegate: delegate)
            defer {
                session.shutdown()
                loop.shutdown()
            }
            try await body(session)
        }

        static func get(_ session: Session, _ url: String) async -> Result<HTTPClientResponse, HawserError> {
            do {
                return .success(try await session.response(for: HTTPClientRequest(url: URL(string: url)!)))
            } catch {
                return .failure(error)
            }
        }

        @Test("GET over TLS: body, TLS metrics, keep-alive reuse, close_notify")
        func basicHTTPS() async throws {
            let pki = try Self.pki()
            try await Self.withTLSServer(pki.valid) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    let base = "https://localhost:\(server.port)"
                    let r = try await session.response(for: HTTPClientRequest(url: url(base + "/bytes/200000")))
                    #expect(r.status == 200)
                    #expect(
                        r.body.count == 200_000
                            && r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
                    )
                    #expect(r.metrics.secureConnectionStart != nil && r.metrics.secureConnectionEnd != nil)
                    #expect(r.metrics.tlsProtocolVersion == "TLSv1.3")
                    #expect(r.metrics.isResumedTLSSession == false)
                    let again = try await session.response(
                        for: HTTPClientRequest(url: url(base + "/echo"), headers: ["X-A": "1"])
                    )
                    #expect(again.metrics.isReusedConnection)
                    #expect(again.headers["X-Echo-H-Host"] == "localhost:\(server.port)")
                    #expect(server.acceptedConnections == 1)
                }
            }
        }

        @Test("reading paused and resumed at every body chunk over TLS (OpenSSL reading ahead) delivers the whole body")
        func pauseAndResumeOverTLS() async throws {
            let pki = try Self.pki()
            try await Self.withTLSServer(pki.valid) { server in
                var configuration = try Self.trustingTestRoot()
                // A stranded body would stall until this fires, failing the task instead of the test hanging.
                configuration.timeoutIntervalForRequest = 5
                try await Self.withSession(configuration) { session in
                    // Chunked and sized bodies, small and large pieces: each pause may leave
                    // bytes in OpenSSL's read-ahead buffer that epoll no longer reports.
                    for (size, chunk) in [(40_000, 100), (1_000_000, 16_384)] {
                        let d = RecordingDelegate()
                        d.onBody = { task, _ in
                            task.pauseReading()
                            Task { task.resumeReading() }
                        }
                        session.execute(
                            HTTPClientRequest(
                                url: url("https://localhost:\(server.port)/bytes/\(size)?chunk=\(chunk)")
                            ),
                            delegate: d
                        )
                        let r = await d.wait()
                        #expect(r.completions == 1)
                        #expect(d.error == nil, "\(String(describing: d.error))")
                        #expect(
                            r.body.count == size
                                && r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
                        )
                    }
                }
            }
        }

        @Test(
            "records OpenSSL read ahead while reading was paused are delivered on resume, with nothing more coming from the socket"
        )
        func pausedReadAheadRecordsAreNotStranded() async throws {
            let pki = try Self.pki()
            try await Self.withTLSServer(pki.valid) { server in
                var configuration = try Self.trustingTestRoot()
                // Stranded records would stall until this fires: the task fails instead of the test hanging.
                configuration.timeoutIntervalForRequest = 3
                try await Self.withSession(configuration) { session in
                    // 40 records of 100-byte chunks in one TCP send: one read(2) takes them all, and
                    // after the pause at the first chunk the rest are only in OpenSSL's buffer.
                    let d = RecordingDelegate()
                    let paused = Mutex(0)
                    d.onBody = { task, _ in
                        let first = paused.withLock { n -> Bool in
                            n += 1
                            return n == 1
                        }
                        guard first else { return }
                        task.pauseReading()
                        Task { task.resumeReading() }
                    }
                    session.execute(
                        HTTPClientRequest(url: url("https://localhost:\(server.port)/bytes/4000?chunk=100&records=1")),
                        delegate: d
                    )
                    let r = await d.wait()
                    #expect(r.completions == 1)
                    #expect(d.error == nil, "\(String(describing: d.error))")
                    #expect(
                        r.body.count == 4000 && r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
                    )
                    #expect(paused.withLock { $0 } >= 2, "the body came in more than one delivery (one per record)")
                }
            }
        }

        @Test("a second connection resumes the TLS session")
        func resumption() async throws {
            let pki = try Self.pki()
            try await Self.withTLSServer(pki.valid) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    let base = "https://127.0.0.1:\(server.port)"
                    // /close ends each connection, so each request makes a new one.
                    let first = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                    let second = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                    #expect(first.metrics.isResumedTLSSession == false)
                    #expect(second.metrics.isResumedTLSSession == true)
                    #expect(!second.metrics.isReusedConnection)
                    #expect(server.acceptedConnections == 2)
                    // Connections opened together each get a session of their own (TLS 1.3
                    // tickets are single-use). OpenSSL's server sends 2 tickets after a full
                    // handshake and 1 after a resumed one, so the cache now holds 2 sessions:
                    // 2 connections at once both resume. (A third would share the last session,
                    // which the server may or may not accept again.)
                    let resumed = await withTaskGroup(of: Bool.self) { group in
                        for _ in 0..<2 {
                            group.addTask {
                                (try? await session.response(for: HTTPClientRequest(url: url(base + "/close"))))?
                                    .metrics.isResumedTLSSession == true
                            }
                        }
                        var n = 0
                        for await r in group where r { n += 1 }
                        return n
                    }
                    #expect(resumed == 2)
                }
                var noResume = try Self.trustingTestRoot()
                noResume.tls.sessionResumption = false
                try await Self.withSession(noResume) { session in
                    let base = "https://127.0.0.1:\(server.port)"
                    _ = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                    let second = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                    #expect(second.metrics.isResumedTLSSession == false)
                }
            }
        }

        /// Every server scenario (with and without the intermediate) under every policy, through
        /// the whole stack: the verdict and its reason must be what the policy says of the chain
        /// the server presents (TrustTests asserts those verdicts row by row).
        @Test("every scenario × policy over real TLS: accept or refuse, with the reason")
        func matrix() async throws {
            let p = try Self.pki()
            func policy(
                _ mode: SecurityPolicy.PinningMode,
                _ pinned: Set<Certificate> = [],
                allowInvalid: Bool = false,
                validatesDomainName: Bool = true
            ) -> SecurityPolicy {
                var s = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinned)
                s.allowInvalidCertificates = allowInvalid
                s.validatesDomainName = validatesDomainName
                s.anchors = .custom([p.root])
                return s
            }
            var spki = SecurityPolicy(pinningMode: .publicKey)
            spki.pinnedPublicKeyHashes = [
                try PublicKeyPin("sha256/" + String(repeating: "A", count: 43) + "="),  // backup, matches nothing
                try PublicKeyPin(p.intermediate.publicKeySHA256Pin),
            ]
            spki.anchors = .custom([p.root])
            var commonName = policy(.none)
            commonName.allowsCommonNameFallback = true
            let policies: [(String, any ServerTrustEvaluating)] = [
                ("default", policy(.none)),
                ("common-name fallback (private CA opt-in)", commonName),
                ("allowInvalid, no domain validation", policy(.none, allowInvalid: true, validatesDomainName: false)),
                ("public-key pin on leaf", policy(.publicKey, [p.valid.certificate])),
                ("public-key pin on intermediate", policy(.publicKey, [p.intermediate])),
                ("public-key pin not in chain", policy(.publicKey, [p.untrustedRoot])),
                ("certificate pin on root", policy(.certificate, [p.root])),
                ("certificate pin on leaf", policy(.certificate, [p.valid.certificate])),
                ("certificate pin not in chain", policy(.certificate, [p.untrustedRoot])),
                ("SPKI hash pins with a backup", spki),
            ]
            var accepted = 0
            var refused = 0
            for leaf in p.serverLeaves {
                for withIntermediate in [true, false] {
                    try await Self.withTLSServer(leaf, intermediate: withIntermediate) { server in
                        let presented = withIntermediate ? leaf.presentedChain : leaf.leafOnly
                        for (name, evaluator) in policies {
                            var c = SessionConfiguration()
                            c.serverTrustEvaluator = evaluator
                            try await Self.withSession(c) { session in
                                let expected: TrustFailure.Reason?
                                do throws(TrustFailure) {
                                    try evaluator.evaluate(
                                        ServerTrust(host: "localhost", certificates: presented),
                                        forHost: "localhost"
                                    )
                                    expected = nil
                                } catch {
                                    expected = error.reason
                                }
                                let label = "\(leaf.name)\(withIntermediate ? "" : " (leaf only)") / \(name)"
                                switch await Self.get(session, "https://localhost:\(server.port)/hello") {
                                case .success(let r):
                                    #expect(
                                        expected == nil,
                                        "\(label): accepted, the policy says \(String(describing: expected))"
                                    )
                                    #expect(r.status == 200)
                                    accepted += 1
                                case .failure(let e):
                                    #expect(e.code == .serverCertificateUntrusted, "\(label): \(e)")
                                    #expect(e.urlErrorCode == -1202)
                                    #expect((e.underlying as? TrustFailure)?.reason == expected, "\(label): \(e)")
                                    #expect(
                                        e.peerCertificates == presented,
                                        "\(label): the error carries the chain as presented"
                                    )
                                    refused += 1
                                }
                            }
                        }
                    }
                }
            }
            #expect(
                accepted > 10 && refused > 100,
                "the matrix exercises both verdicts (\(accepted) accepted, \(refused) refused)"
            )
        }

        @Test("the system store does not trust the test root: the default refuses with untrustedRoot")
        func defaultRefuses() async throws {
            try await Self.withTLSServer(try Self.pki().valid) { server in
                try await Self.withSession(SessionConfiguration()) { session in
                    // Twice: a refused chain's session is never kept, so the second connection
                    // cannot resume its way past the evaluation.
                    for _ in 0..<2 {
                        guard case .failure(let e) = await Self.get(session, "https://localhost:\(server.port)/hello")
                        else {
                            Issue.record("a certificate from the test root was trusted by the system store")
                            return
                        }
                        #expect(e.code == .serverCertificateUntrusted)
                        #expect((e.underlying as? TrustFailure)?.reason == .untrustedRoot)
                        #expect(e.url?.absoluteString == "https://localhost:\(server.port)/hello")
                    }
                }
            }
        }

        @Test("the task's delegate answers the server-trust challenge; the session's delegate is next in line")
        func challenges() async throws {
            final class Answering: RecordingDelegate, @unchecked Sendable {
                let disposition: ChallengeDisposition
                let seen = Mutex<[AuthenticationChallenge]>([])
                init(_ d: ChallengeDisposition) { self.disposition = d }
                override func task(
                    _ task: RequestTask,
                    didReceive challenge: AuthenticationChallenge,
                    completion: @escaping @Sendable (ChallengeDisposition) -> Void
                ) {
                    self.seen.withLock { $0.append(challenge) }
                    let d = self.disposition
                    Thread.detachNewThread { completion(d) }  // later, from another thread
                }
            }
            final class SessionLevel: SessionDelegate, @unchecked Sendable {
                let count = Mutex(0)
                func session(
                    _ session: Session,
                    didReceive challenge: AuthenticationChallenge,
                    completion: @escaping @Sendable (ChallengeDisposition) -> Void
                ) {
                    self.count.withLock { $0 += 1 }
                    completion(.useServerTrust)
                }
            }
            let p = try Self.pki()
            try await Self.withTLSServer(p.selfSigned) { server in
                let u = url("https://localhost:\(server.port)/hello")
                try await Self.withSession(SessionConfiguration()) { session in
                    let trust = Answering(.useServerTrust)
                    session.execute(HTTPClientRequest(url: u), delegate: trust)
                    let rec = await trust.wait()
                    #expect(rec.head?.status == 200)
                    let c = try #require(trust.seen.withLock { $0.first })
                    #expect(c.protectionSpace.authenticationMethod == .serverTrust)
                    #expect(c.protectionSpace.host == "localhost" && c.protectionSpace.port == server.port)
                    #expect(c.serverTrust?.certificates == p.selfSigned.presentedChain)
                }
                try await Self.withSession(SessionConfiguration()) { session in
                    let refuse = Answering(.refuseServerTrust(TrustFailure(.pinMismatch, "not our pin")))
                    session.execute(HTTPClientRequest(url: u), delegate: refuse)
                    let e = try #require(
                        await refuse.wait().result.flatMap { r -> HawserError? in
                            if case .failure(let e) = r { return e }
                            return nil
                        }
                    )
                    #expect(e.code == .serverCertificateUntrusted && e.urlErrorCode == -1202)
                    #expect((e.underlying as? TrustFailure)?.reason == .pinMismatch)

                    let cancel = Answering(.cancelAuthenticationChallenge)
                    session.execute(HTTPClientRequest(url: u), delegate: cancel)
                    let rec = await cancel.wait()
                    #expect(rec.completions == 1)
                    guard case .failure(let c)? = rec.result else {
                        Issue.record("cancel succeeded")
                        return
                    }
                    #expect(c.code == .cancelled)
                }
                let sessionLevel = SessionLevel()
                try await Self.withSession(SessionConfiguration(), delegate: sessionLevel) { session in
                    let passes = Answering(.performDefaultHandling)
                    session.execute(HTTPClientRequest(url: u), delegate: passes)
                    #expect(await passes.wait().head?.status == 200)
                    #expect(sessionLevel.count.withLock { $0 } == 1)
                }
            }
        }

        @Test("a TLS 1.0-only server is refused by default")
        func oldProtocol() async throws {
            try await Self.withTLSServer(try Self.pki().valid, minimum: .tls1_0, maximum: .tls1_0) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    guard case .failure(let e) = await Self.get(session, "https://localhost:\(server.port)/hello")
                    else {
                        Issue.record("TLS 1.0 was accepted")
                        return
                    }
                    #expect(e.code == .secureConnectionFailed)
                    #expect(e.urlErrorCode == -1200)
                }
            }
        }

        @Test("client certificates: required by the server, refused without, accepted with (PEM)")
        func mutualTLS() async throws {
            let p = try Self.pki()
            try await Self.withTLSServer(p.valid, clientCA: p.rootPath) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    guard case .failure(let e) = await Self.get(session, "https://localhost:\(server.port)/hello")
                    else {
                        Issue.record("the server accepted a client without a certificate")
                        return
                    }
                    #expect(e.code == .clientCertificateRequired, "\(e)")
                }
                let identity = TLSClientIdentity.pem(
                    certificateChainPath: p.client.certificatePath,
                    privateKeyPath: p.client.keyPath
                )
                try await Self.withSession(try Self.trustingTestRoot { $0.tls.clientIdentity = identity }) { session in
                    let r = try await session.response(
                        for: HTTPClientRequest(url: url("https://localhost:\(server.port)/hello"))
                    )
                    #expect(r.status == 200)
                }
            }
            // A bad identity is a clear error on the task, not a crash.
            try await Self.withSession(
                try Self.trustingTestRoot {
                    $0.tls.clientIdentity = .pem(
                        certificateChainPath: "/nonexistent.pem",
                        privateKeyPath: "/nonexistent.key"
                    )
                }
            ) { session in
                guard case .failure(let e) = await Self.get(session, "https://localhost:1/hello") else {
                    Issue.record("no error")
                    return
                }
                #expect(e.code == .clientCertificateRequired)
                #expect(e.message.contains("/nonexistent.pem"))
            }
        }

        @Test(
            "the session's TLS context is made off the loop: while its certificate file cannot be read yet, another origin's request completes"
        )
        func tlsContextIsMadeOffTheLoop() async throws {
            let p = try Self.pki()
            // The client certificate is a FIFO: reading it blocks until the test writes it.
            let fifo = FileManager.default.temporaryDirectory
                .appendingPathComponent("hawser-identity-\(UUID().uuidString).pem").path
            try #require(mkfifo(fifo, 0o600) == 0)
            defer { unlink(fifo) }
            let certificate = Array(try Data(contentsOf: URL(fileURLWithPath: p.client.certificatePath)))
            let plain = try ScriptedServer([[.readRequest(), .sendText(ExchangeEdgeTests.ok), .waitForClose]])
            defer { plain.stop() }
            try await Self.withTLSServer(p.valid, clientCA: p.rootPath) { server in
                let identity = TLSClientIdentity.pem(certificateChainPath: fifo, privateKeyPath: p.client.keyPath)
                try await Self.withSession(try Self.trustingTestRoot { $0.tls.clientIdentity = identity }) { session in
                    async let https = session.response(
                        for: HTTPClientRequest(url: url("https://localhost:\(server.port)/hello"))
                    )
                    // Returns once the context's maker has opened the FIFO and waits in its read.
                    let feeder = await FIFOPeer.writer(fifo, writing: certificate)
                    let other = try await session.response(for: HTTPClientRequest(url: url(plain.baseURL + "/")))
                    #expect(other.status == 200)
                    feeder.release()
                    #expect(
                        !feeder.releasedByWatchdog,
                        "the plain request waited for the certificate file: the loop was blocked"
                    )
                    let secure = try await https
                    #expect(secure.status == 200, "the identity read from the FIFO was presented")
                }
            }
        }

        @Test("a close-delimited body cut off without close_notify is a truncation error over TLS")
        func truncation() async throws {
            try await Self.withTLSServer(try Self.pki().valid) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    guard
                        case .failure(let e) = await Self.get(
                            session,
                            "https://localhost:\(server.port)/fault/truncate"
                        )
                    else {
                        Issue.record("a truncated TLS body was accepted")
                        return
                    }
                    #expect(e.code == .connectionLost)
                    #expect(e.message.contains("truncated"))
                    // With close_notify, the same framing ends cleanly.
                    let r = try await session.response(
                        for: HTTPClientRequest(url: url("https://localhost:\(server.port)/close-delimited/5000"))
                    )
                    #expect(r.body.count == 5000)
                }
            }
        }

        /// Issue 27: the policies of the matrix that validate the chain, for a scenario's leaf.
        static func chainValidatingPolicies(
            _ p: TestPKI,
            leaf: Certificate
        ) throws -> [(String, any ServerTrustEvaluating)] {
            func policy(_ mode: SecurityPolicy.PinningMode, _ pinned: Set<Certificate> = []) -> SecurityPolicy {
                var s = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinned)
                s.anchors = .custom([p.root])
                return s
            }
            var commonName = policy(.none)
            commonName.allowsCommonNameFallback = true
            var spki = try SecurityPolicy(pinnedPublicKeyHashes: [
                "sha256/" + String(repeating: "A", count: 43) + "=", leaf.publicKeySHA256Pin,
            ])
            spki.anchors = .custom([p.root])
            return [
                ("default evaluator", DefaultTrustEvaluator(anchors: .custom([p.root]))),
                ("default", policy(.none)),
                ("common-name fallback (private CA opt-in)", commonName),
                ("public-key pin on leaf", policy(.publicKey, [leaf])),
                ("public-key pin on root", policy(.publicKey, [p.root])),
                ("certificate pin on root", policy(.certificate, [p.root])),
                ("certificate pin on leaf", policy(.certificate, [leaf])),
                ("SPKI hash pins with a backup", spki),
            ]
        }

        @Test("a root sent self-signed before its cross-signed copy: every chain-validating policy finds the path")
        func crossSignedRootAfterItsSelfSignedCopy() async throws {
            let p = try Self.pki()
            try await Self.withTLSServer(p.crossSigned) { server in
                for (name, evaluator) in try Self.chainValidatingPolicies(p, leaf: p.crossSigned.certificate) {
                    var c = SessionConfiguration()
                    c.serverTrustEvaluator = evaluator
                    try await Self.withSession(c) { session in
                        switch await Self.get(session, "https://localhost:\(server.port)/hello") {
                        case .success(let r):
                            #expect(r.status == 200, "\(name)")
                        case .failure(let e):
                            Issue.record("\(name): \(e)")
                        }
                    }
                }
            }
        }

        @Test("a pinned leaf sent with an expired cross-signed copy of the root: the path ends at the pinned leaf")
        func pinnedLeafWithAnExpiredRootCopy() async throws {
            let p = try Self.pki()
            try await Self.withTLSServer(p.withExpiredRootCopy) { server in
                for (name, evaluator) in try Self.chainValidatingPolicies(p, leaf: p.withExpiredRootCopy.certificate) {
                    var c = SessionConfiguration()
                    c.serverTrustEvaluator = evaluator
                    try await Self.withSession(c) { session in
                        switch await Self.get(session, "https://localhost:\(server.port)/hello") {
                        case .success(let r): #expect(r.status == 200, "\(name)")
                        case .failure(let e): Issue.record("\(name): \(e)")
                        }
                    }
                }
                // Trusting only the legacy root: the copy is on the path, and the refusal names it
                // with its issuer.
                var c = SessionConfiguration()
                c.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([p.legacyRoot]))
                try await Self.withSession(c) { session in
                    guard case .failure(let e) = await Self.get(session, "https://localhost:\(server.port)/hello")
                    else {
                        Issue.record("a path through an expired certificate was trusted")
                        return
                    }
                    let failure = e.underlying as? TrustFailure
                    #expect(failure?.reason == .expired)
                    #expect(failure?.certificate == p.expiredRootCopy)
                    #expect(
                        failure?.message.contains("'Hawser Test Root CA' issued by 'Hawser Legacy Root CA' expired")
                            == true,
                        "\(e)"
                    )
                }
            }
        }

        @Test("an IP address written as a DNS name is refused, and the message says it needs an IP entry")
        func ipAddressAsADNSName() async throws {
            let p = try Self.pki()
            try await Self.withTLSServer(p.ipAsDNSName) { server in
                try await Self.withSession(try Self.trustingTestRoot()) { session in
                    guard case .failure(let e) = await Self.get(session, "https://127.0.0.1:\(server.port)/hello")
                    else {
                        Issue.record("DNS:127.0.0.1 matched the IP address 127.0.0.1")
                        return
                    }
                    #expect(e.code == .serverCertificateUntrusted)
                    let failure = e.underlying as? TrustFailure
                    #expect(failure?.reason == .hostnameMismatch)
                    let message = failure?.message ?? ""
                    #expect(
                        message.contains(
                            "certificate '127.0.0.1' is not valid for '127.0.0.1' (it names 127.0.0.1 only as a DNS name (DNS:127.0.0.1); an IP address matches only an IP address entry of the subjectAltName (IP:127.0.0.1))"
                        ),
                        "\(message)"
                    )
                }
            }
        }

        @Test(
            "a handshake that never completes hits the connect timeout; garbage instead of a ServerHello is a clear error"
        )
        func brokenPeers() async throws {
            try await FaultTests.withVirtualSession({ $0.connectTimeout = 30 }) { session, _ in
                let silent = try ScriptedServer([[.stall]])
                defer { silent.stop() }
                let d = RecordingDelegate()
                session.execute(HTTPClientRequest(url: url("https://127.0.0.1:\(silent.port)/")), delegate: d)
                #expect(await eventually { silent.connections.load(ordering: .relaxed) == 1 })
                try session.eventLoop.advanceTime(by: 30 * FaultTests.second - 1)
                #expect(d.record.withLock { $0.completions } == 0, "the handshake has the whole connect timeout")
                try session.eventLoop.advanceTime(by: 1)
                let rec = await d.wait()
                #expect(rec.completions == 1)
                #expect(FaultTests.error(rec)?.code == .connectTimeout)
            }
            try await FaultTests.withSession { session in
                let garbage = try ScriptedServer([
                    [.sendText("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"), .waitForClose]
                ])
                defer { garbage.stop() }
                let rec = await FaultTests.run(
                    session,
                    HTTPClientRequest(url: url("https://127.0.0.1:\(garbage.port)/"))
                )
                #expect(rec.completions == 1)
                let e = try #require(FaultTests.error(rec))
                #expect(e.code == .secureConnectionFailed)
                #expect(e.message.contains("TLS handshake"))
            }
        }
    }
}
