// An HTTP proxy on loopback for tests, on Hawser's own event loop: plain HTTP or TLS towards
// its clients (an `https://` proxy), CONNECT tunnels, forwarding of absolute-form requests, and
// optional Basic authentication. Never used by the library.
import HawserCore
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

/// A forward and CONNECT proxy on loopback, speaking TLS to its clients when given ``TestServer/TLS``
/// settings (what curl calls an HTTPS proxy).
///
/// - `CONNECT host:port`: connects to the target (names resolved here, `localhost` included),
///   answers `200 Connection established` and then relays bytes both ways until either side
///   closes; `502` when the target cannot be reached.
/// - An absolute-form request (`GET http://host[:port]/path`): sent to the origin in origin-form
///   without `Proxy-Authorization` and `Proxy-Connection`, with `Connection: close`; the
///   response is relayed with `Connection: close` added, so each connection carries one
///   forwarded exchange.
/// - With ``credentials``, a request without the matching Basic `Proxy-Authorization` gets
///   `407` with `Proxy-Authenticate: Basic realm="hawser-proxy"` and the connection closes.
/// - Anything else (an origin-form request, bytes that are not text, a head over 64 KiB) gets
///   `400` and a close.
public final class TestProxy: Sendable {
    /// The port the proxy listens on.
    public let port: Int
    /// The address the proxy listens on.
    public let host: String
    /// Whether the proxy speaks TLS to its clients.
    public let isTLS: Bool
    /// The credentials a client must send, if any.
    public let credentials: ProxyCredentials?
    let loop: EventLoop
    private let ownsLoop: Bool
    /// The listener, on the proxy's loop (read through `submitAndWait`).
    private let listener: LoopBound<ProxyListener>

    /// Starts a proxy on `host`, on a free port; with `tls`, clients must speak TLS to it first.
    public init(
        host: String = "127.0.0.1",
        tls: TestServer.TLS? = nil,
        credentials: ProxyCredentials? = nil,
        loop: EventLoop? = nil
    ) throws {
        guard let address = SocketAddress(ipAddress: host, port: 0) else {
            throw TestServerError("not an IP address: \(host)")
        }
        let context = try tls.map {
            try TLSContext(
                serverCertificateChainPath: $0.certificateChainPath,
                privateKeyPath: $0.privateKeyPath,
                minimum: $0.minimumVersion,
                maximum: $0.maximumVersion,
                clientCAPath: $0.clientCAPath
            )
        }
        let l = try loop ?? EventLoop(name: "test-proxy")
        self.ownsLoop = loop == nil
        self.loop = l
        self.host = host
        self.isTLS = tls != nil
        self.credentials = credentials
        let authorization = credentials?.basicAuthorization
        let (listener, port) = try l.submitAndWait { () throws -> (LoopBound<ProxyListener>, Int) in
            let listener = try ProxyListener(address: address, loop: l, tls: context, authorization: authorization)
            return (LoopBound(listener, loop: l), listener.port)
        }
        self.listener = listener
        self.port = port
    }

    /// `https://host:port` or `http://host:port` (brackets for IPv6), without credentials.
    public var url: String {
        let h = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "\(self.isTLS ? "https" : "http")://\(h):\(self.port)"
    }

    /// Every request line received so far, in order (`CONNECT localhost:443 HTTP/1.1`,
    /// `GET http://127.0.0.1:8080/hello HTTP/1.1`…), refused ones included.
    public var requestLines: [String] { self.read { $0.requestLines } }
    /// Requests answered with 407 so far.
    public var authenticationRefusals: Int { self.read { $0.refusals } }
    /// Connections accepted so far.
    public var acceptedConnections: Int { self.read { $0.accepted } }
    /// TLS handshakes with clients that completed, and that failed.
    public var handshakes: (completed: Int, failed: Int) { self.read { ($0.handshakesCompleted, $0.handshakesFailed) } }
    /// Client connections open right now.
    public var openConnections: Int { self.read { $0.clients.count } }

    private func read<T: Sendable>(_ body: @escaping @Sendable (ProxyListener) -> T) -> T {
        let l = self.listener
        return try! self.loop.submitAndWait { body(l.value) }
    }

    /// Closes the listener and every connection (tunnels included); stops the loop if the proxy
    /// created it.
    public func shutdown() {
        let l = self.listener
        _ = try? self.loop.submitAndWait { l.value.close() }
        if self.ownsLoop { self.loop.shutdown() }
    }
}

final class ProxyListener: EventLoopIOHandler {
    let fd: Int32
    let port: Int
    let loop: EventLoop
    let tls: TLSContext?
    /// The `Proxy-Authorization` value required, if any.
    let authorization: String?
    var accepted = 0
    var handshakesCompleted = 0
    var handshakesFailed = 0
    var refusals = 0
    var requestLines: [String] = []
    var clients: [ObjectIdentifier: ProxyClient] = [:]
    private var closed = false

