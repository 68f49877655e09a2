// A throw-away PKI for tests, `hawser demo` and benchmarks: built with OpenSSL's API (no
// `openssl` command) into a temporary directory, once per process, removed at exit.
// Never used by the library.
import CHawser
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// Why the test PKI could not be built.
public struct TestPKIError: Error, Sendable, CustomStringConvertible {
    /// What failed (an OpenSSL call, a file write), in words.
    public var message: String
    /// Creates an error that says what failed.
    public init(_ message: String) { self.message = message }
    public var description: String { "test PKI: \(self.message)" }
}

/// Certificates for every trust scenario, with their files.
///
/// ```
/// Hawser Test Root CA (RSA-2048)
/// ├── Hawser Test Intermediate CA (EC P-256)
/// │   ├── valid, expired, notYetValid, wrongHost, cnOnly, wildcard, partialWildcard
/// │   │   (one shared RSA-2048 key), rsa1024, ecdsa
/// └── client (clientAuth, EC P-256)
/// Hawser Untrusted Root CA (EC P-256)
/// └── untrusted
/// selfSigned (its own EC P-256 key)
///
/// Cross-signing (the same subject and key under two issuers):
/// Hawser Test Root CA 2 (EC P-256), self-signed and trusted by nobody
/// ├── also cross-signed by Hawser Test Root CA (``root2CrossSigned``)
/// └── crossSigned (presented as leaf, Root CA 2 self-signed, Root CA 2 cross-signed)
/// Hawser Legacy Root CA (EC P-256), trusted by nobody
/// └── Hawser Test Root CA, cross-signed, expired (``expiredRootCopy``)
/// ```
///
/// Revocation: ``revoked`` (by the intermediate) is the leaf that OCSP responses
/// (``ocspResponse(for:status:signer:thisUpdate:nextUpdate:)``) and CRLs
/// (``crlFile(_:issuer:revoking:lastUpdate:nextUpdate:)``) made at test time call revoked.
///
/// Server leaves name `localhost`, `127.0.0.1` and `::1` unless said otherwise.
/// ``Leaf/chainPath`` holds what a server sends (leaf, then its intermediate when it has one, then
/// the cross-signed or expired copies a scenario adds);
/// ``Leaf/certificatePath`` the leaf alone (a server that forgets its intermediate).
public final class TestPKI: Sendable {
    /// One issued certificate with its key and files.
    public struct Leaf: Sendable {
        /// The scenario's name (also the file prefix).
        public let name: String
        /// The certificate.
        public let certificate: Certificate
        /// The certificates a server presents for it, leaf first: the leaf and its issuing
        /// intermediate when it has one (for ``TestPKI/untrusted``: the leaf and its root), and
        /// the extra certificates of the scenario.
        public let presentedChain: [Certificate]
        /// PEM file of the leaf alone.
        public let certificatePath: String
        /// DER file of the leaf.
        public let derPath: String
        /// PEM file of ``presentedChain`` (for a server's certificate chain file).
        public let chainPath: String
        /// PEM file of the private key (PKCS#8, unencrypted).
        public let keyPath: String

        /// The leaf alone, as a server that does not send its intermediate presents it.
        public var leafOnly: [Certificate] { [self.certificate] }
    }

    /// The temporary directory holding every file.
    public let directory: String

