// A URL's authority, checked once before any IO: what curl refuses with exit 3 ("URL rejected")
// is a `badURL` here, the same for the first request and every redirect.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The authority of an http or https URL, parsed from its text and checked: the host as it goes
/// on the wire (A-labels, lower-case) and the port as written.
///
/// Foundation's `URL` is not enough: its `port` is nil when the digits overflow (so the default
/// port would be used), it percent-encodes a backslash before an `@` into the user part (so
/// `http://a.test\@b.test/` goes to `b.test`, where a WHATWG parser goes to `a.test`), and it
/// leaves an internationalized host as Unicode or converts it only when ICU is loaded.
public struct URLAuthority: Sendable, Hashable {
    /// The host: lower-case ASCII, internationalized labels as A-labels (`xn--…`); an IPv6
    /// address without its brackets.
    public var host: String
    /// The host as it goes in the `Host` field (without brackets or port): the URL's own spelling
    /// when it was plain ASCII (curl keeps the case too), else ``host``.
    public var hostFieldName: String
    /// The port the URL names, nil when it names none (an empty port counts as none, as in curl).
    public var port: Int?
    /// Whether the host is an IPv6 literal (`[…]` in the URL).
    public var isIPv6: Bool

    /// Parses and checks the authority of `url` (its `absoluteString`). Fails with `badURL` for
    /// a port that is not a number in 1...65535; a space, backslash or control byte anywhere in
    /// the authority; more than one `@`; a user part that decodes to a backslash or a control
    /// byte; a bad percent escape; a host that is not a valid domain name (UTS #46). Fails with
    /// `invalidRequest` when the URL has no authority or an empty host.
    public static func parse(_ url: URL) -> Result<URLAuthority, HawserError> {
        Self.parse(url.absoluteString.utf8).mapError { $0.with(url: url) }
    }

    /// ``parse(_:)-(URL)`` of a URL's text (`scheme://authority/…`), as the user wrote it.
    public static func parse(_ text: String) -> Result<URLAuthority, HawserError> {
        Self.parse(text.utf8)
    }

    private static func bad(_ message: String) -> Result<URLAuthority, HawserError> {
        .failure(HawserError(.badURL, message))
    }

