import Foundation
import HawserCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("HTTP cache: 304, invalidation and memory bounds")
struct HTTPCacheValidationTests {
    // MARK: - 304 (§4.3.4)

    @Test("a 304 updates the stored headers and restarts the age")
    func notModified() throws {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let request = get("http://example.org/r")
        cache.store(
            head(
                200,
                [
                    ("Date", HTTPDate.format(t0)), ("Cache-Control", "max-age=10"), ("ETag", #"W/"v1""#),
                    ("Content-Length", "4"), ("X-Old", "a"),
                ]
            ),
            body: body(4),
            for: request,
            requestTime: t0,
            responseTime: t0
        )
        #expect(!cache.lookup(request, now: at(20)).isFresh)
        #expect(
            cache.updateAfterNotModified(
                head(304, [("ETag", #""v2""#)]),
                for: request,
                requestTime: at(20),
                responseTime: at(20)
            ) == nil,
            "a 304 for another ETag selects nothing"
        )
        let updated = try #require(
            cache.updateAfterNotModified(
                head(
                    304,
                    [
                        ("Date", HTTPDate.format(at(21))), ("ETag", #""v1""#), ("Cache-Control", "max-age=100"),
                        ("Content-Length", "0"), ("Connection", "close"), ("X-New", "b"),
                    ]
                ),
                for: request,
                requestTime: at(20),
                responseTime: at(21)
            )
        )
        #expect(updated.body == body(4))
        #expect(updated.head.status == 200)
        #expect(updated.head.headers["Cache-Control"] == "max-age=100")
        #expect(updated.head.headers["Content-Length"] == "4")
        #expect(updated.head.headers["X-Old"] == "a" && updated.head.headers["X-New"] == "b")
        #expect(updated.head.headers["Connection"] == nil)
        #expect(updated.head.headers.values(for: "ETag") == [#""v1""#])
        let after = cache.lookup(request, now: at(60))
        #expect(after.isFresh)
        // Corrected initial age 1 (the 304 took 1 s) plus 39 s resident.
        #expect(after.response?.head.headers["Age"] == "40")

        // Without validators in the 304, the only stored response is the one.
        let lone = get("http://example.org/lone")
        cache.store(
            head(200, [("Cache-Control", "max-age=0"), ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            body: [9],
            for: lone,
            requestTime: t0,
            responseTime: t0
        )
        #expect(
            cache.updateAfterNotModified(
                head(304, [("Cache-Control", "max-age=50")]),
                for: lone,
                requestTime: at(5),
                responseTime: at(5)
            )?.body == [9]
        )
        #expect(cache.lookup(lone, now: at(30)).isFresh)
        #expect(
            cache.updateAfterNotModified(
                head(304, []),
                for: get("http://example.org/absent"),
                requestTime: t0,
                responseTime: t0
            ) == nil
        )
    }

    // MARK: - Invalidation (§4.4)

    @Test("unsafe methods with non-error responses invalidate the URL and same-origin locations")
    func invalidation() {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let urls = ["http://example.org/a", "http://example.org/b", "http://example.org/c", "http://other.example/c"]
        func fill() {
            for url in urls {
                cache.store(
                    head(200, [("Cache-Control", "max-age=100")]),
                    body: [],
                    for: get(url),
                    requestTime: t0,
                    responseTime: t0
                )
            }
        }
        func present() -> [Bool] { urls.map { cache.cachedResponse(for: get($0)) != nil } }
        fill()
        var post = get("http://example.org/a")
        post.method = .post
        cache.invalidate(after: post, response: head(500, [("Location", "/b")]))
        #expect(present() == [true, true, true, true], "an error response invalidates nothing")
        var getRequest = post
        getRequest.method = .get
        cache.invalidate(after: getRequest, response: head(200, []))
        #expect(present() == [true, true, true, true], "a safe method invalidates nothing")
        cache.invalidate(
            after: post,
            response: head(201, [("Location", "/b"), ("Content-Location", "http://other.example/c")])
        )
        #expect(present() == [false, false, true, true])
        fill()
        var delete = get("http://example.org/c")
        delete.method = .delete
        cache.invalidate(after: delete, response: head(204, [("Content-Location", "http://EXAMPLE.org:80/a")]))
        #expect(present() == [false, true, false, true])
        cache.removeResponses(for: URL(string: "http://other.example/c")!)
        #expect(present() == [false, true, false, false])
        cache.removeAll()
        #expect(present() == [false, false, false, false] && cache.currentMemoryUsage == 0)
    }

    // MARK: - Memory bounds

    @Test("memory is bounded by bytes, evicts the least recently used, refuses large bodies")
    func memoryBounds() {
        let capacity = 100_000
        let cache = HTTPCache(memoryCapacity: capacity)
        func url(_ i: Int) -> String { "http://example.org/\(i)" }
        func store(_ i: Int, _ size: Int = 5_000) -> Bool {
            cache.store(
                head(200, [("Cache-Control", "max-age=100")]),
                body: body(size),
                for: get(url(i)),
                requestTime: t0,
                responseTime: t0
            )
        }
        #expect(!store(-1, capacity / 10), "larger than a tenth of the capacity")
        for i in 0..<10 { #expect(store(i)) }
        #expect(cache.lookup(get(url(0)), now: t0).isFresh)  // 0 is now the most recently used
        for i in 10..<30 {
            #expect(store(i))
            #expect(cache.currentMemoryUsage <= capacity)
            _ = cache.lookup(get(url(0)), now: t0)
        }
        #expect(cache.lookup(get(url(0)), now: t0).isFresh, "recently used survives")
        #expect(cache.lookup(get(url(1)), now: t0).isMiss, "least recently used is evicted")
        #expect(cache.lookup(get(url(29)), now: t0).isFresh)
        let zero = HTTPCache(memoryCapacity: 0)
        #expect(
            !zero.store(
                head(200, [("Cache-Control", "max-age=100")]),
                body: [1],
                for: get(url(0)),
                requestTime: t0,
                responseTime: t0
            )
        )
    }

    @Test("variants per URL are bounded")
    func variantBound() {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let url = "http://example.org/many"
        for i in 0...HTTPCache.maximumVariantsPerKey {
            cache.store(
                head(200, [("Cache-Control", "max-age=100"), ("Vary", "X-V")]),
                body: [UInt8(i)],
                for: get(url, [("X-V", "\(i)")]),
                requestTime: t0,
                responseTime: t0
            )
        }
        #expect(cache.lookup(get(url, [("X-V", "0")]), now: t0).isMiss)
        #expect(cache.lookup(get(url, [("X-V", "1")]), now: t0).isFresh)
        #expect(cache.lookup(get(url, [("X-V", "\(HTTPCache.maximumVariantsPerKey)")]), now: t0).isFresh)
    }
}
