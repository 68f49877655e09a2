// CacheControl.swift: the Cache-Control field (RFC 9111 §5.2) and HTTP dates (RFC 9110 §5.6.7).

import HawserHTTP1
import HawserPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The directives of one or more `Cache-Control` fields (RFC 9111 §5.2), request or response.
///
/// Parsing is lenient, as caches must be: every `name[=value]` element is kept in order with
/// its name lower-cased and its value unquoted (a quoted-string and a token mean the same);
/// unknown directives are kept; a malformed element is skipped up to the next comma outside
/// a quoted string. The typed accessors apply RFC 9111's rules for odd values.
public struct CacheControl: Sendable, Hashable, CustomStringConvertible {
    /// One directive: a lower-cased name and its value, if it had one.
    public struct Directive: Sendable, Hashable {
        /// The directive's name, lower-cased (`max-age`, `no-cache`…).
        public var name: String
        /// The directive's value, unquoted, or nil when it had none.
        public var value: String?

        /// Creates a directive; `name` is lower-cased.
        public init(name: String, value: String? = nil) {
            self.name = name.lowercased()
            self.value = value
        }
    }

    /// The directives, in order, duplicates included.
    public var directives: [Directive]

    /// The greatest delta-seconds value kept (RFC 9111 §1.2.2: larger values, and values that
    /// overflow, are taken as 2^31).
    public static let maximumDeltaSeconds = 2_147_483_648

    /// The given directives.
    public init(directives: [Directive] = []) {
        self.directives = directives
    }

    /// The directives of every `Cache-Control` field of `headers`, in field order.
    public init(_ headers: HTTPHeaders) {
        self.directives = []
        for value in headers.values(for: "Cache-Control") { Self.parse(Array(value.utf8), into: &self.directives) }
    }

    /// The directives of one field value.
    public init(parsing value: String) {
        self.directives = []
        Self.parse(Array(value.utf8), into: &self.directives)
    }

    // MARK: Lookup

    /// Whether directive `name` (case-insensitive) is present, with or without a value.
    public func contains(_ name: String) -> Bool {
        let wanted = name.lowercased()
        return self.directives.contains { $0.name == wanted }
    }

    /// The value of the first directive `name` (case-insensitive); nil when absent or valueless.
    public func value(of name: String) -> String? {
        let wanted = name.lowercased()
        return self.directives.first { $0.name == wanted }?.value
    }

    /// A delta-seconds directive (RFC 9111 §1.2.2): nil when absent; the value clamped to
    /// ``maximumDeltaSeconds``; 0 when the value is missing or not plain digits, or when
    /// the directive appears more than once with different values (§4.2.1 allows treating
    /// such a response as stale, which is the safe reading).
    public func deltaSeconds(_ name: String) -> Int? {
        let wanted = name.lowercased()
        var result: Int?
        for directive in self.directives where directive.name == wanted {
            let value = directive.value.flatMap(Self.parseDeltaSeconds) ?? 0
            if let previous = result, previous != value { return 0 }
            result = value
        }
        return result
    }

    /// `max-age` (response: freshness lifetime; request: the oldest acceptable age).
    public var maxAge: Int? { self.deltaSeconds("max-age") }
    /// `s-maxage` (shared caches only; a private cache reads it only for storability).
    public var sharedMaxAge: Int? { self.deltaSeconds("s-maxage") }
    /// `min-fresh` (request).
    public var minFresh: Int? { self.deltaSeconds("min-fresh") }
    /// `max-stale` (request): ``maximumDeltaSeconds`` when present without a value (any staleness).
    public var maxStale: Int? {
        guard self.contains("max-stale") else { return nil }
        if self.directives.contains(where: { $0.name == "max-stale" && $0.value == nil }) {
            return Self.maximumDeltaSeconds
        }
        return self.deltaSeconds("max-stale")
    }
    /// `stale-while-revalidate` (RFC 5861), kept for callers; the cache does not act on it.
    public var staleWhileRevalidate: Int? { self.deltaSeconds("stale-while-revalidate") }
    /// `stale-if-error` (RFC 5861), kept for callers; the cache does not act on it.
    public var staleIfError: Int? { self.deltaSeconds("stale-if-error") }

