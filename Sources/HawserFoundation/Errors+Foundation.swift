// The errors as NSErrors, for code written against AFNetworking's: NSURLErrorDomain with
// NSURLSession's codes and user-info keys for the engine's and the manager's errors, AF's
// serialization domains and keys for the serializers'. CustomNSError is in full Foundation only,
// so these conformances live here; `Hawser` gives the LocalizedError half.
import Foundation
import Hawser
import HawserCore

extension HawserError: CustomNSError {
    /// `NSURLErrorDomain`, as NSURLSession's errors.
    public static var errorDomain: String { NSURLErrorDomain }

    // `errorCode` (the `NSURLErrorDomain` code: -1001, -1202 …) is `HawserFailure`'s, in Hawser.

    /// `NSURLErrorFailingURLPeerTrustErrorKey`: under it, a -1202 error's user info holds the
    /// server's trust (a `ServerTrust`: the host checked and the chain presented), where
    /// NSURLSession and AFNetworking put the `SecTrust`.
    public static let failingURLPeerTrustErrorKey = "NSURLErrorFailingURLPeerTrustErrorKey"

    /// What an NSURLSession error carries: the description in Foundation's words, the failing
    /// URL and its string, the server's trust (``failingURLPeerTrustErrorKey``) when a chain was
    /// refused, the underlying error, and Hawser's detail as the failure reason.
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedFailureReasonErrorKey: self.message]
        if let d = self.errorDescription { info[NSLocalizedDescriptionKey] = d }
        if let url = self.url {
            info[NSURLErrorFailingURLErrorKey] = url
            info[failingURLStringKey] = url.absoluteString
        }
        if let trust = self.peerTrust { info[Self.failingURLPeerTrustErrorKey] = trust }
        if let underlying = self.underlying { info[NSUnderlyingErrorKey] = underlying as NSError }
        return info
    }
}

extension SessionManagerError: CustomNSError {
    /// `NSURLErrorDomain`, with the code Foundation would report (`SessionManagerError/urlErrorCode`).
    public static var errorDomain: String { NSURLErrorDomain }
    // `errorCode` is `HawserFailure`'s, in Hawser.
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: self.description]
        switch self {
        case .adapterFailed(let underlying), .cannotMoveDownloadedFile(_, let underlying):
            info[NSUnderlyingErrorKey] = underlying as NSError
        default:
            break
        }
        return info
    }
}

extension SerializationError {
    /// AFNetworking's `AFNetworkingOperationFailingURLResponseErrorKey`.
    public static let failingURLResponseErrorKey = "com.alamofire.serialization.response.error.response"
    /// AFNetworking's `AFNetworkingOperationFailingURLResponseDataErrorKey`.
    public static let failingURLResponseDataErrorKey = "com.alamofire.serialization.response.error.data"

    /// The error as AFNetworking's NSError: its domain and code (`domain`, `errorCode`) and
    /// its user info — the description, the failure reason where AF gives one, the failing URL,
    /// the response (an `HawserResponse`) and its data under AF's keys, the underlying error.
    /// (`error as NSError` gives the domain, code and description; this adds the rest.)
    public var nsError: NSError {
        var info: [String: Any] = [NSLocalizedDescriptionKey: self.message]
        if let reason = self.failureReason { info[NSLocalizedFailureReasonErrorKey] = reason }
        if let url = self.url {
            info[NSURLErrorFailingURLErrorKey] = url
            info[failingURLStringKey] = url.absoluteString
        }
        if let response = self.response { info[Self.failingURLResponseErrorKey] = response }
        if let data = self.data { info[Self.failingURLResponseDataErrorKey] = Data(data) }
        if let underlying = self.underlying {
            info[NSUnderlyingErrorKey] = (underlying as? SerializationError)?.nsError ?? (underlying as NSError)
        }
        return NSError(domain: self.domain, code: self.errorCode, userInfo: info)
    }
}

/// `NSURLErrorFailingURLStringErrorKey` (deprecated in swift-corelibs-foundation, which prefers
/// the URL; AFNetworking and NSURLSession still set both).
private let failingURLStringKey = "NSErrorFailingURLStringKey"
