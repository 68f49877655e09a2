import CHawser

// X.509 certificates as values: parsed once with OpenSSL, kept as DER plus an owned X509*,
// compared by their DER bytes. PEM bundles are split here (strict base64, clear errors), not
// by OpenSSL's PEM reader, so every failure can say which block was wrong and why.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Why certificate data could not be used.
public struct CertificateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it was.
    public enum Kind: Sendable, Hashable {
        /// No bytes at all.
        case empty
        /// The bytes are neither PEM (no `-----BEGIN` line) nor DER (not an ASN.1 SEQUENCE).
        case unrecognizedFormat
        /// A PEM block is malformed: no END line, mismatched labels, bad base64, headers.
        case invalidPEM
        /// PEM data holds no `CERTIFICATE` block.
        case noCertificate
        /// The DER is not a valid X.509 certificate (OpenSSL refused it, or a field is unusable).
        case invalidDER
        /// Bytes follow the certificate's DER encoding.
        case trailingData
        /// A file or directory could not be read.
        case unreadable
    }

    /// What kind of problem it was.
    public var kind: Kind
    /// What exactly was wrong, naming the block, file or field.
    public var message: String
    /// The file the data came from, when it came from one.
    public var path: String?

    /// Creates an error of `kind` with a message that names the input, and the file it came from.
    public init(_ kind: Kind, _ message: String, path: String? = nil) {
        self.kind = kind
        self.message = message
        self.path = path
    }

    public var description: String {
        if let path { return "\(path): \(self.message)" }
        return self.message
    }

    func with(path: String) -> CertificateError {
        var e = self
        if e.path == nil { e.path = path }
        return e
    }
}

/// Owns one reference of an `X509*`. OpenSSL's X509 objects are safe to share between
/// threads for reading (their lazily computed caches are locked), so the box is Sendable.
final class X509Reference: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Takes over one reference of `pointer`.
    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    deinit { X509_free(self.pointer) }
}

/// One X.509 certificate, kept as its DER encoding.
///
/// Two certificates are equal when their DER bytes are equal. The validity dates, the key's
/// algorithm and size and the CA flag are read when the value is made; the names and the
/// SubjectPublicKeyInfo are read from the parsed certificate when asked for, so a handshake
/// whose chain is only verified (the common case) never formats a distinguished name.
public struct Certificate: Sendable, Hashable, CustomStringConvertible {
    /// The certificate's DER encoding, exactly as given.
    public let derBytes: [UInt8]
    /// A short human name: the subject's common name, else the first subjectAltName, else the
    /// whole subject (RFC 2253). The counterpart of `SecCertificateCopySubjectSummary`.
    public var subjectSummary: String {
        if let cn = commonName(X509_get_subject_name(self.x509.pointer)), !cn.isEmpty { return cn }
        if let first = self.subjectAlternativeNames.first { return first }
        let subject = self.subject
        return subject.isEmpty ? "(empty subject)" : subject
    }
    /// The subject distinguished name, RFC 2253 form (`CN=localhost,O=Hawser`).
    public var subject: String { distinguishedName(X509_get_subject_name(self.x509.pointer)) }
    /// The issuer distinguished name, RFC 2253 form.
    public var issuer: String { distinguishedName(X509_get_issuer_name(self.x509.pointer)) }
    /// The subjectAltName entries that name the server: DNS names as written (`*.example.com`)
    /// and IP addresses in text form (`127.0.0.1`, `::1`). Other kinds (e-mail, URI) are omitted.
    public var subjectAlternativeNames: [String] { alternativeNames(self.x509.pointer).map(\.name) }
    /// The same entries with their kind: an iPAddress entry, or a dNSName.
    var alternativeNameEntries: [(name: String, isIPAddress: Bool)] { alternativeNames(self.x509.pointer) }
    /// The issuer's common name, else its whole distinguished name (as ``subjectSummary``).
    var issuerSummary: String {
        if let cn = commonName(X509_get_issuer_name(self.x509.pointer)), !cn.isEmpty { return cn }
        let issuer = self.issuer
        return issuer.isEmpty ? "(empty issuer)" : issuer
    }
    /// Start of the validity period.
    public let notValidBefore: Date
    /// End of the validity period.
    public let notValidAfter: Date
    /// The SubjectPublicKeyInfo structure, DER: what public-key pinning compares.
    public var publicKeyInfoDER: [UInt8] { publicKeyInfo(self.x509.pointer) ?? [] }
    /// The public key's algorithm as OpenSSL names it (`RSA`, `EC`, `ED25519`, …).
    public let publicKeyAlgorithm: String
    /// The public key's size in bits (the modulus for RSA, the field for EC).
    public let publicKeyBits: Int
    /// True when basicConstraints says this is a CA certificate.
    public let isCertificateAuthority: Bool

