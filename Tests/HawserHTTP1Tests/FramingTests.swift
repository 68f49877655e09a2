// FramingTests.swift: keep-alive rules, truncation at every stage, limits hit and not hit.

import HawserHTTP1
import Testing

struct KeepAliveCase: Sendable, CustomTestStringConvertible {
    let version: String
    let connection: String?
    let keepAlive: Bool
    var testDescription: String { "\(self.version) Connection: \(self.connection ?? "(none)") → \(self.keepAlive)" }
}

@Suite("Framing: keep-alive, truncation, limits")
struct FramingTests {
    @Test(arguments: [
        KeepAliveCase(version: "HTTP/1.1", connection: nil, keepAlive: true),
        KeepAliveCase(version: "HTTP/1.1", connection: "keep-alive", keepAlive: true),
        KeepAliveCase(version: "HTTP/1.1", connection: "close", keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: "CLOSE", keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: "upgrade, close", keepAlive: false),
        KeepAliveCase(version: "HTTP/1.1", connection: "closed", keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: nil, keepAlive: false),
        KeepAliveCase(version: "HTTP/1.0", connection: "keep-alive", keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: "Keep-Alive, TE", keepAlive: true),
        KeepAliveCase(version: "HTTP/1.0", connection: "keep-alive, close", keepAlive: false),
    ])
    func keepAliveRules(_ testCase: KeepAliveCase) {
        let field = testCase.connection.map { "Connection: \($0)\r\n" } ?? ""
        let response = "\(testCase.version) 200 OK\r\n\(field)Content-Length: 0\r\n\r\n"
        #expect(verify(bytes(response), ResponseHarness()).last == .end(keepAlive: testCase.keepAlive))
        let request = "GET / \(testCase.version)\r\n\(field)\r\n"
        #expect(verify(bytes(request), RequestHarness()).last == .end(keepAlive: testCase.keepAlive))
    }

    @Test("EOF at every byte of a Content-Length response: idle, truncated head, truncated body")
    func truncationEverywhereContentLength() {
        let wire = bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let headLength = 38
        for cut in 0..<wire.count {
            let events = run(ResponseHarness(), [wire[..<cut]])
            switch cut {
            case 0: #expect(events.isEmpty, "cut \(cut)")
            case 1..<headLength: #expect(events.last == .error(.truncatedHead, offset: cut), "cut \(cut)")
            default: #expect(events.last == .error(.truncatedBody, offset: cut), "cut \(cut)")
            }
        }
        #expect(run(ResponseHarness(), [wire[...]]).last == .end(keepAlive: true))
    }

    @Test("EOF at every byte of a chunked response is truncatedBody once the head is in")
    func truncationEverywhereChunked() {
        let wire = bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nA: b\r\n\r\n")
        let headLength = 47
        for cut in 1..<wire.count {
            let events = run(ResponseHarness(), [wire[..<cut]])
            let expected: HTTP1ParseError.Kind = cut < headLength ? .truncatedHead : .truncatedBody
            guard case .error(let kind, _)? = events.last else {
                Issue.record("cut \(cut): \(events)")
                continue
            }
            #expect(kind == expected, "cut \(cut)")
        }
    }

    @Test("EOF anywhere in a close-delimited body ends it cleanly")
    func closeDelimitedEndsAtEveryCut() {
        let wire = bytes("HTTP/1.0 200 OK\r\n\r\nabcdef")
        for cut in 19...wire.count {
            let events = run(ResponseHarness(), [wire[..<cut]])
            #expect(events.last == .end(keepAlive: false), "cut \(cut)")
            #expect(events.contains(.body(Array(wire[19..<cut]))) || cut == 19, "cut \(cut)")
        }
    }

    // MARK: - Limits: each hit, and just not hit

    static let status = "HTTP/1.1 200 OK\r\n"  // 17 bytes

