import HawserBase
import HawserHTTP1
import HawserPosix

// Which proxy, if any, a request goes through: configured explicitly or read from the
// environment exactly as curl reads it. Pure values; the connector does the connecting.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// Why a proxy setting could not be used.
public struct ProxyConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, naming the setting (a password in a proxy URL is shown as `***`).
    public var message: String
    /// The environment variable the setting came from (`https_proxy`…), when it came from one.
    public var variable: String?

    /// Creates an error whose message names the setting and says what was wrong with it.
    public init(_ message: String, variable: String? = nil) {
        self.message = message
        self.variable = variable
    }

    public var description: String { self.message }
}

/// A user name and password for a proxy (HTTP Basic `Proxy-Authorization`, or SOCKS5
/// username/password authentication, RFC 1929).
public struct ProxyCredentials: Sendable, Hashable {
    /// The user name. For SOCKS5 it must be 1 to 255 bytes of UTF-8 (RFC 1929).
    public var user: String
    /// The password, sent in clear to the proxy (Basic, or RFC 1929): use it over a trusted network
    /// or a proxy reached through TLS. For SOCKS5 at most 255 bytes.
    public var password: String

    /// Creates credentials from a user name and a password.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `Basic base64(user:password)`, the value of a `Proxy-Authorization` field.
    public var basicAuthorization: String {
        "Basic " + Data("\(self.user):\(self.password)".utf8).base64EncodedString()
    }
}

/// One proxy server.
public struct ProxyServer: Sendable, Hashable, CustomStringConvertible {
    /// How to talk to the proxy.
    public enum Kind: Sendable, Hashable {
        /// Plain HTTP to the proxy: absolute-form requests for http URLs, CONNECT for https.
        case http
        /// TLS to the proxy, then as `.http` inside it.
        case https
        /// SOCKS5 (RFC 1928). `remoteDNS`: send the host name to the proxy (`socks5h://`)
        /// instead of resolving it here (`socks5://`).
        case socks5(remoteDNS: Bool)
    }

    /// How to talk to the proxy: HTTP, HTTPS or SOCKS5.
    public var kind: Kind
    /// The proxy's host name or address (IPv6 without brackets).
    public var host: String
    /// The proxy's TCP port, 1 through 65535. A proxy URL without one gets curl's default: 443
    /// for `https`, 1080 for every other scheme.
    public var port: Int
    /// Credentials for the proxy, if any.
    public var credentials: ProxyCredentials?

