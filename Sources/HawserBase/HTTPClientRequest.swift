import HawserHTTP1

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request for the engine: method, absolute URL, header fields and body.
public struct HTTPClientRequest: Sendable {
    /// The request method; `GET` by default.
    public var method: HTTPMethod
    /// The absolute `http` or `https` URL. Anything else (no scheme, another scheme, no host) fails
    /// the task with `invalidRequest` before a connection is made. User info in it answers a 401.
    public var url: URL
    /// Header fields, sent in this order after `Host` (the URL's, unless set here). The session
    /// adds its `httpAdditionalHeaders`, cookies and `Accept-Encoding` where these do not set
    /// them; with a body, `Content-Length` and `Transfer-Encoding` set here are replaced by the
    /// session's own framing. A CR, LF or NUL in a name or value fails with `invalidRequest`.
    public var headers: HTTPHeaders
    /// The body, or nil for none.
    public var body: RequestBody?
    /// Overrides the session's idle timeout (timeoutIntervalForRequest), in seconds: how long
    /// the task may go without a byte moving either way. Bytes that keep coming, however slowly,
    /// keep it from firing; ``timeoutIntervalForResource`` bounds the whole task.
    public var timeoutInterval: Double?
    /// Overrides the session's total deadline (timeoutIntervalForResource), in seconds: the
    /// most the whole task may take, counted from when it is started to its completion, across
    /// waiting for a connection, resolving, connecting, the TLS handshake, sending the body,
    /// receiving the response, redirects, authentication rounds and replays. When it passes the
    /// task fails with `resourceTimeout` (URLError's -1001, timed out), whatever is moving; a
    /// peer that trickles a byte now and then keeps the idle timeout quiet but not this one
    /// (AsyncHTTPClient's per-request deadline, curl's `--max-time`). nil means the
    /// configuration's `timeoutIntervalForResource` (7 days by default).
    public var timeoutIntervalForResource: Double?
    /// The most bytes a second this request's task receives, replacing the session's
    /// `maximumReceiveBytesPerSecond` (libcurl's `CURLOPT_MAX_RECV_SPEED_LARGE`); nil means the
    /// session's limit, 0 means none for this request. Counted on the bytes that arrive from the
    /// connection (head and body as framed, before content decoding), for the whole task
    /// (redirects and replays included); when the task is ahead, its connection stops reading
    /// until an event-loop timer says the limit allows more.
    public var maximumReceiveBytesPerSecond: Int64?
    /// The most bytes a second this request's task sends, replacing the session's
    /// `maximumSendBytesPerSecond` (libcurl's `CURLOPT_MAX_SEND_SPEED_LARGE`); nil means the
    /// session's limit, 0 means none for this request. Counted on the bytes handed to the
    /// connection (head and body as framed); when the task is ahead, its connection stops
    /// writing (and a streamed body's `write` waits) until an event-loop timer allows more.
    public var maximumSendBytesPerSecond: Int64?
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

    /// Creates a request; every other setting starts at nil (the session's configuration decides).
    ///
    /// - Parameters:
    ///   - method: the method; `GET` by default.
    ///   - url: the absolute `http` or `https` URL.
    ///   - headers: header fields; none by default.
    ///   - body: the body; none by default.
    public init(method: HTTPMethod = .get, url: URL, headers: HTTPHeaders = [:], body: RequestBody? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

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

/// A request body: bytes in memory, or a stream produced on demand with back-pressure.
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
    /// The final response head (interim 1xx heads are not kept).
    public var head: HTTPResponseHead
    /// The whole body, decoded when the session decodes content (gzip, deflate, br, zstd). At most
    /// the configuration's `maximumBufferedBodySize` bytes: a longer one fails with `limitExceeded`.
    public var body: [UInt8]
    /// Timings and byte counts of the task (of its last request, after redirects).
    public var metrics: TaskMetrics

    /// A response made of its parts.
    public init(head: HTTPResponseHead, body: [UInt8], metrics: TaskMetrics = TaskMetrics()) {
        self.head = head
        self.body = body
        self.metrics = metrics
    }

    /// The status code of the final head.
    public var status: Int { self.head.status }
    /// The header fields of the final head.
    public var headers: HTTPHeaders { self.head.headers }
    /// The redirects followed on the way to this response, in order (the metrics'
    /// ``TaskMetrics/redirects``); empty when there were none.
    public var redirects: [RedirectHop] { self.metrics.redirects }
}

/// Writes a streamed request body (the producer of ``RequestBody/stream(length:producer:)``
/// gets one). Each ``write(_:)`` suspends until the bytes were handed to the socket
/// (back-pressure), and throws if the task ended meanwhile.
public final class RequestBodyWriter: Sendable {
    package let sink: any RequestBodySink

    package init(sink: any RequestBodySink) { self.sink = sink }

    /// Sends `bytes` as the next part of the body. Throws the task's error (or `cancelled`) if
    /// the task ended or moved on (a redirect) before they could be sent.
    public func write(_ bytes: [UInt8]) async throws {
        if bytes.isEmpty { return }
        try await self.sink.write(bytes)
    }
}

/// Where a ``RequestBodyWriter``'s bytes go: the engine's task.
package protocol RequestBodySink: AnyObject, Sendable {
    func write(_ bytes: [UInt8]) async throws
}
