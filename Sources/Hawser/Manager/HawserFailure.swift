// One error story for the manager: the three error types a manager call can throw, read
// through one protocol.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What every error Hawser's manager throws gives, whichever layer it comes from.
///
/// A manager call fails in one of three layers, each with its own type: building the request
/// or judging the response (``SerializationError``, AFNetworking's serialization domains), the
/// exchange itself (`HawserError`, NSURLSession's `NSURLErrorDomain`), or the manager's own work
/// (``SessionManagerError``: an invalidated session, a file that cannot be moved or read). All
/// three conform to this protocol, so one `catch` reads any of them the same way:
///
/// ```swift
/// do {
///     let user = try await api.get("users/42", as: User.self)
/// } catch let error as any HawserFailure {
///     print(error.domain, error.errorCode, error.response?.statusCode ?? 0, error.underlyingError ?? "")
/// }
/// ```
///
/// The table of which call fails with which type and code is in the package's
/// `docs/AFNETWORKING.md` ("Errors"). Errors that your own code throws into a manager call (a
/// multipart closure, a custom serializer) reach you as you threw them; an adapter's error
/// arrives as ``SessionManagerError/adapterFailed(underlying:)``.
public protocol HawserFailure: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The Foundation-style error domain: `NSURLErrorDomain` for `HawserError` and
    /// ``SessionManagerError``; AFNetworking's serialization domains or `NSCocoaErrorDomain`
    /// for ``SerializationError``.
    var domain: String { get }
    /// The number in ``domain`` (`-1001` for a timeout, `-1011` for an unacceptable status code,
    /// `3840` for a body that does not parse …): what `error as NSError` gives as its code.
    var errorCode: Int { get }
    /// The URL of the request that failed, when there is one.
    var failingURL: URL? { get }
    /// The response that was refused, when the failure came after one (a status code or content
    /// type the serializer does not accept, a body that does not decode).
    var response: HawserResponse? { get }
    /// The body of ``response``, when there is one.
    var responseData: [UInt8]? { get }
    /// The error that caused this one, when there is one: a TLS or socket error under an
    /// exchange failure, a `DecodingError` under a decoding failure, an adapter's error.
    var underlyingError: (any Error)? { get }
}

extension HawserError: HawserFailure {
    /// `NSURLErrorDomain`: the engine's errors are NSURLSession's.
    public var domain: String { "NSURLErrorDomain" }
    /// `urlErrorCode`: the `NSURLErrorDomain` code Foundation reports for this failure.
    public var errorCode: Int { self.urlErrorCode }
    /// `url`.
    public var failingURL: URL? { self.url }
    /// Always nil: an exchange that failed delivered no response to judge.
    public var response: HawserResponse? { nil }
    /// Always nil.
    public var responseData: [UInt8]? { nil }
    /// `underlying`: the TLS, socket, decoder or stream error under this one.
    public var underlyingError: (any Error)? { self.underlying }
}

extension SessionManagerError: HawserFailure {
    /// `NSURLErrorDomain`, with the code Foundation would report (``urlErrorCode``).
    public var domain: String { "NSURLErrorDomain" }
    /// ``urlErrorCode``.
    public var errorCode: Int { self.urlErrorCode }
    /// Always nil: these errors are about the manager, its files and its session.
    public var failingURL: URL? { nil }
    /// Always nil.
    public var response: HawserResponse? { nil }
    /// Always nil.
    public var responseData: [UInt8]? { nil }
    /// The adapter's error (``adapterFailed(underlying:)``) or the file system's
    /// (``cannotMoveDownloadedFile(to:underlying:)``); nil for the others.
    public var underlyingError: (any Error)? {
        switch self {
        case .adapterFailed(let e), .cannotMoveDownloadedFile(_, let e): return e
        default: return nil
        }
    }
}

extension SerializationError: HawserFailure {
    /// `url`.
    public var failingURL: URL? { self.url }
    /// ``data``.
    public var responseData: [UInt8]? { self.data }
    /// ``underlying`` (a validation failure chained under this one) or else ``cause`` (the
    /// parser's or decoder's error).
    public var underlyingError: (any Error)? { self.underlying ?? self.cause }
}
