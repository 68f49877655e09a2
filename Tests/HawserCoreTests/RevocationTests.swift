// Revocation: stapled OCSP responses and CRL files, made at test time from the test PKI
// (TestPKI.ocspResponse / TestPKI.crlFile), checked by ServerTrust, the evaluators and the
// policy without a network, then end to end through the test server's stapling.
import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@Suite("Revocation: stapled OCSP and CRL files")
struct RevocationTests {
    static func pki() throws -> TestPKI { try TestPKI.shared() }

    /// Evaluates `leaf`'s presented chain for localhost against the test root with `revocation`
    /// and `staple`; returns the failure, nil when accepted.
    static func verdict(
        _ leaf: TestPKI.Leaf,
        staple: [UInt8]?,
        _ revocation: RevocationPolicy
    ) throws -> TrustFailure? {
        let pki = try Self.pki()
        let trust = ServerTrust(host: "localhost", certificates: leaf.presentedChain, stapledOCSPResponse: staple)
        let evaluator = DefaultTrustEvaluator(anchors: .custom([pki.root]), revocation: revocation)
        do throws(TrustFailure) {
            try evaluator.evaluate(trust, forHost: "localhost")
            return nil
        } catch {
            return error
        }
    }

    @Test("a stapled response saying good is accepted, soft-fail and strict")
    func good() throws {
        let pki = try Self.pki()
        let staple = try pki.ocspResponse(for: pki.valid, status: .good)
        #expect(try Self.verdict(pki.valid, staple: staple, .stapledOCSP) == nil)
        #expect(try Self.verdict(pki.valid, staple: staple, .strict) == nil)
    }

