import HawserCore

// AFHTTPRequestSerializer, AFJSONRequestSerializer and AFPropertyListRequestSerializer.
//
// AF's serializers are mutable objects that a manager is configured with and then shares across
// threads; AF guards their headers with a concurrent queue and tracks changed request defaults
// with KVO. Here they are value types: configure a copy, hand it to the manager, and the copy the
// manager holds can never change under a request being built, with no lock and no KVO. The JSON
// and property-list serializers hold an ``HTTPRequestSerializer`` (AF's superclass) and expose
// its settings through ``HTTPRequestSerializing`` and dynamic member lookup.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The Hawser version the default `User-Agent` names (the package version, `HawserVersion`).
let hawserVersion = HawserVersion.string

/// A custom query-string encoder (AF's `setQueryStringSerializationWithBlock:`): receives the
/// request being serialized and the parameters; throws to fail the request.
public typealias QueryStringSerialization = @Sendable (HTTPClientRequest, Parameters) throws -> String

/// The settings and behaviour every request serializer shares with AFHTTPRequestSerializer:
/// default headers, request defaults, `request(withMethod:urlString:parameters:)` and the
/// multipart builders. Conformers keep an ``HTTPRequestSerializer`` in ``httpSerializer``.
public protocol HTTPRequestSerializing: RequestSerialization {
    /// The AFHTTPRequestSerializer part of this serializer (its headers and request defaults).
    var httpSerializer: HTTPRequestSerializer { get set }
}

/// AFHTTPRequestSerializer: encodes parameters into the query (GET, HEAD, DELETE) or into an
/// `application/x-www-form-urlencoded` body, and adds default headers.
public struct HTTPRequestSerializer: HTTPRequestSerializing {
    /// The header fields added to every request that does not already set them (AF's
    /// `HTTPRequestHeaders`). Starts with `Accept-Language` and `User-Agent`.
    public private(set) var httpRequestHeaders: HTTPHeaders

    /// Methods whose parameters go into the URL query instead of the body. Upper-case;
    /// default GET, HEAD, DELETE.
    public var httpMethodsEncodingParametersInURI: Set<String> = Self.defaultMethodsEncodingParametersInURI {
        didSet {
            self.methodsInURIAreDefault =
                self.httpMethodsEncodingParametersInURI == Self.defaultMethodsEncodingParametersInURI
        }
    }
    private static let defaultMethodsEncodingParametersInURI: Set<String> = ["GET", "HEAD", "DELETE"]
    /// Whether the set is the default one, so a request's method is compared, not hashed.
    private var methodsInURIAreDefault = true

    /// The encoding of query strings and form bodies. Only UTF-8 is supported: the escaping
    /// rules are defined on UTF-8 bytes and every server reads form bodies as UTF-8.
    public var stringEncoding: String.Encoding { .utf8 }

    // The request defaults. AF copies one onto a request only if it was set on the serializer
    // (its KVO-tracked `mutableObservedChangedKeyPaths`); here "set" is "not nil", and setting one
    // back to nil stops applying it.

    /// The request timeout in seconds (NSURLRequest.timeoutInterval); nil leaves the session's.
    /// It is an idle timeout: the most time between two bytes moving, as NSURLSession's.
    public var timeoutInterval: Double?
    /// The total deadline in seconds of each request this serializer makes
    /// (`HTTPClientRequest.timeoutIntervalForResource`): the most the whole task may take,
    /// connecting, redirects and a slowly trickled body included; nil leaves the session's
    /// `timeoutIntervalForResource`. NSURLRequest has no such field (only the session
    /// configuration does); Hawser's requests carry one, so one request can be bounded apart
    /// from the others.
    public var timeoutIntervalForResource: Double?
    /// The cache policy; nil leaves the session's.
    public var cachePolicy: CachePolicy?
    /// Whether to send and store cookies; nil leaves the session's `httpShouldSetCookies`.
    public var shouldHandleCookies: Bool?
    /// Kept for parity with AF and stored, but it does nothing: Linux has no cellular
    /// interface policy to apply it to, and Hawser's requests carry no such flag.
    public var allowsCellularAccess: Bool?
    /// Kept for parity with AF and stored, but Hawser never pipelines (one request at a time
    /// per connection, as NSURLSession does in practice), so it is not applied.
    public var shouldUsePipelining: Bool?