    /// The CAs are valid from 60 days ago for ten years, so every leaf's period lies inside theirs.
    /// The trusted root (self-signed, RSA-2048). PEM at ``rootPath``, DER at ``rootDERPath``.
    public let root: Certificate
    /// The PEM file of ``root``, to use as a trust anchor (`--cacert`, `TrustAnchors.custom`).
    public let rootPath: String
    /// The DER file of ``root``.
    public let rootDERPath: String
    /// The intermediate CA under ``root`` that issues the server leaves.
    public let intermediate: Certificate
    /// The PEM file of ``intermediate``.
    public let intermediatePath: String
    /// A second root nobody trusts.
    public let untrustedRoot: Certificate
    /// The PEM file of ``untrustedRoot``.
    public let untrustedRootPath: String
    /// `Hawser Test Root CA 2`, self-signed, trusted by nobody: the issuer of ``crossSigned``.
    public let root2: Certificate
    /// `Hawser Test Root CA 2` (same subject and key as ``root2``) issued by ``root``: the
    /// cross-sign that makes ``crossSigned`` trusted by whoever trusts ``root``.
    public let root2CrossSigned: Certificate
    /// Eight more self-signed `Hawser Test Root CA 2` certificates (same key, other serial
    /// numbers): issuers of ``crossSigned`` that lead nowhere, to bound path building with.
    public let root2Reissues: [Certificate]
    /// `Hawser Legacy Root CA`, self-signed, trusted by nobody: the issuer of ``expiredRootCopy``.
    public let legacyRoot: Certificate
    /// A copy of ``root`` (same subject and key) cross-signed by ``legacyRoot``, expired 30 days
    /// ago: what a server still sending an old cross-sign presents.
    public let expiredRootCopy: Certificate

    /// Valid for localhost, 127.0.0.1, ::1 (issued by the intermediate).
    public let valid: Leaf
    /// Expired yesterday (validity 30 days ago … 1 day ago).
    public let expired: Leaf
    /// Valid from 30 days from now.
    public let notYetValid: Leaf
    /// Valid, but for `wrong.example.com` only.
    public let wrongHost: Leaf
    /// Self-signed, for localhost, 127.0.0.1, ::1 (not a CA).
    public let selfSigned: Leaf
    /// Issued by ``untrustedRoot`` for localhost, 127.0.0.1, ::1; presented with that root.
    public let untrusted: Leaf
    /// `CN=localhost` and no subjectAltName at all: matches `localhost` through the
    /// common-name fallback, never `127.0.0.1`.
    public let cnOnly: Leaf
    /// RSA-1024 key (below the security floor).
    public let rsa1024: Leaf
    /// EC P-256 key (valid).
    public let ecdsa: Leaf
    /// `*.hawser.localhost` only: matches `api.hawser.localhost`, not `hawser.localhost` nor
    /// `a.b.hawser.localhost` (curl resolves every `*.localhost` name to loopback).
    public let wildcard: Leaf
    /// `api*.hawser.localhost` only: a partial wildcard, which matches nothing (RFC 6125).
    public let partialWildcard: Leaf
    /// A client certificate (extendedKeyUsage clientAuth) issued directly by ``root``, for
    /// mutual TLS (`CN=hawser-client`).
    public let client: Leaf
    /// Issued by ``root2``; presented as the leaf, then ``root2`` (self-signed, before the
    /// certificate that makes it trusted), then ``root2CrossSigned``. A path to ``root`` exists
    /// through the third certificate only.
    public let crossSigned: Leaf
    /// Issued by ``intermediate``; presented with the intermediate, then ``expiredRootCopy``.
    public let withExpiredRootCopy: Leaf
    /// `CN=127.0.0.1` and `DNS:127.0.0.1` only: the address written as a DNS name, which never
    /// matches the IP address (only an iPAddress entry does).
    public let ipAsDNSName: Leaf
    /// A server leaf by the intermediate, for revocation scenarios (``valid`` is the one in good standing).
    public let revoked: Leaf
    /// The issuing certificates and keys kept for OCSP responses and CRLs.
    private let signers: Signers

    /// Every server scenario, by name.
    public var serverLeaves: [Leaf] {
        [
            valid, expired, notYetValid, wrongHost, selfSigned, untrusted, cnOnly, rsa1024, ecdsa, wildcard,
            partialWildcard,
        ]
    }

    /// The PKI of this process, generated on first use.
    public static func shared() throws(TestPKIError) -> TestPKI { try sharedResult.get() }

    private static let sharedResult: Result<TestPKI, TestPKIError> = {
        do throws(TestPKIError) {
            return .success(try TestPKI())
        } catch {
            return .failure(error)
        }
    }()

