import Foundation
import HawserCore
import Testing

extension NetworkTests {
    /// HTTP completeness against a real, independent server: a local httpbin.
    @Suite("Redirects, codings, cookies, caching against httpbin", .serialized)
    struct HttpbinTests {
        static func withHttpbin(
            _ configure: (inout SessionConfiguration) -> Void = { _ in },
            _ body: (HttpbinFixture, Session) async throws -> Void
        ) async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            try await FaultTests.withSession(configure) { session in try await body(bin, session) }
        }

        static func json(_ r: HTTPClientResponse) throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        }

        @Test("httpbin's /redirect, /relative-redirect, /absolute-redirect and /redirect-to with 307 and 303")
        func redirects() async throws {
            try await Self.withHttpbin { bin, session in
                for path in ["/redirect/3", "/relative-redirect/2", "/absolute-redirect/2"] {
                    let r = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + path)))
                    #expect(r.status == 200, "\(path)")
                    #expect(r.metrics.redirectCount == Int(path.split(separator: "/").last!)!, "\(path)")
                }
                let to307 = bin.baseURL + "/redirect-to?status_code=307&url=%2Fpost"
                let r = try await session.response(
                    for: HTTPClientRequest(
                        method: .post,
                        url: url(to307),
                        headers: ["Content-Type": "text/plain"],
                        body: .bytes(Array("kept".utf8))
                    )
                )
                #expect(r.status == 200)
                #expect(try Self.json(r)["data"] as? String == "kept")
                let to303 = bin.baseURL + "/redirect-to?status_code=303&url=%2Fget"
                let g = try await session.response(
                    for: HTTPClientRequest(method: .post, url: url(to303), body: .bytes(Array("dropped".utf8)))
                )
                #expect(g.status == 200, "303 turned the POST into a GET of /get")
            }
        }

        @Test("httpbin's /gzip and /deflate are decoded")
        func codings() async throws {
            try await Self.withHttpbin { bin, session in
                let gz = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/gzip")))
                #expect(try Self.json(gz)["gzipped"] as? Bool == true)
                let df = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/deflate")))
                #expect(try Self.json(df)["deflated"] as? Bool == true)
            }
        }

        @Test("httpbin's /cookies/set stores cookies through its redirect; /cookies/delete removes them")
        func cookies() async throws {
            try await Self.withHttpbin { bin, session in
                let set = try await session.response(
                    for: HTTPClientRequest(url: url(bin.baseURL + "/cookies/set?flavour=oat&size=big"))
                )
                let cookies = try #require(try Self.json(set)["cookies"] as? [String: String])
                #expect(cookies == ["flavour": "oat", "size": "big"])
                let del = try await session.response(
                    for: HTTPClientRequest(url: url(bin.baseURL + "/cookies/delete?size"))
                )
                #expect(try Self.json(del)["cookies"] as? [String: String] == ["flavour": "oat"])
            }
        }

        @Test("httpbin's /cache/N is served fresh from the cache; /cache revalidates with If-Modified-Since (304)")
        func caching() async throws {
            try await Self.withHttpbin({ $0.urlCache = HTTPCache(memoryCapacity: 1 << 20) }) { bin, session in
                let first = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/cache/60")))
                let second = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/cache/60")))
                #expect(first.metrics.cacheUse == nil)
                #expect(second.metrics.cacheUse == .fresh)
                #expect(second.body == first.body)
                // /cache answers 304 to a conditional request; a stored copy without freshness is revalidated.
                let a = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/cache")))
                let b = try await session.response(for: HTTPClientRequest(url: url(bin.baseURL + "/cache")))
                #expect(a.status == 200 && b.status == 200)
                #expect(
                    b.metrics.cacheUse == .validated || b.metrics.cacheUse == .fresh,
                    "\(String(describing: b.metrics.cacheUse))"
                )
            }
        }

        @Test("an opt-in gzip request body reaches httpbin coded, and decodes to what was sent")
        func gzipRequestBody() async throws {
            try await Self.withHttpbin { bin, session in
                let payload = Array(String(repeating: "compress me ", count: 200).utf8)
                var r = HTTPClientRequest(
                    method: .post,
                    url: url(bin.baseURL + "/anything"),
                    headers: ["Content-Type": "text/plain"],
                    body: .bytes(payload)
                )
                r.compressesBody = true
                let resp = try await session.response(for: r)
                let echo = try Self.json(resp)
                let headers = try #require(echo["headers"] as? [String: String])
                #expect(headers["Content-Encoding"] == "gzip")
                #expect(Int(headers["Content-Length"] ?? "") ?? .max < payload.count, "the body went out compressed")
                // httpbin hands back a binary body as a base64 data URL; it must gunzip to the payload.
                let data = try #require(echo["data"] as? String)
                let prefix = "data:application/octet-stream;base64,"
                #expect(data.hasPrefix(prefix), "\(data.prefix(60))")
                let coded = try #require(Data(base64Encoded: String(data.dropFirst(prefix.count))))
                #expect(try decodeAll("gzip", [Array(coded)[...]]).bytes == payload)
                var streamed = r
                streamed.body = .stream(length: nil) { try await $0.write(payload) }
                do {
                    _ = try await session.response(for: streamed)
                    Issue.record("a streamed body was accepted for compression")
                } catch let error as HawserError {
                    #expect(error.code == .invalidRequest)
                }
            }
        }
    }
}
