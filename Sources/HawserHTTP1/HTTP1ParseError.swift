// HTTP1ParseError.swift: the one error type of the parsers.

/// The peer sent something the parser will not accept. The connection must be closed.
public struct HTTP1ParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One case per distinct failure.
    public enum Kind: Sendable, Hashable {
        /// The status line is not `HTTP/1.x SP 3DIGIT [SP reason-phrase]`.
        case invalidStatusLine
        /// The request line is not `method SP request-target SP HTTP-version`.
        case invalidRequestLine
        /// The version is not `HTTP/1.DIGIT` (HTTP/2 and later do not use this syntax).
        case invalidVersion
        /// The method is not a token.
        case invalidMethod
        /// The request-target has a byte outside %x21-7E, or a form the method does not allow.
        case invalidTarget
        /// A field name is empty, has a non-token byte, or the line has no colon.
        case invalidFieldName
        /// Whitespace between a field name and its colon (RFC 9112 §5.1).
        case whitespaceBeforeColon
        /// A field value holds NUL, another control byte, or DEL.
        case invalidFieldValue
        /// A line starts with SP or HTAB (obs-fold, RFC 9112 §5.2): in a request, in a
        /// response parsed with ``HTTP1ObsoleteLineFolding/reject``, or where no field precedes it.
        case obsoleteLineFolding
        /// A CR not followed by LF.
        case bareCR
        /// An LF without CR where CRLF is required (chunked framing).
        case bareLF
        /// Content-Length is not plain digits, or does not fit in an Int.
        case invalidContentLength
        /// Two Content-Length values differ.
        case conflictingContentLength
        /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.3 rule 3).
        case contentLengthWithTransferEncoding
        /// Transfer-Encoding is empty, names chunked more than once, or gives chunked parameters.
        case invalidTransferEncoding
        /// A request whose final transfer coding is not chunked (RFC 9112 §6.3 rule 4).
        case unsupportedTransferEncoding
        /// Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1).
        case transferEncodingInHTTP1_0
        /// A chunk-size line that does not start with a hex digit, or has bad bytes after it.
        case invalidChunkSize
        /// A chunk size too large for an Int (leading zeros do not count).
        case chunkSizeOverflow
        /// A control byte inside a chunk extension.
        case invalidChunkExtension
        /// Chunk data not followed by CRLF.
        case invalidChunkData
        /// The head is larger than `maxHeadBytes`.
        case headTooLarge
        /// More field lines than `maxHeaderCount`.
        case tooManyHeaders
        /// A line longer than `maxLineLength`.
        case lineTooLong
        /// A chunk-size line with more than `maxChunkExtensionBytes` after the digits.
        case chunkExtensionTooLong
        /// A trailer section larger than `maxTrailerBytes`.
        case trailersTooLarge
        /// The connection closed inside a head.
        case truncatedHead
        /// The connection closed inside a body (or its trailers).
        case truncatedBody
    }

    /// What was wrong with the message.
    public var kind: Kind
    /// Byte offset in the connection's stream where the problem was detected.
    public var offset: Int

    /// Creates an error of `kind` found at byte `offset` of the connection's stream.
    @inlinable
    public init(_ kind: Kind, offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    public var description: String { "HTTP/1 parse error at byte \(self.offset): \(self.kind.explanation)" }
}

extension HTTP1ParseError.Kind {
    /// True for the kinds that mean a configured limit (``HTTP1Limits``) was exceeded, not that
    /// the bytes were malformed: a head, line, field count, chunk extension or trailer section
    /// larger than allowed.
    public var isLimitExceeded: Bool {
        switch self {
        case .headTooLarge, .tooManyHeaders, .lineTooLong, .chunkExtensionTooLong, .trailersTooLarge: return true
        default: return false
        }
    }

    /// What was wrong, in words.
    public var explanation: String {
        switch self {
        case .invalidStatusLine: return "the status line is not 'HTTP/1.x NNN reason'"
        case .invalidRequestLine: return "the request line is not 'METHOD target HTTP/1.x'"
        case .invalidVersion: return "the HTTP version is not HTTP/1.x"
        case .invalidMethod: return "the method is not a token"
        case .invalidTarget: return "the request target has an invalid byte or form"
        case .invalidFieldName: return "a field name is empty, has a non-token byte, or has no colon"
        case .whitespaceBeforeColon: return "whitespace between a field name and its colon"
        case .invalidFieldValue: return "a field value contains a control byte (NUL, CR, LF, DEL…)"
        case .obsoleteLineFolding: return "a line starts with whitespace (obsolete line folding)"
        case .bareCR: return "a CR not followed by LF"
        case .bareLF: return "an LF without CR in chunked framing"
        case .invalidContentLength: return "Content-Length is not a plain decimal number that fits in 63 bits"
        case .conflictingContentLength: return "Content-Length values differ"
        case .contentLengthWithTransferEncoding: return "both Content-Length and Transfer-Encoding"
        case .invalidTransferEncoding:
            return "Transfer-Encoding is empty, applies chunked more than once, or gives it parameters"
        case .unsupportedTransferEncoding: return "a request's final transfer coding is not chunked"
        case .transferEncodingInHTTP1_0: return "Transfer-Encoding in an HTTP/1.0 message"
        case .invalidChunkSize: return "a chunk-size line is not hex digits followed by extensions and CRLF"
        case .chunkSizeOverflow: return "a chunk size does not fit in 63 bits"
        case .invalidChunkExtension: return "a chunk extension contains a control byte"
        case .invalidChunkData: return "chunk data is not followed by CRLF"
        case .headTooLarge: return "the head is larger than maxHeadBytes"
        case .tooManyHeaders: return "more field lines than maxHeaderCount"
        case .lineTooLong: return "a line is longer than maxLineLength"
        case .chunkExtensionTooLong: return "chunk extensions longer than maxChunkExtensionBytes"
        case .trailersTooLarge: return "the trailer section is larger than maxTrailerBytes"
        case .truncatedHead: return "the connection closed in the middle of a head"
        case .truncatedBody: return "the connection closed in the middle of a body"
        }
    }
}
