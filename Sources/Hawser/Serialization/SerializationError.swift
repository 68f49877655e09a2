import HawserCore

// The error of the serializers and multipart bodies: AFNetworking's two serialization error
// domains folded into one typed error, with AF's userInfo keys as stored properties.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Why a request could not be serialized or a response could not be validated or decoded.
///
/// This is AFNetworking's `NSError` in the serialization domains, as a Swift value:
///
/// | AFNetworking | ``SerializationError`` |
/// |---|---|
/// | `error.domain` | ``domain``: ``responseDomain`` (`com.alamofire.error.serialization.response`), ``requestDomain`` (`com.alamofire.error.serialization.request`) or `NSCocoaErrorDomain` for bodies that do not parse |
/// | `error.code` | ``errorCode`` (-1011, -1016, -1000, 3840 …), derived from ``code`` |
/// | `NSURLErrorFailingURLErrorKey` | ``url`` |
/// | `AFNetworkingOperationFailingURLResponseErrorKey` | ``response`` |
/// | `AFNetworkingOperationFailingURLResponseDataErrorKey` | ``data`` |
/// | `NSUnderlyingErrorKey` | ``underlying`` (chained with AF's `AFErrorWithUnderlyingError` rule, see ``chaining(_:)``) |
/// | the Foundation error a parser returned | ``cause`` |
///
/// Match on ``code``; use ``contains(_:)`` for AF's `AFErrorOrUnderlyingErrorHasCodeInDomain`.
public struct SerializationError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// AFURLResponseSerializationErrorDomain.
    public static let responseDomain = "com.alamofire.error.serialization.response"
    /// AFURLRequestSerializationErrorDomain.
    public static let requestDomain = "com.alamofire.error.serialization.request"
    /// The domain Foundation's JSON and property-list parsers report in (NSCocoaErrorDomain).
    public static let cocoaDomain = "NSCocoaErrorDomain"

    /// What went wrong. Each code has AF's domain and number (``domain``, ``errorCode``).
    public enum Code: Sendable, Hashable {
        /// The status code is not in `acceptableStatusCodes`. Response domain, -1011
        /// (NSURLErrorBadServerResponse).
        case unacceptableStatusCode
        /// The MIME type is not in `acceptableContentTypes` (and the body is not empty).
        /// Response domain, -1016 (NSURLErrorCannotDecodeContentData).
        case unacceptableContentType
        /// The body is not valid JSON / property list / XML, or does not decode into the
        /// requested `Decodable` type. NSCocoaErrorDomain, 3840 (what NSJSONSerialization reports).
        case cannotParseResponse
        /// The URL string does not make an absolute URL, or the URL has no host. Request domain,
        /// -1000 (NSURLErrorBadURL).
        case invalidURL
        /// The URL's scheme is not http or https. Request domain, -1002 (NSURLErrorUnsupportedURL).
        case unsupportedURL
        /// The parameters cannot be encoded by this serializer (not a JSON object, not a
        /// property list). Request domain, -1016, as AFJSONRequestSerializer reports.
        case invalidParameters
        /// The custom query-string serialization closure threw (its error is ``cause``).
        /// Request domain, -1016.
        case queryStringSerializationFailed
        /// A multipart file part was given a URL that is not a file URL. Request domain, -1000.
        case invalidFileURL
        /// A multipart file part names a file that does not exist, is not a regular file, or
        /// cannot be read. Request domain, -1000 (AF's "File URL not reachable.").
        case fileNotReachable
        /// A multipart part's bytes could not be read while the body was produced (the file
        /// vanished, shrank or became unreadable; a byte source failed or gave the wrong length).
        /// Request domain, -3000 (NSURLErrorCannotOpenFile).
        case bodyReadFailed
        /// Writing a multipart body to a file failed. Request domain, -3003
        /// (NSURLErrorCannotWriteToFile).
        case cannotWriteFile
    }

    /// What went wrong, the value to match on; ``domain`` and ``errorCode`` give AFNetworking's domain and number.
    public var code: Code
    /// What exactly was wrong, in words (AF's `NSLocalizedDescriptionKey`).
    public var message: String
    /// The URL of the failing request or response (`NSURLErrorFailingURLErrorKey`).
    public var url: URL?
    /// The response that failed validation (`AFNetworkingOperationFailingURLResponseErrorKey`).
    public var response: HawserResponse?
    /// The body of that response (`AFNetworkingOperationFailingURLResponseDataErrorKey`).
    public var data: [UInt8]?
    /// The error this one was chained onto (`NSUnderlyingErrorKey`): a content-type failure
    /// under a status-code failure, a validation failure under a parse failure.
    public var underlying: (any Error & Sendable)?
    /// The error a lower layer reported (JSONSerialization, PropertyListSerialization, a
    /// `DecodingError`, a file-system errno, the custom query closure's error).
    public var cause: (any Error & Sendable)?
    /// AF's failure reason, where AF gives one (see ``failureReason``).
    var reason: String?

    /// Creates an error; each parameter sets the property of the same name.
    public init(
        _ code: Code,
        _ message: String,
        url: URL? = nil,
        response: HawserResponse? = nil,
        data: [UInt8]? = nil,
        underlying: (any Error & Sendable)? = nil,
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.url = url
        self.response = response
        self.data = data
        self.underlying = underlying
        self.cause = cause
    }

    /// AF's error domain for ``code``.
    public var domain: String {
        switch self.code {
        case .unacceptableStatusCode, .unacceptableContentType: return Self.responseDomain
        case .cannotParseResponse: return Self.cocoaDomain
        case .invalidURL, .unsupportedURL, .invalidParameters, .queryStringSerializationFailed, .invalidFileURL,
            .fileNotReachable, .bodyReadFailed, .cannotWriteFile:
            return Self.requestDomain
        }
    }

    /// AF's numeric error code for ``code`` (the NSURLError or Cocoa number).
    public var errorCode: Int {
        switch self.code {
        case .unacceptableStatusCode: return -1011
        case .unacceptableContentType: return -1016
        case .cannotParseResponse: return 3840
        case .invalidURL, .invalidFileURL, .fileNotReachable: return -1000
        case .unsupportedURL: return -1002
        case .invalidParameters, .queryStringSerializationFailed: return -1016
        case .bodyReadFailed: return -3000
        case .cannotWriteFile: return -3003
        }
    }

    /// AF's `AFErrorWithUnderlyingError(self, error)`: `self` with `error` as its underlying
    /// error, unless `self` already has one (then `self` unchanged). A nil `error` changes nothing.
    public func chaining(_ error: (any Error & Sendable)?) -> SerializationError {
        guard let error, self.underlying == nil else { return self }
        var copy = self
        copy.underlying = error
        return copy
    }

    /// AF's `AFErrorOrUnderlyingErrorHasCodeInDomain`: whether this error or any error in its
    /// ``underlying`` chain has `code`.
    public func contains(_ code: Code) -> Bool {
        var current: (any Error)? = self
        while let e = current as? SerializationError {
            if e.code == code { return true }
            current = e.underlying
        }
        return false
    }

    /// The domain and code an `NSError` made from this error has (``domain``, ``errorCode``):
    /// AF's, per error, which a static `CustomNSError.errorDomain` could not give.
    /// HawserFoundation's ``nsError`` adds AF's user info.
    public var _domain: String { self.domain }
    public var _code: Int { self.errorCode }

    /// AF's `NSLocalizedDescriptionKey`: ``message`` ("Request failed: unacceptable
    /// content-type: text/html", "Request failed: not found (404)" …).
    public var errorDescription: String? { self.message }

    /// AF's `NSLocalizedFailureReasonErrorKey` where AF sets one: "The `parameters` argument is not
    /// valid JSON." for parameters the JSON request serializer cannot write; nil otherwise.
    public var failureReason: String? { self.reason }

    public var description: String {
        var s = "\(self.domain) \(self.errorCode): \(self.message)"
        if let u = self.url { s += " (\(u.absoluteString))" }
        if let c = self.cause { s += " [cause: \(c)]" }
        if let u = self.underlying { s += " [underlying: \(u)]" }
        return s
    }
}

