// The connector's TLS: one handshake and trust-evaluation path for both of its TLS legs, the
// https proxy's (on the socket) and the origin's (on the socket, or inside the proxy's). A leg
// names what differs: its context, its stream, its trust hook, its session-cache key, its SNI and
// the machine's events; the steps (make the stream, drive the handshake, classify a failure,
// hand the chain to the hook once, keep sessions only once trusted) are the same code.
import CHawser
import HawserBase
import HawserPosix
import HawserProxy
import HawserTLS

extension Connector {
    /// One of the connector's two TLS handshakes.
    enum TLSLeg {
        /// To the https proxy, with SNI naming the proxy and its own session-cache key.
        case proxy
        /// To the origin, inside the proxy's TLS when there is one.
        case origin
    }

    /// The context the leg's TLS is made from.
    private func context(_ leg: TLSLeg) -> TLSContext? {
        leg == .proxy ? self.proxyTLSContext : self.tlsContext
    }

    /// The leg's trust evaluator; nil: the handshake is the whole check.
    private func trustHook(_ leg: TLSLeg) -> TrustHook? {
        leg == .proxy ? self.proxyTrustHook : self.trustHook
    }

    /// The leg's stream, once its handshake began.
    private func stream(_ leg: TLSLeg) -> TLSStream? {
        leg == .proxy ? self.proxyTLS : self.tls
    }

    /// The machine's answer to the end of the leg's handshake (`trusted`: no evaluation needed).
    private func handshakeFinished(_ leg: TLSLeg, _ result: Result<Bool, HawserError>) {
        switch leg {
        case .proxy: self.feed { $0.proxyTLSFinished(result, into: &$1) }
        case .origin: self.feed { $0.handshakeFinished(result, into: &$1) }
        }
    }

    /// The key the proxy's TLS sessions are cached under: apart from any origin's, so a session
    /// trusted for one can never resume the other past its own evaluator.
    static func proxyTLSOrigin(_ server: ProxyServer) -> String { "proxy \(server.host):\(server.port)" }

    /// The key the origin's TLS sessions are cached under: one origin, whatever address it was
    /// reached at.
    private var tlsOrigin: String {
        if let path = self.key.unixSocketPath { return "unix:\(path)" }
        return "\(self.key.host):\(self.key.port)"
    }

    /// Makes the leg's stream and starts its handshake (under the same connect timeout).
    func startTLS(_ leg: TLSLeg) {
        guard let context = self.context(leg) else { return }
        do {
            switch leg {
            case .proxy:
                guard let proxy = self.key.proxy else { return }
                let host = proxy.server.host
                let sni = SocketAddress(ipAddress: host, port: 0) == nil ? host.lowercased() : nil
                self.proxyTLS = try TLSStream(
                    client: context,
                    fd: self.fd,
                    serverName: sni,
                    origin: Self.proxyTLSOrigin(proxy.server)
                )
            case .origin:
                self.timings.secureConnectionStart = self.loop.now
                let host = self.key.host
                let sni = SocketAddress(ipAddress: host, port: 0) == nil ? host : nil
                if let outer = self.proxyTLS {
                    // Through an https proxy: the origin's TLS runs inside the proxy's.
                    self.tls = try TLSStream(client: context, over: outer, serverName: sni, origin: self.tlsOrigin)
                } else {
                    self.tls = try TLSStream(client: context, fd: self.fd, serverName: sni, origin: self.tlsOrigin)
                }
                if self.requestsStapledOCSP { self.tls?.requestStapledOCSP() }
            }
            try self.setInterest(read: false, write: true)
            self.handshakeInterest = (false, true)
        } catch let e as TLSError {
            self.handshakeFinished(leg, .failure(HawserError(e)))
            return
        } catch {
            self.handshakeFinished(
                leg,
                .failure(HawserError(.ioError, "cannot register the socket: \(error)", underlying: error))
            )
            return
        }
        self.continueHandshake()
    }

    /// Drives the handshake of the leg the machine is in (called on the socket's readiness).
    func continueHandshake() {
        let leg: TLSLeg
        switch self.machine.phase {
        case .proxyTLSHandshake: leg = .proxy
        case .tlsHandshake: leg = .origin
        default: return
        }
        guard let tls = self.stream(leg) else { return }
        switch tls.handshake() {
        case .wantRead:
            self.setHandshakeInterest(read: true, write: false)
        case .wantWrite:
            self.setHandshakeInterest(read: false, write: true)
        case .failed(let message, let reasons):
            self.context(leg)?.removeSession(for: tls.origin)
            let code: HawserError.Code =
                TLSStream.isClientCertificateRefusal(reasons) ? .clientCertificateRequired : .secureConnectionFailed
            let peer =
                switch leg {
                case .proxy: "the proxy \(self.key.proxy.map { "\($0.server)" } ?? "")"
                case .origin: "\(self.key.host):\(self.key.port)"
                }
            self.handshakeFinished(leg, .failure(HawserError(code, "TLS handshake with \(peer) failed: \(message)")))
        case .done:
            if leg == .origin {
                self.timings.secureConnectionEnd = self.loop.now
                self.timings.tlsResumed = tls.isResumed
                self.timings.tlsProtocol = tls.protocolVersion
                self.timings.tlsCipherSuite = tls.cipherSuite
                self.timings.tlsALPN = tls.negotiatedALPN
            }
            self.setHandshakeInterest(read: false, write: false)
            // A resumed session was trusted before (only those are kept); without a hook the
            // handshake is the whole check.
            let trusted = tls.isResumed || self.trustHook(leg) == nil
            if trusted { tls.markTrusted() }
            self.handshakeFinished(leg, .success(trusted))
        }
    }

    /// Hands the leg's chain to its trust hook; the first answer decides (later ones are
    /// ignored, as is an answer after the connect ended).
    func evaluateTrust(_ leg: TLSLeg) {
        guard let tls = self.stream(leg), let hook = self.trustHook(leg) else { return }
        let chain = tls.peerCertificates()
        let phase: ConnectStateMachine.Phase = leg == .proxy ? .evaluatingProxyTrust : .evaluatingTrust
        var decided = false
        hook(self, chain) { [unowned(unsafe) self] error in
            guard !decided else { return }
            decided = true
            guard self.machine.phase == phase else { return }
            if error != nil {
                self.context(leg)?.removeSession(for: tls.origin)
            } else {
                // Its sessions may be kept from now on.
                tls.markTrusted()
                // The handshake is complete once the chain is accepted (as NSURLSession's metrics).
                if leg == .origin { self.timings.secureConnectionEnd = self.loop.now }
            }
            switch leg {
            case .proxy: self.feed { $0.proxyTrustDecided(error, into: &$1) }
            case .origin: self.feed { $0.trustDecided(error, into: &$1) }
            }
        }
    }

    /// The OCSP response the origin stapled to the handshake, if it stapled one.
    var stapledOCSPResponse: [UInt8]? { self.tls?.stapledOCSPResponse() }

    func setHandshakeInterest(read: Bool, write: Bool) {
        guard self.handshakeInterest != (read, write) else { return }
        self.handshakeInterest = (read, write)
        self.loop.setInterest(fd: self.fd, readable: read, writable: write)
    }
}
