// Theory of operation
// -------------------
// One value per connection being opened. It knows nothing of sockets or clocks: the IO shell
// (Connector) reports what happened, with the loop's time, and runs the actions the machine
// appends to the shell's buffer (`into actions: inout [Action]`, every machine's shape).
//
//   idle ─start─▶ resolving ─resolved─▶ racing ─an attempt connects─▶ proxyTLSHandshake ─▶ evaluatingProxyTrust ─▶ proxyHandshake
//     │              │                    │                                   │                      │                       │
//     │              └──failed──▶ failed ◀┴─all attempts failed / timeout / cancel, or a step failed ┴───────────────────────┤
//     └─(addresses known: literal, override, Unix path)─▶ racing                                                             │
//                                                                     established ◀─ evaluatingTrust ◀─ tlsHandshake ◀───────┘
//
// Racing is Happy Eyeballs (RFC 8305): the addresses keep the resolver's order (getaddrinfo
// sorts them by RFC 6724, so the system's policy, gai.conf, decides which family leads) with the
// families interleaved from the first address's family on; one attempt starts at once and each
// next one its own `attemptDelay` after the one before it started, or as soon as the one before
// it fails; attempts run side by side until one connects, which wins and closes the others. After the winner, each step is optional and runs in this order: TLS to
// an https proxy and the proxy's trust; the CONNECT or SOCKS5 exchange (over that TLS, if any);
// the origin's TLS (inside the proxy's TLS, if any) and the origin's trust. A resumed TLS
// session skips its trust step. The whole of it runs under one deadline (the connect timeout).
import HawserBase
import HawserPosix

/// The pure state machine of opening one connection.
struct ConnectStateMachine {
    /// One TCP (or Unix-domain) connect attempt.
    struct Attempt: Sendable, Hashable {
        var id: Int
        var address: SocketAddress
        var startedAt: UInt64
        var endedAt: UInt64?
        var outcome: ConnectAttempt.Outcome?
    }

    enum Phase: Sendable, Hashable {
        /// Created. Next: resolving, racing, failed.
        case idle
        /// Waiting for the resolver. Next: racing, failed.
        case resolving
        /// Connect attempts in flight. Next: proxyTLSHandshake, proxyHandshake, tlsHandshake,
        /// established, failed.
        case racing
        /// The TLS handshake with an https proxy on the winning socket. Next: evaluatingProxyTrust,
        /// proxyHandshake, tlsHandshake, established (a resumed session), failed.
        case proxyTLSHandshake
        /// The proxy's chain is with the proxy's trust evaluator. Next: proxyHandshake,
        /// tlsHandshake, established, failed.
        case evaluatingProxyTrust
        /// A CONNECT or SOCKS5 exchange with the proxy on the winning socket. Next: tlsHandshake,
        /// established, failed.
        case proxyHandshake
        /// The TLS handshake on the winning socket. Next: evaluatingTrust, established, failed.
        case tlsHandshake
        /// The server's chain is with the trust evaluator. Next: established, failed.
        case evaluatingTrust
        /// Final: the socket is handed to the pool.
        case established
        /// Final: every socket was closed and the error reported.
        case failed
    }

    enum Action: Sendable, Equatable {
        /// Resolve the host (off the loop).
        case resolve
        /// Open a socket and start a non-blocking connect to the address.
        case startAttempt(id: Int, address: SocketAddress)
        /// Call `attemptTimerFired` after this many nanoseconds (replacing an armed timer).
        case armAttemptTimer(nanoseconds: UInt64)
        /// Disarm the attempt timer.
        case cancelAttemptTimer
        /// Close a losing or failed attempt's socket.
        case closeAttempt(id: Int)
        /// Start the TLS handshake with the https proxy on the winning socket.
        case startProxyTLS(id: Int)
        /// Hand the proxy's chain to the proxy's trust evaluator.
        case evaluateProxyTrust(id: Int)
        /// Speak CONNECT or SOCKS5 to the proxy on the winning socket.
        case startProxyExchange(id: Int)
        /// Start the TLS handshake on the winning socket.
        case startTLS(id: Int)
        /// Hand the server's chain to the trust evaluator.
        case evaluateTrust(id: Int)
        /// Done: hand the winning socket over.
        case succeed(id: Int)
        /// Done: report the error (every socket has been closed by earlier actions).
        case fail(HawserError)

