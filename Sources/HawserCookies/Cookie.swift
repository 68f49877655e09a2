import HawserBase
import HawserPosix

// HTTP cookies: RFC 6265 §5 parsing of Set-Cookie, its date format and matching rules,
// with the RFC 6265bis additions browsers and curl follow (control-character refusal,
// attribute size limit, the 400-day expiry cap, cookie name prefixes).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One stored cookie (RFC 6265 §5.3's storage model).
public struct Cookie: Sendable, Hashable, CustomStringConvertible {
    /// The `SameSite` attribute (RFC 6265bis §4.1.2.7), stored as sent. Hawser has no
    /// notion of a "site for cookies" (it is not a browser), so it does not enforce it.
    public enum SameSite: String, Sendable, Hashable {
        /// `SameSite=Strict`.
        case strict = "Strict"
        /// `SameSite=Lax`.
        case lax = "Lax"
        /// `SameSite=None`.
        case none = "None"
        /// No attribute, or a value that is none of the three.
        case unspecified
    }

    /// The cookie's name, byte for byte as received (case-sensitive). Header bytes are
    /// octets (RFC 9110 §5.5's obs-text), not necessarily UTF-8: they are stored and sent back
    /// as they came, and two names that differ in any byte are two cookies.
    public var nameBytes: [UInt8]
    /// The cookie's value, byte for byte as received (no decoding).
    public var valueBytes: [UInt8]
    /// The name as a String (bytes that are not UTF-8 read as U+FFFD; ``nameBytes`` is what
    /// the jar keeps and sends). Setting it stores the String's UTF-8.
    public var name: String {
        get { String(decoding: self.nameBytes, as: UTF8.self) }
        set { self.nameBytes = Array(newValue.utf8) }
    }
    /// The value as a String (bytes that are not UTF-8 read as U+FFFD; ``valueBytes`` is what
    /// the jar keeps and sends). Setting it stores the String's UTF-8.
    public var value: String {
        get { String(decoding: self.valueBytes, as: UTF8.self) }
        set { self.valueBytes = Array(newValue.utf8) }
    }
    /// Lower-case, without a leading dot: the request host for a host-only cookie, the
    /// `Domain` attribute otherwise.
    public var domain: String
    /// The path the cookie is sent for (and below it): the `Path` attribute, or the request
    /// path's default-path (RFC 6265 §5.1.4).
    public var path: String
    /// When the cookie expires; nil for a session cookie (kept until the jar is thrown away
    /// or ``CookieJar/removeSessionCookies()``).
    public var expires: Date?
    /// Sent only over secure connections (https, or loopback — see ``CookieJar``).
    public var isSecure: Bool
    /// Not for scripts; Hawser has no script API, the flag is kept and written to files.
    public var isHTTPOnly: Bool
    /// Sent only to exactly ``domain``, not to its subdomains (no `Domain` attribute was given).
    public var isHostOnly: Bool
    /// The `SameSite` attribute as sent; stored and written to files, not enforced.
    public var sameSite: SameSite
    /// When the cookie was first stored; a replacement keeps its predecessor's (RFC 6265 §5.3).
    public var creationTime: Date
    /// When the cookie was last sent with a request (or stored).
    public var lastAccessTime: Date
    /// Creation order inside one jar (ties in `creationTime` are common): earlier is smaller.
    var creationIndex: UInt64 = 0
    /// Access order inside one jar, for LRU eviction.
    var accessIndex: UInt64 = 0

    /// A cookie made by hand (not from a header). The domain is lower-cased, a leading dot dropped.
    public init(
        name: String,
        value: String,
        domain: String,
        path: String = "/",
        expires: Date? = nil,
        isSecure: Bool = false,
        isHTTPOnly: Bool = false,
        isHostOnly: Bool = true,
        sameSite: SameSite = .unspecified,
        creationTime: Date = Date()
    ) {
        self.init(
            nameBytes: Array(name.utf8),
            valueBytes: Array(value.utf8),
            domain: domain,
            path: path,
            expires: expires,
            isSecure: isSecure,
            isHTTPOnly: isHTTPOnly,
            isHostOnly: isHostOnly,
            sameSite: sameSite,
            creationTime: creationTime
        )
    }

