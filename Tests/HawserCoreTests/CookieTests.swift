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
}
