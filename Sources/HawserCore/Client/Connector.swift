// Opens one connection for the pool: resolve (off-loop unless the host is a literal), try
// each address in turn with a non-blocking connect, then for https run the TLS handshake and
// have the server's chain evaluated — all under one connect timeout. Loop-confined.
import CHawser

#if canImport(Glibc)
import Glibc
#endif

final class Connector: EventLoopIOHandler {
    /// A connected (and for https, handshaken and trusted) socket.
    struct Established {
        var fd: Int32
        var address: SocketAddress
        var timings: HTTP1Connection.ConnectTimings
        var tls: TLSStream?
    }
    typealias Completion = (Connector, Result<Established, HawserError>) -> Void
    /// Decides whether the server's chain (leaf first, or why a certificate in it is unusable)
    /// is trusted for `key.host`; calls `decide` exactly once, with nil to accept or the error
    /// that refuses it. May answer later.
    typealias TrustHook = (_ connector: Connector, _ chain: Result<[Certificate], CertificateError>,
                           _ decide: @escaping (HawserError?) -> Void) -> Void

    private enum Phase { case connecting, proxyHandshake, handshaking, evaluating }

    /// The exchange with a proxy before the origin's bytes flow (CONNECT or SOCKS5).
    private enum ProxyExchange {
        case connect(HTTPConnectTunnel.ResponseReader)
        case socks(SOCKS5Handshake)
    }

    let key: ConnectionKey
    private let loop: EventLoop
    private let timeoutSeconds: Double
    private var completion: Completion?
    private let tlsContext: TLSContext?
    private let trustHook: TrustHook?
    private var tls: TLSStream?
    private var phase = Phase.connecting
    private var handshakeInterest: (read: Bool, write: Bool) = (false, false)
    private var addresses: [SocketAddress] = []
    private var index = 0
    private var fd: Int32 = -1
    private var timer: Scheduled?
    private var timings = HTTP1Connection.ConnectTimings()
    private var errors: [String] = []
    private var proxyExchange: ProxyExchange?
    /// Bytes for the proxy not yet written.
    private var proxyOutbox: [UInt8] = []

    /// Where the TCP connection goes: the proxy when there is one, else the origin.
    private var dialHost: String { self.key.proxy?.server.host ?? self.key.host }
    private var dialPort: Int { self.key.proxy?.server.port ?? self.key.port }

    init(key: ConnectionKey, loop: EventLoop, timeoutSeconds: Double, tlsContext: TLSContext? = nil,
         trustHook: TrustHook? = nil, completion: @escaping Completion) {
        self.key = key
        self.loop = loop
        self.timeoutSeconds = timeoutSeconds
        self.tlsContext = tlsContext
        self.trustHook = trustHook
        self.completion = completion
    }

    func start() {
        self.timer = self.loop.scheduleInLoop(in: RequestTask.nanos(self.timeoutSeconds)) { [unowned(unsafe) self] in
            self.timer = nil
            self.finish(.failure(HawserError(.connectTimeout, "connecting to \(self.key.host):\(self.key.port)\(self.key.proxy.map { " via \($0.server)" } ?? "") took longer than \(self.timeoutSeconds) s")))
        }
        if let literal = SocketAddress(ipAddress: self.dialHost, port: self.dialPort) {
            self.addresses = [literal]
            self.tryNext()
            return
        }
        self.timings.domainLookupStart = TaskMetrics.now()
        let loop = self.loop
        let box = UnsafeTransfer(self)
        Resolver.shared.resolve(host: self.dialHost, port: self.dialPort) { result in
            loop.execute { box.value.resolved(result) }
        }
    }

    private func resolved(_ result: Result<[SocketAddress], ResolutionError>) {
        guard self.completion != nil else { return }
        self.timings.domainLookupEnd = TaskMetrics.now()
        switch result {
        case .success(let a):
            self.addresses = a
            self.tryNext()
        case .failure(let e):
            let what = self.key.proxy == nil ? "" : "the proxy: "
            self.finish(.failure(HawserError(self.key.proxy == nil ? .cannotResolveHost : .proxyError, what + e.description, underlying: e)))
        }
    }

