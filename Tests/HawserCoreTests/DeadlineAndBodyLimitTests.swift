// The total deadline against a peer that trickles, and the buffered body limit against a peer
// that declares more than it; in virtual time, against scripted servers on loopback. A test
// that waits with `eventually` fails (it does not hang) when what it waits for never happens.
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("Total deadlines and the buffered body limit", .serialized)
    struct DeadlineAndBodyLimitTests {
        static let second = FaultTests.second

        static func completions(_ d: RecordingDelegate) -> Int { d.record.withLock { $0.completions } }
        static func bodyCount(_ d: RecordingDelegate) -> Int { d.record.withLock { $0.body.count } }

        // MARK: - The total deadline

        @Test(
            "a request's total deadline ends a response trickled under the idle timeout, at its instant, the redirect before it included"
        )
        func trickleHitsTheTotalDeadline() async throws {
            let redirect = ScriptedServer.Gate()
            let gates = (0..<3).map { _ in ScriptedServer.Gate() }
            var script: [ScriptedServer.Step] = [
                .readRequest(), .gate(redirect),
                .sendText("HTTP/1.1 302 Found\r\nLocation: /slow\r\nContent-Length: 0\r\n\r\n"),
                .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\na"),
            ]
            for g in gates { script += [.gate(g), .sendText("b")] }
            script.append(.hang)
            let server = try ScriptedServer([script])
            defer { server.stop() }
            try await FaultTests.withVirtualSession({
                // Idle: 5 s between bytes; the session's total stays at its 7 days.
                $0.timeoutIntervalForRequest = 5
            }) { session, clock in
                let t0 = clock.now
                var request = HTTPClientRequest(url: url(server.baseURL + "/start"))
                request.timeoutIntervalForResource = 10
                let d = RecordingDelegate()
                session.execute(request, delegate: d)
                #expect(await eventually { server.requestCount == 1 })
                // 3 s for the redirect, then a byte every 3 s: never 5 s without a byte.
                try session.eventLoop.advanceTime(by: 3 * Self.second)
                redirect.openGate()
                #expect(await eventually { Self.bodyCount(d) == 1 })
                for (i, g) in gates.prefix(2).enumerated() {
                    try session.eventLoop.advanceTime(by: 3 * Self.second)
                    g.openGate()
                    #expect(await eventually { Self.bodyCount(d) == 2 + i })
                }
                // t0 + 9 s: the last byte came now; 1 s to the deadline, 5 s to the idle timeout.
                try session.eventLoop.advanceTime(by: Self.second - 1)
                #expect(Self.completions(d) == 0, "10 s minus a nanosecond: still running")
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { Self.completions(d) == 1 }, "the deadline ended the task")
                let r = d.record.withLock { $0 }
                #expect(r.completions == 1)
                let e = FaultTests.error(r)
                #expect(e?.code == .resourceTimeout && e?.urlErrorCode == -1001, "\(String(describing: e))")
                #expect(e?.message.contains("total deadline passed") == true, "\(String(describing: e))")
                #expect(e?.message.contains("within 10 s") == true, "the request's 10 s, not the session's")
                #expect(r.metrics?.redirectCount == 1, "the redirect was part of the task")
                #expect(r.body == Array("abb".utf8))
                #expect(clock.now == t0 + 10 * Self.second)
                #expect(await eventually { session.poolStatistics().openConnections == 0 }, "its connection is closed")
                gates[2].openGate()
            }
        }

        @Test("the idle timeout says it is the idle timeout, and fires when bytes stop, before the deadline")
        func idleTimeoutIsNotTheDeadline() async throws {
            let server = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\na"), .hang]
            ])
            defer { server.stop() }
            try await FaultTests.withVirtualSession({ $0.timeoutIntervalForRequest = 5 }) { session, clock in
                let t0 = clock.now
                var request = HTTPClientRequest(url: url(server.baseURL + "/"))
                request.timeoutIntervalForResource = 10
                let d = RecordingDelegate()
                session.execute(request, delegate: d)
                #expect(await eventually { Self.bodyCount(d) == 1 })
                try session.eventLoop.advanceTime(by: 5 * Self.second)
                #expect(await eventually { Self.completions(d) == 1 })
                let e = FaultTests.error(d.record.withLock { $0 })
                #expect(e?.code == .idleTimeout, "\(String(describing: e))")
                #expect(e?.message.contains("idle timeout") == true && e?.message.contains("deadline") == false)
                #expect(clock.now == t0 + 5 * Self.second)
            }
        }

        @Test("the total deadline covers connecting: a connect that hangs ends at the request's deadline")
        func deadlineCoversConnecting() async throws {
            let full = try FullBacklogListener()
            defer { full.close() }
            try await FaultTests.withVirtualSession({ $0.connectTimeout = 30 }) { session, clock in
                let t0 = clock.now
                var request = HTTPClientRequest(url: url("http://127.0.0.1:\(full.port)/"))
                request.timeoutIntervalForResource = 4
                let d = RecordingDelegate()
                session.execute(request, delegate: d)
                #expect(await eventually { session.poolStatistics().connecting == 1 })
                try session.eventLoop.advanceTime(by: 4 * Self.second - 1)
                #expect(Self.completions(d) == 0, "not a nanosecond early")
                try session.eventLoop.advanceTime(by: 1)
                #expect(await eventually { Self.completions(d) == 1 })
                let e = FaultTests.error(d.record.withLock { $0 })
                #expect(e?.code == .resourceTimeout && e?.message.contains("total deadline") == true)
                #expect(clock.now == t0 + 4 * Self.second)
            }
        }

        // MARK: - The buffered body limit

        @Test(
            "a Content-Length over maximumBufferedBodySize is refused at the head, before any body byte, and its connection is closed"
        )
        func declaredLengthRefusedAtTheHead() async throws {
            // The first connection declares a megabyte and then sends nothing, the connection left
            // open: only a refusal at the head can end the request before any time passes.
            let server = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"), .hang],
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), .hang],
            ])
            defer { server.stop() }
            try await FaultTests.withVirtualSession({ $0.maximumBufferedBodySize = 1000 }) { session, clock in
                let t0 = clock.now
                let result = Mutex<Result<HTTPClientResponse, HawserError>?>(nil)
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/big"))) { r in
                    result.withLock { $0 = r }
                }
                #expect(
                    await eventually { result.withLock { $0 } != nil },
                    "refused at the head, with the body never sent and no time passing"
                )
                guard case .failure(let e)? = result.withLock({ $0 }) else {
                    Issue.record("expected limitExceeded, got \(String(describing: result.withLock { $0 }))")
                    // End the hung task so the session shuts down cleanly.
                    try session.eventLoop.advanceTime(by: 3600 * Self.second)
                    return
                }
                #expect(e.code == .limitExceeded && e.urlErrorCode == -1103, "\(e)")
                #expect(e.message.contains("1000000-byte body"), "names the declared length: \(e.message)")
                #expect(e.message.contains("maximumBufferedBodySize (1000 bytes)"), "names the limit: \(e.message)")
                #expect(clock.now == t0)
                #expect(await eventually { session.poolStatistics().openConnections == 0 }, "the connection is closed")
                let ok = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/small")))
                #expect(ok.body == Array("ok".utf8))
                #expect(ok.metrics.isReusedConnection == false, "the refused connection was not reused")
                #expect(server.requestCount == 2)
            }
        }

        @Test(
            "a HEAD answer's Content-Length is not a body; a coded body's Content-Length counts coded bytes, and the decoded limit applies as it arrives"
        )
        func declaredLengthThatIsNotTheBody() async throws {
            // Decodes to 2000 bytes; coded, far fewer.
            let coded = try GzipEncoder.compress([UInt8](repeating: 0x61, count: 2000))
            let codedHead = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: \(coded.count)\r\n\r\n"
            // Decodes to 10 bytes, but a header comment makes it 3000 coded bytes.
            var padded = try GzipEncoder.compress(Array("0123456789".utf8))
            #expect(padded[3] == 0, "no header flags: a comment can be spliced in")
            padded[3] = 0x10  // FCOMMENT
            padded.insert(contentsOf: [UInt8](repeating: 0x63, count: 3000) + [0], at: 10)
            let paddedHead = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: \(padded.count)\r\n\r\n"
            let server = try ScriptedServer([
                [
                    .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"),
                    .readRequest(), .sendText(codedHead), .send(coded), .hang,
                ],
                [.readRequest(), .sendText(paddedHead), .send(padded), .hang],
            ])
            defer { server.stop() }
            try await FaultTests.withVirtualSession({ $0.maximumBufferedBodySize = 1000 }) { session, _ in
                let head = try await session.response(
                    for: HTTPClientRequest(method: .head, url: url(server.baseURL + "/head"))
                )
                #expect(head.status == 200 && head.body.isEmpty, "a HEAD answer's Content-Length describes no body")
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/coded")))
                    Issue.record("2000 decoded bytes were buffered under a 1000-byte limit")
                } catch let error as HawserError {
                    #expect(error.code == .limitExceeded, "\(error)")
                    #expect(error.message.contains("more than that arrived"), "refused while decoding: \(error)")
                }
                let small = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/padded")))
                #expect(small.body == Array("0123456789".utf8), "a coded length over the limit is not refused")
            }
        }

        @Test("a streaming body's collect(upTo:) refuses a longer Content-Length at once, before any of it arrives")
        func collectRefusesAtTheHead() async throws {
            let server = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"), .hang]
            ])
            defer { server.stop() }
            try await FaultTests.withVirtualSession { session, clock in
                let t0 = clock.now
                let r = try await session.streamingResponse(for: HTTPClientRequest(url: url(server.baseURL + "/")))
                let outcome = Mutex<HawserError?>(nil)
                let collecting = Task {
                    do throws(HawserError) {
                        _ = try await r.body.collect(upTo: 1000)
                    } catch {
                        outcome.withLock { $0 = error }
                    }
                }
                #expect(await eventually { outcome.withLock { $0 } != nil }, "refused with the body never sent")
                if outcome.withLock({ $0 }) == nil {
                    // End the hung request (idle timeout) so the test can finish.
                    try session.eventLoop.advanceTime(by: 3600 * Self.second)
                }
                await collecting.value
                let e = outcome.withLock { $0 }
                #expect(e?.code == .limitExceeded, "\(String(describing: e))")
                #expect(e?.message.contains("1000000-byte body") == true, "\(String(describing: e))")
                #expect(clock.now == t0 || e?.code != .limitExceeded)
                #expect(await eventually { session.poolStatistics().openConnections == 0 }, "the connection is closed")
            }
        }
    }
}
