import Foundation
import HawserTestServer
import Synchronization
import Testing

@testable import HawserCore

/// The token bucket on its own: exact integer refills, the burst, the wait until full.
@Suite("Bandwidth limit: the token bucket")
struct TokenBucketTests {
    static let second: UInt64 = 1_000_000_000

    @Test("a full bucket holds an eighth of a second's bytes, refills at the rate, and says when it is full")
    func refill() {
        var b = TokenBucket(bytesPerSecond: 8000, now: 0)
        #expect(b.capacity == 1000)
        #expect(b.available(now: 0) == 1000)
        b.spend(1000, now: 0)
        #expect(b.isEmpty)
        #expect(b.available(now: 0) == 0)
        #expect(b.nanosecondsUntilFull() == Self.second / 8)
        // 1 ms at 8000 B/s is 8 bytes, exactly.
        #expect(b.available(now: 1_000_000) == 8)
        #expect(b.available(now: Self.second / 8 - 1) == 999)
        #expect(b.available(now: Self.second / 8) == 1000)
        // Never more than the capacity, however long it waited.
        #expect(b.available(now: 3600 * Self.second) == 1000)
    }

    @Test("a limit holds the connection once its bucket runs empty, for as long as the bucket takes to fill")
    func limitHolds() {
        var receive = BandwidthLimit(bytesPerSecond: 8000, now: 0)
        #expect(receive.allowance(now: 0) == 1000)
        #expect(receive.spend(500, now: 0) == nil)
        #expect(!receive.throttled)
        #expect(receive.spend(500, now: 0) == Self.second / 8)
        #expect(receive.throttled)
        // Held: nothing moves and nothing is armed again until the timer releases it, even once full.
        #expect(receive.spend(0, now: 1) == nil)
        #expect(receive.allowance(now: Self.second) == 0)
        receive.release()
        #expect(!receive.throttled)
        #expect(receive.allowance(now: Self.second) == 1000)
        // The send side asks before it writes: an empty bucket holds it once.
        var send = BandwidthLimit(bytesPerSecond: 8000, now: 0)
        send.bucket.spend(1000, now: 0)
        #expect(send.allowance(now: 0) == 0)
        #expect(send.holdIfEmpty() == Self.second / 8)
        #expect(send.holdIfEmpty() == nil)
    }

    @Test("the request's limit replaces the session's, 0 lifts it, and no limit is nil")
    func limitChosen() {
        #expect(BandwidthLimit.chosen(request: nil, session: 0, now: 0) == nil)
        #expect(BandwidthLimit.chosen(request: 0, session: 8000, now: 0) == nil)
        #expect(BandwidthLimit.chosen(request: nil, session: 8000, now: 0)?.bucket.capacity == 1000)
        #expect(BandwidthLimit.chosen(request: 16000, session: 8000, now: 0)?.bucket.capacity == 2000)
    }

    @Test("the burst is at least a byte and at most 4 MiB; a huge rate or a long wait cannot overflow")
    func bounds() {
        #expect(TokenBucket.capacity(forRate: 1) == 1)
        #expect(TokenBucket.capacity(forRate: 7) == 1)
        #expect(TokenBucket.capacity(forRate: 1 << 40) == 4 * 1024 * 1024)
        var slow = TokenBucket(bytesPerSecond: 3, now: 0)
        slow.spend(1, now: 0)
        // One byte at 3 B/s takes a third of a second, rounded up to the nanosecond.
        #expect(slow.nanosecondsUntilFull() == 333_333_334)
        var fast = TokenBucket(bytesPerSecond: .max, now: 0)
        fast.spend(Int.max, now: 0)
        #expect(fast.isEmpty)
        #expect(fast.nanosecondsUntilFull() == 1)
        #expect(fast.available(now: UInt64.max) == 4 * 1024 * 1024)
    }
}

extension NetworkTests {
    /// Receive and send limits on real loopback sockets, in virtual time: the bytes that move
    /// per step of the loop's ManualClock are asserted exactly.
    @Suite("Bandwidth limits", .serialized)
    struct BandwidthLimitTests {
        static let second: UInt64 = 1_000_000_000
        /// 8000 B/s: a 1000-byte burst, refilled every 125 ms.
        static let rate: Int64 = 8000
        static let step = second / 8

        static func withVirtualSession(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (Session, ManualClock) async throws -> Void
        ) async throws {
            try await expectNoFDLeak {
                var config = SessionConfiguration()
                configure(&config)
                let clock = ManualClock()
                let loop = try EventLoop(clock: clock)
                let session = Session(configuration: config, eventLoop: loop)
                defer {
                    session.shutdown()
                    loop.shutdown()
                }
                try await body(session, clock)
            }
        }

        /// Records the task's wire byte counts as they move (read on the loop).
        final class CountingDelegate: RecordingDelegate, @unchecked Sendable {
            let received = Mutex<Int64>(0)
            let sent = Mutex<Int64>(0)
            var pauseAtFirstBody = false
            let task = Mutex<RequestTask?>(nil)

