// Chain verification and host checking on the test PKI (no network); the rows and check(_:_:_:)
// are TrustTests.swift's.

import Foundation
import HawserCore
import HawserTestServer
import Testing

@Suite struct ServerTrustEvaluationTests {
    @Test func verifiedChainIsThePathOpenSSLBuilt() throws {
        let p = try pki()
        let result = ServerTrust(host: "localhost", certificates: p.valid.presentedChain)
            .evaluate(anchors: .custom([p.root]), validatesHost: true)
        #expect(result.isTrusted)
        #expect(result.verifiedChain == [p.valid.certificate, p.intermediate, p.root])
        // A certificate that belongs to no path is not in the verified chain.
        let padded = ServerTrust(host: "localhost", certificates: p.valid.presentedChain + [p.untrustedRoot])
            .evaluate(anchors: .custom([p.root]), validatesHost: true)
        #expect(padded.verifiedChain == [p.valid.certificate, p.intermediate, p.root])
        // An intermediate anchor ends the path there (partial chains).
        let partial = ServerTrust(host: "localhost", certificates: p.valid.leafOnly)
            .evaluate(anchors: .custom([p.intermediate]), validatesHost: true)
        #expect(partial.verifiedChain == [p.valid.certificate, p.intermediate])
    }

    @Test func hostNames() throws {
        let p = try pki()
        func trusted(_ leaf: TestPKI.Leaf, _ host: String) -> TrustFailure.Reason? {
            ServerTrust(host: host, certificates: leaf.presentedChain)
                .evaluate(anchors: .custom([p.root]), validatesHost: true).failure?.reason
        }
        for host in ["localhost", "LOCALHOST", "localhost.", "127.0.0.1", "::1", "[::1]", "0:0:0:0:0:0:0:1"] {
            #expect(trusted(p.valid, host) == nil, "\(host)")
        }
        for host in ["127.0.0.2", "::2", "example.com", "local", "", "a:b"] {
            #expect(trusted(p.valid, host) == .hostnameMismatch, "\(host)")
        }
        // Wildcards: one whole left-most label only.
        #expect(trusted(p.wildcard, "api.hawser.localhost") == nil)
        #expect(trusted(p.wildcard, "hawser.localhost") == .hostnameMismatch)
        #expect(trusted(p.wildcard, "a.b.hawser.localhost") == .hostnameMismatch)
        #expect(trusted(p.partialWildcard, "api1.hawser.localhost") == .hostnameMismatch)
        #expect(trusted(p.partialWildcard, "api.hawser.localhost") == .hostnameMismatch)
        // The common name is not a host name: a certificate without subjectAltName names no host.
        #expect(trusted(p.cnOnly, "localhost") == .hostnameMismatch)
        #expect(trusted(p.cnOnly, "127.0.0.1") == .hostnameMismatch)
        #expect(!p.cnOnly.certificate.matches(host: "localhost"))
        // Opted in: the common name when there is no subjectAltName, never for IP addresses.
        func fallback(_ host: String) -> TrustFailure.Reason? {
            ServerTrust(host: host, certificates: p.cnOnly.presentedChain)
                .evaluate(anchors: .custom([p.root]), hostname: host, allowsCommonNameFallback: true).failure?.reason
        }
        #expect(fallback("localhost") == nil)
        #expect(fallback("127.0.0.1") == .hostnameMismatch)
        #expect(p.cnOnly.certificate.matches(host: "localhost", allowsCommonNameFallback: true))
        #expect(!p.valid.certificate.matches(host: "example.com", allowsCommonNameFallback: true))
        #expect(!p.wildcard.certificate.matches(host: "hawser.localhost"))
        // Without host validation the name does not matter.
        #expect(
            ServerTrust(host: "example.com", certificates: p.valid.presentedChain)
                .evaluate(anchors: .custom([p.root]), validatesHost: false).isTrusted
        )
    }

    @Test func failureMessagesNameTheCertificate() throws {
        let p = try pki()
        let expired = ServerTrust(host: "localhost", certificates: p.expired.presentedChain)
            .evaluate(anchors: .custom([p.root]), validatesHost: true).failure
        #expect(expired?.reason == .expired)
        #expect(expired?.certificate == p.expired.certificate)
        #expect(expired?.depth == 0)
        #expect(expired?.message.contains("'localhost'") == true)
        let wrong = ServerTrust(host: "localhost", certificates: p.wrongHost.presentedChain)
            .evaluate(anchors: .custom([p.root]), validatesHost: true).failure
        #expect(wrong?.message.contains("wrong.example.com") == true)
        let weak = ServerTrust(host: "localhost", certificates: p.rsa1024.presentedChain)
            .evaluate(anchors: .custom([p.root]), validatesHost: true).failure
        #expect(weak?.reason == .weakKey)
        #expect(weak?.message.contains("1024-bit RSA") == true)
    }

    /// OpenSSL reports the first problem: path, purpose, key strength, host name, then dates.
    @Test func firstProblemWins() throws {
        let p = try pki()
        func reason(_ chain: [Certificate], _ host: String) -> TrustFailure.Reason? {
            ServerTrust(host: host, certificates: chain).evaluate(anchors: .custom([p.root]), validatesHost: true)
                .failure?.reason
        }
        #expect(reason(p.expired.presentedChain, "example.com") == .hostnameMismatch)
        #expect(reason(p.rsa1024.presentedChain, "example.com") == .weakKey)
        #expect(reason(p.expired.leafOnly, "example.com") == .incompleteChain)
        #expect(reason([p.client.certificate], "example.com") == .invalidCertificate)
    }

    @Test func verificationTime() throws {
        let p = try pki()
        let trust = ServerTrust(host: "localhost", certificates: p.expired.presentedChain)
        let inside = p.expired.certificate.notValidBefore.addingTimeInterval(3600)
        #expect(trust.evaluate(anchors: .custom([p.root]), hostname: "localhost", at: inside).isTrusted)
        #expect(trust.evaluate(anchors: .custom([p.root]), hostname: "localhost").failure?.reason == .expired)
    }

    @Test func systemAnchorsDoNotTrustTheTestRoot() throws {
        let p = try pki()
        let trust = ServerTrust(host: "localhost", certificates: p.valid.presentedChain)
        #expect(trust.evaluate(anchors: .system, validatesHost: true).failure?.reason == .untrustedRoot)
        #expect(trust.evaluate(anchors: .systemAndCustom([p.root]), validatesHost: true).isTrusted)
        #expect(trust.evaluate(anchors: .custom([]), validatesHost: true).failure?.reason == .untrustedRoot)
        #expect(
            ServerTrust(host: "localhost", certificates: [])
                .evaluate(anchors: .system, validatesHost: true).failure?.reason == .invalidCertificate
        )
    }

    /// The shared stores are used from many threads at once (one evaluation per handshake).
    @Test func concurrentEvaluationsShareTheStores() async throws {
        let p = try pki()
        let valid = ServerTrust(host: "localhost", certificates: p.valid.presentedChain)
        let expired = ServerTrust(host: "localhost", certificates: p.expired.presentedChain)
        let root = p.root
        let verdicts = await withTaskGroup(of: (Int, TrustFailure.Reason?).self) { group in
            for i in 0..<64 {
                group.addTask {
                    let anchors: TrustAnchors = i % 2 == 0 ? .systemAndCustom([root]) : .system
                    let trust = i % 3 == 0 ? expired : valid
                    return (i, trust.evaluate(anchors: anchors, validatesHost: true).failure?.reason)
                }
            }
            var out: [(Int, TrustFailure.Reason?)] = []
            for await v in group { out.append(v) }
            return out
        }
        #expect(verdicts.count == 64)
        for (i, reason) in verdicts {
            // System anchors alone never trust the test root; with it added, only expiry fails.
            let expected: TrustFailure.Reason? = i % 2 == 1 ? .untrustedRoot : (i % 3 == 0 ? .expired : nil)
            #expect(reason == expected, "evaluation \(i)")
        }
    }

    @Test func defaultEvaluator() throws {
        let p = try pki()
        check(
            DefaultTrustEvaluator(anchors: .custom([p.root])),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("wrong host", p.wrongHost.presentedChain, .hostnameMismatch),
                Row(
                    "client certificate as a server",
                    [p.client.certificate],
                    host: "hawser-client",
                    .invalidCertificate
                ),
            ],
            "DefaultTrustEvaluator"
        )
        check(
            DefaultTrustEvaluator(anchors: .custom([p.root]), validatesHost: false),
            [
                Row("wrong host", p.wrongHost.presentedChain, nil),
                Row("expired", p.expired.presentedChain, .expired),
            ],
            "DefaultTrustEvaluator without host validation"
        )
    }

    /// Issue 27: the server sends the leaf, then its root self-signed (trusted by nobody), then the
    /// same root cross-signed by a trusted root. OpenSSL takes the first and stops at it; the
    /// path through the cross-sign is found on the next try.
    @Test func crossSignedRootSentAfterItsSelfSignedCopy() throws {
        let p = try pki()
        let trust = ServerTrust(host: "localhost", certificates: p.crossSigned.presentedChain)
        #expect(p.crossSigned.presentedChain == [p.crossSigned.certificate, p.root2, p.root2CrossSigned])
        let result = trust.evaluate(anchors: .custom([p.root]), validatesHost: true)
        #expect(result.failure == nil, "\(String(describing: result.failure))")
        #expect(result.verifiedChain == [p.crossSigned.certificate, p.root2CrossSigned, p.root])
        // Trusting the new root itself: the first path is the one.
        #expect(
            trust.evaluate(anchors: .custom([p.root2]), validatesHost: true).verifiedChain
                == [p.crossSigned.certificate, p.root2]
        )
        // No path at all: the first path's failure is reported, naming where it ended.
        let none = trust.evaluate(anchors: .custom([p.untrustedRoot]), validatesHost: true)
        #expect(none.failure?.reason == .untrustedRoot)
        #expect(none.failure?.message.contains("ends at 'Hawser Test Root CA 2'") == true)
        #expect(none.failure?.verifyErrorCode == 19)
        // The other failures still come out of the path that reaches the anchor.
        #expect(
            trust.evaluate(anchors: .custom([p.root]), hostname: "example.com").failure?.reason == .hostnameMismatch
        )
    }

    /// Path building is bounded: the first path and at most seven alternates.
    @Test func alternatePathsAreCapped() throws {
        let p = try pki()
        #expect(ServerTrust.maxPathAttempts == 8)
        func evaluate(decoys: Int) -> TrustResult {
            // Each decoy is a self-signed Root CA 2 that OpenSSL takes before the cross-sign.
            let chain = [p.crossSigned.certificate] + p.root2Reissues.prefix(decoys) + [p.root2CrossSigned]
            return ServerTrust(host: "localhost", certificates: chain)
                .evaluate(anchors: .custom([p.root]), validatesHost: true)
        }
        #expect(evaluate(decoys: 7).verifiedChain == [p.crossSigned.certificate, p.root2CrossSigned, p.root])
        let capped = evaluate(decoys: 8)
        #expect(capped.failure?.reason == .untrustedRoot)
        #expect(capped.failure?.certificate == p.root2Reissues[0], "the first path's failure")
    }

    /// Issue 27: a leaf among the anchors ends its own path, whatever the server sends above it.
    @Test func leafAnchorEndsThePath() throws {
        let p = try pki()
        let leaf = p.withExpiredRootCopy.certificate
        let trust = ServerTrust(host: "localhost", certificates: p.withExpiredRootCopy.presentedChain)
        let pinned = trust.evaluate(anchors: .custom([leaf]), validatesHost: true)
        #expect(pinned.failure == nil, "\(String(describing: pinned.failure))")
        #expect(pinned.verifiedChain == [leaf])
        // The leaf's own checks still apply.
        #expect(trust.evaluate(anchors: .custom([leaf]), hostname: "example.com").failure?.reason == .hostnameMismatch)
        let expired = ServerTrust(host: "localhost", certificates: p.expired.presentedChain)
        #expect(
            expired.evaluate(anchors: .custom([p.expired.certificate]), validatesHost: true).failure?.reason
                == .expired
        )
    }

    /// Issue 27: an expired cross-signed copy of a root is named with its issuer, so the message
    /// cannot be read as the root of the same name having expired.
    @Test func expiredCopyOfARootIsNamedWithItsIssuer() throws {
        let p = try pki()
        let trust = ServerTrust(host: "localhost", certificates: p.withExpiredRootCopy.presentedChain)
        #expect(trust.evaluate(anchors: .custom([p.root]), validatesHost: true).isTrusted)
        let failure = trust.evaluate(anchors: .custom([p.legacyRoot]), validatesHost: true).failure
        #expect(failure?.reason == .expired)
        #expect(failure?.certificate == p.expiredRootCopy)
        #expect(failure?.depth == 2)
        #expect(
            failure?.message.hasPrefix(
                "certificate 'Hawser Test Root CA' issued by 'Hawser Legacy Root CA' expired on "
            ) == true,
            "\(failure?.message ?? "")"
        )
    }

    /// Issue 27: an IP address written as a DNS name is refused, and the message says why.
    @Test func ipAddressWrittenAsADNSName() throws {
        let p = try pki()
        let trust = ServerTrust(host: "127.0.0.1", certificates: p.ipAsDNSName.presentedChain)
        let failure = trust.evaluate(anchors: .custom([p.root]), validatesHost: true).failure
        #expect(failure?.reason == .hostnameMismatch)
        let message = failure?.message ?? ""
        #expect(message.contains("names 127.0.0.1 only as a DNS name (DNS:127.0.0.1)"), "\(message)")
        #expect(message.contains("an IP address matches only an IP address entry"), "\(message)")
        #expect(!message.contains("(it names 127.0.0.1)"), "\(message)")
        // Other mismatches keep the list of names.
        let other = ServerTrust(host: "127.0.0.2", certificates: p.valid.presentedChain)
            .evaluate(anchors: .custom([p.root]), validatesHost: true).failure
        #expect(other?.message.contains("it names localhost, 127.0.0.1, ::1") == true)
        #expect(!p.ipAsDNSName.certificate.matches(host: "127.0.0.1"))
    }
}
