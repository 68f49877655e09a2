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

@Suite("Cookies")
struct CookieTests {
    // MARK: Parsing (RFC 6265 §5.2)

    struct ParseCase: Sendable, CustomTestStringConvertible {
        let header: String
        let name: String, value: String
        var domain: String? = nil, path: String? = nil, maxAge: Int64? = nil, expires: Int64? = nil
        var secure = false, httpOnly = false, sameSite = Cookie.SameSite.unspecified
        var testDescription: String { self.header }
    }

    @Test(
        "Set-Cookie parsing",
        arguments: [
            // RFC 6265 §3.1 examples
            ParseCase(header: "SID=31d4d96e407aad42", name: "SID", value: "31d4d96e407aad42"),
            ParseCase(
                header: "SID=31d4d96e407aad42; Path=/; Domain=example.com",
                name: "SID",
                value: "31d4d96e407aad42",
                domain: "example.com",
                path: "/"
            ),
            ParseCase(
                header: "SID=31d4d96e407aad42; Path=/; Secure; HttpOnly",
                name: "SID",
                value: "31d4d96e407aad42",
                path: "/",
                secure: true,
                httpOnly: true
            ),
            ParseCase(
                header: "lang=en-US; Path=/; Domain=example.com",
                name: "lang",
                value: "en-US",
                domain: "example.com",
                path: "/"
            ),
            ParseCase(
                header: "lang=en-US; Expires=Wed, 09 Jun 2021 10:18:14 GMT",
                name: "lang",
                value: "en-US",
                expires: 1_623_233_894
            ),
            ParseCase(
                header: "lang=; Expires=Sun, 06 Nov 1994 08:49:37 GMT",
                name: "lang",
                value: "",
                expires: 784_111_777
            ),
            // Whitespace, case, quotes, '=' in the value
            ParseCase(header: "  a  =  b c  ;  PATH = /x ;SECURE", name: "a", value: "b c", path: "/x", secure: true),
            ParseCase(header: #"q="quoted value"; hTtPoNlY"#, name: "q", value: #""quoted value""#, httpOnly: true),
            ParseCase(header: "k=v=w==; Domain=.Example.COM", name: "k", value: "v=w==", domain: "example.com"),
            // Attribute rules: empty Domain ignored, Path must start with '/', last one wins, unknown ignored
            ParseCase(header: "a=1; Domain=; Path=rel", name: "a", value: "1"),
            ParseCase(
                header: "a=1; Domain=a.example; Domain=b.example; Path=/1; Path=/2",
                name: "a",
                value: "1",
                domain: "b.example",
                path: "/2"
            ),
            ParseCase(header: "a=1; Path=/1; Path=nope", name: "a", value: "1"),
            ParseCase(header: "a=1; Priority=High; Partitioned; Foo=bar; =x", name: "a", value: "1"),
            // Max-Age: digits with an optional '-', else ignored; last valid wins
            ParseCase(header: "a=1; Max-Age=60", name: "a", value: "1", maxAge: 60),
            ParseCase(header: "a=1; Max-Age=-5", name: "a", value: "1", maxAge: -5),
            ParseCase(header: "a=1; Max-Age=+5", name: "a", value: "1"),
            ParseCase(header: "a=1; Max-Age=5s; max-age=7; Max-Age=", name: "a", value: "1", maxAge: 7),
            ParseCase(header: "a=1; Max-Age=99999999999999999999999", name: "a", value: "1", maxAge: Int64.max / 10),
            // Expires that fails the date algorithm is ignored
            ParseCase(header: "a=1; Expires=tomorrow", name: "a", value: "1"),
            // SameSite
            ParseCase(header: "a=1; SameSite=Strict", name: "a", value: "1", sameSite: .strict),
            ParseCase(header: "a=1; samesite=lax", name: "a", value: "1", sameSite: .lax),
            ParseCase(header: "a=1; SameSite=None; Secure", name: "a", value: "1", secure: true, sameSite: .none),
            ParseCase(header: "a=1; SameSite=Sometimes", name: "a", value: "1"),
            // An over-long attribute value (> 1024 bytes) is ignored, the cookie is kept
            ParseCase(header: "a=1; Path=/" + String(repeating: "p", count: 1024), name: "a", value: "1"),
            ParseCase(
                header: "a=1; Path=/" + String(repeating: "p", count: 1023),
                name: "a",
                value: "1",
                path: "/" + String(repeating: "p", count: 1023)
            ),
        ]
    )
    func parse(_ c: ParseCase) throws {
        let sc = try #require(SetCookie(c.header))
        #expect(sc.name == c.name)
        #expect(sc.value == c.value)
        #expect(sc.domain == c.domain)
        #expect(sc.path == c.path)
        #expect(sc.maxAge == c.maxAge)
        #expect(sc.expires.map { Int64($0.timeIntervalSince1970) } == c.expires)
        #expect(sc.isSecure == c.secure)
        #expect(sc.isHTTPOnly == c.httpOnly)
        #expect(sc.sameSite == c.sameSite)
    }

    @Test(
        "Set-Cookie fields RFC 6265 says to ignore",
        arguments: [
            "", "novalue", "=value", " =value", ";a=b", "a\u{01}=b", "a=b\u{7F}", "a=b\u{0B}c; Path=/",
            "a=b; Path=/\u{1F}",
            "a\tb=c", "a=b\tc",
            String(repeating: "n", count: 2000) + "=" + String(repeating: "v", count: 2097),
        ]
    )
    func ignored(_ header: String) {
        #expect(SetCookie(header) == nil)
        #expect(make(header, "http://example.com/") == .failure(.unparsable))
    }

    @Test("name plus value of exactly 4096 bytes is kept")
    func sizeLimit() throws {
        let header = String(repeating: "n", count: 2000) + "=" + String(repeating: "v", count: 2096)
        let sc = try #require(SetCookie(header))
        #expect(sc.name.utf8.count + sc.value.utf8.count == 4096)
    }

    // MARK: Dates (RFC 6265 §5.1.1)

    @Test(
        "cookie dates",
        arguments: [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),  // RFC 1123
            ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),  // RFC 850
            ("Sun Nov  6 08:49:37 1994", 784_111_777),  // asctime
            ("Thu, 01-Jan-1970 00:00:01 GMT", 1),
            ("Wed, 09 Jun 2021 10:18:14 GMT", 1_623_233_894),
            ("09 jun 2021 10:18:14", 1_623_233_894),
            ("2021 JUNE 9 10:18:14", 1_623_233_894),  // any order, month by its first three letters
            ("Wed, 09-Jun-21 10:18:14 UTC+5", 1_623_233_894),  // the zone is ignored
            ("1 Jan 2001 1:2:3", 978_310_923),
            ("Thu, 01 Jan 69 00:00:00 GMT", 3_124_224_000),  // 69 → 2069
            ("Thu, 01 Jan 70 00:00:01 GMT", 1),  // 70 → 1970
            ("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400),
            ("Fri, 31 Dec 9999 23:59:59 GMT", 253_402_300_799),
            ("Mon, 01 Jan 1601 00:00:00 GMT", -11_644_473_600),
        ] as [(String, Int64)]
    )
    func dates(_ text: String, _ epoch: Int64) throws {
        let d = try #require(CookieDate.parse(text))
        #expect(Int64(d.timeIntervalSince1970) == epoch)
    }

