// swift-http-types conversions: round trips that keep names, order and repeated fields, the
// errors for what cannot be carried, and Session's HTTPRequest entry point against the test server.
import Foundation
import HTTPTypes
import HawserCore
import HawserHTTPTypes
import HawserTestServer
import Testing

@Suite("swift-http-types conversions")
struct HTTPTypesConversionTests {
    /// Mixed spelling, a repeated field (twice Set-Cookie, and X-Dup under two spellings), order.
    static let headers = HTTPHeaders([
        ("Content-Type", "application/json"),
        ("set-cookie", "a=1; Path=/"),
        ("X-Dup", "first"),
        ("Set-Cookie", "b=2; Path=/"),
        ("x-dup", "second"),
        ("ETag", "\"v1\""),
        ("X-Empty", ""),
    ])

    static func pairs(_ h: HTTPHeaders) -> [String] { h.map { "\($0.name): \($0.value)" } }

    @Test("HTTPHeaders → HTTPFields → HTTPHeaders keeps names as spelled, order, and repeated fields apart")
    func fieldsRoundTrip() throws {
        let fields = try HTTPFields(Self.headers)
        #expect(fields.count == 7)
        #expect(
            fields.map(\.name.rawName) == [
                "Content-Type", "set-cookie", "X-Dup", "Set-Cookie", "x-dup", "ETag", "X-Empty",
            ]
        )
        #expect(fields[values: .setCookie] == ["a=1; Path=/", "b=2; Path=/"], "repeated fields are not folded")
        #expect(fields[values: HTTPField.Name("X-Dup")!] == ["first", "second"])
        let back = HTTPHeaders(fields)
        #expect(Self.pairs(back) == Self.pairs(Self.headers))
        // And from the other side.
        var built = HTTPFields()
        built.append(HTTPField(name: .accept, value: "*/*"))
        built.append(HTTPField(name: .cacheControl, value: "no-cache"))
        built.append(HTTPField(name: .accept, value: "text/html"))
        #expect(try HTTPFields(HTTPHeaders(built)) == built)
    }

    @Test("a field name that is not a token, or a value with CR/LF/NUL, is an invalidRequest error, not rewritten")
    func invalidFields() {
        for (name, value) in [("Bad Name", "x"), ("", "x"), ("X-Ok", "a\r\nInjected: 1"), ("X-Ok", "nul\u{0}")] {
            do throws(HawserError) {
                _ = try HTTPFields(HTTPHeaders([(name, value)]))
                Issue.record("\(name.debugDescription): \(value.debugDescription) must be refused")
            } catch {
                #expect(error.code == .invalidRequest)
            }
        }
    }

    @Test("HTTPResponseHead ↔ HTTPResponse: status, reason phrase and fields")
    func responseRoundTrip() throws {
        let head = HTTPResponseHead(status: 418, reasonPhrase: "I'm a teapot", headers: Self.headers)
        let response = try HTTPResponse(head)
        #expect(response.status.code == 418)
        #expect(response.status.reasonPhrase == "I'm a teapot")
        #expect(response.headerFields.count == 7)
        let back = HTTPResponseHead(response)
        #expect(back.status == 418 && back.reasonPhrase == "I'm a teapot")
        #expect(Self.pairs(back.headers) == Self.pairs(Self.headers))
        #expect(throws: HawserError.self) { try HTTPResponse(HTTPResponseHead(status: 1000)) }
        #expect(throws: HawserError.self) { try HTTPResponse(HTTPResponseHead(status: 42)) }
    }

    @Test(
        "HTTPClientRequest ↔ HTTPRequest: method, scheme, authority (port, IPv6), path with query, fields",
        arguments: [
            "http://example.com/", "https://example.com:8443/a/b%20c?x=1&y=%2F", "http://[::1]:8080/v1?q",
            "http://127.0.0.1/search?q=a+b#frag",
        ]
    )
    func requestRoundTrip(_ u: String) throws {
        var request = HTTPClientRequest(method: .patch, url: URL(string: u)!, headers: Self.headers)
        request.body = .bytes([1, 2, 3])
        let converted = try HTTPRequest(request)
        #expect(converted.method == .patch)
        let components = URLComponents(string: u)!
        #expect(converted.scheme == components.scheme)
        #expect(
            converted.path == components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        )
        #expect(converted.headerFields.count == 7)
        let back = try HTTPClientRequest(converted, body: .bytes([4]))
        #expect(back.method == .patch)
        // The URL comes back without its fragment (a fragment is never sent).
        #expect(back.url.absoluteString == u.split(separator: "#").first.map(String.init))
        #expect(Self.pairs(back.headers) == Self.pairs(Self.headers))
        if case .bytes(let b)? = back.body { #expect(b == [4]) } else { Issue.record("the body is the one given") }
        // A method that is not one of the named ones survives as is.
        let custom = try HTTPRequest(HTTPClientRequest(method: HTTPMethod(rawValue: "PROPFIND"), url: URL(string: u)!))
        #expect(custom.method.rawValue == "PROPFIND")
        #expect(try HTTPClientRequest(custom).method.rawValue == "PROPFIND")
    }

    @Test("an HTTPRequest without :authority uses its Host field; bad requests are typed errors")
    func requestEdges() throws {
        var fields = HTTPFields()
        fields[HTTPField.Name("Host")!] = "example.org:81"
        let viaHost = try HTTPClientRequest(
            HTTPRequest(method: .get, scheme: "http", authority: nil, path: "/x", headerFields: fields)
        )
        #expect(viaHost.url.absoluteString == "http://example.org:81/x")
        let invalid: [(HTTPRequest, String)] = [
            (HTTPRequest(method: .get, scheme: "ftp", authority: "example.org", path: "/"), "scheme"),
            (HTTPRequest(method: .get, scheme: nil, authority: "example.org", path: "/"), "no scheme"),
            (HTTPRequest(method: .get, scheme: "http", authority: nil, path: "/"), "no authority"),
            (HTTPRequest(method: .options, scheme: "http", authority: "example.org", path: "*"), "asterisk form"),
            (HTTPRequest(method: .get, scheme: "http", authority: "exa mple.org", path: "/"), "not a URL"),
        ]
        for (request, why) in invalid {
            do throws(HawserError) {
                _ = try HTTPClientRequest(request)
                Issue.record("\(why) must be refused")
            } catch {
                #expect(error.code == .invalidRequest, "\(why)")
            }
        }
        #expect(throws: HawserError.self) {
            try HTTPRequest(HTTPClientRequest(method: HTTPMethod(rawValue: "GE T"), url: URL(string: "http://a/")!))
        }
    }
}

