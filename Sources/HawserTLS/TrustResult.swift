// What a trust evaluation starts from and ends with: the anchors, the result, and the typed
// failure with its mapping from OpenSSL's verify errors.
import CHawser

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The certificates a chain must lead to.
public enum TrustAnchors: Sendable, Hashable {
    /// The system trust store: OpenSSL's default paths (on Debian `/etc/ssl/certs` and
    /// `/usr/lib/ssl/cert.pem`; `SSL_CERT_FILE` / `SSL_CERT_DIR` override them).
    case system
    /// Only these certificates (a private CA, a pinned certificate).
    case custom([Certificate])
    /// The system store plus these certificates.
    case systemAndCustom([Certificate])

    /// Builds the certificate store these anchors verify against, now, on the calling thread
    /// (for the system store: reads the bundle), so that a later evaluation finds it made.
    /// Stores are kept per process; an error is left for the evaluation to report.
    public func load() {
        _ = try? TrustStore.make(self)
    }
}

/// Why a server's certificate chain was refused.
public struct TrustFailure: Error, Sendable, CustomStringConvertible {
    /// The kind of failure, for code that decides what to do about it.
    public enum Reason: Sendable, Hashable {
        /// A certificate in the chain is past its notAfter date.
        case expired
        /// A certificate in the chain is before its notBefore date.
        case notYetValid
        /// The leaf does not name the host (RFC 6125).
        case hostnameMismatch
        /// The chain leads to a root that is not a trust anchor.
        case untrustedRoot
        /// The leaf is self-signed and not itself a trust anchor.
        case selfSigned
        /// A key (or a signature digest) is below the security floor: RSA/DSA under 2048 bits,
        /// EC under 224 bits, SHA-1 signatures.
        case weakKey
        /// A signature in the chain does not verify.
        case badSignature
        /// The leaf's issuer is neither sent by the server nor an anchor: usually a server that
        /// does not send its intermediate certificate.
        case incompleteChain
        /// A certificate is unusable: unparsable, wrong purpose (e.g. a client certificate),
        /// a non-CA issuer, a path-length or name-constraint violation, no certificate at all.
        case invalidCertificate
        /// The chain is valid but matches none of the pins.
        case pinMismatch
        /// The policy itself cannot be applied as configured.
        case policyMisconfigured
        /// The certificate was revoked by its issuer: a verified OCSP response the server stapled,
        /// or a CRL among ``RevocationPolicy/crlFiles``, says so (docs/SECURITY.md, "Revocation").
        case revoked
        /// Revocation checking is strict and the certificate's status could not be established:
        /// no stapled OCSP response, one that does not verify, is out of date or says "unknown",
        /// or no CRL of its issuer among ``RevocationPolicy/crlFiles`` (or one that is out of date
        /// or does not verify).
        case revocationStatusUnknown
        /// Anything else (internal OpenSSL failures); see the message.
        case other
    }

    /// The kind of failure.
    public var reason: Reason
    /// What exactly was wrong, naming the certificate.
    public var message: String
    /// The certificate the failure is about, when there is one.
    public var certificate: Certificate?
    /// Its position in the chain OpenSSL built (0 is the leaf), when known.
    public var depth: Int?
    /// OpenSSL's `X509_V_ERR_*` code, when the failure came from chain verification.
    public var verifyErrorCode: Int32?

    /// Creates a failure; evaluators throw these to refuse a chain.
    ///
    /// - Parameters:
    ///   - reason: the kind of failure, the value to match on.
    ///   - message: what was wrong, naming the certificate.
    ///   - certificate: the certificate at fault, when one is.
    ///   - depth: its position on the chain, 0 for the leaf.
    ///   - verifyErrorCode: OpenSSL's `X509_V_ERR_*` code, when verification found the failure.
    public init(
        _ reason: Reason,
        _ message: String,
        certificate: Certificate? = nil,
        depth: Int? = nil,
        verifyErrorCode: Int32? = nil
    ) {
        self.reason = reason
        self.message = message
        self.certificate = certificate
        self.depth = depth
        self.verifyErrorCode = verifyErrorCode
    }

    public var description: String { "\(self.reason): \(self.message)" }
}

/// The outcome of one chain evaluation.
public struct TrustResult: Sendable {
    /// Why the chain was refused; nil when it is trusted.
    public let failure: TrustFailure?
    /// The path OpenSSL built, leaf first, ending at the anchor when the chain is trusted.
    /// When it is not, the part built before the failure (at least the leaf when there is one).
    /// Unlike ``ServerTrust/certificates`` it holds no certificate that does not belong to the
    /// path, and it may hold an anchor the server did not send.
    public let chain: [Certificate]

    /// Creates a result: `failure` nil means the chain is trusted; `chain` is the path built, leaf
    /// first (on a failure, the part built so far).
    public init(failure: TrustFailure?, chain: [Certificate]) {
        self.failure = failure
        self.chain = chain
    }

    /// True when the chain verified.
    public var isTrusted: Bool { self.failure == nil }

    /// The verified path (leaf … anchor), or nil when the chain is not trusted.
    public var verifiedChain: [Certificate]? { self.failure == nil ? self.chain : nil }

    /// The verified path, or the failure thrown.
    public func get() throws(TrustFailure) -> [Certificate] {
        if let failure { throw failure }
        return self.chain
    }
}

// MARK: - error mapping

