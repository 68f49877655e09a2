// LineFoldingTests.swift: obsolete line folding in responses (RFC 9112 §5.2: a user agent
// replaces each obs-fold with SP), its reject option, requests (always rejected), and chunk
// sizes with leading zeros (RFC 9112 §7.1: 1*HEXDIG). Every case is verified whole, byte by
// byte and at every split point.

import HawserHTTP1
import Testing

private let status = "HTTP/1.1 200 OK\r\n"
private let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

let foldingCases: [ResponseCase] = [
    ResponseCase(
        "a value folded right after the colon",
        status + "X-Folded:\r\n value\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-Folded: value", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "Content-Length whose value is on a continuation line frames the body",
        status + "Content-Length:\r\n 5\r\n\r\nhello",
        [.head("HTTP/1.1 200 OK", ["Content-Length: 5"]), .body("hello"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "a blank continuation line adds nothing to the value",
        status + "X-A: 1\r\n \r\nContent-Length: 2\r\n\r\nok",
        [.head("HTTP/1.1 200 OK", ["X-A: 1", "Content-Length: 2"]), .body("ok"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "each fold, with the whitespace around it, becomes one SP",
        status + "X-A: one  \r\n   two\r\n\t \tthree\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-A: one two three", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "blank continuation lines between text make one SP",
        status + "X-A: a\r\n \r\n\t\r\n b\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-A: a b", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "a folded field of whitespace only is empty",
        status + "X-Empty:\r\n \r\n\t\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["X-Empty: ", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "bare LF line ends fold too",
        "HTTP/1.1 200 OK\nX-A: a\n b\nContent-Length: 0\n\n",
        [.head("HTTP/1.1 200 OK", ["X-A: a b", "Content-Length: 0"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "fields before and after the folded one keep their values",
        status + "Server: s\r\nX-A: a\r\n b\r\nX-B: c\r\n d\r\nDate: today\r\nContent-Length: 0\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", ["Server: s", "X-A: a b", "X-B: c d", "Date: today", "Content-Length: 0"]),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "Transfer-Encoding folded: chunked is still the final coding",
        status + "Transfer-Encoding: gzip,\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: gzip, chunked"]), .body("hello"), .end(keepAlive: true)]
    ),
    ResponseCase(
        "Connection: close on a continuation line ends keep-alive",
        status + "Connection:\r\n close\r\nContent-Length: 0\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Connection: close", "Content-Length: 0"]), .end(keepAlive: false)]
    ),
    ResponseCase(
        "a folded trailer field",
        chunked + "0\r\nX-T: a\r\n b\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .trailers(["X-T: a b"]), .end(keepAlive: true)]
    ),
    ResponseCase(
        "a fold after more than 64 fields (the span scratch spills)",
        status + (0..<70).map { "X-\($0): \($0)\r\n" }.joined() + "X-Last: a\r\n b\r\nContent-Length: 0\r\n\r\n",
        [
            .head("HTTP/1.1 200 OK", (0..<70).map { "X-\($0): \($0)" } + ["X-Last: a b", "Content-Length: 0"]),
            .end(keepAlive: true),
        ]
    ),
    ResponseCase(
        "chunk sizes with many leading zeros (RFC 9112 §7.1: 1*HEXDIG)",
        chunked + String(repeating: "0", count: 40) + "5\r\nhello\r\n" + String(repeating: "0", count: 30)
            + "\r\n\r\n",
        [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .body("hello"), .end(keepAlive: true)]
    ),
]

@Suite("Obsolete line folding and chunk-size digits (RFC 9112 §5.2, §7.1)")
struct LineFoldingTests {
    @Test(arguments: foldingCases)
    func unfoldsResponses(_ testCase: ResponseCase) {
        #expect(verify(bytes(testCase.wire), ResponseHarness(method: testCase.method)) == testCase.expected)
    }

