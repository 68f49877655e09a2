// RequestParserTests.swift: RFC 9112 request framing (the test server's side).

import HawserHTTP1
import Testing

struct RequestCase: Sendable, CustomTestStringConvertible {
    let name: String
    let wire: String
    let expected: [Observed]

    init(_ name: String, _ wire: String, _ expected: [Observed]) {
        self.name = name
        self.wire = wire
        self.expected = expected
    }

    var testDescription: String { self.name }
}

let requestCases: [RequestCase] = [
    RequestCase(
        "GET without a body (RFC 9112 §6.3 rule 7)",
        "GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        [.head("GET /index.html?q=1 HTTP/1.1", ["Host: example.com", "Accept: */*"]), .end(keepAlive: true)]
    ),
    RequestCase(
        "POST with Content-Length",
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n{\"a\":[1,2,3]}",
        [
            .head("POST /upload HTTP/1.1", ["Host: x", "Content-Length: 13"]), .body("{\"a\":[1,2,3]}"),
            .end(keepAlive: true),
        ]
    ),
    RequestCase(
        "POST chunked with trailers",
        "POST /s HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nX-Sum: 9\r\n\r\n",
        [
            .head("POST /s HTTP/1.1", ["Transfer-Encoding: chunked"]), .body("Wikipedia"), .trailers(["X-Sum: 9"]),
            .end(keepAlive: true),
        ]
    ),
    RequestCase(
        "Content-Length: 0",
        "PUT /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        [.head("PUT /x HTTP/1.1", ["Content-Length: 0"]), .end(keepAlive: true)]
    ),
    RequestCase(
        "CONNECT in authority-form",
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        [.head("CONNECT example.com:443 HTTP/1.1", ["Host: example.com:443"]), .end(keepAlive: true)]
    ),
    RequestCase(
        "OPTIONS in asterisk-form",
        "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        [.head("OPTIONS * HTTP/1.1", ["Host: x"]), .end(keepAlive: true)]
    ),
    RequestCase(
        "absolute-form target",
        "GET http://example.com/a?b HTTP/1.1\r\n\r\n",
        [.head("GET http://example.com/a?b HTTP/1.1", []), .end(keepAlive: true)]
    ),
    RequestCase(
        "an extension method",
        "PROPFIND /dav HTTP/1.1\r\nDepth: 1\r\n\r\n",
        [.head("PROPFIND /dav HTTP/1.1", ["Depth: 1"]), .end(keepAlive: true)]
    ),
    RequestCase(
        "HTTP/1.0 closes unless keep-alive",
        "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\nGET /c HTTP/1.0\r\n\r\n",
        [
            .head("GET /a HTTP/1.0", ["Connection: keep-alive"]), .end(keepAlive: true),
            .head("GET /b HTTP/1.0", []), .end(keepAlive: false),
        ]
    ),
    RequestCase(
        "pipelined requests",
        "GET /a HTTP/1.1\r\n\r\nDELETE /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyHEAD /c HTTP/1.1\r\nConnection: close\r\n\r\n",
        [
            .head("GET /a HTTP/1.1", []), .end(keepAlive: true),
            .head("DELETE /b HTTP/1.1", ["Content-Length: 2"]), .body("xy"), .end(keepAlive: true),
            .head("HEAD /c HTTP/1.1", ["Connection: close"]), .end(keepAlive: false),
        ]
    ),
]

@Suite("Request parser: RFC 9112 framing")
struct RequestParserTests {
    @Test(arguments: requestCases)
    func parsesEveryWayAlike(_ testCase: RequestCase) {
        let events = verify(bytes(testCase.wire), RequestHarness())
        #expect(events == testCase.expected)
    }

    @Test("common methods are the named constants; idempotency per RFC 9110 §9.2.2")
    func methods() throws {
        var parser = HTTP1RequestParser()
        let wire = bytes("DELETE /x HTTP/1.1\r\n\r\n")
        let (_, event) = try wire.withUnsafeBytes { try parser.next($0) }
        guard case .head(let head)? = event else {
            Issue.record("no head")
            return
        }
        #expect(head.method == .delete)
        #expect(head.method.isIdempotent)
        #expect(!HTTPMethod.post.isIdempotent)
        #expect(!HTTPMethod.patch.isIdempotent)
        #expect(HTTPMethod("PUT").isIdempotent)
        #expect(HTTPMethod.connect.description == "CONNECT")
    }

    @Test("EOF between requests is not an error; the parser is idle")
    func eofWhenIdle() throws {
        var parser = HTTP1RequestParser()
        #expect(parser.isIdle)
        #expect(try parser.finish() == nil)
    }
}
