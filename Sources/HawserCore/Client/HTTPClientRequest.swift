#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserHTTP1

/// A request for the engine: method, absolute URL, header fields and body.
public struct HTTPClientRequest: Sendable {
    public var method: HTTPMethod
    public var url: URL
    public var headers: HTTPHeaders
    public var body: RequestBody?
    /// Overrides the session's idle timeout (timeoutIntervalForRequest), in seconds.
    public var timeoutInterval: Double?
    /// How the session's HTTP cache is used for this request; nil means the configuration's policy.
    public var cachePolicy: CachePolicy?
    /// Whether cookies from the configuration's jar are sent and `Set-Cookie` stored; nil means
    /// the configuration's `httpShouldSetCookies`.
    public var shouldHandleCookies: Bool?
    /// Send `Expect: 100-continue` and wait for the server before the body; nil means automatic
    /// (above the configuration's `expectContinueThreshold`).
    public var expectsContinue: Bool?
    /// Send the body gzip-compressed with `Content-Encoding: gzip` (opt-in: only servers that
    /// accept coded request bodies understand it). Works on `.bytes` bodies; a streamed body
    /// is an `invalidRequest` error (compress it in its producer with `GzipEncoder`).
    public var compressesBody = false

    public init(method: HTTPMethod = .get, url: URL, headers: HTTPHeaders = [:], body: RequestBody? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A request body: bytes in memory, or a stream produced on demand with back-pressure.
/// How a request uses the HTTP cache (NSURLRequest.CachePolicy's cases that mean something here).
public enum CachePolicy: Sendable, Hashable {
    /// RFC 9111: use a fresh stored response, revalidate a stale one, store what may be stored.
    case useProtocolCachePolicy
    /// Never read the cache (a response may still be stored).
    case reloadIgnoringLocalCacheData
    /// Use any stored response, however old; load from the network only when there is none.
    case returnCacheDataElseLoad
    /// Use any stored response, however old; never touch the network (fails with `resourceUnavailable`).
    case returnCacheDataDontLoad
}

public enum RequestBody: Sendable {
    /// The whole body in memory; sent with Content-Length.
    case bytes([UInt8])
    /// A body produced by `producer`, which writes chunks and returns when done. With a
    /// `length` the body is sent with Content-Length (and must be exactly that long);
    /// without one it is sent chunked. Each `write` suspends until the bytes reached the socket.
    case stream(length: Int64?, producer: @Sendable (RequestBodyWriter) async throws -> Void)

    /// The length, when known up front.
    public var knownLength: Int64? {
        switch self {
        case .bytes(let b): return Int64(b.count)
        case .stream(let l, _): return l
        }
    }
}

/// A buffered response: the final head, the whole body, and the task's metrics.
public struct HTTPClientResponse: Sendable {
    public var head: HTTPResponseHead
    public var body: [UInt8]
    public var metrics: TaskMetrics

    public var status: Int { self.head.status }
    public var headers: HTTPHeaders { self.head.headers }
}

/// Where a request goes on the wire: what the pool keys connections by.
public struct ConnectionKey: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String   // "http" or "https"
    public var host: String
    public var port: Int
    /// The proxy connections to this origin go through, if any (they are pooled apart).
    public var proxy: ProxyTarget? = nil

    public var description: String {
        "\(self.scheme)://\(self.host):\(self.port)" + (self.proxy.map { " via \($0.server)" } ?? "")
    }
}

extension HTTPClientRequest {
    /// Validates the URL and derives the connection key, request target and Host value.
    func wireInfo() throws(HawserError) -> (key: ConnectionKey, target: String, hostHeader: String) {
        guard let scheme = self.url.scheme?.lowercased() else {
            throw HawserError(.unsupportedURL, "URL has no scheme", url: self.url)
        }
        guard scheme == "http" || scheme == "https" else {
            throw HawserError(.unsupportedURL, "unsupported URL scheme '\(scheme)'", url: self.url)
        }
        guard var host = self.url.host(percentEncoded: false), !host.isEmpty else {
            throw HawserError(.invalidRequest, "URL has no host", url: self.url)
        }
        if host.utf8.first == UInt8(ascii: "["), host.utf8.last == UInt8(ascii: "]") { host = String(host.dropFirst().dropLast()) }
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
        return (ConnectionKey(scheme: scheme, host: needsLowering ? host.lowercased() : host, port: port), target, hostHeader)
    }
}