    /// A cookie made by hand from name and value octets (which need not be UTF-8). The domain
    /// is lower-cased, a leading dot dropped.
    public init(
        nameBytes: [UInt8],
        valueBytes: [UInt8],
        domain: String,
        path: String = "/",
        expires: Date? = nil,
        isSecure: Bool = false,
        isHTTPOnly: Bool = false,
        isHostOnly: Bool = true,
        sameSite: SameSite = .unspecified,
        creationTime: Date = Date()
    ) {
        self.nameBytes = nameBytes
        self.valueBytes = valueBytes
        self.domain = CookieRules.canonicalDomain(domain)
        self.path = path
        self.expires = expires
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.isHostOnly = isHostOnly
        self.sameSite = sameSite
        self.creationTime = creationTime
        self.lastAccessTime = creationTime
    }

    /// A session cookie has no expiry time.
    public var isSessionCookie: Bool { self.expires == nil }

    /// Whether the cookie has expired at `now`.
    public func isExpired(at now: Date = Date()) -> Bool {
        if let e = self.expires { return e <= now }
        return false
    }

    /// Identity in the store: name, domain, path (RFC 6265 §5.3 step 11).
    var key: CookieKey { CookieKey(name: self.nameBytes, domain: self.domain, path: self.path) }

    /// Equality and hashing ignore the jar's internal ordering counters; names and values
    /// compare byte for byte.
    public static func == (a: Cookie, b: Cookie) -> Bool {
        a.nameBytes == b.nameBytes && a.valueBytes == b.valueBytes && a.domain == b.domain && a.path == b.path
            && a.expires == b.expires
            && a.isSecure == b.isSecure && a.isHTTPOnly == b.isHTTPOnly && a.isHostOnly == b.isHostOnly
            && a.sameSite == b.sameSite && a.creationTime == b.creationTime && a.lastAccessTime == b.lastAccessTime
    }

    public func hash(into h: inout Hasher) {
        h.combine(self.nameBytes)
        h.combine(self.domain)
        h.combine(self.path)
        h.combine(self.valueBytes)
    }

    public var description: String {
        var s = "\(self.name)=\(self.value); domain=\(self.isHostOnly ? "" : ".")\(self.domain); path=\(self.path)"
        if let e = self.expires { s += "; expires=\(Int64(e.timeIntervalSince1970.rounded(.down)))" }
        if self.isSecure { s += "; secure" }
        if self.isHTTPOnly { s += "; httponly" }
        if self.sameSite != .unspecified { s += "; samesite=\(self.sameSite.rawValue)" }
        return s
    }
}

struct CookieKey: Hashable, Sendable {
    var name: [UInt8]
    var domain: String
    var path: String
}

// MARK: - Set-Cookie parsing (RFC 6265 §5.2)

/// A `Set-Cookie` field value as parsed by RFC 6265 §5.2, before the storage model
/// (§5.3) turns it into a ``Cookie`` for a request URL.
public struct SetCookie: Sendable, Hashable {
    /// The name, as sent: the bytes before the first `=`, blanks trimmed (octets, not
    /// necessarily UTF-8).
    public var nameBytes: [UInt8]
    /// The value, as sent: the bytes after the first `=`, blanks trimmed (octets, not
    /// necessarily UTF-8).
    public var valueBytes: [UInt8]
    /// The name as a String (bytes that are not UTF-8 read as U+FFFD); setting it stores its UTF-8.
    public var name: String {
        get { String(decoding: self.nameBytes, as: UTF8.self) }
        set { self.nameBytes = Array(newValue.utf8) }
    }
    /// The value as a String (bytes that are not UTF-8 read as U+FFFD); setting it stores its UTF-8.
    public var value: String {
        get { String(decoding: self.valueBytes, as: UTF8.self) }
        set { self.valueBytes = Array(newValue.utf8) }
    }
    /// The last valid `Expires` attribute.
    public var expires: Date?
    /// The last valid `Max-Age` attribute, in seconds (≤ 0 means "expire now").
    public var maxAge: Int64?
    /// The last non-empty `Domain` attribute, lower-cased, leading dot removed.
    public var domain: String?
    /// The last `Path` attribute that starts with `/`.
    public var path: String?
    /// A `Secure` attribute was present.
    public var isSecure = false
    /// An `HttpOnly` attribute was present.
    public var isHTTPOnly = false
    /// The last `SameSite` attribute; `.unspecified` when there was none or its value was unknown.
    public var sameSite = Cookie.SameSite.unspecified

