import HawserCore

/// curl's exit codes (its man page, EXIT CODES), so scripts that know curl read ours the same way.
enum ExitCode {
    static let unsupportedProtocol: Int32 = 1
    static let usage: Int32 = 2
    static let malformedURL: Int32 = 3
    static let weirdServerReply: Int32 = 8
    static let partialFile: Int32 = 18
    static let httpReturnedError: Int32 = 22
    static let writeError: Int32 = 23
    static let readError: Int32 = 26
    static let timeout: Int32 = 28
    static let rangeError: Int32 = 33
    static let emptyReply: Int32 = 52
    static let receiveError: Int32 = 56
    static let peerFailedVerification: Int32 = 60
    static let sslCRLBadFile: Int32 = 82
    static let sslPinnedPublicKeyNotMatch: Int32 = 90
    static let sslInvalidCertStatus: Int32 = 91
    /// `hawser load` (and `load merge`): a --fail-if condition held (beyond curl's range of codes).
    static let loadConditionFailed: Int32 = 110

    /// The exit status for an engine error.
    static func forError(_ e: HawserError) -> Int32 {
        switch e.code {
        case .cannotResolveHost: return 6
        case .cannotConnect: return 7
        case .connectTimeout, .idleTimeout, .resourceTimeout: return Self.timeout
        case .protocolError:
            guard let parse = e.underlying as? HTTP1ParseError else { return Self.weirdServerReply }
            switch parse.kind {
            case .invalidStatusLine, .invalidVersion:
                // Not an HTTP/1.x response: curl refuses it as HTTP/0.9 ("unsupported protocol").
                return Self.unsupportedProtocol
            case .invalidChunkSize, .chunkSizeOverflow, .invalidChunkExtension, .invalidChunkData, .bareLF:
                // Bad chunked framing: curl's "Failure when receiving data from the peer".
                return Self.receiveError
            default:
                return Self.weirdServerReply
            }
        case .invalidRequest, .badURL: return Self.malformedURL
        case .unsupportedURL: return Self.unsupportedProtocol
        case .connectionLost:
            if let parse = e.underlying as? HTTP1ParseError, parse.kind == .truncatedBody { return Self.partialFile }
            return e.message.contains("before sending a response") ? Self.emptyReply : Self.receiveError
        case .limitExceeded: return 63
        case .cancelled: return 42
        case .sessionShutDown, .ioError: return 55
        case .tooManyRedirects: return 47
        case .redirectRefused: return Self.unsupportedProtocol
        case .secureConnectionFailed: return 35
        case .serverCertificateUntrusted:
            if let failure = e.underlying as? TrustFailure, failure.reason == .pinMismatch {
                return Self.sslPinnedPublicKeyNotMatch
            }
            // The stapled OCSP response (no X509_V_ERR code) is curl's --cert-status failure;
            // a CRL's verdict is a verification failure (60), as curl's.
            if let failure = e.underlying as? TrustFailure, failure.verifyErrorCode == nil,
                failure.reason == .revoked || failure.reason == .revocationStatusUnknown
            {
                return Self.sslInvalidCertStatus
            }
            return Self.peerFailedVerification
        case .clientCertificateRequired: return 58
        case .cannotDecodeContent: return 61
        case .userAuthenticationRequired, .userCancelledAuthentication: return Self.httpReturnedError
        case .proxyError: return 5
        case .resourceUnavailable: return 37
        }
    }
}

/// A failure of the tool itself (a file it cannot read or write, a URL it cannot use), with
/// curl's exit status for it.
struct ToolFailure: Error, CustomStringConvertible {
    var code: Int32
    var message: String
    init(_ code: Int32, _ message: String) {
        self.code = code
        self.message = message
    }
    var description: String { self.message }
}