        static func == (a: Action, b: Action) -> Bool {
            switch (a, b) {
            case (.resolve, .resolve), (.cancelAttemptTimer, .cancelAttemptTimer): return true
            case (.startAttempt(let i, let x), .startAttempt(let j, let y)): return i == j && x == y
            case (.armAttemptTimer(let x), .armAttemptTimer(let y)): return x == y
            case (.closeAttempt(let x), .closeAttempt(let y)), (.startProxyExchange(let x), .startProxyExchange(let y)),
                (.startProxyTLS(let x), .startProxyTLS(let y)),
                (.evaluateProxyTrust(let x), .evaluateProxyTrust(let y)),
                (.startTLS(let x), .startTLS(let y)), (.evaluateTrust(let x), .evaluateTrust(let y)),
                (.succeed(let x), .succeed(let y)):
                return x == y
            case (.fail(let x), .fail(let y)): return x.code == y.code && x.message == y.message
            default: return false
            }
        }
    }

    /// What the connection needs after the TCP connect.
    struct Steps: Sendable, Hashable {
        /// TLS to the proxy (an https proxy), then its trust.
        var proxyTLS: Bool = false
        /// A CONNECT or SOCKS5 exchange with the proxy.
        var proxyExchange: Bool
        /// TLS to the origin (inside the proxy's TLS when there is one), then its trust.
        var tls: Bool
    }

    /// RFC 8305's recommended Connection Attempt Delay.
    static let defaultAttemptDelay: UInt64 = 250_000_000
    /// RFC 8305 §5's bounds on the Connection Attempt Delay: never under 10 ms (a smaller one
    /// floods the network with attempts), never over 2 s.
    static let attemptDelayBounds: ClosedRange<UInt64> = 10_000_000...2_000_000_000

    let steps: Steps
    let attemptDelay: UInt64
    /// How to name the destination in errors ("example.com:443", "the proxy 10.0.0.1:3128").
    let destination: String
    let viaProxy: Bool
    private(set) var phase: Phase = .idle
    /// Addresses not tried yet, in order.
    private var queue: [SocketAddress] = []
    private(set) var attempts: [Attempt] = []
    private(set) var winner: Int?
    private var timerArmed = false

    init(steps: Steps, destination: String, viaProxy: Bool, attemptDelay: UInt64 = Self.defaultAttemptDelay) {
        self.steps = steps
        self.destination = destination
        self.viaProxy = viaProxy
        self.attemptDelay = min(
            max(attemptDelay, Self.attemptDelayBounds.lowerBound),
            Self.attemptDelayBounds.upperBound
        )
    }

    var isFinished: Bool { self.phase == .established || self.phase == .failed }

    /// Attempts still connecting.
    var pendingAttempts: [Int] { self.attempts.filter { $0.outcome == nil }.map(\.id) }

    // MARK: - Events
    //
    // Each event appends its actions to the shell's buffer (`into actions`), in the order they
    // are to run; an event that changes nothing appends nothing.

    /// Starts: with the addresses when they are known without asking the resolver (an IP
    /// literal, a DNS override, a Unix-domain path), else by resolving.
    mutating func start(addresses: [SocketAddress]?, now: UInt64, into actions: inout [Action]) {
        guard self.phase == .idle else { return }
        guard let addresses else {
            self.phase = .resolving
            actions.append(.resolve)
            return
        }
        self.race(addresses, now: now, into: &actions)
    }

    mutating func resolved(
        _ result: Result<[SocketAddress], ResolutionError>,
        now: UInt64,
        into actions: inout [Action]
    ) {
        guard self.phase == .resolving else { return }
        switch result {
        case .success(let addresses):
            self.race(addresses, now: now, into: &actions)
        case .failure(let error):
            self.phase = .failed
            let prefix = self.viaProxy ? "the proxy: " : ""
            actions.append(
                .fail(
                    HawserError(
                        self.viaProxy ? .proxyError : .cannotResolveHost,
                        prefix + error.description,
                        underlying: error
                    )
                )
            )
        }
    }

    private mutating func race(_ addresses: [SocketAddress], now: UInt64, into actions: inout [Action]) {
        self.phase = .racing
        self.queue = Self.happyEyeballsOrder(addresses)
        if self.queue.isEmpty {
            self.phase = .failed
            actions.append(.fail(self.cannotConnect(detail: "no address to try")))
            return
        }
        self.startNext(now: now, into: &actions)
    }

