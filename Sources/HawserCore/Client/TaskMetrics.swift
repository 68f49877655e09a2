import CHawser

/// Timings of one task, in nanoseconds of the monotonic clock (`nil` when a phase did not happen,
/// e.g. no DNS or connect on a reused connection). Like URLSessionTaskTransactionMetrics.
public struct TaskMetrics: Sendable, Hashable {
    public var fetchStart: UInt64 = 0
    public var domainLookupStart: UInt64?
    public var domainLookupEnd: UInt64?
    public var connectStart: UInt64?
    public var connectEnd: UInt64?
    public var secureConnectionStart: UInt64?
    public var secureConnectionEnd: UInt64?
    /// For a new TLS connection: whether the handshake resumed an earlier session.
    public var isResumedTLSSession: Bool?
    /// The TLS protocol version ("TLSv1.3") and cipher suite of the connection, if TLS.
    public var tlsProtocolVersion: String?
    public var tlsCipherSuite: String?
    /// The protocol the server selected with ALPN ("http/1.1"), if TLS and it selected one.
    public var tlsALPN: String?
    public var requestStart: UInt64?
    public var requestEnd: UInt64?
    public var responseStart: UInt64?
    public var responseEnd: UInt64?
    /// The request went out on a kept-alive connection that served earlier requests.
    public var isReusedConnection = false
    /// How many times the task was retried on a fresh connection after a stale one failed.
    public var retryCount = 0
    /// The response came from the session's HTTP cache without a request (`.fresh`), or after a
    /// 304 revalidated the stored one (`.validated`); nil when it came from the network.
    public var cacheUse: CacheUse?
    public enum CacheUse: Sendable, Hashable { case fresh, validated }
    /// How many redirects the task followed (the timings above are those of the last request).
    public var redirectCount = 0
    /// The peer's address.
    public var remoteAddress: SocketAddress?
    /// Bytes of request head and body written to the socket.
    public var bytesSent: Int64 = 0
    /// Bytes of response (head and body, on the wire) read from the socket.
    public var bytesReceived: Int64 = 0

    public init() {}

    /// Nanoseconds between two marks, or nil if either is missing.
    public static func span(_ a: UInt64?, _ b: UInt64?) -> UInt64? {
        guard let a, let b, b >= a else { return nil }
        return b - a
    }

    /// The current monotonic time in nanoseconds, the clock these metrics use.
    public static func now() -> UInt64 { CHawser_monotonic_ns() }
}
