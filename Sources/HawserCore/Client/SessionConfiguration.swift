import CHawser
import HawserAuth
import HawserBase
import HawserCache
import HawserCoding
import HawserCookies
import HawserHTTP1
import HawserProxy
import HawserTLS

#if Logging
import Logging
#endif

/// Settings of a ``Session`` (the NSURLSessionConfiguration role).
public struct SessionConfiguration: Sendable {
    /// Seconds allowed for resolving, connecting (and, for HTTPS, the handshake). Default 30.
    /// One deadline for the whole of it, every Happy Eyeballs attempt included, as curl's
    /// `--connect-timeout`: a host's addresses are tried side by side, not one budget each.
    public var connectTimeout: Double = 30
    /// Happy Eyeballs' Connection Attempt Delay (RFC 8305 §5), in seconds: when a host has
    /// several addresses, each next attempt starts this long after the one before it started
    /// (or at once when that one fails), while the earlier ones go on. Default 0.25, RFC 8305's
    /// recommendation; kept within its bounds, 0.01 to 2.
    public var connectionAttemptDelay: Double = 0.25
    /// Host names answered without DNS: host (lower-case; A-labels for an internationalized
    /// name) → IP addresses, tried as a resolver's answer would be (Happy Eyeballs). The
    /// connection goes to those addresses while the Host field, SNI, the certificate's name check
    /// and cookies keep the name (AsyncHTTPClient's `dnsOverride`, curl's `--resolve`). An entry
    /// that is not an IP address fails the request with `invalidRequest`. A key `HOST` applies
    /// to every port; a key `HOST:PORT` (`[ADDRESS]:PORT` for an IPv6 literal) to that port
    /// only, and is taken first. Applies to every request of the session, redirects included,
    /// and to a proxy's name too.
    public var dnsOverride: [String: [String]] = [:]
    /// Seconds allowed between two bytes moving in either direction (timeoutIntervalForRequest). Default 60.
    public var timeoutIntervalForRequest: Double = 60
    /// Seconds allowed for the whole task (timeoutIntervalForResource). Default 7 days, as URLSession.
    public var timeoutIntervalForResource: Double = 7 * 24 * 3600
    /// Connections kept per origin, in use and idle together (httpMaximumConnectionsPerHost). Default 6.
    public var maximumConnectionsPerHost: Int = 6
    /// Seconds an idle keep-alive connection stays in the pool. Default 60.
    public var idleConnectionTimeout: Double = 60
    /// Header fields added to every request that does not set them itself. Default: one field,
    /// `User-Agent: Hawser/<version>` (``HawserVersion/userAgentProduct``).
    public var httpAdditionalHeaders: HTTPHeaders = ["User-Agent": HawserVersion.userAgentProduct]
    /// Parser limits for response heads and chunked framing.
    public var parserLimits: HTTP1Limits = .default
    /// What the response parser does with a header field folded onto the next line (obs-fold):
    /// replace each fold with SP, as RFC 9112 §5.2 asks of a user agent (the default), or
    /// refuse the response (`HTTP1ParseError.Kind.obsoleteLineFolding`).
    public var obsoleteLineFolding: HTTP1ObsoleteLineFolding = .replaceWithSpace
    /// The largest body the buffered APIs collect in memory before failing with `limitExceeded`.
    /// Default 256 MiB. Streaming delegates are not limited.
    public var maximumBufferedBodySize: Int = 256 * 1024 * 1024
    /// The most bytes a second each task of the session receives (libcurl's
    /// `CURLOPT_MAX_RECV_SPEED_LARGE`, curl's `--limit-rate`); nil (the default) or 0: no limit.
    /// Counted on what arrives from the connection (the head, the body as framed, before content
    /// decoding; over TLS, the decrypted bytes), across the task's redirects and replays. The
    /// limit applies to each task on its own, as libcurl's applies to each transfer: four tasks
    /// at once may receive four times as much. When a task is ahead of its limit the connection
    /// stops reading (TCP then slows the server down) and one event-loop timer resumes it: no
    /// thread sleeps and nothing polls. It works together with a streaming consumer's
    /// back-pressure (reading resumes when both allow). A request's own
    /// `HTTPClientRequest.maximumReceiveBytesPerSecond` replaces this one for that request.
    public var maximumReceiveBytesPerSecond: Int64? = nil
    /// The most bytes a second each task of the session sends (libcurl's
    /// `CURLOPT_MAX_SEND_SPEED_LARGE`, curl's `--limit-rate` for uploads); nil (the default) or
    /// 0: no limit. Counted on what is handed to the connection (the head and the body as
    /// framed), per task as ``maximumReceiveBytesPerSecond`` is. When a task is ahead of its limit
    /// the connection stops writing and one event-loop timer resumes it; a streamed body's
    /// `write` waits meanwhile (back-pressure). A request's own
    /// `HTTPClientRequest.maximumSendBytesPerSecond` replaces this one for that request.
    public var maximumSendBytesPerSecond: Int64? = nil
    /// Bytes read from a socket per read call. Default 64 KiB.
    public var readChunkSize: Int = 64 * 1024
    /// Bodies of at least this many bytes (or of unknown length) are sent with
    /// `Expect: 100-continue` unless the request says otherwise; nil: only when a request asks.
    public var expectContinueThreshold: Int64? = 1024 * 1024
    /// How long to wait for `100 Continue` (or a final status) before sending the body anyway.
    public var expectContinueTimeout: Double = 1.0
    /// Send `Accept-Encoding` with every coding the build decodes (`ContentDecoder.acceptEncoding`:
    /// `gzip, deflate, br, zstd` with the default traits; unless the request sets its own) and
    /// decode such bodies as they arrive; the delegate sees decoded bytes, the metrics count wire
    /// bytes, and the head keeps its `Content-Encoding` and `Content-Length` (of the coded body).
    /// Codings the build does not decode (br without the trait `Brotli`, zstd without `Zstd`,
    /// compress) pass through undecoded.
    public var automaticallyDecodesContent = true
    /// Bounds on decoded size and expansion ratio (a decompression bomb is a `cannotDecodeContent` error).
    public var decodingLimits = DecodingLimits.default
    /// The cookie jar (RFC 6265) the session sends cookies from and stores `Set-Cookie` in;
    /// in memory by default, one per configuration value (copies share it). nil: no cookies.
    public var httpCookieStorage: CookieJar? = CookieJar()
    /// Send and store cookies for requests that do not say otherwise (`shouldHandleCookies`).
    /// A request that sets its own `Cookie` field gets no cookies added from the jar.
    public var httpShouldSetCookies = true
    /// Proxies (HTTP forward, CONNECT tunnels for https, `https://` proxies reached over TLS,
    /// SOCKS5). By default the environment's `http_proxy`, `https_proxy`, `all_proxy` and
    /// `no_proxy`, read once per process the way curl reads them (a variable that cannot be
    /// parsed fails the requests that would use it, with `proxyError` naming it); `.none` for a
    /// direct connection whatever the environment says.
    public var proxy: ProxyConfiguration = ProxyConfiguration.processEnvironment
    /// Decides whether an `https://` proxy's certificate chain is trusted, for the proxy's host
    /// name: nil means `DefaultTrustEvaluator` (the system store, the proxy's name checked).
    /// Apart from ``serverTrustEvaluator``, which decides about origins (also inside a tunnel
    /// through an https proxy); delegates are not asked about the proxy. A refusal fails the
    /// request with `serverCertificateUntrusted`, naming the proxy.
    public var proxyTrustEvaluator: (any ServerTrustEvaluating)? = nil
    /// The private HTTP cache (RFC 9111) responses are served from and stored in; nil (the
    /// default) means no caching. `HTTPCache(memoryCapacity:)` or with a disk directory.
    public var urlCache: HTTPCache? = nil
    /// How requests that do not say otherwise use `urlCache`.
    public var requestCachePolicy: CachePolicy = .useProtocolCachePolicy
    /// Credentials offered by default for 401/407 challenges, per protection space; a credential
    /// a delegate answers with (persistence other than `.none`) is stored here. nil: none.
    public var urlCredentialStorage: CredentialStore? = CredentialStore()
    /// Rejected credentials end the exchange after this many attempts (the 401/407 is then the
    /// response); `stale=true` Digest rounds do not count.
    public var maximumAuthenticationFailures = 3
    /// TLS protocol floor, client identity and session resumption for https.
    public var tls = TLSConfiguration()
    /// Decides whether a server's certificate chain is trusted when no delegate decides:
    /// nil means `DefaultTrustEvaluator` (the system store, host name checked). Set a
    /// `SecurityPolicy` or a `ServerTrustManager` to pin.
    public var serverTrustEvaluator: (any ServerTrustEvaluating)? = nil
    /// Which redirects are followed, how many, and whether https may lead to http.
    public var redirects = RedirectConfiguration()