    init(address: SocketAddress, loop: EventLoop, tls: TLSContext?, authorization: String?) throws {
        self.loop = loop
        self.tls = tls
        self.authorization = authorization
        let fd = try Posix.socket(family: address.family)
        do {
            try Posix.setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
            try Posix.bind(fd, address)
            try Posix.listen(fd, backlog: 256)
            self.port = try Posix.localAddress(fd).port
        } catch {
            Posix.close(fd)
            throw TestServerError("cannot listen on \(address): \(error)")
        }
        self.fd = fd
        try loop.register(fd: fd, handler: self, readable: true, writable: false)
    }

    func ioReadable() {
        while !self.closed {
            guard case .processed(let c)? = try? Posix.accept(self.fd) else { return }
            self.accepted += 1
            try? Posix.setOption(c, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1)
            let stream: TLSStream?
            do {
                stream = try self.tls.map { try TLSStream(server: $0, fd: c) }
            } catch {
                Posix.close(c)
                continue
            }
            let client = ProxyClient(fd: c, listener: self, tls: stream)
            do {
                try self.loop.register(fd: c, handler: client, readable: true, writable: false)
                self.clients[ObjectIdentifier(client)] = client
            } catch {
                Posix.close(c)
            }
        }
    }

    func ioWritable() {}

    func remove(_ c: ProxyClient) {
        self.clients.removeValue(forKey: ObjectIdentifier(c))
    }

    func close() {
        guard !self.closed else { return }
        self.closed = true
        self.loop.deregister(fd: self.fd)
        Posix.close(self.fd)
        for c in Array(self.clients.values) { c.close() }
    }
}

/// The socket towards the target of a tunnel or a forwarded request; its events go to its client.
final class ProxyUpstream: EventLoopIOHandler {
    let fd: Int32
    unowned let client: ProxyClient
    var connected = false

    init(fd: Int32, client: ProxyClient) {
        self.fd = fd
        self.client = client
    }

    func ioReadable() { self.client.upstreamEvent() }
    func ioWritable() { self.client.upstreamEvent() }
}

/// One client connection: (TLS handshake,) a request head, then a tunnel or one forwarded
/// exchange. Loop-confined.
final class ProxyClient: EventLoopIOHandler {
    private enum State { case handshaking, readingHead, connecting, relaying, closing }

    let fd: Int32
    unowned let listener: ProxyListener
    private let tls: TLSStream?
    private var loop: EventLoop { self.listener.loop }
    private var state: State
    private var upstream: ProxyUpstream?
    /// Bytes from the client not yet parsed (reading the head) or not yet sent upstream.
    private var inbox: [UInt8] = []
    private var toUpstream: [UInt8] = []
    private var toClient: [UInt8] = []
    /// Forwarding: `Connection: close` still has to go into the response head (after its status line).
    private var injectClose = false
    private var upstreamEOF = false
    private var closed = false
    private var interest: (read: Bool, write: Bool) = (true, false)
    private var upstreamInterest: (read: Bool, write: Bool) = (false, false)
    /// Buffered in either direction before reading that side pauses.
    private static let limit = 256 * 1024

    init(fd: Int32, listener: ProxyListener, tls: TLSStream?) {
        self.fd = fd
        self.listener = listener
        self.tls = tls
        self.state = tls == nil ? .readingHead : .handshaking
    }

    // MARK: - Client side

    func ioReadable() {
        if self.state == .handshaking {
            self.handshake()
            return
        }
        self.readClient()
        self.pump()
    }

    func ioWritable() {
        if self.state == .handshaking {
            self.handshake()
            return
        }
        self.pump()
    }

    private func handshake() {
        guard let tls = self.tls else { return }
        switch tls.handshake() {
        case .done:
            self.listener.handshakesCompleted += 1
            self.state = .readingHead
            self.setInterest(read: true, write: false)
            // The request may have come with the handshake's last flight.
            if tls.hasBufferedPlaintext { self.ioReadable() }
        case .wantRead:
            self.setInterest(read: true, write: false)
        case .wantWrite:
            self.setInterest(read: false, write: true)
        case .failed:
            self.listener.handshakesFailed += 1
            self.close()
        }
    }

    private var wantsClientBytes: Bool {
        switch self.state {
        case .readingHead: return true
        case .relaying: return self.toUpstream.count < Self.limit
        default: return false
        }
    }

