// Certificate trust without a network: parsing, chain verification, AFSecurityPolicy's rules,
// pins and the per-host manager, on the test PKI (HawserTestServer/TestPKI.swift). Each row
// says which chain a server presents, for which host, and the expected verdict with its reason.
// This file has the rows, check(_:_:_:) and the policy helpers the trust suites share, and
// AFSecurityPolicy's rules; CertificateParsingTests.swift, ServerTrustEvaluationTests.swift and
// ServerTrustManagerTests.swift the others.
import Foundation
import HawserCore
import HawserTestServer
import Testing

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

/// What a policy should say about one presented chain.
struct Row {
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
func check(_ evaluator: any ServerTrustEvaluating, _ rows: [Row], _ policyName: String) {
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

func pki() throws -> TestPKI { try TestPKI.shared() }

/// A policy whose ordinary validation trusts the test root (the test's stand-in for the system store).
func policy(
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
