// Theory of operation
// -------------------
// One value per session: which connections each origin has (idle, busy, being opened), which
// requests wait for one, and the per-origin limit. It holds requests and connections as opaque
// references and knows nothing of sockets or clocks: the shell (ConnectionPool) reports events
// with the loop's time and runs the actions it gets back.
//
// Per origin:
//   submit ─an idle connection─▶ execute on it (the most recently used one first)
//          └─none, or a replay that needs a new one─▶ wait (FIFO; a replay goes first) ─▶ open a
//            connection while waiters outnumber connects in progress and the limit allows
//   connected / released ─a waiter it suits─▶ execute     (a reused connection never serves a
//                        └─none─▶ idle, idle timer       replay; a new one serves anyone)
//   idle timer ─idle ≥ idleTimeout─▶ close, else re-arm for the rest
//   a replay that finds the limit reached closes an idle connection to make room.
// Over a group of loops (one machine per loop), the shell also asks a session-wide budget for
// each connect: refused, it reports `connectDenied` (the origin stops opening connections until
// `unblock`); another loop in need has it close an idle connection (`closeIdle`).
// Shutdown fails every waiter and closes every idle connection; later submits fail at once.

/// The pure state machine of a session's connection pool.
struct PoolStateMachine<Request: AnyObject, Connection: AnyObject> {
    typealias OriginID = Int

    struct Waiter {
        let request: Request
        /// A replay after a stale connection died: only a newly opened connection may serve it.
        let fresh: Bool
    }

    struct Origin {
        let key: ConnectionKey
        /// Idle connections, the most recently used last.
        var idle: [Connection] = []
        var waiting = CircularQueue<Waiter>()
        /// Live connections plus connects in progress: what the limit counts.
        var total = 0
        var connecting = 0
        /// The session-wide budget refused a connect: none is opened until `unblock`.
        var blocked = false

        init(key: ConnectionKey) { self.key = key }
    }

    struct ConnectionRecord {
        let origin: OriginID
        /// Nil while busy.
        var idleSince: UInt64?
        var timerArmed = false
    }

    enum Action {
        /// Open a connection for the origin; report `connected` or `connectFailed`.
        case createConnection(OriginID, ConnectionKey)
        /// Run the request on the connection.
        case execute(Request, on: Connection)
        /// Close the connection (the pool already forgot it: its `closed` report is ignored).
        case closeConnection(Connection)
        /// Fail the request (it was waiting). Indirect: the error holds a `URL`, whose layout is
        /// known only at run time; boxed, the action is copied inline like the others.
        indirect case failRequest(Request, HawserError)
        /// Call `idleTimerFired` for the connection after this many nanoseconds.
        case armIdleTimer(Connection, after: UInt64)
    }

    let maximumPerOrigin: Int
    let idleTimeout: UInt64
    private(set) var origins: [Origin] = []
    private var originIDs: [ConnectionKey: OriginID] = [:]
    private var records: [ObjectIdentifier: ConnectionRecord] = [:]
    private(set) var isShutDown = false

    init(maximumPerOrigin: Int, idleTimeout: UInt64) {
        self.maximumPerOrigin = max(1, maximumPerOrigin)
        self.idleTimeout = idleTimeout
    }

    /// The origin for `key`, made on first use.
    mutating func origin(for key: ConnectionKey) -> OriginID {
        if let id = self.originIDs[key] { return id }
        let id = self.origins.count
        self.origins.append(Origin(key: key))
        self.originIDs[key] = id
        return id
    }

    /// The origin for `key`, if it was made.
    func existingOrigin(for key: ConnectionKey) -> OriginID? { self.originIDs[key] }

    /// Connections the pool knows of (idle and busy), for statistics.
    var connectionCount: Int { self.records.count }

    // MARK: - Requests