    /// Answers requests in-process before any IO, for tests of code that uses Hawser: a
    /// ``StubResponder`` (routes per URL, a closure, delays, failures) or any ``HTTPResponder``.
    /// nil (the default): every request goes to the network, and the request path checks this
    /// one optional. See ``StubAnswer`` for what a stubbed answer goes through and what it skips.
    public var responder: (any HTTPResponder)? = nil

    /// Tracing, metrics or anything else that watches requests (`HawserTracing`'s
    /// `TracingInstrumentation`, `HawserMetrics`' `MetricsInstrumentation`; several at once with
    /// ``CombinedInstrumentation``). nil (the default): requests are not watched, at no cost.
    public var instrumentation: (any RequestInstrumentation)? = nil
    #if Logging
    /// Where the session logs its requests (swift-log; trait "Logging", on by default): one
    /// `debug` line per request when it ends, each head as sent and as received at `trace`
    /// (`Authorization`, `Proxy-Authorization`, `Cookie` and `Set-Cookie` values redacted).
    /// A request given its own logger (`Session.execute(_:logger:delegate:)`) logs there instead.
    /// nil (the default): nothing is logged and no log call is made.
    public var logger: Logger? = nil
    #endif
    /// How query strings appear in logged URLs and request lines (`url.full`, the request head
    /// at `trace`). ``QueryLogging/redactingValues`` by default: tokens often travel in query
    /// strings, and logs are kept longer and read by more people than the requests themselves.
    public var queryLogging: QueryLogging = .redactingValues