    /// Creates a proxy: how to talk to it, where it is, and the credentials it wants, if any.
    public init(kind: Kind, host: String, port: Int, credentials: ProxyCredentials? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// Parses a proxy string as curl does: `[scheme://][user[:password]@]host[:port][/]`.
    /// No scheme means `http`; `http`, `https`, `socks5` and `socks5h` are accepted (any
    /// case); the port defaults to 443 for `https` and 1080 for everything else (curl's rule,
    /// also for plain HTTP proxies). User and password are percent-decoded.
    public init(parsing string: String) throws(ProxyConfigurationError) {
        let shown = Self.redactingPassword(string)
        var rest = Substring(string.trimmingASCIIWhitespace())
        guard !rest.isEmpty else { throw ProxyConfigurationError("empty proxy string") }
        var kind = Kind.http
        if let r = Self.findSchemeSeparator(rest) {
            let scheme = rest[..<r.lowerBound].lowercased()
            switch scheme {
            case "http": kind = .http
            case "https": kind = .https
            case "socks5": kind = .socks5(remoteDNS: false)
            case "socks5h": kind = .socks5(remoteDNS: true)
            case "socks4", "socks4a":
                throw ProxyConfigurationError("proxy '\(shown)': SOCKS4 is not supported (use socks5:// or socks5h://)")
            default:
                throw ProxyConfigurationError("proxy '\(shown)': unsupported proxy scheme '\(scheme)'")
            }
            rest = rest[r.upperBound...]
        }
        // The authority ends at the first '/', '?' or '#'.
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            rest = rest[..<end]
        }
        var credentials: ProxyCredentials?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            let password: Substring
            if let colon = userinfo.firstIndex(of: ":") {
                user = userinfo[..<colon]
                password = userinfo[userinfo.index(after: colon)...]
            } else {
                user = userinfo
                password = ""
            }
            guard let u = percentDecode(user), let p = percentDecode(password) else {
                throw ProxyConfigurationError("proxy '\(shown)': bad percent-encoding in the user name or password")
            }
            credentials = ProxyCredentials(user: u, password: p)
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw ProxyConfigurationError("proxy '\(shown)': unterminated IPv6 address")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw ProxyConfigurationError("proxy '\(shown)': unexpected '\(after)' after the IPv6 address")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw ProxyConfigurationError("proxy '\(shown)': no host") }
        guard host.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "@") }) else {
            throw ProxyConfigurationError("proxy '\(shown)': the host contains a control character or space")
        }
        var port: Int
        if case .https = kind { port = 443 } else { port = 1080 }
        if let pt = portText, !pt.isEmpty {
            guard pt.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), pt.count <= 5, let p = Int(pt),
                (1...65535).contains(p)
            else {
                throw ProxyConfigurationError("proxy '\(shown)': bad port '\(pt)'")
            }
            port = p
        }
        self.init(kind: kind, host: String(host), port: port, credentials: credentials)
    }

    /// `string` with the password of its user info, if any, replaced by `***`, for messages.
    static func redactingPassword(_ string: String) -> String {
        var authorityStart = string.startIndex
        if let r = Self.findSchemeSeparator(Substring(string)) { authorityStart = r.upperBound }
        let authorityEnd =
            string[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? string.endIndex
        let authority = string[authorityStart..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else {
            return string
        }
        return String(string[..<authority.index(after: colon)]) + "***" + String(string[at...])
    }

    /// The range of the first "://" in `s`.
    private static func findSchemeSeparator(_ s: Substring) -> Range<Substring.Index>? {
        var i = s.startIndex
        while i < s.endIndex {
            if s[i...].hasPrefix("://") { return i..<s.index(i, offsetBy: 3) }
            i = s.index(after: i)
        }
        return nil
    }

    public var description: String {
        let scheme: String
        switch self.kind {
        case .http: scheme = "http"
        case .https: scheme = "https"
        case .socks5(let remote): scheme = remote ? "socks5h" : "socks5"
        }
        let h = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "\(scheme)://\(h):\(self.port)"  // never the credentials
    }
}

/// A `no_proxy` list, matched as curl matches it.
///
/// - A list of entries separated by commas (blanks around an entry are ignored; an entry ends
///   at a blank, and a list that continues after blanks without a comma ends there, as in curl).
/// - The whole list `*` matches every host (a `*` entry inside a longer list matches nothing).
/// - A host name matches an entry equal to it, or ending in `.` + entry: `example.com` matches
///   `example.com` and `www.example.com` but not `notexample.com`. A leading dot on the entry
///   and a trailing dot on either side are ignored; case is ignored.
/// - An IP address (IPv6 given without brackets) matches an equal address, or a CIDR range
///   `addr/bits`. A `/0` (or an unparsable bit count 0) means an exact match, as in curl. Host
///   names never match address entries and addresses never match name entries: no DNS here.
public struct NoProxyList: Sendable, Hashable {
    /// The list as given.
    public let rawValue: String

    /// Creates a list from text as in `no_proxy` (comma-separated entries); parsing happens as
    /// hosts are matched, so any text is accepted.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    /// True when the list is exactly `*`.
    public var matchesEverything: Bool { self.rawValue == "*" }

    /// The entries, as curl splits them: on commas, blanks (space, tab) around them trimmed.
    /// Split on bytes: as Characters, a separator followed by a combining mark is not one.
    public var entries: [Substring] {
        var out: [Substring] = []
        let s = Substring(self.rawValue)
        let bytes = s.utf8
        var i = bytes.startIndex
        func isBlank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
        while i < bytes.endIndex {
            while i < bytes.endIndex && isBlank(bytes[i]) { i = bytes.index(after: i) }
            let start = i
            while i < bytes.endIndex && !isBlank(bytes[i]) && bytes[i] != UInt8(ascii: ",") {
                i = bytes.index(after: i)
            }
            if start < i { out.append(s[start..<i]) }
            while i < bytes.endIndex && isBlank(bytes[i]) { i = bytes.index(after: i) }
            guard i < bytes.endIndex, bytes[i] == UInt8(ascii: ",") else { break }
            while i < bytes.endIndex && bytes[i] == UInt8(ascii: ",") { i = bytes.index(after: i) }
        }
        return out
    }

    /// Whether requests to `host` (a URL host: IPv6 with or without brackets) bypass the proxy.
    ///
    /// Names compare as curl compares them: byte for byte, ASCII letters case-insensitively
    /// (not by Unicode canonical equivalence, under which different names would be equal).
    public func matches(host rawHost: String) -> Bool {
        guard !rawHost.isEmpty, !self.rawValue.isEmpty else { return false }
        if self.matchesEverything { return true }
        var host = rawHost.utf8[...]
        if host.first == UInt8(ascii: "["), host.last == UInt8(ascii: "]") { host = host.dropFirst().dropLast() }
        if let address = IPAddressBytes(String(decoding: host, as: UTF8.self)) {
            for entry in self.entries {
                var text = entry
                var bits = 0
                if let slash = entry.utf8.firstIndex(of: UInt8(ascii: "/")) {
                    text = entry[..<slash]
                    bits = Self.leadingNumber(entry[entry.utf8.index(after: slash)...])
                }
                if address.matches(network: String(text), bits: bits) { return true }
            }
            return false
        }
        if host.last == UInt8(ascii: ".") { host = host.dropLast() }
        let name = host.map(asciiLowercase)
        for entry in self.entries {
            var e = entry.utf8[...]
            if e.last == UInt8(ascii: ".") { e = e.dropLast() }
            if e.first == UInt8(ascii: ".") { e = e.dropFirst() }
            if e.isEmpty { continue }
            let entryName = e.map(asciiLowercase)
            if name == entryName { return true }
            // A subdomain: the name ends with "." + the entry.
            if name.count > entryName.count, name[name.count - entryName.count - 1] == UInt8(ascii: "."),
                name.suffix(entryName.count).elementsEqual(entryName)
            {
                return true
            }
        }
        return false
    }

    /// `atoi`: the leading decimal digits (0 when none), saturating.
    private static func leadingNumber(_ s: Substring) -> Int {
        var n = 0
        for c in s.utf8 {
            guard c >= 0x30 && c <= 0x39 else { break }
            n = min(n * 10 + Int(c - 0x30), 1_000_000)
        }
        return n
    }
}

/// A numeric IPv4 or IPv6 address as bytes, for no_proxy matching.
struct IPAddressBytes: Hashable {
    var bytes: [UInt8]

    init?(_ text: String) {
        var a4 = in_addr()
        if inet_pton(AF_INET, text, &a4) == 1 {
            self.bytes = withUnsafeBytes(of: &a4) { Array($0) }
            return
        }
        var a6 = in6_addr()
        if inet_pton(AF_INET6, text, &a6) == 1 {
            self.bytes = withUnsafeBytes(of: &a6) { Array($0) }
            return
        }
        return nil
    }

    /// Same family and the first `bits` bits equal (`bits` 0: all of them).
    func matches(network: String, bits: Int) -> Bool {
        guard let net = IPAddressBytes(network), net.bytes.count == self.bytes.count else { return false }
        let total = self.bytes.count * 8
        guard bits <= total else { return false }
        let n = bits == 0 ? total : bits
        let whole = n / 8
        if self.bytes[0..<whole] != net.bytes[0..<whole] { return false }
        let rest = n % 8
        if rest > 0 {
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - rest))
            if (self.bytes[whole] ^ net.bytes[whole]) & mask != 0 { return false }
        }
        return true
    }
}

