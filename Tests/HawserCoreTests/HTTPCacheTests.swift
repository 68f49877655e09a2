import Foundation
import HawserCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension CacheLookup {
    var isFresh: Bool { if case .fresh = self { return true } else { return false } }
    var isMiss: Bool { if case .miss = self { return true } else { return false } }
    var response: CachedResponse? {
        switch self {
        case .fresh(let r), .stale(let r, _): return r
        case .miss: return nil
        }
    }
    var conditional: HTTPHeaders? { if case .stale(_, let h) = self { return h } else { return nil } }
}

@Suite("CacheControl and HTTP dates")
struct CacheControlTests {
    struct Case: Sendable, CustomStringConvertible {
        var value: String
        var check: @Sendable (CacheControl) -> Bool
        var description: String { self.value }
    }

    static let cases: [Case] = [
        .init(value: "max-age=60") { $0.maxAge == 60 && !$0.noCache },
        .init(value: #"max-age="60""#) { $0.maxAge == 60 },
        .init(value: "no-cache, no-store") { $0.noCache && $0.noStore && $0.noCacheFieldNames.isEmpty },
        .init(value: "private, max-age=0") { $0.isPrivate && $0.maxAge == 0 },
        .init(value: "max-age=99999999999999999999999") { $0.maxAge == CacheControl.maximumDeltaSeconds },
        .init(value: "max-age=2147483649") { $0.maxAge == 2_147_483_648 },
        .init(value: "max-age=-1") { $0.maxAge == 0 },
        .init(value: "max-age=1a") { $0.maxAge == 0 },
        .init(value: "max-age") { $0.maxAge == 0 },
        .init(value: "max-age=60, max-age=60") { $0.maxAge == 60 },
        .init(value: "max-age=60, max-age=120") { $0.maxAge == 0 },
        .init(value: #"no-cache="Set-Cookie, X-Foo", max-age=5"#) {
            $0.noCache && $0.noCacheFieldNames == ["set-cookie", "x-foo"] && $0.maxAge == 5
        },
        .init(value: "MAX-AGE=5, Public, Must-Revalidate") { $0.maxAge == 5 && $0.isPublic && $0.mustRevalidate },
        .init(value: "foo=bar, baz, max-age=1") {
            $0.value(of: "foo") == "bar" && $0.contains("baz") && $0.maxAge == 1 && $0.directives.count == 3
        },
        .init(value: "max-stale") { $0.maxStale == CacheControl.maximumDeltaSeconds },
        .init(value: "max-stale=10, min-fresh=5") { $0.maxStale == 10 && $0.minFresh == 5 },
        .init(value: "max-age=10 junk, no-store") { $0.maxAge == 10 && $0.noStore && $0.directives.count == 2 },
        .init(value: #""quoted", =x, no-store"#) { $0.noStore && $0.directives.count == 1 },
        .init(value: #"private="a,b", max-age=5"#) {
            $0.isPrivate && $0.value(of: "private") == "a,b" && $0.maxAge == 5
        },
        .init(value: #"no-cache="abc, max-age=5"#) { $0.noCache && $0.maxAge == nil },
        .init(value: #"x="a\"b", s-maxage=7, immutable"#) {
            $0.value(of: "x") == #"a"b"# && $0.sharedMaxAge == 7 && $0.immutable
        },
        .init(value: "") { $0.directives.isEmpty },
        .init(value: " ,, , ") { $0.directives.isEmpty },
        .init(value: "only-if-cached, no-transform, must-understand, proxy-revalidate, stale-if-error=3") {
            $0.onlyIfCached && $0.noTransform && $0.mustUnderstand && $0.proxyRevalidate && $0.staleIfError == 3
        },
    ]

    @Test("Cache-Control values parse", arguments: cases)
    func parse(_ c: Case) {
        let cc = CacheControl(parsing: c.value)
        #expect(c.check(cc), "\(cc.directives)")
    }

    @Test("directives are collected across Cache-Control fields")
    func acrossFields() {
        let cc = CacheControl(
            HTTPHeaders([(name: "Cache-Control", value: "public"), (name: "cache-control", value: "max-age=9")])
        )
        #expect(cc.isPublic && cc.maxAge == 9)
        #expect(CacheControl(parsing: cc.description) == cc)
    }

    @Test("HTTP dates: the three formats, impossible dates, formatting")
    func dates() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") == Date(timeIntervalSince1970: 951_782_400))
        #expect(HTTPDate.parse("Thu, 01-Jan-30 00:00:00 GMT") == Date(timeIntervalSince1970: 1_893_456_000))
        for bad in [
            "0", "", "Sun, 32 Nov 1994 08:49:37 GMT", "Wed, 29 Feb 1995 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT GMT", "-1", String(repeating: "9", count: 100),
        ] {
            #expect(HTTPDate.parse(bad) == nil, "\(bad)")
        }
        #expect(HTTPDate.format(expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400.9)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.parse(HTTPDate.format(t0)) == t0)
    }
}

@Suite("HTTP cache")
struct HTTPCacheTests {
    // MARK: - Freshness and age (RFC 9111 §4.2)

    @Test("max-age, Expires − Date and the heuristic give the lifetime; s-maxage is for shared caches")
    func lifetime() {
        func lifetime(_ status: Int, _ fields: [(String, String)]) -> (Double, Bool) {
            let f = ResponseFreshness(
                headers: head(status, fields).headers,
                status: status,
                requestTime: t0,
                responseTime: t0,
                now: t0
            )
            return (f.lifetime, f.isHeuristic)
        }
        func lifetime(_ fields: [(String, String)]) -> (Double, Bool) { lifetime(200, fields) }
        let date = ("Date", HTTPDate.format(t0))
        #expect(lifetime([date, ("Cache-Control", "max-age=100")]) == (100, false))
        #expect(
            lifetime([date, ("Cache-Control", "max-age=100"), ("Expires", HTTPDate.format(at(5)))]) == (100, false)
        )
        #expect(lifetime([date, ("Expires", HTTPDate.format(at(3600)))]) == (3600, false))
        #expect(lifetime([date, ("Expires", HTTPDate.format(at(-60)))]) == (0, false))
        #expect(lifetime([date, ("Expires", "0")]) == (0, false))
        #expect(lifetime([("Expires", HTTPDate.format(at(30)))]) == (30, false), "no Date: the response time stands in")
        #expect(lifetime([date, ("Last-Modified", HTTPDate.format(at(-1000)))]) == (100, true))
        #expect(
            lifetime([date, ("Last-Modified", HTTPDate.format(at(-30 * 86_400)))]) == (86_400, true),
            "capped at a day"
        )
        #expect(lifetime(404, [date, ("Last-Modified", HTTPDate.format(at(-1000)))]) == (100, true))
        #expect(lifetime(500, [date, ("Last-Modified", HTTPDate.format(at(-1000)))]) == (0, false))
        #expect(
            lifetime(500, [date, ("Cache-Control", "public"), ("Last-Modified", HTTPDate.format(at(-1000)))]) == (
                100, true
            )
        )
        #expect(lifetime([date]) == (0, true))
        #expect(lifetime([date, ("Cache-Control", "s-maxage=100")]) == (0, true))
    }

    @Test("age follows RFC 9111 §4.2.3 with fixed times")
    func age() {
        // Sent at t0, received 2 s later, Date = receipt: age 2 on arrival, +50 resident.
        var f = ResponseFreshness(
            headers: head(200, [("Date", HTTPDate.format(at(2))), ("Cache-Control", "max-age=100")]).headers,
            status: 200,
            requestTime: t0,
            responseTime: at(2),
            now: at(52)
        )
        #expect(f.correctedInitialAge == 2 && f.currentAge == 52 && f.isFresh)
        f = ResponseFreshness(
            headers: head(200, [("Date", HTTPDate.format(at(2))), ("Cache-Control", "max-age=100")]).headers,
            status: 200,
            requestTime: t0,
            responseTime: at(2),
            now: at(102)
        )
        #expect(f.currentAge == 102 && !f.isFresh)
        // Age field 30 + delay 1 beats the apparent age 10.
        f = ResponseFreshness(
            headers: head(200, [("Date", HTTPDate.format(at(-10))), ("Age", "30")]).headers,
            status: 200,
            requestTime: at(-1),
            responseTime: t0,
            now: t0
        )
        #expect(f.correctedInitialAge == 31)
        // Apparent age 100 beats Age 5 + delay 0.
        f = ResponseFreshness(
            headers: head(200, [("Date", HTTPDate.format(at(-100))), ("Age", "5")]).headers,
            status: 200,
            requestTime: t0,
            responseTime: t0,
            now: at(10)
        )
        #expect(f.correctedInitialAge == 100 && f.currentAge == 110)
        // A huge Age is clamped; a bad one is ignored; a clock running backwards adds nothing.
        f = ResponseFreshness(
            headers: head(200, [("Age", "999999999999999999999")]).headers,
            status: 200,
            requestTime: t0,
            responseTime: t0,
            now: at(-50)
        )
        #expect(f.currentAge == 2_147_483_648)
        f = ResponseFreshness(
            headers: head(200, [("Age", "-3"), ("Date", "garbage")]).headers,
            status: 200,
            requestTime: t0,
            responseTime: t0,
            now: at(-50)
        )
        #expect(f.currentAge == 0)
    }

    // MARK: - Storability (§3)

    static let storability: [(String, [(String, String)], Int, [(String, String)], Bool)] = [
        ("GET", [], 200, [], true),
        ("GET", [], 200, [("Cache-Control", "no-store")], false),
        ("GET", [("Cache-Control", "no-store")], 200, [("Cache-Control", "max-age=60")], false),
        ("GET", [], 200, [("Cache-Control", "private, max-age=60")], true),
        ("GET", [], 200, [("Cache-Control", "no-store, must-understand")], true),
        ("POST", [], 200, [("Cache-Control", "max-age=60")], false),
        ("HEAD", [], 200, [("Cache-Control", "max-age=60")], false),
        ("GET", [("Authorization", "Basic x")], 200, [("Cache-Control", "max-age=60")], false),
        ("GET", [("Authorization", "Basic x")], 200, [("Cache-Control", "public")], true),
        ("GET", [("Authorization", "Basic x")], 200, [("Cache-Control", "must-revalidate, max-age=9")], true),
        ("GET", [("Authorization", "Basic x")], 200, [("Cache-Control", "s-maxage=60")], true),
        ("GET", [], 203, [], true), ("GET", [], 204, [], true), ("GET", [], 300, [], true), ("GET", [], 301, [], true),
        ("GET", [], 308, [], true), ("GET", [], 404, [], true), ("GET", [], 405, [], true), ("GET", [], 410, [], true),
        ("GET", [], 414, [], true), ("GET", [], 501, [], true),
        ("GET", [], 302, [], false), ("GET", [], 307, [], false), ("GET", [], 500, [], false),
        ("GET", [], 403, [], false),
        ("GET", [], 302, [("Cache-Control", "max-age=60")], true),
        ("GET", [], 500, [("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")], true),
        ("GET", [], 503, [("Cache-Control", "public")], true),
        ("GET", [], 302, [("Cache-Control", "s-maxage=60")], false),
        ("GET", [], 206, [("Cache-Control", "max-age=60")], false),
        ("GET", [], 304, [("Cache-Control", "max-age=60")], false),
        ("GET", [], 100, [], false),
        ("GET", [], 200, [("Vary", "Accept, *")], false),
    ]

    @Test("storability follows RFC 9111 §3 for a private cache")
    func storable() {
        for (method, requestFields, status, responseFields, expected) in Self.storability {
            var request = get("http://example.org/", requestFields)
            request.method = HTTPMethod(rawValue: method)
            #expect(
                HTTPCache.isStorable(head(status, responseFields), for: request) == expected,
                "\(method) \(requestFields) → \(status) \(responseFields)"
            )
        }
    }

    @Test("hop-by-hop fields are not stored; policy notAllowed and memory-only are honoured")
    func storedFields() throws {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let request = get("http://example.org/x")
        let response = head(
            200,
            [
                ("Cache-Control", "max-age=60"), ("Connection", "close, X-Hop"), ("X-Hop", "1"),
                ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("X-Kept", "yes"),
            ]
        )
        var cached = try #require(
            HTTPCache.cacheableResponse(response, body: [1, 2, 3], for: request, requestTime: t0, responseTime: t0)
        )
        #expect(cached.head.headers.map(\.name) == ["Cache-Control", "X-Kept"])
        cached.storagePolicy = .notAllowed
        #expect(!cache.store(cached, for: request))
        #expect(cache.lookup(request, now: t0).isMiss)
        cached.storagePolicy = .allowed
        cached.userInfo = ["k": "v"]
        #expect(cache.store(cached, for: request))
        let hit = try #require(cache.lookup(request, now: at(1)).response)
        #expect(hit.body == [1, 2, 3] && hit.userInfo == ["k": "v"] && hit.head.headers["X-Kept"] == "yes")
        #expect(
            !cache.store(
                head(200, [("Cache-Control", "no-store")]),
                body: [],
                for: request,
                requestTime: t0,
                responseTime: t0
            )
        )
        #expect(cache.lookup(request, now: at(1)).isFresh, "refusing a new response leaves the old one")
    }

    // MARK: - Lookup

    @Test("fresh, stale with validators, and miss; Age is set on what is served")
    func lookupStates() throws {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let request = get("http://example.org/page#frag")
        #expect(cache.lookup(request, now: t0).isMiss)
        #expect(
            cache.store(
                head(
                    200,
                    [
                        ("Date", HTTPDate.format(t0)), ("Cache-Control", "max-age=100"), ("ETag", #""v1""#),
                        ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Age", "3"),
                    ]
                ),
                body: body(10),
                for: request,
                requestTime: t0,
                responseTime: t0
            )
        )
        let fresh = cache.lookup(get("http://example.org/page"), now: at(40))
        #expect(fresh.isFresh, "the fragment is not part of the key")
        #expect(fresh.response?.head.headers.values(for: "Age") == ["43"])
        let stale = cache.lookup(request, now: at(97))
        #expect(!stale.isFresh && !stale.isMiss)
        let conditional = try #require(stale.conditional)
        #expect(conditional["If-None-Match"] == #""v1""#)
        #expect(conditional["If-Modified-Since"] == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(
            cache.lookup(get("HTTP://EXAMPLE.org:80/page"), now: at(40)).isFresh,
            "scheme and host case, default port"
        )
        #expect(cache.lookup(get("http://example.org:8080/page"), now: at(40)).isMiss)
        #expect(cache.lookup(get("http://example.org/other"), now: at(1)).isMiss)
        var post = request
        post.method = .post
        #expect(cache.lookup(post, now: at(1)).isMiss)
    }

    @Test("request and response directives decide between serving and validating")
    func directives() {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        func stored(_ path: String, _ cc: String) -> String {
            let url = "http://example.org/" + path
            cache.store(
                head(200, [("Date", HTTPDate.format(t0)), ("Cache-Control", cc), ("ETag", #""e""#)]),
                body: [],
                for: get(url),
                requestTime: t0,
                responseTime: t0
            )
            return url
        }
        let plain = stored("plain", "max-age=100")
        let noCache = stored("no-cache", "max-age=100, no-cache")
        let mustRevalidate = stored("must", "max-age=100, must-revalidate")
        #expect(cache.lookup(get(plain), now: at(50)).isFresh)
        #expect(!cache.lookup(get(noCache), now: at(1)).isFresh)
        #expect(!cache.lookup(get(plain, [("Cache-Control", "no-cache")]), now: at(1)).isFresh)
        #expect(!cache.lookup(get(plain, [("Pragma", "no-cache")]), now: at(1)).isFresh)
        #expect(
            cache.lookup(get(plain, [("Pragma", "no-cache"), ("Cache-Control", "max-age=90")]), now: at(1)).isFresh,
            "Pragma is ignored when Cache-Control is present"
        )
        #expect(!cache.lookup(get(plain, [("Cache-Control", "max-age=30")]), now: at(50)).isFresh)
        #expect(cache.lookup(get(plain, [("Cache-Control", "max-age=60")]), now: at(50)).isFresh)
        #expect(!cache.lookup(get(plain, [("Cache-Control", "min-fresh=60")]), now: at(50)).isFresh)
        #expect(cache.lookup(get(plain, [("Cache-Control", "min-fresh=40")]), now: at(50)).isFresh)
        #expect(cache.lookup(get(plain, [("Cache-Control", "max-stale=20")]), now: at(115)).isFresh)
        #expect(!cache.lookup(get(plain, [("Cache-Control", "max-stale=10")]), now: at(115)).isFresh)
        #expect(cache.lookup(get(plain, [("Cache-Control", "max-stale")]), now: at(100_000)).isFresh)
        #expect(!cache.lookup(get(mustRevalidate, [("Cache-Control", "max-stale")]), now: at(115)).isFresh)
    }

    @Test("cache policies: reload ignores the cache, return-cache-data ignores freshness")
    func policies() {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let request = get("http://example.org/p")
        cache.store(
            head(200, [("Cache-Control", "max-age=10")]),
            body: [7],
            for: request,
            requestTime: t0,
            responseTime: t0
        )
        #expect(cache.lookup(request, policy: .reloadIgnoringLocalCacheData, now: t0).isMiss)
        #expect(!cache.lookup(request, now: at(100)).isFresh)
        #expect(cache.lookup(request, policy: .returnCacheDataElseLoad, now: at(100)).isFresh)
        #expect(cache.lookup(request, policy: .returnCacheDataDontLoad, now: at(100)).isFresh)
        var withPolicy = request
        withPolicy.cachePolicy = .reloadIgnoringLocalCacheData
        #expect(cache.lookup(withPolicy, now: t0).isMiss)
        #expect(cache.cachedResponse(for: request)?.body == [7])
        #expect(cache.lookup(get("http://example.org/none"), policy: .returnCacheDataDontLoad, now: t0).isMiss)
    }

    // MARK: - Vary (§4.1)

    @Test("Vary selects by the stored request headers, normalized; variants co-exist")
    func vary() {
        let cache = HTTPCache(memoryCapacity: 1 << 20)
        let url = "http://example.org/v"
        let response = head(200, [("Cache-Control", "max-age=100"), ("Vary", "Accept-Encoding, accept-language")])
        #expect(
            cache.store(
                response,
                body: [1],
                for: get(url, [("Accept-Encoding", "gzip,  br"), ("Accept-Language", "en")]),
                requestTime: t0,
                responseTime: t0
            )
        )
        #expect(
            cache.lookup(get(url, [("accept-encoding", "gzip, br"), ("Accept-Language", "en")]), now: at(1)).response?
                .body == [1]
        )
        #expect(
            cache.lookup(
                get(url, [("Accept-Encoding", "gzip"), ("Accept-Encoding", "br"), ("Accept-Language", "en")]),
                now: at(1)
            ).isFresh,
            "several field lines combine"
        )
        #expect(cache.lookup(get(url, [("Accept-Encoding", "br"), ("Accept-Language", "en")]), now: at(1)).isMiss)
        #expect(cache.lookup(get(url, [("Accept-Language", "en")]), now: at(1)).isMiss, "absent only matches absent")
        #expect(
            cache.store(
                response,
                body: [2],
                for: get(url, [("Accept-Language", "en")]),
                requestTime: t0,
                responseTime: t0
            )
        )
        #expect(cache.lookup(get(url, [("Accept-Language", "en")]), now: at(1)).response?.body == [2])
        #expect(
            cache.lookup(get(url, [("Accept-Encoding", "gzip, br"), ("Accept-Language", "en")]), now: at(1)).response?
                .body == [1]
        )
        #expect(
            !cache.store(
                head(200, [("Cache-Control", "max-age=100"), ("Vary", "*")]),
                body: [3],
                for: get(url),
                requestTime: t0,
                responseTime: t0
            )
        )
    }
}
