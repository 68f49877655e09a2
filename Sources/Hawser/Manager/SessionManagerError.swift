#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Errors of the session-manager layer itself (the engine's are `HawserError`, the serializers'
/// are their own). Each says what was wrong.
public enum SessionManagerError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The manager's session was invalidated; create tasks on a manager that was reset, or a new one.
    case sessionInvalidated
    /// The task has no request (a data task created without one).
    case noRequest
    /// The interceptor's adapter threw; the request was not sent.
    case adapterFailed(underlying: any Error)
    /// A download finished but its file could not be moved to the destination (the temporary file
    /// was removed). Also posted as ``SessionEvent/downloadTaskDidFailToMoveFile(_:destination:error:)``.
    case cannotMoveDownloadedFile(to: URL, underlying: any Error)
    /// Writing a download's temporary file failed (disk full, permissions…).
    case downloadWriteFailed(path: String, errno: Int32)
    /// The file to upload could not be opened or read.
    case cannotReadUploadFile(path: String, errno: Int32)
    /// Resume data that is not Hawser's, of a newer version, or pointing at a file Hawser did not make.
    case invalidResumeData(String)
    /// A security policy the manager refused (AFNetworking raises "Invalid Security Policy"):
    /// a pinning policy on a manager whose base URL is not https.
    case invalidSecurityPolicy(String)

    public var description: String {
        switch self {
        case .sessionInvalidated:
            return "the session manager's session was invalidated; no new tasks can be created on it"
        case .noRequest:
            return "the task has no request"
        case .adapterFailed(let e):
            return "the request adapter failed: \(e)"
        case .cannotMoveDownloadedFile(let url, let e):
            return "cannot move the downloaded file to \(url.path): \(e)"
        case .downloadWriteFailed(let path, let code):
            return "cannot write the download file \(path): \(String(cString: strerror(code)))"
        case .cannotReadUploadFile(let path, let code):
            return "cannot read the upload file \(path): \(String(cString: strerror(code)))"
        case .invalidResumeData(let why):
            return "invalid resume data: \(why)"
        case .invalidSecurityPolicy(let why):
            return "invalid security policy: \(why)"
        }
    }

    /// The description (``description``), for `localizedDescription`.
    public var errorDescription: String? { self.description }

    /// The NSURLError number Foundation would report, where one fits.
    public var urlErrorCode: Int {
        switch self {
        case .sessionInvalidated: return -999
        case .noRequest, .adapterFailed: return -1000
        case .cannotMoveDownloadedFile: return -3005  // NSURLErrorCannotMoveFile
        case .downloadWriteFailed: return -3003  // NSURLErrorCannotWriteToFile
        case .cannotReadUploadFile: return -1100  // NSURLErrorFileDoesNotExist
        case .invalidResumeData: return -3001  // NSURLErrorCannotOpenFile
        case .invalidSecurityPolicy: return -1000  // the base URL cannot carry the policy
        }
    }
}