    @Test("a stapled response saying revoked refuses the certificate, naming it, in both modes")
    func revoked() throws {
        let pki = try Self.pki()
        let staple = try pki.ocspResponse(for: pki.revoked, status: .revoked)
        for policy in [RevocationPolicy.stapledOCSP, .strict] {
            let failure = try #require(try Self.verdict(pki.revoked, staple: staple, policy))
            #expect(failure.reason == .revoked)
            #expect(
                failure.message.contains("certificate 'localhost' issued by 'Hawser Test Intermediate CA' was revoked")
            )
            #expect(failure.message.contains("keyCompromise"), "\(failure.message)")
            #expect(failure.certificate == pki.revoked.certificate)
            #expect(failure.depth == 0)
        }
        // Off (the default): the staple is not looked at.
        #expect(try Self.verdict(pki.revoked, staple: staple, .off) == nil)
        #expect(DefaultTrustEvaluator().revocation == .off && SecurityPolicy.default.revocation == .off)
    }

    @Test(
        "no usable staple: accepted by soft-fail, refused by strict with what was wrong",
        arguments: [
            ("none", "stapled no OCSP response"),
            ("unknown", "says its status is unknown"),
            ("impostor", "signed neither by its issuer"),
            ("root", "signed neither by its issuer"),
            ("expired", "expired on"),
            ("notYetValid", "is not valid before"),
            ("otherCertificate", "is about other certificates"),
            ("garbage", "does not parse"),
            ("tryLater", "is an error ('trylater')"),
            ("noBasicResponse", "holds no basic response"),
        ]
    )
    func unknownStatus(_ scenario: String, _ explanation: String) throws {
        let pki = try Self.pki()
        let staple: [UInt8]?
        switch scenario {
        case "none": staple = nil
        case "unknown": staple = try pki.ocspResponse(for: pki.valid, status: .unknown)
        // A response with the intermediate's name signed by another key; and one by the root,
        // which is not the leaf's issuer and did not authorise a responder.
        case "impostor": staple = try pki.ocspResponse(for: pki.valid, status: .good, signer: .impostor)
        case "root": staple = try pki.ocspResponse(for: pki.valid, status: .good, signer: .root)
        case "expired":
            staple = try pki.ocspResponse(
                for: pki.valid,
                status: .good,
                thisUpdate: -3 * 86_400,
                nextUpdate: -2 * 86_400
            )
        case "notYetValid": staple = try pki.ocspResponse(for: pki.valid, status: .good, thisUpdate: 86_400)
        case "otherCertificate": staple = try pki.ocspResponse(for: pki.revoked, status: .good)
        // OCSPResponse DER: the status tryLater (3); successful (0) without responseBytes.
        case "tryLater": staple = [0x30, 0x03, 0x0A, 0x01, 0x03]
        case "noBasicResponse": staple = [0x30, 0x03, 0x0A, 0x01, 0x00]
        default: staple = [0x04, 0x02, 0xFF, 0xFF]
        }
        #expect(try Self.verdict(pki.valid, staple: staple, .stapledOCSP) == nil)
        let failure = try #require(try Self.verdict(pki.valid, staple: staple, .strict))
        #expect(failure.reason == .revocationStatusUnknown)
        #expect(failure.message.contains("the revocation status of certificate 'localhost' is unknown"))
        #expect(failure.message.contains(explanation), "\(failure.message)")
    }

    @Test("a revoked response that does not verify (impostor's) is no proof either way")
    func forgedRevocation() throws {
        let pki = try Self.pki()
        let staple = try pki.ocspResponse(for: pki.valid, status: .revoked, signer: .impostor)
        #expect(try Self.verdict(pki.valid, staple: staple, .stapledOCSP) == nil)
        #expect(try Self.verdict(pki.valid, staple: staple, .strict)?.reason == .revocationStatusUnknown)
    }

    @Test("the clock skew allowance: a response that expired a minute ago passes, a day ago does not")
    func clockSkew() throws {
        let pki = try Self.pki()
        let recent = try pki.ocspResponse(for: pki.valid, status: .good, thisUpdate: -86_400, nextUpdate: -60)
        #expect(try Self.verdict(pki.valid, staple: recent, .strict) == nil)
        var tight = RevocationPolicy.strict
        tight.allowedClockSkew = 0
        #expect(try Self.verdict(pki.valid, staple: recent, tight)?.reason == .revocationStatusUnknown)
    }

    @Test("CRL files (PEM and DER): a listed certificate is refused naming it, others pass")
    func crlRevoked() throws {
        let pki = try Self.pki()
        let crl = try pki.crlFile("crl-intermediate", revoking: [pki.revoked])
        for file in [crl.pem, crl.der] {
            let policy = RevocationPolicy.crls([file])
            #expect(try Self.verdict(pki.valid, staple: nil, policy) == nil)
            let failure = try #require(try Self.verdict(pki.revoked, staple: nil, policy))
            #expect(failure.reason == .revoked)
            #expect(
                failure.message.contains("certificate 'localhost' is revoked: a CRL of 'Hawser Test Intermediate CA'"),
                "\(failure.message)"
            )
            #expect(failure.verifyErrorCode != nil && failure.depth == 0)
        }
    }

    @Test("no CRL of the issuer: strict refuses saying so, soft-fail accepts")
    func crlMissing() throws {
        let pki = try Self.pki()
        // A CRL of the root covers the intermediate, not the leaves.
        let rootCRL = try pki.crlFile("crl-root", issuer: .root, revoking: [])
        let failure = try #require(try Self.verdict(pki.valid, staple: nil, .crls([rootCRL.pem])))
        #expect(failure.reason == .revocationStatusUnknown)
        #expect(
            failure.message.contains("no CRL of its issuer 'CN=Hawser Test Intermediate CA,O=Hawser Tests'"),
            "\(failure.message)"
        )
        #expect(try Self.verdict(pki.valid, staple: nil, .crls([rootCRL.pem], strict: false)) == nil)
        // A leaf's CRL found, the soft-fail mode still refuses what it lists.
        let leafCRL = try pki.crlFile("crl-intermediate-2", revoking: [pki.revoked])
        #expect(try Self.verdict(pki.revoked, staple: nil, .crls([leafCRL.pem], strict: false))?.reason == .revoked)
    }

    @Test("the whole chain: every CA's CRL is needed, and one in several files is found")
    func crlWholeChain() throws {
        let pki = try Self.pki()
        let leafCRL = try pki.crlFile("crl-chain-intermediate", revoking: [])
        let rootCRL = try pki.crlFile("crl-chain-root", issuer: .root, revoking: [])
        #expect(try Self.verdict(pki.valid, staple: nil, .crls([leafCRL.pem], checksWholeChain: true)) != nil)
        #expect(
            try Self.verdict(pki.valid, staple: nil, .crls([leafCRL.pem, rootCRL.der], checksWholeChain: true)) == nil
        )
    }

    @Test("a CRL that is out of date or signed by another key leaves the status unknown")
    func crlUnusable() throws {
        let pki = try Self.pki()
        let stale = try pki.crlFile("crl-stale", revoking: [], lastUpdate: -3 * 86_400, nextUpdate: -86_400)
        let forged = try pki.crlFile("crl-forged", issuer: .impostor, revoking: [])
        for file in [stale.pem, forged.pem] {
            let failure = try #require(try Self.verdict(pki.valid, staple: nil, .crls([file])))
            #expect(failure.reason == .revocationStatusUnknown, "\(failure)")
            #expect(failure.message.contains("cannot be used"), "\(failure.message)")
        }
    }

    @Test("a CRL file that cannot be read or holds no CRL is a policy error naming the file")
    func crlFileErrors() throws {
        let pki = try Self.pki()
        for file in [pki.directory + "/no-such.crl", pki.rootPath] {
            let failure = try #require(try Self.verdict(pki.valid, staple: nil, .crls([file])))
            #expect(failure.reason == .policyMisconfigured)
            #expect(failure.message.contains("'\(file)'"), "\(failure.message)")
            #expect(throws: TrustFailure.self) { try RevocationPolicy.crls([file]).loadCRLs() }
        }
    }

    @Test("SecurityPolicy: revocation with pinning; a revoked chain is refused even with allowInvalidCertificates")
    func securityPolicy() throws {
        let pki = try Self.pki()
        let revokedStaple = try pki.ocspResponse(for: pki.revoked, status: .revoked)
        var policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.root])
        policy.anchors = .custom([pki.root])
        policy.revocation = .strict
        #expect(policy.requestsStapledOCSP(forHost: "localhost"))
        let good = ServerTrust(
            host: "localhost",
            certificates: pki.valid.presentedChain,
            stapledOCSPResponse: try pki.ocspResponse(for: pki.valid, status: .good)
        )
        #expect(policy.evaluateServerTrust(good, forDomain: "localhost"))
        let bad = ServerTrust(
            host: "localhost",
            certificates: pki.revoked.presentedChain,
            stapledOCSPResponse: revokedStaple
        )
        #expect(throws: TrustFailure.self) { try policy.validateServerTrust(bad, forDomain: "localhost") }
        var lenient = SecurityPolicy(pinningMode: .none)
        lenient.allowInvalidCertificates = true
        lenient.validatesDomainName = false
        lenient.anchors = .custom([pki.root])
        lenient.revocation = .stapledOCSP
        do throws(TrustFailure) {
            try lenient.validateServerTrust(bad, forDomain: "localhost")
            Issue.record("a revoked certificate was accepted")
        } catch {
            #expect(error.reason == .revoked)
        }
        // Unknown status with allowInvalidCertificates: accepted.
        lenient.revocation = .strict
        let noStaple = ServerTrust(host: "localhost", certificates: pki.valid.presentedChain)
        #expect(lenient.evaluateServerTrust(noStaple, forDomain: "localhost"))
        #expect(!SecurityPolicy.default.requestsStapledOCSP(forHost: "localhost"))
    }

    @Test("a ServerTrustManager asks for a staple for the hosts whose evaluator checks one")
    func managerAsks() throws {
        let strict = DefaultTrustEvaluator(revocation: .strict)
        let manager = try ServerTrustManager(evaluators: ["ocsp.example": strict], default: DefaultTrustEvaluator())
        #expect(manager.requestsStapledOCSP(forHost: "ocsp.example"))
        #expect(!manager.requestsStapledOCSP(forHost: "other.example"))
        #expect(!DefaultTrustEvaluator(revocation: .crls(["/x.crl"])).requestsStapledOCSP(forHost: "a"))
    }
}

