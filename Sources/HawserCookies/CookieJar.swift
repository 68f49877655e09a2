import HawserBase
import HawserHTTP1
import Synchronization

// The cookie jar: RFC 6265 §5.3 storage model and §5.4 Cookie header over CookieStore.swift's
// store, curl's cookie file (NetscapeCookieFile.swift) on disk.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// Why a `Set-Cookie` was not stored.
public enum CookieRejection: Error, Sendable, Hashable {
    /// RFC 6265 §5.2 says to ignore the field (no `=`, empty name, too long, control characters).
    case unparsable
    /// The request URL has no host.
    case noHost
    /// `Domain` names a public suffix (`com`, `co.uk`, `github.io`…) other than the host itself.
    case publicSuffix(String)
    /// The request host does not domain-match the `Domain` attribute.
    case domainMismatch(String)
    /// `Secure` from an origin that is not secure (RFC 6265bis).
    case secureFromInsecureOrigin
    /// A non-secure cookie from an insecure origin would shadow a stored Secure cookie (RFC 6265bis).
    case wouldOverwriteSecure
    /// A `__Secure-` or `__Host-` name without the attributes its prefix demands.
    case namePrefix(String)
}

extension Cookie {
    /// The longest a cookie may live: RFC 6265bis §5.5 caps Expires and Max-Age at 400 days.
    public static let maxLifetime: TimeInterval = 400 * 86_400

    /// The cookie a `Set-Cookie` field received from `url` creates (RFC 6265 §5.3 steps
    /// 1–10 with RFC 6265bis's secure-origin and prefix rules), or why it is refused.
    /// An already-expired cookie is returned as such: storing it deletes its namesake.
    public static func make(
        fromSetCookie header: String,
        for url: URL,
        now: Date = Date()
    ) -> Result<Cookie, CookieRejection> {
        guard let sc = SetCookie(header) else { return .failure(.unparsable) }
        return self.make(from: sc, for: url, now: now)
    }

    /// ``make(fromSetCookie:for:now:)`` for a field value given as the octets received
    /// (its name and value are kept byte for byte, UTF-8 or not).
    public static func make(
        fromSetCookieBytes header: [UInt8],
        for url: URL,
        now: Date = Date()
    ) -> Result<Cookie, CookieRejection> {
        guard let sc = SetCookie(bytes: header) else { return .failure(.unparsable) }
        return self.make(from: sc, for: url, now: now)
    }

    /// ``make(fromSetCookie:for:now:)`` for an already parsed field.
    public static func make(from sc: SetCookie, for url: URL, now: Date = Date()) -> Result<Cookie, CookieRejection> {
        guard let host = CookieRules.canonicalHost(url) else { return .failure(.noHost) }
        let secureOrigin = CookieRules.isSecureOrigin(url)

        var expires: Date?
        if let maxAge = sc.maxAge {
            expires = maxAge <= 0 ? .distantPast : now.addingTimeInterval(min(Double(maxAge), Self.maxLifetime))
        } else if let e = sc.expires {
            expires = min(e, now.addingTimeInterval(Self.maxLifetime))
        }

        var domain = sc.domain ?? ""
        if !domain.isEmpty && PublicSuffixes.isPublicSuffix(domain) {
            // §5.3 step 5: a host may set a cookie on itself even if it is a public suffix.
            guard domain == host else { return .failure(.publicSuffix(domain)) }
            domain = ""
        }
        let hostOnly: Bool
        if domain.isEmpty {
            hostOnly = true
            domain = host
        } else {
            guard CookieRules.domainMatches(host, domain) else { return .failure(.domainMismatch(domain)) }
            hostOnly = false
        }
        let path = sc.path ?? CookieRules.defaultPath(CookieRules.requestPath(url))

        if sc.isSecure && !secureOrigin { return .failure(.secureFromInsecureOrigin) }
        if CookieRules.hasPrefixIgnoringASCIICase(sc.nameBytes, "__secure-") && !sc.isSecure {
            return .failure(.namePrefix("__Secure-"))
        }
        if CookieRules.hasPrefixIgnoringASCIICase(sc.nameBytes, "__host-") && !(sc.isSecure && hostOnly && path == "/")
        {
            return .failure(.namePrefix("__Host-"))
        }

        return .success(
            Cookie(
                nameBytes: sc.nameBytes,
                valueBytes: sc.valueBytes,
                domain: domain,
                path: path,
                expires: expires,
                isSecure: sc.isSecure,
                isHTTPOnly: sc.isHTTPOnly,
                isHostOnly: hostOnly,
                sameSite: sc.sameSite,
                creationTime: now
            )
        )
    }
}

