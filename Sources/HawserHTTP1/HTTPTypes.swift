// HTTPTypes.swift: the value types of an HTTP/1.x message head.

/// An HTTP protocol version (RFC 9110 §2.5). The parser accepts only 1.0 and 1.1.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    @inlinable
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
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

    public static let get = HTTPMethod(rawValue: "GET")
    public static let head = HTTPMethod(rawValue: "HEAD")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let patch = HTTPMethod(rawValue: "PATCH")
    public static let delete = HTTPMethod(rawValue: "DELETE")
    public static let options = HTTPMethod(rawValue: "OPTIONS")
    public static let trace = HTTPMethod(rawValue: "TRACE")
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
    public var version: HTTPVersion
    public var status: Int
    public var reasonPhrase: String
    public var headers: HTTPHeaders

    /// A 1xx (informational) response: 100 Continue, 101 Switching Protocols, 103 Early Hints…
    public var isInterim: Bool { self.status >= 100 && self.status < 200 }

    @inlinable
    public init(version: HTTPVersion = .http1_1, status: Int, reasonPhrase: String = "", headers: HTTPHeaders = [:]) {
        self.version = version
        self.status = status
        self.reasonPhrase = reasonPhrase
        self.headers = headers
    }
}

/// The head of a request: request line and header fields.
public struct HTTPRequestHead: Sendable {
    public var method: HTTPMethod
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders

    @inlinable
    public init(method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = [:]) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }
}