    /// Creates the defaults documented on each property.
    public init() {}

    /// The defaults.
    public static var `default`: SessionConfiguration { SessionConfiguration() }
}

/// How a query string is written where a URL is logged or traced.
public enum QueryLogging: Sendable, Hashable {
    /// Every value replaced by `REDACTED`, the names kept (`?token=REDACTED&page=REDACTED`), as
    /// OpenTelemetry's conventions redact `url.full`; a component without `=` becomes `REDACTED`.
    case redactingValues
    /// The query string as sent.
    case verbatim

    /// `query` (without its `?`) as this rule writes it.
    public func apply(toQuery query: Substring) -> String {
        switch self {
        case .verbatim:
            return String(query)
        case .redactingValues:
            var out = ""
            out.reserveCapacity(query.utf8.count)
            var first = true
            for part in query.split(separator: "&", omittingEmptySubsequences: false) {
                if !first { out += "&" }
                first = false
                if part.isEmpty { continue }
                if let eq = part.firstIndex(of: "=") {
                    out += part[..<eq]
                    out += "=REDACTED"
                } else {
                    out += "REDACTED"
                }
            }
            return out
        }
    }

    /// `target` (a request target or a URL) with its query string written by this rule; the
    /// fragment, if any, is dropped when the query is redacted.
    public func apply(toTarget target: String) -> String {
        guard self != .verbatim, let q = target.firstIndex(of: "?") else { return target }
        var query = target[target.index(after: q)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        return String(target[...q]) + self.apply(toQuery: query)
    }
}