    /// Starts the next queued address and arms the timer for the one after it.
    private mutating func startNext(now: UInt64, into actions: inout [Action]) {
        guard !self.queue.isEmpty else { return }
        let address = self.queue.removeFirst()
        let id = self.attempts.count
        self.attempts.append(Attempt(id: id, address: address, startedAt: now))
        actions.append(.startAttempt(id: id, address: address))
        if !self.queue.isEmpty {
            self.timerArmed = true
            actions.append(.armAttemptTimer(nanoseconds: self.attemptDelay))
        } else if self.timerArmed {
            self.timerArmed = false
            actions.append(.cancelAttemptTimer)
        }
    }

    /// The attempt delay passed with no winner: the next address starts alongside.
    mutating func attemptTimerFired(now: UInt64, into actions: inout [Action]) {
        self.timerArmed = false
        guard self.phase == .racing else { return }
        self.startNext(now: now, into: &actions)
    }

    /// An attempt's connect succeeded. The first to do so wins; the others are closed.
    mutating func attemptConnected(_ id: Int, now: UInt64, into actions: inout [Action]) {
        // After a win every other attempt is closed and marked, so a late connect is ignored.
        guard self.phase == .racing, id < self.attempts.count, self.attempts[id].outcome == nil else { return }
        self.attempts[id].outcome = .won
        self.attempts[id].endedAt = now
        self.winner = id
        self.queue.removeAll()
        if self.timerArmed {
            self.timerArmed = false
            actions.append(.cancelAttemptTimer)
        }
        for other in self.pendingAttempts {
            self.attempts[other].outcome = .abandoned
            self.attempts[other].endedAt = now
            actions.append(.closeAttempt(id: other))
        }
        self.afterConnect(id, into: &actions)
    }

    private mutating func afterConnect(_ id: Int, into actions: inout [Action]) {
        if self.steps.proxyTLS {
            self.phase = .proxyTLSHandshake
            actions.append(.startProxyTLS(id: id))
            return
        }
        self.afterProxyTLS(id, into: &actions)
    }

    private mutating func afterProxyTLS(_ id: Int, into actions: inout [Action]) {
        if self.steps.proxyExchange {
            self.phase = .proxyHandshake
            actions.append(.startProxyExchange(id: id))
            return
        }
        self.afterProxy(id, into: &actions)
    }

    private mutating func afterProxy(_ id: Int, into actions: inout [Action]) {
        if self.steps.tls {
            self.phase = .tlsHandshake
            actions.append(.startTLS(id: id))
            return
        }
        self.phase = .established
        actions.append(.succeed(id: id))
    }

    /// An attempt's connect failed: the next address starts now rather than at the timer.
    mutating func attemptFailed(_ id: Int, reason: String, now: UInt64, into actions: inout [Action]) {
        guard id < self.attempts.count, self.attempts[id].outcome == nil else { return }
        self.attempts[id].outcome = .failed(reason)
        self.attempts[id].endedAt = now
        actions.append(.closeAttempt(id: id))
        guard self.phase == .racing else { return }
        if !self.queue.isEmpty {
            self.startNext(now: now, into: &actions)
        } else if self.pendingAttempts.isEmpty {
            self.phase = .failed
            if self.timerArmed {
                self.timerArmed = false
                actions.append(.cancelAttemptTimer)
            }
            let detail = self.attempts.compactMap { a -> String? in
                if case .failed(let why)? = a.outcome { return "\(a.address): \(why)" }
                return nil
            }.joined(separator: "; ")
            actions.append(.fail(self.cannotConnect(detail: detail)))
        }
    }

    /// The handshake with the https proxy finished; as for origins, a resumed session continues
    /// one whose chain was accepted, so it is not evaluated again.
    mutating func proxyTLSFinished(_ result: Result<Bool, HawserError>, into actions: inout [Action]) {
        guard self.phase == .proxyTLSHandshake, let id = self.winner else { return }
        switch result {
        case .success(let resumed):
            if resumed {
                self.afterProxyTLS(id, into: &actions)
                return
            }
            self.phase = .evaluatingProxyTrust
            actions.append(.evaluateProxyTrust(id: id))
        case .failure(let error):
            self.failWinner(error, into: &actions)
        }
    }

