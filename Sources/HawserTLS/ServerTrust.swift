import CHawser
import Synchronization

// What the TLS transport hands up after a handshake (ServerTrust: the host and the peer's
// chain), and the engine's verdict on it: OpenSSL's chain building and verification against a
// set of anchors, RFC 6125 host checking, a security floor on keys, and a typed reason.
// TrustResult.swift has the anchors, the failure and its OpenSSL mapping, and the result;
// TrustStore.swift the per-process certificate stores.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What a TLS handshake established about a server: the name the client connected to and the
/// certificates the server presented. The role of `NSURLProtectionSpace.serverTrust`.
public struct ServerTrust: Sendable {
    /// The host name (or IP address literal) the client connected to.
    public let host: String
    /// The peer's chain as presented, leaf first. The server controls this list: it may hold
    /// certificates that belong to no path, so pinning looks at ``TrustResult/chain`` instead.
    public let certificates: [Certificate]
    /// The DER OCSP response the server stapled to the handshake (RFC 6066 §8), when the client
    /// asked for one (``ServerTrustEvaluating/requestsStapledOCSP(forHost:)``) and the server
    /// sent one; nil otherwise. Unverified: ``evaluate(anchors:hostname:at:allowsCommonNameFallback:revocation:)``
    /// checks it against the verified path when its ``RevocationPolicy`` asks.
    public let stapledOCSPResponse: [UInt8]?

    /// Creates the trust to evaluate for a connection to `host` that presented `certificates`,
    /// leaf first, and stapled `stapledOCSPResponse` (DER) if any. Tests and custom evaluators
    /// build these; a handshake builds one for the delegates.
    public init(host: String, certificates: [Certificate], stapledOCSPResponse: [UInt8]? = nil) {
        self.host = host
        self.certificates = certificates
        self.stapledOCSPResponse = stapledOCSPResponse
    }

    /// A trust from DER certificates as the transport reads them (`SSL_get_peer_cert_chain`).
    /// - Throws: ``TrustFailure`` (`.invalidCertificate`) naming the certificate that does not parse.
    public init(host: String, derChain: [[UInt8]]) throws(TrustFailure) {
        var certificates: [Certificate] = []
        for (index, der) in derChain.enumerated() {
            do {
                certificates.append(try Certificate(derEncoded: der))
            } catch {
                throw TrustFailure(
                    .invalidCertificate,
                    "certificate #\(index) sent by the server is unusable: \(error.message)",
                    depth: index
                )
            }
        }
        self.init(host: host, certificates: certificates)
    }

    /// The leaf certificate (the server's own), if the server sent any.
    public var leaf: Certificate? { self.certificates.first }

    /// Verifies the chain against `anchors`; with `validatesHost`, the leaf must name ``host``.
    public func evaluate(anchors: TrustAnchors, validatesHost: Bool) -> TrustResult {
        self.evaluate(anchors: anchors, hostname: validatesHost ? self.host : nil)
    }

