// HTTPTypes.swift: the value types of an HTTP/1.x message head.

/// An HTTP protocol version (RFC 9110 §2.5). The parser accepts only 1.0 and 1.1.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    /// The major version number: 1 for every version the parser accepts.
    public var major: Int
    /// The minor version number: 0 or 1 for every version the parser accepts.
    public var minor: Int

    /// Creates a version from its two numbers; the encoder refuses anything but 1.0 and 1.1.
    @inlinable
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// HTTP/1.0: no persistent connections unless `Connection: keep-alive`, no chunked coding.
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    /// HTTP/1.1 (RFC 9112): the version Hawser sends and the default of every head.
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(self.major).\(self.minor)" }
}

/// A request method (RFC 9110 §9). Any token is a method; the common ones have names.
public struct HTTPMethod: Sendable, Hashable, RawRepresentable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var rawValue: String

    @inlinable
    public init(rawValue: String) { self.rawValue = rawValue }

    @inlinable
    public init(stringLiteral value: String) { self.rawValue = value }

    /// `GET`: safe and idempotent (RFC 9110 §9.3.1).
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`: as `GET` without a response body; the parser expects none whatever the fields say.
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `POST`: neither safe nor idempotent, so never retried on a stale connection.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`: idempotent; may be retried once on a stale keep-alive connection.
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH` (RFC 5789): not idempotent.
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`: idempotent.
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `OPTIONS`: safe and idempotent.
    public static let options = HTTPMethod(rawValue: "OPTIONS")
    /// `TRACE`: safe and idempotent.
    public static let trace = HTTPMethod(rawValue: "TRACE")
    /// `CONNECT`: asks a proxy for a tunnel; a 2xx answer has no body and the connection becomes the tunnel.
    public static let connect = HTTPMethod(rawValue: "CONNECT")

    /// RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent.
    public var isIdempotent: Bool {
        switch self.rawValue {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return false
        }
    }

    public var description: String { self.rawValue }
}

/// The head of a response: status line and header fields.
public struct HTTPResponseHead: Sendable {
    /// The version of the status line (HTTP/1.0 or HTTP/1.1).
    public var version: HTTPVersion
    /// The status code, 100 through 999 (the parser takes exactly three digits).
    public var status: Int
    /// The reason phrase after the status code, possibly empty; informative only, never
    /// interpreted. Bytes that are not UTF-8 (obs-text) read as U+FFFD here:
    /// ``reasonPhraseBytes`` has them as received.
    public var reasonPhrase: String {
        get {
            Self.holdsOctets(self.reasonText)
                ? String(decoding: self.reasonPhraseBytes, as: UTF8.self) : self.reasonText
        }
        set { self.reasonText = Self.stored(newValue) }
    }
    /// The phrase as stored: the text itself, or, for bytes that are not UTF-8, U+FFFF followed
    /// by one scalar U+0000–U+00FF per byte (ISO 8859-1), so that no byte is lost (a phrase that
    /// itself begins with the noncharacter U+FFFF is stored the second way too). One String and
    /// no second stored field: a head is copied with every parser event, and a wider head cost
    /// every message about 3% more instructions, an extra array about 10%.
    @usableFromInline var reasonText: String

    /// The reason phrase byte for byte as received: obs-text (0x80–0xFF, RFC 9112 §4) that is
    /// not UTF-8 is kept, where ``reasonPhrase`` would give U+FFFD.
    public var reasonPhraseBytes: [UInt8] {
        guard Self.holdsOctets(self.reasonText) else { return Array(self.reasonText.utf8) }
        return self.reasonText.unicodeScalars.dropFirst().map { UInt8(truncatingIfNeeded: $0.value) }
    }

    /// Whether `stored` is the octets form (it begins with U+FFFF, UTF-8 EF BF BF).
    @inlinable
    static func holdsOctets(_ stored: String) -> Bool {
        var bytes = stored.utf8.makeIterator()
        return bytes.next() == 0xEF && bytes.next() == 0xBF && bytes.next() == 0xBF
    }

