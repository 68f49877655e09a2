// Revocation checking: the policy (off, soft-fail, strict), the stapled OCSP response checked
// against a verified path, and CRL files read into per-evaluation stacks. docs/SECURITY.md,
// "Revocation", says what is checked and why the default is off.
import CHawser
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Whether and how a client checks that a server's certificate was not revoked.
///
/// Two sources: the OCSP response a server staples to its handshake (RFC 6066 §8; the client asks
/// for it only when a policy checks it), and CRL files the application provides. Hawser fetches
/// nothing itself: no OCSP request to the responder, no CRL download (which would leak every
/// host visited to the CA and add a round trip to every connection).
///
/// The default is ``off``, as curl's and as AFNetworking's on Apple platforms (which check
/// revocation only for EV certificates): most servers staple nothing, so soft-fail checking
/// catches only the revoked certificates whose servers volunteer the proof, and strict checking
/// refuses most of the web.
public struct RevocationPolicy: Sendable, Hashable {
    /// What to do when a certificate's revocation status cannot be established.
    public enum Mode: Sendable, Hashable {
        /// No revocation checking at all: no staple is asked for, CRL files are not read.
        case off
        /// Refuse a certificate known to be revoked; accept one whose status is unknown (no staple,
        /// a staple that does not verify or is out of date, no CRL of its issuer).
        case softFail
        /// Refuse a certificate unless every source checked says it is good: a verified, current
        /// stapled OCSP response saying "good" (with ``RevocationPolicy/checksStapledOCSP``) and
        /// a current CRL of its issuer that does not list it (with ``RevocationPolicy/crlFiles``).
        case strict
    }

    /// What an unknown status means; ``Mode/off`` turns revocation checking off.
    public var mode: Mode
    /// Ask for the server's stapled OCSP response and check it for the leaf. On by default.
    public var checksStapledOCSP: Bool
    /// PEM or DER CRL files (a PEM file may hold several CRLs). Empty by default: no CRL checking.
    public var crlFiles: [String]
    /// Check every certificate of the path against the CRLs (OpenSSL's `X509_V_FLAG_CRL_CHECK_ALL`,
    /// as curl's `--crlfile`), not only the leaf. Off by default.
    public var checksWholeChain: Bool
    /// Seconds an OCSP response's thisUpdate may lie in the future and its nextUpdate in the past
    /// (clocks differ). Five minutes by default.
    public var allowedClockSkew: Double

    /// Creates a policy; each parameter sets the property of the same name.
    public init(
        mode: Mode,
        checksStapledOCSP: Bool = true,
        crlFiles: [String] = [],
        checksWholeChain: Bool = false,
        allowedClockSkew: Double = 300
    ) {
        self.mode = mode
        self.checksStapledOCSP = checksStapledOCSP
        self.crlFiles = crlFiles
        self.checksWholeChain = checksWholeChain
        self.allowedClockSkew = allowedClockSkew
    }

    /// No revocation checking (the default).
    public static let off = RevocationPolicy(mode: .off)
    /// Soft-fail stapled OCSP: refuse a certificate whose stapled response says it is revoked;
    /// accept one without a usable staple.
    public static let stapledOCSP = RevocationPolicy(mode: .softFail)
    /// Strict stapled OCSP (curl's `--cert-status`): refuse a certificate unless the server
    /// staples a verified, current response saying it is good.
    public static let strict = RevocationPolicy(mode: .strict)

    /// CRL checking from `files` (PEM or DER), without OCSP: strict by default (curl's
    /// `--crlfile`: a certificate whose issuer has no CRL among the files is refused).
    public static func crls(_ files: [String], strict: Bool = true, checksWholeChain: Bool = false) -> RevocationPolicy
    {
        RevocationPolicy(
            mode: strict ? .strict : .softFail,
            checksStapledOCSP: false,
            crlFiles: files,
            checksWholeChain: checksWholeChain
        )
    }

    /// Whether a TLS client should ask the server to staple an OCSP response.
    public var requestsStapledOCSP: Bool { self.mode != .off && self.checksStapledOCSP }

    var checksCRLs: Bool { self.mode != .off && !self.crlFiles.isEmpty }

    /// Reads the CRL files now, so that evaluations on an event loop find them read (they are
    /// read again only when a file changes).
    /// - Throws: ``TrustFailure`` (`.policyMisconfigured`) naming a file that cannot be read or
    ///   holds no CRL.
    public func loadCRLs() throws(TrustFailure) {
        if self.checksCRLs { _ = try CRLSet.make(self.crlFiles) }
    }
}

// MARK: - CRLs

