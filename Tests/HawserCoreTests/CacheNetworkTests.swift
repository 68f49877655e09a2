import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("The HTTP cache in the request path", .serialized)
    struct CacheNetworkTests {
        static func cached(_ capacity: Int = 1 << 20) -> (inout SessionConfiguration) -> Void {
            { $0.urlCache = HTTPCache(memoryCapacity: capacity) }
        }

        @Test("a fresh response is served from the cache without a request")
        func fresh() async throws {
            try await withServer(Self.cached()) { server, session in
                let u = url(server.baseURL + "/cacheable")
                let first = try await session.response(for: HTTPClientRequest(url: u))
                let second = try await session.response(for: HTTPClientRequest(url: u))
                #expect(String(decoding: first.body, as: UTF8.self) == "response #1")
                #expect(String(decoding: second.body, as: UTF8.self) == "response #1")
                #expect(first.metrics.cacheUse == nil)
                #expect(second.metrics.cacheUse == .fresh)
                #expect(second.headers["Age"] != nil)
                #expect(server.cacheableCounts.produced == 1)
            }
        }

        @Test("a stale response is revalidated: the 304 serves the stored body")
        func revalidated() async throws {
            try await withServer(Self.cached()) { server, session in
                let u = url(server.baseURL + "/cacheable?max-age=0")
                _ = try await session.response(for: HTTPClientRequest(url: u))
                let second = try await session.response(for: HTTPClientRequest(url: u))
                #expect(second.status == 200)
                #expect(String(decoding: second.body, as: UTF8.self) == "response #1")
                #expect(second.metrics.cacheUse == .validated)
                #expect(server.cacheableCounts == (1, 1))
            }
        }

        @Test("cache policies: reload ignores the cache; returnCacheDataDontLoad never loads")
        func policies() async throws {
            try await withServer(Self.cached()) { server, session in
                var dontLoad = HTTPClientRequest(url: url(server.baseURL + "/cacheable"))
                dontLoad.cachePolicy = .returnCacheDataDontLoad
                do {
                    _ = try await session.response(for: dontLoad)
                    Issue.record("an empty cache answered")
                } catch let error as HawserError {
                    #expect(error.code == .resourceUnavailable)
                }
                _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/cacheable")))
                #expect(
                    String(decoding: try await session.response(for: dontLoad).body, as: UTF8.self) == "response #1"
                )
                var reload = HTTPClientRequest(url: url(server.baseURL + "/cacheable"))
                reload.cachePolicy = .reloadIgnoringLocalCacheData
                #expect(String(decoding: try await session.response(for: reload).body, as: UTF8.self) == "response #2")
                #expect(server.cacheableCounts.produced == 2)
                // The reloaded response replaced the stored one.
                #expect(
                    String(decoding: try await session.response(for: dontLoad).body, as: UTF8.self) == "response #2"
                )
            }
        }

        @Test("the will-cache hook can refuse or change the entry; POST invalidates")
        func hookAndInvalidation() async throws {
            final class Refuse: RecordingDelegate, @unchecked Sendable {
                override func task(
                    _ task: RequestTask,
                    willCacheResponse proposed: CachedResponse,
                    completion: @escaping @Sendable (CachedResponse?) -> Void
                ) {
                    completion(nil)
                }
            }
            try await withServer(Self.cached()) { server, session in
                let u = url(server.baseURL + "/cacheable")
                let refuse = Refuse()
                session.execute(HTTPClientRequest(url: u), delegate: refuse)
                _ = await refuse.wait()
                _ = try await session.response(for: HTTPClientRequest(url: u))
                #expect(server.cacheableCounts.produced == 2, "the refused response was not stored")
                #expect(try await session.response(for: HTTPClientRequest(url: u)).metrics.cacheUse == .fresh)
                _ = try await session.response(for: HTTPClientRequest(method: .post, url: u, body: .bytes([1])))
                let after = try await session.response(for: HTTPClientRequest(url: u))
                #expect(after.metrics.cacheUse == nil, "a POST to the URL invalidated it")
            }
        }

        @Test("a decoded (gzip) response is stored decoded and served without its coding")
        func decodedEntries() async throws {
            try await withServer(Self.cached()) { server, session in
                let u = url(server.baseURL + "/gzip")
                let first = try await session.response(for: HTTPClientRequest(url: u))
                #expect(String(decoding: first.body, as: UTF8.self).contains("gzipped"))
                // /gzip sends no freshness: not stored unless heuristically fresh; either way the
                // body served is the decoded one.
                let second = try await session.response(for: HTTPClientRequest(url: u))
                #expect(second.body == first.body)
            }
        }
    }
}
