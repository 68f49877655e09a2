// A small HTTP/1.1 server on Hawser's own event loop, for tests, the demo and benchmarks.
// Never used by the library. Routes are documented on `TestServer`.
import HawserCore
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 test server on loopback.
///
/// Routes (query parameters in brackets):
/// - `GET /hello`: 200, `Hello, World!` (text/plain).
/// - `GET /json`: 200, a small JSON document (application/json).
/// - `GET /bytes/N[?chunk=K[&records=1]][?max-age=S]`: N deterministic bytes (`byte i = i % 251`), with
///   `Cache-Control: max-age=S` when asked (not with `chunk`); with `chunk`, sent chunked in
///   K-byte chunks; with `records=1` over TLS, each chunk in a TLS record of its own, all in one TCP send.
/// - `ANY /echo`: 200; the request body as the body; `X-Echo-Method`, `X-Echo-Target`, `X-Echo-Body-Length`
///   and every request header as `X-Echo-H-<name>`.
/// - `GET /status/N`: status N with an empty body.
/// - `GET /delay/MS`: 200 after MS milliseconds.
/// - `GET /redirect/N`: 302 to `/redirect/N-1`; `/redirect/1` (and 0) → 302 to `/hello`: N redirects.
/// - `ANY /redirect-to?url=U[&status=N][&cookie=C][&close=1]`: status N (default 302) to the percent-encoded `U`,
///   setting cookie `C` (`name=value`, percent-encoded) when given; with `close=1`, then closes the connection.
/// - `ANY /redirect-loop`: 302 to itself, forever.
/// - `ANY /basic-auth/USER/PASS`: 200 with the matching Basic `Authorization`, else 401 with
///   `WWW-Authenticate: Basic realm="hawser"`.
/// - `GET /cacheable[?max-age=N][&vary=F][&size=S]`: `Cache-Control: max-age=N` (default 60),
///   `ETag: "v1"`; with `If-None-Match: "v1"` a 304; the body says how many 200s the server has
///   produced, or is the S-byte pattern with `size`.
/// - `GET /gzip`: a gzip-encoded JSON body (`Content-Encoding: gzip`).
/// - `GET /cookies/set?NAME=VALUE[&…]`: 200 with one `Set-Cookie: NAME=VALUE; Path=/` per pair (names sorted).
/// - `GET /cookies`: 200; the request's `Cookie` field value as the body (empty when none).
/// - `GET /close-delimited/N`: N bytes, no Content-Length, then the server closes.
/// - `GET /interim`: 100 Continue and 103 Early Hints, then 200.
/// - `GET /close`: 200 with `Connection: close`, then the server closes.
/// - `GET /bearer/T`: 200 when `Authorization` is `Bearer T`, else 401; `X-Seen-Authorization` echoes it.
/// - `ANY /sink`: reads the body without keeping it; 200 with `X-Sink-Length` (bytes received) and
///   `X-Sink-Pattern` (`ok` when the body is the `/bytes` pattern, else `mismatch`).
/// - `GET /stream/N[?chunked=1]`: N pattern bytes generated 256 KiB at a time as the client reads
///   (bounded server memory; a client that stops reading holds it back); chunked with `chunked=1`.
/// - `GET /range/N[?ignore-range=1]`: the N-byte pattern with a strong `ETag`, `Last-Modified` and
///   `Accept-Ranges: bytes`; `Range: bytes=a-[b]` gives 206 with `Content-Range` unless `If-Range`
///   names another validator (then 200); a start ≥ N gives 416 `bytes */N`; `ignore-range=1` always 200.
/// - `GET /obs-text`: 200 with `X-Obs-Text: caf\xE9 \xFF\xA0end` (obs-text bytes, not UTF-8) and body `ok`.
/// - `ANY /flaky?fail=N[&status=S]`: the first N requests for this exact target answer S (default 503)
///   with `Retry-After: 0`, later ones 200 (`ok after N`); see ``requestCount(target:)``.
/// - `/api/…`: the example API of `Tests/HawserOpenAPIExample/openapi.yaml`: `GET /api/greeting[?name=N][&delayMs=MS]`
///   (JSON, after MS milliseconds; echoes `X-Request-Id`), `POST /api/items` (a JSON item echoed inside `{"id":…,"item":…}`, 201;
///   415 unless `application/json`), `PUT /api/blobs` (counted and checked like `/sink`; JSON receipt),
///   `GET /api/blobs/N[?chunked=true]` (like `/stream/N`).
/// - `GET /fault/close-mid-head`, `/fault/close-mid-body`, `/fault/reset`, `/fault/trickle`
///   (a 200 one byte every millisecond; with `?bytes=N&every=MS` the head at once, then N body
///   bytes one every MS milliseconds), `/fault/no-answer` (reads, never answers), `/fault/garbage`,
///   `/fault/truncate` (a close-delimited body, then a close without TLS close_notify),
///   `/fault/empty` (closes without answering), `/fault/bad-chunk` (a chunk size that is not hex).
///
/// With ``TLS`` settings the server speaks https (TLS through OpenSSL, as the client does).
public final class TestServer: Sendable {
    /// How a test server speaks TLS.
    public struct TLS: Sendable {
        /// PEM: the certificate chain to present (leaf first) and its private key.
        public var certificateChainPath: String
        /// The PEM file of the leaf's private key (unencrypted).
        public var privateKeyPath: String
        /// The lowest TLS version the server accepts; TLS 1.2 by default.
        public var minimumVersion: TLSVersion = .tls1_2
        /// The highest TLS version the server accepts; nil (the default) for OpenSSL's highest, TLS 1.3.
        public var maximumVersion: TLSVersion? = nil
        /// PEM CA certificates; when set, the server requires a client certificate they issued.
        public var clientCAPath: String? = nil
        /// A DER OCSP response to staple to every handshake whose client asks for one (the
        /// status_request extension); nil staples nothing.
        public var stapledOCSPResponse: [UInt8]? = nil