/// Where one request goes: which proxy and how to use it.
public struct ProxyTarget: Sendable, Hashable {
    /// How the request travels through the proxy.
    public enum Mode: Sendable, Hashable {
        /// Send the request itself to the proxy, with an absolute-form target (http URLs via an
        /// HTTP or HTTPS proxy).
        case forward
        /// `CONNECT host:port` first, then the request (and TLS) inside the tunnel.
        case connectTunnel
        /// A SOCKS5 handshake first, then the request (and TLS) inside.
        case socks5(remoteDNS: Bool)
    }

    /// The proxy the request goes through.
    public var server: ProxyServer
    /// How the request travels through that proxy.
    public var mode: Mode
    /// The origin the request is for.
    public var host: String
    /// The origin's port (the URL's, or its scheme's default).
    public var port: Int
}

/// Proxy settings for a session: one proxy per URL scheme, a fallback for every scheme, and
/// hosts that bypass them.
public struct ProxyConfiguration: Sendable, Hashable {
    /// One of the three proxy settings (and the environment variables they come from).
    public enum Setting: Sendable, Hashable, CaseIterable {
        /// ``ProxyConfiguration/httpProxy`` (`http_proxy`).
        case http
        /// ``ProxyConfiguration/httpsProxy`` (`https_proxy`, `HTTPS_PROXY`).
        case https
        /// ``ProxyConfiguration/allProxy`` (`all_proxy`, `ALL_PROXY`).
        case all
    }