    /// Verifies the chain as a TLS client does.
    ///
    /// - The leaf is the first certificate; the others are untrusted intermediates that OpenSSL
    ///   may use to build a path to an anchor (any certificate among the anchors ends a path,
    ///   self-signed or not: OpenSSL's `X509_V_FLAG_PARTIAL_CHAIN`, curl's default; a leaf that
    ///   is an anchor is a path of its own).
    /// - OpenSSL builds one path, taking the first fitting issuer. When that path fails at a
    ///   certificate the server sent (a root that is not an anchor, a certificate whose issuer
    ///   nobody has, or one out of its dates, not a CA or too weak), the path is built again
    ///   without that certificate, up to ``ServerTrust/maxPathAttempts`` verifications in all; if none
    ///   succeeds, the first path's failure is reported (docs/SECURITY.md, "Path building").
    /// - The leaf must be usable for TLS servers (extendedKeyUsage, when present, must allow
    ///   serverAuth); issuers must be CAs.
    /// - Security level 2: RSA and DSA keys of at least 2048 bits, EC of at least 224, no
    ///   SHA-1 or MD5 signatures, anywhere in the path.
    /// - With a `hostname`, RFC 6125 matching: DNS names against the dNSName subjectAltNames,
    ///   a wildcard only as the whole left-most label (`*.example.com` matches `a.example.com`,
    ///   not `example.com` nor `a.b.example.com`; `f*.example.com` matches nothing). IP literals
    ///   (`127.0.0.1`, `::1`, `[::1]`) only against iPAddress subjectAltNames. The subject's
    ///   common name is never consulted (as Apple's platforms since iOS 13 / macOS 10.15, Chrome,
    ///   Go and Python refuse it: RFC 9525 §6.3), unless `allowsCommonNameFallback` is set: then
    ///   it is consulted when the certificate has no DNS subjectAltName at all (RFC 6125
    ///   §6.4.4, OpenSSL's default), never for IP addresses. A trailing dot is ignored.
    /// - Validity dates are checked at `time` (now when nil).
    ///
    /// - With a `revocation` policy other than ``RevocationPolicy/off``: the CRLs of its files
    ///   are checked while the path is verified (the leaf, or every certificate with
    ///   ``RevocationPolicy/checksWholeChain``), and once the path verifies, the stapled OCSP
    ///   response (``stapledOCSPResponse``) for the leaf: signed by the leaf's issuer or a
    ///   responder it authorised, about the leaf, within its thisUpdate and nextUpdate
    ///   (``RevocationPolicy/allowedClockSkew`` either way). A revoked certificate fails with
    ///   ``TrustFailure/Reason/revoked``; an unknown status only in ``RevocationPolicy/Mode/strict``
    ///   mode, with ``TrustFailure/Reason/revocationStatusUnknown``.
    ///
    /// OpenSSL stops at the first problem it finds: path building, then purpose, then key
    /// strength, then the host name, then signatures and dates, then CRLs.
    public func evaluate(
        anchors: TrustAnchors,
        hostname: String?,
        at time: Date? = nil,
        allowsCommonNameFallback: Bool = false,
        revocation: RevocationPolicy = .off
    ) -> TrustResult {
        guard let leaf = self.certificates.first else {
            return TrustResult(
                failure: TrustFailure(.invalidCertificate, "the server presented no certificate"),
                chain: []
            )
        }
        let store: TrustStore
        do {
            store = try TrustStore.make(anchors)
        } catch {
            return TrustResult(failure: error, chain: [])
        }
        var crls: CRLCheck? = nil
        if revocation.checksCRLs {
            do {
                crls = CRLCheck(
                    set: try CRLSet.make(revocation.crlFiles),
                    strict: revocation.mode == .strict,
                    wholeChain: revocation.checksWholeChain
                )
            } catch {
                return TrustResult(failure: error, chain: [])
            }
        }
        let verified = withExtendedLifetime((self.certificates, store, crls)) {
            self.verify(
                leaf: leaf,
                store: store,
                hostname: hostname,
                time: time,
                commonNameFallback: allowsCommonNameFallback,
                crls: crls
            )
        }
        guard verified.isTrusted, revocation.requestsStapledOCSP else { return verified }
        let failure = withExtendedLifetime((verified.chain, store)) {
            self.checkStapledOCSP(chain: verified.chain, store: store, policy: revocation, time: time)
        }
        return failure.map { TrustResult(failure: $0, chain: verified.chain) } ?? verified
    }

    /// Verifications of one evaluation at most: the first path and up to seven alternates
    /// (docs/SECURITY.md, "Path building").
    public static let maxPathAttempts = 8

