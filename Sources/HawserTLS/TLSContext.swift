// An OpenSSL SSL_CTX built from a TLSConfiguration, plus the per-origin session cache.
// One per Session (client) or per test server; loop-confined apart from creation.
import CHawser

/// OpenSSL's error queue as one line ("error:0A00010B:SSL routines::wrong version number"),
/// emptying it. Always drain after a failed call: the queue is per thread and would leak into
/// the next connection's diagnosis.
func drainOpenSSLErrors() -> (message: String, reasons: [Int32]) {
    var parts: [String] = []
    var reasons: [Int32] = []
    while true {
        let e = ERR_get_error()
        if e == 0 { break }
        reasons.append(CHawser_ERR_GET_REASON(e))
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(e, &buf, buf.count)
        parts.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return (parts.joined(separator: "; "), reasons)
}

/// The shared TLS state of one client session or server: an SSL_CTX and, for clients, the
/// resumable sessions per origin.
package final class TLSContext: @unchecked Sendable {
    package let ctx: OpaquePointer
    package let isServer: Bool
    private let resumption: Bool
    /// origin ("host:port") → resumable SSL_SESSIONs (owned references), newest last, each
    /// offered to one connection only: TLS 1.3 tickets are single-use, and a server with a
    /// session cache refuses a second use. Loop-confined.
    private var sessions: [String: [OpaquePointer]] = [:]
    private static let sessionsPerOrigin = 8
    /// Server: the OCSP response stapled to every handshake whose client asks for one.
    private let staple: StapleBox?

    /// A client context for `configuration`.
    package init(client configuration: TLSConfiguration) throws(TLSError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else {
            throw TLSError(.setupFailed, "cannot create a TLS context: \(drainOpenSSLErrors().message)")
        }
        self.ctx = ctx
        self.isServer = false
        self.resumption = configuration.sessionResumption
        self.staple = nil
        do {
            try Self.applyCommon(
                ctx,
                minimum: configuration.minimumVersion,
                maximum: configuration.maximumVersion,
                cipherList: configuration.cipherList
            )
            // Peer verification is Hawser's own (ServerTrust + the policy, after the handshake),
            // so OpenSSL must not abort the handshake on its own verdict.
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
            // ALPN: HTTP/1.1 only.
            let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
            _ = SSL_CTX_set_alpn_protos(ctx, alpn, UInt32(alpn.count))
            _ = CHawser_SSL_CTX_set_session_cache_mode(
                ctx,
                Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE)
            )
            // Every session the server hands out (TLS 1.3 sends several single-use tickets per
            // connection) is offered to the stream that received it.
            SSL_CTX_sess_set_new_cb(ctx) { ssl, session in
                guard let ssl, let session, let raw = SSL_get_ex_data(ssl, 0) else { return 0 }
                let stream = Unmanaged<TLSStream>.fromOpaque(raw).takeUnretainedValue()
                return stream.received(session: session) ? 1 : 0
            }
            if !configuration.sessionResumption {
                _ = CHawser_SSL_CTX_set_options(ctx, CHawser_SSL_OP_NO_TICKET())
            }
            if let identity = configuration.clientIdentity {
                try Self.useIdentity(identity, ctx: ctx)
            }
        }
        // (On a throw above, deinit frees the context: self is fully initialized by then.)
    }

    /// A server context presenting `certificateChainPath` (leaf first, PEM) and `privateKeyPath`.
    /// `clientCAPath` (PEM) makes the server require a client certificate issued by it.
    package init(
        serverCertificateChainPath: String,
        privateKeyPath: String,
        minimum: TLSVersion = .tls1_2,
        maximum: TLSVersion? = nil,
        clientCAPath: String? = nil,
        stapledOCSPResponse: [UInt8]? = nil
    ) throws(TLSError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw TLSError(.setupFailed, "cannot create a TLS context: \(drainOpenSSLErrors().message)")
        }
        self.ctx = ctx
        self.isServer = true
        self.resumption = true
        self.staple = stapledOCSPResponse.map(StapleBox.init)
        do {
            try Self.applyCommon(ctx, minimum: minimum, maximum: maximum, cipherList: nil)
            // The test server presents weak and broken certificates on purpose (RSA-1024…):
            // the client, not the server, must be the one to refuse them.
            SSL_CTX_set_security_level(ctx, 0)
            try Self.useIdentity(
                .pem(certificateChainPath: serverCertificateChainPath, privateKeyPath: privateKeyPath),
                ctx: ctx
            )
            let sid = Array("hawser-test-server".utf8)
            _ = CHawser_SSL_CTX_set_session_id_context(ctx, sid, UInt32(sid.count))
            if let clientCAPath {
                guard SSL_CTX_load_verify_locations(ctx, clientCAPath, nil) == 1 else {
                    throw TLSError(
                        .setupFailed,
                        "cannot load client CA \(clientCAPath): \(drainOpenSSLErrors().message)"
                    )
                }
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            }
            if let staple = self.staple {
                // The box lives as long as the context (a stored property).
                let arg = Unmanaged.passUnretained(staple).toOpaque()
                let set = CHawserTrust_SSL_CTX_set_status_cb(
                    ctx,
                    { ssl, arg in
                        guard let ssl, let arg else { return CHAWSER_TRUST_SSL_TLSEXT_ERR_NOACK }
                        let box = Unmanaged<StapleBox>.fromOpaque(arg).takeUnretainedValue()
                        let ok = box.der.withUnsafeBufferPointer {
                            CHawserTrust_SSL_set_ocsp_response(ssl, $0.baseAddress, $0.count)
                        }
                        return ok == 1 ? CHAWSER_TRUST_SSL_TLSEXT_ERR_OK : CHAWSER_TRUST_SSL_TLSEXT_ERR_NOACK
                    },
                    arg
                )
                guard set == 1 else {
                    throw TLSError(
                        .setupFailed,
                        "cannot install the OCSP stapling callback: \(drainOpenSSLErrors().message)"
                    )
                }
            }
        }
    }

    deinit {
        for (_, list) in self.sessions { for s in list { SSL_SESSION_free(s) } }
        SSL_CTX_free(self.ctx)
    }

    private static func applyCommon(
        _ ctx: OpaquePointer,
        minimum: TLSVersion,
        maximum: TLSVersion?,
        cipherList: String?
    ) throws(TLSError) {
        // A moving write buffer: Swift arrays may live elsewhere when a write is retried.
        _ = CHawser_SSL_CTX_set_mode(
            ctx,
            Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS)
        )
        // One read(2) takes whatever the socket holds instead of a record header and then its
        // body (two per record). Records read ahead are visible through SSL_has_pending, which
        // the connection's read loop checks, since epoll can no longer see them.
        CHawser_SSL_CTX_set_read_ahead(ctx, 1)
        _ = CHawser_SSL_CTX_set_options(ctx, CHawser_SSL_OP_NO_RENEGOTIATION())
        if minimum < .tls1_2 {
            // Debian's openssl.cnf sets security level 2, which refuses TLS 1.0/1.1 outright;
            // a configuration that asks for them gets level 0 for this context only.
            SSL_CTX_set_security_level(ctx, 0)
        }
        guard CHawser_SSL_CTX_set_min_proto_version(ctx, Int32(minimum.rawValue)) == 1 else {
            throw TLSError(.setupFailed, "cannot set the TLS floor to \(minimum): \(drainOpenSSLErrors().message)")
        }
        if let maximum {
            guard CHawser_SSL_CTX_set_max_proto_version(ctx, Int32(maximum.rawValue)) == 1 else {
                throw TLSError(
                    .setupFailed,
                    "cannot set the TLS ceiling to \(maximum): \(drainOpenSSLErrors().message)"
                )
            }
        }
        if let cipherList, SSL_CTX_set_cipher_list(ctx, cipherList) != 1 {
            throw TLSError(.setupFailed, "invalid cipher list '\(cipherList)': \(drainOpenSSLErrors().message)")
        }
    }

    private static func useIdentity(_ identity: TLSClientIdentity, ctx: OpaquePointer) throws(TLSError) {
        switch identity {
        case .pem(let chain, let key, let password):
            guard SSL_CTX_use_certificate_chain_file(ctx, chain) == 1 else {
                throw TLSError(
                    .clientIdentity,
                    "cannot load the certificate chain \(chain): \(drainOpenSSLErrors().message)"
                )
            }
            let ok: Int32
            if let password {
                let pkey = Self.readKey(path: key, password: password)
                ok = pkey.map { SSL_CTX_use_PrivateKey(ctx, $0) } ?? 0
                if let pkey { EVP_PKEY_free(pkey) }
            } else {
                ok = SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM)
            }
            guard ok == 1 else {
                throw TLSError(.clientIdentity, "cannot load the private key \(key): \(drainOpenSSLErrors().message)")
            }
        case .pkcs12(let path, let password):
            guard let bio = BIO_new_file(path, "rb") else {
                throw TLSError(.clientIdentity, "cannot open the PKCS#12 file \(path): \(drainOpenSSLErrors().message)")
            }
            defer { BIO_free(bio) }
            guard let p12 = d2i_PKCS12_bio(bio, nil) else {
                throw TLSError(.clientIdentity, "\(path) is not a PKCS#12 bundle: \(drainOpenSSLErrors().message)")
            }
            defer { PKCS12_free(p12) }
            var pkey: OpaquePointer? = nil
            var cert: OpaquePointer? = nil
            var ca: OpaquePointer? = nil
            guard PKCS12_parse(p12, password, &pkey, &cert, &ca) == 1, let pkey, let cert else {
                throw TLSError(
                    .clientIdentity,
                    "cannot open the PKCS#12 bundle \(path) (wrong password?): \(drainOpenSSLErrors().message)"
                )
            }
            defer {
                EVP_PKEY_free(pkey)
                X509_free(cert)
            }
            guard SSL_CTX_use_certificate(ctx, cert) == 1, SSL_CTX_use_PrivateKey(ctx, pkey) == 1 else {
                if let ca { CHawser_sk_X509_pop_free(ca) }
                throw TLSError(
                    .clientIdentity,
                    "the PKCS#12 identity in \(path) was refused: \(drainOpenSSLErrors().message)"
                )
            }
            if let ca {
                for i in 0..<CHawser_sk_X509_num(ca) {
                    if let x = CHawser_sk_X509_value(ca, i), X509_up_ref(x) == 1 {
                        // The context takes ownership of the extra reference.
                        if CHawser_SSL_CTX_add_extra_chain_cert(ctx, x) != 1 { X509_free(x) }
                    }
                }
                CHawser_sk_X509_pop_free(ca)
            }
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw TLSError(
                .clientIdentity,
                "the private key does not match the certificate: \(drainOpenSSLErrors().message)"
            )
        }
    }

    /// Reads an encrypted PEM key (nil on failure; the caller reports OpenSSL's error).
    private static func readKey(path: String, password: String) -> OpaquePointer? {
        guard let bio = BIO_new_file(path, "rb") else { return nil }
        defer { BIO_free(bio) }
        var pass = Array(password.utf8CString)
        return pass.withUnsafeMutableBytes { p in
            PEM_read_bio_PrivateKey(bio, nil, nil, p.baseAddress)
        }
    }

    // MARK: - Session cache (client)

    /// The newest session stored for `origin` (an owned reference the caller frees), or nil.
    /// Each is handed out once while others remain; the last one is shared rather than leave a
    /// connection with nothing to offer (a server that refuses a reused ticket just does a full
    /// handshake).
    func takeSession(for origin: String) -> OpaquePointer? {
        guard self.resumption, var list = self.sessions[origin], let s = list.last else { return nil }
        if list.count > 1 {
            list.removeLast()
            self.sessions[origin] = list
            return s
        }
        return SSL_SESSION_up_ref(s) == 1 ? s : nil
    }

    /// Stores `session` (an owned reference) for `origin`; the oldest goes past the limit.
    func store(session: OpaquePointer, for origin: String) {
        guard self.resumption else {
            SSL_SESSION_free(session)
            return
        }
        var list = self.sessions[origin] ?? []
        list.append(session)
        if list.count > Self.sessionsPerOrigin { SSL_SESSION_free(list.removeFirst()) }
        self.sessions[origin] = list
    }

    /// Forgets `origin`'s sessions (after a failed or refused handshake).
    package func removeSession(for origin: String) {
        if let list = self.sessions.removeValue(forKey: origin) { for s in list { SSL_SESSION_free(s) } }
    }

}

/// The DER OCSP response a server context staples.
private final class StapleBox {
    let der: [UInt8]
    init(_ der: [UInt8]) { self.der = der }
}
