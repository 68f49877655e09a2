import HTTPTypes
import HawserCore

// Conversions between Hawser's message types and swift-http-types' currency types
// (`HTTPRequest`, `HTTPResponse`, `HTTPFields`), and a `Session` entry point that speaks them.
//
// Field names keep their spelling, fields keep their order, and a repeated field stays repeated
// (never folded into one comma-joined value). A value that cannot be carried faithfully is a
// typed error naming it, never silently rewritten.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Fields

extension HTTPFields {
    /// Hawser's header fields as `HTTPFields`: same names (as spelled), same order, repeated
    /// fields kept apart.
    ///
    /// Throws `invalidRequest` naming the first field whose name is not an RFC 9110 token or whose
    /// value has a byte no field may carry (CR, LF, NUL, other controls).
    public init(_ headers: HTTPHeaders) throws(HawserError) {
        self.init()
        self.reserveCapacity(headers.count)
        for (name, value) in headers {
            guard let fieldName = HTTPField.Name(name) else {
                throw HawserError(.invalidRequest, "the field name '\(name)' is not a token (RFC 9110 §5.1)")
            }
            guard HTTPField.isValidValue(value) else {
                throw HawserError(.invalidRequest, "the value of field '\(name)' has a byte no field value may contain")
            }
            self.append(HTTPField(name: fieldName, value: value))
        }
    }
}

extension HTTPHeaders {
    /// `HTTPFields` as Hawser's header fields: names as spelled (`rawName`), in order, repeated
    /// fields kept apart. Cannot fail: `HTTPFields` only holds valid fields.
    public init(_ fields: HTTPFields) {
        var pairs: [(name: String, value: String)] = []
        pairs.reserveCapacity(fields.count)
        for field in fields {
            pairs.append((field.name.rawName, field.value))
        }
        self.init(pairs)
    }
}

// MARK: - Responses

extension HTTPResponse {
    /// A response head as an `HTTPResponse` (status code, reason phrase, fields). The HTTP version
    /// has no place there and is dropped. Throws `protocolError` for a status outside 100…999.
    public init(_ head: HTTPResponseHead) throws(HawserError) {
        guard (100...999).contains(head.status) else {
            throw HawserError(.protocolError, "status \(head.status) is not a three-digit status code")
        }
        self.init(
            status: .init(code: head.status, reasonPhrase: head.reasonPhrase),
            headerFields: try HTTPFields(head.headers)
        )
    }
}

extension HTTPResponseHead {
    /// An `HTTPResponse` as a Hawser response head (HTTP/1.1).
    public init(_ response: HTTPResponse) {
        self.init(
            version: .http1_1,
            status: response.status.code,
            reasonPhrase: response.status.reasonPhrase,
            headers: HTTPHeaders(response.headerFields)
        )
    }
}

// MARK: - Requests

extension HTTPRequest {
    /// A Hawser request's method, URL and fields as an `HTTPRequest`: scheme and authority (host
    /// and port as the URL gives them) from the URL, the path with its query as the `:path`.
    /// The body, timeouts and per-request switches have no place in `HTTPRequest`.
    ///
    /// Throws `invalidRequest` for a method that is not a token, a URL without scheme or host, or
    /// a field that ``HTTPFields/init(_:)`` refuses.
    public init(_ request: HTTPClientRequest) throws(HawserError) {
        guard let method = HTTPRequest.Method(request.method.rawValue) else {
            throw HawserError(
                .invalidRequest,
                "the method '\(request.method.rawValue)' is not a token",
                url: request.url
            )
        }
        guard let scheme = request.url.scheme, let host = request.url.host(percentEncoded: true), !host.isEmpty else {
            throw HawserError(.invalidRequest, "the URL has no scheme or no host", url: request.url)
        }
        // `host(percentEncoded:)` gives an IPv6 literal without its brackets.
        var authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        if let port = request.url.port { authority += ":\(port)" }
        var path = request.url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = request.url.query(percentEncoded: true) { path += "?" + query }
        self.init(
            method: method,
            scheme: scheme,
            authority: authority,
            path: path,
            headerFields: try HTTPFields(request.headers)
        )
    }
}

extension HTTPClientRequest {
    /// An `HTTPRequest` (and a body) as a Hawser request. The URL is `scheme://authority/path`;
    /// without an `:authority` the `Host` field stands in for it (HTTP/1.1 form).
    ///
    /// Throws `invalidRequest` when the request has no scheme, no authority and no `Host`, a
    /// path that is not in origin form (`/…`; `*` and CONNECT's authority form are not requests a
    /// session sends), or parts that do not make a URL.
    public init(_ request: HTTPRequest, body: RequestBody? = nil) throws(HawserError) {
        guard let scheme = request.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HawserError(
                .invalidRequest,
                "the request's scheme is '\(request.scheme ?? "")'; a session sends http and https"
            )
        }
        guard let authority = request.authority ?? request.headerFields[HTTPField.Name("Host")!], !authority.isEmpty
        else {
            throw HawserError(.invalidRequest, "the request has neither an :authority nor a Host field")
        }
        let path = request.path ?? "/"
        guard path.hasPrefix("/") else {
            throw HawserError(
                .invalidRequest,
                "the request's path '\(path)' is not in origin form (it must start with '/')"
            )
        }
        guard let url = URL(string: "\(scheme)://\(authority)\(path)"), url.host(percentEncoded: true) != nil else {
            throw HawserError(.invalidRequest, "'\(scheme)://\(authority)\(path)' is not a URL")
        }
        var headers = HTTPHeaders(request.headerFields)
        // The authority became the URL's; a Host field equal to it would only be sent twice.
        if request.authority != nil, headers["Host"] == request.authority { headers.remove(name: "Host") }
        self.init(method: HTTPMethod(rawValue: request.method.rawValue), url: url, headers: headers, body: body)
    }
}

// MARK: - Session

extension Session {
    /// Executes an `HTTPRequest` (with an optional body) and returns the `HTTPResponse` as soon as
    /// its head arrived, with the body to read as an `AsyncSequence` of byte chunks
    /// (`ResponseBodyStream`: back-pressure, cancellation and errors as for an
    /// `HTTPClientRequest`).
    ///
    /// Redirects, authentication, cookies, decoding, the cache, proxies, TLS and timeouts are the
    /// session's, as for every request it executes.
    public func streamingResponse(
        for request: HTTPRequest,
        body: RequestBody? = nil
    ) async throws(HawserError)
        -> (response: HTTPResponse, body: ResponseBodyStream)
    {
        let clientRequest = try HTTPClientRequest(request, body: body)
        let response = try await self.streamingResponse(for: clientRequest)
        do {
            return (try HTTPResponse(response.head), response.body)
        } catch {
            response.task.cancel()
            throw error
        }
    }
}

extension HTTPClientStreamingResponse {
    /// The head as an `HTTPResponse`.
    public func httpResponse() throws(HawserError) -> HTTPResponse {
        try HTTPResponse(self.head)
    }
}