    static func parse(_ text: String.UTF8View) -> Result<URLAuthority, HawserError> {
        // scheme "://"
        guard let colon = text.firstIndex(of: 0x3A) else {
            return .failure(HawserError(.invalidRequest, "URL has no host"))
        }
        var i = text.index(after: colon)
        for _ in 0..<2 {
            guard i < text.endIndex, text[i] == 0x2F || text[i] == 0x5C else {
                return .failure(HawserError(.invalidRequest, "URL has no host"))
            }
            if text[i] == 0x5C { return Self.bad("the URL has a backslash where '//' belongs") }
            i = text.index(after: i)
        }
        let start = i
        var end = i
        var at: String.UTF8View.Index?
        while end < text.endIndex {
            let b = text[end]
            if b == 0x2F || b == 0x3F || b == 0x23 { break }
            if b <= 0x20 || b == 0x7F {
                return Self.bad(
                    b == 0x20 ? "the URL has a space in its authority" : "the URL has a control byte in its authority"
                )
            }
            if b == 0x5C {
                return Self.bad(
                    "the URL has a backslash in its authority (WHATWG URL parsers read it as '/', others do not: ambiguous)"
                )
            }
            if b == 0x40 {
                if at != nil { return Self.bad("the URL has more than one '@' in its authority") }
                at = end
            }
            end = text.index(after: end)
        }
        var hostStart = start
        if let at {
            if let failure = Self.checkUserInfo(text[start..<at]) { return .failure(failure) }
            hostStart = text.index(after: at)
        }
        let hostPort = text[hostStart..<end]
        guard !hostPort.isEmpty else { return .failure(HawserError(.invalidRequest, "URL has no host")) }

        var hostEnd: String.UTF8View.Index
        var portStart: String.UTF8View.Index?
        var isIPv6 = false
        if hostPort.first == 0x5B {
            guard let close = hostPort.firstIndex(of: 0x5D) else {
                return Self.bad("the URL's IPv6 address has no ']'")
            }
            isIPv6 = true
            hostEnd = close
            let after = text.index(after: close)
            if after < end {
                guard text[after] == 0x3A else { return Self.bad("the URL has bytes after its IPv6 address") }
                portStart = text.index(after: after)
            }
        } else if let c = hostPort.lastIndex(of: 0x3A) {
            hostEnd = c
            portStart = text.index(after: c)
        } else {
            hostEnd = end
        }

        var port: Int?
        if let portStart, portStart < end {
            var value = 0
            for b in text[portStart..<end] {
                guard b >= 0x30 && b <= 0x39 else {
                    return Self.bad("the URL's port '\(Self.show(text[portStart..<end]))' is not a decimal number")
                }
                value = min(value * 10 + Int(b - 0x30), 1_000_000)
            }
            guard value >= 1 && value <= 65535 else {
                return Self.bad(
                    "the URL's port \(Self.show(text[portStart..<end])) is not a number between 1 and 65535"
                )
            }
            port = value
        }

        if isIPv6 {
            let inner = text[text.index(after: hostPort.startIndex)..<hostEnd]
            return Self.ipv6(inner).map { URLAuthority(host: $0, hostFieldName: $0, port: port, isIPv6: true) }
        }
        let raw = text[hostPort.startIndex..<hostEnd]
        guard !raw.isEmpty else { return .failure(HawserError(.invalidRequest, "URL has no host")) }
        let plain = !raw.contains(0x25) && raw.allSatisfy { $0 < 0x80 }
        let converted: Result<String, IDNA.Failure>
        if plain {
            converted = IDNA.toASCII(raw)
        } else {
            guard let decoded = Self.percentDecoded(raw) else {
                return Self.bad("the URL's host '\(Self.show(raw))' has a bad percent escape")
            }
            converted = IDNA.toASCII(decoded)
        }
        switch converted {
        case .success(let host):
            // The URL's spelling for the Host field when it was plain ASCII and already the wire
            // form but for case (no percent escapes, no xn-- label that changed).
            let field = plain && host.utf8.count == raw.count ? String(Substring(raw)) : host
            return .success(URLAuthority(host: host, hostFieldName: field, port: port, isIPv6: false))
        case .failure(let f):
            return Self.bad("the URL's host '\(Self.show(raw))' is not a valid host name: \(f.message)")
        }
    }

    /// curl's rules for the user part (RFC 3986 userinfo): its bytes are checked above (no space,
    /// control or backslash); decoded, it may not hold a backslash (`a.test%5C@b.test` is
    /// `a.test\@b.test` to a reader that decodes first) or a control byte (CR, LF and NUL end
    /// up in an Authorization field or a proxy's log).
    private static func checkUserInfo(_ info: Substring.UTF8View) -> HawserError? {
        guard let decoded = Self.percentDecoded(info) else {
            return HawserError(.badURL, "the URL's user part has a bad percent escape")
        }
        for b in decoded {
            if b == 0x5C {
                return HawserError(
                    .badURL,
                    "the URL's user part has a backslash (ambiguous: WHATWG URL parsers end the host there); give credentials apart from the URL"
                )
            }
            if b < 0x20 || b == 0x7F {
                return HawserError(.badURL, "the URL's user part has a control byte")
            }
        }
        return nil
    }

