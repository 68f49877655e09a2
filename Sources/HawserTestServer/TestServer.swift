// A small HTTP/1.1 server on Hawser's own event loop, for tests, the demo and benchmarks.
// Never used by the library. Routes are documented on `TestServer`.
import CHawser
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 test server on loopback.
///
/// Routes (query parameters in brackets):
/// - `GET /hello`: 200, `Hello, World!` (text/plain).
/// - `GET /json`: 200, a small JSON document (application/json).
/// - `GET /bytes/N[?chunk=K[&records=1]]`: N deterministic bytes (`byte i = i % 251`); with `chunk`, sent chunked in
///   K-byte chunks; with `records=1` over TLS, each chunk in a TLS record of its own, all in one TCP send.
/// - `ANY /echo`: 200; the request body as the body; `X-Echo-Method`, `X-Echo-Target`, `X-Echo-Body-Length`
///   and every request header as `X-Echo-H-<name>`.
/// - `GET /status/N`: status N with an empty body.
/// - `GET /delay/MS`: 200 after MS milliseconds.
/// - `GET /redirect/N`: 302 to `/redirect/N-1`; `/redirect/0` → 302 to `/hello`.
/// - `ANY /redirect-to?url=U[&status=N][&cookie=C]`: status N (default 302) to the percent-encoded `U`,
///   setting cookie `C` (`name=value`, percent-encoded) when given.
/// - `ANY /redirect-loop`: 302 to itself, forever.
/// - `ANY /basic-auth/USER/PASS`: 200 with the matching Basic `Authorization`, else 401 with
///   `WWW-Authenticate: Basic realm="hawser"`.
/// - `GET /cacheable[?max-age=N][&vary=F]`: `Cache-Control: max-age=N` (default 60), `ETag: "v1"`;
///   with `If-None-Match: "v1"` a 304; the body says how many 200s the server has produced.
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
/// - `/api/…`: the example API of `Tests/HawserOpenAPIExample/openapi.yaml`: `GET /api/greeting[?name=N][&delayMs=MS]`
///   (JSON, after MS milliseconds; echoes `X-Request-Id`), `POST /api/items` (a JSON item echoed inside `{"id":…,"item":…}`, 201;
///   415 unless `application/json`), `PUT /api/blobs` (counted and checked like `/sink`; JSON receipt),
///   `GET /api/blobs/N[?chunked=true]` (like `/stream/N`).
/// - `GET /fault/close-mid-head`, `/fault/close-mid-body`, `/fault/reset`, `/fault/trickle`
///   (a 200 one byte every millisecond), `/fault/no-answer` (reads, never answers), `/fault/garbage`,
///   `/fault/truncate` (a close-delimited body, then a close without TLS close_notify).
///
/// With ``TLS`` settings the server speaks https (TLS through OpenSSL, as the client does).
public final class TestServer: @unchecked Sendable {
    /// How a test server speaks TLS.
    public struct TLS: Sendable {
        /// PEM: the certificate chain to present (leaf first) and its private key.
        public var certificateChainPath: String
        public var privateKeyPath: String
        public var minimumVersion: TLSVersion = .tls1_2
        public var maximumVersion: TLSVersion? = nil
        /// PEM CA certificates; when set, the server requires a client certificate they issued.
        public var clientCAPath: String? = nil

        public init(certificateChainPath: String, privateKeyPath: String, minimumVersion: TLSVersion = .tls1_2,
                    maximumVersion: TLSVersion? = nil, clientCAPath: String? = nil) {
            self.certificateChainPath = certificateChainPath
            self.privateKeyPath = privateKeyPath
            self.minimumVersion = minimumVersion
            self.maximumVersion = maximumVersion
            self.clientCAPath = clientCAPath
        }
    }

    /// The port the server listens on (127.0.0.1 or ::1).
    public let port: Int
    /// The host the server listens on.
    public let host: String
    let loop: EventLoop
    private let ownsLoop: Bool
    private let listener: Listener

    /// Starts a server on `host`, on a free port unless `port` is given.
    public init(host: String = "127.0.0.1", port: Int = 0, loop: EventLoop? = nil, tls: TLS? = nil) throws {
        let context = try tls.map {
            try TLSContext(serverCertificateChainPath: $0.certificateChainPath, privateKeyPath: $0.privateKeyPath,
                           minimum: $0.minimumVersion, maximum: $0.maximumVersion, clientCAPath: $0.clientCAPath)
        }
        let l = try loop ?? EventLoop(name: "test-server")
        self.ownsLoop = loop == nil
        self.loop = l
        self.host = host
        self.isTLS = tls != nil
        let listener = try l.submitAndWait { () throws -> UnsafeTransfer2<Listener> in
            UnsafeTransfer2(try Listener(host: host, port: port, loop: l, tls: context))
        }.value
        self.listener = listener
        self.port = listener.port
    }

