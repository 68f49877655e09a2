// HawserError as Foundation reads errors: `errorDescription` in NSURLErrorDomain's own words
// (what an NSURLSession error's localizedDescription says, e.g. -1202 naming the host), and
// `failureReason` with Hawser's detail. LocalizedError is in FoundationEssentials; the
// CustomNSError half (domain, code, userInfo) needs full Foundation and is in HawserFoundation.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension HawserError: LocalizedError {
    /// What Foundation's URL loading says for this error's `NSURLErrorDomain` code
    /// (``urlErrorCode``), e.g. "The request timed out." for -1001 and, for -1202, "The
    /// certificate for this server is invalid. You might be connecting to a server that is
    /// pretending to be “HOST” which could put your confidential information at risk."
    public var errorDescription: String? {
        switch self.code {
        case .cancelled, .sessionShutDown: return "cancelled"
        case .invalidRequest, .badURL: return "bad URL"
        case .unsupportedURL: return "unsupported URL"
        case .connectTimeout, .idleTimeout, .resourceTimeout: return "The request timed out."
        case .cannotResolveHost: return "A server with the specified hostname could not be found."
        case .cannotConnect, .proxyError: return "Could not connect to the server."
        case .connectionLost: return "The network connection was lost."
        case .tooManyRedirects: return "too many HTTP redirects"
        case .resourceUnavailable: return "resource unavailable"
        case .protocolError, .redirectRefused: return "bad server response"
        case .userCancelledAuthentication: return "The user cancelled the authentication challenge."
        case .userAuthenticationRequired: return "The server requires authentication."
        case .cannotDecodeContent: return "cannot decode raw data"
        case .limitExceeded: return "resource exceeds maximum size"
        case .secureConnectionFailed:
            return "An SSL error has occurred and a secure connection to the server cannot be made."
        case .serverCertificateUntrusted:
            return
                "The certificate for this server is invalid. You might be connecting to a server that is pretending to be “\(self.hostForDescription)” which could put your confidential information at risk."
        case .clientCertificateRequired: return "The server “\(self.hostForDescription)” requires a client certificate."
        case .ioError: return "The operation could not be completed."
        }
    }

    /// Hawser's own account of what exactly went wrong (``message``).
    public var failureReason: String? { self.message }

    private var hostForDescription: String { self.url?.host(percentEncoded: false) ?? "" }
}
