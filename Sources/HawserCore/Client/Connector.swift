// The IO shell around ConnectStateMachine: it resolves (off the loop), opens and races the
// sockets, runs TLS to an https proxy and hands the proxy's chain to the proxy's trust hook,
// speaks to the proxy (over that TLS, if any), runs the origin's TLS handshake (inside the
// proxy's TLS, if any) and hands the origin's chain to the trust hook — and asks the machine
// what to do after each of those. Loop-confined.
import CHawser
import HawserBase
import HawserPosix
import HawserProxy
import HawserTLS

#if canImport(Glibc)
import Glibc
#endif

final class Connector: EventLoopIOHandler {
    /// A connected (and for https, handshaken and trusted) socket.
    struct Established {
        var fd: Int32
        var address: SocketAddress
        var timings: ConnectTimings
        /// The stream the connection reads and writes through: the origin's TLS (running inside
        /// the proxy's when the proxy is https), or the https proxy's own for a forward proxy,
        /// or nil for plain TCP.
        var tls: TLSStream?
    }

    /// When each phase of opening the connection began and ended (the loop's clock), for the
    /// first task's metrics.
    struct ConnectTimings {
        var domainLookupStart: UInt64?
        var domainLookupEnd: UInt64?
        var connectStart: UInt64?
        var connectEnd: UInt64?
        var secureConnectionStart: UInt64?
        var secureConnectionEnd: UInt64?
        var tlsResumed: Bool?
        var tlsProtocol: String?
        var tlsCipherSuite: String?
        var tlsALPN: String?
        var attempts: [ConnectAttempt] = []
    }

    typealias Completion = (Connector, Result<Established, HawserError>) -> Void
    /// Decides whether the server's chain (leaf first, or why a certificate in it is unusable)
    /// is trusted for `key.host`; calls `decide` exactly once, with nil to accept or the error
    /// that refuses it. May answer later.
    typealias TrustHook = (
        _ connector: Connector, _ chain: Result<[Certificate], CertificateError>,
        _ decide: @escaping (HawserError?) -> Void
    ) -> Void

    /// One racing connect: its socket, registered for writability until it connects or fails.
    private final class AttemptSocket: EventLoopIOHandler {
        let id: Int
        let fd: Int32
        unowned(unsafe) let connector: Connector

        init(id: Int, fd: Int32, connector: Connector) {
            self.id = id
            self.fd = fd
            self.connector = connector
        }

        func ioWritable() { self.connector.attemptReady(self) }
        func ioReadable() { self.connector.attemptReady(self) }
    }

    /// The exchange with a proxy before the origin's bytes flow (CONNECT or SOCKS5).
    private enum ProxyExchange {
        case connect(HTTPConnectTunnel.ResponseReader)
        case socks(SOCKS5Handshake)
    }

    let key: ConnectionKey
    private let loop: EventLoop
    private let timeoutSeconds: Double
    /// The configuration's DNS override (host → IP addresses).
    private let dnsOverride: [String: [String]]
    private var completion: Completion?
    private let tlsContext: TLSContext?
    private let trustHook: TrustHook?
    /// Ask the origin to staple an OCSP response (the session's evaluator checks one).
    private let requestsStapledOCSP: Bool
    /// For an https proxy: the context its TLS is made from, and who decides about its chain.
    private let proxyTLSContext: TLSContext?
    private let proxyTrustHook: TrustHook?
    private var machine: ConnectStateMachine

    /// Racing sockets by attempt id.
    private var sockets: [Int: AttemptSocket] = [:]
    /// The winning socket once it left the race (proxy exchange, TLS, trust), and its attempt.
    private var fd: Int32 = -1
    private var winner: (id: Int, address: SocketAddress)?
    private var registered = false
    private var timer: Scheduled?
    private var attemptTimer: Scheduled?
    private var timings = ConnectTimings()
    private var tls: TLSStream?
    /// The TLS stream to an https proxy, under the proxy exchange and the origin's TLS.
    private var proxyTLS: TLSStream?
    private var handshakeInterest: (read: Bool, write: Bool) = (false, false)
    private var proxyExchange: ProxyExchange?
    /// Bytes for the proxy not yet written.
    private var proxyOutbox: [UInt8] = []
    /// Actions not yet run, and whether they are being run (events fed while running queue
    /// their actions behind, so no action runs inside another).
    private var pending: [ConnectStateMachine.Action] = []
    private var running = false