/// A thread-safe cookie store, the `HTTPCookieStorage` of Hawser (RFC 6265 §5.3, §5.4).
///
/// - Receiving: ``setCookies(fromResponseHeaders:for:now:)`` stores every `Set-Cookie`
///   of a response. A cookie replaces the one with the same name, domain and path, keeping
///   its creation time; one that has expired deletes it. Refused: cookies for a public
///   suffix (see ``PublicSuffixes``), for a domain the host does not domain-match, Secure
///   cookies from an insecure origin, and insecure cookies that would shadow a stored Secure
///   one (RFC 6265bis).
/// - Sending: ``cookieHeader(for:now:)`` gives the `Cookie` field for a request: the
///   cookies whose domain and path match, Secure ones only to a secure origin, longer paths
///   first, then older ones first (RFC 6265 §5.4 step 2), names and values byte for byte as
///   they were received.
/// - The `Cookie` field's caps (the "cookie header bomb" of curl's CVE-2022-32205): at most
///   ``maxCookieHeaderBytes`` bytes for the field line `Cookie: …` (8190 by default, so the
///   line with its CRLF fits the 8 KiB most servers allow a field line) and at most
///   ``maxCookiesPerRequest`` cookies (150 by default, as curl). Cookies go in that order
///   until the next one would pass a cap; it and every later one are left out (the
///   ``CookieHeader`` says how many, and the session logs a warning).
/// - Secure origins: https and wss, and also plain http to loopback — `localhost`,
///   `*.localhost`, 127.0.0.0/8 and `::1` — as browsers and curl treat them. Loopback
///   traffic never leaves the machine, and local development servers rely on it.
/// - Limits: at most ``maxCookiesPerDomain`` cookies per cookie domain and ``maxCookies``
///   in all; past either, expired cookies go first, then the least recently used.
/// - Files: curl's Netscape format (`-b`/`-c`), read by ``load(netscapeFile:now:)`` and
///   written atomically by ``save(toNetscapeFile:now:)``, session cookies included (expiry 0).
///   SameSite is not part of that format and reads back as unspecified.
public final class CookieJar: Sendable {
    /// Per cookie domain (RFC 6265 §6.1 asks for at least 50).
    public let maxCookiesPerDomain: Int
    /// In all (RFC 6265 §6.1 asks for at least 3000).
    public let maxCookies: Int
    /// The most bytes of the `Cookie` field line a request gets from the jar: `Cookie: `, the
    /// `name=value` pairs and their `; ` separators, without the CRLF.
    public let maxCookieHeaderBytes: Int
    /// The most cookies one request's `Cookie` field carries.
    public let maxCookiesPerRequest: Int
    private let store: Mutex<CookieStore>

    /// The default ``maxCookieHeaderBytes``: 8190, Apache's `LimitRequestFieldSize` (and
    /// curl's `MAX_COOKIE_HEADER_LEN`); with its CRLF the line fits nginx's 8 KiB header buffer.
    public static let defaultMaxCookieHeaderBytes = 8190
    /// The default ``maxCookiesPerRequest``: 150, curl's `MAX_COOKIE_SEND_AMOUNT`.
    public static let defaultMaxCookiesPerRequest = 150

    /// An empty jar with the given limits: RFC 6265's minimums for storage, curl's caps for the
    /// `Cookie` field by default. A cap below 1 counts as 1 (`maxCookieHeaderBytes` is
    /// taken as it is: a cap smaller than a cookie's line sends no cookie).
    public init(
        maxCookiesPerDomain: Int = 50,
        maxCookies: Int = 3000,
        maxCookieHeaderBytes: Int = CookieJar.defaultMaxCookieHeaderBytes,
        maxCookiesPerRequest: Int = CookieJar.defaultMaxCookiesPerRequest
    ) {
        self.maxCookiesPerDomain = max(1, maxCookiesPerDomain)
        self.maxCookies = max(1, maxCookies)
        self.maxCookieHeaderBytes = max(0, maxCookieHeaderBytes)
        self.maxCookiesPerRequest = max(1, maxCookiesPerRequest)
        self.store = Mutex(CookieStore())
    }

