import Testing

// The connect state machine without sockets: Happy Eyeballs ordering and pacing, the winner and
// the losers, failures, the optional proxy / TLS / trust steps, and aborts. Every transition of
// docs/STATE-MACHINES.md's connect table has a test here.
@testable import HawserCore

@Suite("Connect state machine (pure)")
struct ConnectStateMachineTests {
    typealias Machine = ConnectStateMachine
    typealias Action = ConnectStateMachine.Action

    static let v6a = SocketAddress(ipAddress: "2001:db8::1", port: 443)!
    static let v6b = SocketAddress(ipAddress: "2001:db8::2", port: 443)!
    static let v4a = SocketAddress(ipAddress: "192.0.2.1", port: 443)!
    static let v4b = SocketAddress(ipAddress: "192.0.2.2", port: 443)!
    static let delay: UInt64 = 250_000_000

    static func machine(
        proxyTLS: Bool = false,
        proxy: Bool = false,
        tls: Bool = false,
        viaProxy: Bool = false
    ) -> Machine {
        Machine(
            steps: .init(proxyTLS: proxyTLS, proxyExchange: proxy, tls: tls),
            destination: "example.com:443",
            viaProxy: viaProxy
        )
    }

    @Test(
        "addresses alternate families from the resolver's first address's family on; duplicates dropped (RFC 8305 §4)"
    )
    func ordering() {
        #expect(
            Machine.happyEyeballsOrder([Self.v6a, Self.v6b, Self.v4a, Self.v4b]) == [
                Self.v6a, Self.v4a, Self.v6b, Self.v4b,
            ]
        )
        // The resolver (RFC 6724, gai.conf) put IPv4 first: IPv4 leads.
        #expect(
            Machine.happyEyeballsOrder([Self.v4a, Self.v4b, Self.v6a, Self.v6b]) == [
                Self.v4a, Self.v6a, Self.v4b, Self.v6b,
            ]
        )
        #expect(
            Machine.happyEyeballsOrder([Self.v4a, Self.v6a, Self.v4b, Self.v4a]) == [Self.v4a, Self.v6a, Self.v4b]
        )
        #expect(
            Machine.happyEyeballsOrder([Self.v6b, Self.v4a, Self.v6a, Self.v6b]) == [Self.v6b, Self.v4a, Self.v6a]
        )
        #expect(Machine.happyEyeballsOrder([Self.v4a]) == [Self.v4a])
        let unix = SocketAddress(unixPath: "/run/app.sock")!
        #expect(Machine.happyEyeballsOrder([unix]) == [unix])
    }

    @Test("idle → resolving → racing: unknown addresses are resolved first; a resolution failure fails")
    func resolving() {
        var m = Self.machine()
        #expect(m.start(addresses: nil, now: 0) == [.resolve])
        #expect(m.phase == .resolving)
        #expect(m.resolved(.success([Self.v4a]), now: 10) == [.startAttempt(id: 0, address: Self.v4a)])
        #expect(m.phase == .racing)

        var failing = Self.machine()
        _ = failing.start(addresses: nil, now: 0)
        let actions = failing.resolved(
            .failure(ResolutionError(host: "nowhere.test", message: "Name or service not known")),
            now: 5
        )
        guard case .fail(let e)? = actions.last else {
            Issue.record("\(actions)")
            return
        }
        #expect(e.code == .cannotResolveHost)
        #expect(failing.phase == .failed)

        var proxied = Self.machine(viaProxy: true)
        _ = proxied.start(addresses: nil, now: 0)
        guard
            case .fail(let p)? = proxied.resolved(.failure(ResolutionError(host: "proxy.test", message: "x")), now: 1)
                .last
        else {
            Issue.record("no failure")
            return
        }
        #expect(p.code == .proxyError)
    }

    @Test("an empty answer fails with cannotConnect at once")
    func noAddresses() {
        var m = Self.machine()
        guard case .fail(let e)? = m.start(addresses: [], now: 0).last else {
            Issue.record("no failure")
            return
        }
        #expect(e.code == .cannotConnect)
        #expect(e.message.contains("no address"))
    }

    @Test("racing: the next attempt starts after the delay, alongside the first; the last arms no timer")
    func staggeredStarts() {
        var m = Self.machine()
        #expect(
            m.start(addresses: [Self.v6a, Self.v4a, Self.v4b], now: 100) == [
                .startAttempt(id: 0, address: Self.v6a), .armAttemptTimer(nanoseconds: Self.delay),
            ]
        )
        #expect(
            m.attemptTimerFired(now: 100 + Self.delay) == [
                .startAttempt(id: 1, address: Self.v4a), .armAttemptTimer(nanoseconds: Self.delay),
            ]
        )
        #expect(m.attemptTimerFired(now: 100 + 2 * Self.delay) == [.startAttempt(id: 2, address: Self.v4b)])
        #expect(m.pendingAttempts == [0, 1, 2])
        #expect(m.attempts.map(\.startedAt) == [100, 100 + Self.delay, 100 + 2 * Self.delay])
        // No address left: a late timer does nothing.
        #expect(m.attemptTimerFired(now: 100 + 3 * Self.delay).isEmpty)
    }

    @Test("the attempt delay is kept within RFC 8305 §5's bounds, 10 ms to 2 s")
    func attemptDelayBounds() {
        func armed(_ delay: UInt64) -> [Action] {
            var m = Machine(
                steps: .init(proxyExchange: false, tls: false),
                destination: "d",
                viaProxy: false,
                attemptDelay: delay
            )
            return m.start(addresses: [Self.v6a, Self.v4a], now: 0)
        }
        #expect(armed(0).last == .armAttemptTimer(nanoseconds: 10_000_000))
        #expect(armed(100_000_000).last == .armAttemptTimer(nanoseconds: 100_000_000))
        #expect(armed(60_000_000_000).last == .armAttemptTimer(nanoseconds: 2_000_000_000))
    }

    @Test("a failed attempt starts the next address at once, without waiting for the timer")
    func failureStartsNext() {
        var m = Self.machine()
        _ = m.start(addresses: [Self.v6a, Self.v4a, Self.v6b], now: 0)
        #expect(
            m.attemptFailed(0, reason: "connect failed: Connection refused", now: 7) == [
                .closeAttempt(id: 0), .startAttempt(id: 1, address: Self.v4a),
                .armAttemptTimer(nanoseconds: Self.delay),
            ]
        )
        #expect(m.attempts[0].outcome == .failed("connect failed: Connection refused"))
        #expect(m.attempts[0].endedAt == 7)
        // The last one: the timer is disarmed.
        #expect(
            m.attemptFailed(1, reason: "refused", now: 9) == [
                .closeAttempt(id: 1), .startAttempt(id: 2, address: Self.v6b), .cancelAttemptTimer,
            ]
        )
    }

    @Test("the first attempt to connect wins; the others are closed and the timer disarmed")
    func winnerClosesLosers() {
        var m = Self.machine()
        _ = m.start(addresses: [Self.v6a, Self.v4a, Self.v6b], now: 0)
        _ = m.attemptTimerFired(now: Self.delay)
        #expect(
            m.attemptConnected(1, now: Self.delay + 3) == [.cancelAttemptTimer, .closeAttempt(id: 0), .succeed(id: 1)]
        )
        #expect(m.phase == .established)
        #expect(m.winner == 1)
        #expect(m.attempts[0].outcome == .abandoned)
        #expect(m.attempts[1].outcome == .won)
        #expect(m.reportedAttempts.map(\.outcome) == [.abandoned, .won])
        // A loser that connects late, or fails late, changes nothing.
        #expect(m.attemptConnected(0, now: Self.delay + 4).isEmpty)
        #expect(m.attemptFailed(0, reason: "late", now: Self.delay + 5).isEmpty)
        #expect(m.attemptTimerFired(now: 2 * Self.delay).isEmpty)
    }

    @Test("every attempt failed: cannotConnect naming each address and why")
    func allFail() {
        var m = Self.machine()
        _ = m.start(addresses: [Self.v6a, Self.v4a], now: 0)
        _ = m.attemptTimerFired(now: Self.delay)
        #expect(m.attemptFailed(0, reason: "unreachable", now: 300_000_000) == [.closeAttempt(id: 0)])
        let last = m.attemptFailed(1, reason: "refused", now: 300_000_001)
        guard case .fail(let e)? = last.last else {
            Issue.record("\(last)")
            return
        }
        #expect(last.first == .closeAttempt(id: 1))
        #expect(e.code == .cannotConnect)
        #expect(e.message.contains("\(Self.v6a): unreachable"))
        #expect(e.message.contains("\(Self.v4a): refused"))
        #expect(m.phase == .failed)
    }

    @Test("the steps after the connect: proxy exchange, then TLS, then trust, then established")
    func stepsAfterConnect() {
        var m = Self.machine(proxy: true, tls: true)
        _ = m.start(addresses: [Self.v4a], now: 0)
        #expect(m.attemptConnected(0, now: 1) == [.startProxyExchange(id: 0)])
        #expect(m.phase == .proxyHandshake)
        #expect(m.proxyExchangeFinished(.success(())) == [.startTLS(id: 0)])
        #expect(m.phase == .tlsHandshake)
        #expect(m.handshakeFinished(.success(false)) == [.evaluateTrust(id: 0)])
        #expect(m.phase == .evaluatingTrust)
        #expect(m.trustDecided(nil) == [.succeed(id: 0)])
        #expect(m.phase == .established)

        // A resumed TLS session continues an accepted one: no evaluation.
        var resumed = Self.machine(tls: true)
        _ = resumed.start(addresses: [Self.v4a], now: 0)
        #expect(resumed.attemptConnected(0, now: 1) == [.startTLS(id: 0)])
        #expect(resumed.handshakeFinished(.success(true)) == [.succeed(id: 0)])
    }

    @Test("through an https proxy: TLS to the proxy, its trust, CONNECT over it, the origin's TLS, its trust")
    func httpsProxySteps() {
        var m = Self.machine(proxyTLS: true, proxy: true, tls: true, viaProxy: true)
        _ = m.start(addresses: [Self.v4a], now: 0)
        #expect(m.attemptConnected(0, now: 1) == [.startProxyTLS(id: 0)])
        #expect(m.phase == .proxyTLSHandshake)
        #expect(m.proxyTLSFinished(.success(false)) == [.evaluateProxyTrust(id: 0)])
        #expect(m.phase == .evaluatingProxyTrust)
        // Events of other phases are ignored meanwhile.
        #expect(m.handshakeFinished(.success(false)).isEmpty)
        #expect(m.proxyExchangeFinished(.success(())).isEmpty)
        #expect(m.proxyTrustDecided(nil) == [.startProxyExchange(id: 0)])
        #expect(m.phase == .proxyHandshake)
        #expect(m.proxyExchangeFinished(.success(())) == [.startTLS(id: 0)])
        #expect(m.handshakeFinished(.success(false)) == [.evaluateTrust(id: 0)])
        #expect(m.trustDecided(nil) == [.succeed(id: 0)])
        #expect(m.phase == .established)
        #expect(m.proxyTLSFinished(.success(false)).isEmpty)
        #expect(m.proxyTrustDecided(nil).isEmpty)

        // Forwarding (an http origin): the proxy's TLS and trust, then the connection is ready.
        var forward = Self.machine(proxyTLS: true, viaProxy: true)
        _ = forward.start(addresses: [Self.v4a], now: 0)
        #expect(forward.attemptConnected(0, now: 1) == [.startProxyTLS(id: 0)])
        #expect(forward.proxyTLSFinished(.success(false)) == [.evaluateProxyTrust(id: 0)])
        #expect(forward.proxyTrustDecided(nil) == [.succeed(id: 0)])

        // A resumed session with the proxy continues a trusted one: no evaluation.
        var resumed = Self.machine(proxyTLS: true, proxy: true, tls: true, viaProxy: true)
        _ = resumed.start(addresses: [Self.v4a], now: 0)
        _ = resumed.attemptConnected(0, now: 1)
        #expect(resumed.proxyTLSFinished(.success(true)) == [.startProxyExchange(id: 0)])
        #expect(resumed.phase == .proxyHandshake)
    }

    @Test("through an https proxy: its handshake failing or its chain refused closes the socket and fails")
    func httpsProxyFailures() {
        let handshake = HawserError(.secureConnectionFailed, "TLS handshake with the proxy https://p:443 failed")
        var h = Self.machine(proxyTLS: true, proxy: true, tls: true, viaProxy: true)
        _ = h.start(addresses: [Self.v4a], now: 0)
        _ = h.attemptConnected(0, now: 1)
        #expect(h.proxyTLSFinished(.failure(handshake)) == [.closeAttempt(id: 0), .fail(handshake)])
        #expect(h.phase == .failed)

        let refused = HawserError(
            .serverCertificateUntrusted,
            "the certificate of the proxy https://p:443 is not trusted"
        )
        var t = Self.machine(proxyTLS: true, proxy: true, tls: true, viaProxy: true)
        _ = t.start(addresses: [Self.v4a], now: 0)
        _ = t.attemptConnected(0, now: 1)
        _ = t.proxyTLSFinished(.success(false))
        #expect(t.proxyTrustDecided(refused) == [.closeAttempt(id: 0), .fail(refused)])
        #expect(t.proxyTrustDecided(nil).isEmpty, "a late answer is ignored")

        let timeout = HawserError(.connectTimeout, "took longer than 30 s")
        var waiting = Self.machine(proxyTLS: true, viaProxy: true)
        _ = waiting.start(addresses: [Self.v4a], now: 0)
        _ = waiting.attemptConnected(0, now: 1)
        _ = waiting.proxyTLSFinished(.success(false))
        #expect(waiting.abort(timeout, now: 30) == [.closeAttempt(id: 0), .fail(timeout)])
        #expect(waiting.proxyTrustDecided(nil).isEmpty)
    }

    @Test("a failure in any step after the connect closes the winner and fails with that error")
    func stepFailures() {
        let proxyError = HawserError(.proxyError, "the proxy refused CONNECT with 403")
        var p = Self.machine(proxy: true, tls: true)
        _ = p.start(addresses: [Self.v4a], now: 0)
        _ = p.attemptConnected(0, now: 1)
        #expect(p.proxyExchangeFinished(.failure(proxyError)) == [.closeAttempt(id: 0), .fail(proxyError)])

        let tlsError = HawserError(.secureConnectionFailed, "handshake failed")
        var t = Self.machine(tls: true)
        _ = t.start(addresses: [Self.v4a], now: 0)
        _ = t.attemptConnected(0, now: 1)
        #expect(t.handshakeFinished(.failure(tlsError)) == [.closeAttempt(id: 0), .fail(tlsError)])

        let untrusted = HawserError(.serverCertificateUntrusted, "not trusted")
        var u = Self.machine(tls: true)
        _ = u.start(addresses: [Self.v4a], now: 0)
        _ = u.attemptConnected(0, now: 1)
        _ = u.handshakeFinished(.success(false))
        #expect(u.trustDecided(untrusted) == [.closeAttempt(id: 0), .fail(untrusted)])
        // Events for a finished machine are ignored.
        #expect(u.trustDecided(nil).isEmpty)
        #expect(u.handshakeFinished(.success(true)).isEmpty)
    }

    @Test("abort (the connect timeout, a shutdown) closes every socket in every phase, once")
    func abort() {
        let timeout = HawserError(.connectTimeout, "took longer than 30 s")
        var racing = Self.machine()
        _ = racing.start(addresses: [Self.v6a, Self.v4a, Self.v6b], now: 0)
        _ = racing.attemptTimerFired(now: Self.delay)
        #expect(
            racing.abort(timeout, now: 30) == [
                .cancelAttemptTimer, .closeAttempt(id: 0), .closeAttempt(id: 1), .fail(timeout),
            ]
        )
        #expect(racing.attempts.map(\.outcome) == [.abandoned, .abandoned])
        #expect(racing.abort(timeout, now: 31).isEmpty)
        #expect(racing.attemptTimerFired(now: 32).isEmpty)

        var resolving = Self.machine()
        _ = resolving.start(addresses: nil, now: 0)
        #expect(resolving.abort(timeout, now: 30) == [.fail(timeout)])
        #expect(resolving.resolved(.success([Self.v4a]), now: 31).isEmpty)

        var handshaking = Self.machine(tls: true)
        _ = handshaking.start(addresses: [Self.v4a], now: 0)
        _ = handshaking.attemptConnected(0, now: 1)
        #expect(handshaking.abort(timeout, now: 30) == [.closeAttempt(id: 0), .fail(timeout)])

        var done = Self.machine()
        _ = done.start(addresses: [Self.v4a], now: 0)
        _ = done.attemptConnected(0, now: 1)
        #expect(done.abort(timeout, now: 30).isEmpty)
    }
}