    /// Where the connection goes: the proxy when there is one, else the origin.
    private var dialHost: String { self.key.proxy?.server.host ?? self.key.host }
    private var dialPort: Int { self.key.proxy?.server.port ?? self.key.port }

    init(
        key: ConnectionKey,
        loop: EventLoop,
        timeoutSeconds: Double,
        dnsOverride: [String: [String]] = [:],
        attemptDelay: UInt64 = ConnectStateMachine.defaultAttemptDelay,
        tlsContext: TLSContext? = nil,
        trustHook: TrustHook? = nil,
        requestsStapledOCSP: Bool = false,
        proxyTLSContext: TLSContext? = nil,
        proxyTrustHook: TrustHook? = nil,
        completion: @escaping Completion
    ) {
        self.key = key
        self.loop = loop
        self.timeoutSeconds = timeoutSeconds
        self.dnsOverride = dnsOverride
        self.tlsContext = tlsContext
        self.trustHook = trustHook
        self.requestsStapledOCSP = requestsStapledOCSP
        self.proxyTLSContext = proxyTLSContext
        self.proxyTrustHook = proxyTrustHook
        self.completion = completion
        let destination: String
        if let proxy = key.proxy {
            destination = "the proxy \(proxy.server)"
        } else if let path = key.unixSocketPath {
            destination = "the Unix-domain socket \(path)"
        } else {
            destination = "\(key.host):\(key.port)"
        }
        var proxyTLS = false
        if case .https? = key.proxy?.server.kind { proxyTLS = proxyTLSContext != nil }
        let steps = ConnectStateMachine.Steps(
            proxyTLS: proxyTLS,
            proxyExchange: key.proxy.map { $0.mode != .forward } ?? false,
            tls: tlsContext != nil
        )
        self.machine = ConnectStateMachine(
            steps: steps,
            destination: destination,
            viaProxy: key.proxy != nil,
            attemptDelay: attemptDelay
        )
    }

    func start() {
        self.timer = self.loop.scheduleInLoop(in: SessionContext.nanos(self.timeoutSeconds)) { [unowned(unsafe) self] in
            self.timer = nil
            let via = self.key.proxy.map { " via \($0.server)" } ?? ""
            let tried = self.machine.attempts.map { "\($0.address)" }
            let attempts = tried.isEmpty ? "" : " (tried \(tried.joined(separator: ", ")))"
            let error = HawserError(
                .connectTimeout,
                "connecting to \(self.key.host):\(self.key.port)\(via) took longer than \(self.timeoutSeconds) s\(attempts)"
            )
            self.feed { $0.abort(error, now: self.loop.now, into: &$1) }
        }
        let known: [SocketAddress]?
        do {
            known = try self.knownAddresses()
        } catch {
            self.feed { $0.abort(error, now: self.loop.now, into: &$1) }
            return
        }
        if known == nil { self.timings.domainLookupStart = self.loop.now }
        self.feed { $0.start(addresses: known, now: self.loop.now, into: &$1) }
    }

    /// Addresses known without the resolver: a Unix-domain path, an IP literal, or the
    /// configuration's DNS override for the name. nil: resolve.
    private func knownAddresses() throws(HawserError) -> [SocketAddress]? {
        if self.key.proxy == nil, let path = self.key.unixSocketPath {
            guard let address = SocketAddress(unixPath: path) else {
                throw HawserError(.invalidRequest, "'\(path)' cannot be a Unix-domain socket path")
            }
            return [address]
        }
        if let literal = SocketAddress(ipAddress: self.dialHost, port: self.dialPort) { return [literal] }
        return try self.overridden(self.dialHost, port: self.dialPort)
    }

    /// The DNS override's addresses for `host` and `port` (an entry `HOST:PORT` first, then one
    /// for `HOST` alone), nil when it has none. Redirects go through here as every connection
    /// does, so an override applies to every hop that goes to its name.
    private func overridden(_ host: String, port: Int) throws(HawserError) -> [SocketAddress]? {
        guard !self.dnsOverride.isEmpty else { return nil }
        let name = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        guard
            let texts = self.dnsOverride["\(name):\(port)"] ?? self.dnsOverride["\(name.lowercased()):\(port)"]
                ?? self.dnsOverride[host] ?? self.dnsOverride[host.lowercased()]
        else { return nil }
        var addresses: [SocketAddress] = []
        for text in texts {
            guard let address = SocketAddress(ipAddress: text, port: port) else {
                throw HawserError(.invalidRequest, "dnsOverride maps \(host) to '\(text)', which is not an IP address")
            }
            addresses.append(address)
        }
        return addresses
    }