    /// `text` as stored: itself, unless it begins with U+FFFF.
    @inlinable
    static func stored(_ text: String) -> String {
        Self.holdsOctets(text) ? Self.octetsForm(Array(text.utf8)) : text
    }

    /// A phrase as received, in its stored form: bytes beyond ASCII are kept byte for byte (the
    /// octets form when they are not UTF-8, or when the text begins with U+FFFF), for what shows
    /// a head as it arrived (`-D`, `-i`). Out of line: most phrases are "OK".
    @usableFromInline @inline(never)
    static func storedReasonPhrase(_ raw: UnsafeBufferPointer<UInt8>) -> String {
        guard raw.contains(where: { $0 >= 0x80 }) else { return String(decoding: raw, as: UTF8.self) }
        if let text = String(validating: raw, as: UTF8.self) { return Self.stored(text) }
        return Self.octetsForm(Array(raw))
    }

    /// The octets form of `bytes`: U+FFFF, then one scalar per byte.
    @usableFromInline
    static func octetsForm(_ bytes: [UInt8]) -> String {
        var scalars = String.UnicodeScalarView()
        scalars.append("\u{FFFF}")
        scalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
        return String(scalars)
    }

    /// The header fields, in the order and with the name case they arrived in.
    public var headers: HTTPHeaders

    /// A 1xx (informational) response: 100 Continue, 101 Switching Protocols, 103 Early Hints…
    public var isInterim: Bool { self.status >= 100 && self.status < 200 }

    /// Creates a response head (for the test server and for cached responses).
    ///
    /// - Parameters:
    ///   - version: the status line's version; HTTP/1.1 by default.
    ///   - status: the status code.
    ///   - reasonPhrase: the text after the code; empty by default.
    ///   - headers: the header fields; none by default.
    @inlinable
    public init(version: HTTPVersion = .http1_1, status: Int, reasonPhrase: String = "", headers: HTTPHeaders = [:]) {
        self.version = version
        self.status = status
        self.reasonText = Self.stored(reasonPhrase)
        self.headers = headers
    }

    /// A head whose phrase the parser has checked: plain text that does not begin with U+FFFF.
    @inlinable
    init(version: HTTPVersion, status: Int, checkedReasonPhrase: String, headers: HTTPHeaders) {
        self.version = version
        self.status = status
        self.reasonText = checkedReasonPhrase
        self.headers = headers
    }

    /// A response head whose reason phrase is given as octets (the parser's: they need not
    /// be UTF-8; ``reasonPhraseBytes`` gives them back unchanged).
    public init(version: HTTPVersion = .http1_1, status: Int, reasonPhraseBytes: [UInt8], headers: HTTPHeaders = [:]) {
        self.version = version
        self.status = status
        if let text = String(validating: reasonPhraseBytes, as: UTF8.self) {
            self.reasonText = Self.stored(text)
        } else {
            self.reasonText = Self.octetsForm(reasonPhraseBytes)
        }
        self.headers = headers
    }
}

/// The head of a request: request line and header fields.
public struct HTTPRequestHead: Sendable {
    /// The request method.
    public var method: HTTPMethod
    /// The request target as written on the request line: origin form (`/path?query`), absolute
    /// form (through a proxy), authority form (`CONNECT host:port`) or `*`.
    public var target: String
    /// The version of the request line; HTTP/1.1 unless set otherwise.
    public var version: HTTPVersion
    /// The header fields, in the order they are written or arrived in.
    public var headers: HTTPHeaders

    /// Creates a request head; the encoder validates every part when it writes it.
    ///
    /// - Parameters:
    ///   - method: the request method.
    ///   - target: the request target (see ``target``).
    ///   - version: the request line's version; HTTP/1.1 by default.
    ///   - headers: the header fields, written in this order; none by default.
    @inlinable
    public init(method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = [:]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }
}