    /// A jar holding the cookies of a curl/Netscape cookie file.
    public convenience init(contentsOfNetscapeFile path: String, now: Date = Date()) throws(HawserError) {
        self.init()
        try self.load(netscapeFile: path, now: now)
    }

    // MARK: Receiving

    /// Stores every `Set-Cookie` of a response received from `url`, each parsed from its
    /// octets as received (names and values kept byte for byte); refused ones are dropped.
    public func setCookies(fromResponseHeaders headers: HTTPHeaders, for url: URL, now: Date = Date()) {
        for value in headers.valueBytes(for: "Set-Cookie") {
            _ = self.setCookie(fromSetCookieBytes: value, for: url, now: now)
        }
    }

    /// ``setCookie(fromSetCookie:for:now:)`` for a field value given as the octets received.
    @discardableResult
    public func setCookie(
        fromSetCookieBytes header: [UInt8],
        for url: URL,
        now: Date = Date()
    ) -> Result<Cookie, CookieRejection> {
        self.keep(Cookie.make(fromSetCookieBytes: header, for: url, now: now), from: url, now: now)
    }

    /// Stores one `Set-Cookie` field value received from `url`: the cookie stored (or, when
    /// it had expired, deleted), or why it was refused.
    @discardableResult
    public func setCookie(
        fromSetCookie header: String,
        for url: URL,
        now: Date = Date()
    ) -> Result<Cookie, CookieRejection> {
        self.keep(Cookie.make(fromSetCookie: header, for: url, now: now), from: url, now: now)
    }

    /// Stores what `Cookie.make` made (unless it would shadow a Secure cookie), or passes its refusal on.
    private func keep(
        _ made: Result<Cookie, CookieRejection>,
        from url: URL,
        now: Date
    ) -> Result<Cookie, CookieRejection> {
        switch made {
        case .failure(let why): return .failure(why)
        case .success(let cookie):
            let secureOrigin = CookieRules.isSecureOrigin(url)
            let limits = (self.maxCookiesPerDomain, self.maxCookies)
            return self.store.withLock { store in
                if !cookie.isSecure && !secureOrigin && store.wouldShadowSecure(cookie) {
                    return .failure(.wouldOverwriteSecure)
                }
                return .success(store.insert(cookie, now: now, limits: limits))
            }
        }
    }

    /// Stores a cookie made by hand, replacing the one with the same name, domain and path
    /// (whose creation time it keeps). An expired cookie deletes its namesake.
    public func setCookie(_ cookie: Cookie, now: Date = Date()) {
        let limits = (self.maxCookiesPerDomain, self.maxCookies)
        self.store.withLock { _ = $0.insert(cookie, now: now, limits: limits) }
    }

    /// Removes the cookie with this cookie's name, domain and path, if stored.
    public func deleteCookie(_ cookie: Cookie) {
        self.store.withLock { _ = $0.remove(cookie.key) }
    }

    /// Removes every cookie.
    public func removeAll() {
        self.store.withLock { $0 = CookieStore() }
    }

    /// Removes the cookies that have expired at `now`.
    public func removeExpired(now: Date = Date()) {
        self.store.withLock { $0.removeAll { $0.isExpired(at: now) } }
    }

    /// Removes the session cookies (what a browser does on restart, curl's `--junk-session-cookies`).
    public func removeSessionCookies() {
        self.store.withLock { $0.removeAll { $0.isSessionCookie } }
    }

    // MARK: Sending

    private var caps: CookieHeaderCaps {
        CookieHeaderCaps(maxBytes: self.maxCookieHeaderBytes, maxCount: self.maxCookiesPerRequest)
    }

    /// The cookies to send to `url` (RFC 6265 §5.4), in the order they are sent: those
    /// ``cookieHeader(for:now:)`` puts in the field, within its caps.
    public func cookies(for url: URL, now: Date = Date()) -> [Cookie] {
        let caps = self.caps
        return self.store.withLock { $0.matching(url, now: now, touch: false, caps: caps).cookies }
    }