/// CRL checking for one evaluation: the CRLs and what a missing one means.
struct CRLCheck {
    let set: CRLSet
    let strict: Bool
    let wholeChain: Bool
}

/// The CRLs of a list of files, as the STACK_OF(X509_CRL) an X509_STORE_CTX borrows. Kept per
/// list of paths and read again when a file's size or modification time changes.
final class CRLSet: @unchecked Sendable {
    let stack: OpaquePointer
    private let stamps: [FileStamp]

    private init(stack: OpaquePointer, stamps: [FileStamp]) {
        self.stack = stack
        self.stamps = stamps
    }

    deinit { CHawserTrust_sk_X509_CRL_pop_free(self.stack) }

    private struct FileStamp: Equatable {
        let size: Int
        let seconds: Int
        let nanoseconds: Int

        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            self.size = Int(info.st_size)
            self.seconds = Int(info.st_mtim.tv_sec)
            self.nanoseconds = Int(info.st_mtim.tv_nsec)
        }
    }

    private static let cache = Mutex<[[String]: CRLSet]>([:])
    private static let cacheLimit = 16

    static func make(_ files: [String]) throws(TrustFailure) -> CRLSet {
        let stamps = files.map { FileStamp($0) }
        if let cached = cache.withLock({ $0[files] }), cached.stamps == stamps.compactMap({ $0 }),
            !stamps.contains(where: { $0 == nil })
        {
            return cached
        }
        let set = try read(files)
        cache.withLock {
            if $0.count >= cacheLimit { $0.removeAll() }
            $0[files] = set
        }
        return set
    }

    private static func read(_ files: [String]) throws(TrustFailure) -> CRLSet {
        guard let stack = CHawserTrust_sk_X509_CRL_new() else {
            throw TrustFailure(.other, "cannot create a CRL list: \(openSSLErrorText(fallback: "sk_new failed"))")
        }
        var stamps: [FileStamp] = []
        for path in files {
            guard let stamp = FileStamp(path) else {
                CHawserTrust_sk_X509_CRL_pop_free(stack)
                throw TrustFailure(
                    .policyMisconfigured,
                    "cannot read the CRL file '\(path)': \(String(cString: strerror(errno)))"
                )
            }
            stamps.append(stamp)
            let before = CHawserTrust_sk_X509_CRL_num(stack)
            // PEM first (one or more CRLs), else one DER CRL.
            if let bio = BIO_new_file(path, "rb") {
                while let crl = PEM_read_bio_X509_CRL(bio, nil, nil, nil) {
                    if CHawserTrust_sk_X509_CRL_push(stack, crl) <= 0 { X509_CRL_free(crl) }
                }
                BIO_free(bio)
            }
            if CHawserTrust_sk_X509_CRL_num(stack) == before, let bio = BIO_new_file(path, "rb") {
                if let crl = d2i_X509_CRL_bio(bio, nil), CHawserTrust_sk_X509_CRL_push(stack, crl) <= 0 {
                    X509_CRL_free(crl)
                }
                BIO_free(bio)
            }
            guard CHawserTrust_sk_X509_CRL_num(stack) > before else {
                let detail = openSSLErrorText(fallback: "no CRL in it")
                CHawserTrust_sk_X509_CRL_pop_free(stack)
                throw TrustFailure(
                    .policyMisconfigured,
                    "the CRL file '\(path)' holds no PEM or DER CRL: \(detail)"
                )
            }
            ERR_clear_error()
        }
        return CRLSet(stack: stack, stamps: stamps)
    }
}

// MARK: - stapled OCSP

