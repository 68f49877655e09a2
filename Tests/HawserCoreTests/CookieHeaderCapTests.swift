import Foundation
import HawserCore
import HawserTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

private let now = Date(timeIntervalSince1970: 1_700_000_000)

/// The cookie a header creates from `from`, or the rejection.
private func make(_ header: String, _ from: String, at time: Date = now) -> Result<Cookie, CookieRejection> {
    Cookie.make(fromSetCookie: header, for: url(from), now: time)
}

// MARK: - Cookie header bombs and cookie octets (issue 21)

/// The headers of a response head parsed from `wire` (the parser keeps field bytes as they are).
private func parsedHeaders(_ wire: [UInt8]) throws -> HTTPHeaders {
    var parser = HTTP1ResponseParser()
    let (_, event) = try wire.withUnsafeBytes { try parser.next($0) }
    guard case .head(let head)? = event else { throw HawserError(.protocolError, "no head") }
    return head.headers
}

/// A response head with one `Set-Cookie` field per element of `setCookies` (raw bytes).
private func head(setCookies: [[UInt8]]) -> [UInt8] {
    var wire = Array("HTTP/1.1 200 OK\r\n".utf8)
    for sc in setCookies { wire += Array("Set-Cookie: ".utf8) + sc + [0x0D, 0x0A] }
    return wire + Array("Content-Length: 0\r\n\r\n".utf8)
}

@Suite("Cookie header caps and cookie octets")
struct CookieHeaderCapTests {
    /// 50 cookies of 4 KB for `example.com` (the per-domain limit), set from `www.example.com`:
    /// `c0`…`c39` on `/`, then `d40`…`d49` on `/deep` (newer, longer path).
    static func bomb(_ jar: CookieJar) {
        let from = url("http://www.example.com/")
        for i in 0..<50 {
            let name = i < 40 ? "c\(i)" : "d\(i)"
            let path = i < 40 ? "/" : "/deep"
            let header = "\(name)=\(String(repeating: "v", count: 4000)); Domain=example.com; Path=\(path)"
            _ = jar.setCookie(fromSetCookie: header, for: from, now: now.addingTimeInterval(Double(i)))
        }
    }

    @Test("the Cookie field stays within 8190 bytes: longest paths, then oldest, go first; the rest are left out")
    func byteCap() throws {
        let jar = CookieJar()
        Self.bomb(jar)
        #expect(jar.count == 50)
        let later = now.addingTimeInterval(100)
        let value = try #require(jar.cookieHeaderValue(for: url("http://api.example.com/deep/x"), now: later))
        #expect("Cookie: ".utf8.count + value.utf8.count <= 8190, "the field line is \(value.utf8.count + 8) bytes")
        let v = String(repeating: "v", count: 4000)
        #expect(value == "d40=\(v); d41=\(v)", "the two oldest of the longest path")
        // On `/`, the oldest ones.
        let root = try #require(jar.cookieHeaderValue(for: url("http://other.example.com/"), now: later))
        #expect(root == "c0=\(v); c1=\(v)")
    }

    @Test("at most 150 cookies go in one Cookie field, the first 150 in RFC 6265's order")
    func countCap() throws {
        let jar = CookieJar(maxCookiesPerDomain: 1000, maxCookies: 3000)
        let from = url("http://example.com/")
        for i in 0..<200 { jar.setCookie(fromSetCookie: "k\(i)=1", for: from, now: now.addingTimeInterval(Double(i))) }
        let value = try #require(jar.cookieHeaderValue(for: from, now: now.addingTimeInterval(300)))
        let names = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(names.count == 150)
        #expect(names == (0..<150).map { "k\($0)=1" })
        #expect(jar.cookies(for: from, now: now.addingTimeInterval(300)).count == 150)
    }