    let x509: X509Reference

    /// Parses one DER-encoded certificate. Trailing bytes are an error.
    public init(derEncoded bytes: [UInt8]) throws(CertificateError) {
        guard !bytes.isEmpty else { throw CertificateError(.empty, "no certificate data (0 bytes)") }
        guard bytes[0] == 0x30 else {
            throw CertificateError(
                .invalidDER,
                "not a DER certificate: it starts with 0x\(hex2(bytes[0])), not an ASN.1 SEQUENCE (0x30)"
            )
        }
        var consumed = 0
        let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let x = d2i_X509(nil, &cursor, buffer.count)
            if x != nil, let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return x
        }
        guard let parsed else {
            throw CertificateError(
                .invalidDER,
                "not a valid X.509 certificate (\(bytes.count) bytes): \(openSSLErrorText(fallback: "OpenSSL could not decode it"))"
            )
        }
        let reference = X509Reference(owning: parsed)
        guard consumed == bytes.count else {
            throw CertificateError(
                .trailingData,
                "\(bytes.count - consumed) bytes follow the certificate's \(consumed)-byte DER encoding"
            )
        }
        try self.init(bytes, reference)
    }

    /// Wraps an `X509*` the caller keeps owning (one reference is taken here), e.g. one
    /// from `SSL_get_peer_cert_chain`.
    init(borrowing x509: OpaquePointer) throws(CertificateError) {
        let length = i2d_X509(x509, nil)
        guard length > 0 else {
            throw CertificateError(
                .invalidDER,
                "cannot encode the certificate: \(openSSLErrorText(fallback: "i2d_X509 failed"))"
            )
        }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(x509, &cursor)
        }
        guard written == length else {
            throw CertificateError(
                .invalidDER,
                "cannot encode the certificate: \(openSSLErrorText(fallback: "i2d_X509 failed"))"
            )
        }
        X509_up_ref(x509)
        try self.init(der, X509Reference(owning: x509))
    }

    private init(_ der: [UInt8], _ reference: X509Reference) throws(CertificateError) {
        let x = reference.pointer
        self.derBytes = der
        self.x509 = reference
        let named = { "certificate '\(distinguishedName(X509_get_subject_name(x)))'" }
        guard let before = asn1Date(X509_get0_notBefore(x)) else {
            throw CertificateError(.invalidDER, "\(named()) has an unreadable notBefore date")
        }
        guard let after = asn1Date(X509_get0_notAfter(x)) else {
            throw CertificateError(.invalidDER, "\(named()) has an unreadable notAfter date")
        }
        self.notValidBefore = before
        self.notValidAfter = after
        guard X509_get_X509_PUBKEY(x) != nil, let key = X509_get0_pubkey(x) else {
            throw CertificateError(
                .invalidDER,
                "\(named()) has a public key OpenSSL cannot use: \(openSSLErrorText(fallback: "unsupported key"))"
            )
        }
        self.publicKeyAlgorithm = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "unknown"
        self.publicKeyBits = Int(EVP_PKEY_get_bits(key))
        self.isCertificateAuthority = X509_check_ca(x) > 0
        ERR_clear_error()
    }

    /// Parses PEM data holding one or more certificates (a bundle; other PEM blocks such as
    /// private keys are skipped), or a single DER certificate.
    ///
    /// - Throws: ``CertificateError`` naming the block and what was wrong with it; an empty
    ///   input, PEM without any `CERTIFICATE` block, and bytes that are neither PEM nor DER
    ///   are errors too.
    public static func parse(pemOrDER bytes: [UInt8]) throws(CertificateError) -> [Certificate] {
        guard !bytes.isEmpty else { throw CertificateError(.empty, "no certificate data (0 bytes)") }
        if PEMReader.containsBeginLine(bytes) {
            return try PEMReader.certificates(in: bytes)
        }
        if bytes[0] == 0x30 {
            return [try Certificate(derEncoded: bytes)]
        }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            throw CertificateError(.empty, "no certificate data (\(bytes.count) bytes of whitespace)")
        }
        throw CertificateError(
            .unrecognizedFormat,
            "neither PEM (no '-----BEGIN' line) nor DER (first byte 0x\(hex2(bytes[0])), a certificate starts with 0x30)"
        )
    }

    /// Reads a certificate file: PEM (one or several certificates) or DER.
    public static func load(contentsOf path: String) throws(CertificateError) -> [Certificate] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CertificateError(.unreadable, "cannot read the file: \(error)", path: path)
        }
        do {
            return try parse(pemOrDER: [UInt8](data))
        } catch {
            throw error.with(path: path)
        }
    }

    /// The file name extensions ``certificates(inDirectory:)`` reads.
    public static let fileExtensions: Set<String> = ["cer", "der", "crt", "pem"]

    /// Every certificate in the `.cer`, `.der`, `.crt` and `.pem` files of a directory (not
    /// its subdirectories), in file-name order: the Linux counterpart of AFNetworking's
    /// `certificatesInBundle:`. PEM files with no `CERTIFICATE` block (private keys) are
    /// skipped; any other file that does not parse is an error naming it.
    public static func certificates(inDirectory path: String) throws(CertificateError) -> [Certificate] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw CertificateError(.unreadable, "cannot list the directory: \(error)", path: path)
        }
        var out: [Certificate] = []
        for name in names.sorted() {
            guard let dot = name.lastIndex(of: "."),
                fileExtensions.contains(name[name.index(after: dot)...].lowercased())
            else { continue }
            let file = path.hasSuffix("/") ? path + name : path + "/" + name
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            do {
                out += try load(contentsOf: file)
            } catch  where error.kind == .noCertificate {
                // A PEM file of keys or parameters next to the certificates: not ours to read.
                continue
            }
        }
        return out
    }

    /// The SHA-256 of the SubjectPublicKeyInfo as a pin, `sha256/BASE64` (the form of curl's
    /// `--pinnedpubkey`, OkHttp's CertificatePinner and HPKP).
    public var publicKeySHA256Pin: String { PublicKeyPin(certificate: self).description }

    /// The SHA-256 of the whole DER certificate, as colon-separated upper-case hex.
    public var sha256Fingerprint: String {
        sha256(self.derBytes).map { hex2($0).uppercased() }.joined(separator: ":")
    }

    /// True when the certificate names itself as its issuer and its own key verifies its
    /// signature (whether or not it is a CA).
    public var isSelfSigned: Bool {
        let x = self.x509.pointer
        let result =
            X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)) == 0
            && X509_verify(x, X509_get0_pubkey(x)) == 1
        ERR_clear_error()
        return result
    }

    public var description: String {
        "Certificate(\(self.subjectSummary), issuer: \(self.issuer), valid \(self.notValidBefore) – \(self.notValidAfter))"
    }

    public static func == (a: Certificate, b: Certificate) -> Bool { a.derBytes == b.derBytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.derBytes) }
}

