// ErrorKindTests.swift: every HTTP1ParseError.Kind, each asserted exactly, each verified
// whole, byte by byte and at every split point (the error must not depend on the split).

import HawserHTTP1
import Testing

struct ErrorCase: Sendable, CustomTestStringConvertible {
    enum Side: Sendable {
        case response(HTTPMethod)
        case request
    }

    let name: String
    let side: Side
    let wire: String
    let kind: HTTP1ParseError.Kind
    let limits: HTTP1Limits

    init(_ name: String, _ wire: String, _ kind: HTTP1ParseError.Kind, limits: HTTP1Limits = .default) {
        self.init(name, .response(.get), wire, kind, limits: limits)
    }

    init(_ name: String, _ side: Side, _ wire: String, _ kind: HTTP1ParseError.Kind, limits: HTTP1Limits = .default) {
        self.name = name
        self.side = side
        self.wire = wire
        self.kind = kind
        self.limits = limits
    }

    var testDescription: String { "\(self.kind): \(self.name)" }

    func events() -> [Observed] {
        switch self.side {
        case .response(let method):
            return verify(bytes(self.wire), ResponseHarness(method: method, limits: self.limits))
        case .request: return verify(bytes(self.wire), RequestHarness(limits: self.limits))
        }
    }
}

let ok = "HTTP/1.1 200 OK\r\n"
let chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