            override func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
                let first = self.record.withLock { $0.body.isEmpty }
                super.task(task, didReceiveBody: bytes)
                self.received.withLock { $0 = task.currentMetrics.bytesReceived }
                if first && self.pauseAtFirstBody {
                    self.task.withLock { $0 = task }
                    task.pauseReading()
                }
            }

            override func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
                super.task(task, didSendBodyBytes: totalSent, expected: expected)
                self.sent.withLock { $0 = task.currentMetrics.bytesSent }
            }

            var completed: Bool { self.record.withLock { $0.completions } > 0 }
        }

        /// From the end of the first step on (2000 bytes moved), advances the clock a step at a
        /// time until `total` bytes moved, and after each step finds exactly 1000 bytes more
        /// (the last step: the rest), never more.
        static func stepThrough(_ session: Session, total: Int64, count: () -> Int64) async throws {
            let steps = (total + 999) / 1000 - 1
            guard steps >= 2 else { return }
            for k in 2...steps {
                try session.eventLoop.advanceTime(by: Self.step)
                let expected = min(total, 1000 * (k + 1))
                let reached = await eventually { count() == expected }
                #expect(reached, "step \(k): \(expected) bytes moved")
                #expect(count() == expected, "step \(k): never more than the limit")
                if !reached { return }
            }
        }

        @Test("a receive limit reads a 1000-byte burst, then 1000 bytes each 125 ms, and ends at the instant it allows")
        func receiveLimit() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withVirtualSession({ $0.maximumReceiveBytesPerSecond = Self.rate }) { session, clock in
                // The response's size on the wire (head and body), from an unlimited request.
                var free = HTTPClientRequest(url: url(server.baseURL + "/bytes/6000"))
                free.maximumReceiveBytesPerSecond = 0
                let total = try await session.response(for: free).metrics.bytesReceived
                #expect(total > 6000)
                let t0 = clock.now
                let d = CountingDelegate()
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/bytes/6000")), delegate: d)
                #expect(await eventually { d.received.withLock { $0 } == 1000 }, "the first burst")
                try session.eventLoop.advanceTime(by: Self.step - 1)
                #expect(d.received.withLock { $0 } == 1000, "not a nanosecond early: the socket is not read")
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { d.received.withLock { $0 } == 2000 })
                try await Self.stepThrough(session, total: total, count: { d.received.withLock { $0 } })
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.body == pattern(6000))
                #expect(r.metrics!.bytesReceived == total)
                // ceil(total / 1000) reads, one each 125 ms after the first: the end is at that instant.
                #expect(r.metrics!.responseEnd == t0 + UInt64((total + 999) / 1000 - 1) * Self.step)
            }
        }

        @Test("over TLS the limit counts decrypted bytes: OpenSSL's read-ahead waits for the timer too")
        func receiveLimitOverTLS() async throws {
            let pki = try TestPKI.shared()
            let tls = TestServer.TLS(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
            let server = try TestServer(host: "127.0.0.1", tls: tls)
            defer { server.shutdown() }
            try await Self.withVirtualSession({
                $0.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.root]))
                $0.maximumReceiveBytesPerSecond = Self.rate
            }) { session, clock in
                let target = "https://localhost:\(server.port)/bytes/6000"
                var free = HTTPClientRequest(url: url(target))
                free.maximumReceiveBytesPerSecond = 0
                let total = try await session.response(for: free).metrics.bytesReceived
                let t0 = clock.now
                let d = CountingDelegate()
                session.execute(HTTPClientRequest(url: url(target)), delegate: d)
                #expect(await eventually { d.received.withLock { $0 } == 1000 }, "the first burst")
                try session.eventLoop.advanceTime(by: Self.step - 1)
                #expect(d.received.withLock { $0 } == 1000, "what OpenSSL holds waits too")
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { d.received.withLock { $0 } == 2000 })
                try await Self.stepThrough(session, total: total, count: { d.received.withLock { $0 } })
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.body == pattern(6000))
                #expect(r.metrics!.responseEnd == t0 + UInt64((total + 999) / 1000 - 1) * Self.step)
            }
        }

        @Test("a send limit writes the head and body 1000 bytes at a time, 125 ms apart")
        func sendLimit() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withVirtualSession({ $0.maximumSendBytesPerSecond = Self.rate }) { session, clock in
                let t0 = clock.now
                let d = CountingDelegate()
                var request = HTTPClientRequest(
                    method: .put,
                    url: url(server.baseURL + "/sink"),
                    body: .bytes(pattern(20_000))
                )
                request.expectsContinue = false
                let task = session.execute(request, delegate: d)
                let total = try session.eventLoop.submitAndWait { Int64(task.wireRequestHead.count) } + 20_000
                #expect(await eventually { d.sent.withLock { $0 } == 1000 }, "the first burst, head included")
                try session.eventLoop.advanceTime(by: Self.step - 1)
                #expect(d.sent.withLock { $0 } == 1000, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { d.sent.withLock { $0 } == 2000 })
                try await Self.stepThrough(session, total: total, count: { d.sent.withLock { $0 } })
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.head?.status == 200)
                #expect(r.metrics!.bytesSent == total)
                #expect(r.metrics!.requestEnd == t0 + UInt64((total + 999) / 1000 - 1) * Self.step)
            }
        }

        @Test("a request's own limit replaces the session's; 0 lifts it for that request")
        func perRequest() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withVirtualSession({ $0.maximumReceiveBytesPerSecond = Self.rate }) { session, _ in
                var unlimited = HTTPClientRequest(url: url(server.baseURL + "/bytes/50000"))
                unlimited.maximumReceiveBytesPerSecond = 0
                let free = CountingDelegate()
                session.execute(unlimited, delegate: free)
                // Whole, and the clock never moved.
                let r = await free.wait()
                #expect(r.body.count == 50000)

                var faster = HTTPClientRequest(url: url(server.baseURL + "/bytes/50000"))
                faster.maximumReceiveBytesPerSecond = 2 * Self.rate
                let d = CountingDelegate()
                let task = session.execute(faster, delegate: d)
                #expect(await eventually { d.received.withLock { $0 } == 2000 }, "the request's burst: 2000 bytes")
                try session.eventLoop.advanceTime(by: Self.step)
                #expect(await eventually { d.received.withLock { $0 } == 4000 })
                task.cancel()
                #expect(await d.wait().completions == 1)
            }
        }

        @Test("the receive limit and a consumer's back-pressure: reading resumes only when both allow")
        func withBackPressure() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await Self.withVirtualSession({ $0.maximumReceiveBytesPerSecond = Self.rate }) { session, _ in
                let d = CountingDelegate()
                d.pauseAtFirstBody = true
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/bytes/3000")), delegate: d)
                #expect(await eventually { d.received.withLock { $0 } == 1000 })
                // The limit allows more, the consumer does not: nothing is read.
                try session.eventLoop.advanceTime(by: 10 * Self.step)
                #expect(d.received.withLock { $0 } == 1000)
                // The consumer resumes: a full bucket's worth, then the limit holds again.
                d.task.withLock { $0 }!.resumeReading()
                #expect(await eventually { d.received.withLock { $0 } == 2000 })
                try session.eventLoop.advanceTime(by: Self.step - 1)
                #expect(d.received.withLock { $0 } == 2000)
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { d.received.withLock { $0 } == 3000 })
                try session.eventLoop.advanceTime(by: Self.step)
                let r = await d.wait()
                #expect(r.completions == 1)
                #expect(r.body == pattern(3000))
            }
        }

        @Test(
            "a response whose last read empties the bucket leaves its connection reading in the pool: the server's close is seen"
        )
        func pooledAfterThrottle() async throws {
            // A response of exactly 1000 bytes (the whole burst), then the server closes.
            var n = 900
            func head(_ n: Int) -> String { "HTTP/1.1 200 OK\r\nContent-Length: \(n)\r\n\r\n" }
            n = 1000 - head(n).utf8.count
            let server = try ScriptedServer([
                [.readRequest(), .sendText(head(n) + String(repeating: "x", count: n)), .close]
            ])
            defer { server.stop() }
            try await Self.withVirtualSession({ $0.maximumReceiveBytesPerSecond = Self.rate }) { session, _ in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.body.count == n && r.metrics.bytesReceived == 1000)
                // The clock never moves: only a connection that reads can find the close.
                #expect(await eventually { session.poolStatistics().openConnections == 0 })
            }
        }

        @Test("a task held by its own limit is not idle: the idle timeout does not fire while it waits")
        func notIdle() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            // 1 B/s: a one-byte bucket, refilled each second; the idle timeout is half a second.
            try await Self.withVirtualSession({
                $0.maximumReceiveBytesPerSecond = 1
                $0.timeoutIntervalForRequest = 0.5
            }) { session, _ in
                let d = CountingDelegate()
                let task = session.execute(HTTPClientRequest(url: url(server.baseURL + "/bytes/10")), delegate: d)
                #expect(await eventually { task.currentMetricsOnLoop(session).bytesReceived == 1 })
                for k in 2...5 {
                    try session.eventLoop.advanceTime(by: Self.second)
                    #expect(await eventually { task.currentMetricsOnLoop(session).bytesReceived == Int64(k) })
                }
                #expect(!d.completed, "no idle timeout while the limit holds the task")
                task.cancel()
                let r = await d.wait()
                #expect(r.completions == 1)
                if case .failure(let e)? = r.result {
                    #expect(e.code == .cancelled)
                } else {
                    Issue.record("not cancelled")
                }
            }
        }
    }
}

extension RequestTask {
    /// The task's metrics, read on its loop.
    fileprivate func currentMetricsOnLoop(_ session: Session) -> TaskMetrics {
        (try? session.eventLoop.submitAndWait { self.currentMetrics }) ?? TaskMetrics()
    }
}
