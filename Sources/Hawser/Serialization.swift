// The two serialization protocols the session manager is written against
// (AFURLRequestSerialization / AFURLResponseSerialization), and the response value
// they read. The concrete serializers live in their own files.
import Foundation
import HawserCore

/// Request parameters as AFNetworking takes them (`id parameters`): a dictionary whose values
/// are strings, numbers, booleans, arrays, sets, nested dictionaries or ``ParameterNull``.
public typealias Parameters = [String: any Sendable]

/// The NSHTTPURLResponse role: what a serializer and a completion handler see of a response.
public struct HTTPResponse: Sendable {
    /// The URL the response came from (after redirects).
    public var url: URL
    public var statusCode: Int
    public var headers: HTTPHeaders
    /// The HTTP version the server answered with.
    public var version: HTTPVersion

    public init(url: URL, statusCode: Int, headers: HTTPHeaders, version: HTTPVersion = .http1_1) {
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.version = version
    }

    /// The media type of `Content-Type` without parameters, lower-cased (`application/json`).
    public var mimeType: String? {
        guard let ct = self.headers["Content-Type"] else { return nil }
        let media = ct.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ct
        let trimmed = media.trimmingCharacters(in: .whitespaces).lowercased()
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The `charset` parameter of `Content-Type`, lower-cased, without quotes.
    public var textEncodingName: String? {
        guard let ct = self.headers["Content-Type"] else { return nil }
        for param in ct.split(separator: ";").dropFirst() {
            let kv = param.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { continue }
            return kv[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
        }
        return nil
    }

    /// `Content-Length` when the server sent one, otherwise -1 (NSURLResponseUnknownLength).
    public var expectedContentLength: Int64 {
        self.headers["Content-Length"].flatMap { Int64($0) } ?? -1
    }
}

/// AFURLRequestSerialization: turns a request and parameters into the request to send.
public protocol RequestSerialization: Sendable {
    /// Returns `request` with `parameters` encoded into it (query or body), plus the
    /// serializer's default headers. Throws a ``SerializationError`` when they cannot be encoded.
    func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest
}

/// AFURLResponseSerialization: validates a response and decodes its body.
public protocol ResponseSerialization: Sendable {
    /// Validates `response` and decodes `data` into the response object (AFNetworking's
    /// `responseObjectForResponse:data:error:`). Throws a ``SerializationError`` on failure.
    func responseObject(for response: HTTPResponse?, data: [UInt8]?) throws -> (any Sendable)?
}