// Each event's actions as an array: what the event appends to an empty buffer.
extension ConnectStateMachine {
    private mutating func appended(_ event: (inout Self, inout [Action]) -> Void) -> [Action] {
        var actions: [Action] = []
        event(&self, &actions)
        return actions
    }

    mutating func start(addresses: [SocketAddress]?, now: UInt64) -> [Action] {
        self.appended { $0.start(addresses: addresses, now: now, into: &$1) }
    }

    mutating func resolved(_ result: Result<[SocketAddress], ResolutionError>, now: UInt64) -> [Action] {
        self.appended { $0.resolved(result, now: now, into: &$1) }
    }

    mutating func attemptTimerFired(now: UInt64) -> [Action] {
        self.appended { $0.attemptTimerFired(now: now, into: &$1) }
    }

    mutating func attemptConnected(_ id: Int, now: UInt64) -> [Action] {
        self.appended { $0.attemptConnected(id, now: now, into: &$1) }
    }

    mutating func attemptFailed(_ id: Int, reason: String, now: UInt64) -> [Action] {
        self.appended { $0.attemptFailed(id, reason: reason, now: now, into: &$1) }
    }

    mutating func proxyTLSFinished(_ result: Result<Bool, HawserError>) -> [Action] {
        self.appended { $0.proxyTLSFinished(result, into: &$1) }
    }

    mutating func proxyTrustDecided(_ refusal: HawserError?) -> [Action] {
        self.appended { $0.proxyTrustDecided(refusal, into: &$1) }
    }

    mutating func proxyExchangeFinished(_ result: Result<Void, HawserError>) -> [Action] {
        self.appended { $0.proxyExchangeFinished(result, into: &$1) }
    }

    mutating func handshakeFinished(_ result: Result<Bool, HawserError>) -> [Action] {
        self.appended { $0.handshakeFinished(result, into: &$1) }
    }

    mutating func trustDecided(_ refusal: HawserError?) -> [Action] {
        self.appended { $0.trustDecided(refusal, into: &$1) }
    }

    mutating func abort(_ error: HawserError, now: UInt64) -> [Action] {
        self.appended { $0.abort(error, now: now, into: &$1) }
    }
}