    /// Reads what the client sent (while there is room), then acts on it.
    private func readClient() {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        repeat {
            guard !self.closed, self.wantsClientBytes else { return }
            let n: Int
            if let tls = self.tls {
                switch chunk.withUnsafeMutableBytes({ tls.read(into: $0) }) {
                case .bytes(let k): n = k
                case .wantRead, .wantWrite: return
                case .closed, .failed: n = 0
                }
            } else {
                switch chunk.withUnsafeMutableBytes({ raw in
                    Result { () throws(IOError) in try Posix.read(self.fd, raw) }
                }) {
                case .success(.processed(let k)): n = k
                case .success(.wouldBlock): return
                case .failure: n = 0
                }
            }
            if n == 0 {
                // The client is gone: nothing more to relay for it.
                self.close()
                return
            }
            if self.state == .relaying {
                self.toUpstream += chunk[0..<n]
            } else {
                self.inbox += chunk[0..<n]
                self.parseHead()
            }
        } while self.tls?.hasBufferedPlaintext == true
    }

    private func parseHead() {
        guard self.state == .readingHead else { return }
        guard let end = Self.find([13, 10, 13, 10], in: self.inbox) else {
            // Not text (a TLS ClientHello sent to a plain proxy…), or too long: answered at once,
            // as a real proxy would.
            let binary = self.inbox.contains { ($0 < 0x20 && $0 != 13 && $0 != 10 && $0 != 9) || $0 >= 0x7F }
            if binary || self.inbox.count > 64 * 1024 { self.refuse("400 Bad Request") }
            return
        }
        let head = String(decoding: self.inbox[..<end], as: UTF8.self)
        let rest = Array(self.inbox[(end + 4)...])
        self.inbox = []
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst()
        self.listener.requestLines.append(requestLine)
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else {
            self.refuse("400 Bad Request")
            return
        }
        let fields: [(name: String, value: String)] = lines.compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                String(line[..<colon]),
                String(line[line.index(after: colon)...].drop(while: { $0 == " " || $0 == "\t" }))
            )
        }
        if let required = self.listener.authorization {
            let given = fields.first { $0.name.lowercased() == "proxy-authorization" }?.value
            guard given == required else {
                self.listener.refusals += 1
                self.refuse(
                    "407 Proxy Authentication Required",
                    extra: "Proxy-Authenticate: Basic realm=\"hawser-proxy\"\r\n"
                )
                return
            }
        }
        let (method, target, version) = (parts[0], parts[1], parts[2])
        if method == "CONNECT" {
            guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]) else {
                self.refuse("400 Bad Request")
                return
            }
            var host = String(target[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            self.toUpstream = rest
            self.connectUpstream(
                host: host,
                port: port,
                established: Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
            )
            return
        }
        guard target.lowercased().hasPrefix("http://") else {
            self.refuse("400 Bad Request")
            return
        }
        // http://host[:port]/path → origin-form, to host:port.
        let afterScheme = target.dropFirst(7)
        let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        var path = String(afterScheme[authorityEnd...])
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        var host = String(authority)
        var port = 80
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":"), let p = Int(after.dropFirst()) { port = p }
        } else if let colon = authority.lastIndex(of: ":"), let p = Int(authority[authority.index(after: colon)...]) {
            host = String(authority[..<colon])
            port = p
        }
        var out = "\(method) \(path) \(version)\r\n"
        let dropped: Set<String> = ["proxy-authorization", "proxy-connection", "connection", "keep-alive"]
        for f in fields where !dropped.contains(f.name.lowercased()) { out += "\(f.name): \(f.value)\r\n" }
        out += "Connection: close\r\n\r\n"
        self.toUpstream = Array(out.utf8) + rest
        self.injectClose = true
        self.connectUpstream(host: host, port: port, established: [])
    }

    /// Answers `status` with an empty body and closes once it is written.
    private func refuse(_ status: String, extra: String = "") {
        self.closeUpstream()
        self.injectClose = false
        self.toClient += Array("HTTP/1.1 \(status)\r\n\(extra)Content-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        self.state = .closing
        self.pump()
    }

    // MARK: - Upstream side

    private func connectUpstream(host: String, port: Int, established: [UInt8]) {
        self.state = .connecting
        self.setInterest(read: false, write: false)
        let name = host.lowercased() == "localhost" ? "127.0.0.1" : host
        let loop = self.loop
        let me = LoopBound(self, loop: loop)
        Resolver.shared.resolve(host: name, port: port) { result in
            loop.execute {
                let client = me.value
                guard !client.closed else { return }
                guard case .success(let addresses) = result, let address = addresses.first else {
                    client.refuse("502 Bad Gateway")
                    return
                }
                client.startUpstream(address, established: established)
            }
        }
    }

    private var establishedReply: [UInt8] = []

    private func startUpstream(_ address: SocketAddress, established: [UInt8]) {
        let fd: Int32
        do {
            fd = try Posix.socket(family: address.family)
        } catch {
            self.refuse("502 Bad Gateway")
            return
        }
        let upstream = ProxyUpstream(fd: fd, client: self)
        do {
            _ = try Posix.connect(fd, address)
            try self.loop.register(fd: fd, handler: upstream, readable: false, writable: true)
        } catch {
            Posix.close(fd)
            self.refuse("502 Bad Gateway")
            return
        }
        self.upstream = upstream
        self.upstreamInterest = (false, true)
        self.establishedReply = established
    }

    func upstreamEvent() {
        guard let upstream = self.upstream, !self.closed else { return }
        if !upstream.connected {
            let error = (try? Posix.socketError(upstream.fd)) ?? EIO
            guard error == 0 else {
                self.closeUpstream()
                self.refuse("502 Bad Gateway")
                return
            }
            upstream.connected = true
            self.state = .relaying
            self.toClient += self.establishedReply
            self.establishedReply = []
        }
        self.readUpstream()
        self.pump()
    }

    private func readUpstream() {
        guard let upstream = self.upstream, upstream.connected, !self.upstreamEOF else { return }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while self.toClient.count < Self.limit {
            switch chunk.withUnsafeMutableBytes({ raw in
                Result { () throws(IOError) in try Posix.read(upstream.fd, raw) }
            }) {
            case .success(.processed(0)), .failure:
                self.upstreamEOF = true
                return
            case .success(.processed(let n)):
                self.toClient += chunk[0..<n]
                if self.injectClose, let lineEnd = Self.find([13, 10], in: self.toClient) {
                    self.toClient.insert(contentsOf: Array("Connection: close\r\n".utf8), at: lineEnd + 2)
                    self.injectClose = false
                }
            case .success(.wouldBlock):
                return
            }
        }
    }

    // MARK: - Moving bytes

    /// Writes what can be written both ways, then sets each socket's interest from what is left.
    private func pump() {
        guard !self.closed else { return }
        // Records OpenSSL read ahead are not reported by epoll again.
        if self.wantsClientBytes, self.tls?.hasBufferedPlaintext == true { self.readClient() }
        guard !self.closed else { return }
        if let upstream = self.upstream, upstream.connected, !self.toUpstream.isEmpty {
            while !self.toUpstream.isEmpty {
                let r = self.toUpstream.withUnsafeBytes { raw in
                    Result { () throws(IOError) in try Posix.send(upstream.fd, raw) }
                }
                guard case .success(.processed(let n)) = r else {
                    if case .failure = r {
                        self.upstreamEOF = true
                        self.toUpstream = []
                    }
                    break
                }
                self.toUpstream.removeFirst(n)
            }
        }
        while !self.toClient.isEmpty, !self.injectClose || self.upstreamEOF {
            let n: Int
            if let tls = self.tls {
                guard case .bytes(let k) = self.toClient.withUnsafeBytes({ tls.write($0) }) else { break }
                n = k
            } else {
                let r = self.toClient.withUnsafeBytes { raw in
                    Result { () throws(IOError) in try Posix.send(self.fd, raw) }
                }
                guard case .success(.processed(let k)) = r else {
                    if case .failure = r {
                        self.close()
                        return
                    }
                    break
                }
                n = k
            }
            self.toClient.removeFirst(n)
        }
        if self.toClient.isEmpty && (self.state == .closing || self.upstreamEOF) {
            self.close()
            return
        }
        // Reading resumed as room appeared: bytes the kernel (or OpenSSL) holds are not reported again.
        self.setInterest(read: self.wantsClientBytes, write: !self.toClient.isEmpty)
        if let upstream = self.upstream, upstream.connected {
            let read = !self.upstreamEOF && self.toClient.count < Self.limit
            let write = !self.toUpstream.isEmpty
            if self.upstreamInterest != (read, write) {
                self.upstreamInterest = (read, write)
                self.loop.setInterest(fd: upstream.fd, readable: read, writable: write)
            }
        }
    }

    private func setInterest(read: Bool, write: Bool) {
        guard !self.closed, self.interest != (read, write) else { return }
        self.interest = (read, write)
        self.loop.setInterest(fd: self.fd, readable: read, writable: write)
    }

    private func closeUpstream() {
        guard let upstream = self.upstream else { return }
        self.upstream = nil
        self.loop.deregister(fd: upstream.fd)
        Posix.close(upstream.fd)
    }

    func close() {
        guard !self.closed else { return }
        self.closed = true
        self.closeUpstream()
        self.loop.deregister(fd: self.fd)
        self.tls?.shutdown()
        Posix.close(self.fd)
        self.listener.remove(self)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var i = 0
        while i <= haystack.count - needle.count {
            if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }
}
