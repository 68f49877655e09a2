// Certificate trust without a network: parsing, chain verification, AFSecurityPolicy's rules,
// pins and the per-host manager, on the test PKI (HawserTestServer/TestPKI.swift). Each row
// says which chain a server presents, for which host, and the expected verdict with its reason.
import Foundation
import HawserCore
import HawserTestServer
import Testing

/// What a policy should say about one presented chain.
private struct Row {
    let label: String
    let chain: [Certificate]
    let host: String
    /// nil: accepted.
    let expected: TrustFailure.Reason?
    let line: Int

    init(
        _ label: String,
        _ chain: [Certificate],
        host: String = "localhost",
        _ expected: TrustFailure.Reason?,
        line: Int = #line
    ) {
        self.label = label
        self.chain = chain
        self.host = host
        self.expected = expected
        self.line = line
    }
}

/// Evaluates every row and checks accept/refuse and the reason.
private func check(_ evaluator: any ServerTrustEvaluating, _ rows: [Row], _ policyName: String) {
    for row in rows {
        let location = SourceLocation(fileID: #fileID, filePath: #filePath, line: row.line, column: 1)
        do throws(TrustFailure) {
            try evaluator.evaluate(ServerTrust(host: row.host, certificates: row.chain), forHost: row.host)
            #expect(
                row.expected == nil,
                "\(policyName) / \(row.label): accepted, expected \(String(describing: row.expected))",
                sourceLocation: location
            )
        } catch {
            #expect(row.expected == error.reason, "\(policyName) / \(row.label): \(error)", sourceLocation: location)
            #expect(!error.message.isEmpty, sourceLocation: location)
        }
    }
}

private func pki() throws -> TestPKI { try TestPKI.shared() }

/// A policy whose ordinary validation trusts the test root (the test's stand-in for the system store).
private func policy(
    _ mode: SecurityPolicy.PinningMode,
    pinned: Set<Certificate> = [],
    allowInvalid: Bool = false,
    validatesDomainName: Bool = true,
    anchors: TrustAnchors? = nil
) throws -> SecurityPolicy {
    var p = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinned)
    p.allowInvalidCertificates = allowInvalid
    p.validatesDomainName = validatesDomainName
    p.anchors = try anchors ?? .custom([pki().root])
    return p
}

@Suite struct CertificateParsingTests {
    @Test func propertiesOfTheGeneratedLeaf() throws {
        let p = try pki()
        let leaf = p.valid.certificate
        #expect(leaf.subjectSummary == "localhost")
        #expect(leaf.subject.contains("CN=localhost"))
        #expect(leaf.issuer.contains("CN=Hawser Test Intermediate CA"))
        #expect(leaf.subjectAlternativeNames == ["localhost", "127.0.0.1", "::1"])
        #expect(leaf.notValidBefore < Date())
        #expect(leaf.notValidAfter > Date())
        #expect(p.expired.certificate.notValidAfter < Date())
        #expect(p.notYetValid.certificate.notValidBefore > Date())
        #expect(leaf.publicKeyAlgorithm == "RSA")
        #expect(leaf.publicKeyBits == 2048)
        #expect(p.rsa1024.certificate.publicKeyBits == 1024)
        #expect(p.ecdsa.certificate.publicKeyAlgorithm == "EC")
        #expect(p.ecdsa.certificate.publicKeyBits == 256)
        #expect(!leaf.isCertificateAuthority)
        #expect(p.root.isCertificateAuthority && p.intermediate.isCertificateAuthority)
        #expect(p.root.isSelfSigned && p.selfSigned.certificate.isSelfSigned)
        #expect(!leaf.isSelfSigned && !p.intermediate.isSelfSigned)
        #expect(p.cnOnly.certificate.subjectAlternativeNames.isEmpty)
        #expect(p.wildcard.certificate.subjectAlternativeNames == ["*.hawser.localhost"])
        #expect(p.client.certificate.subjectSummary == "hawser-client")
    }

    @Test func publicKeyInfoAndPins() throws {
        let p = try pki()
        let leaf = p.valid.certificate
        #expect(leaf.publicKeyInfoDER.first == 0x30)
        let pin = leaf.publicKeySHA256Pin
        #expect(pin.hasPrefix("sha256/") && pin.count == 7 + 44)
        // The scenarios that share the leaf key share the pin; other keys differ.
        #expect(p.expired.certificate.publicKeySHA256Pin == pin)
        #expect(p.ecdsa.certificate.publicKeySHA256Pin != pin)
        #expect(try PublicKeyPin(pin) == PublicKeyPin(certificate: leaf))
        #expect(leaf.sha256Fingerprint.split(separator: ":").count == 32)
    }