    /// A custom query-string encoder used instead of `queryString(from:)`; nil for the default
    /// (AF's `AFHTTPRequestQueryStringDefaultStyle`).
    public var queryStringSerialization: QueryStringSerialization?

    /// A serializer with the default headers: `Accept-Language` from the process locale and a
    /// Hawser `User-Agent`.
    public init() {
        self.init(environment: ProcessInfo.processInfo.environment)
    }

    /// A serializer whose `Accept-Language` comes from the locale variables in `environment`
    /// (`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`).
    public init(environment: [String: String]) {
        self.httpRequestHeaders = [:]
        self.httpRequestHeaders.add(name: "Accept-Language", value: Self.acceptLanguage(environment: environment))
        self.httpRequestHeaders.add(name: "User-Agent", value: Self.defaultUserAgent)
    }

    public var httpSerializer: HTTPRequestSerializer {
        get { self }
        set { self = newValue }
    }

    // MARK: Headers

    /// Sets a default header field; nil removes it. Names are case-insensitive.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        if let value {
            self.httpRequestHeaders.replaceOrAdd(name: field, value: value)
        } else {
            self.httpRequestHeaders.remove(name: field)
        }
    }

    /// The default value for `field`, or nil.
    public func value(forHTTPHeaderField field: String) -> String? {
        self.httpRequestHeaders[field]
    }

    /// Replaces every default header (decoding).
    mutating func replaceDefaultHeaders(with headers: HTTPHeaders) {
        self.httpRequestHeaders = headers
    }

    /// Sets the methods encoding parameters in the URI from an initializer (where `didSet` does
    /// not run).
    mutating func setMethodsEncodingParametersInURI(_ methods: Set<String>) {
        self.httpMethodsEncodingParametersInURI = methods
        self.methodsInURIAreDefault = methods == Self.defaultMethodsEncodingParametersInURI
    }

    // MARK: AFURLRequestSerialization

    public func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest {
        try self.request(bySerializing: request, parameters: parameters as (any Sendable)?)
    }

    /// AFHTTPRequestSerializer's `requestBySerializingRequest:withParameters:error:` for parameters
    /// of any shape: a dictionary, an array (`[]=a&[]=b`), a set (one pair per element, sorted) or a
    /// single value, flattened as `queryString(from:)` describes. A custom
    /// ``queryStringSerialization`` closure takes dictionaries only.
    @_disfavoredOverload
    public func request(
        bySerializing request: HTTPClientRequest,
        parameters: (any Sendable)?
    ) throws -> HTTPClientRequest {
        var out = self.addingDefaultHeaders(to: request)
        var query: String?
        if let parameters {
            if let custom = self.queryStringSerialization {
                guard let dictionary = parameters as? Parameters else {
                    throw SerializationError(
                        .invalidParameters,
                        "the custom query-string serialization takes a dictionary of parameters, not \(type(of: parameters))",
                        url: request.url
                    )
                }
                do {
                    query = try custom(request, dictionary)
                } catch {
                    throw SerializationError(
                        .queryStringSerializationFailed,
                        "the query string serialization failed: \(error)",
                        url: request.url,
                        cause: sendableError(error)
                    )
                }
            } else if let dictionary = parameters as? Parameters {
                query = Self.queryString(from: dictionary)
            } else {
                query = Self.queryString(from: parameters)
            }
        }
        if self.encodesParametersInURI(request.method) {
            if let query, !query.isEmpty {
                out.url = try Self.url(request.url, appendingQuery: query)
            }
        } else {
            // An empty string is a valid x-www-form-urlencoded body (AF #2864).
            if !out.headers.contains(name: "Content-Type") {
                out.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            }
            out.body = .bytes(Array((query ?? "").utf8))
        }
        return out
    }

    // MARK: Helpers shared with the JSON and property-list serializers

    /// Whether `method`'s parameters go into the query.
    public func encodesParametersInURI(_ method: HTTPMethod) -> Bool {
        if self.methodsInURIAreDefault {
            switch method.rawValue {
            case "GET", "HEAD", "DELETE": return true
            case "POST", "PUT", "PATCH": return false
            default: break
            }
        }
        // Methods are upper-case nearly always: look the name up as it is first.
        return self.httpMethodsEncodingParametersInURI.contains(method.rawValue)
            || self.httpMethodsEncodingParametersInURI.contains(method.rawValue.uppercased())
    }

    /// The body serializers' common frame (AFJSONRequestSerializer, AFPropertyListRequestSerializer):
    /// parameters go in the URI for those methods; otherwise the default headers, `contentType`
    /// unless the request has a Content-Type, and `encode`'s bytes as the body.
    package func request(
        _ request: HTTPClientRequest,
        parameters: (any Sendable)?,
        bodyContentType contentType: String,
        encode: (any Sendable) throws -> [UInt8]
    ) throws -> HTTPClientRequest {
        if self.encodesParametersInURI(request.method) {
            return try self.request(bySerializing: request, parameters: parameters)
        }
        var out = self.addingDefaultHeaders(to: request)
        guard let parameters else { return out }
        if !out.headers.contains(name: "Content-Type") {
            out.headers.add(name: "Content-Type", value: contentType)
        }
        out.body = .bytes(try encode(parameters))
        return out
    }

    /// `request` with every default header it does not set itself.
    public func addingDefaultHeaders(to request: HTTPClientRequest) -> HTTPClientRequest {
        var out = request
        if request.headers.count == 0 {
            // The common case: the defaults are the headers, shared (copy-on-write), not copied.
            out.headers = self.httpRequestHeaders
            return out
        }
        for (name, value) in self.httpRequestHeaders where !request.headers.contains(name: name) {
            out.headers.add(name: name, value: value)
        }
        return out
    }

    /// `url` with `query` appended after `&` (it has a query) or `?`.
    static func url(_ url: URL, appendingQuery query: String) throws -> URL {
        var s = url.absoluteString
        var fragment = ""
        if let hash = s.firstIndex(of: "#") {
            fragment = String(s[hash...])
            s = String(s[..<hash])
        }
        s += (url.query(percentEncoded: true) != nil ? "&" : "?") + query + fragment
        guard let result = URL(string: s) else {
            throw SerializationError(
                .invalidURL,
                "appending the query to \(url.absoluteString) gives no valid URL",
                url: url
            )
        }
        return result
    }

    // MARK: Default headers

    /// `Accept-Language` in AF's format: up to six languages, `tag;q=1, tag;q=0.9, …`, from the
    /// POSIX locale variables (`LANGUAGE` list first, then `LC_ALL`, `LC_MESSAGES`, `LANG`);
    /// `en` when none names a language (`C`, `POSIX`, unset).
    public static func acceptLanguage(environment: [String: String]) -> String {
        var languages = preferredLanguages(environment: environment)
        if languages.isEmpty { languages = ["en"] }
        var parts: [String] = []
        // q = 1, 0.9, … 0.5 (AF's `%0.1g` of 1 - 0.1 i), in tenths so no float is formatted.
        for (i, tag) in languages.enumerated() {
            let tenths = 10 - i
            parts.append("\(tag);q=\(tenths == 10 ? "1" : "0.\(tenths)")")
            if tenths <= 5 { break }
        }
        return parts.joined(separator: ", ")
    }

    /// The BCP 47 tags named by the locale variables, most preferred first, without duplicates.
    static func preferredLanguages(environment env: [String: String]) -> [String] {
        func tag(_ posix: Substring) -> String? {
            // language[_territory][.codeset][@modifier] → language-territory
            var s = posix.split(separator: "@", maxSplits: 1).first ?? ""
            s = s.split(separator: ".", maxSplits: 1).first ?? ""
            guard !s.isEmpty, s != "C", s != "POSIX" else { return nil }
            let t = String(s.map { $0 == "_" ? "-" : $0 })
            guard t.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else { return nil }
            return t
        }
        var result: [String] = []
        func add(_ t: String?) { if let t, !result.contains(t) { result.append(t) } }
        let primary = [env["LC_ALL"], env["LC_MESSAGES"], env["LANG"]].compactMap { $0 }.first { !$0.isEmpty }
        // gettext ignores LANGUAGE when the locale is C.
        if let primary, tag(Substring(primary)) != nil, let list = env["LANGUAGE"] {
            for item in list.split(separator: ":") { add(tag(item)) }
        }
        if let primary { add(tag(Substring(primary))) }
        return result
    }

    /// `<application> Hawser/<version> (Linux; <machine>)`, AFNetworking's shape on Linux: the
    /// application first (the program's file name, as AFNetworking names the bundle's executable),
    /// then Hawser, then the operating system's name and the processor architecture. Never the
    /// kernel release or build, which would tell every server the exact kernel (and its patch
    /// level) the client runs.
    public static let defaultUserAgent: String = {
        var u = utsname()
        let machine: String
        if uname(&u) == 0 {
            machine = withUnsafeBytes(of: &u.machine) { raw in
                userAgentToken(raw.prefix(while: { $0 != 0 }))
            }
        } else {
            machine = ""
        }
        return userAgent(application: applicationName(), machine: machine)
    }()

    /// The User-Agent for an application named `application` on a `machine` processor:
    /// `application Hawser/<version> (Linux; machine)`, leaving out what is empty. Bytes that
    /// cannot be in a token become `_`. For an application that names itself (and its version,
    /// as `"MyApp/1.2"`) rather than by its program file.
    ///
    /// - Parameters:
    ///   - application: the application's product token, such as `"MyApp/1.2"`; empty for none.
    ///   - machine: the processor architecture, such as `"x86_64"`; empty for none.
    public static func userAgent(application: String, machine: String) -> String {
        let app = userAgentToken(application.utf8)
        let system = machine.isEmpty ? "(Linux)" : "(Linux; \(userAgentToken(machine.utf8)))"
        return (app.isEmpty ? "" : app + " ") + "Hawser/\(hawserVersion) " + system
    }

    /// The program's file name: the last component of the first argument.
    static func applicationName() -> String {
        guard let first = CommandLine.arguments.first else { return "" }
        return String(first.split(separator: "/").last ?? "")
    }

    /// `bytes` as an RFC 9110 product (a token, and `/` before a version): other bytes become
    /// `_`, at most 64 of them.
    static func userAgentToken(_ bytes: some Sequence<UInt8>) -> String {
        let extra = Array("!#$%&'*+-.^_`|~/".utf8)
        var out: [UInt8] = []
        for b in bytes.prefix(64) {
            let isToken =
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || extra.contains(b)
            out.append(isToken ? b : UInt8(ascii: "_"))
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension HTTPRequestSerializing {
    /// Sets a default header field on ``httpSerializer``; nil removes it.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        self.httpSerializer.setValue(value, forHTTPHeaderField: field)
    }

    /// The default value for `field`, or nil.
    public func value(forHTTPHeaderField field: String) -> String? {
        self.httpSerializer.value(forHTTPHeaderField: field)
    }

    /// Sets `Authorization: Basic base64(username:password)` (UTF-8) as a default header.
    public mutating func setAuthorizationHeaderField(username: String, password: String) {
        let credentials = Data("\(username):\(password)".utf8).base64EncodedString()
        self.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
    }

    /// Removes the default `Authorization` header.
    public mutating func clearAuthorizationHeader() {
        self.setValue(nil, forHTTPHeaderField: "Authorization")
    }

    /// AF's `requestWithMethod:URLString:parameters:error:`: a request for `urlString` with the
    /// request defaults that were set, then serialized with `parameters` by this serializer.
    /// - Throws: ``SerializationError``: `.invalidURL` (-1000) when `urlString` is not an absolute
    ///   URL or has no host, `.unsupportedURL` (-1002) for a scheme other than http and https
    ///   (NSURLSession's -1002), or whatever serializing the parameters throws.
    public func request(
        withMethod method: HTTPMethod,
        urlString: String,
        parameters: Parameters?
    ) throws -> HTTPClientRequest {
        try self.request(withMethod: method, urlString: urlString, parameters: parameters as (any Sendable)?)
    }

    /// ``request(withMethod:urlString:parameters:)`` with parameters of any shape (an array, a
    /// set, a JSON value), as AF's `id parameters`.
    @_disfavoredOverload
    public func request(
        withMethod method: HTTPMethod,
        urlString: String,
        parameters: (any Sendable)?
    ) throws -> HTTPClientRequest {
        guard !HTTPRequestSerializer.containsBytesInvalidInURL(urlString), let parsed = URL(string: urlString),
            parsed.scheme != nil
        else {
            throw SerializationError(.invalidURL, "'\(urlString)' is not an absolute URL")
        }
        let url = try HTTPRequestSerializer.checked(parsed)
        var request = HTTPClientRequest(method: method, url: url)
        RequestDefaults(self.httpSerializer).apply(to: &request)
        return try self.request(bySerializing: request, parameters: parameters)
    }
}

extension HTTPRequestSerializer {
    /// `url` if a request can be made of it, as NSURLSession would judge it: http or https
    /// (else `.unsupportedURL`, -1002) and a host (else `.invalidURL`, -1000).
    public static func checked(_ url: URL) throws(SerializationError) -> URL {
        var scheme = url.scheme ?? ""
        if scheme != "http" && scheme != "https" { scheme = scheme.lowercased() }
        guard scheme == "http" || scheme == "https" else {
            throw SerializationError(
                .unsupportedURL,
                scheme.isEmpty
                    ? "'\(url.absoluteString)' has no scheme"
                    : "the URL scheme '\(scheme)' is not supported (http and https are)",
                url: url
            )
        }
        guard let host = url.host(percentEncoded: true), !host.isEmpty else {
            throw SerializationError(.invalidURL, "'\(url.absoluteString)' has no host", url: url)
        }
        // The engine's own check of the authority (port in range, no space, backslash or control
        // byte, a user part without a backslash, a host that is a valid domain name), here so
        // that it fails at serialization time as the other -1000 cases do.
        if case .failure(let e) = URLAuthority.parse(url) {
            throw SerializationError(.invalidURL, e.message, url: url)
        }
        return url
    }

    /// Whether `s` has a byte RFC 3986 does not allow anywhere in a URL: a control byte, a space,
    /// DEL, or one of `"<>\^`{|}`. NSURL's `URLWithString:` refuses such a string; Foundation's
    /// `URL(string:)` percent-encodes it, which would send a URL the caller did not write.
    public static func containsBytesInvalidInURL(_ s: String) -> Bool {
        s.utf8.contains { b in
            switch b {
            case 0x00...0x20, 0x7F, 0x22, 0x3C, 0x3E, 0x5C, 0x5E, 0x60, 0x7B, 0x7C, 0x7D: return true
            default: return false
            }
        }
    }
}

/// AFJSONRequestSerializer: parameters as a JSON body (`Content-Type: application/json` unless
/// the request sets one); for the methods in the URI set, as ``HTTPRequestSerializer`` does.
///
/// The body is written by Hawser itself, in the bytes `JSONSerialization` writes for the same
/// parameters (see ``WritingOptions/sortedKeys`` for the one difference). Leaves: `String`,
/// `Bool`, the integer types, finite `Double`/`Float`/`Decimal`, ``JSONValue``, ``ParameterNull``
/// and nil optionals (`null`), and ``ParameterValueConvertible`` values (HawserFoundation makes
/// `NSNull` and `NSNumber` ones); containers: dictionaries with `String` keys and
/// arrays. Anything else (a set, a `Date`, a non-finite number) is an `.invalidParameters` error.
@dynamicMemberLookup
public struct JSONRequestSerializer: HTTPRequestSerializing {
    /// NSJSONSerialization's writing options, with the same raw values.
    public struct WritingOptions: OptionSet, Sendable, Hashable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Two-space indentation, one member per line, `"key" : value`.
        public static let prettyPrinted = WritingOptions(rawValue: 1 << 0)
        /// Object keys in order of their Unicode scalar values, so the body is deterministic.
        /// (Foundation orders them with a numeric, case-insensitive collation instead; the
        /// two agree on keys of lowercase ASCII letters, `_` and `-`.)
        public static let sortedKeys = WritingOptions(rawValue: 1 << 1)
        /// Allows parameters that are a single string, number, boolean or null (a JSON fragment);
        /// without it only an object or an array is written, as `JSONSerialization.isValidJSONObject` requires.
        public static let fragmentsAllowed = WritingOptions(rawValue: 1 << 2)
        /// `/` as itself instead of `\/`.
        public static let withoutEscapingSlashes = WritingOptions(rawValue: 1 << 3)
    }

    public var httpSerializer: HTTPRequestSerializer
    /// How the body is written (`.sortedKeys`, `.prettyPrinted`, `.withoutEscapingSlashes`).
    public var writingOptions: WritingOptions

    /// Creates a serializer that writes parameters as a JSON body.
    ///
    /// - Parameters:
    ///   - writingOptions: how the body is written; none by default (compact, keys unordered).
    ///   - httpSerializer: the settings shared with the HTTP serializer (headers, timeouts, the
    ///     methods whose parameters go in the query); a default ``HTTPRequestSerializer`` by default.
    public init(writingOptions: WritingOptions = [], httpSerializer: HTTPRequestSerializer = HTTPRequestSerializer()) {
        self.writingOptions = writingOptions
        self.httpSerializer = httpSerializer
    }

    /// The ``HTTPRequestSerializer`` settings (`timeoutInterval`, `httpMethodsEncodingParametersInURI` …).
    public subscript<T>(dynamicMember keyPath: WritableKeyPath<HTTPRequestSerializer, T>) -> T {
        get { self.httpSerializer[keyPath: keyPath] }
        set { self.httpSerializer[keyPath: keyPath] = newValue }
    }

    public func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest {
        try self.request(bySerializing: request, parameters: parameters as (any Sendable)?)
    }

    /// Parameters of any JSON shape: an object (a dictionary), an array at the top level (AF's
    /// `testThatJSONRequestSerializationHandlesParametersArray`), a ``JSONValue``, and with
    /// ``WritingOptions/fragmentsAllowed`` a single string, number, boolean or null.
    @_disfavoredOverload
    public func request(
        bySerializing request: HTTPClientRequest,
        parameters: (any Sendable)?
    ) throws -> HTTPClientRequest {
        try self.httpSerializer.request(request, parameters: parameters, bodyContentType: "application/json") {
            parameters in
            do throws(SerializationError) {
                if !self.writingOptions.contains(.fragmentsAllowed), !isJSONContainer(parameters) {
                    throw SerializationError(
                        .invalidParameters,
                        "The `parameters` argument is not valid JSON: a top-level \(type(of: parameters)) is a fragment; only an object or an array is written without .fragmentsAllowed"
                    )
                }
                return try JSONWriter.write(parameters, options: self.writingOptions)
            } catch {
                var e = error.with(url: request.url)
                e.reason = "The `parameters` argument is not valid JSON."
                throw e
            }
        }
    }
}

