import HawserBase
import HawserHTTP1
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
    func wireInfo() throws(HawserError) -> (key: ConnectionKey, target: String, hostHeader: String) {
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
        guard var host = self.url.host(percentEncoded: false), !host.isEmpty else {
            throw HawserError(.invalidRequest, "URL has no host", url: self.url)
        }
        if host.utf8.first == UInt8(ascii: "["), host.utf8.last == UInt8(ascii: "]") {
            host = String(host.dropFirst().dropLast())
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = self.url.port ?? defaultPort
        guard (1...65535).contains(port) else {
            throw HawserError(.invalidRequest, "port \(port) is out of range", url: self.url)
        }
        var target = self.url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let q = self.url.query(percentEncoded: true) { target += "?" + q }
        let hostForHeader = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
        let hostHeader = port == defaultPort ? hostForHeader : "\(hostForHeader):\(port)"
        // Most hosts are lower-case ASCII already; only the others pay for lowercased().
        let needsLowering = host.utf8.contains { $0 >= 0x80 || ($0 >= 0x41 && $0 <= 0x5A) }
        return (
            ConnectionKey(scheme: scheme, host: needsLowering ? host.lowercased() : host, port: port), target,
            hostHeader
        )
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