    /// The most octets of name plus value (RFC 6265bis §5.6: 4096); a longer pair makes the field ignored.
    public static let maxNameValueBytes = 4096
    /// The most octets of one attribute value (RFC 6265bis §5.6: 1024); a longer attribute is ignored.
    public static let maxAttributeValueBytes = 1024

    /// Parses one `Set-Cookie` field value given as a String (its UTF-8); see ``init(bytes:)``.
    public init?(_ header: String) {
        self.init(bytes: Array(header.utf8))
    }

    /// Parses one `Set-Cookie` field value from its octets as received
    /// (`HTTPHeaders.valueBytes(at:)`); nil when RFC 6265 says to ignore it: no `=` in the
    /// name-value pair, an empty name, name plus value over 4096 octets, or a control
    /// character (other than HTAB) anywhere. TAB inside the name or value is refused too,
    /// because the Netscape cookie file could not hold it. Bytes 0x80–0xFF are kept as they
    /// are (they need not be UTF-8). Unknown attributes are ignored.
    public init?(bytes: [UInt8]) {
        for b in bytes where (b < 0x20 && b != 0x09) || b == 0x7F { return nil }
        let firstSemicolon = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
        let pair = bytes[0..<firstSemicolon]
        guard let eq = pair.firstIndex(of: UInt8(ascii: "=")) else { return nil }
        let name = trimWS(pair[pair.startIndex..<eq])
        let value = trimWS(pair[(eq + 1)...])
        if name.isEmpty || name.count + value.count > Self.maxNameValueBytes { return nil }
        if name.contains(0x09) || value.contains(0x09) { return nil }
        self.nameBytes = Array(name)
        self.valueBytes = Array(value)

        var rest = bytes[firstSemicolon...]
        while !rest.isEmpty {
            rest = rest.dropFirst()  // the ';'
            let end = rest.firstIndex(of: UInt8(ascii: ";")) ?? rest.endIndex
            let av = rest[rest.startIndex..<end]
            rest = rest[end...]
            let attrName: ArraySlice<UInt8>
            let attrValue: ArraySlice<UInt8>
            if let e = av.firstIndex(of: UInt8(ascii: "=")) {
                attrName = trimWS(av[av.startIndex..<e])
                attrValue = trimWS(av[(e + 1)...])
            } else {
                attrName = trimWS(av)
                attrValue = []
            }
            if attrValue.count > Self.maxAttributeValueBytes { continue }
            let v = String(decoding: attrValue, as: UTF8.self)
            switch String(decoding: attrName, as: UTF8.self).lowercased() {
            case "expires":
                if let d = CookieDate.parse(attrValue) { self.expires = d }
            case "max-age":
                if let n = Self.parseMaxAge(attrValue) { self.maxAge = n }
            case "domain":
                // RFC 6265 §5.2.3: an empty value is ignored; a leading dot is dropped.
                if !attrValue.isEmpty { self.domain = CookieRules.canonicalDomain(v) }
            case "path":
                // A tab could not be written to the Netscape cookie file: such a path is ignored too.
                self.path = attrValue.first == UInt8(ascii: "/") && !attrValue.contains(0x09) ? v : nil
            case "secure":
                self.isSecure = true
            case "httponly":
                self.isHTTPOnly = true
            case "samesite":
                switch v.lowercased() {
                case "strict": self.sameSite = .strict
                case "lax": self.sameSite = .lax
                case "none": self.sameSite = .none
                default: self.sameSite = .unspecified
                }
            default:
                continue
            }
        }
    }

    /// RFC 6265 §5.2.2: an optional '-' then digits; anything else ignores the attribute.
    static func parseMaxAge(_ v: ArraySlice<UInt8>) -> Int64? {
        var digits = v[...]
        var negative = false
        if digits.first == UInt8(ascii: "-") {
            negative = true
            digits = digits.dropFirst()
        }
        if digits.isEmpty { return nil }
        var n: Int64 = 0
        for b in digits {
            guard b >= 0x30 && b <= 0x39 else { return nil }
            // Saturate: any huge value is "far in the future" (and capped to 400 days anyway).
            n = n > Int64.max / 20 ? Int64.max / 10 : n * 10 + Int64(b - 0x30)
        }
        return negative ? -n : n
    }
}

/// Without leading and trailing SP / HTAB.
func trimWS(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var s = s
    while let f = s.first, f == 0x20 || f == 0x09 { s = s.dropFirst() }
    while let l = s.last, l == 0x20 || l == 0x09 { s = s.dropLast() }
    return s
}