let errorCases: [ErrorCase] = [
    ErrorCase("not HTTP", "HTTQ/1.1 200 OK\r\n\r\n", .invalidStatusLine),
    ErrorCase("two-digit status", "HTTP/1.1 20 OK\r\n\r\n", .invalidStatusLine),
    ErrorCase("four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", .invalidStatusLine),
    ErrorCase("status below 100", "HTTP/1.1 099 Odd\r\n\r\n", .invalidStatusLine),
    ErrorCase("control byte in reason", "HTTP/1.1 200 O\u{1}K\r\n\r\n", .invalidStatusLine),
    ErrorCase("empty start line", "\r\nHTTP/1.1 200 OK\r\n\r\n", .invalidStatusLine),
    ErrorCase("HTTP/1.x with a non-digit minor", "HTTP/1.a 200 OK\r\n\r\n", .invalidVersion),
    ErrorCase("HTTP/1 with a two-digit minor", "HTTP/1.10 200 OK\r\n\r\n", .invalidStatusLine),
    ErrorCase("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n", .invalidVersion),
    ErrorCase("HTTP/0.9 request", .request, "GET / HTTP/0.9\r\n\r\n", .invalidVersion),
    ErrorCase("request line with two spaces", .request, "GET  / HTTP/1.1\r\n\r\n", .invalidRequestLine),
    ErrorCase("request line without version", .request, "GET /\r\n\r\n", .invalidRequestLine),
    ErrorCase("method with a separator", .request, "GE(T / HTTP/1.1\r\n\r\n", .invalidMethod),
    ErrorCase("space in target", .request, "GET /a\u{7F}b HTTP/1.1\r\n\r\n", .invalidTarget),
    ErrorCase("asterisk-form with GET", .request, "GET * HTTP/1.1\r\n\r\n", .invalidTarget),
    ErrorCase("relative target", .request, "GET a/b HTTP/1.1\r\n\r\n", .invalidTarget),
    ErrorCase("CONNECT with origin-form", .request, "CONNECT /x HTTP/1.1\r\n\r\n", .invalidTarget),
    ErrorCase("separator in a name", ok + "Bad(Name: x\r\n\r\n", .invalidFieldName),
    ErrorCase("empty name", ok + ": x\r\n\r\n", .invalidFieldName),
    ErrorCase("no colon", ok + "NoColon\r\n\r\n", .invalidFieldName),
    ErrorCase("SP before colon (RFC 9112 §5.1)", ok + "Name : x\r\n\r\n", .whitespaceBeforeColon),
    ErrorCase("HTAB before colon", ok + "Name\t: x\r\n\r\n", .whitespaceBeforeColon),
    ErrorCase("NUL in a value", ok + "X: a\u{0}b\r\n\r\n", .invalidFieldValue),
    ErrorCase("control byte in a value", ok + "X: a\u{1B}b\r\n\r\n", .invalidFieldValue),
    ErrorCase("DEL in a value", ok + "X: a\u{7F}\r\n\r\n", .invalidFieldValue),
    ErrorCase(
        "obs-fold in a request (RFC 9112 §5.2)",
        .request,
        "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
        .obsoleteLineFolding
    ),
    ErrorCase("whitespace before the first field", ok + " X: a\r\n\r\n", .obsoleteLineFolding),
    ErrorCase("bare CR in a value", ok + "X: a\rb\r\n\r\n", .bareCR),
    ErrorCase("bare CR as the blank line", ok + "X: a\r\n\rX\r\n\r\n", .bareCR),
    ErrorCase("bare CR in a name", ok + "X\rY: a\r\n\r\n", .bareCR),
    ErrorCase("bare CR in the status line", "HTTP/1.1 200 O\rK\r\n\r\n", .bareCR),
    ErrorCase("bare CR in the request line", .request, "GET /\r HTTP/1.1\r\n\r\n", .bareCR),
    ErrorCase("bare CR after a chunk size", chunkedHead + "5\rhello\r\n0\r\n\r\n", .bareCR),
    ErrorCase("bare LF after a chunk size", chunkedHead + "5\nhello\r\n0\r\n\r\n", .bareLF),
    ErrorCase("bare LF after a chunk extension", chunkedHead + "5;x\nhello\r\n0\r\n\r\n", .bareLF),
    ErrorCase("Content-Length not digits", ok + "Content-Length: abc\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length with a sign", ok + "Content-Length: +5\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length negative", ok + "Content-Length: -1\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length overflow", ok + "Content-Length: 9223372036854775808\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length empty", ok + "Content-Length:\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length empty list element", ok + "Content-Length: 5,,5\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length with space inside", ok + "Content-Length: 1 2\r\n\r\n", .invalidContentLength),
    ErrorCase("Content-Length list disagrees", ok + "Content-Length: 5, 6\r\n\r\n", .conflictingContentLength),
    ErrorCase(
        "Content-Length fields disagree",
        ok + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
        .conflictingContentLength
    ),
    ErrorCase(
        "CL and TE in a response",
        ok + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        .contentLengthWithTransferEncoding
    ),
    ErrorCase(
        "TE and CL in a request",
        .request,
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        .contentLengthWithTransferEncoding
    ),
    ErrorCase("empty Transfer-Encoding", ok + "Transfer-Encoding: \r\n\r\n", .invalidTransferEncoding),
    ErrorCase(
        "chunked twice",
        ok + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        .invalidTransferEncoding
    ),
    ErrorCase("chunked with a parameter", ok + "Transfer-Encoding: chunked ;q=1\r\n\r\n", .invalidTransferEncoding),
    ErrorCase(
        "chunked with a parameter in a request",
        .request,
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked;x\r\n\r\n",
        .invalidTransferEncoding
    ),
    ErrorCase(
        "request TE not ending in chunked",
        .request,
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        .unsupportedTransferEncoding
    ),
    ErrorCase(
        "request chunked then gzip",
        .request,
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        .unsupportedTransferEncoding
    ),
    ErrorCase(
        "TE in an HTTP/1.0 response",
        "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        .transferEncodingInHTTP1_0
    ),
    ErrorCase(
        "TE in an HTTP/1.0 request",
        .request,
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        .transferEncodingInHTTP1_0
    ),
    ErrorCase("chunk size not hex", chunkedHead + "zz\r\n", .invalidChunkSize),
    ErrorCase("chunk size missing", chunkedHead + "\r\n", .invalidChunkSize),
    ErrorCase("junk after a chunk size", chunkedHead + "5x\r\nhello\r\n", .invalidChunkSize),
    ErrorCase("junk after chunk-size whitespace", chunkedHead + "5 x\r\nhello\r\n", .invalidChunkSize),
    ErrorCase(
        "chunk size above Int.max after leading zeros",
        chunkedHead + "000000000000000000008000000000000000\r\n",
        .chunkSizeOverflow
    ),
    ErrorCase("chunk size above Int.max", chunkedHead + "8000000000000000\r\n", .chunkSizeOverflow),
    ErrorCase("NUL in a chunk extension", chunkedHead + "5;a\u{0}\r\nhello\r\n", .invalidChunkExtension),
    ErrorCase("chunk data without CRLF", chunkedHead + "5\r\nhelloX\r\n", .invalidChunkData),
    ErrorCase("chunk data with CR only", chunkedHead + "5\r\nhello\rX", .invalidChunkData),
    ErrorCase(
        "head over maxHeadBytes",
        ok + "X: 1234567890\r\n\r\n",
        .headTooLarge,
        limits: HTTP1Limits(maxHeadBytes: 30)
    ),
    ErrorCase(
        "fields over maxHeaderCount",
        ok + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        .tooManyHeaders,
        limits: HTTP1Limits(maxHeaderCount: 2)
    ),
    ErrorCase(
        "line over maxLineLength",
        ok + "X: 12345678901234567890\r\n\r\n",
        .lineTooLong,
        limits: HTTP1Limits(maxLineLength: 20)
    ),
    ErrorCase(
        "chunk extensions over the limit",
        chunkedHead + "5;abcdefghij\r\nhello\r\n",
        .chunkExtensionTooLong,
        limits: HTTP1Limits(maxChunkExtensionBytes: 8)
    ),
    ErrorCase(
        "trailers over maxTrailerBytes",
        chunkedHead + "0\r\nX-A: 1234567890\r\n\r\n",
        .trailersTooLarge,
        limits: HTTP1Limits(maxTrailerBytes: 10)
    ),
    ErrorCase("EOF inside the status line", "HTTP/1.1 20", .truncatedHead),
    ErrorCase("EOF inside the fields", ok + "Content-Length: 5\r\n", .truncatedHead),
    ErrorCase("EOF after an interim response", "HTTP/1.1 100 Continue\r\n\r\n", .truncatedHead),
    ErrorCase("EOF inside a request head", .request, "GET / HTTP/1.1\r\nHost: x\r\n", .truncatedHead),
    ErrorCase("EOF inside a Content-Length body", ok + "Content-Length: 5\r\n\r\nhel", .truncatedBody),
    ErrorCase("EOF inside a chunk", chunkedHead + "5\r\nhel", .truncatedBody),
    ErrorCase("EOF before the last chunk", chunkedHead + "5\r\nhello\r\n", .truncatedBody),
    ErrorCase("EOF inside trailers", chunkedHead + "0\r\nX-A: 1\r\n", .truncatedBody),
    ErrorCase("EOF inside a request body", .request, "POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", .truncatedBody),
]