    private init() throws(TestPKIError) {
        // In TMPDIR when it is set (as FileManager's temporaryDirectory), else /tmp.
        let tmp = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(tmp.hasSuffix("/") ? String(tmp.dropLast()) : tmp)/hawser-pki-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestPKIError("cannot create a temporary directory") }
        let dir = String(cString: made)
        self.directory = dir
        registerCleanup(dir)
        let files = FileWriter(directory: dir)

        // Keys: RSA-2048 generation is the slow part, so there are two (root, shared leaf key).
        let rootKey = try Key.rsa(2048)
        let leafKey = try Key.rsa(2048)
        let weakKey = try Key.rsa(1024)
        let intermediateKey = try Key.ec()
        let untrustedRootKey = try Key.ec()
        let selfSignedKey = try Key.ec()
        let ecdsaKey = try Key.ec()
        let clientKey = try Key.ec()
        let root2Key = try Key.ec()
        let legacyRootKey = try Key.ec()

        let day = 86_400
        let rootX = try CertificateBuilder.make(
            subject: "Hawser Test Root CA",
            key: rootKey,
            issuer: nil,
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(rootX) }
        let intX = try CertificateBuilder.make(
            subject: "Hawser Test Intermediate CA",
            key: intermediateKey,
            issuer: (rootX, rootKey),
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(intX) }
        let root2X = try CertificateBuilder.make(
            subject: "Hawser Untrusted Root CA",
            key: untrustedRootKey,
            issuer: nil,
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(root2X) }
        let newRootX = try CertificateBuilder.make(
            subject: "Hawser Test Root CA 2",
            key: root2Key,
            issuer: nil,
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(newRootX) }
        let newRootCrossX = try CertificateBuilder.make(
            subject: "Hawser Test Root CA 2",
            key: root2Key,
            issuer: (rootX, rootKey),
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(newRootCrossX) }
        let legacyX = try CertificateBuilder.make(
            subject: "Hawser Legacy Root CA",
            key: legacyRootKey,
            issuer: nil,
            from: -3650 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(legacyX) }
        let rootCopyX = try CertificateBuilder.make(
            subject: "Hawser Test Root CA",
            key: rootKey,
            issuer: (legacyX, legacyRootKey),
            from: -400 * day,
            to: -30 * day,
            kind: .ca
        )
        defer { X509_free(rootCopyX) }

        self.root = try files.certificate(rootX)
        self.rootPath = try files.write("root.pem", pem: [rootX])
        self.rootDERPath = try files.write("root.der", bytes: self.root.derBytes)
        self.intermediate = try files.certificate(intX)
        self.intermediatePath = try files.write("intermediate.pem", pem: [intX])
        self.untrustedRoot = try files.certificate(root2X)
        self.untrustedRootPath = try files.write("untrusted-root.pem", pem: [root2X])
        self.root2 = try files.certificate(newRootX)
        self.root2CrossSigned = try files.certificate(newRootCrossX)
        var reissues: [Certificate] = []
        for _ in 0..<8 {
            let x = try CertificateBuilder.make(
                subject: "Hawser Test Root CA 2",
                key: root2Key,
                issuer: nil,
                from: -60 * day,
                to: 3650 * day,
                kind: .ca
            )
            defer { X509_free(x) }
            reissues.append(try files.certificate(x))
        }
        self.root2Reissues = reissues
        self.legacyRoot = try files.certificate(legacyX)
        self.expiredRootCopy = try files.certificate(rootCopyX)