    private func tryNext() {
        while self.index < self.addresses.count, self.completion != nil {
            let address = self.addresses[self.index]
            self.index += 1
            if self.timings.connectStart == nil { self.timings.connectStart = TaskMetrics.now() }
            do {
                let fd = try Posix.socket(family: address.family)
                self.fd = fd
                try Posix.setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1)
                switch try Posix.connect(fd, address) {
                case .processed:
                    self.connected(registered: false)
                    return
                case .wouldBlock:
                    try self.loop.register(fd: fd, handler: self, readable: false, writable: true)
                    return
                }
            } catch {
                self.errors.append("\(address): \(error)")
                self.closeSocket()
            }
        }
        if self.completion != nil {
            let detail = self.errors.isEmpty ? "no address to try" : self.errors.joined(separator: "; ")
            if let proxy = self.key.proxy {
                self.finish(.failure(HawserError(.proxyError, "cannot connect to the proxy \(proxy.server): \(detail)")))
            } else {
                self.finish(.failure(HawserError(.cannotConnect, "cannot connect to \(self.key.host):\(self.key.port): \(detail)")))
            }
        }
    }

    func ioWritable() {
        switch self.phase {
        case .handshaking: self.continueHandshake()
        case .proxyHandshake: self.flushProxyOutbox()
        default: self.checkConnect()
        }
    }
    func ioReadable() {
        switch self.phase {
        case .handshaking: self.continueHandshake()
        case .proxyHandshake: self.readFromProxy()
        default: self.checkConnect()
        }
    }

    private func checkConnect() {
        guard self.fd >= 0, self.completion != nil, self.phase == .connecting else { return }
        let address = self.addresses[self.index - 1]
        do {
            let err = try Posix.socketError(self.fd)
            if err == 0 {
                self.connected(registered: true)
                return
            }
            self.errors.append("\(address): \(IOError(errnoCode: err, function: "connect"))")
        } catch {
            self.errors.append("\(address): \(error)")
        }
        self.closeSocket()
        self.tryNext()
    }

    private func connected(registered: Bool) {
        self.timings.connectEnd = TaskMetrics.now()
        if let proxy = self.key.proxy, proxy.mode != .forward, self.proxyExchange == nil {
            self.startProxyExchange(proxy, registered: registered)
            return
        }
        self.startTLSOrFinish(registered: registered)
    }

    // MARK: - Proxies

    private func startProxyExchange(_ proxy: ProxyTarget, registered: Bool) {
        self.phase = .proxyHandshake
        do {
            if !registered { try self.loop.register(fd: self.fd, handler: self, readable: true, writable: false) }
            self.loop.setInterest(fd: self.fd, readable: true, writable: false)
        } catch {
            self.finish(.failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error)))
            return
        }
        switch proxy.mode {
        case .forward:
            return
        case .connectTunnel:
            do {
                self.proxyOutbox = try HTTPConnectTunnel.requestHead(host: self.key.host, port: self.key.port,
                                                                     credentials: proxy.server.credentials)
            } catch {
                self.finish(.failure(error.hawserError))
                return
            }
            self.proxyExchange = .connect(HTTPConnectTunnel.ResponseReader(host: self.key.host, port: self.key.port))
        case .socks5(let remoteDNS):
            let destination: SOCKS5Handshake.Destination
            if let literal = SocketAddress(ipAddress: self.key.host, port: self.key.port) {
                destination = .address(literal)
            } else if remoteDNS {
                destination = .hostname(self.key.host)
            } else {
                // socks5:// resolves here, off the loop, then hands the proxy an address.
                let loop = self.loop
                let box = UnsafeTransfer(self)
                Resolver.shared.resolve(host: self.key.host, port: self.key.port) { result in
                    loop.execute {
                        let me = box.value
                        guard me.completion != nil else { return }
                        switch result {
                        case .success(let addresses) where !addresses.isEmpty:
                            me.beginSOCKS(.address(addresses[0]), proxy)
                        case .success:
                            me.finish(.failure(HawserError(.cannotResolveHost, "\(me.key.host) has no address")))
                        case .failure(let e):
                            me.finish(.failure(HawserError(.cannotResolveHost, e.description, underlying: e)))
                        }
                    }
                }
                return
            }
            self.beginSOCKS(destination, proxy)
            return
        }
        self.flushProxyOutbox()
    }

    private func beginSOCKS(_ destination: SOCKS5Handshake.Destination, _ proxy: ProxyTarget) {
        do {
            var handshake = try SOCKS5Handshake(destination: destination, port: self.key.port, credentials: proxy.server.credentials)
            self.proxyOutbox = handshake.start()
            self.proxyExchange = .socks(handshake)
        } catch {
            self.finish(.failure(error.hawserError))
            return
        }
        self.flushProxyOutbox()
    }

    private func flushProxyOutbox() {
        while !self.proxyOutbox.isEmpty, self.completion != nil {
            let r = self.proxyOutbox.withUnsafeBytes { raw in
                Result { () throws(IOError) in try Posix.send(self.fd, raw) }
            }
            switch r {
            case .success(.processed(let n)):
                self.proxyOutbox.removeFirst(n)
            case .success(.wouldBlock):
                self.loop.setInterest(fd: self.fd, readable: true, writable: true)
                return
            case .failure(let e):
                self.finish(.failure(HawserError(.proxyError, "writing to the proxy \(self.key.proxy.map { "\($0.server)" } ?? "") failed: \(e)", underlying: e)))
                return
            }
        }
        self.loop.setInterest(fd: self.fd, readable: true, writable: false)
    }

    private func readFromProxy() {
        guard self.completion != nil, let exchange = self.proxyExchange else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let r = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(IOError) in try Posix.read(self.fd, raw) }
        }
        let bytes: [UInt8]
        switch r {
        case .success(.wouldBlock): return
        case .success(.processed(0)):
            switch exchange {
            case .connect(var reader): self.finish(.failure(reader.finish().hawserError))
            case .socks: self.finish(.failure(HawserError(.proxyError, "the SOCKS5 proxy closed the connection during its handshake")))
            }
            return
        case .success(.processed(let n)): bytes = Array(buffer[0..<n])
        case .failure(let e):
            self.finish(.failure(HawserError(.proxyError, "reading from the proxy failed: \(e)", underlying: e)))
            return
        }
        var leftover: [UInt8] = []
        switch exchange {
        case .connect(var reader):
            do {
                let outcome = try reader.receive(bytes)
                self.proxyExchange = .connect(reader)
                guard case .established(let rest) = outcome else { return }
                leftover = rest
            } catch {
                self.finish(.failure(error.hawserError))
                return
            }
        case .socks(var handshake):
            do {
                let step = try handshake.receive(bytes)
                self.proxyExchange = .socks(handshake)
                switch step {
                case .needMore: return
                case .send(let out):
                    self.proxyOutbox += out
                    self.flushProxyOutbox()
                    return
                case .connected(_, let rest): leftover = rest
                }
            } catch {
                self.finish(.failure(error.hawserError))
                return
            }
        }
        guard leftover.isEmpty else {
            self.finish(.failure(HawserError(.proxyError, "the proxy sent \(leftover.count) bytes before the origin could have spoken")))
            return
        }
        self.loop.setInterest(fd: self.fd, readable: false, writable: false)
        self.startTLSOrFinish(registered: true)
    }

    private func startTLSOrFinish(registered: Bool) {
        guard let context = self.tlsContext else {
            if registered { self.loop.deregister(fd: self.fd) }
            self.succeed()
            return
        }
        // TLS: the handshake runs under the same connect timeout.
        self.phase = .handshaking
        self.timings.secureConnectionStart = TaskMetrics.now()
        do {
            let host = self.key.host
            let sni = SocketAddress(ipAddress: host, port: 0) == nil ? host : nil
            self.tls = try TLSStream(client: context, fd: self.fd, serverName: sni, origin: "\(host):\(self.key.port)")
            if !registered {
                try self.loop.register(fd: self.fd, handler: self, readable: false, writable: true)
            } else {
                self.loop.setInterest(fd: self.fd, readable: false, writable: true)
            }
            self.handshakeInterest = (false, true)
        } catch let e as HawserError {
            self.finish(.failure(e))
            return
        } catch {
            self.finish(.failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error)))
            return
        }
        self.continueHandshake()
    }

    private func continueHandshake() {
        guard let tls = self.tls, self.completion != nil else { return }
        switch tls.handshake() {
        case .wantRead:
            self.setHandshakeInterest(read: true, write: false)
        case .wantWrite:
            self.setHandshakeInterest(read: false, write: true)
        case .failed(let message, let reasons):
            self.tlsContext?.removeSession(for: tls.origin)
            let code: HawserError.Code =
                reasons.contains(Int32(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)) || reasons.contains(Int32(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE))
                ? .clientCertificateRequired : .secureConnectionFailed
            self.finish(.failure(HawserError(code, "TLS handshake with \(self.key.host):\(self.key.port) failed: \(message)")))
        case .done:
            self.timings.secureConnectionEnd = TaskMetrics.now()
            self.timings.tlsResumed = tls.isResumed
            self.timings.tlsProtocol = tls.protocolVersion
            self.timings.tlsCipherSuite = tls.cipherSuite
            self.timings.tlsALPN = tls.negotiatedALPN
            self.setHandshakeInterest(read: false, write: false)
            self.phase = .evaluating
            // A resumed session continues one whose chain was accepted (only trusted sessions
            // are kept): the chain is not evaluated again, as curl does.
            guard let hook = self.trustHook, !tls.isResumed else {
                tls.markTrusted()
                self.loop.deregister(fd: self.fd)
                self.succeed()
                return
            }
            let chain = tls.peerCertificates()
            var decided = false
            hook(self, chain) { [unowned(unsafe) self] error in
                guard !decided else { return }
                decided = true
                guard self.completion != nil else { return }
                if let error {
                    self.tlsContext?.removeSession(for: tls.origin)
                    self.finish(.failure(error))
                } else {
                    // The handshake is complete once the chain is accepted (as NSURLSession's metrics).
                    self.timings.secureConnectionEnd = TaskMetrics.now()
                    tls.markTrusted()
                    self.loop.deregister(fd: self.fd)
                    self.succeed()
                }
            }
        }
    }

    private func setHandshakeInterest(read: Bool, write: Bool) {
        guard self.handshakeInterest != (read, write) else { return }
        self.handshakeInterest = (read, write)
        self.loop.setInterest(fd: self.fd, readable: read, writable: write)
    }

    private func succeed() {
        let fd = self.fd
        self.fd = -1
        let address = self.addresses[self.index - 1]
        self.timer?.cancel()
        self.timer = nil
        let c = self.completion
        self.completion = nil
        let tls = self.tls
        self.tls = nil
        c?(self, .success(Established(fd: fd, address: address, timings: self.timings, tls: tls)))
    }

    private func closeSocket() {
        self.tls = nil
        if self.fd >= 0 {
            self.loop.deregister(fd: self.fd)
            Posix.close(self.fd)
            self.fd = -1
        }
    }

    /// Ends the attempt with `result`; closes any half-open socket. Idempotent.
    func finish(_ result: Result<Established, HawserError>) {
        guard let c = self.completion else { return }
        self.completion = nil
        self.timer?.cancel()
        self.timer = nil
        self.closeSocket()
        c(self, result)
    }

}

/// Moves a loop-confined reference through a @Sendable closure that only uses it back on
/// the same loop.
struct UnsafeTransfer<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