    mutating func proxyTrustDecided(_ refusal: HawserError?, into actions: inout [Action]) {
        guard self.phase == .evaluatingProxyTrust, let id = self.winner else { return }
        if let refusal {
            self.failWinner(refusal, into: &actions)
            return
        }
        self.afterProxyTLS(id, into: &actions)
    }

    mutating func proxyExchangeFinished(_ result: Result<Void, HawserError>, into actions: inout [Action]) {
        guard self.phase == .proxyHandshake, let id = self.winner else { return }
        switch result {
        case .success: self.afterProxy(id, into: &actions)
        case .failure(let error): self.failWinner(error, into: &actions)
        }
    }

    /// The handshake finished. A resumed session continues one whose chain was already
    /// accepted (only trusted sessions are kept), so it is not evaluated again, as curl does.
    mutating func handshakeFinished(_ result: Result<Bool, HawserError>, into actions: inout [Action]) {
        guard self.phase == .tlsHandshake, let id = self.winner else { return }
        switch result {
        case .success(let resumed):
            if resumed {
                self.phase = .established
                actions.append(.succeed(id: id))
                return
            }
            self.phase = .evaluatingTrust
            actions.append(.evaluateTrust(id: id))
        case .failure(let error):
            self.failWinner(error, into: &actions)
        }
    }

    mutating func trustDecided(_ refusal: HawserError?, into actions: inout [Action]) {
        guard self.phase == .evaluatingTrust, let id = self.winner else { return }
        if let refusal {
            self.failWinner(refusal, into: &actions)
            return
        }
        self.phase = .established
        actions.append(.succeed(id: id))
    }

    private mutating func failWinner(_ error: HawserError, into actions: inout [Action]) {
        self.phase = .failed
        if let id = self.winner { actions.append(.closeAttempt(id: id)) }
        actions.append(.fail(error))
    }

    /// The connect timeout passed, or the pool gave up (shutdown): close everything.
    mutating func abort(_ error: HawserError, now: UInt64, into actions: inout [Action]) {
        guard !self.isFinished else { return }
        if self.timerArmed {
            self.timerArmed = false
            actions.append(.cancelAttemptTimer)
        }
        for id in self.pendingAttempts {
            self.attempts[id].outcome = .abandoned
            self.attempts[id].endedAt = now
            actions.append(.closeAttempt(id: id))
        }
        if let id = self.winner, self.phase != .racing {
            actions.append(.closeAttempt(id: id))
        }
        self.phase = .failed
        self.queue.removeAll()
        actions.append(.fail(error))
    }

    // MARK: - Helpers

    private func cannotConnect(detail: String) -> HawserError {
        if self.viaProxy { return HawserError(.proxyError, "cannot connect to \(self.destination): \(detail)") }
        return HawserError(.cannotConnect, "cannot connect to \(self.destination): \(detail)")
    }

    /// RFC 8305 §4: the families alternate, starting with the family of the resolver's first
    /// address (its RFC 6724 sort, so the system's address-selection policy, decides which
    /// family leads: usually IPv6, IPv4 where gai.conf prefers it); within a family the
    /// resolver's order is kept. Duplicates are dropped. Unix-domain addresses keep their order,
    /// after the others.
    static func happyEyeballsOrder(_ addresses: [SocketAddress]) -> [SocketAddress] {
        var v6: [SocketAddress] = []
        var v4: [SocketAddress] = []
        var other: [SocketAddress] = []
        var v4First: Bool? = nil
        for a in addresses {
            switch a.storage {
            case .v6:
                if v4First == nil { v4First = false }
                if !v6.contains(a) { v6.append(a) }
            case .v4:
                if v4First == nil { v4First = true }
                if !v4.contains(a) { v4.append(a) }
            case .unix:
                if !other.contains(a) { other.append(a) }
            }
        }
        let (first, second) = v4First == true ? (v4, v6) : (v6, v4)
        var out: [SocketAddress] = []
        out.reserveCapacity(v6.count + v4.count + other.count)
        var i = 0
        while i < first.count || i < second.count {
            if i < first.count { out.append(first[i]) }
            if i < second.count { out.append(second[i]) }
            i += 1
        }
        return out + other
    }

    /// The attempts as the task metrics report them.
    var reportedAttempts: [ConnectAttempt] {
        self.attempts.map {
            ConnectAttempt(address: $0.address, start: $0.startedAt, end: $0.endedAt, outcome: $0.outcome)
        }
    }
}