// MARK: - Dates (RFC 6265 §5.1.1)

/// The cookie date algorithm of RFC 6265 §5.1.1: accepts RFC 1123, RFC 850 and asctime
/// dates and the many variants servers send (`Thu, 01-Jan-1970 00:00:01 GMT`,
/// two-digit years, any order of tokens). The time zone is always UTC.
public enum CookieDate {
    /// The date `value` names, or nil if the algorithm fails.
    public static func parse(_ value: String) -> Date? { self.parse(Array(value.utf8)[...]) }

    static func parse(_ value: ArraySlice<UInt8>) -> Date? {
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        var i = value.startIndex
        while i < value.endIndex {
            while i < value.endIndex && isDelimiter(value[i]) { i += 1 }
            let start = i
            while i < value.endIndex && !isDelimiter(value[i]) { i += 1 }
            if start == i { continue }
            let token = value[start..<i]
            if time == nil, let t = parseTime(token) {
                time = t
            } else if day == nil, let d = leadingDigits(token, min: 1, max: 2) {
                day = d
            } else if month == nil, let m = parseMonth(token) {
                month = m
            } else if year == nil, let y = leadingDigits(token, min: 2, max: 4) {
                year = y
            }
        }
        guard let (h, mi, s) = time, let d = day, let mo = month, var y = year else { return nil }
        if y >= 70 && y <= 99 { y += 1900 } else if y >= 0 && y <= 69 { y += 2000 }
        guard d >= 1, d <= 31, y >= 1601, h <= 23, mi <= 59, s <= 59 else { return nil }
        guard d <= daysInMonth(mo, year: y) else { return nil }  // "the date does not exist"
        let days = daysFromCivil(year: y, month: mo, day: d)
        return Date(timeIntervalSince1970: Double(days * 86_400 + h * 3600 + mi * 60 + s))
    }

    /// delimiter = %x09 / %x20-2F / %x3B-40 / %x5B-60 / %x7B-7E
    static func isDelimiter(_ b: UInt8) -> Bool {
        b == 0x09 || (0x20...0x2F).contains(b) || (0x3B...0x40).contains(b) || (0x5B...0x60).contains(b)
            || (0x7B...0x7E).contains(b)
    }

    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// `min`…`max` digits, then nothing or a non-digit followed by anything.
    static func leadingDigits(_ t: ArraySlice<UInt8>, min: Int, max: Int) -> Int? {
        var n = 0
        var count = 0
        var i = t.startIndex
        while i < t.endIndex && isDigit(t[i]) {
            count += 1
            if count > max { return nil }
            n = n * 10 + Int(t[i] - 0x30)
            i += 1
        }
        return count >= min ? n : nil
    }

    /// hms-time = 1*2DIGIT ":" 1*2DIGIT ":" 1*2DIGIT, then nothing or a non-digit and anything.
    static func parseTime(_ t: ArraySlice<UInt8>) -> (Int, Int, Int)? {
        var fields: [Int] = []
        var i = t.startIndex
        for f in 0..<3 {
            var n = 0
            var count = 0
            while i < t.endIndex && isDigit(t[i]) && count < 2 {
                n = n * 10 + Int(t[i] - 0x30)
                count += 1
                i += 1
            }
            if count == 0 { return nil }
            fields.append(n)
            if f < 2 {
                guard i < t.endIndex && t[i] == UInt8(ascii: ":") else { return nil }
                i += 1
            }
        }
        if i < t.endIndex && isDigit(t[i]) { return nil }
        return (fields[0], fields[1], fields[2])
    }

    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parseMonth(_ t: ArraySlice<UInt8>) -> Int? {
        guard t.count >= 3 else { return nil }
        let p = String(decoding: t.prefix(3).map { $0 | 0x20 }, as: UTF8.self)
        return self.months.firstIndex(of: p).map { $0 + 1 }
    }