/// Whether `value` is a JSON object or array (NSJSONSerialization's `isValidJSONObject` top level).
func isJSONContainer(_ value: Any) -> Bool {
    guard let v = unwrapped(value) else { return false }
    if let j = v as? JSONValue {
        switch j {
        case .object, .array: return true
        default: return false
        }
    }
    if v is String || v is Substring { return false }
    switch Mirror(reflecting: v).displayStyle {
    case .dictionary?, .collection?, .set?: return true
    default: return false
    }
}

extension SerializationError {
    package func with(url: URL) -> SerializationError {
        var e = self
        if e.url == nil { e.url = url }
        return e
    }
}

// MARK: - Multipart requests

extension HTTPRequestSerializing {
    /// AF's `multipartFormRequestWithMethod:URLString:parameters:constructingBodyWithBlock:error:`:
    /// a request whose body is the multipart form `constructingBodyWith` builds, after one
    /// form part per flattened parameter (same flattening as the query string; `Data` values
    /// sent as they are, ``ParameterNull`` as an empty part).
    ///
    /// The body is a ``MultipartFormData/makeRequestBody()`` stream with `Content-Type`
    /// `multipart/form-data; boundary=…` and `Content-Length` set. An empty form leaves the
    /// request as the serializer made it, as AF does.
    /// - Throws: ``SerializationError`` `.invalidParameters` for GET or HEAD (they have no
    ///   body), `.invalidURL`, or what the closure throws (`.fileNotReachable` …).
    public func multipartFormRequest(
        withMethod method: HTTPMethod,
        urlString: String,
        parameters: Parameters?,
        boundary: String = MultipartFormData.makeBoundary(),
        constructingBodyWith build: ((inout MultipartFormData) throws -> Void)? = nil
    ) throws -> HTTPClientRequest {
        let (request, form) = try self.multipartForm(
            method: method,
            urlString: urlString,
            parameters: parameters,
            boundary: boundary,
            build: build
        )
        guard !form.isEmpty else { return request }
        var out = request
        out.headers.replaceOrAdd(name: "Content-Type", value: form.contentType)
        out.headers.replaceOrAdd(name: "Content-Length", value: String(form.contentLength))
        out.body = form.makeRequestBody()
        return out
    }