    @Test func pemBundleAndDERFiles() throws {
        let p = try pki()
        let chain = try Certificate.load(contentsOf: p.valid.chainPath)
        #expect(chain == [p.valid.certificate, p.intermediate])
        #expect(try Certificate.load(contentsOf: p.rootDERPath) == [p.root])
        #expect(try Certificate.load(contentsOf: p.valid.derPath) == [p.valid.certificate])
        let reparsed = try Certificate(derEncoded: p.valid.certificate.derBytes)
        #expect(reparsed == p.valid.certificate)
        #expect(Set([reparsed, p.valid.certificate]).count == 1)
    }

    @Test func directoryLoadingSkipsKeysAndOtherFiles() throws {
        let p = try pki()
        // The PKI directory holds certificate PEM/DER files and key PEM files.
        let all = try Certificate.certificates(inDirectory: p.directory)
        #expect(all.contains(p.root) && all.contains(p.valid.certificate) && all.contains(p.intermediate))
        #expect(!all.isEmpty)
        let pinned = try SecurityPolicy.certificates(inDirectory: p.directory)
        #expect(pinned == Set(all))
        #expect(throws: CertificateError.self) { try Certificate.certificates(inDirectory: p.directory + "/missing") }
    }

    private func parseError(_ bytes: [UInt8]) -> CertificateError? {
        do {
            _ = try Certificate.parse(pemOrDER: bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func garbageEmptyAndTruncatedInput() throws {
        let p = try pki()
        #expect(parseError([])?.kind == .empty)
        #expect(parseError(Array(" \n\t".utf8))?.kind == .empty)
        #expect(parseError(Array("hello, world".utf8))?.kind == .unrecognizedFormat)
        let der = p.valid.certificate.derBytes
        #expect(parseError(Array(der.dropLast(10)))?.kind == .invalidDER)
        #expect(parseError([0x30, 0x03, 0x02, 0x01, 0x01])?.kind == .invalidDER)
        let trailing = parseError(der + [0x00, 0x01])
        #expect(trailing?.kind == .trailingData)
        #expect(trailing?.message.contains("2 bytes") == true)
    }

    @Test func malformedPEM() throws {
        let p = try pki()
        let pem = String(decoding: try Data(contentsOf: URL(fileURLWithPath: p.valid.certificatePath)), as: UTF8.self)
        // No block at all, only a key, an empty block.
        #expect(parseError(Array("-----BEGIN CERTIFICATE-----\n".utf8))?.kind == .invalidPEM)
        let keyOnly = try Data(contentsOf: URL(fileURLWithPath: p.valid.keyPath))
        let noCertificate = parseError([UInt8](keyOnly))
        #expect(noCertificate?.kind == .noCertificate)
        #expect(noCertificate?.message.contains("PRIVATE KEY") == true)
        #expect(parseError(Array("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".utf8))?.kind == .empty)
        // Truncated base64, mismatched END, stray characters, missing END.
        let lines = pem.split(separator: "\n")
        // Whole base64 lines missing: the base64 is fine, the DER inside is cut short.
        let cut = (lines.prefix(3) + [lines.last!]).joined(separator: "\n")
        let cutError = parseError(Array(cut.utf8))
        #expect(cutError?.kind == .invalidDER)
        #expect(cutError?.message.contains("block #1") == true)
        // Base64 cut inside a quantum.
        let ragged = (lines.prefix(3) + [lines[3].dropLast(2)] + [lines.last!]).joined(separator: "\n")
        #expect(parseError(Array(ragged.utf8))?.kind == .invalidPEM)
        let mismatched = pem.replacing("-----END CERTIFICATE-----", with: "-----END X509 CRL-----")
        #expect(parseError(Array(mismatched.utf8))?.kind == .invalidPEM)
        let stray = pem.replacing("\n", with: "\n!", maxReplacements: 1)
        #expect(parseError(Array(stray.utf8))?.kind == .invalidPEM)
        let noEnd = pem.replacing("-----END CERTIFICATE-----", with: "")
        #expect(parseError(Array(noEnd.utf8))?.kind == .invalidPEM)
        // Text around blocks is fine.
        #expect(
            try Certificate.parse(pemOrDER: Array(("subject=CN=localhost\n" + pem + "\ntrailer\n").utf8)) == [
                p.valid.certificate
            ]
        )
    }

    @Test func unreadableFileNamesThePath() throws {
        do {
            _ = try Certificate.load(contentsOf: "/nonexistent/hawser.pem")
            Issue.record("loading a missing file succeeded")
        } catch {
            #expect(error.kind == .unreadable)
            #expect(error.path == "/nonexistent/hawser.pem")
            #expect(error.description.contains("/nonexistent/hawser.pem"))
        }
    }

    @Test func derChainFromTheTransport() throws {
        let p = try pki()
        let trust = try ServerTrust(host: "localhost", derChain: p.valid.presentedChain.map(\.derBytes))
        #expect(trust.certificates == p.valid.presentedChain)
        do {
            _ = try ServerTrust(host: "localhost", derChain: [p.valid.certificate.derBytes, [0x30, 0x00]])
            Issue.record("a garbage certificate was accepted")
        } catch {
            #expect(error.reason == .invalidCertificate)
            #expect(error.depth == 1)
        }
    }
}

@Suite struct PinParsingTests {
    @Test func validPinsRoundTrip() throws {
        let digest = [UInt8](0..<32)
        let pin = try PublicKeyPin(sha256: digest)
        #expect(try PublicKeyPin(pin.description) == pin)
        #expect(try PublicKeyPin("  \(pin)\n") == pin)
    }

    @Test(arguments: [
        "", "sha256/", "sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "SHA256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  // no padding
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=",  // non-zero bits under the padding
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAA=",  // 20 bytes
        "sha256/AAAAAAAAAAAAAAAAAAAA AAAAAAAAAAAAAAAAAAAAAAA=",  // space inside
        "sha256/!AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==A",
    ])
    func malformedPinsAreRefused(_ text: String) {
        #expect(throws: PinError.self) { try PublicKeyPin(text) }
    }

    @Test func messagesSayWhatWasWrong() {
        func message(_ text: String) -> String {
            do {
                _ = try PublicKeyPin(text)
                return ""
            } catch {
                return error.message
            }
        }
        #expect(message("sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=").contains("unsupported hash 'sha1'"))
        #expect(message("sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAA=").contains("20 bytes"))
        #expect(message("sha256/@@@").contains("base64"))
    }

    @Test func lists() throws {
        let a = try PublicKeyPin(sha256: [UInt8](repeating: 1, count: 32))
        let b = try PublicKeyPin(sha256: [UInt8](repeating: 2, count: 32))
        #expect(try PublicKeyPin.parseList("\(a);\(b)") == [a, b])
        #expect(try PublicKeyPin.parseList("\(a), \(b)") == [a, b])
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("\(a);;\(b)") }
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("\(a);") }
        #expect(throws: PinError.self) { try PublicKeyPin.parseList("  ") }
        #expect(throws: PinError.self) { try SecurityPolicy(pinnedPublicKeyHashes: ["\(a)", "sha256/nope"]) }
    }
}

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

