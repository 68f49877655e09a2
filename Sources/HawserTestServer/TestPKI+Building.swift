// The test PKI's building blocks: owned keys, a certificate builder over OpenSSL's X509 API,
// PEM through a memory BIO, and the writer that puts certificates and keys into the PKI's
// temporary directory. Never used by the library.
import CHawser
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// An owned EVP_PKEY.
final class Key {
    let pointer: OpaquePointer
    private init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(self.pointer) }

    static func rsa(_ bits: UInt32) throws(TestPKIError) -> Key {
        guard let k = CHawserTrust_RSA_generate(bits) else { throw TestPKIError("RSA-\(bits) key generation failed") }
        return Key(k)
    }

    static func ec() throws(TestPKIError) -> Key {
        guard let k = CHawserTrust_EC_generate_P256() else { throw TestPKIError("EC P-256 key generation failed") }
        return Key(k)
    }

    /// PKCS#8 PEM.
    func pem() throws(TestPKIError) -> [UInt8] {
        try withMemoryBIO { bio in PEM_write_bio_PrivateKey(bio, self.pointer, nil, nil, 0, nil, nil) == 1 }
    }
}

enum CertificateBuilder {
    enum Kind { case ca, server, client }

    private nonisolated(unsafe) static var serial: Int = 0x4857_0000 + Int(getpid() & 0xFFFF) * 256

    /// A signed X509 (owned by the caller). `issuer` nil: self-signed with `key`.
    static func make(
        subject: String,
        key: Key,
        issuer: (OpaquePointer, Key)?,
        from: Int,
        to: Int,
        kind: Kind,
        subjectAltNames: String? = nil
    ) throws(TestPKIError) -> OpaquePointer {
        guard let x = X509_new() else { throw TestPKIError("X509_new failed") }
        var ok = true
        serial += 1
        ok = ok && X509_set_version(x, 2) == 1
        ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(x), serial) == 1
        ok = ok && X509_time_adj_ex(X509_getm_notBefore(x), 0, from, nil) != nil
        ok = ok && X509_time_adj_ex(X509_getm_notAfter(x), 0, to, nil) != nil
        ok = ok && X509_set_pubkey(x, key.pointer) == 1
        if let name = X509_NAME_new() {
            ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "Hawser Tests", -1, -1, 0) == 1
            ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, subject, -1, -1, 0) == 1
            ok = ok && X509_set_subject_name(x, name) == 1
            if issuer == nil { ok = ok && X509_set_issuer_name(x, name) == 1 }
            X509_NAME_free(name)
        } else {
            ok = false
        }
        if let (issuerX, _) = issuer { ok = ok && X509_set_issuer_name(x, X509_get_subject_name(issuerX)) == 1 }
        guard ok else {
            X509_free(x)
            throw TestPKIError("cannot fill in certificate '\(subject)'")
        }

        var extensions: [(Int32, String)] = []
        switch kind {
        case .ca:
            extensions = [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
        case .server:
            let usage =
                EVP_PKEY_get_base_id(key.pointer) == EVP_PKEY_RSA
                ? "critical,digitalSignature,keyEncipherment" : "critical,digitalSignature"
            extensions = [
                (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, usage), (NID_ext_key_usage, "serverAuth"),
            ]
        case .client:
            extensions = [
                (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "clientAuth"),
            ]
        }
        if let subjectAltNames { extensions.append((NID_subject_alt_name, subjectAltNames)) }
        extensions.append((NID_subject_key_identifier, "hash"))
        if issuer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.0 ?? x, x, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                X509_free(x)
                throw TestPKIError("cannot make extension \(nid)=\(value) for '\(subject)'")
            }
            let added = X509_add_ext(x, ext, -1) == 1
            X509_EXTENSION_free(ext)
            guard added else {
                X509_free(x)
                throw TestPKIError("cannot add extension \(nid) to '\(subject)'")
            }
        }
        guard X509_sign(x, (issuer?.1 ?? key).pointer, EVP_sha256()) > 0 else {
            X509_free(x)
            throw TestPKIError("cannot sign '\(subject)'")
        }
        ERR_clear_error()
        return x
    }
}

func withMemoryBIO(_ body: (OpaquePointer) -> Bool) throws(TestPKIError) -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { throw TestPKIError("BIO_new failed") }
    defer { BIO_free(bio) }
    guard body(bio) else { throw TestPKIError("PEM encoding failed") }
    var data: UnsafeMutablePointer<CChar>? = nil
    let length = CHawser_BIO_get_mem_data(bio, &data)
    guard let data, length > 0 else { throw TestPKIError("PEM encoding produced nothing") }
    return Array(UnsafeRawBufferPointer(start: data, count: Int(length)))
}

struct FileWriter {
    let directory: String

    func certificate(_ x: OpaquePointer) throws(TestPKIError) -> Certificate {
        let length = i2d_X509(x, nil)
        guard length > 0 else { throw TestPKIError("cannot encode a certificate") }
        var der = [UInt8](repeating: 0, count: Int(length))
        _ = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(x, &cursor)
        }
        do {
            return try Certificate(derEncoded: der)
        } catch {
            throw TestPKIError("generated certificate does not parse: \(error)")
        }
    }

    func write(_ name: String, pem certificates: [OpaquePointer]) throws(TestPKIError) -> String {
        var bytes: [UInt8] = []
        for x in certificates {
            bytes += try withMemoryBIO { bio in PEM_write_bio_X509(bio, x) == 1 }
        }
        return try self.write(name, bytes: bytes)
    }

    func write(_ name: String, bytes: [UInt8]) throws(TestPKIError) -> String {
        let path = self.directory + "/" + name
        guard let file = fopen(path, "wb") else { throw TestPKIError("cannot create \(path)") }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        let closed = fclose(file) == 0
        guard written == bytes.count, closed else { throw TestPKIError("cannot write \(path)") }
        cleanupFiles.append(path)
        return path
    }
}
