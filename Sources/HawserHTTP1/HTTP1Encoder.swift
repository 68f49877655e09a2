// HTTP1Encoder.swift: request and response heads, chunked framing (RFC 9112).
//
// The encoder validates everything it writes that came from a caller: a name or value
// holding CR, LF or NUL could otherwise inject header fields or a second message. Body
// framing fields (Content-Length / Transfer-Encoding) are the caller's to set.

/// Something in a head cannot be written as HTTP/1.1.
public struct HTTP1EncodeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What could not be written.
    public enum Kind: Sendable, Hashable {
        /// The method is empty or not a token.
        case invalidMethod
        /// The target is empty or has a byte outside %x21-7E.
        case invalidTarget
        /// A field name is empty or not a token.
        case invalidFieldName(String)
        /// The value of the named field has a control byte (CR, LF, NUL…) or DEL, or leading or
        /// trailing whitespace. The payload is the field's name.
        case invalidFieldValue(String)
        /// The reason phrase has a control byte other than HTAB.
        case invalidReasonPhrase
        /// The version is not 1.0 or 1.1.
        case invalidVersion
        /// The status code is not 100…999.
        case invalidStatus
    }

    /// What could not be written, and for a field, the field's name.
    public var kind: Kind

    /// Creates an error of the given kind (the encoder throws these; tests build them to compare).
    public init(_ kind: Kind) { self.kind = kind }

    public var description: String {
        switch self.kind {
        case .invalidMethod: return "HTTP/1 encode error: the method is not a token"
        case .invalidTarget: return "HTTP/1 encode error: the request target is empty or has a byte outside %x21-7E"
        case .invalidFieldName(let name): return "HTTP/1 encode error: invalid field name \(String(reflecting: name))"
        case .invalidFieldValue(let name):
            return "HTTP/1 encode error: the value of \(String(reflecting: name)) has a control byte or edge whitespace"
        case .invalidReasonPhrase: return "HTTP/1 encode error: the reason phrase has a control byte"
        case .invalidVersion: return "HTTP/1 encode error: only HTTP/1.0 and HTTP/1.1 can be written"
        case .invalidStatus: return "HTTP/1 encode error: the status code is not 100-999"
        }
    }
}

/// Writes HTTP/1.1 heads and chunked framing into a byte buffer.
public enum HTTP1Encoder {
    /// `method SP target SP HTTP/1.x CRLF *(field CRLF) CRLF`.
    public static func writeRequestHead(_ head: HTTPRequestHead, into buffer: inout [UInt8]) throws(HTTP1EncodeError) {
        try validate(head.headers)
        try writeRequestLine(method: head.method, target: head.target, version: head.version, into: &buffer)
        writeFields(head.headers, into: &buffer)
    }