        let localNames = "DNS:localhost,IP:127.0.0.1,IP:::1"
        let byIntermediate = (intX, intermediateKey)
        func leaf(
            _ name: String,
            key: Key,
            issuer: (OpaquePointer, Key)?,
            chainExtra: [OpaquePointer],
            subject: String = "localhost",
            sans: String? = localNames,
            from: Int = -day,
            to: Int = 365 * day,
            kind: CertificateBuilder.Kind = .server
        ) throws(TestPKIError) -> Leaf {
            let x = try CertificateBuilder.make(
                subject: subject,
                key: key,
                issuer: issuer,
                from: from,
                to: to,
                kind: kind,
                subjectAltNames: sans
            )
            defer { X509_free(x) }
            let certificate = try files.certificate(x)
            var presented = [certificate]
            var pem = [x]
            for extra in chainExtra {
                presented.append(try files.certificate(extra))
                pem.append(extra)
            }
            return Leaf(
                name: name,
                certificate: certificate,
                presentedChain: presented,
                certificatePath: try files.write("\(name).pem", pem: [x]),
                derPath: try files.write("\(name).der", bytes: certificate.derBytes),
                chainPath: try files.write("\(name)-chain.pem", pem: pem),
                keyPath: try files.write("\(name)-key.pem", bytes: try key.pem())
            )
        }
        self.valid = try leaf("valid", key: leafKey, issuer: byIntermediate, chainExtra: [intX])
        self.expired = try leaf(
            "expired",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            from: -30 * day,
            to: -day
        )
        self.notYetValid = try leaf(
            "not-yet-valid",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            from: 30 * day,
            to: 400 * day
        )
        self.wrongHost = try leaf(
            "wrong-host",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            subject: "wrong.example.com",
            sans: "DNS:wrong.example.com"
        )
        self.selfSigned = try leaf("self-signed", key: selfSignedKey, issuer: nil, chainExtra: [])
        self.untrusted = try leaf("untrusted", key: ecdsaKey, issuer: (root2X, untrustedRootKey), chainExtra: [root2X])
        self.cnOnly = try leaf("cn-only", key: leafKey, issuer: byIntermediate, chainExtra: [intX], sans: nil)
        self.rsa1024 = try leaf("rsa1024", key: weakKey, issuer: byIntermediate, chainExtra: [intX])
        self.ecdsa = try leaf("ecdsa", key: ecdsaKey, issuer: byIntermediate, chainExtra: [intX])
        self.wildcard = try leaf(
            "wildcard",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            subject: "*.hawser.localhost",
            sans: "DNS:*.hawser.localhost"
        )
        self.partialWildcard = try leaf(
            "partial-wildcard",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            subject: "api*.hawser.localhost",
            sans: "DNS:api*.hawser.localhost"
        )
        self.client = try leaf(
            "client",
            key: clientKey,
            issuer: (rootX, rootKey),
            chainExtra: [],
            subject: "hawser-client",
            sans: nil,
            kind: .client
        )
        self.crossSigned = try leaf(
            "cross-signed",
            key: leafKey,
            issuer: (newRootX, root2Key),
            chainExtra: [newRootX, newRootCrossX]
        )
        self.withExpiredRootCopy = try leaf(
            "expired-root-copy",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX, rootCopyX]
        )
        self.ipAsDNSName = try leaf(
            "ip-as-dns-name",
            key: leafKey,
            issuer: byIntermediate,
            chainExtra: [intX],
            subject: "127.0.0.1",
            sans: "DNS:127.0.0.1"
        )
        self.revoked = try leaf("revoked", key: leafKey, issuer: byIntermediate, chainExtra: [intX])
        // An impostor: the intermediate's name on another key, self-signed (signs OCSP responses
        // and CRLs that must not verify).
        let impostorKey = try Key.ec()
        let impostorX = try CertificateBuilder.make(
            subject: "Hawser Test Intermediate CA",
            key: impostorKey,
            issuer: nil,
            from: -60 * day,
            to: 3650 * day,
            kind: .ca
        )
        defer { X509_free(impostorX) }
        self.signers = Signers(
            root: (rootX, rootKey),
            intermediate: (intX, intermediateKey),
            impostor: (impostorX, impostorKey)
        )
        // Keep the keys alive until every certificate is signed (they free themselves).
        withExtendedLifetime(
            (rootKey, leafKey, weakKey, intermediateKey, untrustedRootKey, selfSignedKey, ecdsaKey, clientKey)
        ) {}
        withExtendedLifetime((root2Key, legacyRootKey)) {}
    }
}

// MARK: - revocation: OCSP responses and CRLs

extension TestPKI {
    /// What an OCSP response says about a certificate.
    public enum OCSPStatus: Sendable {
        /// Not revoked.
        case good
        /// Revoked an hour before the response (reason keyCompromise).
        case revoked
        /// The responder does not know the certificate.
        case unknown
    }

