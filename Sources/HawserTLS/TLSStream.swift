// One TLS connection over a non-blocking socket (OpenSSL with a socket BIO), or inside another
// TLS connection's application data (TLS to an https proxy, then the origin's TLS through its
// CONNECT tunnel: a BIO whose reads and writes are the outer stream's SSL_read and SSL_write).
// The event loop drives it: every call may answer "want read" or "want write" — of the socket,
// whichever layer needed it — and the caller sets its epoll interest accordingly. Loop-confined.
import CHawser
import HawserPosix

package final class TLSStream {
    package enum IOStatus: Equatable {
        /// `n` plaintext bytes were read or written.
        case bytes(Int)
        /// Wait until the socket is readable, then call again.
        case wantRead
        /// Wait until the socket is writable, then call again.
        case wantWrite
        /// The peer closed: `clean` when it sent close_notify first (a truncation attack or a
        /// crashed server looks like an unclean close).
        case closed(clean: Bool)
        /// A fatal TLS or socket error, described, with OpenSSL's reason codes.
        case failed(String, reasons: [Int32] = [])
    }

    package enum HandshakeStatus: Equatable {
        case done
        case wantRead
        case wantWrite
        case failed(String, reasons: [Int32])
    }

    let ssl: OpaquePointer
    let context: TLSContext
    package let origin: String
    /// The stream this one runs inside (the TLS connection to an https proxy), or nil when this
    /// one runs on the socket. Kept so it outlives this stream's SSL, whose BIO uses it.
    package let transport: TLSStream?
    /// A session received before the chain was trusted (TLS 1.2), kept until then.
    private var pendingSession: OpaquePointer?
    private var shutDown = false
    /// The peer's chain was accepted (or this is a server): only then are its sessions kept, so
    /// a resumption can only ever continue a session that was trusted.
    private(set) var isTrusted = false

    /// A client stream for `fd`, sending SNI `serverName` (nil for an IP literal, as RFC 6066 says)
    /// and offering the cached session for `origin` ("host:port").
    package convenience init(
        client context: TLSContext,
        fd: Int32,
        serverName: String?,
        origin: String
    ) throws(TLSError) {
        try self.init(client: context, transport: nil, serverName: serverName, origin: origin) {
            (ssl: OpaquePointer) throws(TLSError) in
            guard SSL_set_fd(ssl, fd) == 1 else {
                throw TLSError(.setupFailed, "cannot attach TLS to the socket: \(drainOpenSSLErrors().message)")
            }
        }
    }

    /// A client stream whose records travel inside `transport`'s application data (the origin's
    /// TLS through a tunnel that is itself TLS): reads and writes go through `transport`, and a
    /// "want read/write" of either layer is reported as this stream's.
    package convenience init(
        client context: TLSContext,
        over transport: TLSStream,
        serverName: String?,
        origin: String
    ) throws(TLSError) {
        try self.init(client: context, transport: transport, serverName: serverName, origin: origin) {
            (ssl: OpaquePointer) throws(TLSError) in
            guard let method = tunnelBIOMethod, let bio = BIO_new(method) else {
                throw TLSError(.setupFailed, "cannot create the TLS-in-TLS transport: \(drainOpenSSLErrors().message)")
            }
            BIO_set_data(bio, UnsafeMutableRawPointer(transport.ssl))
            BIO_set_init(bio, 1)
            SSL_set_bio(ssl, bio, bio)  // the SSL owns the BIO (one reference for both directions)
        }
    }

    private init(
        client context: TLSContext,
        transport: TLSStream?,
        serverName: String?,
        origin: String,
        attach: (OpaquePointer) throws(TLSError) -> Void
    ) throws(TLSError) {
        guard let ssl = SSL_new(context.ctx) else {
            throw TLSError(.setupFailed, "cannot create a TLS connection: \(drainOpenSSLErrors().message)")
        }
        self.ssl = ssl
        self.context = context
        self.origin = origin
        self.transport = transport
        do {
            try attach(ssl)
        } catch {
            SSL_free(ssl)
            throw error
        }
        if let serverName {
            _ = CHawser_SSL_set_tlsext_host_name(ssl, serverName)
        }
        if let session = context.takeSession(for: origin) {
            _ = SSL_set_session(ssl, session)
            SSL_SESSION_free(session)  // SSL_set_session took its own reference
        }
        SSL_set_connect_state(ssl)
        // For the new-session callback (unretained: the stream owns the SSL and outlives it).
        _ = SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A server stream for an accepted `fd`.
    package init(server context: TLSContext, fd: Int32) throws(TLSError) {
        guard let ssl = SSL_new(context.ctx) else {
            throw TLSError(.setupFailed, "cannot create a TLS connection: \(drainOpenSSLErrors().message)")
        }
        self.ssl = ssl
        self.context = context
        self.origin = ""
        self.transport = nil
        guard SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            throw TLSError(.setupFailed, "cannot attach TLS to the socket: \(drainOpenSSLErrors().message)")
        }
        SSL_set_accept_state(ssl)
    }

    deinit {
        _ = SSL_set_ex_data(self.ssl, 0, nil)
        SSL_free(self.ssl)
        if let p = self.pendingSession { SSL_SESSION_free(p) }
    }

    /// A session from the server (OpenSSL's new-session callback). Returns whether this stream
    /// took the reference. Before the chain is trusted it is held back (one, the newest).
    func received(session: OpaquePointer) -> Bool {
        guard SSL_SESSION_is_resumable(session) == 1 else { return false }
        if self.isTrusted {
            self.context.store(session: session, for: self.origin)
        } else {
            if let old = self.pendingSession { SSL_SESSION_free(old) }
            self.pendingSession = session
        }
        return true
    }

    // MARK: - Handshake

    package func handshake() -> HandshakeStatus {
        ERR_clear_error()
        let r = SSL_do_handshake(self.ssl)
        if r == 1 { return .done }
        switch SSL_get_error(self.ssl, r) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_SYSCALL:
            let (message, reasons) = drainOpenSSLErrors()
            let errno = Glibc.errno
            if !message.isEmpty { return .failed(message, reasons: reasons) }
            return .failed(
                errno == 0
                    ? "the peer closed the connection during the TLS handshake"
                    : "socket error during the TLS handshake: \(IOError(errnoCode: errno, function: "SSL_do_handshake"))",
                reasons: reasons
            )
        default:
            let (message, reasons) = drainOpenSSLErrors()
            return .failed(message.isEmpty ? "the TLS handshake failed" : message, reasons: reasons)
        }
    }

    // MARK: - Data

    package func read(into buffer: UnsafeMutableRawBufferPointer) -> IOStatus {
        ERR_clear_error()
        var n = 0
        let r = SSL_read_ex(self.ssl, buffer.baseAddress, buffer.count, &n)
        if r == 1 {
            // TLS 1.3 delivers session tickets after the handshake, so the session becomes
            // resumable only once application data flows.
            return .bytes(n)
        }
        return self.status(after: Int32(r), operation: "read")
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> IOStatus {
        if bytes.isEmpty { return .bytes(0) }
        ERR_clear_error()
        var n = 0
        let r = SSL_write_ex(self.ssl, bytes.baseAddress, bytes.count, &n)
        if r == 1 { return .bytes(n) }
        return self.status(after: Int32(r), operation: "write")
    }

    /// After a failed write: reads what the peer sent before it went away, to find a TLS alert
    /// that explains it (TLS 1.3 servers refuse a client certificate only after the client's
    /// handshake is done). Returns the alert's error, if any.
    package func pendingAlert() -> (message: String, reasons: [Int32])? {
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<4 {
            switch scratch.withUnsafeMutableBytes({ self.read(into: $0) }) {
            case .failed(let message, let reasons): return (message, reasons)
            case .bytes: continue
            default: return nil
            }
        }
        return nil
    }

    /// Whether OpenSSL's reasons say the server wanted a client certificate.
    package static func isClientCertificateRefusal(_ reasons: [Int32]) -> Bool {
        reasons.contains(Int32(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED))
            || reasons.contains(Int32(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE))

    }

    /// Whether OpenSSL holds bytes the socket no longer shows: decrypted plaintext, or records
    /// read ahead and not yet processed (SSL_has_pending covers both) — in this stream or in the
    /// one it runs inside.
    package var hasBufferedPlaintext: Bool {
        if SSL_has_pending(self.ssl) == 1 { return true }
        guard let transport = self.transport else { return false }
        return transport.hasBufferedPlaintext
    }

    private func status(after r: Int32, operation: String) -> IOStatus {
        switch SSL_get_error(self.ssl, r) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed(clean: true)
        case SSL_ERROR_SYSCALL:
            let errno = Glibc.errno
            let (message, reasons) = drainOpenSSLErrors()
            if !message.isEmpty { return .failed(message, reasons: reasons) }
            if errno == 0 || errno == ECONNRESET && operation == "read" { return .closed(clean: false) }
            return .failed("TLS \(operation) failed: \(IOError(errnoCode: errno, function: "SSL_\(operation)"))")
        case SSL_ERROR_SSL:
            let (message, reasons) = drainOpenSSLErrors()
            // OpenSSL 3 reports an EOF without close_notify as an error of its own.
            if reasons.contains(Int32(SSL_R_UNEXPECTED_EOF_WHILE_READING)) { return .closed(clean: false) }
            return .failed(message.isEmpty ? "TLS \(operation) failed" : message, reasons: reasons)
        default:
            let (message, reasons) = drainOpenSSLErrors()
            return .failed(message.isEmpty ? "TLS \(operation) failed" : message, reasons: reasons)
        }
    }

    /// Sends close_notify once, without waiting for the peer's (RFC 8446 §6.1 allows a
    /// half-close; the socket is closed right after).
    package func shutdown() {
        guard !self.shutDown else { return }
        self.shutDown = true
        ERR_clear_error()
        _ = SSL_shutdown(self.ssl)
        _ = drainOpenSSLErrors()
        // The inner close_notify first (it travels inside the outer stream), then the outer's.
        self.transport?.shutdown()
    }

    /// The chain was accepted: from now on the session may be kept for resumption (a TLS 1.2
    /// session now; TLS 1.3 tickets as they arrive with the first reads).
    package func markTrusted() {
        self.isTrusted = true
        if let p = self.pendingSession {
            self.pendingSession = nil
            self.context.store(session: p, for: self.origin)
        }
    }

    /// Marks the stream as not to be shut down gracefully (it is being reset).
    package func abandon() {
        self.shutDown = true
        SSL_set_quiet_shutdown(self.ssl, 1)
        self.transport?.abandon()
    }

    /// Asks the server to staple an OCSP response (status_request); before the handshake.
    package func requestStapledOCSP() {
        _ = CHawserTrust_SSL_request_ocsp_status(self.ssl)
    }

    // MARK: - What the handshake established

    /// The DER OCSP response the server stapled, or nil when it stapled none (or was not asked).
    package func stapledOCSPResponse() -> [UInt8]? {
        var der: UnsafePointer<UInt8>? = nil
        let length = CHawserTrust_SSL_get_ocsp_response(self.ssl, &der)
        guard let der, length > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: der, count: Int(length)))
    }

    /// The peer's certificates as presented, leaf first, sharing OpenSSL's parsed X509
    /// objects (no DER decode again), or why one of them cannot be used.
    package func peerCertificates() -> Result<[Certificate], CertificateError> {
        var out: [Certificate] = []
        // For a client, SSL_get_peer_cert_chain includes the leaf.
        guard let chain = SSL_get_peer_cert_chain(self.ssl) else {
            guard let leaf = SSL_get1_peer_certificate(self.ssl) else { return .success([]) }
            defer { X509_free(leaf) }
            return Result { () throws(CertificateError) in [try Certificate(borrowing: leaf)] }
        }
        for i in 0..<CHawser_sk_X509_num(chain) {
            guard let x = CHawser_sk_X509_value(chain, i) else { continue }
            do {
                out.append(try Certificate(borrowing: x))
            } catch {
                return .failure(
                    CertificateError(error.kind, "certificate #\(i) sent by the server is unusable: \(error.message)")
                )
            }
        }
        return .success(out)
    }

    package var isResumed: Bool { SSL_session_reused(self.ssl) == 1 }

    package var protocolVersion: String {
        guard let v = SSL_get_version(self.ssl) else { return "unknown" }
        return String(cString: v)
    }

    package var cipherSuite: String? {
        guard let c = SSL_get_current_cipher(self.ssl), let name = SSL_CIPHER_get_name(c) else { return nil }
        return String(cString: name)
    }

    package var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>? = nil
        var len: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

}