@Suite struct SecurityPolicyTests {
    /// Every scenario under the default policy (trusting the test root).
    @Test func defaultPolicy() throws {
        let p = try pki()
        check(
            try policy(.none),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .incompleteChain),
                Row("valid by IPv4", p.valid.presentedChain, host: "127.0.0.1", nil),
                Row("valid by IPv6", p.valid.presentedChain, host: "::1", nil),
                Row("expired", p.expired.presentedChain, .expired),
                Row("not yet valid", p.notYetValid.presentedChain, .notYetValid),
                Row("wrong host", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("self-signed", p.selfSigned.presentedChain, .selfSigned),
                Row("untrusted root, sent", p.untrusted.presentedChain, .untrustedRoot),
                Row("untrusted root, not sent", p.untrusted.leafOnly, .incompleteChain),
                Row("CN only, by name", p.cnOnly.presentedChain, .hostnameMismatch),
                Row("CN only, by IP", p.cnOnly.presentedChain, host: "127.0.0.1", .hostnameMismatch),
                Row("RSA-1024", p.rsa1024.presentedChain, .weakKey),
                Row("ECDSA", p.ecdsa.presentedChain, nil),
                Row("wildcard", p.wildcard.presentedChain, host: "api.hawser.localhost", nil),
                Row("wildcard, bare domain", p.wildcard.presentedChain, host: "hawser.localhost", .hostnameMismatch),
                Row(
                    "partial wildcard",
                    p.partialWildcard.presentedChain,
                    host: "api1.hawser.localhost",
                    .hostnameMismatch
                ),
                Row("client certificate", [p.client.certificate], host: "hawser-client", .invalidCertificate),
            ],
            "default"
        )
        // The common-name opt-in, for private CAs: only the CN-only rows change.
        var cnPolicy = try policy(.none)
        cnPolicy.allowsCommonNameFallback = true
        check(
            cnPolicy,
            [
                Row("CN only, by name", p.cnOnly.presentedChain, nil),
                Row("CN only, by IP", p.cnOnly.presentedChain, host: "127.0.0.1", .hostnameMismatch),
                Row("wrong host", p.wrongHost.presentedChain, .hostnameMismatch),
            ],
            "allowsCommonNameFallback"
        )
        check(
            DefaultTrustEvaluator(anchors: .custom([p.root]), allowsCommonNameFallback: true),
            [
                Row("CN only, by name", p.cnOnly.presentedChain, nil)
            ],
            "DefaultTrustEvaluator with allowsCommonNameFallback"
        )
        check(
            DefaultTrustEvaluator(anchors: .custom([p.root])),
            [
                Row("CN only, by name", p.cnOnly.presentedChain, .hostnameMismatch)
            ],
            "DefaultTrustEvaluator"
        )
        // The real default (system anchors) trusts none of the test PKI.
        check(
            SecurityPolicy.default,
            [
                Row("valid", p.valid.presentedChain, .untrustedRoot),
                Row("self-signed", p.selfSigned.presentedChain, .selfSigned),
            ],
            "SecurityPolicy.default"
        )
        let d = SecurityPolicy.default
        #expect(
            d.pinningMode == .none && d.validatesDomainName && !d.allowInvalidCertificates
                && d.pinnedCertificates.isEmpty
        )
    }

    @Test func allowInvalidWithoutDomainValidationAcceptsEverything() throws {
        let p = try pki()
        let rows = p.serverLeaves.flatMap { leaf in
            [Row("\(leaf.name)", leaf.presentedChain, nil), Row("\(leaf.name) alone", leaf.leafOnly, nil)]
        }
        check(
            try policy(.none, allowInvalid: true, validatesDomainName: false),
            rows,
            "allowInvalid, no domain validation"
        )
        check(
            try policy(.none, allowInvalid: true, validatesDomainName: false, anchors: .system),
            rows,
            "allowInvalid, no domain validation, system anchors"
        )
    }

    @Test func domainValidationOfInvalidCertificatesRequiresPinning() throws {
        let p = try pki()
        let rows = [
            Row("valid", p.valid.presentedChain, .policyMisconfigured),
            Row("self-signed", p.selfSigned.presentedChain, .policyMisconfigured),
        ]
        check(try policy(.none, allowInvalid: true), rows, "allowInvalid + validatesDomainName, no pinning")
        check(
            try policy(.publicKey, allowInvalid: true),
            rows,
            "allowInvalid + validatesDomainName, publicKey with no pins"
        )
        check(
            try policy(.certificate, allowInvalid: true),
            rows,
            "allowInvalid + validatesDomainName, certificate with no pins"
        )
        // Without a domain AFNetworking does not refuse the configuration.
        #expect(
            try policy(.none, allowInvalid: true).evaluateServerTrust(
                ServerTrust(host: "localhost", certificates: p.selfSigned.presentedChain),
                forDomain: nil
            )
        )
        let misconfigured = try policy(.none, allowInvalid: true)
        do throws(TrustFailure) {
            try misconfigured.validateServerTrust(
                ServerTrust(host: "localhost", certificates: p.valid.presentedChain),
                forDomain: "localhost"
            )
            Issue.record("misconfigured policy accepted a chain")
        } catch {
            #expect(error.message.contains("requires pinning"))
        }
        // With pins the same settings are fine.
        #expect(
            try policy(.certificate, pinned: [p.selfSigned.certificate], allowInvalid: true)
                .evaluateServerTrust(
                    ServerTrust(host: "localhost", certificates: p.selfSigned.presentedChain),
                    forDomain: "localhost"
                )
        )
    }

    @Test func publicKeyPinOnTheLeaf() throws {
        let p = try pki()
        let pinned: Set = [p.valid.certificate]
        check(
            try policy(.publicKey, pinned: pinned),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .incompleteChain),
                Row("expired (same key)", p.expired.presentedChain, .expired),
                Row("wrong host (same key)", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("ECDSA (other key)", p.ecdsa.presentedChain, .pinMismatch),
                Row("self-signed", p.selfSigned.presentedChain, .selfSigned),
                Row("untrusted", p.untrusted.presentedChain, .untrustedRoot),
                Row("RSA-1024", p.rsa1024.presentedChain, .weakKey),
            ],
            "publicKey pin on leaf"
        )
        check(
            try policy(.publicKey, pinned: pinned, allowInvalid: true),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, nil),
                Row("expired (same key)", p.expired.presentedChain, nil),
                Row("not yet valid (same key)", p.notYetValid.leafOnly, nil),
                Row("wrong host (same key)", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("self-signed (other key)", p.selfSigned.presentedChain, .pinMismatch),
                Row("untrusted (other key)", p.untrusted.presentedChain, .pinMismatch),
            ],
            "publicKey pin on leaf, allowInvalid"
        )
        check(
            try policy(.publicKey, pinned: pinned, allowInvalid: true, validatesDomainName: false),
            [
                Row("wrong host (same key)", p.wrongHost.presentedChain, nil)
            ],
            "publicKey pin on leaf, allowInvalid, no domain validation"
        )
    }

    @Test func publicKeyPinOnTheIntermediate() throws {
        let p = try pki()
        let pinned: Set = [p.intermediate]
        check(
            try policy(.publicKey, pinned: pinned),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("ECDSA", p.ecdsa.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .incompleteChain),
                Row("expired", p.expired.presentedChain, .expired),
                Row("RSA-1024", p.rsa1024.presentedChain, .weakKey),
                Row("untrusted", p.untrusted.presentedChain, .untrustedRoot),
            ],
            "publicKey pin on intermediate"
        )
        // The intermediate's key counts only on a verified path: an unverified chain proves
        // only the leaf's key, so a server cannot borrow the pinned certificate.
        check(
            try policy(.publicKey, pinned: pinned, allowInvalid: true),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .pinMismatch),
                Row("expired, with the intermediate", p.expired.presentedChain, .pinMismatch),
                Row(
                    "self-signed + the pinned intermediate appended",
                    p.selfSigned.leafOnly + [p.intermediate],
                    .pinMismatch
                ),
            ],
            "publicKey pin on intermediate, allowInvalid"
        )
    }

    @Test func publicKeyPinNotInTheChain() throws {
        let p = try pki()
        let pinned: Set = [p.untrustedRoot]
        check(
            try policy(.publicKey, pinned: pinned),
            [
                Row("valid", p.valid.presentedChain, .pinMismatch),
                Row("ECDSA", p.ecdsa.presentedChain, .pinMismatch),
                Row("untrusted", p.untrusted.presentedChain, .untrustedRoot),
            ],
            "publicKey pin not in chain"
        )
        check(
            try policy(.publicKey, pinned: pinned, allowInvalid: true),
            [
                Row(
                    "untrusted (its root is pinned, but the chain is unverified)",
                    p.untrusted.presentedChain,
                    .pinMismatch
                )
            ],
            "publicKey pin not in chain, allowInvalid"
        )
        // Trusting the untrusted root makes its chain verified, and then its key counts.
        check(
            try policy(.publicKey, pinned: pinned, anchors: .custom([p.untrustedRoot])),
            [
                Row("untrusted, anchored", p.untrusted.presentedChain, nil)
            ],
            "publicKey pin on the second root, anchored"
        )
    }

    @Test func certificatePinOnTheRoot() throws {
        let p = try pki()
        let pinned: Set = [p.root]
        check(
            try policy(.certificate, pinned: pinned),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("ECDSA", p.ecdsa.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .incompleteChain),
                Row("expired", p.expired.presentedChain, .expired),
                Row("wrong host", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("self-signed", p.selfSigned.presentedChain, .selfSigned),
                Row("untrusted", p.untrusted.presentedChain, .untrustedRoot),
                Row("RSA-1024", p.rsa1024.presentedChain, .weakKey),
            ],
            "certificate pin on root"
        )
        // AFNetworking's rule with system anchors: the private root fails the first
        // validation, so pinning it needs allowInvalidCertificates.
        check(
            try policy(.certificate, pinned: pinned, anchors: .system),
            [
                Row("valid", p.valid.presentedChain, .untrustedRoot)
            ],
            "certificate pin on root, system anchors"
        )
        check(
            try policy(.certificate, pinned: pinned, allowInvalid: true, anchors: .system),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .pinMismatch),
                Row("expired", p.expired.presentedChain, .expired),
                Row("wrong host", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("untrusted", p.untrusted.presentedChain, .pinMismatch),
                Row("self-signed", p.selfSigned.presentedChain, .pinMismatch),
            ],
            "certificate pin on root, system anchors, allowInvalid"
        )
    }

    @Test func certificatePinOnTheLeaf() throws {
        let p = try pki()
        check(
            try policy(.certificate, pinned: [p.valid.certificate]),
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("valid without intermediate", p.valid.leafOnly, .incompleteChain),
                Row("expired (same key, other certificate)", p.expired.presentedChain, .expired),
                Row("ECDSA", p.ecdsa.presentedChain, .pinMismatch),
            ],
            "certificate pin on leaf"
        )
        check(
            try policy(.certificate, pinned: [p.valid.certificate], allowInvalid: true),
            [
                Row("valid without intermediate", p.valid.leafOnly, nil),
                Row("wrong host (other certificate)", p.wrongHost.presentedChain, .pinMismatch),
                Row("cn-only (same key, other certificate)", p.cnOnly.leafOnly, .pinMismatch),
            ],
            "certificate pin on leaf, allowInvalid"
        )
        check(
            try policy(.certificate, pinned: [p.wrongHost.certificate], allowInvalid: true),
            [
                Row("wrong host, pinned", p.wrongHost.presentedChain, .hostnameMismatch),
                Row("wrong host, pinned, its own name", p.wrongHost.presentedChain, host: "wrong.example.com", nil),
            ],
            "certificate pin on the wrong-host leaf, allowInvalid"
        )
        // The self-signed server: pin its certificate and allow invalid certificates (AFNetworking's recipe).
        check(
            try policy(.certificate, pinned: [p.selfSigned.certificate], allowInvalid: true),
            [
                Row("self-signed", p.selfSigned.presentedChain, nil),
                Row("self-signed, other host", p.selfSigned.presentedChain, host: "example.com", .hostnameMismatch),
                Row("valid", p.valid.presentedChain, .pinMismatch),
            ],
            "certificate pin on self-signed, allowInvalid"
        )
        check(
            try policy(.certificate, pinned: [p.selfSigned.certificate]),
            [
                Row("self-signed", p.selfSigned.presentedChain, .selfSigned)
            ],
            "certificate pin on self-signed"
        )
        // Pinning does not excuse an expired certificate in certificate mode (AFNetworking's rule).
        check(
            try policy(.certificate, pinned: [p.expired.certificate], allowInvalid: true),
            [
                Row("expired", p.expired.presentedChain, .expired)
            ],
            "certificate pin on expired, allowInvalid"
        )
    }

    @Test func certificatePinNotInTheChain() throws {
        let p = try pki()
        check(
            try policy(.certificate, pinned: [p.untrustedRoot]),
            [
                Row("valid", p.valid.presentedChain, .pinMismatch),
                Row("ECDSA", p.ecdsa.presentedChain, .pinMismatch),
            ],
            "certificate pin not in chain"
        )
        check(
            try policy(.certificate, pinned: [p.untrustedRoot], allowInvalid: true),
            [
                Row("valid without intermediate", p.valid.leafOnly, .pinMismatch),
                Row("self-signed", p.selfSigned.presentedChain, .pinMismatch),
            ],
            "certificate pin not in chain, allowInvalid"
        )
    }

    @Test func spkiHashPinsWithABackup() throws {
        let p = try pki()
        let backup = try PublicKeyPin(sha256: [UInt8](repeating: 0xAB, count: 32)).description
        var pinned = try SecurityPolicy(pinnedPublicKeyHashes: [backup, p.valid.certificate.publicKeySHA256Pin])
        pinned.anchors = .custom([p.root])
        #expect(pinned.pinningMode == .publicKey)
        check(
            pinned,
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("ECDSA", p.ecdsa.presentedChain, .pinMismatch),
                Row("expired (same key)", p.expired.presentedChain, .expired),
            ],
            "SPKI pins, current + backup"
        )
        var backupOnly = try SecurityPolicy(pinnedPublicKeyHashes: [backup])
        backupOnly.anchors = .custom([p.root])
        check(backupOnly, [Row("valid", p.valid.presentedChain, .pinMismatch)], "SPKI pins, backup only")
        var intermediate = try SecurityPolicy(pinnedPublicKeyHashes: [backup, p.intermediate.publicKeySHA256Pin])
        intermediate.anchors = .custom([p.root])
        check(
            intermediate,
            [
                Row("valid", p.valid.presentedChain, nil),
                Row("ECDSA", p.ecdsa.presentedChain, nil),
            ],
            "SPKI pin on intermediate + backup"
        )
        // Hash pins and pinned certificates combine.
        var both = try SecurityPolicy(pinnedPublicKeyHashes: [backup])
        both.pinnedCertificates = [p.ecdsa.certificate]
        both.anchors = .custom([p.root])
        #expect(both.pinnedPublicKeys.count == 2)
        check(
            both,
            [Row("ECDSA", p.ecdsa.presentedChain, nil), Row("valid", p.valid.presentedChain, .pinMismatch)],
            "SPKI pin + pinned certificate"
        )
    }

    /// Issue 27: the cross-signed scenarios under every kind of policy that validates the chain.
    @Test func crossSignedChainsUnderEveryPolicy() throws {
        let p = try pki()
        let cross = p.crossSigned
        let copy = p.withExpiredRootCopy
        var spki = try SecurityPolicy(pinnedPublicKeyHashes: [
            "sha256/" + String(repeating: "A", count: 43) + "=", p.root2.publicKeySHA256Pin,
        ])
        spki.anchors = .custom([p.root])
        check(
            try policy(.none),
            [Row("cross-signed", cross.presentedChain, nil), Row("expired root copy", copy.presentedChain, nil)],
            "default"
        )
        check(
            try policy(.publicKey, pinned: [cross.certificate]),
            [Row("cross-signed, leaf key pinned", cross.presentedChain, nil)],
            "public-key pin on the leaf"
        )
        check(
            try policy(.publicKey, pinned: [p.root2]),
            [Row("cross-signed, Root CA 2 key pinned", cross.presentedChain, nil)],
            "public-key pin on Root CA 2"
        )
        check(spki, [Row("cross-signed", cross.presentedChain, nil)], "SPKI pins with a backup")
        check(
            try policy(.certificate, pinned: [p.root]),
            [Row("cross-signed", cross.presentedChain, nil), Row("expired root copy", copy.presentedChain, nil)],
            "certificate pin on the root"
        )
        check(
            try policy(.certificate, pinned: [cross.certificate]),
            [Row("cross-signed", cross.presentedChain, nil)],
            "certificate pin on the cross-signed leaf"
        )
        check(
            try policy(.certificate, pinned: [copy.certificate]),
            [
                Row("expired root copy, leaf pinned", copy.presentedChain, nil),
                Row("another leaf", p.valid.presentedChain, .pinMismatch),
            ],
            "certificate pin on the leaf sent with an expired root copy"
        )
        check(
            try policy(.certificate, pinned: [copy.certificate], allowInvalid: true),
            [Row("expired root copy, leaf pinned", copy.presentedChain, nil)],
            "certificate pin on the leaf, allowInvalid"
        )
    }

    @Test func noDomainSkipsTheHostCheck() throws {
        let p = try pki()
        let trust = ServerTrust(host: "localhost", certificates: p.wrongHost.presentedChain)
        #expect(try policy(.none).evaluateServerTrust(trust, forDomain: nil))
        #expect(!(try policy(.none).evaluateServerTrust(trust, forDomain: "localhost")))
    }
}