    /// For `http://` URLs (curl's `http_proxy`).
    public var httpProxy: ProxyServer?
    /// For `https://` URLs (curl's `https_proxy`/`HTTPS_PROXY`).
    public var httpsProxy: ProxyServer?
    /// For any URL without a scheme-specific proxy (curl's `all_proxy`/`ALL_PROXY`).
    public var allProxy: ProxyServer?
    /// Hosts that go direct (curl's `no_proxy`/`NO_PROXY`).
    public var bypass: NoProxyList
    /// Settings that were given but cannot be used, and why: ``init(environment:)`` records a
    /// variable it cannot parse here, and the setting stays nil. ``proxy(for:)`` throws the error
    /// for a URL that setting would have served (its scheme's own setting, else ``Setting/all``
    /// when the scheme has none), so such a request fails rather than going direct.
    public var invalidSettings: [Setting: ProxyConfigurationError] = [:]

    /// No proxy at all.
    public static let none = ProxyConfiguration()

    /// This process's environment, read once with ``init(environment:)``: a proxy variable that
    /// cannot be parsed fails the requests that would use it (with an error naming the
    /// variable), and leaves the others alone.
    public static let processEnvironment = ProxyConfiguration(environment: ProcessInfo.processInfo.environment)

    /// Creates settings from the proxies for each scheme and the hosts that bypass them; with no
    /// argument, no proxy at all (``none``).
    public init(
        httpProxy: ProxyServer? = nil,
        httpsProxy: ProxyServer? = nil,
        allProxy: ProxyServer? = nil,
        bypass: NoProxyList = NoProxyList("")
    ) {
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        self.allProxy = allProxy
        self.bypass = bypass
    }

    /// Reads proxy settings from environment variables exactly as curl does:
    /// - `http_proxy` for http URLs, lower case only (`HTTP_PROXY` is ignored: under CGI a
    ///   request's `Proxy:` header becomes `HTTP_PROXY`);
    /// - `https_proxy`, else `HTTPS_PROXY`, for https URLs;
    /// - `all_proxy`, else `ALL_PROXY`, when the scheme's own variable is unset;
    /// - `no_proxy`, else `NO_PROXY`: see ``NoProxyList``.
    /// A variable set to the empty string counts as unset (curl's rule). A proxy string that
    /// cannot be parsed is an error naming the variable.
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(ProxyConfigurationError) -> ProxyConfiguration {
        let config = ProxyConfiguration(environment: environment)
        for setting in Setting.allCases {
            if let error = config.invalidSettings[setting] { throw error }
        }
        return config
    }