    static func daysInMonth(_ m: Int, year y: Int) -> Int {
        switch m {
        case 2: return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

// MARK: - Matching and canonical forms (RFC 6265 §5.1.2–5.1.4)

/// The matching rules of RFC 6265 §5.1, and what counts as a secure origin.
public enum CookieRules {
    // Every rule here works on UTF-8 bytes, as RFC 6265 does on octets: String's own
    // comparisons are by grapheme cluster, where "." followed by a combining mark is not a
    // "." (so a leading dot would survive, and a prefix check would miss).

    /// Lower-case, without one leading dot (and without a trailing dot).
    public static func canonicalDomain(_ d: String) -> String {
        let lower = d.lowercased()
        var bytes = Substring(lower).utf8[...]
        if bytes.first == UInt8(ascii: ".") { bytes = bytes.dropFirst() }
        if bytes.last == UInt8(ascii: ".") { bytes = bytes.dropLast() }
        return bytes.count == lower.utf8.count ? lower : String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `s` starts with `prefix`, byte for byte, ASCII letters compared case-insensitively.
    static func hasPrefixIgnoringASCIICase(_ s: some Sequence<UInt8>, _ prefix: StaticString) -> Bool {
        let p = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        var i = s.makeIterator()
        for want in p {
            guard let b = i.next() else { return false }
            let fold: (UInt8) -> UInt8 = { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            if fold(b) != fold(want) { return false }
        }
        return true
    }

    /// The canonical host of a URL (lower-case, IPv6 without brackets, without the
    /// trailing dot of a fully qualified name), or nil when there is no host or it has an
    /// empty label (`.example.com`, `a..b`, `example.com..`: no such host resolves, and
    /// canonicalizing one would turn it into a host it is not).
    public static func canonicalHost(_ url: URL) -> String? {
        // The host as it goes on the wire (A-labels for an internationalized name), the same
        // the connection and the Host field use; nil for a URL the session would refuse.
        guard case .success(let authority) = URLAuthority.parse(url) else { return nil }
        let host = authority.host
        var name = host.utf8[...]
        if name.last == UInt8(ascii: ".") { name = name.dropLast() }
        if hasEmptyLabel(name) { return nil }
        return self.canonicalDomain(host)
    }

    /// An IPv4 or IPv6 literal (those only ever match exactly, never by suffix).
    public static func isIPAddress(_ host: String) -> Bool {
        // Bytes, not Characters: a colon followed by a combining mark is one Character that is
        // not ":" (found by FuzzCookieParser).
        if host.utf8.contains(UInt8(ascii: ":")) { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy {
                !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber)
            }
    }

    /// RFC 6265 §5.1.3: `host` equals `domain`, or ends with "." + `domain` and is not an IP address.
    public static func domainMatches(_ host: String, _ domain: String) -> Bool {
        if host.utf8.elementsEqual(domain.utf8) { return true }
        guard !domain.isEmpty, host.utf8.count > domain.utf8.count, !self.isIPAddress(host) else { return false }
        return host.utf8.reversed().starts(with: domain.utf8.reversed())
            && host.utf8.dropLast(domain.utf8.count).last == UInt8(ascii: ".")
    }

    /// RFC 6265 §5.1.4: the directory of the request path ("/" when there is none).
    public static func defaultPath(_ requestPath: String) -> String {
        let bytes = requestPath.utf8
        guard bytes.first == UInt8(ascii: "/"), let last = bytes.lastIndex(of: UInt8(ascii: "/")),
            last != bytes.startIndex
        else { return "/" }
        return String(decoding: bytes[..<last], as: UTF8.self)
    }

    /// RFC 6265 §5.1.4: the request path is the cookie path, or below it.
    public static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        if requestPath.utf8.elementsEqual(cookiePath.utf8) { return true }
        guard requestPath.utf8.starts(with: cookiePath.utf8) else { return false }
        if cookiePath.utf8.last == UInt8(ascii: "/") { return true }
        return requestPath.utf8.dropFirst(cookiePath.utf8.count).first == UInt8(ascii: "/")
    }

    /// The path of `url` for cookie matching (percent-encoding kept, "/" when empty).
    public static func requestPath(_ url: URL) -> String {
        let p = url.path(percentEncoded: true)
        return p.isEmpty ? "/" : p
    }

    /// Whether cookies marked Secure may be set by and sent to `url`: https and wss, and —
    /// as browsers and curl do — plain http to loopback (`localhost`, `*.localhost`,
    /// 127.0.0.0/8, `::1`), whose traffic never leaves the machine.
    public static func isSecureOrigin(_ url: URL) -> Bool {
        switch url.scheme?.lowercased() {
        case "https", "wss": return true
        default: break
        }
        guard let host = self.canonicalHost(url) else { return false }
        return host == "localhost" || host.utf8.reversed().starts(with: ".localhost".utf8.reversed()) || host == "::1"
            || (self.isIPAddress(host) && host.utf8.starts(with: "127.".utf8))
    }
}
