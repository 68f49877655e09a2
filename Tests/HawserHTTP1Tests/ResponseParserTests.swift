// ResponseParserTests.swift: RFC 9112 response framing, each case verified whole, byte by
// byte and at every split point.

import HawserHTTP1
import Testing

struct ResponseCase: Sendable, CustomTestStringConvertible {
    let name: String
    let method: HTTPMethod
    let wire: String
    let expected: [Observed]

    init(_ name: String, method: HTTPMethod = .get, _ wire: String, _ expected: [Observed]) {
        self.name = name
        self.method = method
        self.wire = wire
        self.expected = expected
    }

    var testDescription: String { self.name }
}

extension Observed: @unchecked Sendable {}

let responseCases: [ResponseCase] = [
    ResponseCase(
        "Content-Length body (RFC 9112 §6.3 rule 6)",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 5"]), .body("hello"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "Content-Length 0 ends at the head",
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "HTTP/1.1 Connection: close ends keep-alive (RFC 9112 §9.6)",
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        [.head("HTTP/1.1 200 OK", ["Connection: close", "Content-Length: 2"]), .body("ok"), .end(keepAlive: false)]
    ),
    ResponseCase(
        "Connection token list with close",
        "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Connection: keep-alive, Close", "Content-Length: 0"]), .end(keepAlive: false)]
    ),
    ResponseCase(
        "HTTP/1.0 closes by default (RFC 9112 §9.3)",
        "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        [.head("HTTP/1.0 200 OK", ["Content-Length: 2"]), .body("ok"), .end(keepAlive: false)]
    ),
    ResponseCase(
        "HTTP/1.0 with Connection: keep-alive persists",
        "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
        [
            .head("HTTP/1.0 200 OK", ["Connection: Keep-Alive", "Content-Length: 2"]), .body("ok"),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "a higher minor version is processed as HTTP/1.1: kept alive by default (RFC 9110 §2.5)",
        "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok",
        [.head("HTTP/1.2 200 OK", ["Content-Length: 2"]), .body("ok"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "a higher minor version takes chunked framing as HTTP/1.1 does",
        "HTTP/1.9 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        [.head("HTTP/1.9 200 OK", ["Transfer-Encoding: chunked"]), .body("ok"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "no framing: body until close (RFC 9112 §6.3 rule 8)",
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
        [.head("HTTP/1.1 200 OK", ["Content-Type: text/plain"]), .body("until close"), .end(keepAlive: false)]
    ),
    ResponseCase(
        "close-delimited with no body bytes",
        "HTTP/1.1 200 OK\r\n\r\n",
        [.head("HTTP/1.1 200 OK", []), .end(keepAlive: false)]
    ),
    ResponseCase(
        "chunked with extensions and trailers (RFC 9112 §7.1)",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b;c=\"d e\"\r\nhello\r\nA \t; x\r\n, world!!!\r\n0\r\nX-Sum: 42\r\nX-Two: 2\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .body("hello, world!!!"),
            .trailers(["X-Sum: 42", "X-Two: 2"]), .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "chunked without trailers, upper-case hex, leading zeros",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n00B\r\nhello world\r\n000\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: Chunked"]), .body("hello world"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "chunked is final after gzip: chunked framing",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nzz\r\n0\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", ["Transfer-Encoding: gzip", "Transfer-Encoding: chunked"]), .body("zz"),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "chunked not final: read until close (RFC 9112 §6.3 rule 4)",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked, gzip"]), .body("5\r\nhello\r\n0\r\n\r\n"),
            .end(keepAlive: false),
        ]
    ),
    ResponseCase(
        "HEAD: no body despite Content-Length (RFC 9112 §6.3 rule 1)",
        method: .head,
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 100"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "HEAD: no body despite chunked",
        method: .head,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "204: no body",
        "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
        [.head("HTTP/1.1 204 No Content", ["Content-Length: 7"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "304: no body",
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        [.head("HTTP/1.1 304 Not Modified", ["ETag: \"x\""]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "100 Continue, then the final response",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        [
            .head("HTTP/1.1 100 Continue", []), .head("HTTP/1.1 200 OK", ["Content-Length: 2"]), .body("ok"),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "100 and 103 Early Hints, then the final response",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        [
            .head("HTTP/1.1 100 Continue", []), .head("HTTP/1.1 103 Early Hints", ["Link: </a.css>; rel=preload"]),
            .head("HTTP/1.1 404 Not Found", ["Content-Length: 0"]), .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "101 Switching Protocols ends HTTP; the rest is the new protocol's",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{1}\u{2}frames",
        [
            .head("HTTP/1.1 101 Switching Protocols", ["Upgrade: websocket", "Connection: Upgrade"]),
            .end(keepAlive: false),
        ]
    ),
    ResponseCase(
        "CONNECT 200: a tunnel, no body (RFC 9112 §6.3 rule 2)",
        method: .connect,
        "HTTP/1.1 200 Connection Established\r\n\r\n\u{16}\u{3}\u{1}tls",
        [.head("HTTP/1.1 200 Connection Established", []), .end(keepAlive: false)]
    ),
    ResponseCase(
        "CONNECT 407: an ordinary response",
        method: .connect,
        "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 3\r\n\r\nno!",
        [
            .head("HTTP/1.1 407 Proxy Authentication Required", ["Content-Length: 3"]), .body("no!"),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "bare LF line ends are accepted (RFC 9112 §2.2 MAY)",
        "HTTP/1.1 200 OK\nContent-Length: 3\nX-A: b\n\nabc",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 3", "X-A: b"]), .body("abc"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "no reason phrase, with and without the SP",
        "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\nHTTP/1.1 201 \r\nContent-Length: 0\r\n\r\n",
        [
            .head("HTTP/1.1 200 ", ["Content-Length: 0"]), .end(keepAlive: true),
            .head("HTTP/1.1 201 ", ["Content-Length: 0"]), .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "OWS around values is trimmed, inner whitespace kept, empty values allowed",
        "HTTP/1.1 200 OK\r\nX-A: \t a  b \t\r\nX-Empty:\r\nX-Sp:   \r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-A: a  b", "X-Empty: ", "X-Sp: ", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "field names are case-insensitive for framing",
        "HTTP/1.1 200 OK\r\ncontent-LENGTH: 3\r\n\r\nabc",
        [.head("HTTP/1.1 200 OK", ["content-LENGTH: 3"]), .body("abc"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "identical Content-Length repeats and lists are one length (RFC 9110 §8.6)",
        "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 3, 3", "Content-Length: 3"]), .body("abc"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "obs-text in a value is kept (as U+FFFD when not UTF-8)",
        "HTTP/1.1 200 OK\r\nX-Name: caf\u{E9}\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-Name: café", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "two pipelined responses on one connection",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\nConnection: close\r\n\r\nb",
        [
            .head("HTTP/1.1 200 OK", ["Content-Length: 1"]), .body("a"), .end(keepAlive: true),
            .head("HTTP/1.1 500 Internal Server Error", ["Content-Length: 1", "Connection: close"]), .body("b"),
            .end(keepAlive: false),
        ]
    ),
    ResponseCase(
        "bytes after a Connection: close response are ignored",
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\naGARBAGE",
        [.head("HTTP/1.1 200 OK", ["Connection: close", "Content-Length: 1"]), .body("a"), .end(keepAlive: false)]
    ),
    ResponseCase(
        "every token character in a name; HTAB inside a value",
        "HTTP/1.1 200 OK\r\n!#$%&'*+-.^_`|~09azAZ: a\tb\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["!#$%&'*+-.^_`|~09azAZ: a\tb", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "no space after the colon, leading zeros in Content-Length",
        "HTTP/1.1 200 OK\r\nContent-Length:0003\r\n\r\nabc",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 0003"]), .body("abc"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "a parameter on another coding is fine; chunked still final",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;level=9 , chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: gzip;level=9 , chunked"]), .body("z"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "Content-Length in trailers does not frame anything",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\nContent-Length: oops\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .body("z"), .trailers(["Content-Length: oops"]),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "status 999 and an empty header section",
        "HTTP/1.1 999 Whatever\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 999 Whatever", ["Content-Length: 0"]), .end(keepAlive: true)]
    ),
]

@Suite("Response parser: RFC 9112 framing")
struct ResponseParserTests {
    @Test(arguments: responseCases)
    func parsesEveryWayAlike(_ testCase: ResponseCase) {
        let events = verify(bytes(testCase.wire), ResponseHarness(method: testCase.method))
        #expect(events == testCase.expected)
    }

    @Test("more than 64 fields spill the span scratch buffer and stay in order")
    func manyFields() {
        var wire = "HTTP/1.1 200 OK\r\n"
        for i in 0..<150 { wire += "X-Field-\(i): value \(i)\r\n" }
        wire += "Content-Length: 0\r\n\r\n"
        let events = run(ResponseHarness(), [bytes(wire)[...]])
        guard case .head(_, let fields)? = events.first else {
            Issue.record("no head: \(events)")
            return
        }
        #expect(fields.count == 151)
        #expect(fields[0] == "X-Field-0: value 0")
        #expect(fields[149] == "X-Field-149: value 149")
        #expect(events.last == .end(keepAlive: true))
    }

    @Test("body events are ranges of the input of the same call, consumed in that call")
    func bodyRangesAreZeroCopy() throws {
        var parser = HTTP1ResponseParser()
        parser.expectResponse(to: .get)
        let wire = bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
        try wire.withUnsafeBytes { raw in
            let (headConsumed, head) = try parser.next(raw)
            guard case .head = head else {
                Issue.record("expected head")
                return
            }
            let rest = UnsafeRawBufferPointer(rebasing: raw[headConsumed...])
            let (consumed, event) = try parser.next(rest)
            guard case .body(let range) = event else {
                Issue.record("expected body")
                return
            }
            #expect(range == 3..<6)  // "3\r\n" then the data
            #expect(consumed == 6)
            #expect(Array(rest[range]) == bytes("abc"))
        }
    }

    @Test("a reason phrase keeps its bytes: obs-text, UTF-8, and a phrase that begins with U+FFFF")
    func reasonPhraseOctets() throws {
        func head(_ phrase: [UInt8]) throws -> HTTPResponseHead {
            var parser = HTTP1ResponseParser()
            parser.expectResponse(to: .get)
            let wire = bytes("HTTP/1.1 200 ") + phrase + bytes("\r\nContent-Length: 0\r\n\r\n")
            let (_, event) = try wire.withUnsafeBytes { try parser.next($0) }
            guard case .head(let h)? = event else {
                Issue.record("no head: \(String(describing: event))")
                return HTTPResponseHead(status: 0)
            }
            return h
        }
        let obsText: [UInt8] = [0x80, 0x43, 0x61, 0x66, 0xC3, 0xA9, 0xFF]
        let a = try head(obsText)
        #expect(a.reasonPhraseBytes == obsText)
        #expect(a.reasonPhrase == "\u{FFFD}Caf\u{E9}\u{FFFD}")
        let b = try head(Array("Café".utf8))
        #expect(b.reasonPhrase == "Café" && b.reasonPhraseBytes == Array("Café".utf8))
        let marked = Array("\u{FFFF}x".utf8)
        let c = try head(marked)
        #expect(c.reasonPhrase == "\u{FFFF}x" && c.reasonPhraseBytes == marked)
        #expect(try head(bytes("OK")).reasonPhrase == "OK")
        #expect(try head([]).reasonPhraseBytes.isEmpty)
        // Made by hand, and set: the same round trips.
        var d = HTTPResponseHead(status: 200, reasonPhrase: "\u{FFFF}y")
        #expect(d.reasonPhrase == "\u{FFFF}y" && d.reasonPhraseBytes == Array("\u{FFFF}y".utf8))
        d.reasonPhrase = "Not Found"
        #expect(d.reasonPhraseBytes == bytes("Not Found"))
        let e = HTTPResponseHead(status: 200, reasonPhraseBytes: obsText)
        #expect(e.reasonPhraseBytes == obsText && e.reasonPhrase == a.reasonPhrase)
    }

    @Test("a partial head consumes nothing and the parser is not idle")
    func partialHeadConsumesNothing() throws {
        var parser = HTTP1ResponseParser()
        #expect(parser.isIdle)
        let wire = bytes("HTTP/1.1 200 OK\r\nContent-Le")
        let (consumed, event) = try wire.withUnsafeBytes { try parser.next($0) }
        #expect(consumed == 0)
        #expect(event == nil)
        #expect(!parser.isIdle)
    }

    @Test("after an error every call throws the same error")
    func errorIsSticky() {
        var parser = HTTP1ResponseParser()
        let wire = bytes("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n")
        var first: HTTP1ParseError?
        do { _ = try wire.withUnsafeBytes { try parser.next($0) } } catch { first = error as? HTTP1ParseError }
        var second: HTTP1ParseError?
        do { _ = try wire.withUnsafeBytes { try parser.next($0) } } catch { second = error as? HTTP1ParseError }
        #expect(first?.kind == .whitespaceBeforeColon)
        #expect(first == second)
        #expect(throws: HTTP1ParseError.self) { _ = try parser.finish() }
    }

    @Test("offsets count from the start of the connection's stream")
    func offsetsAreStreamOffsets() {
        let wire = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nX\u{0}: y\r\n\r\n"
        let events = verify(bytes(wire), ResponseHarness())
        // First message: 38 + 1 bytes; the second head's "X" is at 39 + 17.
        #expect(events.last == .error(.invalidFieldName, offset: 39 + 17 + 1))
    }
}

@Suite("Response parser: expectResponse(to:)")
struct ExpectResponseTests {
    @Test("HEAD then GET on one connection: the second response has its body")
    func headThenGet() throws {
        var parser = HTTP1ResponseParser()
        parser.expectResponse(to: .head)
        let wire = bytes("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
        var kinds: [String] = []
        try wire.withUnsafeBytes { raw in
            var offset = 0
            while true {
                let (consumed, event) = try parser.next(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                offset += consumed
                guard let event else { break }
                switch event {
                case .head: kinds.append("head")
                case .body(let range): kinds.append("body \(range.count)")
                case .trailers: kinds.append("trailers")
                case .end(let keepAlive):
                    kinds.append("end \(keepAlive)")
                    parser.expectResponse(to: .get)
                }
            }
        }
        #expect(kinds == ["head", "end true", "head", "body 3", "end true"])
    }

    @Test("an expectation set during a body applies to the next response, not this one")
    func expectationDuringBody() throws {
        var parser = HTTP1ResponseParser()
        parser.expectResponse(to: .get)
        let wire = bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n")
        var kinds: [String] = []
        try wire.withUnsafeBytes { raw in
            var offset = 0
            while true {
                let (consumed, event) = try parser.next(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                offset += consumed
                guard let event else { break }
                switch event {
                case .head:
                    kinds.append("head")
                    if kinds.count == 1 { parser.expectResponse(to: .head) }
                case .body(let range): kinds.append("body \(range.count)")
                case .trailers: kinds.append("trailers")
                case .end(let keepAlive): kinds.append("end \(keepAlive)")
                }
            }
        }
        #expect(kinds == ["head", "body 2", "end true", "head", "end true"])
    }
}