    /// The equivalent of AF's `requestWithMultipartFormRequest:writingStreamContentsToFile:completionHandler:`:
    /// builds the same multipart form, writes its whole body to `fileURL`, and returns the
    /// request *without* a body (its `Content-Type` and `Content-Length` set), to be sent as
    /// an upload from that file. Returns when the file is complete.
    /// - Throws: as ``multipartFormRequest(withMethod:urlString:parameters:boundary:constructingBodyWith:)``,
    ///   and `.cannotWriteFile` / `.bodyReadFailed` while writing.
    public func multipartFormRequest(
        withMethod method: HTTPMethod,
        urlString: String,
        parameters: Parameters?,
        writingStreamContentsToFile fileURL: URL,
        boundary: String = MultipartFormData.makeBoundary(),
        constructingBodyWith build: ((inout MultipartFormData) throws -> Void)? = nil
    ) async throws -> HTTPClientRequest {
        let (request, form) = try self.multipartForm(
            method: method,
            urlString: urlString,
            parameters: parameters,
            boundary: boundary,
            build: build
        )
        try await form.writeBody(toFile: fileURL)
        var out = request
        out.body = nil
        if !form.isEmpty {
            out.headers.replaceOrAdd(name: "Content-Type", value: form.contentType)
            out.headers.replaceOrAdd(name: "Content-Length", value: String(form.contentLength))
        }
        return out
    }

