import Foundation
import HawserCore
import HawserTestServer
import Testing

/// The URL checked once before any IO (URLAuthority, IDNA, Punycode): the pure parts.
@Suite("URL validation: ports, authorities, IDNA")
struct URLValidationTests {
    func authority(_ s: String) -> Result<URLAuthority, HawserError> { URLAuthority.parse(s) }

    func code(_ s: String) -> HawserError.Code? {
        if case .failure(let e) = URLAuthority.parse(s) { return e.code }
        return nil
    }

    @Test("a port whose digits overflow is a bad URL, not the default port (Foundation's URL.port is nil then)")
    func overflowingPort() throws {
        let u = try #require(URL(string: "http://127.0.0.1:18446744073709570171/"))
        #expect(u.port == nil, "the premise: Foundation reads no port")
        guard case .failure(let e) = URLAuthority.parse(u) else {
            Issue.record("an overflowing port was accepted")
            return
        }
        #expect(e.code == .badURL && e.urlErrorCode == -1000)
        #expect(e.message.contains("18446744073709570171"))
        for bad in [
            "http://a.test:65536/", "http://a.test:0/", "http://a.test:99999999999999999999999/", "http://a.test:8o/",
        ] {
            #expect(self.code(bad) == .badURL, "\(bad)")
        }
        #expect(try self.authority("http://a.test:0080/").get().port == 80)
        #expect(try self.authority("http://a.test:65535/").get().port == 65535)
        #expect(try self.authority("http://a.test:/").get().port == nil, "an empty port is the default, as in curl")
        let v6 = try self.authority("http://[::1]:8080/").get()
        #expect(v6.host == "::1" && v6.port == 8080 && v6.isIPv6)
    }

    @Test("a space, a control byte or a backslash in the authority is a bad URL")
    func ambiguousAuthorities() throws {
        // As written (the tool's text), and as Foundation's URL encodes them.
        for bad in [
            "http://exa mple.test/", "http://exa%20mple.test/", "http://a\u{01}b.test/", "http://a%0Ab.test/",
            "http://c.test\\@evil.test/", "http://c.test%5C@evil.test/", "http:\\\\a.test/", "http://u@v@a.test/",
            "http://u%0D%0A@a.test/", "http://a.test%2Fb/", "http://a%zz.test/", "http://[::1/", "http://[::1]x/",
        ] {
            #expect(self.code(bad) == .badURL, "\(bad)")
        }
        // Foundation's parse of the backslash URL: the host it found is evil.test, refused all the same.
        let u = try #require(URL(string: "http://c.test\\@evil.test/"))
        #expect(u.host(percentEncoded: false) == "evil.test", "the premise: Foundation goes to evil.test")
        #expect(self.code(u.absoluteString) == .badURL)
        // Fine ones.
        #expect(try self.authority("http://user:p%40ss@a.test/").get().host == "a.test")
        #expect(try self.authority("http://%65xample.test/").get().host == "example.test")
        #expect(try self.authority("http://EXAMPLE.com/").get().hostFieldName == "EXAMPLE.com")
        #expect(try self.authority("http://EXAMPLE.com/").get().host == "example.com")
        #expect(try self.authority("http://[FE80::1%25eth0]/").get().host == "fe80::1%eth0")
        #expect(self.code("http:///path") == .invalidRequest)
    }