    @Test(
        "cookie dates the algorithm refuses",
        arguments: [
            "", "tomorrow", "Sun, 06 Nov 1994", "06 Nov 1994 08:49", "Sun, 06 Nov 1600 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT", "Thu, 29 Feb 2001 00:00:00 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nox 1994 08:49:37 GMT", "Sun, 06 Nov 19945 08:49:37 GMT", "Sun, 06 Nov 1994 008:49:37 GMT",
        ]
    )
    func badDates(_ text: String) {
        #expect(CookieDate.parse(text) == nil)
    }

    // MARK: Matching (RFC 6265 §5.1.3, §5.1.4)

    @Test(
        "domain-match",
        arguments: [
            ("example.com", "example.com", true), ("www.example.com", "example.com", true),
            ("a.b.example.com", "example.com", true),
            ("example.com", "www.example.com", false), ("wwwexample.com", "example.com", false),
            ("example.com", "com", true),
            ("example.com", "", false), ("1.2.3.4", "1.2.3.4", true), ("1.2.3.4", "2.3.4", false), ("::1", "::1", true),
            ("example.comm", "example.com", false),
        ]
    )
    func domainMatch(_ host: String, _ domain: String, _ expected: Bool) {
        #expect(CookieRules.domainMatches(host, domain) == expected)
    }

    @Test(
        "path-match",
        arguments: [
            ("/", "/", true), ("/foo", "/foo", true), ("/foo/bar", "/foo", true), ("/foobar", "/foo", false),
            ("/foo/", "/foo/", true), ("/foo/bar", "/foo/", true), ("/", "/foo", false), ("/fo", "/foo", false),
            ("/foo", "/", true), ("/FOO", "/foo", false),
        ]
    )
    func pathMatch(_ path: String, _ cookiePath: String, _ expected: Bool) {
        #expect(CookieRules.pathMatches(path, cookiePath) == expected)
    }

    @Test(
        "default-path",
        arguments: [
            ("", "/"), ("/", "/"), ("/foo", "/"), ("/foo/bar", "/foo"), ("/foo/bar/", "/foo/bar"), ("foo", "/"),
            ("/a/b/c.html", "/a/b"),
        ]
    )
    func defaultPath(_ path: String, _ expected: String) {
        #expect(CookieRules.defaultPath(path) == expected)
    }

    @Test(
        "secure origins: https, wss and loopback http",
        arguments: [
            ("https://example.com/", true), ("wss://example.com/", true), ("http://example.com/", false),
            ("http://localhost:8080/", true), ("http://LocalHost/", true), ("http://app.localhost/", true),
            ("http://127.0.0.1/", true),
            ("http://127.1.2.3:9/", true), ("http://[::1]:80/", true), ("http://10.0.0.1/", false),
            ("http://localhost.example.com/", false),
        ]
    )
    func secureOrigin(_ u: String, _ expected: Bool) {
        #expect(CookieRules.isSecureOrigin(url(u)) == expected)
    }

    // MARK: Storage model (RFC 6265 §5.3)

