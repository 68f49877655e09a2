import HawserBase
import HawserProxy

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a request goes on the wire: what the pool keys connections by.
public struct ConnectionKey: Sendable, Hashable, CustomStringConvertible {
    /// `"http"` or `"https"`, lower-cased.
    public var scheme: String
    /// The origin's host, lower-cased; an IPv6 address without brackets.
    public var host: String
    /// The origin's port: the URL's, or 80 / 443 by scheme.
    public var port: Int
    /// The proxy connections to this origin go through, if any (they are pooled apart).
    public var proxy: ProxyTarget? = nil
    /// For `http+unix` and `https+unix` URLs: the Unix-domain socket the connection goes to.
    /// ``host`` is then `localhost`, the name the Host field and TLS checks use.
    public var unixSocketPath: String? = nil

    public var description: String {
        if let path = self.unixSocketPath { return "\(self.scheme)+unix://\(path)" }
        return "\(self.scheme)://\(self.host):\(self.port)" + (self.proxy.map { " via \($0.server)" } ?? "")
    }
}

extension HTTPClientRequest {
    /// Validates the URL and derives the connection key, request target and Host value.
    ///
    /// The checked origin of an absolute `http`/`https` URL is cached by its exact text
    /// (``WireInfoCache``): the next request to that origin skips the authority check and only
    /// slices its target out of the URL's text.
    func wireInfo() throws(HawserError) -> (key: ConnectionKey, target: String, hostHeader: String) {
        guard let split = Self.splitForWire(self.url) else { return try self.checkedWireInfo() }
        if let hit = WireInfoCache.shared.lookup(split.prefix) {
            assert(
                (try? self.checkedWireInfo()).map { $0 == (hit.key, split.target, hit.hostHeader) } ?? false,
                "the cached wire info of \(self.url) differs from the checked one"
            )
            return (hit.key, split.target, hit.hostHeader)
        }
        let info = try self.checkedWireInfo()
        assert(info.target == split.target, "the target sliced from \(self.url) differs from the URL's own")
        WireInfoCache.shared.store(split.prefix, key: info.key, hostHeader: info.hostHeader)
        return info
    }

    /// ``wireInfo()`` without the cache: parses and checks the URL's authority.
    func checkedWireInfo() throws(HawserError) -> (key: ConnectionKey, target: String, hostHeader: String) {
        guard let scheme = self.url.scheme?.lowercased() else {
            throw HawserError(.unsupportedURL, "URL has no scheme", url: self.url)
        }
        switch scheme {
        case "http", "https":
            break
        case "http+unix", "https+unix":
            return try self.unixWireInfo(scheme: String(scheme.dropLast(5)))
        default:
            throw HawserError(.unsupportedURL, "unsupported URL scheme '\(scheme)'", url: self.url)
        }
        // The authority, parsed from the URL's text and checked (port digits, spaces, backslashes,
        // controls, userinfo, IDNA): a bad one is `badURL` before any IO.
        let authority: URLAuthority
        switch URLAuthority.parse(self.url) {
        case .success(let a): authority = a
        case .failure(let e): throw e
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = authority.port ?? defaultPort
        var target = self.url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let q = self.url.query(percentEncoded: true) { target += "?" + q }
        let name = authority.hostFieldName
        let hostForHeader = authority.isIPv6 ? "[\(name)]" : name
        let hostHeader = port == defaultPort ? hostForHeader : "\(hostForHeader):\(port)"
        return (ConnectionKey(scheme: scheme, host: authority.host, port: port), target, hostHeader)
    }
}

extension HTTPClientRequest {
    /// `http+unix://%2Fvar%2Frun%2Fapp.sock/path` (AsyncHTTPClient's spelling): the socket path,
    /// percent-encoded, is the authority. The Host field says `localhost`, as curl's
    /// `--unix-socket` does for a local name.
    private func unixWireInfo(
        scheme: String
    ) throws(HawserError) -> (key: ConnectionKey, target: String, hostHeader: String) {
        guard let path = self.url.host(percentEncoded: false), !path.isEmpty else {
            throw HawserError(
                .invalidRequest,
                "a \(scheme)+unix URL names the socket path, percent-encoded, as its host",
                url: self.url
            )
        }
        guard SocketAddress(unixPath: path) != nil else {
            throw HawserError(
                .invalidRequest,
                "'\(path)' cannot be a Unix-domain socket path (empty, a NUL byte, or longer than \(SocketAddress.maximumUnixPathLength) bytes)",
                url: self.url
            )
        }
        var target = self.url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let q = self.url.query(percentEncoded: true) { target += "?" + q }
        let key = ConnectionKey(
            scheme: scheme,
            host: "localhost",
            port: scheme == "https" ? 443 : 80,
            unixSocketPath: path
        )
        return (key, target, "localhost")
    }
}
