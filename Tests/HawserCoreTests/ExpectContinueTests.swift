import Foundation
import HawserCore
import HawserTestServer
import Testing

extension NetworkTests {
    @Suite("Expect: 100-continue", .serialized)
    struct ExpectContinueTests {
        static let body = [UInt8](repeating: 0x61, count: 64 * 1024)

        static func request(port: Int, expects: Bool? = true) -> HTTPClientRequest {
            var r = HTTPClientRequest(
                method: .put,
                url: url("http://127.0.0.1:\(port)/upload"),
                body: .bytes(Self.body)
            )
            r.expectsContinue = expects
            return r
        }

        @Test("the body waits for 100 Continue, then goes; the interim head is reported")
        func continueThenBody() async throws {
            // The test server answers Expect: 100-continue with 100 as soon as it has the head.
            try await withServer({ $0.expectContinueTimeout = 60 }) { server, session in
                let d = RecordingDelegate()
                var r = HTTPClientRequest(method: .put, url: url(server.baseURL + "/echo"), body: .bytes(Self.body))
                r.expectsContinue = true
                session.execute(r, delegate: d)
                let rec = await d.wait()
                #expect(rec.interim == [100])
                #expect(rec.head?.status == 200)
                #expect(rec.head?.headers["X-Echo-H-Expect"] == "100-continue")
                #expect(rec.body == Self.body)
            }
        }

        @Test("a final status before 100 stops the upload: the body is never sent", arguments: [401, 413])
        func finalStatusFirst(status: Int) async throws {
            try await FaultTests.withSession({ $0.expectContinueTimeout = 60 }) { session in
                let server = try ScriptedServer([
                    [
                        .readRequest(), .sendText("HTTP/1.1 \(status) No\r\nContent-Length: 2\r\n\r\nno"),
                        .waitForClose,
                    ]
                ])
                defer { server.stop() }
                let rec = await FaultTests.run(session, Self.request(port: server.port))
                #expect(rec.completions == 1)
                #expect(rec.head?.status == status)
                #expect(String(decoding: rec.body, as: UTF8.self) == "no")
                #expect(rec.sentProgress.isEmpty, "no body byte was written")
                let head = try #require(server.requests.first)
                #expect(String(decoding: head, as: UTF8.self).contains("Expect: 100-continue"))
                #expect(session.poolStatistics().openConnections == 0, "a connection with an unsent body is not reused")
                server.stop()
                #expect(server.unrequestedBytes == 0, "the server received none of the body")
            }
        }

        @Test("417 Expectation Failed: the request is sent again without the expectation")
        func expectationFailed() async throws {
            try await FaultTests.withSession({ $0.expectContinueTimeout = 60 }) { session in
                let server = try ScriptedServer([
                    [
                        .readRequest(), .sendText("HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n"),
                        .waitForClose,
                    ],
                    [
                        .readRequest(body: Self.body.count),
                        .sendText("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), .waitForClose,
                    ],
                ])
                defer { server.stop() }
                let rec = await FaultTests.run(session, Self.request(port: server.port))
                #expect(rec.completions == 1)
                #expect(rec.head?.status == 200)
                #expect(String(decoding: rec.body, as: UTF8.self) == "ok")
                let requests = server.requests
                #expect(requests.count == 2)
                if requests.count == 2 {
                    #expect(!String(decoding: requests[1], as: UTF8.self).contains("Expect:"))
                    #expect(Array(requests[1].suffix(Self.body.count)) == Self.body)
                }
            }
        }

        @Test("a server that ignores the expectation gets the body at exactly expectContinueTimeout")
        func timeout() async throws {
            let server = try ScriptedServer([
                [
                    .readRequest(), .readBody(Self.body.count),
                    .sendText("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
                    .waitForClose,
                ]
            ])
            defer { server.stop() }
            try await FaultTests.withVirtualSession({ $0.expectContinueTimeout = 1 }) { session, _ in
                let d = RecordingDelegate()
                session.execute(Self.request(port: server.port), delegate: d)
                #expect(await eventually { server.requestCount == 1 }, "the head reached the server")
                try session.eventLoop.advanceTime(by: FaultTests.second - 1)
                #expect(d.record.withLock { $0.sentProgress }.isEmpty, "the body waits for the full timeout")
                #expect(server.bodyBytes.load(ordering: .relaxed) == 0)
                try session.eventLoop.advanceTime(by: 1)
                let rec = await d.wait()
                #expect(rec.head?.status == 200)
                #expect(rec.interim.isEmpty)
                #expect(rec.sentProgress.last == Int64(Self.body.count))
            }
        }

        @Test("automatic above the threshold, absent below it or when the request opts out")
        func automatic() async throws {
            try await withServer({ $0.expectContinueThreshold = 1000 }) { server, session in
                for (size, expects, sent) in [
                    (999, nil as Bool?, false), (1000, nil, true), (5000, false, false), (10, true, true),
                ] {
                    var r = HTTPClientRequest(
                        method: .post,
                        url: url(server.baseURL + "/echo"),
                        body: .bytes([UInt8](repeating: 1, count: size))
                    )
                    r.expectsContinue = expects
                    let resp = try await session.response(for: r)
                    #expect(
                        (resp.headers["X-Echo-H-Expect"] == "100-continue") == sent,
                        "size \(size), expects \(String(describing: expects))"
                    )
                    #expect(resp.body.count == size)
                }
            }
        }
    }
}
