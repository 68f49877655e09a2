import HawserCore
import Synchronization
import Testing

@testable import HawserTool

/// The open-loop schedule in virtual time: plain numbers, and an event loop on a ManualClock
/// whose timers drive a simulated connection the way the raw engine's connections are driven.
@Suite("hawser load: the open-loop schedule")
struct LoadScheduleTests {
    @Test("request k is due at start + k intervals, computed, so thousands of odd intervals do not drift")
    func intendedTimes() {
        let start: UInt64 = 5_000_000_000
        let s = OpenLoopSchedule(start: start, ratePerSecond: 1000)
        #expect((0..<5).map { s.intendedTime(of: $0) } == [0, 1, 2, 3, 4].map { start + $0 * 1_000_000 })
        // 3 per second: 333,333,333.3 ns apart; 3 million requests later exactly 1e6 s have passed.
        let third = OpenLoopSchedule(start: start, ratePerSecond: 3)
        #expect(third.intendedTime(of: 3) == start + 1_000_000_000)
        #expect(third.intendedTime(of: 3_000_000) == start + 1_000_000 * 1_000_000_000)
        // Phases spread 4 connections over one interval.
        #expect(
            (0..<4).map { OpenLoopSchedule.phase(index: $0, of: 4, ratePerSecond: 100) } == [
                0, 2_500_000, 5_000_000, 7_500_000,
            ]
        )
    }

    @Test("a free connection waits until the next request is due, then sends it with that intended time")
    func waitThenSend() {
        var s = OpenLoopSchedule(start: 1_000, ratePerSecond: 1_000_000)  // 1 µs apart
        #expect(s.next(now: 999) == .wait(until: 1_000))
        #expect(s.next(now: 1_000) == .send(intended: 1_000))
        #expect(s.next(now: 1_500) == .wait(until: 2_000))
        // Late by 3.5 intervals: the due ones go at once, each with its own intended time.
        #expect(s.next(now: 5_500) == .send(intended: 2_000))
        #expect(s.next(now: 5_500) == .send(intended: 3_000))
        #expect(s.next(now: 5_500) == .send(intended: 4_000))
        #expect(s.next(now: 5_500) == .send(intended: 5_000))
        #expect(s.next(now: 5_500) == .wait(until: 6_000))
        #expect(s.issued == 5)
    }

    /// One connection at 100 requests/s against a server that answers in 1 ms except for one
    /// stall: the response to the request sent at 2 s comes at 3 s. Driven by the loop's timers
    /// on a ManualClock, 1 ms per step, for 10 virtual seconds.
    @Test(
        "after a 1 s stall the requests that fell due are sent back to back and their latency counts from when they were due"
    )
    func stallInVirtualTime() throws {
        let clock = ManualClock()
        let loop = try EventLoop(name: "schedule-test", clock: clock)
        defer { loop.shutdown() }
        let sim = SimulatedConnection(
            loop: loop,
            start: clock.now,
            rate: 100,
            stallAt: 2_000_000_000,
            stallEnd: 3_000_000_000
        )
        try loop.submitAndWait { sim.next() }
        for _ in 0..<10_000 { try loop.advanceTime(by: 1_000_000) }
        let r = try loop.submitAndWait { sim.results }
        // Rate: exactly 100/s over 10 s; the last response (intended 9.99 s) completes at 9.991 s.
        #expect(r.count == 1000)
        #expect(r.map(\.intended) == (0..<1000).map { sim.origin + UInt64($0) * 10_000_000 })
        let corrected = r.map { $0.done - $0.intended }
        let uncorrected = r.map { $0.done - $0.sent }
        // The stalled request: 1 s either way. The 99 due during the stall: sent back to back
        // from 3 s (one per 1 ms response), corrected latency from when each was due.
        #expect(corrected[200] == 1_000_000_000 && uncorrected[200] == 1_000_000_000)
        for k in 201..<300 {
            let due = UInt64(k - 200) * 10_000_000  // after the stalled request's send
            let sentAt = 1_000_000_000 + UInt64(k - 201) * 1_000_000  // back to back from the end of the stall
            #expect(r[k].sent - r[200].sent == sentAt, "request \(k) sent at +\(r[k].sent - r[200].sent)")
            #expect(corrected[k] == sentAt + 1_000_000 - due, "request \(k)")
            #expect(uncorrected[k] == 1_000_000)
        }
        // Caught up after 111 requests (1 s + j ms = j × 10 ms): from then on every request goes
        // when due and takes 1 ms; before the stall too.
        #expect((312..<1000).allSatisfy { r[$0].sent == r[$0].intended && corrected[$0] == 1_000_000 })
        #expect((0..<200).allSatisfy { r[$0].sent == r[$0].intended && corrected[$0] == 1_000_000 })
        #expect(r[310].sent > r[310].intended)
        // Uncorrected, only one request saw the stall; corrected, a tenth of the run did.
        #expect(uncorrected.filter { $0 > 2_000_000 }.count == 1)
        #expect(corrected.filter { $0 > 2_000_000 }.count >= 98)
    }
}

/// A connection in virtual time: one request in flight, sent when the schedule says, answered
/// 1 ms later, or at `stallEnd` when sent in [stallAt, stallEnd) after the start.
final class SimulatedConnection: @unchecked Sendable {
    struct Result: Sendable {
        var intended: UInt64
        var sent: UInt64
        var done: UInt64
    }
    let loop: EventLoop
    let origin: UInt64
    var schedule: OpenLoopSchedule
    let stall: Range<UInt64>
    var results: [Result] = []

    init(loop: EventLoop, start: UInt64, rate: Double, stallAt: UInt64, stallEnd: UInt64) {
        self.loop = loop
        self.origin = start
        self.schedule = OpenLoopSchedule(start: start, ratePerSecond: rate)
        self.stall = (start + stallAt)..<(start + stallEnd)
    }

    func next() {
        let now = self.loop.now
        switch self.schedule.next(now: now) {
        case .wait(let until):
            self.loop.schedule(in: until - now) { self.next() }
        case .send(let intended):
            let done = self.stall.contains(now) ? self.stall.upperBound : now + 1_000_000
            self.loop.schedule(in: done - now) {
                self.results.append(Result(intended: intended, sent: now, done: done))
                self.next()
            }
        }
    }
}
