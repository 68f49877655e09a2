// EncoderTests.swift: the encoder writes what the parser reads back, and refuses bytes
// that would inject fields or messages (CR, LF, NUL…).

import HawserHTTP1
import Testing

@Suite("HTTP1Encoder")
struct EncoderTests {
    @Test("request head: exact bytes")
    func requestBytes() throws {
        var buffer: [UInt8] = []
        let head = HTTPRequestHead(method: .post, target: "/a?b=c", headers: ["Host": "x", "Content-Length": "3"])
        try HTTP1Encoder.writeRequestHead(head, into: &buffer)
        #expect(buffer == bytes("POST /a?b=c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n"))
    }

    @Test("request head round trip: encode, parse, same head")
    func requestRoundTrip() throws {
        let head = HTTPRequestHead(
            method: "PROPFIND",
            target: "/dav/x",
            version: .http1_0,
            headers: ["Host": "example.com", "X-Many": "a, b", "x-many": "c", "Connection": "keep-alive"]
        )
        var buffer: [UInt8] = []
        try HTTP1Encoder.writeRequestHead(head, into: &buffer)
        let events = verify(buffer, RequestHarness())
        #expect(events.first == .head("PROPFIND /dav/x HTTP/1.0", fieldStrings(head.headers)))
        #expect(events.last == .end(keepAlive: true))
    }

    @Test("response head round trip with a chunked body and trailers")
    func responseRoundTrip() throws {
        let head = HTTPResponseHead(
            status: 201,
            reasonPhrase: "Created",
            headers: ["Transfer-Encoding": "chunked", "Trailer": "X-Sum"]
        )
        var buffer: [UInt8] = []
        try HTTP1Encoder.writeResponseHead(head, into: &buffer)
        for piece in ["hello", String(repeating: "z", count: 300)] {
            HTTP1Encoder.writeChunkHeader(size: piece.utf8.count, into: &buffer)
            buffer.append(contentsOf: piece.utf8)
            HTTP1Encoder.writeChunkEnd(into: &buffer)
        }
        HTTP1Encoder.writeLastChunk(trailers: ["X-Sum": "99", "Bad\r\nName": "dropped"], into: &buffer)
        let events = verify(buffer, ResponseHarness())
        #expect(
            events == [
                .head("HTTP/1.1 201 Created", ["Transfer-Encoding: chunked", "Trailer: X-Sum"]),
                .body("hello" + String(repeating: "z", count: 300)), .trailers(["X-Sum: 99"]), .end(keepAlive: true),
            ]
        )
    }

    @Test("chunk framing bytes")
    func chunkBytes() {
        var buffer: [UInt8] = []
        HTTP1Encoder.writeChunkHeader(size: 0x1a2b, into: &buffer)
        HTTP1Encoder.writeChunkEnd(into: &buffer)
        HTTP1Encoder.writeChunkHeader(size: 1, into: &buffer)
        HTTP1Encoder.writeLastChunk(trailers: nil, into: &buffer)
        #expect(buffer == bytes("1a2b\r\n\r\n1\r\n0\r\n\r\n"))
        buffer = []
        HTTP1Encoder.writeChunkHeader(size: Int.max, into: &buffer)
        #expect(buffer == bytes("7fffffffffffffff\r\n"))
    }

    struct Injection: Sendable, CustomTestStringConvertible {
        let name: String
        let value: String
        let kind: HTTP1EncodeError.Kind
        var testDescription: String { "\(self.name.debugDescription): \(self.value.debugDescription)" }
    }

    @Test(arguments: [
        Injection(name: "X", value: "a\r\nInjected: 1", kind: .invalidFieldValue("X")),
        Injection(name: "X", value: "a\nb", kind: .invalidFieldValue("X")),
        Injection(name: "X", value: "a\rb", kind: .invalidFieldValue("X")),
        Injection(name: "X", value: "a\u{0}b", kind: .invalidFieldValue("X")),
        Injection(name: "X", value: "a\u{7F}", kind: .invalidFieldValue("X")),
        Injection(name: "X", value: " padded", kind: .invalidFieldValue("X")),
        Injection(name: "X\r\nY", value: "a", kind: .invalidFieldName("X\r\nY")),
        Injection(name: "X\u{0}", value: "a", kind: .invalidFieldName("X\u{0}")),
        Injection(name: "X Y", value: "a", kind: .invalidFieldName("X Y")),
        Injection(name: "X:", value: "a", kind: .invalidFieldName("X:")),
        Injection(name: "", value: "a", kind: .invalidFieldName("")),
    ])
    func rejectsInjection(_ injection: Injection) {
        var buffer: [UInt8] = []
        let headers = HTTPHeaders([(injection.name, injection.value)])
        #expect(throws: HTTP1EncodeError(injection.kind)) {
            try HTTP1Encoder.writeRequestHead(
                HTTPRequestHead(method: .get, target: "/", headers: headers),
                into: &buffer
            )
        }
        #expect(throws: HTTP1EncodeError(injection.kind)) {
            try HTTP1Encoder.writeResponseHead(HTTPResponseHead(status: 200, headers: headers), into: &buffer)
        }
        #expect(buffer.isEmpty, "nothing is written when a head is refused")
    }

    @Test("invalid start-line parts are refused")
    func rejectsStartLine() {
        var buffer: [UInt8] = []
        #expect(throws: HTTP1EncodeError(.invalidMethod)) {
            try HTTP1Encoder.writeRequestHead(HTTPRequestHead(method: "GE T", target: "/"), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidMethod)) {
            try HTTP1Encoder.writeRequestHead(HTTPRequestHead(method: "", target: "/"), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidTarget)) {
            try HTTP1Encoder.writeRequestHead(HTTPRequestHead(method: .get, target: "/a b"), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidTarget)) {
            try HTTP1Encoder.writeRequestHead(HTTPRequestHead(method: .get, target: "/\r\nX: y"), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidTarget)) {
            try HTTP1Encoder.writeRequestHead(HTTPRequestHead(method: .get, target: ""), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidReasonPhrase)) {
            try HTTP1Encoder.writeResponseHead(HTTPResponseHead(status: 200, reasonPhrase: "OK\r\nX: y"), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidStatus)) {
            try HTTP1Encoder.writeResponseHead(HTTPResponseHead(status: 42), into: &buffer)
        }
        #expect(throws: HTTP1EncodeError(.invalidVersion)) {
            try HTTP1Encoder.writeResponseHead(
                HTTPResponseHead(version: HTTPVersion(major: 2, minor: 0), status: 200),
                into: &buffer
            )
        }
        #expect(buffer.isEmpty)
    }

    @Test("encode errors describe the problem")
    func descriptions() {
        #expect(HTTP1EncodeError(.invalidFieldValue("X-A")).description.contains("X-A"))
    }
}