    /// Ends the attempt with `error` (the pool shutting down); closes every socket. Idempotent.
    func abort(_ error: HawserError) {
        self.feed { $0.abort(error, now: self.loop.now, into: &$1) }
    }

    // MARK: - Running actions

    /// Reports one event to the machine; its actions queue behind any being run.
    private func feed(_ event: (inout ConnectStateMachine, inout [ConnectStateMachine.Action]) -> Void) {
        event(&self.machine, &self.pending)
        guard !self.running else { return }
        self.running = true
        var i = 0
        while i < self.pending.count {
            let action = self.pending[i]
            i += 1
            self.perform(action)
        }
        self.pending.removeAll(keepingCapacity: true)
        self.running = false
    }

    private func perform(_ action: ConnectStateMachine.Action) {
        switch action {
        case .resolve:
            let loop = self.loop
            let box = UnsafeTransfer(self)
            Resolver.shared.resolve(host: self.dialHost, port: self.dialPort) { result in
                loop.execute {
                    let me = box.value
                    guard me.completion != nil else { return }
                    me.timings.domainLookupEnd = me.loop.now
                    me.feed { $0.resolved(result, now: me.loop.now, into: &$1) }
                }
            }
        case .startAttempt(let id, let address):
            self.startAttempt(id, address)
        case .armAttemptTimer(let nanoseconds):
            self.attemptTimer?.cancel()
            self.attemptTimer = self.loop.scheduleInLoop(in: nanoseconds) { [unowned(unsafe) self] in
                self.attemptTimer = nil
                self.feed { $0.attemptTimerFired(now: self.loop.now, into: &$1) }
            }
        case .cancelAttemptTimer:
            self.attemptTimer?.cancel()
            self.attemptTimer = nil
        case .closeAttempt(let id):
            if let socket = self.sockets.removeValue(forKey: id) {
                self.loop.deregister(fd: socket.fd)
                Posix.close(socket.fd)
            } else if self.winner?.id == id {
                self.closeWinner()
            }
        case .startProxyTLS(let id):
            self.takeWinner(id)
            self.startProxyTLS()
        case .evaluateProxyTrust:
            self.evaluateProxyTrust()
        case .startProxyExchange(let id):
            self.takeWinner(id)
            self.startProxyExchange()
        case .startTLS(let id):
            self.takeWinner(id)
            self.startTLS()
        case .evaluateTrust:
            self.evaluateTrust()
        case .succeed(let id):
            self.takeWinner(id)
            self.succeed()
        case .fail(let error):
            self.end(.failure(error))
        }
    }

    // MARK: - Racing