    /// A request needs a connection of `origin`.
    mutating func submit(_ request: Request, origin: OriginID, fresh: Bool, into actions: inout [Action]) {
        if self.isShutDown {
            actions.append(.failRequest(request, HawserError(.sessionShutDown, "the session has been shut down")))
            return
        }
        if !fresh, let c = self.origins[origin].idle.popLast() {
            self.records[ObjectIdentifier(c)]?.idleSince = nil
            actions.append(.execute(request, on: c))
            return
        }
        if fresh {
            // A replay goes first. Make room for its new connection if the limit is reached:
            // an idle connection may be as dead as the one that just failed.
            self.origins[origin].waiting.prepend(Waiter(request: request, fresh: true))
            if self.origins[origin].total >= self.maximumPerOrigin, !self.origins[origin].idle.isEmpty {
                let victim = self.origins[origin].idle.removeFirst()
                self.forget(victim, origin: origin)
                actions.append(.closeConnection(victim))
            }
        } else {
            self.origins[origin].waiting.append(Waiter(request: request, fresh: false))
        }
        self.connectIfNeeded(origin, into: &actions)
    }

    /// A waiting request gave up (cancelled, timed out). No-op when it is not waiting.
    mutating func cancel(_ request: Request, origin: OriginID) {
        _ = self.origins[origin].waiting.removeFirst(where: { $0.request === request })
    }

    /// Requests waiting for a connection, in every origin.
    var waitingCount: Int { self.origins.reduce(0) { $0 + $1.waiting.count } }
    var connectingCount: Int { self.origins.reduce(0) { $0 + $1.connecting } }
    var idleCount: Int { self.origins.reduce(0) { $0 + $1.idle.count } }

    /// The request first in line for `origin` (the one a new connection is for).
    func firstWaiting(_ origin: OriginID) -> Request? { self.origins[origin].waiting.first?.request }

    // MARK: - Connections

    private mutating func connectIfNeeded(_ origin: OriginID, into actions: inout [Action]) {
        guard !self.isShutDown, !self.origins[origin].blocked else { return }
        while self.origins[origin].waiting.count > self.origins[origin].connecting,
            self.origins[origin].total < self.maximumPerOrigin
        {
            self.origins[origin].total += 1
            self.origins[origin].connecting += 1
            actions.append(.createConnection(origin, self.origins[origin].key))
        }
    }

    /// A connection for `origin` was opened.
    mutating func connected(_ connection: Connection, origin: OriginID, now: UInt64, into actions: inout [Action]) {
        self.origins[origin].connecting -= 1
        self.records[ObjectIdentifier(connection)] = ConnectionRecord(origin: origin)
        self.hand(connection, origin: origin, fresh: true, now: now, into: &actions)
    }

    /// Opening a connection for `origin` failed: the first waiter gets the error; the others get
    /// attempts of their own (unless `retryOthers` is false: the error would be the same, as for
    /// a TLS context that cannot be made).
    mutating func connectFailed(
        origin: OriginID,
        error: HawserError,
        retryOthers: Bool = true,
        into actions: inout [Action]
    ) {
        self.origins[origin].connecting -= 1
        self.origins[origin].total -= 1
        if let w = self.origins[origin].waiting.popFirst() {
            actions.append(.failRequest(w.request, error))
        }
        if retryOthers { self.connectIfNeeded(origin, into: &actions) }
    }

    /// The shell could not open the connection a `createConnection` asked for (the session-wide
    /// limit is reached on other loops): its place is freed and the origin opens no connection
    /// until ``unblock(_:into:)``. The waiters keep waiting (for this origin's connections, or a
    /// connect after `unblock`).
    mutating func connectDenied(origin: OriginID) {
        self.origins[origin].connecting -= 1
        self.origins[origin].total -= 1
        self.origins[origin].blocked = true
    }

    /// The origin may open connections again (a permit came back): it opens what its waiters need.
    mutating func unblock(_ origin: OriginID, into actions: inout [Action]) {
        self.origins[origin].blocked = false
        self.connectIfNeeded(origin, into: &actions)
    }

    /// Closes the origin's least recently used idle connection, if it has one (another loop of
    /// the session needs the place).
    mutating func closeIdle(_ origin: OriginID, into actions: inout [Action]) {
        guard !self.origins[origin].idle.isEmpty else { return }
        let victim = self.origins[origin].idle[0]
        self.forget(victim, origin: origin)
        actions.append(.closeConnection(victim))
    }