    /// Builds and verifies a path; when it fails at a certificate the server sent (other than the
    /// leaf) for a reason another issuer could avoid, verifies again without that certificate
    /// (RFC 4158 backtracking, bounded). A leaf that is itself an anchor ends its own path.
    private func verify(
        leaf: Certificate,
        store: TrustStore,
        hostname: String?,
        time: Date?,
        commonNameFallback: Bool,
        crls: CRLCheck?
    ) -> TrustResult {
        if store.holds(leaf) {
            // OpenSSL looks at the leaf's own trust only once every issuer is tried, and then
            // keeps the issuers it found above it: a path through an expired copy of a root
            // would fail although the leaf is an anchor. A store of the leaf alone ends the
            // path at the leaf.
            let own: TrustStore
            do {
                own = try TrustStore.make(.custom([leaf]))
            } catch {
                return TrustResult(failure: error, chain: [leaf])
            }
            return withExtendedLifetime(own) {
                self.attempt(
                    leaf: leaf,
                    untrusted: [],
                    store: own,
                    hostname: hostname,
                    time: time,
                    commonNameFallback: commonNameFallback,
                    crls: crls
                ).result
            }
        }
        var excluded: Set<Int> = []
        var first: TrustResult?
        var firstAnchored: TrustResult?
        for _ in 0..<Self.maxPathAttempts {
            let untrusted = self.certificates.indices.dropFirst().filter { !excluded.contains($0) }
            let outcome = self.attempt(
                leaf: leaf,
                untrusted: untrusted,
                store: store,
                hostname: hostname,
                time: time,
                commonNameFallback: commonNameFallback,
                crls: crls
            )
            if outcome.result.isTrusted { return outcome.result }
            if first == nil { first = outcome.result }
            if firstAnchored == nil, let code = outcome.result.failure?.verifyErrorCode,
                !Self.noPathCodes.contains(code)
            {
                firstAnchored = outcome.result
            }
            guard let dropped = outcome.alternate, excluded.insert(dropped).inserted else { break }
        }
        // The first path that reached an anchor says what is wrong (a host name, a date);
        // when none did, the first path says where it ended.
        return firstAnchored ?? first!
    }

    /// The OpenSSL errors of a path that reached no anchor.
    static let noPathCodes: Set<Int32> = [
        X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
        X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
        X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
    ]

    /// The OpenSSL errors after which another path may succeed: the path ended at a root that is
    /// not an anchor or at a certificate whose issuer nobody has, or a certificate on it is out of
    /// its dates, is no CA, or is below the security floor. Another copy of that certificate (or
    /// another issuer) may not be.
    static let alternateCodes: Set<Int32> = [
        X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
        X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_CERT_NOT_YET_VALID,
        X509_V_ERR_INVALID_CA, X509_V_ERR_KEYUSAGE_NO_CERTSIGN, X509_V_ERR_CA_KEY_TOO_SMALL,
        X509_V_ERR_CA_MD_TOO_WEAK,
    ]