// MARK: - PEM

/// Splits PEM text into blocks and decodes the certificate blocks. RFC 7468's "lax" reading:
/// whitespace anywhere in the base64, text before and between blocks is ignored.
enum PEMReader {
    private static let begin = Array("-----BEGIN ".utf8)
    private static let end = Array("-----END ".utf8)
    private static let dashes = Array("-----".utf8)
    private static let certificateLabels: Set<String> = ["CERTIFICATE", "X509 CERTIFICATE"]

    static func containsBeginLine(_ bytes: [UInt8]) -> Bool { find(begin, in: bytes, from: 0) != nil }

    static func certificates(in bytes: [UInt8]) throws(CertificateError) -> [Certificate] {
        var out: [Certificate] = []
        var otherLabels: [String] = []
        var position = 0
        var blockIndex = 0
        while let start = find(begin, in: bytes, from: position) {
            blockIndex += 1
            let labelStart = start + begin.count
            guard let labelEnd = find(dashes, in: bytes, from: labelStart), !bytes[labelStart..<labelEnd].contains(0x0A)
            else {
                throw CertificateError(
                    .invalidPEM,
                    "PEM block #\(blockIndex): the BEGIN line does not end with '-----'"
                )
            }
            let label = String(decoding: bytes[labelStart..<labelEnd], as: UTF8.self)
            let bodyStart = labelEnd + dashes.count
            guard let endLine = find(end, in: bytes, from: bodyStart) else {
                throw CertificateError(.invalidPEM, "PEM block #\(blockIndex) ('\(label)') has no END line")
            }
            let endLabelStart = endLine + end.count
            guard let endLabelEnd = find(dashes, in: bytes, from: endLabelStart),
                !bytes[endLabelStart..<endLabelEnd].contains(0x0A)
            else {
                throw CertificateError(
                    .invalidPEM,
                    "PEM block #\(blockIndex) ('\(label)'): the END line does not end with '-----'"
                )
            }
            let endLabel = String(decoding: bytes[endLabelStart..<endLabelEnd], as: UTF8.self)
            guard endLabel == label else {
                throw CertificateError(
                    .invalidPEM,
                    "PEM block #\(blockIndex) begins as '\(label)' but ends as '\(endLabel)'"
                )
            }
            position = endLabelEnd + dashes.count
            guard certificateLabels.contains(label) else {
                otherLabels.append(label)
                continue
            }
            let body = bytes[bodyStart..<endLine]
            if body.contains(UInt8(ascii: ":")) {
                throw CertificateError(
                    .invalidPEM,
                    "PEM certificate block #\(blockIndex) has header lines (encrypted or not a plain certificate)"
                )
            }
            guard let der = TrustBase64.decode(body, ignoringWhitespace: true) else {
                throw CertificateError(.invalidPEM, "PEM certificate block #\(blockIndex) is not valid base64")
            }
            do {
                out.append(try Certificate(derEncoded: der))
            } catch {
                throw CertificateError(error.kind, "PEM certificate block #\(blockIndex): \(error.message)")
            }
        }
        if out.isEmpty {
            let found =
                otherLabels.isEmpty
                ? "no complete block" : "only " + otherLabels.map { "'\($0)'" }.joined(separator: ", ")
            throw CertificateError(.noCertificate, "PEM data holds no CERTIFICATE block (\(found))")
        }
        return out
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard needle.count <= haystack.count, from <= haystack.count - needle.count else { return nil }
        var i = from
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == needle[0] {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

// MARK: - base64 (strict: canonical padding, no stray characters)

enum TrustBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        return t
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [
                alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)],
                alphabet[Int(n & 63)],
            ]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [
                alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "="),
            ]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64; nil for any character outside the alphabet, a length that is not
    /// a multiple of 4, padding anywhere but the end, or non-zero bits under the padding.
    static func decode<C: Collection>(_ input: C, ignoringWhitespace: Bool) -> [UInt8]? where C.Element == UInt8 {
        var symbols: [UInt8] = []
        symbols.reserveCapacity(input.count)
        for c in input {
            if ignoringWhitespace && (c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D) { continue }
            symbols.append(c)
        }
        guard symbols.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(symbols.count / 4 * 3)
        var i = 0
        while i < symbols.count {
            let isLast = i + 4 == symbols.count
            var values: [UInt8] = [0, 0, 0, 0]
            var padding = 0
            for k in 0..<4 {
                let c = symbols[i + k]
                if c == UInt8(ascii: "=") {
                    // Padding only at the very end, only in the last two positions, contiguous.
                    guard isLast, k >= 2 else { return nil }
                    padding += 1
                    continue
                }
                guard padding == 0 else { return nil }
                let v = table[Int(c)]
                guard v != 0xFF else { return nil }
                values[k] = v
            }
            let n = UInt32(values[0]) << 18 | UInt32(values[1]) << 12 | UInt32(values[2]) << 6 | UInt32(values[3])
            out.append(UInt8(n >> 16 & 0xFF))
            if padding < 2 { out.append(UInt8(n >> 8 & 0xFF)) } else if n & 0xFFFF != 0 { return nil }
            if padding < 1 { out.append(UInt8(n & 0xFF)) } else if n & 0xFF != 0 { return nil }
            i += 4
        }
        return out
    }
}