@Suite("Parse errors: one typed kind per failure")
struct ErrorKindTests {
    @Test(arguments: errorCases)
    func reportsExactKind(_ testCase: ErrorCase) {
        let events = testCase.events()
        guard case .error(let kind, _)? = events.last else {
            Issue.record("expected \(testCase.kind), got \(events)")
            return
        }
        #expect(kind == testCase.kind)
    }

    @Test("every kind is covered by the table above")
    func everyKindHasACase() {
        let all: [HTTP1ParseError.Kind] = [
            .invalidStatusLine, .invalidRequestLine, .invalidVersion, .invalidMethod, .invalidTarget,
            .invalidFieldName, .whitespaceBeforeColon, .invalidFieldValue, .obsoleteLineFolding, .bareCR, .bareLF,
            .invalidContentLength, .conflictingContentLength, .contentLengthWithTransferEncoding,
            .invalidTransferEncoding, .unsupportedTransferEncoding, .transferEncodingInHTTP1_0, .invalidChunkSize,
            .chunkSizeOverflow, .invalidChunkExtension, .invalidChunkData, .headTooLarge, .tooManyHeaders,
            .lineTooLong, .chunkExtensionTooLong, .trailersTooLarge, .truncatedHead, .truncatedBody,
        ]
        let covered = Set(errorCases.map(\.kind))
        for kind in all { #expect(covered.contains(kind), "no test case for \(kind)") }
    }

    @Test("descriptions say what was wrong and where")
    func descriptionNamesTheProblem() {
        let error = HTTP1ParseError(.whitespaceBeforeColon, offset: 21)
        #expect(error.description.contains("21"))
        #expect(error.description.contains("whitespace between a field name and its colon"))
    }

    @Test("an error in a field line waits for the whole head; a limit error does not")
    func errorOrdering() {
        // The bad byte is seen, but the head never completes: EOF decides (truncatedHead).
        let incomplete = verify(bytes(ok + "Bad Name: x\r\nMore: y\r\n"), ResponseHarness())
        #expect(incomplete.last == .error(.truncatedHead, offset: 39))
        // A too-long line after the bad one wins: limits are checked as soon as certain.
        let limits = HTTP1Limits(maxLineLength: 16)
        let limited = verify(bytes(ok + "Bad Name: x\r\nMore: yyyyyyyyyyyy\r\n\r\n"), ResponseHarness(limits: limits))
        #expect(limited.last == .error(.lineTooLong, offset: 17 + 13 + 17))
    }
}