    @Test("maxHeadBytes: a head of exactly the limit passes, one byte more fails")
    func headLimit() {
        let wire = bytes(Self.status + "X: 12345\r\nContent-Length: 0\r\n\r\n")
        let size = wire.count
        #expect(verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeadBytes: size))).last == .end(keepAlive: true))
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeadBytes: size - 1))).last
                == .error(.headTooLarge, offset: size - 1)
        )
    }

    @Test("maxHeaderCount: exactly the limit passes, one field more fails")
    func headerCountLimit() {
        let wire = bytes(Self.status + "A: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n")
        #expect(verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeaderCount: 3))).last == .end(keepAlive: true))
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeaderCount: 2))).last
                == .error(.tooManyHeaders, offset: 29)
        )
    }

    @Test("maxLineLength: a line of exactly the limit (CR included) passes, one byte more fails")
    func lineLimit() {
        let wire = bytes(Self.status + "X-Long: 1234567890\r\nContent-Length: 0\r\n\r\n")  // 19 bytes before LF
        #expect(verify(wire, ResponseHarness(limits: HTTP1Limits(maxLineLength: 19))).last == .end(keepAlive: true))
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxLineLength: 18))).last
                == .error(.lineTooLong, offset: 17 + 19)
        )
    }

    @Test("maxLineLength applies to the request line")
    func requestLineLimit() {
        let wire = bytes("GET /0123456789 HTTP/1.1\r\n\r\n")  // 25 bytes before LF
        #expect(verify(wire, RequestHarness(limits: HTTP1Limits(maxLineLength: 25))).last == .end(keepAlive: true))
        #expect(
            verify(wire, RequestHarness(limits: HTTP1Limits(maxLineLength: 24))).last
                == .error(.lineTooLong, offset: 25)
        )
    }

    @Test("maxChunkExtensionBytes: exactly the limit passes, one byte more fails")
    func chunkExtensionLimit() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let wire = bytes(head + "5 ;a=b\r\nhello\r\n0\r\n\r\n")  // " ;a=b": 5 bytes after the digits
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxChunkExtensionBytes: 5))).last == .end(keepAlive: true)
        )
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxChunkExtensionBytes: 4))).last
                == .error(.chunkExtensionTooLong, offset: 47 + 5)
        )
    }

    @Test("maxTrailerBytes: a trailer section of exactly the limit passes, one byte more fails")
    func trailerLimit() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let trailers = "A: 1\r\nB: 2\r\n\r\n"  // 14 bytes
        let wire = bytes(head + "0\r\n" + trailers)
        #expect(verify(wire, ResponseHarness(limits: HTTP1Limits(maxTrailerBytes: 14))).last == .end(keepAlive: true))
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxTrailerBytes: 13))).last
                == .error(.trailersTooLarge, offset: 50 + 13)
        )
    }

    @Test("the defaults are the documented ones")
    func defaults() {
        let limits = HTTP1Limits.default
        #expect(limits.maxHeadBytes == 64 * 1024)
        #expect(limits.maxHeaderCount == 256)
        #expect(limits.maxLineLength == 16 * 1024)
        #expect(limits.maxChunkExtensionBytes == 1024)
        #expect(limits.maxTrailerBytes == 16 * 1024)
    }

    @Test("a head arriving a byte at a time never makes the parser rescan (O(n))")
    func slowlorisIsLinear() throws {
        // 60 KB of fields, fed one byte per call: must finish, with the same head.
        var wire = "HTTP/1.1 200 OK\r\n"
        while wire.utf8.count < 60_000 { wire += "X-Padding: \(String(repeating: "p", count: 1000))\r\n" }
        wire += "Content-Length: 0\r\n\r\n"
        let data = bytes(wire)
        let events = run(ResponseHarness(), data.indices.map { data[$0...$0] })
        #expect(events.count == 2)
        #expect(events.last == .end(keepAlive: true))
    }
}

@Suite("Limits at the extremes")
struct ExtremeLimitTests {
    @Test("Int.max limits behave as no limit; zero limits refuse everything")
    func extremes() {
        let wire = bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e\r\nhello\r\n0\r\nT: 1\r\n\r\n")
        let huge = HTTP1Limits(
            maxHeadBytes: .max,
            maxHeaderCount: .max,
            maxLineLength: .max,
            maxChunkExtensionBytes: .max,
            maxTrailerBytes: .max
        )
        #expect(verify(wire, ResponseHarness(limits: huge)).last == .end(keepAlive: true))
        let zero = HTTP1Limits(
            maxHeadBytes: 0,
            maxHeaderCount: 0,
            maxLineLength: 0,
            maxChunkExtensionBytes: 0,
            maxTrailerBytes: 0
        )
        #expect(verify(wire, ResponseHarness(limits: zero)).last == .error(.headTooLarge, offset: 0))
        let negative = HTTP1Limits(maxHeadBytes: -5, maxLineLength: -5)
        #expect(verify(wire, ResponseHarness(limits: negative)).last == .error(.headTooLarge, offset: 0))
    }
}