    /// Who signs an OCSP response or a CRL.
    public enum Signer: Sendable {
        /// The root CA (issuer of the intermediate).
        case root
        /// The intermediate CA (issuer of the server leaves).
        case intermediate
        /// A certificate with the intermediate's name and another key, trusted by nobody.
        case impostor
    }

    /// A DER OCSP response (RFC 6960) about `leaf` (issued by the intermediate) saying
    /// `status`, signed by `signer` with its certificate included, valid from `thisUpdate` to
    /// `nextUpdate` seconds from now (nil: no nextUpdate). Made at call time with OpenSSL's API,
    /// as `openssl ocsp -index … -rsigner … -ndays 1` would.
    public func ocspResponse(
        for leaf: Leaf,
        status: OCSPStatus,
        signer: Signer = .intermediate,
        thisUpdate: Int = -3600,
        nextUpdate: Int? = 86_400
    ) throws(TestPKIError) -> [UInt8] {
        let leafX = try parse(leaf.certificate.derBytes)
        defer { X509_free(leafX) }
        guard let id = OCSP_cert_to_id(EVP_sha1(), leafX, self.signers.intermediate.0) else {
            throw TestPKIError("OCSP_cert_to_id failed")
        }
        defer { OCSP_CERTID_free(id) }
        guard let basic = OCSP_BASICRESP_new() else { throw TestPKIError("OCSP_BASICRESP_new failed") }
        defer { OCSP_BASICRESP_free(basic) }
        let this = X509_time_adj_ex(nil, 0, thisUpdate, nil)
        let next = nextUpdate.flatMap { X509_time_adj_ex(nil, 0, $0, nil) }
        let revokedAt = status == .revoked ? X509_time_adj_ex(nil, 0, -3600, nil) : nil
        defer {
            ASN1_TIME_free(this)
            ASN1_TIME_free(next)
            ASN1_TIME_free(revokedAt)
        }
        let code: Int32
        switch status {
        case .good: code = V_OCSP_CERTSTATUS_GOOD
        case .revoked: code = V_OCSP_CERTSTATUS_REVOKED
        case .unknown: code = V_OCSP_CERTSTATUS_UNKNOWN
        }
        let reason = status == .revoked ? OCSP_REVOKED_STATUS_KEYCOMPROMISE : 0
        guard OCSP_basic_add1_status(basic, id, code, reason, revokedAt, this, next) != nil else {
            throw TestPKIError("OCSP_basic_add1_status failed")
        }
        let (x, key) = self.signers.pair(signer)
        guard OCSP_basic_sign(basic, x, key.pointer, EVP_sha256(), nil, 0) == 1 else {
            throw TestPKIError("OCSP_basic_sign failed")
        }
        guard let response = OCSP_response_create(OCSP_RESPONSE_STATUS_SUCCESSFUL, basic) else {
            throw TestPKIError("OCSP_response_create failed")
        }
        defer { OCSP_RESPONSE_free(response) }
        let length = i2d_OCSP_RESPONSE(response, nil)
        guard length > 0 else { throw TestPKIError("i2d_OCSP_RESPONSE failed") }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_OCSP_RESPONSE(response, &cursor)
        }
        ERR_clear_error()
        return der
    }

    /// Writes a CRL by `issuer` listing `revoking` (their serial numbers), valid from
    /// `lastUpdate` to `nextUpdate` seconds from now, in PEM as `name`.crl and in DER as
    /// `name`-der.crl in the PKI's directory. Returns the two paths.
    public func crlFile(
        _ name: String,
        issuer: Signer = .intermediate,
        revoking: [Leaf],
        lastUpdate: Int = -3600,
        nextUpdate: Int = 86_400
    ) throws(TestPKIError) -> (pem: String, der: String) {
        let (issuerX, key) = self.signers.pair(issuer)
        guard let crl = X509_CRL_new() else { throw TestPKIError("X509_CRL_new failed") }
        defer { X509_CRL_free(crl) }
        let last = X509_time_adj_ex(nil, 0, lastUpdate, nil)
        let next = X509_time_adj_ex(nil, 0, nextUpdate, nil)
        let revokedAt = X509_time_adj_ex(nil, 0, -3600, nil)
        defer {
            ASN1_TIME_free(last)
            ASN1_TIME_free(next)
            ASN1_TIME_free(revokedAt)
        }
        var ok = X509_CRL_set_version(crl, 1) == 1
        ok = ok && X509_CRL_set_issuer_name(crl, X509_get_subject_name(issuerX)) == 1
        ok = ok && X509_CRL_set1_lastUpdate(crl, last) == 1
        ok = ok && X509_CRL_set1_nextUpdate(crl, next) == 1
        for leaf in revoking {
            let leafX = try parse(leaf.certificate.derBytes)
            defer { X509_free(leafX) }
            guard let entry = X509_REVOKED_new() else { throw TestPKIError("X509_REVOKED_new failed") }
            let filled =
                X509_REVOKED_set_serialNumber(entry, X509_get_serialNumber(leafX)) == 1
                && X509_REVOKED_set_revocationDate(entry, revokedAt) == 1
            guard filled, X509_CRL_add0_revoked(crl, entry) == 1 else {
                X509_REVOKED_free(entry)
                throw TestPKIError("cannot add '\(leaf.name)' to the CRL")
            }
        }
        ok = ok && X509_CRL_sort(crl) == 1
        ok = ok && X509_CRL_sign(crl, key.pointer, EVP_sha256()) > 0
        guard ok else { throw TestPKIError("cannot make the CRL '\(name)'") }
        let pem = try withMemoryBIO { bio in PEM_write_bio_X509_CRL(bio, crl) == 1 }
        let length = i2d_X509_CRL(crl, nil)
        guard length > 0 else { throw TestPKIError("i2d_X509_CRL failed") }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509_CRL(crl, &cursor)
        }
        ERR_clear_error()
        let files = FileWriter(directory: self.directory)
        // Named .crl, not .pem or .der: a directory of certificates (the PKI's own, read by
        // Certificate.certificates(inDirectory:)) holds no CRL.
        return (try files.write("\(name).crl", bytes: pem), try files.write("\(name)-der.crl", bytes: der))
    }
}