    /// `no-cache` in any form (unqualified, or qualified with field names).
    public var noCache: Bool { self.contains("no-cache") }
    /// The field names of a qualified `no-cache="a, b"`, lower-cased; empty when unqualified or absent.
    public var noCacheFieldNames: [String] { Self.fieldNames(self.value(of: "no-cache")) }
    /// `no-store`: the response (or, on a request, its answer) must not be stored.
    public var noStore: Bool { self.contains("no-store") }
    /// `private` in any form (a private cache may store the response either way).
    public var isPrivate: Bool { self.contains("private") }
    /// `public`: a cache may store the response even when it would not otherwise (an authorized request).
    public var isPublic: Bool { self.contains("public") }
    /// `must-revalidate`: once stale, the response must not be used without revalidating it.
    public var mustRevalidate: Bool { self.contains("must-revalidate") }
    /// `proxy-revalidate`: as `must-revalidate`, for shared caches only (Hawser's cache is private).
    public var proxyRevalidate: Bool { self.contains("proxy-revalidate") }
    /// `must-understand`: store only if the cache understands the status code's caching rules.
    public var mustUnderstand: Bool { self.contains("must-understand") }
    /// `no-transform`: intermediaries must not change the content.
    public var noTransform: Bool { self.contains("no-transform") }
    /// `only-if-cached` (request): answer from the cache or with 504, never from the network.
    public var onlyIfCached: Bool { self.contains("only-if-cached") }
    /// `immutable` (RFC 8246): the response will not change while fresh, so no revalidation then.
    public var immutable: Bool { self.contains("immutable") }

    public var description: String {
        self.directives.map { d in
            guard let v = d.value else { return d.name }
            return v.utf8.allSatisfy(isTokenChar) && !v.isEmpty ? "\(d.name)=\(v)" : "\(d.name)=\(quotedString(v))"
        }.joined(separator: ", ")
    }

    // MARK: Parsing

    /// delta-seconds: 1*DIGIT, clamped; nil for anything else.
    static func parseDeltaSeconds(_ value: String) -> Int? {
        var result = 0
        var digits = 0
        for c in value.utf8 {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            digits += 1
            if result < Self.maximumDeltaSeconds { result = result * 10 + Int(c - 0x30) }
        }
        return digits == 0 ? nil : min(result, Self.maximumDeltaSeconds)
    }

    static func fieldNames(_ value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ",").map { $0.trimmingOWS().lowercased() }.filter { !$0.isEmpty }
    }

    private static func parse(_ b: [UInt8], into out: inout [Directive]) {
        let n = b.count
        var i = 0
        func isOWS(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
        /// Skips to just past the next comma that is not inside a quoted string.
        func skipElement(_ i: inout Int) {
            var quoted = false
            while i < n {
                let c = b[i]
                if quoted {
                    if c == 0x5C { i += 1 } else if c == 0x22 { quoted = false }
                } else if c == 0x22 {
                    quoted = true
                } else if c == 0x2C {
                    break
                }
                i += 1
            }
        }
        while i < n {
            while i < n && (isOWS(b[i]) || b[i] == 0x2C) { i += 1 }
            if i >= n { break }
            let nameStart = i
            while i < n && isTokenChar(b[i]) { i += 1 }
            if i == nameStart {
                skipElement(&i)
                continue
            }
            let name = String(decoding: b[nameStart..<i], as: UTF8.self)
            while i < n && isOWS(b[i]) { i += 1 }
            var value: String?
            if i < n && b[i] == 0x3D {
                i += 1
                while i < n && isOWS(b[i]) { i += 1 }
                if i < n && b[i] == 0x22 {
                    i += 1
                    var bytes: [UInt8] = []
                    while i < n && b[i] != 0x22 {
                        if b[i] == 0x5C && i + 1 < n { i += 1 }
                        bytes.append(b[i])
                        i += 1
                    }
                    if i < n { i += 1 }  // closing quote (an unterminated string runs to the end)
                    value = String(decoding: bytes, as: UTF8.self)
                } else {
                    let valueStart = i
                    while i < n && b[i] != 0x2C && !isOWS(b[i]) { i += 1 }
                    value = String(decoding: b[valueStart..<i], as: UTF8.self)
                }
            }
            out.append(Directive(name: name, value: value))
            // Anything else before the next comma is junk: skip it.
            while i < n && isOWS(b[i]) { i += 1 }
            if i < n && b[i] != 0x2C { skipElement(&i) }
        }
    }
}

