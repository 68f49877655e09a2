import HawserBase
import HawserHTTP1
import HawserPosix
import Synchronization

// The cookie store: RFC 6265 §5.3 storage model, §5.4 Cookie header, curl's cookie file.
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
        if CookieRules.hasPrefixIgnoringASCIICase(sc.name, "__secure-") && !sc.isSecure {
            return .failure(.namePrefix("__Secure-"))
        }
        if CookieRules.hasPrefixIgnoringASCIICase(sc.name, "__host-") && !(sc.isSecure && hostOnly && path == "/") {
            return .failure(.namePrefix("__Host-"))
        }

        return .success(
            Cookie(
                name: sc.name,
                value: sc.value,
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
/// - Sending: ``cookieHeaderValue(for:now:)`` gives the `Cookie` field for a request: the
///   cookies whose domain and path match, Secure ones only to a secure origin, longer paths
///   first, then older ones first.
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
    private let store: Mutex<CookieStore>

    /// An empty jar with the given limits (RFC 6265's minimums by default).
    public init(maxCookiesPerDomain: Int = 50, maxCookies: Int = 3000) {
        self.maxCookiesPerDomain = max(1, maxCookiesPerDomain)
        self.maxCookies = max(1, maxCookies)
        self.store = Mutex(CookieStore())
    }

    /// A jar holding the cookies of a curl/Netscape cookie file.
    public convenience init(contentsOfNetscapeFile path: String, now: Date = Date()) throws(HawserError) {
        self.init()
        try self.load(netscapeFile: path, now: now)
    }

    // MARK: Receiving

    /// Stores every `Set-Cookie` of a response received from `url`; refused ones are dropped.
    public func setCookies(fromResponseHeaders headers: HTTPHeaders, for url: URL, now: Date = Date()) {
        for value in headers.values(for: "Set-Cookie") {
            _ = self.setCookie(fromSetCookie: value, for: url, now: now)
        }
    }

    /// Stores one `Set-Cookie` field value received from `url`: the cookie stored (or, when
    /// it had expired, deleted), or why it was refused.
    @discardableResult
    public func setCookie(
        fromSetCookie header: String,
        for url: URL,
        now: Date = Date()
    ) -> Result<Cookie, CookieRejection> {
        switch Cookie.make(fromSetCookie: header, for: url, now: now) {
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

    /// The cookies to send to `url` (RFC 6265 §5.4), in the order they are sent.
    public func cookies(for url: URL, now: Date = Date()) -> [Cookie] {
        self.store.withLock { $0.matching(url, now: now, touch: false) }
    }

    /// The `Cookie` field value for a request to `url` (`a=1; b=2`), or nil when no cookie
    /// applies. Marks the cookies sent as used (for least-recently-used eviction).
    public func cookieHeaderValue(for url: URL, now: Date = Date()) -> String? {
        // Every request asks, and most jars are empty: answer that without parsing the URL.
        let cookies = self.store.withLock { $0.count == 0 ? [] : $0.matching(url, now: now, touch: true) }
        if cookies.isEmpty { return nil }
        var out = ""
        for c in cookies {
            if !out.isEmpty { out += "; " }
            out += c.name
            out += "="
            out += c.value
        }
        return out
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
        let text: String
        do {
            text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
        } catch {
            throw HawserError(.ioError, "cannot read cookie file \(path): \(error)")
        }
        self.load(netscapeText: text, now: now)
    }

    /// Adds the cookies of Netscape cookie-file text. Lines are taken as newest first, the
    /// order curl writes them in, so the file's last line becomes the oldest cookie.
    public func load(netscapeText text: String, now: Date = Date()) {
        let cookies = NetscapeCookieFile.parse(text, now: now)
        let limits = (self.maxCookiesPerDomain, self.maxCookies)
        self.store.withLock { store in
            for c in cookies.reversed() { _ = store.insert(c, now: now, limits: limits) }
        }
    }

    /// The jar as a Netscape cookie file, as curl writes it: unexpired cookies, newest
    /// first, session cookies with expiry 0.
    public func netscapeFileContents(now: Date = Date()) -> String {
        NetscapeCookieFile.render(self.allCookies.reversed().filter { !$0.isExpired(at: now) })
    }

    /// Writes the jar to `path` in curl's Netscape format, atomically (a temporary file in
    /// the same directory, then rename), readable by the owner only (mode 0600).
    /// - Throws: `.ioError` when the file cannot be written.
    public func save(toNetscapeFile path: String, now: Date = Date()) throws(HawserError) {
        try writeAtomically(Array(self.netscapeFileContents(now: now).utf8), to: path)
    }
}

// MARK: - The store (guarded by the jar's mutex)

struct CookieStore: ~Copyable {
    /// Cookies by their domain; lookups walk the request host's parent domains.
    var byDomain: [String: [Cookie]] = [:]
    var count = 0
    /// Ordering clock for creation and access (dates tie too easily).
    var tick: UInt64 = 0

    mutating func nextTick() -> UInt64 {
        self.tick += 1
        return self.tick
    }

    func all() -> [Cookie] {
        self.byDomain.values.joined().sorted { $0.creationIndex < $1.creationIndex }
    }

    /// RFC 6265bis §5.7 step 16 (insecure cookie would shadow a Secure one).
    func wouldShadowSecure(_ new: Cookie) -> Bool {
        for (_, list) in self.byDomain {
            for old in list
            where old.isSecure && old.name == new.name
                && (CookieRules.domainMatches(old.domain, new.domain)
                    || CookieRules.domainMatches(new.domain, old.domain))
                && CookieRules.pathMatches(new.path, old.path)
            {
                return true
            }
        }
        return false
    }

    mutating func remove(_ key: CookieKey) -> Cookie? {
        guard var list = self.byDomain[key.domain], let i = list.firstIndex(where: { $0.key == key }) else {
            return nil
        }
        let old = list.remove(at: i)
        self.byDomain[key.domain] = list.isEmpty ? nil : list
        self.count -= 1
        return old
    }

    mutating func removeAll(where predicate: (Cookie) -> Bool) {
        for (domain, list) in self.byDomain {
            let kept = list.filter { !predicate($0) }
            if kept.count != list.count {
                self.count -= list.count - kept.count
                self.byDomain[domain] = kept.isEmpty ? nil : kept
            }
        }
    }

    /// §5.3 steps 11–12: replace (keeping the creation time), delete if expired, evict.
    mutating func insert(_ cookie: Cookie, now: Date, limits: (perDomain: Int, total: Int)) -> Cookie {
        var c = cookie
        if let old = self.remove(c.key) {
            c.creationTime = old.creationTime
            c.creationIndex = old.creationIndex
        } else {
            c.creationIndex = self.nextTick()
        }
        if c.isExpired(at: now) { return c }
        c.accessIndex = self.nextTick()
        self.byDomain[c.domain, default: []].append(c)
        self.count += 1
        self.evict(domain: c.domain, now: now, limits: limits)
        return c
    }

    /// Past a limit: expired cookies first, then the least recently used (§5.3 step 12).
    private mutating func evict(domain: String, now: Date, limits: (perDomain: Int, total: Int)) {
        if let list = self.byDomain[domain], list.count > limits.perDomain {
            var kept = list.filter { !$0.isExpired(at: now) }
            if kept.count > limits.perDomain {
                kept.sort { $0.accessIndex > $1.accessIndex }
                kept.removeLast(kept.count - limits.perDomain)
            }
            self.count -= list.count - kept.count
            self.byDomain[domain] = kept.isEmpty ? nil : kept
        }
        if self.count > limits.total {
            self.removeAll { $0.isExpired(at: now) }
            while self.count > limits.total {
                var oldest: (domain: String, index: Int, access: UInt64)?
                for (d, list) in self.byDomain {
                    for (i, c) in list.enumerated() where oldest == nil || c.accessIndex < oldest!.access {
                        oldest = (d, i, c.accessIndex)
                    }
                }
                guard let o = oldest else { break }
                self.byDomain[o.domain]!.remove(at: o.index)
                if self.byDomain[o.domain]!.isEmpty { self.byDomain[o.domain] = nil }
                self.count -= 1
            }
        }
    }

    /// §5.4: the cookies for `url`, longer paths first, then earlier created; expired ones
    /// met on the way are removed.
    mutating func matching(_ url: URL, now: Date, touch: Bool) -> [Cookie] {
        guard let host = CookieRules.canonicalHost(url) else { return [] }
        let secure = CookieRules.isSecureOrigin(url)
        let path = CookieRules.requestPath(url)
        var candidates = [host]
        if !CookieRules.isIPAddress(host) {
            var rest = host.utf8[...]
            while let dot = rest.firstIndex(of: UInt8(ascii: ".")) {
                rest = rest[rest.index(after: dot)...]
                if !rest.isEmpty { candidates.append(String(decoding: rest, as: UTF8.self)) }
            }
        }
        var out: [Cookie] = []
        var sawExpired = false
        for domain in candidates {
            guard let list = self.byDomain[domain] else { continue }
            for c in list {
                if c.isExpired(at: now) {
                    sawExpired = true
                    continue
                }
                if c.isHostOnly ? c.domain != host : !CookieRules.domainMatches(host, c.domain) { continue }
                if c.isSecure && !secure { continue }
                if !CookieRules.pathMatches(path, c.path) { continue }
                out.append(c)
            }
        }
        if sawExpired { self.removeAll { $0.isExpired(at: now) } }
        out.sort { a, b in
            a.path.utf8.count != b.path.utf8.count
                ? a.path.utf8.count > b.path.utf8.count : a.creationIndex < b.creationIndex
        }
        if touch {
            for i in out.indices {
                out[i].lastAccessTime = now
                out[i].accessIndex = self.nextTick()
                let key = out[i].key
                if let j = self.byDomain[key.domain]?.firstIndex(where: { $0.key == key }) {
                    self.byDomain[key.domain]![j].lastAccessTime = now
                    self.byDomain[key.domain]![j].accessIndex = out[i].accessIndex
                }
            }
        }
        return out
    }
}

// MARK: - Netscape cookie file format

/// curl's cookie file (`# Netscape HTTP Cookie File`): one cookie per line, seven
/// tab-separated fields — domain (leading dot when not host-only), include-subdomains
/// TRUE/FALSE, path, secure TRUE/FALSE, expiry (Unix seconds, 0 = session), name, value —
/// and a `#HttpOnly_` prefix on the domain of HttpOnly cookies. Other `#` lines are comments.
/// curl writes the newest cookie first; ``CookieJar`` reads and writes in that order.
public enum NetscapeCookieFile {
    /// The header curl writes (its second line points at the format's description).
    public static let header = """
        # Netscape HTTP Cookie File
        # https://curl.se/docs/http-cookies.html
        # This file was generated by Hawser! Edit at your own risk.


        """

    /// The cookies of a file's text, in file order; malformed lines, cookies for public
    /// suffixes and cookies expired at `now` are skipped.
    public static func parse(_ text: String, now: Date = Date()) -> [Cookie] {
        var out: [Cookie] = []
        // Lines and fields are split on bytes: as Characters, "\r\n" is not "\n", and a
        // separator followed by a combining mark is not the separator.
        let httpOnlyPrefix = "#HttpOnly_".utf8
        for rawLine in text.utf8.split(separator: 0x0A, omittingEmptySubsequences: true) {
            var line = rawLine
            if line.last == 0x0D { line = line.dropLast() }
            var httpOnly = false
            if line.starts(with: httpOnlyPrefix) {
                httpOnly = true
                line = line.dropFirst(httpOnlyPrefix.count)
            } else if line.first == UInt8(ascii: "#") || line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
                continue
            }
            // Control characters (other than the tab separators) make the line malformed.
            if line.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) { continue }
            var fields = line.split(separator: 0x09, omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            // An empty value makes a 6-field line when the trailing tab is missing (curl reads it so).
            if fields.count == 6 { fields.append("") }
            guard fields.count == 7 else { continue }
            let domain = CookieRules.canonicalDomain(fields[0])
            let includeSubdomains = fields[1].uppercased() == "TRUE"
            var path = fields[2]
            let secure = fields[3].uppercased() == "TRUE"
            guard let expiry = Int64(fields[4]) else { continue }
            let name = fields[5]
            let value = fields[6]
            if name.isEmpty || !Self.isHostName(domain) { continue }
            if name.utf8.count + value.utf8.count > SetCookie.maxNameValueBytes { continue }
            if includeSubdomains && PublicSuffixes.isPublicSuffix(domain) { continue }
            if path.utf8.first != UInt8(ascii: "/") { path = "/" }
            let expires: Date? = expiry == 0 ? nil : Date(timeIntervalSince1970: Double(expiry))
            let cookie = Cookie(
                name: name,
                value: value,
                domain: domain,
                path: path,
                expires: expires,
                isSecure: secure,
                isHTTPOnly: httpOnly,
                isHostOnly: !includeSubdomains,
                creationTime: now
            )
            if cookie.isExpired(at: now) { continue }
            out.append(cookie)
        }
        return out
    }

    /// A domain field must be a host name or an IP literal: letters, digits, '-', '_', '.',
    /// and ':' for IPv6 (so that nothing else, such as a '#', can start a written line), with
    /// no empty label (`a..b` or `example.com.` would not read back as written: reading
    /// strips one leading and one trailing dot).
    static func isHostName(_ d: String) -> Bool {
        !hasEmptyLabel(d.utf8)
            && d.utf8.allSatisfy { b in
                (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x3A
                    || b >= 0x80
            }
    }

    /// The file text for `cookies`, in the given order.
    public static func render(_ cookies: [Cookie]) -> String {
        var out = self.header
        for c in cookies {
            if c.isHTTPOnly { out += "#HttpOnly_" }
            if !c.isHostOnly { out += "." }
            out += c.domain
            out += c.isHostOnly ? "\tFALSE\t" : "\tTRUE\t"
            out += c.path
            out += c.isSecure ? "\tTRUE\t" : "\tFALSE\t"
            if let e = c.expires {
                let seconds = e.timeIntervalSince1970.rounded(.down)
                out += String(seconds >= 1 ? Int64(clamping: Int(seconds)) : 1)
            } else {
                out += "0"
            }
            out += "\t"
            out += c.name
            out += "\t"
            out += c.value
            out += "\n"
        }
        return out
    }
}

/// Writes `bytes` to a temporary file next to `path` (mode 0600), syncs it, renames it over `path`.
/// A failure is an `ioError` whose underlying `FileError` names the operation and the path.
func writeAtomically(_ bytes: [UInt8], to path: String) throws(HawserError) {
    let tmp = "\(path).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
    do throws(FileError) {
        let fd = try FileDescriptor.open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
        do throws(FileError) {
            try fd.write(all: bytes)
            try fd.sync()
        } catch {
            fd.closeIgnoringErrors()
            throw error
        }
        try fd.close()
        try FileSystem.rename(tmp, to: path)
    } catch {
        FileSystem.unlinkIgnoringErrors(tmp)
        throw HawserError(.ioError, "cannot save cookies: \(error)", underlying: error)
    }
}