    @Test("host-only without Domain; domain cookie with it; default path from the request")
    func hostOnlyAndDomain() throws {
        let hostOnly = try make("a=1", "http://www.Example.com/docs/page.html").get()
        #expect(hostOnly.domain == "www.example.com" && hostOnly.isHostOnly && hostOnly.path == "/docs")
        #expect(hostOnly.isSessionCookie)
        let domain = try make("a=1; Domain=example.com; Path=/", "http://www.example.com/").get()
        #expect(domain.domain == "example.com" && !domain.isHostOnly)

        let jar = CookieJar()
        jar.setCookie(fromSetCookie: "host=1", for: url("http://www.example.com/"), now: now)
        jar.setCookie(fromSetCookie: "dom=2; Domain=example.com", for: url("http://www.example.com/"), now: now)
        #expect(jar.cookieHeaderValue(for: url("http://www.example.com/x"), now: now) == "host=1; dom=2")
        #expect(jar.cookieHeaderValue(for: url("http://sub.www.example.com/"), now: now) == "dom=2")
        #expect(jar.cookieHeaderValue(for: url("http://example.com/"), now: now) == "dom=2")
        #expect(jar.cookieHeaderValue(for: url("http://other.com/"), now: now) == nil)
    }

    @Test("a Domain the host does not domain-match is refused")
    func domainMismatch() {
        #expect(make("a=1; Domain=other.com", "http://www.example.com/") == .failure(.domainMismatch("other.com")))
        #expect(
            make("a=1; Domain=www.example.com", "http://example.com/") == .failure(.domainMismatch("www.example.com"))
        )
        #expect(make("a=1; Domain=2.3.4", "http://1.2.3.4/") == .failure(.domainMismatch("2.3.4")))
        #expect(make("a=1", "file:///tmp/x") == .failure(.noHost))
    }

    @Test(
        "a host with an empty label stores nothing; one trailing dot is the same host",
        arguments: [
            "http://.example.com/", "http://a..example.com/", "http://example.com../",
        ]
    )
    func hostWithEmptyLabel(_ u: String) throws {
        // Canonicalizing ".example.com" would store a cookie for example.com.
        #expect(make("a=1", u) == .failure(.noHost))
        #expect(CookieJar().cookies(for: url(u), now: now).isEmpty)
        #expect(try make("a=1", "http://www.example.com./").get().domain == "www.example.com")
    }

    @Test(
        "cookies for public suffixes are refused",
        arguments: [
            ("a=1; Domain=com", "http://example.com/", "com"),
            ("a=1; Domain=.COM", "http://www.example.com/", "com"),
            ("a=1; Domain=co.uk", "http://shop.co.uk/", "co.uk"),
            ("a=1; Domain=com.au", "http://x.com.au/", "com.au"),
            ("a=1; Domain=github.io", "http://alice.github.io/", "github.io"),
            ("a=1; Domain=local", "http://printer.local/", "local"),
        ]
    )
    func publicSuffix(_ header: String, _ from: String, _ suffix: String) {
        #expect(make(header, from) == .failure(.publicSuffix(suffix)))
    }

    @Test("a public suffix may set a host-only cookie on itself; registrable domains are fine")
    func publicSuffixHostItself() throws {
        let c = try make("a=1; Domain=github.io", "https://github.io/").get()
        #expect(c.isHostOnly && c.domain == "github.io")
        #expect(try make("a=1; Domain=example.co.uk", "http://www.example.co.uk/").get().domain == "example.co.uk")
        #expect(try make("a=1; Domain=alice.github.io", "http://alice.github.io/").get().isHostOnly == false)
        #expect(PublicSuffixes.isPublicSuffix("uk") && !PublicSuffixes.isPublicSuffix("example.com"))
        #expect(!PublicSuffixes.isPublicSuffix("127.0.0.1"))
    }

    @Test(
        "RFC 6265 §5.3 step 5: a Domain that is a public suffix is refused, by every kind of rule",
        arguments: [
            ("a=1; Domain=nom.es", "http://a.nom.es/", "nom.es"),  // multi-label, under es
            ("a=1; Domain=.NOM.ES", "http://b.a.nom.es/", "nom.es"),
            ("a=1; Domain=foo.ck", "http://a.foo.ck/", "foo.ck"),  // *.ck
            ("a=1; Domain=x.kawasaki.jp", "http://a.x.kawasaki.jp/", "x.kawasaki.jp"),  // *.kawasaki.jp
            ("a=1; Domain=kawasaki.jp", "http://www.city.kawasaki.jp/", "kawasaki.jp"),  // ... and its parent
            ("a=1; Domain=ck", "http://www.ck/", "ck"),  // !www.ck: its parent
            ("a=1; Domain=blogspot.com", "http://alice.blogspot.com/", "blogspot.com"),  // PRIVATE
            (
                "a=1; Domain=us-east-1.compute.amazonaws.com", "http://ec2-1-2-3-4.us-east-1.compute.amazonaws.com/",
                "us-east-1.compute.amazonaws.com"
            ),  // PRIVATE wildcard
            ("a=1; Domain=zzzunlisted", "http://www.example.zzzunlisted/", "zzzunlisted"),  // implicit "*"
            ("a=1; Domain=公司.cn", "http://食狮.公司.cn/", "公司.cn"),  // IDN, Unicode
            ("a=1; Domain=xn--55qx5d.cn", "http://xn--85x722f.xn--55qx5d.cn/", "xn--55qx5d.cn"),  // IDN, A-labels
        ]
    )
    func publicSuffixEveryRuleKind(_ header: String, _ from: String, _ suffix: String) {
        #expect(make(header, from) == .failure(.publicSuffix(suffix)))
    }

    @Test("RFC 6265 §5.3 step 5: a site under nom.es cannot set a cookie for every site under it")
    func publicSuffixNomEs() throws {
        let jar = CookieJar()
        #expect(
            jar.setCookie(fromSetCookie: "id=evil; Domain=nom.es", for: url("http://a.nom.es/"), now: now)
                == .failure(.publicSuffix("nom.es"))
        )
        // Its own registrable domain is fine, and reaches only its own subdomains.
        let own = try jar.setCookie(
            fromSetCookie: "id=own; Domain=a.nom.es",
            for: url("http://www.a.nom.es/"),
            now: now
        ).get()
        #expect(own.domain == "a.nom.es" && !own.isHostOnly)
        #expect(jar.cookieHeaderValue(for: url("http://b.nom.es/"), now: now) == nil)
        #expect(jar.cookieHeaderValue(for: url("http://x.a.nom.es/"), now: now) == "id=own")
        // The suffix itself may set a cookie on itself: host-only, so never sent below it.
        let itself = try jar.setCookie(fromSetCookie: "s=1; Domain=nom.es", for: url("http://nom.es/"), now: now).get()
        #expect(itself.isHostOnly && itself.domain == "nom.es")
        #expect(jar.cookieHeaderValue(for: url("http://nom.es/"), now: now) == "s=1")
        #expect(jar.cookieHeaderValue(for: url("http://b.nom.es/"), now: now) == nil)
        // An exception rule's name is registrable: www.ck may share cookies with its subdomains.
        #expect(try make("a=1; Domain=www.ck", "http://a.www.ck/").get().isHostOnly == false)
        // A cookie file's domain line for a public suffix is skipped, as curl skips it.
        let loaded = CookieJar()
        loaded.load(netscapeText: ".nom.es\tTRUE\t/\tFALSE\t0\tn\tv\n.a.nom.es\tTRUE\t/\tFALSE\t0\tm\tw\n", now: now)
        #expect(loaded.allCookies.map(\.domain) == ["a.nom.es"])
    }

    @Test("Secure: only from a secure origin, only sent to one")
    func secure() throws {
        #expect(make("s=1; Secure", "http://example.com/") == .failure(.secureFromInsecureOrigin))
        let jar = CookieJar()
        #expect(
            (try? jar.setCookie(fromSetCookie: "s=1; Secure", for: url("https://example.com/"), now: now).get()) != nil
        )
        jar.setCookie(fromSetCookie: "p=2", for: url("https://example.com/"), now: now)
        #expect(jar.cookieHeaderValue(for: url("https://example.com/"), now: now) == "s=1; p=2")
        #expect(jar.cookieHeaderValue(for: url("http://example.com/"), now: now) == "p=2")
        // Loopback http counts as secure, as in browsers and curl.
        #expect(
            (try? jar.setCookie(fromSetCookie: "l=3; Secure", for: url("http://localhost:8080/"), now: now).get())
                != nil
        )
        #expect(jar.cookieHeaderValue(for: url("http://localhost:9/"), now: now) == "l=3")
    }

    @Test("an insecure origin cannot overwrite or shadow a Secure cookie (RFC 6265bis)")
    func noInsecureOverwrite() throws {
        let jar = CookieJar()
        jar.setCookie(
            fromSetCookie: "id=secret; Secure; Domain=example.com; Path=/",
            for: url("https://www.example.com/"),
            now: now
        )
        #expect(
            jar.setCookie(fromSetCookie: "id=evil", for: url("http://www.example.com/"), now: now)
                == .failure(.wouldOverwriteSecure)
        )
        #expect(
            jar.setCookie(fromSetCookie: "id=evil; Path=/deeper", for: url("http://example.com/"), now: now)
                == .failure(.wouldOverwriteSecure)
        )
        // Another name is fine; so is overwriting from https.
        #expect(
            (try? jar.setCookie(fromSetCookie: "other=1", for: url("http://www.example.com/"), now: now).get()) != nil
        )
        #expect(
            (try? jar.setCookie(
                fromSetCookie: "id=new; Secure; Domain=example.com; Path=/",
                for: url("https://example.com/"),
                now: now
            ).get()) != nil
        )
        #expect(jar.cookieHeaderValue(for: url("https://example.com/"), now: now) == "id=new")
    }

    @Test("__Secure- and __Host- prefixes demand their attributes")
    func prefixes() {
        #expect(make("__Secure-a=1", "https://example.com/") == .failure(.namePrefix("__Secure-")))
        #expect((try? make("__Secure-a=1; Secure", "https://example.com/").get()) != nil)
        #expect(
            make("__Host-a=1; Secure; Path=/; Domain=example.com", "https://example.com/")
                == .failure(.namePrefix("__Host-"))
        )
        #expect(make("__Host-a=1; Secure; Path=/x", "https://example.com/x") == .failure(.namePrefix("__Host-")))
        #expect((try? make("__Host-a=1; Secure; Path=/", "https://example.com/").get()) != nil)
    }

    @Test("HttpOnly is stored and the cookie is still sent over HTTP")
    func httpOnly() throws {
        let jar = CookieJar()
        let c = try jar.setCookie(fromSetCookie: "h=1; HttpOnly", for: url("http://example.com/"), now: now).get()
        #expect(c.isHTTPOnly)
        #expect(jar.cookieHeaderValue(for: url("http://example.com/"), now: now) == "h=1")
    }

    @Test("replacing keeps the creation time; order is longer path first, then older first")
    func replaceAndOrder() throws {
        let jar = CookieJar()
        let u = url("http://example.com/a/b/c")
        jar.setCookie(fromSetCookie: "x=1; Path=/", for: u, now: now)
        jar.setCookie(fromSetCookie: "y=1; Path=/a/b", for: u, now: now.addingTimeInterval(1))
        jar.setCookie(fromSetCookie: "z=1; Path=/", for: u, now: now.addingTimeInterval(2))
        jar.setCookie(fromSetCookie: "w=1; Path=/a", for: u, now: now.addingTimeInterval(3))
        #expect(jar.cookieHeaderValue(for: u, now: now.addingTimeInterval(4)) == "y=1; w=1; x=1; z=1")
        // Replacing x keeps its place (creation time) and changes the value.
        let replaced = try jar.setCookie(fromSetCookie: "x=2; Path=/", for: u, now: now.addingTimeInterval(5)).get()
        #expect(replaced.creationTime == now)
        #expect(jar.cookieHeaderValue(for: u, now: now.addingTimeInterval(6)) == "y=1; w=1; x=2; z=1")
        #expect(jar.count == 4)
        // Same name, other path: a different cookie.
        jar.setCookie(fromSetCookie: "x=3; Path=/a", for: u, now: now.addingTimeInterval(7))
        #expect(jar.count == 5)
        #expect(
            jar.cookieHeaderValue(for: url("http://example.com/other"), now: now.addingTimeInterval(8)) == "x=2; z=1"
        )
    }

    @Test("expiry by Max-Age and Expires; Max-Age wins; 0 or the past deletes; 400-day cap")
    func expiry() throws {
        let u = url("http://example.com/")
        let jar = CookieJar()
        jar.setCookie(fromSetCookie: "m=1; Max-Age=10", for: u, now: now)
        #expect(jar.cookieHeaderValue(for: u, now: now.addingTimeInterval(9)) == "m=1")
        #expect(jar.cookieHeaderValue(for: u, now: now.addingTimeInterval(10)) == nil)
        #expect(jar.count == 0)  // the expired cookie met on the way was removed

        let future = "Wed, 01 Jan 2025 00:00:00 GMT"  // after `now` (Nov 2023)
        let a = try make("a=1; Max-Age=60; Expires=\(future)", "http://example.com/").get()
        let b = try make("a=1; Expires=\(future); Max-Age=60", "http://example.com/").get()
        #expect(a.expires == now.addingTimeInterval(60) && b.expires == now.addingTimeInterval(60))
        let e = try make("a=1; Expires=Thu, 16 Nov 2023 00:00:00 GMT", "http://example.com/").get()
        #expect(Int64(e.expires!.timeIntervalSince1970) == 1_700_092_800)
        let capped = try make("a=1; Max-Age=999999999", "http://example.com/").get()
        #expect(capped.expires == now.addingTimeInterval(400 * 86_400))
        let cappedDate = try make("a=1; Expires=Fri, 31 Dec 9999 23:59:59 GMT", "http://example.com/").get()
        #expect(cappedDate.expires == now.addingTimeInterval(400 * 86_400))

        jar.setCookie(fromSetCookie: "d=1", for: u, now: now)
        jar.setCookie(fromSetCookie: "d=1; Max-Age=0", for: u, now: now)
        #expect(jar.count == 0)
        jar.setCookie(fromSetCookie: "d=1", for: u, now: now)
        jar.setCookie(fromSetCookie: "d=; Expires=Thu, 01 Jan 1970 00:00:01 GMT", for: u, now: now)
        #expect(jar.count == 0)

        jar.setCookie(fromSetCookie: "p=1; Max-Age=5", for: u, now: now)
        jar.setCookie(fromSetCookie: "s=1", for: u, now: now)
        jar.removeExpired(now: now.addingTimeInterval(6))
        #expect(jar.allCookies.map(\.name) == ["s"])
        jar.removeSessionCookies()
        #expect(jar.count == 0)
    }

    @Test("per-domain limit evicts the least recently used")
    func perDomainEviction() {
        let jar = CookieJar(maxCookiesPerDomain: 50, maxCookies: 3000)
        let u = url("http://example.com/")
        // Distinct paths, so a request to /p0 uses c0 alone; then c1 is the least recently used.
        for i in 0..<50 { jar.setCookie(fromSetCookie: "c\(i)=\(i); Path=/p\(i)", for: u, now: now) }
        #expect(jar.cookieHeaderValue(for: url("http://example.com/p0"), now: now) == "c0=0")
        jar.setCookie(fromSetCookie: "new=1", for: u, now: now)
        let names = Set(jar.allCookies.map(\.name))
        #expect(jar.count == 50)
        #expect(names.contains("new") && names.contains("c0"))
        #expect(!names.contains("c1"))
        // Other domains are not touched by one domain's limit.
        jar.setCookie(fromSetCookie: "o=1", for: url("http://other.example/"), now: now)
        #expect(jar.count == 51)
    }

    @Test("total limit evicts expired cookies first, then the least recently used")
    func totalEviction() {
        let jar = CookieJar(maxCookiesPerDomain: 50, maxCookies: 5)
        for i in 0..<4 { jar.setCookie(fromSetCookie: "c=\(i)", for: url("http://h\(i).example/"), now: now) }
        jar.setCookie(fromSetCookie: "short=1; Max-Age=1", for: url("http://h9.example/"), now: now)
        #expect(jar.count == 5)
        let later = now.addingTimeInterval(2)
        _ = jar.cookieHeaderValue(for: url("http://h0.example/"), now: later)  // h0 is now recently used
        jar.setCookie(fromSetCookie: "c=5", for: url("http://h5.example/"), now: later)
        #expect(jar.count == 5)
        #expect(!jar.allCookies.contains { $0.name == "short" })  // the expired one went first
        jar.setCookie(fromSetCookie: "c=6", for: url("http://h6.example/"), now: later)
        let domains = Set(jar.allCookies.map(\.domain))
        #expect(jar.count == 5)
        // H1 was least recently used.
        #expect(domains == ["h0.example", "h2.example", "h3.example", "h5.example", "h6.example"])
    }

    @Test("setCookie, deleteCookie, removeAll, allCookies by hand")
    func manual() {
        let jar = CookieJar()
        let c = Cookie(name: "n", value: "v", domain: ".Example.com", path: "/", isHostOnly: false, creationTime: now)
        #expect(c.domain == "example.com")
        jar.setCookie(c, now: now)
        #expect(jar.cookies(for: url("http://a.example.com/"), now: now).map(\.name) == ["n"])
        jar.deleteCookie(c)
        #expect(jar.allCookies.isEmpty)
        jar.setCookie(c, now: now)
        jar.removeAll()
        #expect(jar.count == 0)
    }

    @Test("setCookies(fromResponseHeaders:) stores each Set-Cookie field")
    func fromHeaders() {
        var h = HTTPHeaders()
        h.add(name: "Set-Cookie", value: "a=1")
        h.add(name: "Content-Type", value: "text/plain")
        // One cookie: commas are not separators.
        h.add(name: "set-cookie", value: "b=2; Expires=Wed, 09 Jun 2021 10:18:14 GMT, c=3")
        h.add(name: "Set-Cookie", value: "bad")
        let jar = CookieJar()
        jar.setCookies(
            fromResponseHeaders: h,
            for: url("http://example.com/"),
            now: Date(timeIntervalSince1970: 1_600_000_000)
        )
        #expect(jar.allCookies.map(\.name) == ["a", "b"])
    }

    @Test("the jar is safe to use from many threads")
    func concurrency() async {
        let jar = CookieJar(maxCookiesPerDomain: 1000, maxCookies: 100_000)
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    for i in 0..<200 {
                        jar.setCookie(fromSetCookie: "c\(i)=\(t)", for: url("http://t\(t).example/"), now: now)
                        _ = jar.cookieHeaderValue(for: url("http://t\((t + 1) % 8).example/"), now: now)
                    }
                }
            }
        }
        #expect(jar.count == 8 * 200)
    }

    // MARK: Netscape cookie file

    /// What curl 7.88 writes with `-c` (fields as curl's cookie.c formats them).
    static let curlFile = """
        # Netscape HTTP Cookie File
        # https://curl.se/docs/http-cookies.html
        # This file was generated by libcurl! Edit at your own risk.

        #HttpOnly_.example.com\tTRUE\t/\tFALSE\t1800000000\tsid\tabc
        www.example.com\tFALSE\t/docs\tTRUE\t0\tsession\tx y
        .example.com\tTRUE\t/\tFALSE\t1600000000\told\tgone
        example.org\tFALSE\t/\tFALSE\t0\tempty\t
        example.net\tFALSE\t/\tFALSE\t0\tnotab

        """

    @Test("curl's file format reads as curl means it")
    func parseCurlFile() throws {
        let cookies = NetscapeCookieFile.parse(Self.curlFile, now: now)
        // "old" has expired; "notab" has six fields (curl reads that as an empty value).
        #expect(cookies.map(\.name) == ["sid", "session", "empty", "notab"])
        let sid = cookies[0]
        #expect(sid.domain == "example.com" && !sid.isHostOnly && sid.isHTTPOnly && !sid.isSecure)
        #expect(sid.expires == Date(timeIntervalSince1970: 1_800_000_000))
        let session = cookies[1]
        #expect(
            session.domain == "www.example.com" && session.isHostOnly && session.isSecure && session.isSessionCookie
        )
        #expect(session.path == "/docs" && session.value == "x y")
        #expect(cookies[2].value == "" && cookies[3].value == "")
    }

    @Test(
        "malformed lines are skipped",
        arguments: [
            "example.com\tFALSE\t/\tFALSE\tsoon\tn\tv",  // expiry not a number
            "example.com\tFALSE\t/\tFALSE\t0",  // too few fields
            "example.com\tFALSE\t/\tFALSE\t0\tn\tv\textra",  // too many
            "\tFALSE\t/\tFALSE\t0\tn\tv",  // no domain
            ".com\tTRUE\t/\tFALSE\t0\tn\tv",  // public suffix
            "example.com\tFALSE\t/\tFALSE\t0\tn\tv\u{01}",  // control character
            "# example.com\tFALSE\t/\tFALSE\t0\tn\tv",  // a comment
            "ex ample.com\tFALSE\t/\tFALSE\t0\tn\tv",  // not a host name
            "..example.com\tFALSE\t/\tFALSE\t0\tn\tv",  // would not read back the same
            "example.com..\tFALSE\t/\tFALSE\t0\tn\tv",  // trailing dots (found by FuzzCookieParser)
            ".example..com\tTRUE\t/\tFALSE\t0\tn\tv",  // an empty label
        ]
    )
    func malformedLines(_ line: String) {
        #expect(NetscapeCookieFile.parse(line + "\n", now: now).isEmpty)
    }

    @Test("a file with CRLF line ends reads like one with LF")
    func crlfFile() {
        // As Characters "\r\n" is one grapheme, not "\n": the lines are split on bytes.
        let crlf = Self.curlFile.replacingOccurrences(of: "\n", with: "\r\n")
        let strip = { (c: Cookie) in "\(c.name)=\(c.value) \(c.domain)\(c.path) \(c.isHostOnly) \(c.isHTTPOnly)" }
        #expect(
            NetscapeCookieFile.parse(crlf, now: now).map(strip)
                == NetscapeCookieFile.parse(Self.curlFile, now: now).map(strip)
        )
        #expect(NetscapeCookieFile.parse(crlf, now: now).count == 4)
    }

    @Test("a combining mark after a separator does not hide it (found by FuzzCookieParser)")
    func combiningMarks() {
        // ".\u{1DF7}" is one Character, but the dot is still the domain's leading dot.
        #expect(CookieRules.canonicalDomain(".\u{1DF7}x.example.com") == "\u{1DF7}x.example.com")
        let cookie = Cookie(
            name: "n",
            value: "v",
            domain: "\u{1DF7}x.example.com",
            path: "/",
            expires: nil,
            isSecure: false,
            isHTTPOnly: true,
            isHostOnly: false,
            creationTime: now
        )
        let text = NetscapeCookieFile.render([cookie])
        let back = NetscapeCookieFile.parse(text, now: now)
        #expect(
            back.map(\.domain) == ["\u{1DF7}x.example.com"] && back.first?.isHostOnly == false
                && back.first?.isHTTPOnly == true
        )
        // The same for a host-only HttpOnly cookie, whose domain follows "#HttpOnly_" directly.
        let hostOnly = Cookie(
            name: "n",
            value: "v",
            domain: "\u{301}x.example.com",
            path: "/",
            expires: nil,
            isSecure: false,
            isHTTPOnly: true,
            isHostOnly: true,
            creationTime: now
        )
        #expect(
            NetscapeCookieFile.parse(NetscapeCookieFile.render([hostOnly]), now: now).map(\.domain) == [
                "\u{301}x.example.com"
            ]
        )
        // Matching is by bytes too: "/\u{301}" starts with "/".
        #expect(CookieRules.pathMatches("/\u{301}a", "/"))
        #expect(CookieRules.domainMatches("a.\u{301}b.example.com", "\u{301}b.example.com"))
    }

    @Test("a cookie prefix followed by a combining mark is still the prefix")
    func prefixWithCombiningMark() {
        #expect(make("__Secure-\u{301}a=1", "https://example.com/") == .failure(.namePrefix("__Secure-")))
        #expect(make("__HOST-\u{301}a=1; Secure; Path=/x", "https://example.com/") == .failure(.namePrefix("__Host-")))
    }

    @Test("writing and reading back gives the same cookies, in creation order")
    func netscapeRoundTrip() throws {
        let jar = CookieJar()
        jar.setCookie(
            fromSetCookie: "sid=abc; Domain=example.com; HttpOnly; Max-Age=3600",
            for: url("https://www.example.com/"),
            now: now
        )
        jar.setCookie(
            fromSetCookie: "pref=dark mode; Secure; Path=/settings",
            for: url("https://www.example.com/"),
            now: now
        )
        jar.setCookie(fromSetCookie: "empty=", for: url("http://example.org/"), now: now)
        jar.setCookie(fromSetCookie: "lb=1", for: url("http://[::1]:8080/"), now: now)
        let text = jar.netscapeFileContents(now: now)
        #expect(text.hasPrefix("# Netscape HTTP Cookie File\n"))
        #expect(text.contains("#HttpOnly_.example.com\tTRUE\t/\tFALSE\t\(1_700_003_600)\tsid\tabc\n"))
        #expect(text.contains("\nwww.example.com\tFALSE\t/settings\tTRUE\t0\tpref\tdark mode\n"))
        #expect(text.contains("\nexample.org\tFALSE\t/\tFALSE\t0\tempty\t\n"))
        // Newest first, as curl writes.
        #expect(text.range(of: "\tlb\t")!.lowerBound < text.range(of: "\tsid\t")!.lowerBound)

        let back = CookieJar()
        back.load(netscapeText: text, now: now)
        let strip = { (c: Cookie) in
            [
                c.name, c.value, c.domain, c.path, "\(c.expires?.timeIntervalSince1970 ?? 0)", "\(c.isSecure)",
                "\(c.isHTTPOnly)", "\(c.isHostOnly)",
            ]
        }
        #expect(back.allCookies.map(strip) == jar.allCookies.map(strip))
    }

    @Test("save writes atomically with mode 0600 and loads back; a missing file is an error")
    func saveAndLoadFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hawser-cookies-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        )
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("jar.txt").path
        try "old contents".write(toFile: path, atomically: false, encoding: .utf8)

        let jar = CookieJar()
        jar.setCookie(fromSetCookie: "a=1; Max-Age=100", for: url("http://example.com/"), now: now)
        jar.setCookie(fromSetCookie: "b=2", for: url("http://example.com/"), now: now)
        try jar.save(toNetscapeFile: path, now: now)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["jar.txt"])  // no temporary left
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)

        let loaded = try CookieJar(contentsOfNetscapeFile: path, now: now)
        #expect(loaded.cookieHeaderValue(for: url("http://example.com/"), now: now) == "a=1; b=2")

        #expect(throws: HawserError.self) {
            try CookieJar(contentsOfNetscapeFile: dir.appendingPathComponent("missing").path)
        }
        do {
            try jar.save(toNetscapeFile: dir.appendingPathComponent("no/such/dir/jar").path)
            Issue.record("saving into a missing directory succeeded")
        } catch {
            #expect(error.code == .ioError)
        }
    }
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