    /// The `Cookie` field for a request to `url`, byte for byte, or nil when no cookie applies
    /// (or none fits the caps): the matching cookies in RFC 6265's order, up to the first that
    /// would take the field past ``maxCookieHeaderBytes`` or ``maxCookiesPerRequest``. Marks
    /// the cookies sent as used (for least-recently-used eviction); those left out are not.
    /// A cookie whose name or value could not be a field value (a control byte, made by hand)
    /// is never sent.
    public func cookieHeader(for url: URL, now: Date = Date()) -> CookieHeader? {
        // Every request asks, and most jars are empty: answer that without parsing the URL.
        let caps = self.caps
        let (cookies, omitted) = self.store.withLock { store -> ([Cookie], Int) in
            if store.count == 0 { return ([], 0) }
            return store.matching(url, now: now, touch: true, caps: caps)
        }
        if cookies.isEmpty && omitted == 0 { return nil }
        var bytes: [UInt8] = []
        var length = 0
        for c in cookies { length += c.nameBytes.count + c.valueBytes.count + 3 }
        bytes.reserveCapacity(length)
        for c in cookies {
            if !bytes.isEmpty { bytes += [UInt8(ascii: ";"), UInt8(ascii: " ")] }
            bytes += c.nameBytes
            bytes.append(UInt8(ascii: "="))
            bytes += c.valueBytes
        }
        return CookieHeader(
            value: bytes,
            cookieCount: cookies.count,
            omittedCount: omitted,
            maxBytes: caps.maxBytes,
            maxCount: caps.maxCount
        )
    }

    /// The `Cookie` field value for a request to `url` (`a=1; b=2`) as a String, or nil when
    /// no cookie is sent; ``cookieHeader(for:now:)`` has it byte for byte (here bytes that are
    /// not UTF-8 read as U+FFFD) and says how many cookies the caps left out.
    public func cookieHeaderValue(for url: URL, now: Date = Date()) -> String? {
        guard let header = self.cookieHeader(for: url, now: now), header.cookieCount > 0 else { return nil }
        return String(decoding: header.value, as: UTF8.self)
    }

    /// Every cookie stored (expired ones included until removed), oldest first.
    public var allCookies: [Cookie] {
        self.store.withLock { $0.all() }
    }

    /// How many cookies are stored.
    public var count: Int { self.store.withLock { $0.count } }

    // MARK: Netscape cookie files (curl -b / -c)

    /// Adds the cookies of a curl/Netscape cookie file (replacing same name/domain/path).
    /// Malformed lines and expired cookies are skipped, as curl does.
    /// - Throws: `.ioError` when the file cannot be read.
    public func load(netscapeFile path: String, now: Date = Date()) throws(HawserError) {
        let bytes: [UInt8]
        do {
            bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw HawserError(.ioError, "cannot read cookie file \(path): \(error)")
        }
        self.load(netscapeBytes: bytes, now: now)
    }

    /// Adds the cookies of Netscape cookie-file text. Lines are taken as newest first, the
    /// order curl writes them in, so the file's last line becomes the oldest cookie.
    public func load(netscapeText text: String, now: Date = Date()) {
        self.load(netscapeBytes: Array(text.utf8), now: now)
    }

    /// ``load(netscapeText:now:)`` for the file's bytes: names and values are taken byte for
    /// byte (UTF-8 or not), as ``save(toNetscapeFile:now:)`` writes them.
    public func load(netscapeBytes bytes: [UInt8], now: Date = Date()) {
        let cookies = NetscapeCookieFile.parse(bytes: bytes, now: now)
        let limits = (self.maxCookiesPerDomain, self.maxCookies)
        self.store.withLock { store in
            for c in cookies.reversed() { _ = store.insert(c, now: now, limits: limits) }
        }
    }

    /// The jar as a Netscape cookie file, as curl writes it: unexpired cookies, newest
    /// first, session cookies with expiry 0. (A String: bytes of names and values that are
    /// not UTF-8 read as U+FFFD; ``netscapeFileBytes(now:)`` keeps them.)
    public func netscapeFileContents(now: Date = Date()) -> String {
        String(decoding: self.netscapeFileBytes(now: now), as: UTF8.self)
    }

    /// The jar as a Netscape cookie file's bytes: names and values byte for byte.
    public func netscapeFileBytes(now: Date = Date()) -> [UInt8] {
        NetscapeCookieFile.renderBytes(self.allCookies.reversed().filter { !$0.isExpired(at: now) })
    }

    /// Writes the jar to `path` in curl's Netscape format, atomically (a temporary file in
    /// the same directory, then rename), readable by the owner only (mode 0600). Names and
    /// values are written byte for byte.
    /// - Throws: `.ioError` when the file cannot be written.
    public func save(toNetscapeFile path: String, now: Date = Date()) throws(HawserError) {
        try writeAtomically(self.netscapeFileBytes(now: now), to: path)
    }
}
