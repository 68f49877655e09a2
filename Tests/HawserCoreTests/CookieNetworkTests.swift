import Foundation
import HawserCore
import HawserTestServer
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
    }
}