// MARK: - TLS inside TLS

/// The BIO under a stream that runs inside another: a source/sink whose data pointer is the outer
/// stream's SSL (not owned: the inner stream keeps the outer one alive). Reads are the outer
/// SSL_read, writes its SSL_write; the outer's "want read/write" becomes the BIO's retry flags,
/// which the inner SSL reports as its own SSL_ERROR_WANT_READ/WRITE. An outer EOF sets the EOF
/// flag, so the inner sees an EOF (clean only if its own close_notify came first); an outer
/// error leaves OpenSSL's error queue for the inner stream to report. Made once per process.
nonisolated(unsafe) private let tunnelBIOMethod: OpaquePointer? = {
    guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "hawser TLS-in-TLS") else { return nil }
    _ = BIO_meth_set_read_ex(method) { bio, buffer, length, done in
        tunnelBIOClearRetry(bio)
        guard let outer = BIO_get_data(bio).map(OpaquePointer.init) else { return 0 }
        var n = 0
        let r = SSL_read_ex(outer, buffer, length, &n)
        guard r != 1 else {
            done?.pointee = n
            return 1
        }
        tunnelBIOFailed(bio, outer, Int32(r))
        return 0
    }
    _ = BIO_meth_set_write_ex(method) { bio, buffer, length, done in
        tunnelBIOClearRetry(bio)
        guard let outer = BIO_get_data(bio).map(OpaquePointer.init) else { return 0 }
        var n = 0
        let r = SSL_write_ex(outer, buffer, length, &n)
        guard r != 1 else {
            done?.pointee = n
            return 1
        }
        tunnelBIOFailed(bio, outer, Int32(r))
        return 0
    }
    _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
        switch command {
        case BIO_CTRL_FLUSH: return 1  // every write already went to the outer SSL
        case BIO_CTRL_EOF: return BIO_test_flags(bio, Int32(BIO_FLAGS_IN_EOF)) != 0 ? 1 : 0
        default: return 0
        }
    }
    return method
}()

private func tunnelBIOClearRetry(_ bio: OpaquePointer?) {
    BIO_clear_flags(bio, Int32(BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY))
}

/// The outer SSL call returned `r` (not 1): sets the tunnel BIO's retry or EOF flags from why.
private func tunnelBIOFailed(_ bio: OpaquePointer?, _ outer: OpaquePointer, _ r: Int32) {
    switch SSL_get_error(outer, r) {
    case SSL_ERROR_WANT_READ:
        BIO_set_flags(bio, Int32(BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY))
    case SSL_ERROR_WANT_WRITE:
        BIO_set_flags(bio, Int32(BIO_FLAGS_WRITE | BIO_FLAGS_SHOULD_RETRY))
    case SSL_ERROR_ZERO_RETURN:
        // The proxy closed the outer stream cleanly: an EOF for the inner one.
        BIO_set_flags(bio, Int32(BIO_FLAGS_IN_EOF))
    case SSL_ERROR_SYSCALL where Glibc.errno == 0 && ERR_peek_error() == 0:
        BIO_set_flags(bio, Int32(BIO_FLAGS_IN_EOF))
    default:
        break  // a socket or TLS error: errno and the error queue say what, for the inner stream
    }
}

#if canImport(Glibc)
import Glibc
#endif