extension TrustFailure {
    static func fromVerifyError(
        _ code: Int32,
        depth: Int,
        certificate: Certificate,
        chain: [Certificate],
        hostname: String?,
        time: Date?,
        commonNameFallback: Bool = false
    ) -> TrustFailure {
        let name = "'\(certificate.subjectSummary)'"
        // Above the leaf, the issuer tells a cross-signed copy of a root (an expired cross-sign
        // a server still sends) from the root of the same name.
        let dated =
            depth > 0 && !certificate.isSelfSigned ? "\(name) issued by '\(certificate.issuerSummary)'" : name
        let openSSL = String(cString: X509_verify_cert_error_string(Int(code)))
        let reason: Reason
        var message: String
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED:
            reason = .expired
            message = "certificate \(dated) expired on \(certificate.notValidAfter.formatted(.iso8601))"
        case X509_V_ERR_CERT_NOT_YET_VALID:
            reason = .notYetValid
            message = "certificate \(dated) is not valid before \(certificate.notValidBefore.formatted(.iso8601))"
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH, X509_V_ERR_EMAIL_MISMATCH:
            reason = .hostnameMismatch
            message =
                "certificate \(name) is not valid for '\(hostname ?? "")' (\(certificate.namesExplanation(for: hostname, commonNameFallback: commonNameFallback)))"
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
            reason = .selfSigned
            message = "certificate \(name) is self-signed and is not a trust anchor"
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_CERT_UNTRUSTED, X509_V_ERR_CERT_REJECTED:
            reason = .untrustedRoot
            message =
                "the chain of '\(chain.first?.subjectSummary ?? certificate.subjectSummary)' ends at \(name), which is not a trust anchor"
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            if depth <= 0 && !certificate.isCertificateAuthority {
                // The leaf's issuer is missing: almost always an intermediate the server did
                // not send (or, for a private CA, an anchor the client lacks).
                reason = .incompleteChain
                message =
                    "no issuer '\(certificate.issuer)' of \(name) was sent by the server or is a trust anchor (a missing intermediate certificate, or an unknown CA)"
            } else {
                // The path reached a CA whose issuer nobody has: an unknown root.
                reason = .untrustedRoot
                message =
                    "the chain of '\(chain.first?.subjectSummary ?? certificate.subjectSummary)' reaches \(name), whose issuer '\(certificate.issuer)' is not a trust anchor"
            }
        case X509_V_ERR_EE_KEY_TOO_SMALL, X509_V_ERR_CA_KEY_TOO_SMALL:
            reason = .weakKey
            message =
                "certificate \(name) has a \(certificate.publicKeyBits)-bit \(certificate.publicKeyAlgorithm) key, below the security floor (RSA 2048 bits, EC 224 bits)"
        case X509_V_ERR_CA_MD_TOO_WEAK:
            reason = .weakKey
            message = "certificate \(name) is signed with a digest below the security floor (SHA-1 or weaker)"
        case X509_V_ERR_CERT_SIGNATURE_FAILURE, X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE,
            X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
            reason = .badSignature
            message = "the signature of certificate \(name) does not verify with its issuer's key"
        case X509_V_ERR_INVALID_PURPOSE:
            reason = .invalidCertificate
            message =
                depth == 0
                ? "certificate \(name) is not meant for TLS servers (its extendedKeyUsage lacks serverAuth)"
                : "certificate \(name) may not issue TLS server certificates"
        case X509_V_ERR_INVALID_CA, X509_V_ERR_KEYUSAGE_NO_CERTSIGN:
            reason = .invalidCertificate
            message = "certificate \(name) is used as an issuer but is not a CA"
        case X509_V_ERR_ERROR_IN_CERT_NOT_BEFORE_FIELD, X509_V_ERR_ERROR_IN_CERT_NOT_AFTER_FIELD,
            X509_V_ERR_PATH_LENGTH_EXCEEDED, X509_V_ERR_INVALID_EXTENSION,
            X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION, X509_V_ERR_INVALID_NON_CA,
            X509_V_ERR_PERMITTED_VIOLATION, X509_V_ERR_EXCLUDED_VIOLATION,
            X509_V_ERR_CERT_CHAIN_TOO_LONG:
            reason = .invalidCertificate
            message = "certificate \(name): \(openSSL)"
        case X509_V_ERR_CERT_REVOKED:
            reason = .revoked
            message = "certificate \(dated) is revoked: a CRL of '\(certificate.issuerSummary)' lists its serial number"
        case X509_V_ERR_UNABLE_TO_GET_CRL:
            reason = .revocationStatusUnknown
            message =
                "the revocation status of certificate \(name) is unknown: no CRL of its issuer '\(certificate.issuer)' is among the CRL files, and strict revocation checking needs one"
        case X509_V_ERR_CRL_HAS_EXPIRED, X509_V_ERR_CRL_NOT_YET_VALID, X509_V_ERR_CRL_SIGNATURE_FAILURE,
            X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE, X509_V_ERR_ERROR_IN_CRL_LAST_UPDATE_FIELD,
            X509_V_ERR_ERROR_IN_CRL_NEXT_UPDATE_FIELD, X509_V_ERR_UNABLE_TO_GET_CRL_ISSUER,
            X509_V_ERR_KEYUSAGE_NO_CRL_SIGN, X509_V_ERR_DIFFERENT_CRL_SCOPE, X509_V_ERR_CRL_PATH_VALIDATION_ERROR:
            reason = .revocationStatusUnknown
            message =
                "the revocation status of certificate \(name) is unknown: the CRL of its issuer '\(certificate.issuer)' cannot be used (\(openSSL))"
        default:
            reason = .other
            message = "certificate \(name): \(openSSL)"
        }
        message += " [depth \(depth), X509_V_ERR \(code): \(openSSL)]"
        return TrustFailure(reason, message, certificate: certificate, depth: depth, verifyErrorCode: code)
    }
}