        /// Creates TLS settings for the test server; each parameter sets the property of the same name.
        public init(
            certificateChainPath: String,
            privateKeyPath: String,
            minimumVersion: TLSVersion = .tls1_2,
            maximumVersion: TLSVersion? = nil,
            clientCAPath: String? = nil,
            stapledOCSPResponse: [UInt8]? = nil
        ) {
            self.certificateChainPath = certificateChainPath
            self.privateKeyPath = privateKeyPath
            self.minimumVersion = minimumVersion
            self.maximumVersion = maximumVersion
            self.clientCAPath = clientCAPath
            self.stapledOCSPResponse = stapledOCSPResponse
        }
    }

    /// The port the server listens on (127.0.0.1 or ::1); 0 on a Unix-domain socket.
    public let port: Int
    /// The host the server listens on (for a Unix-domain socket: `localhost`, the name its URLs use).
    public let host: String
    /// The Unix-domain socket the server listens on, if it was made with one.
    public let unixSocketPath: String?
    let loop: EventLoop
    private let ownsLoop: Bool
    /// The listener, on the server's loop (read through `submitAndWait`).
    private let listener: LoopBound<Listener>

    /// Starts a server on `host`, on a free port unless `port` is given.
    public convenience init(host: String = "127.0.0.1", port: Int = 0, loop: EventLoop? = nil, tls: TLS? = nil) throws {
        guard let address = SocketAddress(ipAddress: host, port: port) else {
            throw TestServerError("not an IP address: \(host)")
        }
        try self.init(address: address, host: host, loop: loop, tls: tls)
    }

    /// Starts a server on the Unix-domain socket `path` (which must not exist yet; it is removed
    /// at shutdown). Its ``baseURL`` is an `http+unix` (or `https+unix`) URL.
    public convenience init(unixSocketPath path: String, loop: EventLoop? = nil, tls: TLS? = nil) throws {
        guard let address = SocketAddress(unixPath: path) else {
            throw TestServerError("not a usable Unix-domain socket path: \(path)")
        }
        try self.init(address: address, host: "localhost", loop: loop, tls: tls)
    }

    private init(address: SocketAddress, host: String, loop: EventLoop?, tls: TLS?) throws {
        let context = try tls.map {
            try TLSContext(
                serverCertificateChainPath: $0.certificateChainPath,
                privateKeyPath: $0.privateKeyPath,
                minimum: $0.minimumVersion,
                maximum: $0.maximumVersion,
                clientCAPath: $0.clientCAPath,
                stapledOCSPResponse: $0.stapledOCSPResponse
            )
        }
        let l = try loop ?? EventLoop(name: "test-server")
        self.ownsLoop = loop == nil
        self.loop = l
        self.host = host
        self.unixSocketPath = address.unixPath
        self.isTLS = tls != nil
        let (listener, port) = try l.submitAndWait { () throws -> (LoopBound<Listener>, Int) in
            let listener = try Listener(address: address, loop: l, tls: context)
            return (LoopBound(listener, loop: l), listener.port)
        }
        self.listener = listener
        self.port = port
    }

    /// Whether the server speaks https.
    public let isTLS: Bool