    @Test("the caps are the jar's to set; the CookieHeader says what was left out, under which caps")
    func configurableCaps() throws {
        #expect(CookieJar.defaultMaxCookieHeaderBytes == 8190)
        #expect(CookieJar.defaultMaxCookiesPerRequest == 150)
        let defaults = CookieJar()
        #expect(defaults.maxCookieHeaderBytes == 8190 && defaults.maxCookiesPerRequest == 150)

        let from = url("http://example.com/a/b")
        let counted = CookieJar(maxCookiesPerRequest: 2)
        counted.setCookie(fromSetCookie: "x=1; Path=/", for: from, now: now)
        counted.setCookie(fromSetCookie: "y=22; Path=/a", for: from, now: now.addingTimeInterval(1))
        counted.setCookie(fromSetCookie: "z=333; Path=/", for: from, now: now.addingTimeInterval(2))
        let h = try #require(counted.cookieHeader(for: from, now: now.addingTimeInterval(3)))
        #expect(
            h
                == CookieHeader(
                    value: Array("y=22; x=1".utf8),
                    cookieCount: 2,
                    omittedCount: 1,
                    maxBytes: 8190,
                    maxCount: 2
                )
        )
        #expect(h.lineBytes == 17)

        // "Cookie: y=22; x=1" is 17 bytes: a cap of 16 keeps only y, 12 keeps nothing.
        for (cap, sent, omitted) in [(17, "y=22; x=1", 1), (16, "y=22", 2), (12, "y=22", 2), (11, "", 3)] {
            let jar = CookieJar(maxCookieHeaderBytes: cap)
            jar.setCookie(fromSetCookie: "x=1; Path=/", for: from, now: now)
            jar.setCookie(fromSetCookie: "y=22; Path=/a", for: from, now: now.addingTimeInterval(1))
            jar.setCookie(fromSetCookie: "z=333; Path=/", for: from, now: now.addingTimeInterval(2))
            let header = try #require(jar.cookieHeader(for: from, now: now.addingTimeInterval(3)))
            #expect(header.value == Array(sent.utf8), "cap \(cap)")
            #expect(header.omittedCount == omitted, "cap \(cap)")
            #expect(header.lineBytes <= cap || header.cookieCount == 0)
            #expect(jar.cookieHeaderValue(for: from, now: now.addingTimeInterval(3)) == (sent.isEmpty ? nil : sent))
        }
    }

    @Test("cookies left out are not marked used: eviction still sees them as least recently used")
    func omittedNotTouched() throws {
        let jar = CookieJar(maxCookiesPerDomain: 3, maxCookiesPerRequest: 2)
        let u = url("http://example.com/")
        for (i, n) in ["a", "b", "c"].enumerated() {
            jar.setCookie(fromSetCookie: "\(n)=1", for: u, now: now.addingTimeInterval(Double(i)))
        }
        #expect(jar.cookieHeaderValue(for: u, now: now.addingTimeInterval(5)) == "a=1; b=1")
        jar.setCookie(fromSetCookie: "d=1", for: u, now: now.addingTimeInterval(6))
        #expect(jar.allCookies.map(\.name) == ["a", "b", "d"], "c, left out, was the least recently used")
    }

    @Test("a hand-made cookie with a control byte is never sent (no CR, LF or NUL reaches the head)")
    func unsendable() throws {
        let jar = CookieJar()
        jar.setCookie(Cookie(name: "ok", value: "1", domain: "example.com"), now: now)
        jar.setCookie(Cookie(name: "bad", value: "1\r\nX-Injected: 1", domain: "example.com"), now: now)
        jar.setCookie(Cookie(name: "nul", value: "a\u{0}b", domain: "example.com"), now: now)
        #expect(jar.cookieHeaderValue(for: url("http://example.com/"), now: now) == "ok=1")
    }

    @Test("name plus value over 4096 octets is ignored when stored; a long attribute value is ignored")
    func perCookieLimit() throws {
        let jar = CookieJar()
        let u = url("http://example.com/")
        let exact = String(repeating: "n", count: 96) + "=" + String(repeating: "v", count: 4000)
        #expect(throws: Never.self) { try jar.setCookie(fromSetCookie: exact, for: u, now: now).get() }
        let over = String(repeating: "n", count: 96) + "=" + String(repeating: "v", count: 4001)
        #expect(jar.setCookie(fromSetCookie: over, for: u, now: now) == .failure(.unparsable))
        let longPath = "p=1; Path=/" + String(repeating: "x", count: 1024)
        #expect(
            try jar.setCookie(fromSetCookie: longPath, for: url("http://example.com/a/b"), now: now).get().path == "/a"
        )
        let okPath = "q=1; Path=/" + String(repeating: "x", count: 1023)
        #expect(try jar.setCookie(fromSetCookie: okPath, for: u, now: now).get().path.utf8.count == 1024)
    }

    @Test("4096 octets are counted as received: 0xFF bytes are one octet each, not three")
    func octetsCountedAsReceived() throws {
        let jar = CookieJar()
        let value = [UInt8](repeating: 0xFF, count: 4000)
        let headers = try parsedHeaders(head(setCookies: [Array("big=".utf8) + value]))
        jar.setCookies(fromResponseHeaders: headers, for: url("http://example.com/"), now: now)
        #expect(jar.count == 1, "3 + 4000 octets is within 4096")
    }

    @Test("Set-Cookie octets that are not UTF-8 are kept: two cookies differing in them stay two")
    func octetsKept() throws {
        let jar = CookieJar()
        let a: [UInt8] = Array("n".utf8) + [0x80] + Array("=v".utf8) + [0xFF, 0x80]
        let b: [UInt8] = Array("n".utf8) + [0x81] + Array("=v".utf8) + [0xFE]
        let headers = try parsedHeaders(head(setCookies: [a, b]))
        jar.setCookies(fromResponseHeaders: headers, for: url("http://example.com/"), now: now)
        #expect(jar.count == 2, "n\\x80 and n\\x81 are two names")
        let cookies = jar.allCookies
        #expect(cookies.map(\.nameBytes) == [[0x6E, 0x80], [0x6E, 0x81]])
        #expect(cookies.map(\.valueBytes) == [[0x76, 0xFF, 0x80], [0x76, 0xFE]])
        let header = try #require(jar.cookieHeader(for: url("http://example.com/"), now: now))
        #expect(header.value == a + Array("; ".utf8) + b)

        // SetCookie and Cookie.make from octets, directly.
        let sc = try #require(SetCookie(bytes: a + Array("; Path=/x".utf8)))
        #expect(sc.nameBytes == [0x6E, 0x80] && sc.valueBytes == [0x76, 0xFF, 0x80] && sc.path == "/x")
        #expect(sc.name == "n\u{FFFD}", "the String view decodes with U+FFFD")
        let made = try Cookie.make(fromSetCookieBytes: b, for: url("http://example.com/"), now: now).get()
        #expect(made.valueBytes == [0x76, 0xFE])
        // The same String view, different octets: not equal.
        let c1 = Cookie(nameBytes: [0x80], valueBytes: [], domain: "example.com")
        let c2 = Cookie(nameBytes: [0x81], valueBytes: [], domain: "example.com")
        #expect(c1.name == c2.name && c1 != c2)
    }

    @Test("the cookie file keeps name and value octets: save, load, send back byte for byte")
    func octetsInFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hawser-cookie-octets-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        )
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("jar.txt").path

        let jar = CookieJar()
        let a: [UInt8] = Array("n".utf8) + [0x80] + Array("=v".utf8) + [0xFF, 0x80]
        let b: [UInt8] = Array("n".utf8) + [0x81] + Array("=v".utf8) + [0xFE]
        jar.setCookies(
            fromResponseHeaders: try parsedHeaders(head(setCookies: [a, b])),
            for: url("http://example.com/"),
            now: now
        )
        try jar.save(toNetscapeFile: path, now: now)
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let line: [UInt8] = Array("example.com\tFALSE\t/\tFALSE\t0\tn".utf8) + [0x80, 0x09, 0x76, 0xFF, 0x80, 0x0A]
        #expect(file.firstRange(of: line) != nil, "the file holds the octets as received")

        let back = try CookieJar(contentsOfNetscapeFile: path, now: now)
        #expect(back.count == 2)
        #expect(back.allCookies.map(\.valueBytes) == jar.allCookies.map(\.valueBytes))
        #expect(back.netscapeFileBytes(now: now) == file)
        #expect(NetscapeCookieFile.parse(bytes: file, now: now).map(\.nameBytes) == [[0x6E, 0x81], [0x6E, 0x80]])
    }
}