extension NetworkTests {
    @Suite("Revocation against a stapling server", .serialized)
    struct StaplingTests {
        static func run(
            _ leaf: TestPKI.Leaf,
            staple: [UInt8]?,
            maximum: TLSVersion? = nil,
            _ configure: (inout SessionConfiguration) -> Void
        ) async throws -> Result<HTTPClientResponse, HawserError> {
            var result: Result<HTTPClientResponse, HawserError>!
            try await expectNoFDLeak {
                let tls = TestServer.TLS(
                    certificateChainPath: leaf.chainPath,
                    privateKeyPath: leaf.keyPath,
                    maximumVersion: maximum,
                    stapledOCSPResponse: staple
                )
                let server = try TestServer(host: "127.0.0.1", tls: tls)
                defer { server.shutdown() }
                var configuration = SessionConfiguration()
                configure(&configuration)
                let loop = try EventLoop()
                let session = Session(configuration: configuration, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                do {
                    result = .success(
                        try await session.response(
                            for: HTTPClientRequest(url: url("https://localhost:\(server.port)/echo"))
                        )
                    )
                } catch {
                    result = .failure(error as? HawserError ?? HawserError(.ioError, "\(error)"))
                }
            }
            return result
        }

        static func evaluator(_ revocation: RevocationPolicy) throws -> DefaultTrustEvaluator {
            DefaultTrustEvaluator(anchors: .custom([try TestPKI.shared().root]), revocation: revocation)
        }

        @Test(
            "a good staple over TLS 1.3 and 1.2 is asked for, received and accepted",
            arguments: [TLSVersion.tls1_3, .tls1_2]
        )
        func goodStaple(_ version: TLSVersion) async throws {
            let pki = try TestPKI.shared()
            let staple = try pki.ocspResponse(for: pki.valid, status: .good)
            let r = try await Self.run(pki.valid, staple: staple, maximum: version) {
                $0.serverTrustEvaluator = try? Self.evaluator(.strict)
            }
            #expect(try r.get().status == 200)
            #expect(try r.get().metrics.tlsProtocolVersion == version.description)
        }

        @Test("a revoked staple refuses the connection with serverCertificateUntrusted and reason revoked")
        func revokedStaple() async throws {
            let pki = try TestPKI.shared()
            let staple = try pki.ocspResponse(for: pki.revoked, status: .revoked)
            for policy in [RevocationPolicy.stapledOCSP, .strict] {
                let r = try await Self.run(pki.revoked, staple: staple) {
                    $0.serverTrustEvaluator = try? Self.evaluator(policy)
                }
                guard case .failure(let error) = r else {
                    Issue.record("a revoked certificate was accepted")
                    continue
                }
                #expect(error.code == .serverCertificateUntrusted)
                #expect((error.underlying as? TrustFailure)?.reason == .revoked)
                #expect(error.message.contains("was revoked"), "\(error.message)")
            }
        }

        @Test("a server that staples nothing: strict refuses, soft-fail accepts")
        func noStaple() async throws {
            let pki = try TestPKI.shared()
            let strict = try await Self.run(pki.valid, staple: nil) {
                $0.serverTrustEvaluator = try? Self.evaluator(.strict)
            }
            guard case .failure(let error) = strict else {
                Issue.record("strict accepted a server without a staple")
                return
            }
            #expect((error.underlying as? TrustFailure)?.reason == .revocationStatusUnknown)
            #expect(error.message.contains("stapled no OCSP response"), "\(error.message)")
            let soft = try await Self.run(pki.valid, staple: nil) {
                $0.serverTrustEvaluator = try? Self.evaluator(.stapledOCSP)
            }
            #expect(try soft.get().status == 200)
        }

        @Test("without revocation checking no staple is asked for (a revoked staple goes unseen)")
        func notAsked() async throws {
            let pki = try TestPKI.shared()
            let staple = try pki.ocspResponse(for: pki.revoked, status: .revoked)
            let seen = StapleRecorder()
            let r = try await Self.run(pki.revoked, staple: staple) {
                $0.serverTrustEvaluator = seen
            }
            #expect(try r.get().status == 200)
            #expect(seen.calls == 1 && seen.staple == nil)
            // Asked through the TLS configuration: the evaluator sees it.
            let asked = StapleRecorder()
            let r2 = try await Self.run(pki.revoked, staple: staple) {
                $0.serverTrustEvaluator = asked
                $0.tls.requestsStapledOCSP = true
            }
            #expect(try r2.get().status == 200)
            #expect(asked.staple == staple)
        }
    }
}

/// Accepts every chain and keeps the staple it was given.
private final class StapleRecorder: ServerTrustEvaluating, @unchecked Sendable {
    private let lock = NSLock()
    private var _staple: [UInt8]?
    private var _calls = 0
    var staple: [UInt8]? { self.lock.withLock { self._staple } }
    var calls: Int { self.lock.withLock { self._calls } }
    func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
        self.lock.withLock {
            self._staple = trust.stapledOCSPResponse
            self._calls += 1
        }
    }
}
