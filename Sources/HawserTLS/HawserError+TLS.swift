import HawserBase

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The certificate details of a `HawserError`: HawserBase knows no TLS types, so the trust of a
// refused handshake travels in its type-erased `peerDetail`, read and written here.
extension HawserError {
    /// For TLS failures after a handshake (`serverCertificateUntrusted`): the server's trust as it
    /// was evaluated, the host checked and the chain presented, leaf first (the role of
    /// NSURLSession's `NSURLErrorFailingURLPeerTrustErrorKey`, a `SecTrust`).
    public var peerTrust: ServerTrust? {
        get { self.peerDetail as? ServerTrust }
        set { self.peerDetail = newValue }
    }

    /// The chain the server presented, leaf first (``peerTrust``'s certificates). Setting it
    /// keeps ``peerTrust``'s host, or takes the URL's when there is no trust yet.
    public var peerCertificates: [Certificate]? {
        get { self.peerTrust?.certificates }
        set {
            guard let newValue else {
                self.peerTrust = nil
                return
            }
            let host = self.peerTrust?.host ?? self.url?.host(percentEncoded: false) ?? ""
            self.peerTrust = ServerTrust(host: host, certificates: newValue)
        }
    }

    /// The engine's error for a TLS set-up failure: `clientCertificateRequired` when the
    /// client's identity could not be loaded, `secureConnectionFailed` otherwise.
    ///
    /// - Parameters:
    ///   - error: what could not be set up.
    ///   - url: the URL of the request, when there is one.
    public init(_ error: TLSError, url: URL? = nil) {
        let code: Code = error.kind == .clientIdentity ? .clientCertificateRequired : .secureConnectionFailed
        self.init(code, error.message, url: url, underlying: error)
    }

    /// The error for a server trust that was refused (AFNetworking's
    /// `AFServerTrustErrorForServerTrust`): `serverCertificateUntrusted` (-1202), carrying `trust`
    /// as ``peerTrust`` (so its chain as ``peerCertificates``), `url` as the failing URL, and
    /// `failure`, when given, as the underlying error and the reason in the message. A
    /// challenge handler that refuses a chain itself can fail its task with the same error the
    /// engine gives.
    ///
    /// - Parameters:
    ///   - trust: the server's trust that was refused: the host checked and the chain presented.
    ///   - url: the URL of the request, when there is one.
    ///   - failure: why the chain was refused, when known.
    public static func serverTrustError(for trust: ServerTrust, url: URL?, failure: TrustFailure? = nil) -> HawserError
    {
        let reason = failure.map { ": \($0.message)" } ?? ""
        var error = HawserError(
            .serverCertificateUntrusted,
            "the certificate of \(trust.host) is not trusted\(reason)",
            url: url,
            underlying: failure
        )
        error.peerTrust = trust
        return error
    }
}
