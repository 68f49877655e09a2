import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

extension NetworkTests {
    /// The cookie jar in the request path: stored from responses (redirects too), sent back.
    @Suite("Cookies on the wire", .serialized)
    struct CookieNetworkTests {
        @Test("Set-Cookie is stored and sent on the next request; a request can opt out")
        func roundTrip() async throws {
            try await withServer { server, session in
                _ = try await session.response(
                    for: HTTPClientRequest(url: url(server.baseURL + "/cookies/set?b=2&a=1"))
                )
                let back = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/cookies")))
                let sent = String(decoding: back.body, as: UTF8.self)
                #expect(
                    sent.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.sorted() == [
                        "a=1", "b=2",
                    ]
                )

                var optOut = HTTPClientRequest(url: url(server.baseURL + "/cookies"))
                optOut.shouldHandleCookies = false
                #expect(try await session.response(for: optOut).body.isEmpty)

                var own = HTTPClientRequest(url: url(server.baseURL + "/cookies"), headers: ["Cookie": "mine=1"])
                own.shouldHandleCookies = true
                #expect(String(decoding: try await session.response(for: own).body, as: UTF8.self) == "mine=1")
            }
        }

        @Test("cookies set by a redirect response are sent to where it leads")
        func throughRedirect() async throws {
            try await withServer { server, session in
                let target =
                    server.baseURL + "/redirect-to?cookie=r%3D1&url="
                    + ("/cookies".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                let r = try await session.response(for: HTTPClientRequest(url: url(target)))
                #expect(r.metrics.redirectCount == 1)
                #expect(String(decoding: r.body, as: UTF8.self) == "r=1")
            }
        }

        @Test("no jar, or httpShouldSetCookies false: nothing is stored or sent")
        func disabled() async throws {
            for configure: @Sendable (inout SessionConfiguration) -> Void in [
                { $0.httpCookieStorage = nil }, { $0.httpShouldSetCookies = false },
            ] {
                try await withServer(configure) { server, session in
                    _ = try await session.response(
                        for: HTTPClientRequest(url: url(server.baseURL + "/cookies/set?a=1"))
                    )
                    #expect(
                        try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/cookies"))).body
                            .isEmpty
                    )
                }
            }
        }

        /// The value of the `Cookie` field of a raw request head, byte for byte; nil without one.
        static func cookieField(_ request: [UInt8]) -> [UInt8]? {
            let prefix = Array("\r\nCookie: ".utf8)
            guard let start = request.firstRange(of: prefix) else { return nil }
            let rest = request[start.upperBound...]
            guard let end = rest.firstRange(of: [0x0D, 0x0A]) else { return nil }
            return Array(rest[..<end.lowerBound])
        }

        /// A 200 with an empty body and these `Set-Cookie` fields (raw bytes).
        static func setting(_ cookies: [[UInt8]]) -> [UInt8] {
            var wire = Array("HTTP/1.1 200 OK\r\n".utf8)
            for c in cookies { wire += Array("Set-Cookie: ".utf8) + c + [0x0D, 0x0A] }
            return wire + Array("Content-Length: 0\r\n\r\n".utf8)
        }

        @Test(
            "50 cookies of 4 KB for a parent domain: the next request to another host under it gets a Cookie field within 8190 bytes, longest path and oldest first"
        )
        func cookieHeaderBomb() async throws {
            // www.example.test sets them (ten responses of five), api.example.test receives them.
            var setter: [ScriptedServer.Step] = []
            let v = String(repeating: "v", count: 4000)
            for batch in 0..<10 {
                let cookies = (0..<5).map { k -> [UInt8] in
                    let i = batch * 5 + k
                    let (name, path) = i < 40 ? ("c\(i)", "/") : ("d\(i)", "/deep")
                    return Array("\(name)=\(v); Domain=example.test; Path=\(path)".utf8)
                }
                setter += [.readRequest(), .send(Self.setting(cookies))]
            }
            setter.append(.waitForClose)
            let receiver: [ScriptedServer.Step] = [
                .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), .waitForClose,
            ]
            let server = try ScriptedServer([setter, receiver])
            defer { server.stop() }
            let hosts = ["www.example.test": ["127.0.0.1"], "api.example.test": ["127.0.0.1"]]
            try await FaultTests.withSession({ $0.dnsOverride = hosts }) { session in
                for i in 0..<10 {
                    let r = try await session.response(
                        for: HTTPClientRequest(url: url("http://www.example.test:\(server.port)/set/\(i)"))
                    )
                    #expect(r.status == 200)
                }
                let r = try await session.response(
                    for: HTTPClientRequest(url: url("http://api.example.test:\(server.port)/deep/page"))
                )
                #expect(r.status == 200)
            }
            let requests = server.requests
            try #require(requests.count == 11)
            let field = try #require(Self.cookieField(requests[10]))
            #expect("Cookie: ".utf8.count + field.count <= 8190, "the Cookie line is \(field.count + 8) bytes")
            #expect(String(decoding: field, as: UTF8.self) == "d40=\(v); d41=\(v)")
        }

        @Test("Set-Cookie bytes 0x80 and 0xFF come back byte for byte; two cookies differing only in them stay two")
        func cookieOctets() async throws {
            let a: [UInt8] = Array("n".utf8) + [0x80] + Array("=v".utf8) + [0xFF, 0x80]
            let b: [UInt8] = Array("n".utf8) + [0x81] + Array("=v".utf8) + [0xFF, 0x81]
            let script: [ScriptedServer.Step] = [
                .readRequest(), .send(Self.setting([a, b])),
                .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), .waitForClose,
            ]
            let server = try ScriptedServer([script])
            defer { server.stop() }
            try await FaultTests.withSession { session in
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/set")))
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/next")))
            }
            let requests = server.requests
            try #require(requests.count == 2)
            #expect(Self.cookieField(requests[0]) == nil)
            #expect(Self.cookieField(requests[1]) == a + Array("; ".utf8) + b)
        }
    }
}
