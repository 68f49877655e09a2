// HeadersTests.swift: HTTPHeaders semantics (ordered, case-insensitive, duplicates kept).

import HawserHTTP1
import Testing

@Suite("HTTPHeaders")
struct HeadersTests {
    @Test("lookup is case-insensitive and returns the first value; order and duplicates are kept")
    func lookup() {
        let headers: HTTPHeaders = ["Set-Cookie": "a=1", "Content-Type": "text/html", "set-cookie": "b=2"]
        #expect(headers.count == 3)
        #expect(headers["SET-COOKIE"] == "a=1")
        #expect(headers.values(for: "set-cookie") == ["a=1", "b=2"])
        #expect(headers["content-type"] == "text/html")
        #expect(headers["missing"] == nil)
        #expect(headers.contains(name: "CONTENT-type"))
        #expect(!headers.contains(name: "Content"))
        #expect(headers.map(\.name) == ["Set-Cookie", "Content-Type", "set-cookie"])
    }

    @Test("add, remove, replaceOrAdd")
    func mutation() {
        var headers = HTTPHeaders()
        #expect(headers.count == 0)
        headers.add(name: "A", value: "1")
        headers.add(name: "B", value: "2")
        headers.add(name: "a", value: "3")
        #expect(headers.values(for: "A") == ["1", "3"])
        headers.remove(name: "A")
        #expect(headers.count == 1)
        #expect(headers["a"] == nil)
        #expect(headers["B"] == "2")
        headers.replaceOrAdd(name: "b", value: "x")
        #expect(headers.values(for: "B") == ["x"])
        headers.replaceOrAdd(name: "C", value: "y")
        #expect(headers.map { "\($0.name)=\($0.value)" } == ["b=x", "C=y"])
        headers.remove(name: "b")
        headers.remove(name: "c")
        #expect(headers.count == 0)
        headers.add(name: "D", value: "")
        #expect(headers["d"] == "")
    }

    @Test("many additions grow the storage and keep every field")
    func growth() {
        var headers = HTTPHeaders()
        for i in 0..<300 { headers.add(name: "X-\(i)", value: String(repeating: "v", count: i)) }
        #expect(headers.count == 300)
        #expect(headers["x-0"] == "")
        #expect(headers["X-299"] == String(repeating: "v", count: 299))
    }

    @Test("copies are values: mutating one leaves the other alone")
    func copyOnWrite() {
        let original: HTTPHeaders = ["A": "1"]
        var copy = original
        copy.add(name: "B", value: "2")
        copy.replaceOrAdd(name: "A", value: "9")
        #expect(original.count == 1)
        #expect(original["A"] == "1")
        #expect(copy["A"] == "9")
        #expect(copy.count == 2)
    }

    @Test("copies of parsed headers are values too")
    func parsedCopyOnWrite() throws {
        var parser = HTTP1ResponseParser()
        let wire = bytes("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n")
        let (_, event) = try wire.withUnsafeBytes { try parser.next($0) }
        guard case .head(let head)? = event else {
            Issue.record("no head")
            return
        }
        var copy = head.headers
        copy.add(name: "C", value: "3")
        copy.remove(name: "A")
        #expect(head.headers.map(\.name) == ["A", "B", "Content-Length"])
        #expect(copy.map(\.name) == ["B", "Content-Length", "C"])
    }

    @Test("token lists: contains(name:token:) per RFC 9110 §5.6.1")
    func tokens() {
        let headers: HTTPHeaders = [
            "Connection": "keep-alive, Upgrade", "Transfer-Encoding": "gzip ; q=1,chunked", "X": ",,",
        ]
        #expect(headers.contains(name: "connection", token: "upgrade"))
        #expect(headers.contains(name: "Connection", token: "KEEP-ALIVE"))
        #expect(!headers.contains(name: "Connection", token: "close"))
        #expect(headers.contains(name: "transfer-encoding", token: "chunked"))
        #expect(headers.contains(name: "transfer-encoding", token: "gzip"))
        #expect(!headers.contains(name: "X", token: ""))
        #expect(!headers.contains(name: "Missing", token: "x"))
    }

    @Test("contentLength: a number only when unambiguous")
    func contentLength() {
        #expect(HTTPHeaders([("Content-Length", "42")]).contentLength == 42)
        #expect(HTTPHeaders([("content-length", "7, 7"), ("Content-Length", "7")]).contentLength == 7)
        #expect(HTTPHeaders([("Content-Length", "7"), ("Content-Length", "8")]).contentLength == nil)
        #expect(HTTPHeaders([("Content-Length", "x")]).contentLength == nil)
        #expect(HTTPHeaders().contentLength == nil)
    }

    @Test("description lists the fields in order")
    func description() {
        let headers: HTTPHeaders = ["A": "1", "B": "2"]
        #expect(headers.description == "[\"A\": \"1\", \"B\": \"2\"]")
        #expect(HTTPHeaders().description == "[]")
    }

    @Test("heads and versions")
    func heads() {
        let head = HTTPResponseHead(status: 103)
        #expect(head.isInterim)
        #expect(!HTTPResponseHead(status: 200).isInterim)
        #expect(head.version == .http1_1)
        #expect(HTTPVersion.http1_0.description == "HTTP/1.0")
        let request = HTTPRequestHead(method: "GET", target: "/")
        #expect(request.method == .get)
        #expect(request.headers.count == 0)
    }
}
