#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserHTTP1

/// The one error type of the engine: what went wrong, where, and what was underneath.
///
/// Match on ``code``; ``underlying`` carries the typed cause (an ``IOError``, an
/// ``HTTP1ParseError``, a ``ResolutionError`` …) when there is one.
public struct HawserError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: Sendable, Hashable {
        /// The task was cancelled by its owner.
        case cancelled
        /// The request itself is unusable (bad URL, unsupported scheme, invalid header…).
        case invalidRequest
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
    }

    public var code: Code
    /// Human-readable detail: what exactly was wrong.
    public var message: String
    /// The URL of the request, when known.
    public var url: URL?
    /// The error underneath, when there is one.
    public var underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, url: URL? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.url = url
        self.underlying = underlying
    }

    /// True for failures that are caused by timeouts of any kind.
    public var isTimeout: Bool {
        self.code == .connectTimeout || self.code == .idleTimeout || self.code == .resourceTimeout
    }

    public var description: String {
        var s = "\(self.code): \(self.message)"
        if let u = self.url { s += " (\(u.absoluteString))" }
        return s
    }

    func with(url: URL) -> HawserError {
        var e = self
        if e.url == nil { e.url = url }
        return e
    }
}
