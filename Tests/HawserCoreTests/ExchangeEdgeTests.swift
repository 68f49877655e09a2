// Responses and connection failures at the edges of an exchange, over real sockets: a 101 the
// request did not ask for, a higher HTTP/1 minor version, heads over the parser's limits, and
// the one retry of an idempotent request when kept-alive connections die together.
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("Exchange edges: 101, versions, limits, stale connections", .serialized)
    struct ExchangeEdgeTests {
        static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

        @Test("a 101 the request did not ask for is a protocol error that names the 101, on every API")
        func unrequestedSwitchingProtocols() async throws {
            let switching =
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{2}hi"
            let server = try ScriptedServer([
                [.readRequest(), .sendText(switching), .waitForClose],
                [.readRequest(), .sendText(switching), .waitForClose],
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                let r = await FaultTests.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                #expect(r.head == nil, "no final head is delivered")
                let e = try #require(FaultTests.error(r))
                #expect(e.code == .protocolError)
                #expect(e.message.contains("101"), "\(e.message)")
                #expect(e.message.contains("websocket"), "\(e.message)")
                let second = HTTPClientRequest(url: url(server.baseURL + "/"))
                do throws(HawserError) {
                    _ = try await session.response(for: second)
                    Issue.record("a 101 completed as a response")
                } catch {
                    #expect(error.code == .protocolError)
                    #expect(error.message.contains("101 Switching Protocols"), "\(error.message)")
                }
                #expect(session.poolStatistics().idleConnections == 0, "the switched connection is not pooled")
            }
        }

        @Test("HTTP/1.2 is processed as HTTP/1.1: the response is read and the connection kept alive")
        func higherMinorVersion() async throws {
            let v12 = "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok"
            let server = try ScriptedServer([
                [.readRequest(), .sendText(v12), .readRequest(), .sendText(v12), .waitForClose]
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                let first = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/a")))
                #expect(first.status == 200)
                #expect(first.head.version == HTTPVersion(major: 1, minor: 2))
                #expect(first.body == Array("ok".utf8))
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/b")))
                #expect(second.metrics.isReusedConnection, "kept alive by default, as HTTP/1.1")
                #expect(server.connections.load(ordering: .relaxed) == 1)
            }
        }

        @Test(
            "a status line, a field line or a field count over the limit is limitExceeded, not protocolError",
            arguments: [
                ("HTTP/1.1 200 " + String(repeating: "A", count: 300) + "\r\nContent-Length: 0\r\n\r\n", "line"),
                (
                    "HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "b", count: 300)
                        + "\r\nContent-Length: 0\r\n\r\n", "line"
                ),
                (
                    "HTTP/1.1 200 OK\r\n" + String(repeating: "X-A: 1\r\n", count: 20) + "Content-Length: 0\r\n\r\n",
                    "field lines"
                ),
            ]
        )
        func limitsAreLimitExceeded(_ response: String, _ what: String) async throws {
            let server = try ScriptedServer([[.readRequest(), .sendText(response), .waitForClose]])
            defer { server.stop() }
            try await FaultTests.withSession({ c in
                c.parserLimits.maxLineLength = 256
                c.parserLimits.maxHeaderCount = 16
            }) { session in
                let r = await FaultTests.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                let e = try #require(FaultTests.error(r))
                #expect(e.code == .limitExceeded, "\(e)")
                #expect(e.urlErrorCode == -1103)
                #expect(e.message.contains(what), "\(e.message)")
            }
        }

        @Test(
            "folded header lines are unfolded (RFC 9112 §5.2) and leading zeros in chunk sizes read, on one kept-alive connection"
        )
        func foldedFieldsAndLongChunkSizes() async throws {
            let responses = [
                // A value folded after the colon; Content-Length on a continuation line.
                "HTTP/1.1 200 OK\r\nX-Folded:\r\n value\r\nContent-Length:\r\n 5\r\n\r\nhello",
                // A blank continuation line, then a value folded in the middle.
                "HTTP/1.1 200 OK\r\nX-A: 1\r\n \r\nX-B: two\r\n\t words\r\nContent-Length: 2\r\n\r\nok",
                // Chunk sizes with many leading zeros.
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + String(repeating: "0", count: 40)
                    + "5\r\nchunk\r\n" + String(repeating: "0", count: 40) + "\r\n\r\n",
            ]
            let server = try ScriptedServer([
                responses.flatMap { [ScriptedServer.Step.readRequest(), .sendText($0)] } + [.waitForClose]
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                let first = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/1")))
                #expect(first.headers["X-Folded"] == "value")
                #expect(first.headers["Content-Length"] == "5")
                #expect(first.body == Array("hello".utf8))
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/2")))
                #expect(second.headers["X-A"] == "1")
                #expect(second.headers["X-B"] == "two words")
                #expect(second.body == Array("ok".utf8))
                let third = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/3")))
                #expect(third.body == Array("chunk".utf8))
                #expect(third.metrics.isReusedConnection)
                #expect(server.connections.load(ordering: .relaxed) == 1, "every response was framed right")
            }
        }

        @Test("obsoleteLineFolding = .reject refuses a folded response as a protocol error")
        func foldedFieldsRejectedWhenConfigured() async throws {
            let folded = "HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok"
            let server = try ScriptedServer([[.readRequest(), .sendText(folded), .waitForClose]])
            defer { server.stop() }
            try await FaultTests.withSession({ $0.obsoleteLineFolding = .reject }) { session in
                #expect(SessionConfiguration().obsoleteLineFolding == .replaceWithSpace)
                let r = await FaultTests.run(session, HTTPClientRequest(url: url(server.baseURL + "/")))
                #expect(r.completions == 1)
                let e = try #require(FaultTests.error(r))
                #expect(e.code == .protocolError, "\(e)")
                #expect(e.message.contains("obsolete line folding"), "\(e.message)")
            }
        }

        @Test(
            "a streamed body of known length is sent at its last byte: an early answer leaves the connection reusable"
        )
        func streamedBodyCompleteAtItsLength() async throws {
            let payload = [UInt8](repeating: 0x62, count: 1000)
            let server = try ScriptedServer([
                [
                    .readRequest(body: payload.count), .sendText(Self.ok), .readRequest(), .sendText(Self.ok),
                    .waitForClose,
                ]
            ])
            defer { server.stop() }
            let producerMayReturn = AsyncStreamBox()
            try await FaultTests.withSession { session in
                var put = HTTPClientRequest(method: .put, url: url(server.baseURL + "/upload"))
                put.expectsContinue = false
                put.body = .stream(length: Int64(payload.count)) { writer in
                    try await writer.write(payload)
                    // The server has every byte and answers; the producer returns only after that.
                    await producerMayReturn.wait()
                }
                let first = try await session.response(for: put)
                producerMayReturn.signal()
                #expect(first.status == 200)
                let second = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/next")))
                #expect(second.metrics.isReusedConnection, "the upload's connection was kept")
                #expect(server.connections.load(ordering: .relaxed) == 1)
            }
        }

        @Test("two kept-alive connections that both died: the GET's one retry goes to a new connection")
        func retryGoesToAFreshConnection() async throws {
            let ok = Self.ok
            // The first two connections answer only once both hold a request (so each request has
            // its own connection and both are pooled: a connection that answered early would serve
            // the other request itself), then close on their next request; the third answers.
            let server = try ScriptedServer([
                [.readRequest(), .awaitRequests(2), .sendText(ok), .readRequest(), .close],
                [.readRequest(), .awaitRequests(2), .sendText(ok), .readRequest(), .close],
                [.readRequest(), .sendText(ok), .waitForClose],
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                async let a = session.response(for: HTTPClientRequest(url: url(server.baseURL + "/a")))
                async let b = session.response(for: HTTPClientRequest(url: url(server.baseURL + "/b")))
                let (ra, rb) = try await (a, b)
                #expect(ra.status == 200 && rb.status == 200)
                #expect(session.poolStatistics().idleConnections == 2)
                let third = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/c")))
                #expect(third.body == Array("ok".utf8))
                #expect(third.metrics.retryCount == 1)
                #expect(third.metrics.isReusedConnection == false)
                #expect(server.connections.load(ordering: .relaxed) == 3)
            }
        }

        @Test("the one retry is per exchange: every hop of a redirect chain may replay on a new connection")
        func retryPerExchangeInARedirectChain() async throws {
            func redirect(_ to: String) -> ScriptedServer.Step {
                .sendText("HTTP/1.1 302 Found\r\nLocation: \(to)\r\nContent-Length: 0\r\n\r\n")
            }
            // Each connection answers one 302 and then closes without saying so (no Connection: close).
            let server = try ScriptedServer([
                [.readRequest(), redirect("/2"), .close],
                [.readRequest(), redirect("/3"), .close],
                [.readRequest(), redirect("/4"), .close],
                [.readRequest(), .sendText(Self.ok), .waitForClose],
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/1")))
                #expect(r.status == 200)
                #expect(r.body == Array("ok".utf8))
                #expect(r.metrics.redirectCount == 3)
                #expect(server.connections.load(ordering: .relaxed) == 4)
            }
        }
    }
}