    private func multipartForm(
        method: HTTPMethod,
        urlString: String,
        parameters: Parameters?,
        boundary: String,
        build: ((inout MultipartFormData) throws -> Void)?
    ) throws -> (HTTPClientRequest, MultipartFormData) {
        let upper = method.rawValue.uppercased()
        guard upper != "GET", upper != "HEAD" else {
            throw SerializationError(
                .invalidParameters,
                "a multipart form cannot be sent with \(upper), which has no body"
            )
        }
        let request = try self.request(withMethod: method, urlString: urlString, parameters: nil)
        var form = MultipartFormData(boundary: boundary)
        if let parameters {
            for pair in HTTPRequestSerializer.queryStringPairs(from: parameters) {
                let bytes: [UInt8]
                switch pair.value {
                case nil: bytes = []
                case let d as Data: bytes = Array(d)
                case let v?: bytes = Array(parameterDescription(v).utf8)
                }
                form.appendPart(withFormData: bytes, name: pair.field)
            }
        }
        try build?(&form)
        return (request, form)
    }
}

/// The request defaults an ``HTTPRequestSerializer`` applies when they were set (AF's observed
/// key paths): what `request(withMethod:urlString:parameters:)` and the HTTP manager copy onto a
/// new request.
struct RequestDefaults: Sendable {
    var timeoutInterval: Double?
    var timeoutIntervalForResource: Double?
    var cachePolicy: CachePolicy?
    var shouldHandleCookies: Bool?

    init() {}

    init(_ http: HTTPRequestSerializer) {
        self.timeoutInterval = http.timeoutInterval
        self.timeoutIntervalForResource = http.timeoutIntervalForResource
        self.cachePolicy = http.cachePolicy
        self.shouldHandleCookies = http.shouldHandleCookies
    }

    /// The defaults of `serializer` when it is an ``HTTPRequestSerializing`` one; none otherwise.
    init(_ serializer: any RequestSerialization) {
        if let http = serializer as? any HTTPRequestSerializing { self.init(http.httpSerializer) } else { self.init() }
    }

    var isEmpty: Bool {
        self.timeoutInterval == nil && self.timeoutIntervalForResource == nil && self.cachePolicy == nil
            && self.shouldHandleCookies == nil
    }

    func apply(to request: inout HTTPClientRequest) {
        if let t = self.timeoutInterval { request.timeoutInterval = t }
        if let t = self.timeoutIntervalForResource { request.timeoutIntervalForResource = t }
        if let c = self.cachePolicy { request.cachePolicy = c }
        if let c = self.shouldHandleCookies { request.shouldHandleCookies = c }
    }
}