    /// The inside of `[…]`: hex digits, `:` and `.` (an embedded IPv4 address), and a zone after
    /// `%25` of unreserved characters; lower-cased, the zone's `%25` decoded to `%`.
    private static func ipv6(_ inner: Substring.UTF8View) -> Result<String, HawserError> {
        var out: [UInt8] = []
        out.reserveCapacity(inner.count)
        var zone = false
        var i = inner.startIndex
        while i < inner.endIndex {
            let b = inner[i]
            if !zone {
                switch b {
                case 0x30...0x39, 0x61...0x66, 0x3A, 0x2E: out.append(b)
                case 0x41...0x46: out.append(b | 0x20)
                case 0x25:
                    let rest = inner[inner.index(after: i)...]
                    guard rest.starts(with: "25".utf8), rest.count > 2 else {
                        return Self.bad("the URL's IPv6 zone must be written %25 and a name").map { $0.host }
                    }
                    out.append(0x25)
                    zone = true
                    i = inner.index(i, offsetBy: 3)
                    continue
                default:
                    return Self.bad("the URL's IPv6 address '\(Self.show(inner))' has a byte no IPv6 address has")
                        .map { $0.host }
                }
            } else {
                switch b {
                case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: out.append(b)
                default:
                    return Self.bad("the URL's IPv6 zone '\(Self.show(inner))' has a byte a zone name cannot have")
                        .map { $0.host }
                }
            }
            i = inner.index(after: i)
        }
        guard out.contains(0x3A) else {
            return Self.bad("'[\(Self.show(inner))]' is not an IPv6 address").map { $0.host }
        }
        return .success(String(decoding: out, as: UTF8.self))
    }

    /// The bytes with `%XX` decoded; nil for a `%` not followed by two hex digits.
    static func percentDecoded<C: Collection<UInt8>>(_ bytes: C) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            i = bytes.index(after: i)
            guard b == 0x25 else {
                out.append(b)
                continue
            }
            guard i < bytes.endIndex, let hi = Self.hexValue(bytes[i]) else { return nil }
            i = bytes.index(after: i)
            guard i < bytes.endIndex, let lo = Self.hexValue(bytes[i]) else { return nil }
            i = bytes.index(after: i)
            out.append(hi << 4 | lo)
        }
        return out
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    /// Bytes for a message: printable ASCII as it is, the rest as `%XX`, at most 100 bytes.
    static func show<C: Collection<UInt8>>(_ bytes: C) -> String {
        var out = ""
        for b in bytes.prefix(100) {
            if b > 0x20 && b < 0x7F {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 15, radix: 16, uppercase: true)
            }
        }
        return bytes.count > 100 ? out + "…" : out
    }
}

extension URLAuthority {
    /// Percent-encodes what may not stand in a URL as it is, byte for byte: controls, space,
    /// DEL, `"`, `<`, `>`, `\`, `^`, a backtick, `{`, `|`, `}` and every byte from 0x80 (so bytes
    /// that are not UTF-8 stay the bytes they were: `0x80` is `%80`, as curl sends it). `%`,
    /// and the reserved characters, stay as they are. For a `Location` field's bytes.
    /// Bytes of the authority (up to the first `/`, `?` or `#` after `//`) are left alone, so
    /// that the check refuses a space or backslash there rather than reading a host around it.
    public static func percentEncodingReference<C: Collection<UInt8>>(_ bytes: C) -> String {
        let all = Array(bytes)
        // Where the authority ends, when the reference has one ("scheme://" or "//").
        var protectedEnd = 0
        var i = 0
        while i < all.count, Self.isSchemeByte(all[i], first: i == 0) { i += 1 }
        var authorityStart: Int?
        if i > 0, i < all.count, all[i] == 0x3A, i + 2 < all.count, all[i + 1] == 0x2F, all[i + 2] == 0x2F {
            authorityStart = i + 3
        } else if all.count >= 2, all[0] == 0x2F, all[1] == 0x2F {
            authorityStart = 2
        }
        if let s = authorityStart {
            protectedEnd = s
            while protectedEnd < all.count, all[protectedEnd] != 0x2F, all[protectedEnd] != 0x3F,
                all[protectedEnd] != 0x23
            {
                protectedEnd += 1
            }
        }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(all.count)
        for (k, b) in all.enumerated() {
            let encode: Bool
            switch b {
            case 0x00...0x20, 0x7F...0xFF, 0x22, 0x3C, 0x3E, 0x5C, 0x5E, 0x60, 0x7B, 0x7C, 0x7D: encode = true
            default: encode = false
            }
            if encode && k >= protectedEnd {
                out += [0x25, hex[Int(b >> 4)], hex[Int(b & 15)]]
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func isSchemeByte(_ b: UInt8, first: Bool) -> Bool {
        switch b {
        case 0x41...0x5A, 0x61...0x7A: return true
        case 0x30...0x39, 0x2B, 0x2D, 0x2E: return !first
        default: return false
        }
    }
}