private func parse(_ der: [UInt8]) throws(TestPKIError) -> OpaquePointer {
    let x: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
        var cursor = buffer.baseAddress
        return d2i_X509(nil, &cursor, buffer.count)
    }
    guard let x else { throw TestPKIError("a certificate of the PKI does not parse") }
    return x
}

/// The CA certificates (one reference each) and keys that sign OCSP responses and CRLs.
/// `@unchecked Sendable`: OpenSSL objects that are only read after init.
private final class Signers: @unchecked Sendable {
    let root: (OpaquePointer, Key)
    let intermediate: (OpaquePointer, Key)
    let impostor: (OpaquePointer, Key)

    init(root: (OpaquePointer, Key), intermediate: (OpaquePointer, Key), impostor: (OpaquePointer, Key)) {
        for (x, _) in [root, intermediate, impostor] { X509_up_ref(x) }
        self.root = root
        self.intermediate = intermediate
        self.impostor = impostor
    }

    deinit { for (x, _) in [self.root, self.intermediate, self.impostor] { X509_free(x) } }

    func pair(_ signer: TestPKI.Signer) -> (OpaquePointer, Key) {
        switch signer {
        case .root: return self.root
        case .intermediate: return self.intermediate
        case .impostor: return self.impostor
        }
    }
}

// MARK: - removal at exit

private nonisolated(unsafe) var cleanupDirectory: String? = nil
/// The files the PKI wrote (FileWriter adds them), removed at exit.
nonisolated(unsafe) var cleanupFiles: [String] = []

private func registerCleanup(_ directory: String) {
    cleanupDirectory = directory
    atexit {
        for file in cleanupFiles { unlink(file) }
        if let cleanupDirectory { rmdir(cleanupDirectory) }
    }
}