// MARK: - OpenSSL helpers

/// Drains this thread's OpenSSL error queue into one line (the queue is per thread and
/// must not leak into the next caller's diagnosis).
func openSSLErrorText(fallback: String) -> String {
    var parts: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        if let reason = ERR_reason_error_string(code) {
            parts.append(String(cString: reason))
        } else {
            parts.append("OpenSSL error 0x\(String(code, radix: 16))")
        }
    }
    return parts.isEmpty ? fallback : parts.joined(separator: "; ")
}

func hex2(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
}

/// The 32-byte SHA-256 digest of `bytes` through OpenSSL (certificate fingerprints, key pins).
func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    bytes.withUnsafeBytes { input in
        digest.withUnsafeMutableBufferPointer { _ = CHawser_sha256(input.baseAddress, input.count, $0.baseAddress) }
    }
    return digest
}

/// A name as RFC 2253 text, UTF-8 kept as is (not escaped to \XX).
private func distinguishedName(_ name: OpaquePointer?) -> String {
    guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
    defer { BIO_free(bio) }
    guard X509_NAME_print_ex(bio, name, 0, CHAWSER_TRUST_XN_FLAG_RFC2253_UTF8) >= 0 else { return "" }
    var data: UnsafeMutablePointer<CChar>? = nil
    let length = CHawser_BIO_get_mem_data(bio, &data)
    guard let data, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
}