extension ServerTrust {
    /// Checks the stapled OCSP response about the leaf of a verified `chain` (leaf first, its
    /// issuer next). Returns the failure to report: revoked in any mode, an unknown status only
    /// in strict mode.
    func checkStapledOCSP(
        chain: [Certificate],
        store: TrustStore,
        policy: RevocationPolicy,
        time: Date?
    ) -> TrustFailure? {
        guard let leaf = chain.first else { return nil }
        let name = "'\(leaf.subjectSummary)'"
        func unknown(_ why: String) -> TrustFailure? {
            ERR_clear_error()
            guard policy.mode == .strict else { return nil }
            return TrustFailure(
                .revocationStatusUnknown,
                "the revocation status of certificate \(name) is unknown: \(why); strict revocation checking refuses it",
                certificate: leaf,
                depth: 0
            )
        }
        guard let der = self.stapledOCSPResponse, !der.isEmpty else {
            return unknown("the server stapled no OCSP response")
        }
        guard chain.count >= 2 else {
            return unknown("it is itself a trust anchor, so it has no issuer to match an OCSP response with")
        }
        let issuer = chain[1]
        let response: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, buffer.count)
        }
        guard let response else { return unknown("the stapled OCSP response does not parse") }
        defer { OCSP_RESPONSE_free(response) }
        let status = OCSP_response_status(response)
        guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
            return unknown(
                "the stapled OCSP response is an error ('\(String(cString: OCSP_response_status_str(Int(status))))')"
            )
        }
        guard let basic = OCSP_response_get1_basic(response) else {
            return unknown("the stapled OCSP response holds no basic response")
        }
        defer { OCSP_BASICRESP_free(basic) }
        guard Self.verifyOCSPSignature(basic, chain: chain, store: store) else {
            let detail = openSSLErrorText(fallback: "no detail from OpenSSL")
            return unknown(
                "the stapled OCSP response is signed neither by its issuer '\(issuer.subjectSummary)' nor by a responder that issuer authorised (\(detail))"
            )
        }
        guard let id = OCSP_cert_to_id(EVP_sha1(), leaf.x509.pointer, issuer.x509.pointer) else {
            return unknown(
                "its OCSP certificate ID cannot be made (\(openSSLErrorText(fallback: "OCSP_cert_to_id failed")))"
            )
        }
        defer { OCSP_CERTID_free(id) }
        var certStatus: Int32 = -1
        var reason: Int32 = -1
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
        guard OCSP_resp_find_status(basic, id, &certStatus, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1
        else {
            return unknown(
                "the stapled OCSP response is about other certificates (none with its serial number under '\(issuer.subjectSummary)')"
            )
        }
        let now = time ?? Date()
        let skew = policy.allowedClockSkew
        guard let produced = asn1Date(thisUpdate) else {
            return unknown("the stapled OCSP response has an unreadable thisUpdate")
        }
        if produced.timeIntervalSince(now) > skew {
            return unknown(
                "the stapled OCSP response is not valid before \(produced.formatted(.iso8601)) (its thisUpdate)"
            )
        }
        if let nextUpdate {
            guard let expiry = asn1Date(nextUpdate) else {
                return unknown("the stapled OCSP response has an unreadable nextUpdate")
            }
            if now.timeIntervalSince(expiry) > skew {
                return unknown("the stapled OCSP response expired on \(expiry.formatted(.iso8601)) (its nextUpdate)")
            }
        }
        ERR_clear_error()
        switch certStatus {
        case V_OCSP_CERTSTATUS_GOOD:
            return nil
        case V_OCSP_CERTSTATUS_REVOKED:
            let when = asn1Date(revokedAt).map { " on \($0.formatted(.iso8601))" } ?? ""
            let why = reason >= 0 ? " (reason: \(String(cString: OCSP_crl_reason_str(Int(reason)))))" : ""
            return TrustFailure(
                .revoked,
                "certificate \(name) issued by '\(issuer.subjectSummary)' was revoked\(when)\(why), says the OCSP response the server stapled",
                certificate: leaf,
                depth: 0
            )
        default:
            return unknown("the OCSP response the server stapled says its status is unknown")
        }
    }

    /// Whether `basic` is signed by the leaf's issuer (`chain[1]`, already verified), or by a
    /// responder certificate in the response that the issuer issued for OCSP signing and that
    /// verifies against `store`.
    private static func verifyOCSPSignature(_ basic: OpaquePointer, chain: [Certificate], store: TrustStore) -> Bool {
        guard let issuerOnly = CHawserTrust_sk_X509_new() else { return false }
        defer { CHawserTrust_sk_X509_free(issuerOnly) }
        _ = CHawserTrust_sk_X509_push(issuerOnly, chain[1].x509.pointer)
        // The issuer itself: found among the given certificates only (never those in the
        // response), trusted as the verified path's, so only the signature is checked.
        if OCSP_basic_verify(basic, issuerOnly, store.pointer, UInt(OCSP_NOINTERN | OCSP_TRUSTOTHER)) == 1 {
            return true
        }
        ERR_clear_error()
        // A delegated responder (RFC 6960 §4.2.2.2): its certificate, sent in the response, must
        // verify against the anchors and be issued by the leaf's issuer with id-kp-OCSPSigning.
        guard let path = CHawserTrust_sk_X509_new() else { return false }
        defer { CHawserTrust_sk_X509_free(path) }
        for certificate in chain.dropFirst() { _ = CHawserTrust_sk_X509_push(path, certificate.x509.pointer) }
        return OCSP_basic_verify(basic, path, store.pointer, 0) == 1
    }
}