@Suite struct ServerTrustManagerTests {
    private struct Tag: ServerTrustEvaluating {
        let name: String
        func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
            throw TrustFailure(.other, self.name)
        }
    }

    private func tag(_ manager: ServerTrustManager, _ host: String) -> String? {
        (manager.evaluator(forHost: host) as? Tag)?.name
    }

    @Test func mostSpecificPatternWins() throws {
        let manager = try ServerTrustManager(
            evaluators: [
                "api.example.com": Tag(name: "exact"),
                "*.example.com": Tag(name: "one"),
                "**.example.com": Tag(name: "any"),
                "**.deep.example.com": Tag(name: "deeper"),
                "127.0.0.1": Tag(name: "ip"),
                "[::1]": Tag(name: "ipv6"),
            ],
            default: Tag(name: "default")
        )
        #expect(tag(manager, "api.example.com") == "exact")
        #expect(tag(manager, "API.Example.COM.") == "exact")
        #expect(tag(manager, "www.example.com") == "one")
        #expect(tag(manager, "example.com") == "any")
        #expect(tag(manager, "a.b.example.com") == "any")
        #expect(tag(manager, "deep.example.com") == "one")
        #expect(tag(manager, "x.y.deep.example.com") == "deeper")
        #expect(tag(manager, "127.0.0.1") == "ip")
        #expect(tag(manager, "::1") == "ipv6")
        #expect(tag(manager, "example.org") == "default")
        #expect(tag(manager, "notexample.com") == "default")
    }

    @Test("names are labels of bytes: a dot before a combining mark still cuts, equivalent spellings differ")
    func bytesNotCharacters() throws {
        let manager = try ServerTrustManager(
            evaluators: [
                "*.example.com": Tag(name: "one"),
                "cafe\u{301}.test": Tag(name: "decomposed"),
            ],
            default: Tag(name: "default")
        )
        // "a.\u{301}b.example.com" is three labels deep in DNS; as Characters ".\u{301}" is no dot.
        #expect(tag(manager, "a.\u{301}b.example.com") == "default")
        #expect(tag(manager, "\u{301}b.example.com") == "one")
        #expect(tag(manager, "cafe\u{301}.test") == "decomposed")
        #expect(tag(manager, "caf\u{E9}.test") == "default")
        #expect(throws: TrustFailure.self) { try ServerTrustManager(evaluators: ["*.a..b": Tag(name: "x")]) }
    }

    @Test func oneLabelWildcardDoesNotMatchTheDomainOrDeeperNames() throws {
        let manager = try ServerTrustManager(evaluators: ["*.example.com": Tag(name: "one")], default: nil)
        #expect(tag(manager, "a.example.com") == "one")
        #expect(manager.evaluator(forHost: "example.com") == nil)
        #expect(manager.evaluator(forHost: "a.b.example.com") == nil)
    }

    @Test func withoutADefaultUnknownHostsAreRefused() throws {
        let p = try pki()
        let manager = try ServerTrustManager(
            evaluators: ["localhost": DefaultTrustEvaluator(anchors: .custom([p.root]))],
            default: nil
        )
        check(
            manager,
            [
                Row("valid, localhost", p.valid.presentedChain, nil),
                Row("valid, 127.0.0.1", p.valid.presentedChain, host: "127.0.0.1", .policyMisconfigured),
            ],
            "manager without default"
        )
    }

    @Test func evaluatesWithTheChosenPolicy() throws {
        let p = try pki()
        var pinned = try policy(.certificate, pinned: [p.selfSigned.certificate], allowInvalid: true)
        pinned.validatesDomainName = true
        let manager = try ServerTrustManager(
            evaluators: ["localhost": pinned],
            default: DefaultTrustEvaluator(anchors: .custom([p.root]))
        )
        check(
            manager,
            [
                Row("self-signed on the pinned host", p.selfSigned.presentedChain, nil),
                Row("valid on the pinned host", p.valid.presentedChain, .pinMismatch),
                Row("valid elsewhere", p.valid.presentedChain, host: "127.0.0.1", nil),
                Row("self-signed elsewhere", p.selfSigned.presentedChain, host: "127.0.0.1", .selfSigned),
            ],
            "manager"
        )
    }

    @Test(arguments: ["", "*", "**.", "*.", "a*.example.com", "*.*.example.com", "api.*.com", ".example.com", "a..com"])
    func invalidPatternsAreRefused(_ pattern: String) {
        do {
            _ = try ServerTrustManager(evaluators: [pattern: DefaultTrustEvaluator()])
            Issue.record("'\(pattern)' was accepted")
        } catch {
            #expect(error.reason == .policyMisconfigured)
        }
    }

    @Test func duplicatePatternsAreRefused() {
        #expect(throws: TrustFailure.self) {
            try ServerTrustManager(evaluators: [
                "Example.com": DefaultTrustEvaluator(), "example.com.": DefaultTrustEvaluator(),
            ])
        }
    }
}
