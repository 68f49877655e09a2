// The IO shell around ConnectStateMachine: it resolves (off the loop), opens and races the
// sockets, runs TLS to an https proxy and hands the proxy's chain to the proxy's trust hook,
// speaks to the proxy (over that TLS, if any), runs the origin's TLS handshake (inside the
// proxy's TLS, if any) and hands the origin's chain to the trust hook — and asks the machine
// what to do after each of those. Loop-confined. The proxy exchange is in Connector+Proxy.swift,
// the TLS handshakes and trust evaluation (one path for the proxy's and the origin's) in
// Connector+TLS.swift.
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
    enum ProxyExchange {
        case connect(HTTPConnectTunnel.ResponseReader)
        case socks(SOCKS5Handshake)
    }

    let key: ConnectionKey
    let loop: EventLoop
    let timeoutSeconds: Double
    /// The configuration's DNS override (host → IP addresses).
    let dnsOverride: [String: [String]]
    var completion: Completion?
    let tlsContext: TLSContext?
    let trustHook: TrustHook?
    /// Ask the origin to staple an OCSP response (the session's evaluator checks one).
    let requestsStapledOCSP: Bool
    /// For an https proxy: the context its TLS is made from, and who decides about its chain.
    let proxyTLSContext: TLSContext?
    let proxyTrustHook: TrustHook?
    var machine: ConnectStateMachine

    /// Racing sockets by attempt id.
    private var sockets: [Int: AttemptSocket] = [:]
    /// The winning socket once it left the race (proxy exchange, TLS, trust), and its attempt.
    var fd: Int32 = -1
    var winner: (id: Int, address: SocketAddress)?
    var registered = false
    var timer: Scheduled?
    var attemptTimer: Scheduled?
    var timings = ConnectTimings()
    var tls: TLSStream?
    /// The TLS stream to an https proxy, under the proxy exchange and the origin's TLS.
    var proxyTLS: TLSStream?
    var handshakeInterest: (read: Bool, write: Bool) = (false, false)
    var proxyExchange: ProxyExchange?
    /// Bytes for the proxy not yet written.
    var proxyOutbox: [UInt8] = []
    /// Actions not yet run, and whether they are being run (events fed while running queue
    /// their actions behind, so no action runs inside another).
    var pending: [ConnectStateMachine.Action] = []
    var running = false

    /// Where the connection goes: the proxy when there is one, else the origin.
    var dialHost: String { self.key.proxy?.server.host ?? self.key.host }
    var dialPort: Int { self.key.proxy?.server.port ?? self.key.port }

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
    func overridden(_ host: String, port: Int) throws(HawserError) -> [SocketAddress]? {
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
    func feed(_ event: (inout ConnectStateMachine, inout [ConnectStateMachine.Action]) -> Void) {
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
            let box = LoopBound(self, loop: self.loop)
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
            self.startTLS(.proxy)
        case .evaluateProxyTrust:
            self.evaluateTrust(.proxy)
        case .startProxyExchange(let id):
            self.takeWinner(id)
            self.startProxyExchange()
        case .startTLS(let id):
            self.takeWinner(id)
            self.startTLS(.origin)
        case .evaluateTrust:
            self.evaluateTrust(.origin)
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

    func setInterest(read: Bool, write: Bool) throws(IOError) {
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

extension TaskMetrics {
    /// Records the connection an exchange starts on at `now`: its address, whether it was
    /// reused, its TLS parameters, and (for a new one) how opening it went.
    mutating func connectionAssigned(
        reused: Bool,
        remoteAddress: SocketAddress?,
        timings t: Connector.ConnectTimings,
        at now: UInt64
    ) {
        self.isReusedConnection = reused
        self.remoteAddress = remoteAddress
        if !reused {
            self.domainLookupStart = t.domainLookupStart
            self.domainLookupEnd = t.domainLookupEnd
            self.connectStart = t.connectStart
            self.connectEnd = t.connectEnd
            self.secureConnectionStart = t.secureConnectionStart
            self.secureConnectionEnd = t.secureConnectionEnd
            self.isResumedTLSSession = t.tlsResumed
            self.connectAttempts = t.attempts
        }
        self.tlsProtocolVersion = t.tlsProtocol
        self.tlsCipherSuite = t.tlsCipherSuite
        self.tlsALPN = t.tlsALPN
        self.requestStart = now
    }
}
