import HawserHTTP1
import HawserPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Timings of one task, in nanoseconds of the monotonic clock (`nil` when a phase did not happen,
/// e.g. no DNS or connect on a reused connection). Like URLSessionTaskTransactionMetrics.
public struct TaskMetrics: Sendable, Hashable {
    /// When the task was handed to the session's pool (resumed).
    public var fetchStart: UInt64 = 0
    /// When name resolution began; nil for an IP literal or a reused connection.
    public var domainLookupStart: UInt64?
    /// When name resolution ended.
    public var domainLookupEnd: UInt64?
    /// When the first TCP connect began; nil on a reused connection.
    public var connectStart: UInt64?
    /// When the TCP connection was established, before any proxy handshake or TLS.
    public var connectEnd: UInt64?
    /// When the TLS handshake began; nil for plain HTTP and on a reused connection.
    public var secureConnectionStart: UInt64?
    /// When the TLS handshake ended, the server's chain accepted.
    public var secureConnectionEnd: UInt64?
    /// For a new TLS connection: whether the handshake resumed an earlier session.
    public var isResumedTLSSession: Bool?
    /// The TLS protocol version ("TLSv1.3") and cipher suite of the connection, if TLS.
    public var tlsProtocolVersion: String?
    /// The TLS cipher suite in OpenSSL's naming (`TLS_AES_128_GCM_SHA256`), if TLS.
    public var tlsCipherSuite: String?
    /// The protocol the server selected with ALPN ("http/1.1"), if TLS and it selected one.
    public var tlsALPN: String?
    /// When the request head was handed to the connection.
    public var requestStart: UInt64?
    /// When the last byte of the request (head and body) was written to the socket.
    public var requestEnd: UInt64?
    /// When the first byte of the response arrived.
    public var responseStart: UInt64?
    /// When the response ended (or the task failed).
    public var responseEnd: UInt64?
    /// The request went out on a kept-alive connection that served earlier requests.
    public var isReusedConnection = false
    /// How many times the task was retried on a fresh connection after a stale one failed.
    public var retryCount = 0
    /// The response came from the session's HTTP cache without a request (`.fresh`), or after a
    /// 304 revalidated the stored one (`.validated`); nil when it came from the network.
    public var cacheUse: CacheUse?
    /// How the session's HTTP cache answered a task.
    public enum CacheUse: Sendable, Hashable {
        /// A stored response was fresh and served without a request.
        case fresh
        /// A stored response was revalidated: the server answered 304 Not Modified.
        case validated
    }
    /// How many redirects the task followed (the timings above are those of the last request).
    public var redirectCount = 0
    /// Each redirect the task followed, in order: the request that got it, its status, where it
    /// led, and its timing (URLSessionTaskMetrics' `transactionMetrics` keeps one entry per
    /// hop the same way). Empty when the task followed none; ``redirectCount`` is its length.
    public var redirects: [RedirectHop] = []
    /// The peer's address.
    public var remoteAddress: SocketAddress?
    /// For a new connection: every connect attempt, in the order they started (Happy Eyeballs
    /// races the addresses of a name); empty on a reused connection. The one that won has the
    /// outcome ``ConnectAttempt/Outcome/won`` and is ``remoteAddress``.
    public var connectAttempts: [ConnectAttempt] = []
    /// Bytes of request head and body written to the socket.
    public var bytesSent: Int64 = 0
    /// Bytes of response (head and body, on the wire) read from the socket.
    public var bytesReceived: Int64 = 0

    /// Creates empty metrics: every mark nil, every count zero.
    public init() {}

    /// Nanoseconds between two marks, or nil if either is missing.
    public static func span(_ a: UInt64?, _ b: UInt64?) -> UInt64? {
        guard let a, let b, b >= a else { return nil }
        return b - a
    }

    /// The current monotonic time in nanoseconds, the clock these metrics use.
    public static func now() -> UInt64 { Posix.monotonicNanoseconds() }
}

/// One connect attempt of a new connection: to which address, when it started and ended (the
/// loop's clock, nanoseconds), and how it ended.
public struct ConnectAttempt: Sendable, Hashable {
    /// How an attempt ended.
    public enum Outcome: Sendable, Hashable {
        /// It connected first: the connection uses it.
        case won
        /// The connect failed; the reason as the system gave it.
        case failed(String)
        /// Another attempt won, or the connect timed out, while it was still connecting.
        case abandoned
    }

    /// Where the attempt connected to.
    public var address: SocketAddress
    /// When the attempt started.
    public var start: UInt64
    /// When it ended; nil while it runs.
    public var end: UInt64?
    /// How it ended; nil while it runs.
    public var outcome: Outcome?

    /// An attempt record.
    public init(address: SocketAddress, start: UInt64, end: UInt64? = nil, outcome: Outcome? = nil) {
        self.address = address
        self.start = start
        self.end = end
        self.outcome = outcome
    }
}

/// One redirect a task followed: the request that got it, the 3xx that answered, where the
/// task went next, and when (the loop's clock, nanoseconds, as the rest of ``TaskMetrics``).
public struct RedirectHop: Sendable, Hashable {
    /// The URL requested.
    public var url: URL
    /// The method it was requested with.
    public var method: HTTPMethod
    /// The redirect's status (301, 302, 303, 307 or 308).
    public var statusCode: Int
    /// Where the task went next: the `Location` resolved against ``url``, or what the
    /// will-perform-redirection hook chose instead.
    public var location: URL
    /// When this hop's exchange began: the task's ``TaskMetrics/fetchStart`` for the first hop,
    /// the previous hop's ``end`` for the others.
    public var start: UInt64
    /// When its request head was handed to a connection; nil if it never reached one (a
    /// redirect the cache answered).
    public var requestStart: UInt64?
    /// When the redirect's head arrived.
    public var responseStart: UInt64?
    /// When the redirect was followed: the next request was prepared.
    public var end: UInt64
    /// Whether the request went out on a kept-alive connection.
    public var isReusedConnection: Bool

    /// A hop record.
    public init(
        url: URL,
        method: HTTPMethod,
        statusCode: Int,
        location: URL,
        start: UInt64,
        requestStart: UInt64? = nil,
        responseStart: UInt64? = nil,
        end: UInt64,
        isReusedConnection: Bool = false
    ) {
        self.url = url
        self.method = method
        self.statusCode = statusCode
        self.location = location
        self.start = start
        self.requestStart = requestStart
        self.responseStart = responseStart
        self.end = end
        self.isReusedConnection = isReusedConnection
    }

    /// Nanoseconds from ``start`` to ``end``: what this hop added to the task.
    public var duration: UInt64 { self.end >= self.start ? self.end - self.start : 0 }
}
