// The connector's side of a proxy: the CONNECT or SOCKS5 exchange on the winning socket (over
// the proxy's TLS when the proxy is https) before the origin's bytes flow, and its reads and
// writes. The machine is told only how the exchange finished.
import HawserBase
import HawserPosix
import HawserProxy
import HawserTLS

#if canImport(Glibc)
import Glibc
#endif

extension Connector {
    private func proxyFinished(_ result: Result<Void, HawserError>) {
        self.feed { $0.proxyExchangeFinished(result, into: &$1) }
    }

    func startProxyExchange() {
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
                let box = LoopBound(self, loop: self.loop)
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

    func flushProxyOutbox() {
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

    func readFromProxy() {
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
}