// MARK: - Interop with the real curl, against the test server on loopback

/// Runs curl with `args`, its standard output to `stdoutPath`; returns the exit status.
private func runCurl(_ args: [String], stdoutPath: String) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv: [UnsafeMutablePointer<CChar>?] = (["curl"] + args).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, "curl", &actions, nil, argv, environ)
    guard rc == 0 else { throw HawserError(.ioError, "cannot start curl: \(rc)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status >> 8) & 0xFF
}

extension NetworkTests {
    @Suite("Cookie files shared with curl", .serialized)
    struct CurlCookieInteropTests {
        @Test("a file curl writes (-c) loads, and a file the jar writes is what curl sends (-b)")
        func curlInterop() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
                "hawser-curl-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            )
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out").path

            // 1. curl receives two cookies and writes its file; the jar reads it.
            let curlJar = dir.appendingPathComponent("curl.txt").path
            #expect(
                try runCurl(["-s", "-c", curlJar, "\(server.baseURL)/cookies/set?a=1&b=two"], stdoutPath: out) == 0
            )
            let jar = try CookieJar(contentsOfNetscapeFile: curlJar)
            #expect(jar.cookieHeaderValue(for: URL(string: "\(server.baseURL)/cookies")!) == "a=1; b=two")
            #expect(
                jar.allCookies.allSatisfy {
                    $0.domain == "127.0.0.1" && $0.isHostOnly && $0.isSessionCookie && $0.path == "/"
                }
            )

            // 2. The jar writes a file with a domain cookie, a host-only one, a persistent one,
            //    an HttpOnly one, a Secure one and one for another path; curl sends what applies.
            let host = "www.example.test"
            let origin = "http://\(host):\(server.port)"
            let mine = CookieJar()
            let setFrom = URL(string: "https://\(host)/")!
            mine.setCookie(fromSetCookie: "dom=1; Domain=example.test; Path=/", for: setFrom)
            mine.setCookie(fromSetCookie: "host=2; Path=/; Max-Age=3600", for: setFrom)
            mine.setCookie(fromSetCookie: "ho=3; Path=/; HttpOnly", for: setFrom)
            mine.setCookie(fromSetCookie: "sec=4; Path=/; Secure", for: setFrom)
            mine.setCookie(fromSetCookie: "deep=5; Path=/elsewhere", for: setFrom)
            let myFile = dir.appendingPathComponent("mine.txt").path
            try mine.save(toNetscapeFile: myFile)
            let resolve = "\(host):\(server.port):127.0.0.1"
            let curlOut = dir.appendingPathComponent("curl-out.txt").path
            #expect(
                try runCurl(
                    ["-s", "--resolve", resolve, "-b", myFile, "-c", curlOut, "\(origin)/cookies"],
                    stdoutPath: out
                ) == 0
            )
            let sent = try String(contentsOfFile: out, encoding: .utf8)
            // curl orders by path length, then (for equal paths) its own internal order: compare as sets.
            #expect(Set(sent.components(separatedBy: "; ")) == ["dom=1", "host=2", "ho=3"])
            #expect(mine.cookieHeaderValue(for: URL(string: "\(origin)/cookies")!) == "dom=1; host=2; ho=3")

            // 3. curl read our file and wrote it back (-c): the same cookies come back.
            let again = try CookieJar(contentsOfNetscapeFile: curlOut)
            let key = { (c: Cookie) in
                "\(c.name)=\(c.value) \(c.domain) \(c.path) \(Int64(c.expires?.timeIntervalSince1970 ?? 0)) \(c.isSecure) \(c.isHTTPOnly) \(c.isHostOnly)"
            }
            #expect(Set(again.allCookies.map(key)) == Set(mine.allCookies.map(key)))
        }
    }
}