    private func startAttempt(_ id: Int, _ address: SocketAddress) {
        if self.timings.connectStart == nil { self.timings.connectStart = self.loop.now }
        let fd: Int32
        do {
            fd = try Posix.socket(family: address.family)
        } catch {
            self.feed { $0.attemptFailed(id, reason: "\(error)", now: self.loop.now, into: &$1) }
            return
        }
        let socket = AttemptSocket(id: id, fd: fd, connector: self)
        self.sockets[id] = socket
        do {
            if address.family != AF_UNIX {
                try Posix.setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1)
            }
            // A connect that completes at once (Unix-domain sockets do) is also reported as
            // writable by the next epoll_wait: one path for both.
            _ = try Posix.connect(fd, address)
            try self.loop.register(fd: fd, handler: socket, readable: false, writable: true)
        } catch {
            self.feed { $0.attemptFailed(id, reason: "\(error)", now: self.loop.now, into: &$1) }
        }
    }

    /// An attempt's socket became writable (or errored): its connect finished one way or the other.
    private func attemptReady(_ socket: AttemptSocket) {
        guard self.sockets[socket.id] === socket else { return }
        let error: Int32
        do {
            error = try Posix.socketError(socket.fd)
        } catch {
            self.feed { $0.attemptFailed(socket.id, reason: "\(error)", now: self.loop.now, into: &$1) }
            return
        }
        if error != 0 {
            self.feed {
                $0.attemptFailed(
                    socket.id,
                    reason: "\(IOError(errnoCode: error, function: "connect"))",
                    now: self.loop.now,
                    into: &$1
                )
            }
            return
        }
        self.timings.connectEnd = self.loop.now
        self.feed { $0.attemptConnected(socket.id, now: self.loop.now, into: &$1) }
    }

    /// Moves the winning attempt's socket out of the race: from now on this connector handles it.
    private func takeWinner(_ id: Int) {
        guard let socket = self.sockets.removeValue(forKey: id) else { return }
        self.loop.deregister(fd: socket.fd)
        self.fd = socket.fd
        self.registered = false
        self.winner = (id, self.machine.attempts[id].address)
    }

    private func closeWinner() {
        self.tls = nil
        self.proxyTLS = nil
        guard self.fd >= 0 else { return }
        if self.registered { self.loop.deregister(fd: self.fd) }
        self.registered = false
        Posix.close(self.fd)
        self.fd = -1
    }

    private func setInterest(read: Bool, write: Bool) throws(IOError) {
        if self.registered {
            self.loop.setInterest(fd: self.fd, readable: read, writable: write)
        } else {
            try self.loop.register(fd: self.fd, handler: self, readable: read, writable: write)
            self.registered = true
        }
    }

    // MARK: - Events on the winning socket

    func ioWritable() {
        switch self.machine.phase {
        case .tlsHandshake, .proxyTLSHandshake: self.continueHandshake()
        case .proxyHandshake:
            self.flushProxyOutbox()
            // Over TLS a read may have waited for the socket to be writable.
            if self.proxyTLS != nil { self.readFromProxy() }
        default: break
        }
    }

    func ioReadable() {
        switch self.machine.phase {
        case .tlsHandshake, .proxyTLSHandshake: self.continueHandshake()
        case .proxyHandshake:
            // Over TLS a write may have waited for the socket to be readable.
            if self.proxyTLS != nil, !self.proxyOutbox.isEmpty { self.flushProxyOutbox() }
            self.readFromProxy()
        default: break
        }
    }

    // MARK: - Proxies

    private func proxyFinished(_ result: Result<Void, HawserError>) {
        self.feed { $0.proxyExchangeFinished(result, into: &$1) }
    }

    private func startProxyExchange() {
        guard let proxy = self.key.proxy else { return }
        do {
            try self.setInterest(read: true, write: false)
        } catch {
            self.proxyFinished(
                .failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error))
            )
            return
        }
        switch proxy.mode {
        case .forward:
            self.proxyFinished(.success(()))
            return
        case .connectTunnel:
            do {
                self.proxyOutbox = try HTTPConnectTunnel.requestHead(
                    host: self.key.host,
                    port: self.key.port,
                    credentials: proxy.server.credentials
                )
            } catch {
                self.proxyFinished(.failure(error.hawserError))
                return
            }
            self.proxyExchange = .connect(HTTPConnectTunnel.ResponseReader(host: self.key.host, port: self.key.port))
        case .socks5(let remoteDNS):
            if let literal = SocketAddress(ipAddress: self.key.host, port: self.key.port) {
                self.beginSOCKS(.address(literal), proxy)
            } else if let override = try? self.overridden(self.key.host, port: self.key.port),
                let first = override.first
            {
                // The override says where the origin is, wherever the proxy is.
                self.beginSOCKS(.address(first), proxy)
            } else if remoteDNS {
                self.beginSOCKS(.hostname(self.key.host), proxy)
            } else {
                // socks5:// resolves here, off the loop, then hands the proxy an address.
                let loop = self.loop
                let box = UnsafeTransfer(self)
                Resolver.shared.resolve(host: self.key.host, port: self.key.port) { result in
                    loop.execute {
                        let me = box.value
                        guard me.completion != nil, me.machine.phase == .proxyHandshake else { return }
                        switch result {
                        case .success(let addresses) where !addresses.isEmpty:
                            me.beginSOCKS(.address(addresses[0]), proxy)
                        case .success:
                            me.proxyFinished(.failure(HawserError(.cannotResolveHost, "\(me.key.host) has no address")))
                        case .failure(let e):
                            me.proxyFinished(.failure(HawserError(.cannotResolveHost, e.description, underlying: e)))
                        }
                    }
                }
            }
            return
        }
        self.flushProxyOutbox()
    }

    private func beginSOCKS(_ destination: SOCKS5Handshake.Destination, _ proxy: ProxyTarget) {
        do {
            var handshake = try SOCKS5Handshake(
                destination: destination,
                port: self.key.port,
                credentials: proxy.server.credentials
            )
            self.proxyOutbox = handshake.start()
            self.proxyExchange = .socks(handshake)
        } catch {
            self.proxyFinished(.failure(error.hawserError))
            return
        }
        self.flushProxyOutbox()
    }

    /// What one read or write of the proxy exchange did, on the socket or over the proxy's TLS.
    private enum ProxyIO {
        case bytes(Int)
        /// Nothing moved: wait for the socket to become readable (or writable).
        case wait(writable: Bool)
        case eof
        case failed(HawserError)
    }

    private var proxyName: String { self.key.proxy.map { "\($0.server)" } ?? "the proxy" }

    private func proxySend(_ raw: UnsafeRawBufferPointer) -> ProxyIO {
        if let tls = self.proxyTLS {
            switch tls.write(raw) {
            case .bytes(let n): return .bytes(n)
            case .wantWrite: return .wait(writable: true)
            case .wantRead: return .wait(writable: false)
            case .closed:
                return .failed(HawserError(.proxyError, "the proxy \(self.proxyName) closed the TLS connection"))
            case .failed(let message, _):
                return .failed(
                    HawserError(.proxyError, "writing to the proxy \(self.proxyName) over TLS failed: \(message)")
                )
            }
        }
        do {
            switch try Posix.send(self.fd, raw) {
            case .processed(let n): return .bytes(n)
            case .wouldBlock: return .wait(writable: true)
            }
        } catch {
            return .failed(
                HawserError(.proxyError, "writing to the proxy \(self.proxyName) failed: \(error)", underlying: error)
            )
        }
    }

    private func proxyReceive(_ raw: UnsafeMutableRawBufferPointer) -> ProxyIO {
        if let tls = self.proxyTLS {
            switch tls.read(into: raw) {
            case .bytes(let n): return .bytes(n)
            case .wantRead: return .wait(writable: false)
            case .wantWrite: return .wait(writable: true)
            case .closed: return .eof
            case .failed(let message, _):
                return .failed(
                    HawserError(.proxyError, "reading from the proxy \(self.proxyName) over TLS failed: \(message)")
                )
            }
        }
        do {
            switch try Posix.read(self.fd, raw) {
            case .processed(0): return .eof
            case .processed(let n): return .bytes(n)
            case .wouldBlock: return .wait(writable: false)
            }
        } catch {
            return .failed(
                HawserError(.proxyError, "reading from the proxy \(self.proxyName) failed: \(error)", underlying: error)
            )
        }
    }

    private func flushProxyOutbox() {
        while !self.proxyOutbox.isEmpty, self.machine.phase == .proxyHandshake {
            switch self.proxyOutbox.withUnsafeBytes({ self.proxySend($0) }) {
            case .bytes(let n):
                self.proxyOutbox.removeFirst(n)
            case .wait(let writable):
                self.loop.setInterest(fd: self.fd, readable: true, writable: writable)
                return
            case .eof:
                self.proxyFinished(
                    .failure(HawserError(.proxyError, "the proxy \(self.proxyName) closed the connection"))
                )
                return
            case .failed(let error):
                self.proxyFinished(.failure(error))
                return
            }
        }
        if self.machine.phase == .proxyHandshake { self.loop.setInterest(fd: self.fd, readable: true, writable: false) }
    }

    private func readFromProxy() {
        // Over TLS, records OpenSSL read ahead are not seen by epoll: read while it holds some.
        repeat {
            self.readFromProxyOnce()
        } while self.machine.phase == .proxyHandshake && self.proxyTLS?.hasBufferedPlaintext == true
    }

    private func readFromProxyOnce() {
        guard self.machine.phase == .proxyHandshake, let exchange = self.proxyExchange else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let bytes: [UInt8]
        switch buffer.withUnsafeMutableBytes({ self.proxyReceive($0) }) {
        case .wait(let writable):
            if writable || !self.proxyOutbox.isEmpty {
                self.loop.setInterest(fd: self.fd, readable: true, writable: true)
            }
            return
        case .eof:
            switch exchange {
            case .connect(var reader): self.proxyFinished(.failure(reader.finish().hawserError))
            case .socks:
                self.proxyFinished(
                    .failure(HawserError(.proxyError, "the SOCKS5 proxy closed the connection during its handshake"))
                )
            }
            return
        case .bytes(let n): bytes = Array(buffer[0..<n])
        case .failed(let error):
            self.proxyFinished(.failure(error))
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
                self.proxyFinished(.failure(error.hawserError))
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
                self.proxyFinished(.failure(error.hawserError))
                return
            }
        }
        guard leftover.isEmpty else {
            self.proxyFinished(
                .failure(
                    HawserError(
                        .proxyError,
                        "the proxy sent \(leftover.count) bytes before the origin could have spoken"
                    )
                )
            )
            return
        }
        self.loop.setInterest(fd: self.fd, readable: false, writable: false)
        self.proxyFinished(.success(()))
    }

    // MARK: - TLS

    /// TLS to the https proxy, with SNI naming the proxy and its own session cache key.
    private func startProxyTLS() {
        guard let context = self.proxyTLSContext, let proxy = self.key.proxy else { return }
        do {
            let host = proxy.server.host
            let sni = SocketAddress(ipAddress: host, port: 0) == nil ? host.lowercased() : nil
            self.proxyTLS = try TLSStream(
                client: context,
                fd: self.fd,
                serverName: sni,
                origin: Self.proxyTLSOrigin(proxy.server)
            )
            try self.setInterest(read: false, write: true)
            self.handshakeInterest = (false, true)
        } catch let e as TLSError {
            self.feed { $0.proxyTLSFinished(.failure(HawserError(e)), into: &$1) }
            return
        } catch {
            self.feed {
                $0.proxyTLSFinished(
                    .failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error)),
                    into: &$1
                )
            }
            return
        }
        self.continueHandshake()
    }

    /// The key the proxy's TLS sessions are cached under: apart from any origin's, so a session
    /// trusted for one can never resume the other past its own evaluator.
    static func proxyTLSOrigin(_ server: ProxyServer) -> String { "proxy \(server.host):\(server.port)" }

    private func startTLS() {
        guard let context = self.tlsContext else { return }
        // The handshake runs under the same connect timeout.
        self.timings.secureConnectionStart = self.loop.now
        do {
            let host = self.key.host
            let sni = SocketAddress(ipAddress: host, port: 0) == nil ? host : nil
            if let outer = self.proxyTLS {
                // Through an https proxy: the origin's TLS runs inside the proxy's.
                self.tls = try TLSStream(client: context, over: outer, serverName: sni, origin: self.tlsOrigin)
            } else {
                self.tls = try TLSStream(client: context, fd: self.fd, serverName: sni, origin: self.tlsOrigin)
            }
            if self.requestsStapledOCSP { self.tls?.requestStapledOCSP() }
            try self.setInterest(read: false, write: true)
            self.handshakeInterest = (false, true)
        } catch let e as TLSError {
            self.feed { $0.handshakeFinished(.failure(HawserError(e)), into: &$1) }
            return
        } catch {
            self.feed {
                $0.handshakeFinished(
                    .failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error)),
                    into: &$1
                )
            }
            return
        }
        self.continueHandshake()
    }

    /// The key TLS sessions are cached under: one origin, whatever address it was reached at.
    private var tlsOrigin: String {
        if let path = self.key.unixSocketPath { return "unix:\(path)" }
        return "\(self.key.host):\(self.key.port)"
    }

    private func continueHandshake() {
        if self.machine.phase == .proxyTLSHandshake {
            self.continueProxyHandshake()
            return
        }
        guard let tls = self.tls, self.machine.phase == .tlsHandshake else { return }
        switch tls.handshake() {
        case .wantRead:
            self.setHandshakeInterest(read: true, write: false)
        case .wantWrite:
            self.setHandshakeInterest(read: false, write: true)
        case .failed(let message, let reasons):
            self.tlsContext?.removeSession(for: tls.origin)
            let code: HawserError.Code =
                reasons.contains(Int32(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED))
                    || reasons.contains(Int32(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE))
                ? .clientCertificateRequired : .secureConnectionFailed
            self.feed {
                $0.handshakeFinished(
                    .failure(
                        HawserError(code, "TLS handshake with \(self.key.host):\(self.key.port) failed: \(message)")
                    ),
                    into: &$1
                )
            }
        case .done:
            self.timings.secureConnectionEnd = self.loop.now
            self.timings.tlsResumed = tls.isResumed
            self.timings.tlsProtocol = tls.protocolVersion
            self.timings.tlsCipherSuite = tls.cipherSuite
            self.timings.tlsALPN = tls.negotiatedALPN
            self.setHandshakeInterest(read: false, write: false)
            // Without a hook (no policy at all) the handshake is the whole check.
            self.feed { $0.handshakeFinished(.success(tls.isResumed || self.trustHook == nil), into: &$1) }
        }
    }

    private func continueProxyHandshake() {
        guard let tls = self.proxyTLS, let proxy = self.key.proxy else { return }
        switch tls.handshake() {
        case .wantRead:
            self.setHandshakeInterest(read: true, write: false)
        case .wantWrite:
            self.setHandshakeInterest(read: false, write: true)
        case .failed(let message, let reasons):
            self.proxyTLSContext?.removeSession(for: tls.origin)
            let code: HawserError.Code =
                TLSStream.isClientCertificateRefusal(reasons) ? .clientCertificateRequired : .secureConnectionFailed
            self.feed {
                $0.proxyTLSFinished(
                    .failure(HawserError(code, "TLS handshake with the proxy \(proxy.server) failed: \(message)")),
                    into: &$1
                )
            }
        case .done:
            self.setHandshakeInterest(read: false, write: false)
            let resumed = tls.isResumed
            // A resumed session was trusted before (only those are kept); without a hook the
            // handshake is the whole check.
            if resumed || self.proxyTrustHook == nil { tls.markTrusted() }
            self.feed { $0.proxyTLSFinished(.success(resumed || self.proxyTrustHook == nil), into: &$1) }
        }
    }

    private func evaluateProxyTrust() {
        guard let tls = self.proxyTLS, let hook = self.proxyTrustHook else { return }
        let chain = tls.peerCertificates()
        var decided = false
        hook(self, chain) { [unowned(unsafe) self] error in
            guard !decided else { return }
            decided = true
            guard self.machine.phase == .evaluatingProxyTrust else { return }
            if error != nil {
                self.proxyTLSContext?.removeSession(for: tls.origin)
            } else {
                // Its sessions may be kept from now on.
                tls.markTrusted()
            }
            self.feed { $0.proxyTrustDecided(error, into: &$1) }
        }
    }

    /// The OCSP response the origin stapled to the handshake, if it stapled one.
    var stapledOCSPResponse: [UInt8]? { self.tls?.stapledOCSPResponse() }

    private func evaluateTrust() {
        guard let tls = self.tls, let hook = self.trustHook else { return }
        let chain = tls.peerCertificates()
        var decided = false
        hook(self, chain) { [unowned(unsafe) self] error in
            guard !decided else { return }
            decided = true
            guard self.machine.phase == .evaluatingTrust else { return }
            if error != nil {
                self.tlsContext?.removeSession(for: tls.origin)
            } else {
                // The handshake is complete once the chain is accepted (as NSURLSession's metrics).
                self.timings.secureConnectionEnd = self.loop.now
            }
            self.feed { $0.trustDecided(error, into: &$1) }
        }
    }

    private func setHandshakeInterest(read: Bool, write: Bool) {
        guard self.handshakeInterest != (read, write) else { return }
        self.handshakeInterest = (read, write)
        self.loop.setInterest(fd: self.fd, readable: read, writable: write)
    }

    // MARK: - Ending

    private func succeed() {
        guard let winner = self.winner else { return }
        self.tls?.markTrusted()
        if self.registered { self.loop.deregister(fd: self.fd) }
        self.registered = false
        let fd = self.fd
        self.fd = -1
        // The origin's TLS (which holds the proxy's, when it runs inside it), or for a forward
        // proxy over https the proxy's own.
        let tls = self.tls ?? self.proxyTLS
        self.tls = nil
        self.proxyTLS = nil
        self.timings.attempts = self.machine.reportedAttempts
        self.end(.success(Established(fd: fd, address: winner.address, timings: self.timings, tls: tls)))
    }

    private func end(_ result: Result<Established, HawserError>) {
        guard let c = self.completion else { return }
        self.completion = nil
        self.timer?.cancel()
        self.timer = nil
        self.attemptTimer?.cancel()
        self.attemptTimer = nil
        if case .failure = result {
            // The machine closed every socket it knew of; nothing may outlive a failure.
            for socket in self.sockets.values {
                self.loop.deregister(fd: socket.fd)
                Posix.close(socket.fd)
            }
            self.sockets.removeAll()
            self.closeWinner()
        }
        c(self, result)
    }
}