    @Test("IDNA: UTS #46 mapping, nontransitional, Punycode; A-labels and ASCII pass through")
    func idna() {
        // Expected values from Python's idna package (uts46=True, transitional=False).
        let cases: [(String, String)] = [
            ("bücher.example", "xn--bcher-kva.example"), ("BÜCHER.example", "xn--bcher-kva.example"),
            ("München.de", "xn--mnchen-3ya.de"), ("faß.de", "xn--fa-hia.de"),
            ("ＥＸＡＭＰＬＥ．ｃｏｍ", "example.com"), ("日本語。ＪＰ", "xn--wgv71a119e.jp"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"), ("ÖBB.at", "xn--bb-eka.at"),
            ("ياهو.com", "xn--mgb8ddf.com"), ("\u{915}\u{94D}\u{200D}\u{937}.example", "xn--11b2ezcw70k.example"),
            ("ευχαριστώ.gr", "xn--mxahn5algcq2e.gr"), ("bu\u{308}cher.example", "xn--bcher-kva.example"),
            ("Example.COM", "example.com"), ("my_host.local", "my_host.local"),
        ]
        for (input, expected) in cases {
            #expect((try? IDNA.toASCII(input).get()) == expected, "\(input)")
        }
        for bad in [
            "a\u{200C}b.example",  // ZWNJ without a joining context (CONTEXTJ)
            "a\u{FFFD}b.example",  // U+FFFD is disallowed (what a lossy UTF-8 decoding leaves)
            "a\u{E000}.example",  // private use: disallowed
            "\u{301}a.example",  // a leading combining mark
            "xn--zz-.example", "xn--a.example",  // not Punycode of a valid label
            "ab--ü.example",  // hyphens in the third and fourth positions
            "a\u{FF0F}b.example",  // a fullwidth solidus maps to '/'
            "1\u{5D0}.example",  // the Bidi rule: an RTL label starting with a digit
            "er.\u{94D}mple",  // a label starting with a combining mark after a dot (one Character with it)
            "xn--" + String(repeating: "v", count: 60) + "bchexp\u{FF0E}",  // an A-label over 63 bytes
        ] {
            guard case .failure = IDNA.toASCII(bad) else {
                Issue.record("'\(bad)' was accepted")
                continue
            }
        }
        // Conversion is idempotent.
        for (_, expected) in cases { #expect((try? IDNA.toASCII(expected).get()) == expected) }
    }

    @Test("a host UTS #46 maps to nothing is no host: a bad URL, not an empty host (found by FuzzURLValidation)")
    func hostMappedToNothing() throws {
        for host in ["\u{34F}", "\u{200B}", "\u{AD}\u{34F}", "\u{34F}."] {
            guard case .failure = IDNA.toASCII(host) else {
                Issue.record("'\(host.unicodeScalars.map { String($0.value, radix: 16) })' converted to a host")
                continue
            }
            guard case .failure(let e) = URLAuthority.parse("http://\(host)/") else {
                Issue.record("http://\(host)/ was accepted")
                continue
            }
            #expect(e.code == .badURL, "\(e)")
        }
        // Ignored code points beside real ones are simply dropped.
        #expect(try IDNA.toASCII("a\u{34F}b.example").get() == "ab.example")
    }

    @Test("Punycode: RFC 3492's samples both ways")
    func punycode() {
        let samples: [([UInt32], String)] = [
            // (A) Arabic (Egyptian)
            (
                [
                    0x0644, 0x064A, 0x0647, 0x0645, 0x0627, 0x0628, 0x062A, 0x0643, 0x0644, 0x0645, 0x0648, 0x0634,
                    0x0639, 0x0631, 0x0628, 0x064A, 0x061F,
                ], "egbpdaj6bu4bxfgehfvwxn"
            ),
            // (L) 3<nen>B<gumi><kinpachi><sensei>
            ([0x0033, 0x5E74, 0x0042, 0x7D44, 0x91D1, 0x516B, 0x5148, 0x751F], "3B-ww4c5e180e575a65lsy2b"),
            ([0xFC], "tda"),
        ]
        for (points, text) in samples {
            let scalars = points.map { Unicode.Scalar($0)! }
            #expect(Punycode.encode(scalars).map { String(decoding: $0, as: UTF8.self) } == text)
            #expect(Punycode.decode(Array(text.utf8)) == scalars)
        }
        #expect(Punycode.decode(Array("99999999999999999".utf8)) == nil, "an overflow is refused")
        #expect(Punycode.decode(Array("a!".utf8)) == nil)
    }

    @Test("a Location's bytes: what cannot stand in a URL is percent-encoded byte for byte (0x80 is %80)")
    func locationEncoding() {
        let bytes: [UInt8] = Array("/x y".utf8) + [0x80] + Array("z".utf8)
        #expect(URLAuthority.percentEncodingReference(bytes) == "/x%20y%80z")
        #expect(URLAuthority.percentEncodingReference(Array("/ä?q=\"1\"#f".utf8)) == "/%C3%A4?q=%221%22#f")
        // The authority is left alone, for the check to refuse.
        #expect(URLAuthority.percentEncodingReference(Array("http://a b/c d".utf8)) == "http://a b/c%20d")
    }
}

extension NetworkTests {
    @Suite("URL validation on the wire", .serialized)
    struct URLValidationNetworkTests {
        @Test("an overflowing port fails with badURL (-1000) before any IO")
        func overflowingPort() async throws {
            try await FaultTests.withSession { session in
                do {
                    _ = try await session.response(
                        for: HTTPClientRequest(url: url("http://127.0.0.1:18446744073709570171/"))
                    )
                    Issue.record("the request was sent")
                } catch let e as HawserError {
                    #expect(e.code == .badURL && e.urlErrorCode == -1000, "\(e)")
                }
            }
        }

        @Test("an IDN host goes in Host as A-labels, the dnsOverride keyed by the A-label")
        func idnHost() async throws {
            let server = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), .waitForClose]
            ])
            defer { server.stop() }
            try await FaultTests.withSession({ c in
                c.dnsOverride = ["xn--bcher-kva.example": ["127.0.0.1"]]
            }) { session in
                // Percent-encoded UTF-8, as FoundationEssentials spells the host (no IDNA of its own).
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://b%C3%BCcher.example:\(server.port)/"))
                )
                #expect(r.status == 200)
            }
            let head = String(decoding: server.requests.first ?? [], as: UTF8.self)
            #expect(head.contains("\r\nHost: xn--bcher-kva.example:\(server.port)\r\n"), "\(head)")
        }

        @Test("through a proxy, the CONNECT line names the A-label host")
        func idnConnect() async throws {
            let proxy = try ScriptedServer([
                [.readRequest(), .sendText("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"), .waitForClose]
            ])
            defer { proxy.stop() }
            try await FaultTests.withSession({ c in
                c.proxy = ProxyConfiguration(httpsProxy: ProxyServer(kind: .http, host: "127.0.0.1", port: proxy.port))
            }) { session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url("https://b%C3%BCcher.example/")))
                    Issue.record("a refused CONNECT succeeded")
                } catch let e as HawserError {
                    #expect(e.code == .proxyError, "\(e)")
                }
            }
            let head = String(decoding: proxy.requests.first ?? [], as: UTF8.self)
            #expect(head.hasPrefix("CONNECT xn--bcher-kva.example:443 HTTP/1.1\r\n"), "\(head)")
            #expect(head.contains("\r\nHost: xn--bcher-kva.example:443\r\n"), "\(head)")
        }

        @Test("a Location with a space and a byte that is not UTF-8 is followed as %20 and %80")
        func locationBytes() async throws {
            let server = try ScriptedServer([
                [
                    .readRequest(),
                    .send(
                        Array("HTTP/1.1 302 Found\r\nContent-Length: 0\r\nLocation: /x y".utf8) + [0x80]
                            + Array("z\r\n\r\n".utf8)
                    ),
                    .readRequest(),
                    .sendText("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), .waitForClose,
                ]
            ])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                let r = try await session.response(for: HTTPClientRequest(url: url("\(server.baseURL)/start")))
                #expect(r.status == 200)
            }
            let requests = server.requests
            #expect(requests.count == 2)
            let second = String(decoding: requests.last ?? [], as: UTF8.self)
            #expect(second.hasPrefix("GET /x%20y%80z HTTP/1.1\r\n"), "\(second)")
        }

        @Test("a redirect to an overflowing port or an ambiguous authority is a badURL, not followed")
        func badRedirects() async throws {
            for location in [
                "http://127.0.0.1:18446744073709570171/", "http://c.test\\@127.0.0.1/", "http://a b.test/",
            ] {
                let server = try ScriptedServer([
                    [
                        .readRequest(),
                        .sendText("HTTP/1.1 302 Found\r\nContent-Length: 0\r\nLocation: \(location)\r\n\r\n"),
                        .waitForClose,
                    ]
                ])
                defer { server.stop() }
                try await FaultTests.withSession { session in
                    do {
                        _ = try await session.response(for: HTTPClientRequest(url: url("\(server.baseURL)/")))
                        Issue.record("\(location) was followed")
                    } catch let e as HawserError {
                        #expect(e.code == .badURL, "\(location): \(e)")
                    }
                }
                #expect(server.requestCount == 1, "\(location)")
            }
        }

        @Test("a dnsOverride key HOST:PORT applies to that port, redirects included")
        func overrideByPort() async throws {
            let server = try TestServer(host: "127.0.0.2")
            defer { server.shutdown() }
            let p = server.port
            try await FaultTests.withSession({ c in
                c.dnsOverride = ["hawser-override.localhost:\(p)": ["127.0.0.2"]]
            }) { session in
                let target = "http://hawser-override.localhost:\(p)/echo"
                let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://127.0.0.2:\(p)/redirect-to?url=\(encoded)"))
                )
                #expect(r.status == 200)
                #expect(r.headers["X-Echo-H-Host"] == "hawser-override.localhost:\(p)")
            }
        }
    }
}