/// `error` as the `any Error & Sendable` the error fields hold (`Error` is `Sendable` in Swift 6).
package func sendableError(_ error: any Error) -> any Error & Sendable { error }

/// The reason phrase NSHTTPURLResponse's `localizedStringForStatusCode:` gives, lower-case.
func localizedString(forStatusCode code: Int) -> String {
    switch code {
    case 100: return "continue"
    case 101: return "switching protocols"
    case 200: return "no error"
    case 201: return "created"
    case 202: return "accepted"
    case 203: return "non-authoritative information"
    case 204: return "no content"
    case 205: return "reset content"
    case 206: return "partial content"
    case 300: return "multiple choices"
    case 301: return "moved permanently"
    case 302: return "found"
    case 303: return "see other"
    case 304: return "not modified"
    case 305: return "needs proxy"
    case 307: return "temporarily redirected"
    case 308: return "permanent redirect"
    case 400: return "bad request"
    case 401: return "unauthorized"
    case 402: return "payment required"
    case 403: return "forbidden"
    case 404: return "not found"
    case 405: return "method not allowed"
    case 406: return "unacceptable"
    case 407: return "proxy authentication required"
    case 408: return "request timed out"
    case 409: return "conflict"
    case 410: return "no longer exists"
    case 411: return "length required"
    case 412: return "precondition failed"
    case 413: return "request too large"
    case 414: return "requested URL too long"
    case 415: return "unsupported media type"
    case 416: return "requested range not satisfiable"
    case 417: return "expectation failed"
    case 422: return "unprocessable entity"
    case 429: return "too many requests"
    case 500: return "internal server error"
    case 501: return "unimplemented"
    case 502: return "bad gateway"
    case 503: return "service unavailable"
    case 504: return "gateway timed out"
    case 505: return "unsupported version"
    case 100..<200: return "informational"
    case 200..<300: return "success"
    case 300..<400: return "redirected"
    case 400..<500: return "client error"
    case 500..<600: return "server error"
    default: return "unknown status"
    }
}