    /// `http://host:port` or `https://host:port` (with brackets for IPv6); on a Unix-domain
    /// socket `http+unix://` (or `https+unix://`) and the percent-encoded path.
    public var baseURL: String {
        let scheme = self.isTLS ? "https" : "http"
        if let path = self.unixSocketPath {
            let encoded = path.utf8.map { b -> String in
                let c = Character(Unicode.Scalar(b))
                return (c.isLetter || c.isNumber) && b < 0x80 || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
                    || b == UInt8(ascii: "_")
                    ? String(c) : "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }.joined()
            return "\(scheme)+unix://\(encoded)"
        }
        return self.host.contains(":")
            ? "\(scheme)://[\(self.host)]:\(self.port)" : "\(scheme)://\(self.host):\(self.port)"
    }

    /// 200s and 304s the `/cacheable` route has answered.
    public var cacheableCounts: (produced: Int, notModified: Int) {
        let l = self.listener
        return (try? self.loop.submitAndWait { (l.value.produced, l.value.notModified) }) ?? (0, 0)
    }

    /// TLS handshakes that failed so far (https only).
    public var handshakeFailures: Int {
        let l = self.listener
        return (try? self.loop.submitAndWait { l.value.handshakeFailures }) ?? 0
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int {
        let l = self.listener
        return (try? self.loop.submitAndWait { l.value.accepted }) ?? 0
    }

    /// Requests received for `target` (path and query, exactly as sent) so far.
    public func requestCount(target: String) -> Int {
        let l = self.listener
        return (try? self.loop.submitAndWait { l.value.requestCounts[target] ?? 0 }) ?? 0
    }

    /// Bytes the `/stream` routes have handed to their sockets so far (a client that stops reading
    /// holds this back once the socket buffers are full).
    public var streamedBytes: Int {
        let l = self.listener
        return (try? self.loop.submitAndWait { l.value.streamed }) ?? 0
    }

    /// Closes the listener and every connection; stops the loop if the server created it.
    public func shutdown() {
        let l = self.listener
        _ = try? self.loop.submitAndWait { l.value.close() }
        if self.ownsLoop { self.loop.shutdown() }
    }
}

final class Listener: EventLoopIOHandler {
    let fd: Int32
    let port: Int
    let loop: EventLoop
    let unixPath: String?
    var accepted = 0
    /// Items `POST /api/items` has created (their identifiers count up from 1).
    var createdItems = 0
    var handshakeFailures = 0
    var produced = 0
    var notModified = 0
    var streamed = 0
    /// Requests routed so far, by request target.
    var requestCounts: [String: Int] = [:]
    var connections: [ObjectIdentifier: ServerConnection] = [:]
    private var closed = false
    private let tls: TLSContext?

    init(address: SocketAddress, loop: EventLoop, tls: TLSContext?) throws {
        self.tls = tls
        let fd = try Posix.socket(family: address.family)
        do {
            if address.family != AF_UNIX {
                try Posix.setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
            }
            try Posix.bind(fd, address)
            try Posix.listen(fd, backlog: 1024)
            self.port = try Posix.localAddress(fd).port
        } catch {
            Posix.close(fd)
            throw TestServerError("cannot listen on \(address): \(error)")
        }
        self.fd = fd
        self.unixPath = address.unixPath
        self.loop = loop
        try loop.register(fd: fd, handler: self, readable: true, writable: false)
    }

    func ioReadable() {
        while !self.closed {
            guard case .processed(let c)? = try? Posix.accept(self.fd) else { return }
            self.accepted += 1
            if self.unixPath == nil { try? Posix.setOption(c, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1) }
            let stream: TLSStream?
            do {
                stream = try self.tls.map { try TLSStream(server: $0, fd: c) }
            } catch {
                Posix.close(c)
                continue
            }
            let conn = ServerConnection(fd: c, listener: self, tls: stream)
            do {
                try self.loop.register(fd: c, handler: conn, readable: true, writable: false)
                self.connections[ObjectIdentifier(conn)] = conn
            } catch {
                Posix.close(c)
            }
        }
    }

    func ioWritable() {}

    func remove(_ c: ServerConnection) {
        self.connections.removeValue(forKey: ObjectIdentifier(c))
    }

    func close() {
        guard !self.closed else { return }
        self.closed = true
        self.loop.deregister(fd: self.fd)
        Posix.close(self.fd)
        if let path = self.unixPath { Posix.unlink(path) }
        for c in Array(self.connections.values) { c.close() }
    }
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { self.description = d }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}
