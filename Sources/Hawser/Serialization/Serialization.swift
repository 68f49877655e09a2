import HawserCore

// The two serialization protocols the session manager is written against
// (AFURLRequestSerialization / AFURLResponseSerialization), and the response value
// they read. The concrete serializers live in their own files.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Request parameters as AFNetworking usually takes them: a dictionary whose values are strings,
/// numbers, booleans, arrays, sets, nested dictionaries or ``ParameterNull``. AFNetworking's
/// `id parameters` also takes an array, a set or (for JSON) any value: the serializers and the
/// manager take those through their overloads with `parameters: (any Sendable)?`.
public typealias Parameters = [String: any Sendable]

/// The NSHTTPURLResponse role: what a serializer and a completion handler see of a response.
///
/// Named so that it never meets swift-http-types' `HTTPResponse`: a program that imports both
/// `Hawser` and `HTTPTypes` writes either name without qualification.
public struct HawserResponse: Sendable {
    /// The URL the response came from (after redirects).
    public var url: URL
    /// The status code of the final response (100–999).
    public var statusCode: Int
    /// The header fields of the final response, in the order they arrived.
    public var headers: HTTPHeaders
    /// The HTTP version the server answered with.
    public var version: HTTPVersion

    /// Creates a response; each parameter sets the property of the same name (HTTP/1.1 by default).
    public init(url: URL, statusCode: Int, headers: HTTPHeaders, version: HTTPVersion = .http1_1) {
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.version = version
    }

    /// The media type of `Content-Type` without parameters, lower-cased (`application/json`).
    public var mimeType: String? {
        guard let ct = self.headers["Content-Type"] else { return nil }
        // The usual value (`application/json`) is already the media type, in lower case: one
        // pass over its bytes says so.
        if ct.utf8.withContiguousStorageIfAvailable(Self.isBareLowercaseMediaType) == true { return ct }
        let media = Self.trimmed(ct.utf8.prefix { $0 != UInt8(ascii: ";") })
        if media.isEmpty { return nil }
        // The usual value (`application/json`): already the media type, in lower case.
        if media.count == ct.utf8.count, !media.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) { return ct }
        return Self.asciiLowercased(media)
    }

    /// The `charset` parameter of `Content-Type`, lower-cased, without quotes.
    public var textEncodingName: String? {
        guard let ct = self.headers["Content-Type"] else { return nil }
        for param in ct.utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false).dropFirst() {
            guard let eq = param.firstIndex(of: UInt8(ascii: "=")) else { continue }
            guard Self.asciiLowercased(Self.trimmed(param[..<eq])) == "charset" else { continue }
            var value = Self.trimmed(param[param.index(after: eq)...])
            while value.first == UInt8(ascii: "\"") { value = value.dropFirst() }
            while value.last == UInt8(ascii: "\"") { value = value.dropLast() }
            return Self.asciiLowercased(value)
        }
        return nil
    }

    // Content-Type is read on bytes: every response asks, and Foundation's Unicode trimming
    // cost more than the rest of the check; a ';' followed by a combining mark still separates.

    /// Not empty, no blank at either end, no parameters, no upper case.
    private static func isBareLowercaseMediaType(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, let last = bytes.last,
            first != 0x20, first != 0x09, last != 0x20, last != 0x09
        else { return false }
        for c in bytes where c == UInt8(ascii: ";") || (c >= 0x41 && c <= 0x5A) { return false }
        return true
    }

    /// `s` without the blanks (SP, HTAB) around it.
    private static func trimmed(_ s: Substring.UTF8View) -> Substring.UTF8View {
        var s = s
        while let f = s.first, f == 0x20 || f == 0x09 { s = s.dropFirst() }
        while let l = s.last, l == 0x20 || l == 0x09 { s = s.dropLast() }
        return s
    }

    private static func asciiLowercased(_ s: Substring.UTF8View) -> String {
        String(decoding: s.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// `Content-Length` when the server sent one, otherwise -1 (NSURLResponseUnknownLength).
    public var expectedContentLength: Int64 {
        self.headers["Content-Length"].flatMap { Int64($0) } ?? -1
    }
}

/// The name ``HawserResponse`` had in 0.1, kept through 0.2 for code written against it.
///
/// In the Swift 5 language mode it is a deprecated alias: code that uses it builds with a warning
/// and a fix-it. In the Swift 6 language mode it is unavailable, with the same fix-it: an alias
/// there would make `HTTPResponse` ambiguous for every program that also imports swift-http-types,
/// the clash the rename removes (Swift leaves an unavailable declaration out of name lookup, so
/// `HTTPTypes.HTTPResponse` is then the only one). It is removed in 0.3.
@available(*, deprecated, renamed: "HawserResponse")
@available(swift, obsoleted: 6.0, renamed: "HawserResponse")
public typealias HTTPResponse = HawserResponse

/// AFURLRequestSerialization: turns a request and parameters into the request to send.
public protocol RequestSerialization: Sendable {
    /// Returns `request` with `parameters` encoded into it (query or body), plus the
    /// serializer's default headers. Throws a ``SerializationError`` when they cannot be encoded.
    func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest

    /// The same with parameters of any shape, as AFNetworking's `id parameters`: a dictionary
    /// (of any value type), an array, a set, a ``JSONValue`` … The default implementation hands
    /// dictionaries (and nil) to the dictionary form and refuses anything else with
    /// `.invalidParameters`; Hawser's serializers encode every shape they can.
    @_disfavoredOverload
    func request(bySerializing request: HTTPClientRequest, parameters: (any Sendable)?) throws -> HTTPClientRequest
}

extension RequestSerialization {
    @_disfavoredOverload
    public func request(
        bySerializing request: HTTPClientRequest,
        parameters: (any Sendable)?
    ) throws -> HTTPClientRequest {
        guard let parameters else { return try self.request(bySerializing: request, parameters: nil as Parameters?) }
        if let dictionary = parameters as? Parameters {
            return try self.request(bySerializing: request, parameters: dictionary)
        }
        throw SerializationError(
            .invalidParameters,
            "\(type(of: self)) takes a dictionary of parameters, not \(type(of: parameters))",
            url: request.url
        )
    }
}

/// AFURLResponseSerialization: validates a response and decodes its body.
public protocol ResponseSerialization: Sendable {
    /// Validates `response` and decodes `data` into the response object (AFNetworking's
    /// `responseObjectForResponse:data:error:`). Throws a ``SerializationError`` on failure.
    func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)?
}
