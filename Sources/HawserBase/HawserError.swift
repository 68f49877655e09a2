#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one error type of the engine: what went wrong, where, and what was underneath.
///
/// Match on ``code``; ``underlying`` carries the typed cause (an `IOError`, an
/// `HTTP1ParseError`, a `ResolutionError` …) when there is one.
public struct HawserError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: Sendable, Hashable {
        /// The task was cancelled by its owner.
        case cancelled
        /// The request itself is unusable (a URL without a host, an invalid header…).
        case invalidRequest
        /// The URL cannot be used as it is written (URLError's -1000, bad URL): a port that is not
        /// a number in 1...65535, a space, backslash or control byte in the authority, more than
        /// one `@`, a user part with a backslash or a control byte, or a host that is not a valid
        /// domain name (UTS #46 / IDNA). Checked before any IO, for every request and redirect.
        case badURL
        /// The URL has no scheme, or one other than http and https (URLError's -1002,
        /// unsupported URL).
        case unsupportedURL
        /// The host name could not be resolved.
        case cannotResolveHost
        /// Every address refused or failed the TCP connect.
        case cannotConnect
        /// Establishing the connection (DNS, TCP, TLS) took longer than the connect timeout.
        case connectTimeout
        /// No bytes moved for longer than `timeoutIntervalForRequest`.
        case idleTimeout
        /// The whole task took longer than `timeoutIntervalForResource`.
        case resourceTimeout
        /// The connection was reset or closed before the response was complete.
        case connectionLost
        /// The peer sent bytes that are not valid HTTP/1.1 (see ``underlying``).
        case protocolError
        /// A body or head exceeded a configured limit.
        case limitExceeded
        /// The session was shut down (or its event loop stopped) with this task pending.
        case sessionShutDown
        /// Any other system-call failure (see ``underlying``).
        case ioError
        /// A redirect chain went past the configured maximum, or a redirect was refused
        /// (an HTTPS → HTTP downgrade, a loop, an unusable `Location`).
        case tooManyRedirects
        /// A redirect was refused: its `Location` is not a valid URL, is not http or https with a host,
        /// or leads from https to http while `RedirectConfiguration/allowsInsecureDowngrade` is off.
        case redirectRefused
        /// The TLS handshake failed (protocol version, alert, garbage instead of a ServerHello).
        case secureConnectionFailed
        /// The server's certificate chain was refused by the trust evaluation or the
        /// security policy (URLError's -1202). `underlying` says why.
        case serverCertificateUntrusted
        /// The server asked for a client certificate and none was given or it was refused.
        case clientCertificateRequired
        /// A content coding (gzip, deflate, br, zstd) could not be decoded, or decoding went past its bounds.
        case cannotDecodeContent
        /// The server demanded authentication that the delegates and credentials could not satisfy.
        case userAuthenticationRequired
        /// Authentication was cancelled by a challenge handler.
        case userCancelledAuthentication
        /// A proxy refused the tunnel or the request, or spoke nonsense.
        case proxyError
        /// A cache-only request (`returnCacheDataDontLoad`) found nothing usable in the cache.
        case resourceUnavailable
    }

    /// What went wrong, the value to match on (see ``urlErrorCode`` for URLSession's number).
    public var code: Code
    /// Human-readable detail: what exactly was wrong.
    public var message: String
    /// The URL of the request, when known.
    public var url: URL?
    /// The error underneath, when there is one.
    public var underlying: (any Error & Sendable)?
    /// What the TLS layer knows about the peer of a failed handshake, type-erased so that this
    /// module needs no TLS types: HawserTLS stores a `ServerTrust` here and reads it back as
    /// `peerTrust` and `peerCertificates`.
    package var peerDetail: (any Sendable)?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: what went wrong.
    ///   - message: what exactly was wrong, in words.
    ///   - url: the URL of the request that failed, when there is one.
    ///   - underlying: the lower-level error that caused it, when there is one.
    public init(_ code: Code, _ message: String, url: URL? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.url = url
        self.underlying = underlying
    }

    /// The `NSURLErrorDomain` code Foundation would report for this error, for code that
    /// matches on those numbers (Hawser does not link FoundationNetworking, so it has no `URLError`).
    public var urlErrorCode: Int {
        switch self.code {
        case .cancelled: return -999
        case .invalidRequest, .badURL: return -1000
        case .unsupportedURL: return -1002
        case .connectTimeout, .idleTimeout, .resourceTimeout: return -1001
        case .cannotResolveHost: return -1003
        case .cannotConnect: return -1004
        case .connectionLost: return -1005
        case .tooManyRedirects: return -1007
        case .resourceUnavailable: return -1008
        case .protocolError, .redirectRefused: return -1011
        case .userCancelledAuthentication: return -1012
        case .userAuthenticationRequired: return -1013
        case .cannotDecodeContent: return -1015
        case .limitExceeded: return -1103
        case .secureConnectionFailed: return -1200
        case .serverCertificateUntrusted: return -1202
        case .clientCertificateRequired: return -1206
        case .proxyError: return -1004
        case .sessionShutDown: return -999
        case .ioError: return -1
        }
    }

    /// Whether the error is one of the three timeouts: connect, idle (between two bytes) or resource (the whole task).
    public var isTimeout: Bool {
        self.code == .connectTimeout || self.code == .idleTimeout || self.code == .resourceTimeout
    }

    public var description: String {
        var s = "\(self.code): \(self.message)"
        if let u = self.url { s += " (\(u.absoluteString))" }
        return s
    }

    package func with(url: URL) -> HawserError {
        var e = self
        if e.url == nil { e.url = url }
        return e
    }
}