extension NetworkTests {
    @Suite("Session with swift-http-types", .serialized)
    struct HTTPTypesSessionTests {
        static func withServer(_ body: (TestServer, Session) async throws -> Void) async throws {
            try await HawserTestSupport.withServer({ $0.httpShouldSetCookies = false }, body)
        }

        @Test("an HTTPRequest in, an HTTPResponse out with its body streaming; repeated fields both ways")
        func roundTripAgainstServer() async throws {
            try await Self.withServer { server, session in
                var fields = HTTPFields()
                fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "one"))
                fields.append(HTTPField(name: .contentType, value: "application/octet-stream"))
                fields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "two"))
                let request = HTTPRequest(
                    method: .post,
                    scheme: "http",
                    authority: "127.0.0.1:\(server.port)",
                    path: "/echo?q=1",
                    headerFields: fields
                )
                let (response, body) = try await session.streamingResponse(
                    for: request,
                    body: .stream(
                        AsyncStream<ArraySlice<UInt8>> { c in
                            c.yield([1, 2, 3][...])
                            c.yield([4][...])
                            c.finish()
                        },
                        length: 4
                    )
                )
                #expect(response.status == .ok)
                #expect(response.headerFields[HTTPField.Name("X-Echo-Method")!] == "POST")
                #expect(response.headerFields[HTTPField.Name("X-Echo-Target")!] == "/echo?q=1")
                #expect(response.headerFields[HTTPField.Name("X-Echo-H-X-Multi")!] != nil)
                #expect(try await body.collect(upTo: 100) == [1, 2, 3, 4])

                // Two Set-Cookie fields from the server stay two fields, in order.
                let (cookies, cookieBody) = try await session.streamingResponse(
                    for: HTTPRequest(
                        method: .get,
                        scheme: "http",
                        authority: "127.0.0.1:\(server.port)",
                        path: "/cookies/set?a=1&b=2"
                    )
                )
                #expect(cookies.headerFields[values: .setCookie] == ["a=1; Path=/", "b=2; Path=/"])
                _ = try await cookieBody.collect(upTo: 100)

                // A streamed download through the HTTPRequest entry point.
                let (big, bigBody) = try await session.streamingResponse(
                    for: HTTPRequest(
                        method: .get,
                        scheme: "http",
                        authority: "127.0.0.1:\(server.port)",
                        path: "/stream/5000000"
                    )
                )
                #expect(big.headerFields[.contentLength] == "5000000")
                var received = 0
                var ok = true
                for try await chunk in bigBody {
                    for (i, b) in chunk.enumerated() where b != UInt8((received + i) % 251) {
                        ok = false
                        break
                    }
                    received += chunk.count
                }
                #expect(received == 5_000_000 && ok)
                #expect(
                    bigBody.metrics?.isReusedConnection == true,
                    "the cookie response was read to its end: its connection was reused"
                )
            }
        }

        @Test("an invalid HTTPRequest fails with invalidRequest before anything is sent")
        func invalidRequest() async throws {
            try await Self.withServer { server, session in
                do throws(HawserError) {
                    _ = try await session.streamingResponse(
                        for: HTTPRequest(method: .get, scheme: "http", authority: nil, path: "/")
                    )
                    Issue.record("must throw")
                } catch {
                    #expect(error.code == .invalidRequest)
                }
                #expect(server.acceptedConnections == 0)
            }
        }
    }
}
