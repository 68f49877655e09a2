import Testing

// The pool state machine without sockets: requests and connections are plain objects, time is a
// number. Every transition of docs/STATE-MACHINES.md's pool table has a test here.
@testable import HawserCore

@Suite("Pool state machine (pure)")
struct PoolStateMachineTests {
    final class Req: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { self.name }
    }
    final class Conn: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { self.name }
    }
    typealias Machine = PoolStateMachine<Req, Conn>

    /// The actions, as words a test can compare.
    static func words(_ actions: [Machine.Action]) -> [String] {
        actions.map { a in
            switch a {
            case .createConnection(let o, let key): return "connect \(o) \(key.host)"
            case .execute(let r, let c): return "execute \(r) on \(c)"
            case .closeConnection(let c): return "close \(c)"
            case .failRequest(let r, let e): return "fail \(r) \(e.code)"
            case .armIdleTimer(let c, let after): return "timer \(c) \(after)"
            }
        }
    }

    static let key = ConnectionKey(scheme: "http", host: "a.test", port: 80)
    static let otherKey = ConnectionKey(scheme: "http", host: "b.test", port: 80)

    struct Harness {
        var m = Machine(maximumPerOrigin: 2, idleTimeout: 60)
        var actions: [Machine.Action] = []

        mutating func take() -> [String] {
            defer { self.actions.removeAll() }
            return PoolStateMachineTests.words(self.actions)
        }
        mutating func submit(_ r: Req, fresh: Bool = false, key: ConnectionKey = PoolStateMachineTests.key) -> [String]
        {
            let o = self.m.origin(for: key)
            self.m.submit(r, origin: o, fresh: fresh, into: &self.actions)
            return self.take()
        }
        mutating func connected(_ c: Conn, now: UInt64 = 0, key: ConnectionKey = PoolStateMachineTests.key) -> [String]
        {
            self.m.connected(c, origin: self.m.origin(for: key), now: now, into: &self.actions)
            return self.take()
        }
        mutating func released(_ c: Conn, now: UInt64 = 0) -> [String] {
            self.m.released(c, now: now, into: &self.actions)
            return self.take()
        }
        mutating func closed(_ c: Conn) -> [String] {
            self.m.closed(c, into: &self.actions)
            return self.take()
        }
        mutating func timer(_ c: Conn, now: UInt64) -> [String] {
            self.m.idleTimerFired(c, now: now, into: &self.actions)
            return self.take()
        }
        mutating func connectFailed(_ error: HawserError, retryOthers: Bool = true) -> [String] {
            self.m.connectFailed(
                origin: self.m.origin(for: PoolStateMachineTests.key),
                error: error,
                retryOthers: retryOthers,
                into: &self.actions
            )
            return self.take()
        }
    }

    @Test("origins are made once per key and kept apart")
    func origins() {
        var h = Harness()
        #expect(h.m.origin(for: Self.key) == 0)
        #expect(h.m.origin(for: Self.otherKey) == 1)
        #expect(h.m.origin(for: Self.key) == 0)
    }

    @Test("no idle connection: the request waits and a connection is opened; it runs when connected")
    func submitConnects() {
        var h = Harness()
        let r = Req("r1")
        let c = Conn("c1")
        #expect(h.submit(r) == ["connect 0 a.test"])
        #expect(h.m.waitingCount == 1 && h.m.connectingCount == 1)
        #expect(h.connected(c) == ["execute r1 on c1"])
        #expect(h.m.waitingCount == 0 && h.m.connectingCount == 0 && h.m.connectionCount == 1)
    }

    @Test("released: parked idle with one timer; the next request takes it; released again: no second timer")
    func keepAliveReuse() {
        var h = Harness()
        let r1 = Req("r1")
        let r2 = Req("r2")
        let c = Conn("c1")
        _ = h.submit(r1)
        _ = h.connected(c)
        #expect(h.released(c, now: 10) == ["timer c1 60"])
        #expect(h.m.idleCount == 1)
        #expect(h.submit(r2) == ["execute r2 on c1"])
        #expect(h.released(c, now: 20).isEmpty, "the timer armed at the first release still runs")
    }

    @Test("the limit: no more than maximumPerOrigin connections are opened; waiters queue FIFO")
    func limit() {
        var h = Harness()
        let rs = (1...4).map { Req("r\($0)") }
        #expect(h.submit(rs[0]) == ["connect 0 a.test"])
        #expect(h.submit(rs[1]) == ["connect 0 a.test"])
        #expect(h.submit(rs[2]).isEmpty)
        #expect(h.submit(rs[3]).isEmpty)
        let c1 = Conn("c1")
        let c2 = Conn("c2")
        #expect(h.connected(c1) == ["execute r1 on c1"])
        #expect(h.connected(c2) == ["execute r2 on c2"])
        #expect(h.released(c2) == ["execute r3 on c2"])
        #expect(h.released(c1) == ["execute r4 on c1"])
        // Another origin has its own limit.
        #expect(h.submit(Req("x"), key: Self.otherKey) == ["connect 1 b.test"])
    }

    @Test("a cancelled waiter leaves the queue; the connection opened for it goes idle")
    func cancelWaiting() {
        var h = Harness()
        let r = Req("r1")
        let c = Conn("c1")
        _ = h.submit(r)
        h.m.cancel(r, origin: 0)
        #expect(h.m.waitingCount == 0)
        #expect(h.connected(c, now: 5) == ["timer c1 60"])
        #expect(h.m.idleCount == 1)
    }

    @Test("a failed connect fails the first waiter; the others get attempts of their own, unless the error is shared")
    func connectFailure() {
        var h = Harness()
        let rs = (1...3).map { Req("r\($0)") }
        for r in rs { _ = h.submit(r) }
        let e = HawserError(.cannotConnect, "refused")
        // r1 fails; two waiters remain, one connect remains: one more is opened.
        #expect(h.connectFailed(e) == ["fail r1 cannotConnect", "connect 0 a.test"])
        // A TLS context that cannot be made would fail every attempt the same way.
        #expect(h.connectFailed(e, retryOthers: false) == ["fail r2 cannotConnect"])
        #expect(h.m.waitingCount == 1)
    }

    @Test("a replay needs a new connection: it goes first, skips idle ones, and a reused connection never serves it")
    func freshReplay() {
        var h = Harness()
        let r1 = Req("r1")
        let r2 = Req("r2")
        let replay = Req("replay")
        let c1 = Conn("c1")
        let c2 = Conn("c2")
        _ = h.submit(r1)
        _ = h.submit(r2)
        _ = h.connected(c1)
        _ = h.connected(c2)
        _ = h.released(c1)
        // Limit 2 reached, c1 idle: the replay closes it to make room and connects.
        #expect(h.submit(replay, fresh: true) == ["close c1", "connect 0 a.test"])
        // c2 (reused) becomes free: not for the replay, but for r3 behind it.
        let other = Req("r3")
        #expect(h.submit(other) == [])
        #expect(h.released(c2) == ["execute r3 on c2"])
        // The new connection serves the replay first.
        let c3 = Conn("c3")
        #expect(h.connected(c3) == ["execute replay on c3"])
    }

    @Test("a reused connection with only replays waiting and no room is closed, making room for theirs")
    func reusedClosedForReplay() {
        var h = Harness()
        h.m = Machine(maximumPerOrigin: 1, idleTimeout: 60)
        let r1 = Req("r1")
        let replay = Req("replay")
        let c1 = Conn("c1")
        _ = h.submit(r1)
        _ = h.connected(c1)
        // The replay arrives while c1 is busy: it waits; no room to connect.
        #expect(h.submit(replay, fresh: true).isEmpty)
        #expect(h.released(c1) == ["close c1", "connect 0 a.test"])
        #expect(h.connected(Conn("c2")) == ["execute replay on c2"])
    }

    @Test("idle timer: closes after the timeout since the last use, re-arms for the rest, and waits while busy")
    func idleTimer() {
        var h = Harness()
        let r1 = Req("r1")
        let r2 = Req("r2")
        let c = Conn("c1")
        _ = h.submit(r1)
        _ = h.connected(c, now: 0)
        #expect(h.released(c, now: 0) == ["timer c1 60"])
        _ = h.submit(r2)
        #expect(h.released(c, now: 30).isEmpty)
        // Fires at 60: idle only 30 → re-arm for 30.
        #expect(h.timer(c, now: 60) == ["timer c1 30"])
        // Busy when it fires: look again a whole timeout later.
        _ = h.submit(Req("r3"))
        #expect(h.timer(c, now: 90) == ["timer c1 60"])
        #expect(h.released(c, now: 100).isEmpty)
        #expect(h.timer(c, now: 159) == ["timer c1 1"])
        #expect(h.timer(c, now: 160) == ["close c1"])
        #expect(h.m.connectionCount == 0)
        #expect(h.closed(c).isEmpty, "a connection the pool closed is forgotten already")
    }

    @Test("a connection that closes frees its place: a waiter gets a new connect")
    func closedFreesPlace() {
        var h = Harness()
        h.m = Machine(maximumPerOrigin: 1, idleTimeout: 60)
        let r1 = Req("r1")
        let r2 = Req("r2")
        let c = Conn("c1")
        _ = h.submit(r1)
        _ = h.connected(c)
        #expect(h.submit(r2).isEmpty)
        #expect(h.closed(c) == ["connect 0 a.test"])
        #expect(h.closed(c).isEmpty, "twice is once")
    }

    @Test("shutdown fails every waiter, closes idle connections, and later submits fail at once")
    func shutdown() {
        var h = Harness()
        let r1 = Req("r1")
        let r2 = Req("r2")
        let r3 = Req("r3")
        let c1 = Conn("c1")
        let c2 = Conn("c2")
        _ = h.submit(r1)
        _ = h.connected(c1)
        _ = h.released(c1)
        _ = h.submit(r2)  // takes c1
        _ = h.submit(r3)  // waits, connecting
        _ = h.released(c1)  // r3 takes c1
        _ = h.submit(Req("r4"))  // waits; a connect is under way already
        h.m.shutdown(into: &h.actions)
        #expect(h.take() == ["fail r4 sessionShutDown"])
        // The busy connection finishing is closed, not parked; the late connect too.
        #expect(h.released(c1) == ["close c1"])
        #expect(h.connected(c2) == ["close c2"])
        #expect(h.submit(Req("r5")) == ["fail r5 sessionShutDown"])
        h.m.shutdown(into: &h.actions)
        #expect(h.take().isEmpty, "once")
    }
}