    /// Reads proxy settings from environment variables as ``fromEnvironment(_:)`` does, but a
    /// variable that cannot be parsed does not stop the others: its setting stays nil and the
    /// error (naming the variable) goes into ``invalidSettings``, to fail the requests that would
    /// have used it.
    public init(environment: [String: String]) {
        self.init()
        func server(_ setting: Setting, _ names: String...) -> ProxyServer? {
            for n in names {
                guard let v = environment[n], !v.isEmpty else { continue }
                do {
                    return try ProxyServer(parsing: v)
                } catch {
                    self.invalidSettings[setting] = ProxyConfigurationError("\(n): \(error.message)", variable: n)
                    return nil
                }
            }
            return nil
        }
        self.httpProxy = server(.http, "http_proxy")
        self.httpsProxy = server(.https, "https_proxy", "HTTPS_PROXY")
        self.allProxy = server(.all, "all_proxy", "ALL_PROXY")
        for n in ["no_proxy", "NO_PROXY"] {
            if let v = environment[n], !v.isEmpty {
                self.bypass = NoProxyList(v)
                break
            }
        }
    }

    /// The proxy for a request to `url`, or nil to go direct: nil for schemes other than
    /// http/https, for hosts on the bypass list, and when no proxy is set for the scheme.
    /// Throws the recorded error when the setting that would serve `url` could not be parsed
    /// (see ``invalidSettings``).
    public func proxy(for url: URL) throws(ProxyConfigurationError) -> ProxyTarget? {
        // Every request asks, and most sessions have no proxy: answer without parsing the URL.
        guard self.httpProxy != nil || self.httpsProxy != nil || self.allProxy != nil || !self.invalidSettings.isEmpty
        else {
            return nil
        }
        // The host as it goes on the wire (A-labels for an internationalized name: the CONNECT
        // line, the SOCKS5 request and the no_proxy match all take that form).
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            case .success(let authority) = URLAuthority.parse(url)
        else { return nil }
        let host = authority.host
        if self.bypass.matches(host: host) { return nil }
        let secure = scheme == "https"
        let own = secure ? self.httpsProxy : self.httpProxy
        if own == nil, let error = self.invalidSettings[secure ? .https : .http] { throw error }
        if own == nil, self.allProxy == nil, let error = self.invalidSettings[.all] { throw error }
        guard let server = own ?? self.allProxy else { return nil }
        let port = authority.port ?? (secure ? 443 : 80)
        let mode: ProxyTarget.Mode
        switch server.kind {
        case .socks5(let remote): mode = .socks5(remoteDNS: remote)
        case .http, .https: mode = secure ? .connectTunnel : .forward
        }
        return ProxyTarget(server: server, mode: mode, host: host, port: port)
    }
}

// MARK: - Helpers

/// Decodes `%XX` escapes; nil on a malformed escape or invalid UTF-8.
func percentDecode(_ s: Substring) -> String? {
    var out: [UInt8] = []
    var it = Array(s.utf8)[...]
    while let c = it.popFirst() {
        if c == UInt8(ascii: "%") {
            guard it.count >= 2, let h = hexValue(it.removeFirst()), let l = hexValue(it.removeFirst()) else {
                return nil
            }
            out.append(h << 4 | l)
        } else {
            out.append(c)
        }
    }
    return String(validating: out, as: UTF8.self)
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: return c - 0x30
    case 0x41...0x46: return c - 0x41 + 10
    case 0x61...0x66: return c - 0x61 + 10
    default: return nil
    }
}

extension String {
    package func trimmingASCIIWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\n" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\n" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