    /// The request line alone, `method SP target SP HTTP/1.x CRLF`: the start of a head that is
    /// written field by field (``writeField(name:value:into:)``, ``writeFields(_:omittingFraming:into:)``,
    /// ``writeEndOfHead(into:)``) instead of from one ``HTTPHeaders``.
    public static func writeRequestLine(
        method: HTTPMethod,
        target: String,
        version: HTTPVersion = .http1_1,
        into buffer: inout [UInt8]
    ) throws(HTTP1EncodeError) {
        let methodBytes = method.rawValue.utf8
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(CharClass.isToken) else {
            throw HTTP1EncodeError(.invalidMethod)
        }
        let targetBytes = target.utf8
        guard !targetBytes.isEmpty, targetBytes.allSatisfy(CharClass.isTarget) else {
            throw HTTP1EncodeError(.invalidTarget)
        }
        let versionString = try versionBytes(version)
        buffer.append(contentsOf: methodBytes)
        buffer.append(asciiSP)
        buffer.append(contentsOf: targetBytes)
        buffer.append(asciiSP)
        buffer.append(contentsOf: versionString.utf8)
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    /// One field line, `name: value CRLF`, with the checks of ``writeRequestHead(_:into:)``.
    public static func writeField(name: String, value: String, into buffer: inout [UInt8]) throws(HTTP1EncodeError) {
        var name = name
        var value = value
        let problem: HTTP1EncodeError.Kind? = name.withUTF8 { n in
            value.withUTF8 { v in
                if let problem = fieldProblem(name: UnsafeRawBufferPointer(n), value: UnsafeRawBufferPointer(v)) {
                    return problem
                }
                append(name: UnsafeRawBufferPointer(n), value: UnsafeRawBufferPointer(v), into: &buffer)
                return nil
            }
        }
        if let problem { throw HTTP1EncodeError(problem) }
    }

    /// ``writeField(name:value:into:)`` for a value given as octets (obs-text that is not
    /// UTF-8 is written as it is), with the same checks.
    public static func writeField(
        name: String,
        valueBytes: [UInt8],
        into buffer: inout [UInt8]
    ) throws(HTTP1EncodeError) {
        var name = name
        let problem: HTTP1EncodeError.Kind? = name.withUTF8 { n in
            valueBytes.withUnsafeBytes { v in
                if let problem = fieldProblem(name: UnsafeRawBufferPointer(n), value: v) { return problem }
                append(name: UnsafeRawBufferPointer(n), value: v, into: &buffer)
                return nil
            }
        }
        if let problem { throw HTTP1EncodeError(problem) }
    }

    /// Every field of `headers`, checked as ``writeRequestHead(_:into:)`` checks them, without the
    /// empty line that ends the head. With `omittingFraming`, `Content-Length` and
    /// `Transfer-Encoding` fields are left out (the caller writes the body's own framing).
    /// Nothing is written when a field is refused.
    public static func writeFields(
        _ headers: HTTPHeaders,
        omittingFraming: Bool,
        into buffer: inout [UInt8]
    ) throws(HTTP1EncodeError) {
        try validate(headers)
        for index in 0..<headers.count {
            headers.withRawField(at: index) { name, value in
                if omittingFraming, isFramingName(name) { return }
                append(name: name, value: value, into: &buffer)
            }
        }
    }

    /// The empty line that ends a head.
    public static func writeEndOfHead(into buffer: inout [UInt8]) {
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    /// `Content-Length` or `Transfer-Encoding`, ASCII case-insensitively.
    static func isFramingName(_ name: UnsafeRawBufferPointer) -> Bool {
        func equals(_ lowercase: StaticString) -> Bool {
            name.count == lowercase.utf8CodeUnitCount
                && asciiCaseInsensitiveEquals(name.baseAddress!, lowercase.utf8Start, name.count)
        }
        return equals("content-length") || equals("transfer-encoding")
    }

    /// `HTTP/1.x SP status SP reason CRLF *(field CRLF) CRLF`.
    public static func writeResponseHead(_ head: HTTPResponseHead, into buffer: inout [UInt8]) throws(HTTP1EncodeError)
    {
        let version = try versionBytes(head.version)
        guard head.status >= 100 && head.status <= 999 else { throw HTTP1EncodeError(.invalidStatus) }
        let reason = head.reasonPhrase.utf8
        guard reason.allSatisfy(CharClass.isFieldValue) else { throw HTTP1EncodeError(.invalidReasonPhrase) }
        try validate(head.headers)
        buffer.append(contentsOf: version.utf8)
        buffer.append(asciiSP)
        buffer.append(UInt8(0x30 + head.status / 100))
        buffer.append(UInt8(0x30 + head.status / 10 % 10))
        buffer.append(UInt8(0x30 + head.status % 10))
        buffer.append(asciiSP)
        buffer.append(contentsOf: reason)
        buffer.append(asciiCR)
        buffer.append(asciiLF)
        writeFields(head.headers, into: &buffer)
    }

    /// The line before a chunk's data: the size in lower-case hex, CRLF. `size` must be > 0
    /// (a zero size is the last chunk: use `writeLastChunk`).
    public static func writeChunkHeader(size: Int, into buffer: inout [UInt8]) {
        precondition(size > 0, "a chunk of size 0 is the last chunk: use writeLastChunk")
        let digits = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4
        var shift = (digits - 1) * 4
        while shift >= 0 {
            let nibble = UInt8((size >> shift) & 0xF)
            buffer.append(nibble < 10 ? 0x30 + nibble : 0x57 + nibble)
            shift -= 4
        }
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    /// The CRLF after a chunk's data.
    public static func writeChunkEnd(into buffer: inout [UInt8]) {
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    /// `0 CRLF [trailer fields] CRLF`. Trailer fields whose name or value would break the
    /// framing (see `writeRequestHead`'s checks) are left out: this call cannot fail.
    public static func writeLastChunk(trailers: HTTPHeaders?, into buffer: inout [UInt8]) {
        buffer.append(0x30)
        buffer.append(asciiCR)
        buffer.append(asciiLF)
        if let trailers {
            for index in 0..<trailers.count {
                trailers.withRawField(at: index) { name, value in
                    guard isValidName(name), isValidValue(value) else { return }
                    append(name: name, value: value, into: &buffer)
                }
            }
        }
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    // MARK: - Helpers

    static func versionBytes(_ version: HTTPVersion) throws(HTTP1EncodeError) -> String {
        if version == .http1_1 { return "HTTP/1.1" }
        if version == .http1_0 { return "HTTP/1.0" }
        throw HTTP1EncodeError(.invalidVersion)
    }

    static func isValidName(_ name: UnsafeRawBufferPointer) -> Bool {
        !name.isEmpty && name.allSatisfy(CharClass.isToken)
    }

    /// field-value = *field-content: VCHAR / obs-text with SP / HTAB inside, not at the edges
    /// (a parser would trim them, so a round trip would change the value).
    static func isValidValue(_ value: UnsafeRawBufferPointer) -> Bool {
        guard value.allSatisfy(CharClass.isFieldValue) else { return false }
        if let first = value.first, isOWS(first) { return false }
        if let last = value.last, isOWS(last) { return false }
        return true
    }

    static func validate(_ headers: HTTPHeaders) throws(HTTP1EncodeError) {
        for index in 0..<headers.count {
            if let problem = headers.withRawField(at: index, fieldProblem) { throw HTTP1EncodeError(problem) }
        }
    }

    /// Why a field cannot be written (a name that is not a token, a value with a control byte or
    /// edge whitespace), or nil.
    static func fieldProblem(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> HTTP1EncodeError.Kind? {
        if !isValidName(name) { return .invalidFieldName(String(decoding: name, as: UTF8.self)) }
        if !isValidValue(value) { return .invalidFieldValue(String(decoding: name, as: UTF8.self)) }
        return nil
    }

    static func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: name)
        buffer.append(asciiColon)
        buffer.append(asciiSP)
        buffer.append(contentsOf: value)
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }

    static func writeFields(_ headers: HTTPHeaders, into buffer: inout [UInt8]) {
        for index in 0..<headers.count {
            headers.withRawField(at: index) { name, value in append(name: name, value: value, into: &buffer) }
        }
        buffer.append(asciiCR)
        buffer.append(asciiLF)
    }
}