    /// One verification with the sent certificates at `untrusted` (indices into ``certificates``)
    /// as candidate issuers. `alternate`: the sent certificate to leave out of the next try, when
    /// the failure names one (never the leaf) for one of the ``alternateCodes``.
    private func attempt(
        leaf: Certificate,
        untrusted indices: [Int],
        store: TrustStore,
        hostname: String?,
        time: Date?,
        commonNameFallback: Bool,
        crls: CRLCheck?
    ) -> (result: TrustResult, alternate: Int?) {
        guard let ctx = X509_STORE_CTX_new() else {
            return (TrustResult(failure: internalFailure("X509_STORE_CTX_new"), chain: [leaf]), nil)
        }
        defer { X509_STORE_CTX_free(ctx) }
        guard let untrusted = CHawserTrust_sk_X509_new() else {
            return (TrustResult(failure: internalFailure("sk_X509_new"), chain: [leaf]), nil)
        }
        defer { CHawserTrust_sk_X509_free(untrusted) }
        for index in indices {
            guard CHawserTrust_sk_X509_push(untrusted, self.certificates[index].x509.pointer) > 0 else {
                return (TrustResult(failure: internalFailure("sk_X509_push"), chain: [leaf]), nil)
            }
        }
        guard X509_STORE_CTX_init(ctx, store.pointer, leaf.x509.pointer, untrusted) == 1 else {
            return (TrustResult(failure: internalFailure("X509_STORE_CTX_init"), chain: [leaf]), nil)
        }
        // Purpose and trust settings of a TLS client checking a server (what libssl uses).
        _ = X509_STORE_CTX_set_default(ctx, "ssl_server")
        let param = X509_STORE_CTX_get0_param(ctx)
        X509_VERIFY_PARAM_set_auth_level(param, 2)
        _ = X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        if let crls {
            // The CRLs of this evaluation only (the store is shared by every evaluation with the
            // same anchors); the context borrows the stack, which `crls` keeps alive.
            X509_STORE_CTX_set0_crls(ctx, crls.set.stack)
            let all = crls.wholeChain ? UInt(X509_V_FLAG_CRL_CHECK_ALL) : 0
            _ = X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_CRL_CHECK) | all)
            if !crls.strict {
                // Soft-fail: a certificate whose issuer has no CRL among the files passes.
                X509_STORE_CTX_set_verify_cb(ctx) { ok, ctx in
                    if ok == 0, let ctx, X509_STORE_CTX_get_error(ctx) == X509_V_ERR_UNABLE_TO_GET_CRL {
                        X509_STORE_CTX_set_error(ctx, X509_V_OK)
                        return 1
                    }
                    return ok
                }
            }
        }
        if let time {
            X509_VERIFY_PARAM_set_time(param, time_t(time.timeIntervalSince1970.rounded(.down)))
        }
        if let hostname {
            guard let target = HostTarget(hostname) else {
                ERR_clear_error()
                let failure = TrustFailure(
                    .hostnameMismatch,
                    "'\(hostname)' is not a host name or IP address a certificate can be checked against",
                    certificate: leaf,
                    depth: 0
                )
                return (TrustResult(failure: failure, chain: [leaf]), nil)
            }
            X509_VERIFY_PARAM_set_hostflags(param, HostTarget.checkFlags(commonNameFallback: commonNameFallback))
            let ok =
                target.isIPAddress
                ? X509_VERIFY_PARAM_set1_ip_asc(param, target.name)
                : X509_VERIFY_PARAM_set1_host(param, target.name, 0)
            guard ok == 1 else {
                ERR_clear_error()
                let failure = TrustFailure(
                    .hostnameMismatch,
                    "'\(hostname)' cannot be used as a host name to check",
                    certificate: leaf,
                    depth: 0
                )
                return (TrustResult(failure: failure, chain: [leaf]), nil)
            }
        }

        let rc = X509_verify_cert(ctx)
        let chain = self.builtChain(ctx, store: store, leaf: leaf)
        if rc == 1 {
            ERR_clear_error()
            return (TrustResult(failure: nil, chain: chain), nil)
        }
        let code = X509_STORE_CTX_get_error(ctx)
        guard code != X509_V_OK else {
            return (TrustResult(failure: internalFailure("X509_verify_cert"), chain: chain), nil)
        }
        ERR_clear_error()
        let depth = Int(X509_STORE_CTX_get_error_depth(ctx))
        var culprit: Certificate? = nil
        var alternate: Int? = nil
        if let current = X509_STORE_CTX_get_current_cert(ctx) {
            culprit = self.certificate(for: current, store: store, leaf: leaf)
            if depth > 0, Self.alternateCodes.contains(code),
                let index = self.certificates.indices.dropFirst().first(where: {
                    self.certificates[$0].x509.pointer == current
                })
            {
                alternate = index
            }
        }
        if culprit == nil, depth >= 0, depth < chain.count { culprit = chain[depth] }
        let certificate = culprit ?? leaf
        let failure = TrustFailure.fromVerifyError(
            code,
            depth: depth,
            certificate: certificate,
            chain: chain,
            hostname: hostname,
            time: time,
            commonNameFallback: commonNameFallback
        )
        return (TrustResult(failure: failure, chain: chain), alternate)
    }

    /// The chain OpenSSL built, mapped back to the caller's Certificate values where it can
    /// (same X509 object), re-encoded otherwise (certificates from the system store).
    private func builtChain(_ ctx: OpaquePointer, store: TrustStore, leaf: Certificate) -> [Certificate] {
        guard let stack = X509_STORE_CTX_get1_chain(ctx) else { return [leaf] }
        defer { CHawserTrust_sk_X509_pop_free(stack) }
        var out: [Certificate] = []
        for i in 0..<CHawserTrust_sk_X509_num(stack) {
            guard let x = CHawserTrust_sk_X509_value(stack, i),
                let certificate = self.certificate(for: x, store: store, leaf: leaf)
            else { continue }
            out.append(certificate)
        }
        ERR_clear_error()
        return out.isEmpty ? [leaf] : out
    }

    private func certificate(for x: OpaquePointer, store: TrustStore, leaf: Certificate) -> Certificate? {
        if let known = self.certificates.first(where: { $0.x509.pointer == x }) { return known }
        if let known = store.anchors.first(where: { $0.x509.pointer == x }) { return known }
        return try? Certificate(borrowing: x)
    }

    private func internalFailure(_ function: String) -> TrustFailure {
        TrustFailure(.other, "\(function) failed: \(openSSLErrorText(fallback: "no detail from OpenSSL"))")
    }
}