private func commonName(_ name: OpaquePointer?) -> String? {
    guard let name else { return nil }
    let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
    guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else {
        return nil
    }
    var utf8: UnsafeMutablePointer<UInt8>? = nil
    let length = ASN1_STRING_to_UTF8(&utf8, data)
    guard length >= 0, let utf8 else { return nil }
    defer { CRYPTO_free(utf8, #fileID, #line) }
    return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
}

private func alternativeNames(_ x: OpaquePointer) -> [(name: String, isIPAddress: Bool)] {
    guard let raw = X509_get_ext_d2i(x, NID_subject_alt_name, nil, nil) else { return [] }
    let names = OpaquePointer(raw)
    defer { GENERAL_NAMES_free(names) }
    var out: [(name: String, isIPAddress: Bool)] = []
    for i in 0..<CHawserTrust_sk_GENERAL_NAME_num(names) {
        guard let name = CHawserTrust_sk_GENERAL_NAME_value(names, i) else { continue }
        var type: Int32 = 0
        guard let string = CHawserTrust_GENERAL_NAME_string(name, &type) else { continue }
        let length = Int(ASN1_STRING_length(string))
        guard let data = ASN1_STRING_get0_data(string), length >= 0 else { continue }
        let bytes = UnsafeBufferPointer(start: data, count: length)
        switch type {
        case GEN_DNS:
            out.append((String(decoding: bytes, as: UTF8.self), false))
        case GEN_IPADD:
            if let text = ipText(Array(bytes)) { out.append((text, true)) }
        default:
            continue
        }
    }
    return out
}

private func ipText(_ bytes: [UInt8]) -> String? {
    if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
    guard bytes.count == 16 else { return nil }
    var buffer = [CChar](repeating: 0, count: 64)
    let ok = bytes.withUnsafeBytes { inet_ntop(AF_INET6, $0.baseAddress, &buffer, 64) } != nil
    guard ok else { return nil }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func asn1Date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
    guard let time else { return nil }
    var parts = tm()
    guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
    let seconds = timegm(&parts)
    return Date(timeIntervalSince1970: TimeInterval(seconds))
}

private func publicKeyInfo(_ x: OpaquePointer) -> [UInt8]? {
    guard let key = X509_get_X509_PUBKEY(x) else { return nil }
    let length = i2d_X509_PUBKEY(key, nil)
    guard length > 0 else { return nil }
    var out = [UInt8](repeating: 0, count: Int(length))
    let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor = buffer.baseAddress
        return i2d_X509_PUBKEY(key, &cursor)
    }
    return written == length ? out : nil
}