    /// A connection finished a response and can be reused.
    mutating func released(_ connection: Connection, now: UInt64, into actions: inout [Action]) {
        // One hash per lookup: the record is reached through its index from here on.
        guard let index = self.records.index(forKey: ObjectIdentifier(connection)) else { return }
        let origin = self.records.values[index].origin
        if self.isShutDown {
            self.forget(connection, origin: origin)
            actions.append(.closeConnection(connection))
            return
        }
        self.hand(connection, origin: origin, fresh: false, now: now, into: &actions)
    }

    /// Gives a usable connection to the first waiter it suits, or parks it.
    private mutating func hand(
        _ connection: Connection,
        origin: OriginID,
        fresh: Bool,
        now: UInt64,
        into actions: inout [Action]
    ) {
        if self.isShutDown {
            self.forget(connection, origin: origin)
            actions.append(.closeConnection(connection))
            return
        }
        if let w = self.origins[origin].waiting.removeFirst(where: { fresh || !$0.fresh }) {
            actions.append(.execute(w.request, on: connection))
            return
        }
        if !self.origins[origin].waiting.isEmpty, self.origins[origin].total >= self.maximumPerOrigin {
            // Only replays that need a new connection wait, and there is no room to open one.
            self.forget(connection, origin: origin)
            actions.append(.closeConnection(connection))
            self.connectIfNeeded(origin, into: &actions)
            return
        }
        self.origins[origin].idle.append(connection)
        let index = self.records.index(forKey: ObjectIdentifier(connection))!
        self.records.values[index].idleSince = now
        if !self.records.values[index].timerArmed {
            self.records.values[index].timerArmed = true
            actions.append(.armIdleTimer(connection, after: self.idleTimeout))
        }
    }

    /// A connection closed (the peer, an error, an aborted task). Frees its place.
    mutating func closed(_ connection: Connection, into actions: inout [Action]) {
        guard let record = self.records[ObjectIdentifier(connection)] else { return }
        self.forget(connection, origin: record.origin)
        self.connectIfNeeded(record.origin, into: &actions)
    }

    private mutating func forget(_ connection: Connection, origin: OriginID) {
        guard self.records.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        self.origins[origin].total -= 1
        if let i = self.origins[origin].idle.firstIndex(where: { $0 === connection }) {
            self.origins[origin].idle.remove(at: i)
        }
    }

    /// A connection's idle timer fired. One timer per connection, re-armed lazily: going idle
    /// again only notes the time, so keep-alive reuse costs no timer work per request.
    mutating func idleTimerFired(_ connection: Connection, now: UInt64, into actions: inout [Action]) {
        let id = ObjectIdentifier(connection)
        guard let record = self.records[id] else { return }
        guard let since = record.idleSince else {
            // Busy now: look again one timeout from now.
            actions.append(.armIdleTimer(connection, after: self.idleTimeout))
            return
        }
        let elapsed = now &- since
        if elapsed >= self.idleTimeout {
            self.forget(connection, origin: record.origin)
            actions.append(.closeConnection(connection))
        } else {
            actions.append(.armIdleTimer(connection, after: self.idleTimeout - elapsed))
        }
    }

    // MARK: - Shutdown

    /// Fails every waiter, closes every idle connection; later submits fail. Busy connections are
    /// closed by their tasks failing; connects in progress by the shell.
    mutating func shutdown(into actions: inout [Action]) {
        guard !self.isShutDown else { return }
        self.isShutDown = true
        let error = HawserError(.sessionShutDown, "the session was shut down")
        for o in self.origins.indices {
            while let w = self.origins[o].waiting.popFirst() {
                actions.append(.failRequest(w.request, error))
            }
            for c in self.origins[o].idle {
                actions.append(.closeConnection(c))
            }
            for c in self.origins[o].idle { self.forget(c, origin: o) }
        }
    }
}