    /// Whether the server speaks https.
    public let isTLS: Bool

    /// `http://host:port` or `https://host:port` (with brackets for IPv6).
    public var baseURL: String {
        let scheme = self.isTLS ? "https" : "http"
        return self.host.contains(":") ? "\(scheme)://[\(self.host)]:\(self.port)" : "\(scheme)://\(self.host):\(self.port)"
    }

    /// 200s and 304s the `/cacheable` route has answered.
    public var cacheableCounts: (produced: Int, notModified: Int) {
        let l = UnsafeTransfer2(self.listener)
        return (try? self.loop.submitAndWait { (l.value.produced, l.value.notModified) }) ?? (0, 0)
    }

    /// TLS handshakes that failed so far (https only).
    public var handshakeFailures: Int {
        let l = UnsafeTransfer2(self.listener)
        return (try? self.loop.submitAndWait { l.value.handshakeFailures }) ?? 0
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int {
        let l = UnsafeTransfer2(self.listener)
        return (try? self.loop.submitAndWait { l.value.accepted }) ?? 0
    }

    /// Bytes the `/stream` routes have handed to their sockets so far (a client that stops reading
    /// holds this back once the socket buffers are full).
    public var streamedBytes: Int {
        let l = UnsafeTransfer2(self.listener)
        return (try? self.loop.submitAndWait { l.value.streamed }) ?? 0
    }

    /// Closes the listener and every connection; stops the loop if the server created it.
    public func shutdown() {
        let l = UnsafeTransfer2(self.listener)
        _ = try? self.loop.submitAndWait { l.value.close() }
        if self.ownsLoop { self.loop.shutdown() }
    }
}

struct UnsafeTransfer2<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

final class Listener: EventLoopIOHandler {
    let fd: Int32
    let port: Int
    let loop: EventLoop
    var accepted = 0
    /// Items `POST /api/items` has created (their identifiers count up from 1).
    var createdItems = 0
    var handshakeFailures = 0
    var produced = 0
    var notModified = 0
    var streamed = 0
    var connections: [ObjectIdentifier: ServerConnection] = [:]
    private var closed = false
    private let tls: TLSContext?

    init(host: String, port: Int, loop: EventLoop, tls: TLSContext?) throws {
        self.tls = tls
        guard let address = SocketAddress(ipAddress: host, port: port) else {
            throw TestServerError("not an IP address: \(host)")
        }
        let fd = CHawser_socket_stream(address.family)
        if fd < 0 { throw TestServerError("socket: errno \(CHawser_errno())") }
        _ = CHawser_set_int_option(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        do {
            try ServerSocket.bindAndListen(fd: fd, address: address)
        } catch {
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.port = try ServerSocket.localPort(fd)
        self.loop = loop
        try loop.register(fd: fd, handler: self, readable: true, writable: false)
    }

    func ioReadable() {
        while !self.closed {
            let c = CHawser_accept4(self.fd, nil, nil)
            if c < 0 { return }
            self.accepted += 1
            _ = CHawser_set_int_option(c, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            let stream: TLSStream?
            do {
                stream = try self.tls.map { try TLSStream(server: $0, fd: c) }
            } catch {
                Glibc.close(c)
                continue
            }
            let conn = ServerConnection(fd: c, listener: self, tls: stream)
            do {
                try self.loop.register(fd: c, handler: conn, readable: true, writable: false)
                self.connections[ObjectIdentifier(conn)] = conn
            } catch {
                Glibc.close(c)
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
        Glibc.close(self.fd)
        for c in Array(self.connections.values) { c.close() }
    }
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { self.description = d }
}

enum ServerSocket {
    static func bindAndListen(fd: Int32, address: SocketAddress) throws {
        let rc = address.withSockAddr { bind(fd, $0, $1) }
        if rc != 0 { throw TestServerError("bind \(address): errno \(CHawser_errno())") }
        if listen(fd, 1024) != 0 { throw TestServerError("listen: errno \(CHawser_errno())") }
    }

    static func localPort(_ fd: Int32) throws -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        if rc != 0 { throw TestServerError("getsockname: errno \(CHawser_errno())") }
        return withUnsafePointer(to: &storage) { p -> Int in
            if Int32(p.pointee.ss_family) == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}