    @Test("the response parser unfolds by default; the reject option refuses every fold")
    func rejectOption() {
        #expect(HTTP1ResponseParser().obsoleteLineFolding == .replaceWithSpace)
        #expect(HTTP1ResponseParser(obsoleteLineFolding: .reject).obsoleteLineFolding == .reject)
        let folded = status + "X-A: a\r\n b\r\nContent-Length: 0\r\n\r\n"
        #expect(
            verify(bytes(folded), ResponseHarness(obsoleteLineFolding: .reject)).last
                == .error(.obsoleteLineFolding, offset: status.utf8.count + 8)
        )
        let trailer = chunked + "0\r\nX-T: a\r\n b\r\n\r\n"
        #expect(
            verify(bytes(trailer), ResponseHarness(obsoleteLineFolding: .reject)).last
                == .error(.obsoleteLineFolding, offset: chunked.utf8.count + 3 + 8)
        )
    }

    @Test("requests keep rejecting obs-fold (a server may, RFC 9112 §5.2)")
    func requestsReject() {
        let wire = "POST / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"
        #expect(verify(bytes(wire), RequestHarness()).last == .error(.obsoleteLineFolding, offset: 17 + 9 + 8))
    }

    @Test("a line that starts with whitespace and continues no field is still refused")
    func nothingToContinue() {
        #expect(
            verify(bytes(status + " X: a\r\nContent-Length: 0\r\n\r\n"), ResponseHarness()).last
                == .error(.obsoleteLineFolding, offset: status.utf8.count)
        )
        #expect(
            verify(bytes(chunked + "0\r\n X: a\r\n\r\n"), ResponseHarness()).last
                == .error(.obsoleteLineFolding, offset: chunked.utf8.count + 3)
        )
    }

    @Test("framing fields are judged on the unfolded value")
    func framingOnTheUnfoldedValue() {
        let prefix = status.utf8.count
        // "5 6" is not a number; the error points at the value's first byte.
        #expect(
            verify(bytes(status + "Content-Length: 5\r\n 6\r\n\r\n"), ResponseHarness()).last
                == .error(.invalidContentLength, offset: prefix + 16)
        )
        let conflicting = status + "Content-Length: 5\r\nContent-Length:\r\n 6\r\n\r\nhello"
        #expect(
            verify(bytes(conflicting), ResponseHarness()).last
                == .error(.conflictingContentLength, offset: prefix + 19 + 18)
        )
        let both = status + "Content-Length: 2\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"
        #expect(verify(bytes(both), ResponseHarness()).last?.isError(.contentLengthWithTransferEncoding) == true)
        // A bad byte on a continuation line is a bad byte in the value.
        #expect(
            verify(bytes(status + "X-A: a\r\n b\u{1}c\r\n\r\n"), ResponseHarness()).last
                == .error(.invalidFieldValue, offset: prefix + 10)
        )
        #expect(
            verify(bytes(status + "X-A: a\r\n b\rc\r\n\r\n"), ResponseHarness()).last
                == .error(.bareCR, offset: prefix + 10)
        )
    }

    @Test("limits count continuation lines as field lines, each line on its own")
    func limitsPerPhysicalLine() {
        let wire = bytes(status + "A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n")
        #expect(verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeaderCount: 3))).last == .end(keepAlive: true))
        #expect(
            verify(wire, ResponseHarness(limits: HTTP1Limits(maxHeaderCount: 2))).last
                == .error(.tooManyHeaders, offset: status.utf8.count + 10)
        )
        // The continuation line is 22 bytes before its LF (CR included); every other line is shorter.
        let long = bytes(status + "X: 123\r\n 12345678901234567890\r\nContent-Length: 0\r\n\r\n")
        #expect(verify(long, ResponseHarness(limits: HTTP1Limits(maxLineLength: 22))).last == .end(keepAlive: true))
        #expect(
            verify(long, ResponseHarness(limits: HTTP1Limits(maxLineLength: 21))).last
                == .error(.lineTooLong, offset: status.utf8.count + 8 + 22)
        )
    }

    @Test("unfolded headers: values, raw bytes, lookups and edits")
    func unfoldedHeaders() throws {
        let wire = bytes(status + "Content-Length:\r\n 2\r\nX-List: a,\r\n\tb\r\n\r\nok")
        var parser = HTTP1ResponseParser()
        parser.expectResponse(to: .get)
        let (_, event) = try wire.withUnsafeBytes { buffer throws(HTTP1ParseError) in try parser.next(buffer) }
        guard case .head(let head)? = event else {
            Issue.record("no head: \(String(describing: event))")
            return
        }
        #expect(head.headers.contentLength == 2)
        #expect(head.headers["x-list"] == "a, b")
        #expect(head.headers.valueBytes(at: 1) == Array("a, b".utf8))
        #expect(head.headers.contains(name: "X-List", token: "b"))
        var edited = head.headers
        edited.remove(name: "content-length")
        edited.add(name: "X-New", value: "n")
        #expect(fieldStrings(edited) == ["X-List: a, b", "X-New: n"])
        #expect(fieldStrings(head.headers) == ["Content-Length: 2", "X-List: a, b"])
    }

    @Test("chunk sizes: leading zeros are free, whatever the limits; the value is bounded by Int")
    func chunkSizeDigits() {
        // Int.max after leading zeros is a size (the body is then cut short by EOF).
        let big = chunked + "0000000000007fffffffffffffff\r\nabc"
        #expect(verify(bytes(big), ResponseHarness()).last == .error(.truncatedBody, offset: big.utf8.count))
        // 12 zeros, then 8 and 15 zeros: 0x8 followed by 14 zeros is 2^59, the next digit overflows.
        let over = chunked + "0000000000008000000000000000\r\n"
        #expect(
            verify(bytes(over), ResponseHarness()).last
                == .error(.chunkSizeOverflow, offset: chunked.utf8.count + 27)
        )
        // 3,000 zeros: more than the line limit here, and than the extension limit.
        let zeros =
            chunked + String(repeating: "0", count: 3000) + "5\r\nhello\r\n" + String(repeating: "0", count: 3000)
            + "\r\n\r\n"
        let small = HTTP1Limits(maxLineLength: 64, maxChunkExtensionBytes: 8)
        #expect(
            verify(bytes(zeros), ResponseHarness(limits: small))
                == [.head("HTTP/1.1 200 OK", ["Transfer-Encoding: chunked"]), .body("hello"), .end(keepAlive: true)]
        )
    }
}

extension Observed {
    func isError(_ kind: HTTP1ParseError.Kind) -> Bool {
        if case .error(kind, _) = self { return true }
        return false
    }
}