// MARK: - HTTP dates

/// HTTP-date (RFC 9110 §5.6.7): parsing all three historic formats, formatting IMF-fixdate.
public enum HTTPDate {
    /// The instant named by `value`: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
    /// (`Sunday, 06-Nov-94 08:49:37 GMT`; two-digit years below 70 are 20xx) or asctime
    /// (`Sun Nov  6 08:49:37 1994`). The weekday is not checked; the zone must be GMT or
    /// UTC (or absent, for asctime). nil for anything else, including impossible dates.
    public static func parse(_ value: String) -> Date? {
        self.epochSeconds(value).map { Date(timeIntervalSince1970: Double($0)) }
    }

    /// `date` as an IMF-fixdate, truncated to the second.
    public static func format(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        let seconds = t.isFinite ? Int64(max(-62_135_596_800, min(253_402_300_799, t.rounded(.down)))) : 0
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 {
            rest += 86_400
            days -= 1
        }
        let (y, m, d) = civil(fromDays: days)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        var year = "\(y)"
        while year.count < 4 { year = "0" + year }
        return
            "\(weekdays[weekday]), \(two(d)) \(months[Int(m) - 1]) \(year) \(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60)) GMT"
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let longWeekdays = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]

    /// Seconds since 1970 for `value`, or nil.
    static func epochSeconds(_ value: String) -> Int64? {
        let bytes = Array(value.utf8)
        guard bytes.count <= 64 else { return nil }
        // Tokens: runs of letters, digits, or digits and colons; separators are SP, ',' and '-'.
        var tokens: [ArraySlice<UInt8>] = []
        var i = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x20 || c == 0x09 || c == 0x2C || c == 0x2D {
                i += 1
                continue
            }
            let start = i
            while i < bytes.count, bytes[i] != 0x20, bytes[i] != 0x09, bytes[i] != 0x2C, bytes[i] != 0x2D { i += 1 }
            tokens.append(bytes[start..<i])
        }
        var weekdaySeen = false
        var month: Int?
        var day: Int?
        var year: Int?
        var time: (Int, Int, Int)?
        var zoneSeen = false
        for token in tokens {
            let lower = String(decoding: token.map(asciiLowercase), as: UTF8.self)
            if time == nil, token.contains(0x3A) {
                let parts = token.split(separator: 0x3A, omittingEmptySubsequences: false)
                guard parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(isDigit) }) else {
                    return nil
                }
                time = (number(parts[0]), number(parts[1]), number(parts[2]))
            } else if token.allSatisfy(isDigit) {
                if token.count == 4 && year == nil {
                    year = number(token)
                } else if token.count <= 2 && day == nil {
                    day = number(token)
                } else if token.count == 2 && year == nil {
                    let y = number(token)
                    year = y < 70 ? 2000 + y : 1900 + y
                } else {
                    return nil
                }
            } else if !weekdaySeen && month == nil && day == nil,
                Self.weekdays.contains(where: { $0.lowercased() == lower }) || Self.longWeekdays.contains(lower)
            {
                weekdaySeen = true
            } else if month == nil, let m = Self.months.firstIndex(where: { $0.lowercased() == lower }) {
                month = m + 1
            } else if !zoneSeen && time != nil && (lower == "gmt" || lower == "utc") {
                zoneSeen = true
            } else {
                return nil
            }
        }
        guard let month, let day, let year, let (hour, minute, second) = time, weekdaySeen || zoneSeen else {
            return nil
        }
        guard (1601...9999).contains(year), hour < 24, minute < 60, second <= 60 else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day >= 1 && day <= monthDays[month - 1] else { return nil }
        let days = daysFromCivil(Int64(year), Int64(month), Int64(day))
        return days * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59))
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the classic era-based algorithm).
    static func daysFromCivil(_ year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of `daysFromCivil`.
    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

@inline(__always) private func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
private func number<C: Collection>(_ digits: C) -> Int where C.Element == UInt8 {
    digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
}