// MARK: - host names

/// A host as OpenSSL's checks want it: no brackets around IPv6, no trailing dot, and whether it
/// is an IP literal (checked against iPAddress names only).
struct HostTarget {
    let name: String
    let isIPAddress: Bool

    init?(_ host: String) {
        var h = Substring(host)
        if h.hasPrefix("[") && h.hasSuffix("]") { h = h.dropFirst().dropLast() }
        if h.hasSuffix(".") { h = h.dropLast() }
        guard !h.isEmpty, !h.utf8.contains(0) else { return nil }
        let name = String(h)
        var buffer = [UInt8](repeating: 0, count: 16)
        let isV4 = inet_pton(AF_INET, name, &buffer) == 1
        let isV6 = !isV4 && inet_pton(AF_INET6, name, &buffer) == 1
        guard isV4 || isV6 || !name.contains(":") else { return nil }
        self.name = name
        self.isIPAddress = isV4 || isV6
    }

    /// True when both texts are IP address literals of the same address.
    static func sameIPAddress(_ a: String, _ b: String) -> Bool {
        func bytes(_ text: String) -> [UInt8]? {
            var buffer = [UInt8](repeating: 0, count: 16)
            if inet_pton(AF_INET, text, &buffer) == 1 { return Array(buffer.prefix(4)) }
            if inet_pton(AF_INET6, text, &buffer) == 1 { return buffer }
            return nil
        }
        guard let x = bytes(a), let y = bytes(b) else { return false }
        return x == y
    }

    /// OpenSSL's host-check flags: no partial wildcards (`f*.example.com`), and the subject's
    /// common name never consulted unless the caller opted in.
    static func checkFlags(commonNameFallback: Bool) -> UInt32 {
        UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS)
            | (commonNameFallback ? 0 : UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT))
    }
}

extension Certificate {
    /// Which names a host check saw in this certificate, for a mismatch message about `host`.
    /// An IP address the certificate writes as a DNS name is called out: it names the address,
    /// but not in the form that can match one (RFC 6125 §6.2.1: iPAddress entries only).
    func namesExplanation(for host: String?, commonNameFallback: Bool) -> String {
        if let host, let target = HostTarget(host), target.isIPAddress,
            let entry = self.alternativeNameEntries.first(where: {
                !$0.isIPAddress && HostTarget.sameIPAddress($0.name, target.name)
            })
        {
            return
                "it names \(entry.name) only as a DNS name (DNS:\(entry.name)); an IP address matches only an IP address entry of the subjectAltName (IP:\(target.name))"
        }
        return self.namesExplanation(commonNameFallback: commonNameFallback)
    }

    /// Which names a host check saw in this certificate, for a mismatch message.
    func namesExplanation(commonNameFallback: Bool) -> String {
        let names = self.subjectAlternativeNames
        if !names.isEmpty { return "it names " + names.joined(separator: ", ") }
        if commonNameFallback { return "it has no subjectAltName; its subject is '\(self.subject)'" }
        return
            "it has no subjectAltName, and the subject's common name ('\(self.subject)') is not checked: set allowsCommonNameFallback for a private CA that issues such certificates"
    }

    /// True when this certificate names `host` under the same rules as
    /// ``ServerTrust/evaluate(anchors:hostname:at:allowsCommonNameFallback:revocation:)`` (wildcards only as
    /// a whole left-most label, IP literals against iPAddress names, the subject's common name
    /// only with `allowsCommonNameFallback` and no DNS subjectAltName).
    public func matches(host: String, allowsCommonNameFallback: Bool = false) -> Bool {
        guard let target = HostTarget(host) else { return false }
        let flags = HostTarget.checkFlags(commonNameFallback: allowsCommonNameFallback)
        let rc = withExtendedLifetime(self.x509) { () -> Int32 in
            if target.isIPAddress {
                return X509_check_ip_asc(self.x509.pointer, target.name, flags)
            }
            return X509_check_host(self.x509.pointer, target.name, 0, flags, nil)
        }
        ERR_clear_error()
        return rc == 1
    }
}
