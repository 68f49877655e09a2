import HawserCore
import Synchronization

// AFHTTPSessionManager: a SessionManager with a base URL, a request serializer and the
// GET / HEAD / POST / PUT / PATCH / DELETE conveniences.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The AFHTTPSessionManager role: builds requests from a URL string relative to ``baseURL`` and
/// parameters (through ``requestSerializer``), runs them as data tasks, and reports the serialized
/// response to `success` or the error to `failure`, on the completion queue.
///
/// URL strings resolve against ``baseURL`` by RFC 3986, with AFNetworking's rule that a base URL
/// with a path gets a trailing slash. With `http://example.com/v1/`:
///
/// | string | URL |
/// |---|---|
/// | `foo` | `http://example.com/v1/foo` |
/// | `foo?bar=baz` | `http://example.com/v1/foo?bar=baz` |
/// | `/foo` | `http://example.com/foo` |
/// | `foo/` | `http://example.com/v1/foo/` (AFNetworking's header says `…/v1/foo`; RFC 3986 keeps the slash) |
/// | `/foo/` | `http://example.com/foo/` |
/// | `http://example2.com/` | `http://example2.com/` |
///
/// Parameters are what AFNetworking's `id parameters` takes: a dictionary (``Parameters``, the
/// usual case), or — through the overloads taking `(any Sendable)?` — an array, a set or any JSON
/// value, as far as ``requestSerializer`` can encode it.
///
/// Like every manager, a resumed task keeps it alive until the task completes:
/// `HTTPSessionManager().get(…)` needs no variable.
public final class HTTPSessionManager: SessionManager, @unchecked Sendable {
    /// The URL relative URL strings resolve against; a path always ends with `/`.
    public let baseURL: URL?
    /// The request serializer, and the request defaults it sets (read once, when it is set).
    private let requestSerializerBox = Locked<(serializer: any RequestSerialization, defaults: RequestDefaults)>(
        (ManagerDefaults.requestSerializer, RequestDefaults())
    )
    /// The last URL string resolved and checked, and its URL: an endpoint called again (the usual
    /// case) is not parsed again. A URL is a value, so a remembered one is as good as a new one.
    private let lastURL = Mutex<(string: String, url: URL)?>(nil)

    /// Creates a manager (AFHTTPSessionManager `initWithBaseURL:sessionConfiguration:`).
    public init(
        baseURL: URL? = nil,
        configuration: SessionConfiguration = .default,
        eventLoop: EventLoop? = nil,
        eventMonitors: [any EventMonitor] = []
    ) {
        self.baseURL = baseURL.map(Self.withTrailingSlash)
        super.init(configuration: configuration, eventLoop: eventLoop, eventMonitors: eventMonitors)
    }

    /// Creates a manager whose session spans every loop of `eventLoopGroup` (see `Session`): a
    /// request made from code running on one of the loops is served by that loop's connections.
    public init(
        baseURL: URL? = nil,
        configuration: SessionConfiguration = .default,
        eventLoopGroup: EventLoopGroup,
        eventMonitors: [any EventMonitor] = []
    ) {
        self.baseURL = baseURL.map(Self.withTrailingSlash)
        super.init(configuration: configuration, eventLoopGroup: eventLoopGroup, eventMonitors: eventMonitors)
    }

    /// Encodes parameters and adds default headers (AFHTTPSessionManager.requestSerializer).
    /// The request defaults of an ``HTTPRequestSerializing`` serializer that were set
    /// (`timeoutInterval`, `timeoutIntervalForResource`, `cachePolicy`, `shouldHandleCookies`)
    /// apply to the requests the manager makes, as AFHTTPSessionManager's
    /// `requestWithMethod:URLString:parameters:error:` applies them.
    public var requestSerializer: any RequestSerialization {
        get { self.requestSerializerBox.withLock { $0.serializer } }
        set {
            let defaults = RequestDefaults(newValue)
            self.requestSerializerBox.withLock { $0 = (newValue, defaults) }
        }
    }

    /// AFHTTPSessionManager's `setSecurityPolicy:` rule: a policy that pins (certificate or public
    /// key) is refused unless ``baseURL`` is https — pins on plain HTTP would silently protect
    /// nothing. AFNetworking raises an "Invalid Security Policy" exception; this throws.
    /// - Throws: ``SessionManagerError/invalidSecurityPolicy(_:)``, naming the pinning mode; the
    ///   previous policy stays.
    public override func setSecurityPolicy(_ policy: SecurityPolicy) throws(SessionManagerError) {
        if policy.pinningMode != .none && self.baseURL?.scheme?.lowercased() != "https" {
            let mode = policy.pinningMode == .certificate ? "certificate pinning" : "public-key pinning"
            throw .invalidSecurityPolicy(
                "a security policy configured with \(mode) can only be applied on a manager with a secure base URL (https); the base URL is \(self.baseURL?.absoluteString ?? "not set")"
            )
        }
        try super.setSecurityPolicy(policy)
    }

    /// A new manager with the same base URL, configuration and settings, and a copy of the
    /// request serializer (AFHTTPSessionManager's `copyWithZone:`); see ``SessionManager/copy()``.
    public override func copy() -> HTTPSessionManager {
        let copy =
            self.eventLoopGroup.map {
                HTTPSessionManager(baseURL: self.baseURL, configuration: self.configuration, eventLoopGroup: $0)
            }
            ?? HTTPSessionManager(baseURL: self.baseURL, configuration: self.configuration, eventLoop: self.eventLoop)
        copy.copySettings(from: self)
        copy.requestSerializer = self.requestSerializer
        return copy
    }

    /// AFNetworking's rule: a base URL with a non-empty path that does not end with `/` gets one,
    /// so `foo` resolves below it rather than replacing its last segment.
    static func withTrailingSlash(_ url: URL) -> URL {
        let path = url.path(percentEncoded: true)
        guard !path.isEmpty, !path.hasSuffix("/") else { return url }
        guard var c = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        c.percentEncodedPath = path + "/"
        return c.url ?? url
    }

    /// `urlString` resolved against ``baseURL`` (or alone when there is none); nil if invalid:
    /// as NSURL's `URLWithString:relativeToURL:` (RFC 3986), a string with a space, a control
    /// byte or one of `"<>\^`{|}` is not a URL (Foundation's `URL(string:)` would percent-encode
    /// them and send another URL than the one written). Non-ASCII characters are percent-encoded
    /// as UTF-8, as `URL(string:)` does.
    public func url(for urlString: String) -> URL? {
        if urlString.isEmpty { return self.baseURL }
        guard !HTTPRequestSerializer.containsBytesInvalidInURL(urlString) else { return nil }
        let url =
            self.baseURL == nil ? URL(string: urlString) : URL(string: urlString, relativeTo: self.baseURL)?.absoluteURL
        guard let url, url.scheme != nil else { return nil }
        return url
    }

    // MARK: - Building tasks

    /// Builds, serializes and wraps a request in a data task, without resuming it
    /// (AFHTTPSessionManager `dataTaskWithHTTPMethod:URLString:parameters:headers:…`). Per-request
    /// `headers` are set after serialization, so they replace the serializer's. When the URL or the
    /// parameters cannot be serialized, `failure` gets the error (with a nil task) on the
    /// completion queue and nil is returned: a ``SerializationError`` — `.invalidURL` (-1000) for
    /// a string that is no URL or a URL without a host, `.unsupportedURL` (-1002) for a scheme
    /// other than http and https — or the serializer's.
    public func dataTask(
        withHTTPMethod method: HTTPMethod,
        urlString: String,
        parameters: Parameters?,
        headers: HTTPHeaders?,
        uploadProgress: (@Sendable (TransferProgress) -> Void)?,
        downloadProgress: (@Sendable (TransferProgress) -> Void)?,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.dataTask(
            withHTTPMethod: method,
            urlString: urlString,
            parameters: parameters as (any Sendable)?,
            headers: headers,
            uploadProgress: uploadProgress,
            downloadProgress: downloadProgress,
            success: success,
            failure: failure
        )
    }

    /// ``dataTask(withHTTPMethod:urlString:parameters:headers:uploadProgress:downloadProgress:success:failure:)``
    /// with parameters of any shape (an array, a set, a JSON value; AFNetworking's `id parameters`).
    @_disfavoredOverload
    public func dataTask(
        withHTTPMethod method: HTTPMethod,
        urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders?,
        uploadProgress: (@Sendable (TransferProgress) -> Void)?,
        downloadProgress: (@Sendable (TransferProgress) -> Void)?,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.buildDataTask(
            method,
            urlString,
            parameters,
            headers,
            responseSerializer: nil,
            uploadProgress,
            downloadProgress,
            success,
            failure
        )
    }

    /// Builds and serializes the request and wraps it in a suspended data task, with
    /// `responseSerializer` for this task alone when given; when the request cannot be built,
    /// `failure` gets the error and nil is returned.
    func buildDataTask(
        _ method: HTTPMethod,
        _ urlString: String,
        _ parameters: (any Sendable)?,
        _ headers: HTTPHeaders?,
        responseSerializer: (any ResponseSerialization)?,
        _ uploadProgress: (@Sendable (TransferProgress) -> Void)?,
        _ downloadProgress: (@Sendable (TransferProgress) -> Void)?,
        _ success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        _ failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        let request: HTTPClientRequest
        do {
            request = try self.makeRequest(
                method: method,
                urlString: urlString,
                parameters: parameters,
                headers: headers
            )
        } catch {
            self.reportBuildFailure(error, to: failure)
            return nil
        }
        return self.makeDataTask(
            request,
            completion: Self.completion(success: success, failure: failure),
            upload: uploadProgress,
            download: downloadProgress,
            responseSerializer: responseSerializer
        )
    }

    /// AFHTTPSessionManager's success/failure pair as the task's completion: the task it gets
    /// is the data task itself (also when it became a download).
    static func completion(
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> TaskDelegate.Completion {
        if success == nil && failure == nil { return .none }
        return .handler { task, _, object, error in
            guard let task = task as? DataTask else { return }
            if let error { failure?(task, error) } else { success?(task, object) }
        }
    }

    func makeRequest(
        method: HTTPMethod,
        urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders?
    ) throws -> HTTPClientRequest {
        let url = try self.checkedURL(urlString)
        let (serializer, defaults) = self.requestSerializerBox.withLock { ($0.serializer, $0.defaults) }
        var base = HTTPClientRequest(method: method, url: url)
        if !defaults.isEmpty { defaults.apply(to: &base) }
        var request = try serializer.request(bySerializing: base, parameters: parameters)
        if let headers {
            for field in headers { request.headers.replaceOrAdd(name: field.name, value: field.value) }
        }
        return request
    }

    /// `urlString` against ``baseURL``, checked as AFNetworking's serializers and NSURLSession
    /// check it: a URL (-1000), http or https (-1002), with a host (-1000).
    private func checkedURL(_ urlString: String) throws(SerializationError) -> URL {
        if let last = self.lastURL.withLock({ $0 }), last.string == urlString { return last.url }
        guard let url = self.url(for: urlString) else {
            throw SerializationError(
                .invalidURL,
                "'\(urlString)' is not a valid URL (alone or relative to the base URL \(self.baseURL?.absoluteString ?? "(none)"))"
            )
        }
        let checked = try HTTPRequestSerializer.checked(url)
        self.lastURL.withLock { $0 = (urlString, checked) }
        return checked
    }

    // MARK: - Conveniences (resumed tasks)

    /// GET: parameters go in the query (with the default serializer). Returns the resumed task, or
    /// nil when the request could not be built (`failure` is told).
    @discardableResult
    public func get(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.get, urlString, parameters, headers, nil, progress, success, failure)
    }

    /// GET with parameters of any shape (an array, a set, a JSON value).
    @_disfavoredOverload @discardableResult
    public func get(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.get, urlString, parameters, headers, nil, progress, success, failure)
    }

    /// HEAD: `success` gets only the task (its `response` has the head).
    @discardableResult
    public func head(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        var wrapped: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil
        if let success { wrapped = { task, _ in success(task) } }
        return self.resumed(.head, urlString, parameters, headers, nil, nil, wrapped, failure)
    }

    /// POST: parameters go in the body (with the default serializer).
    @discardableResult
    public func post(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.post, urlString, parameters, headers, progress, nil, success, failure)
    }

    /// POST with parameters of any shape (a top-level JSON array with ``JSONRequestSerializer`` …).
    @_disfavoredOverload @discardableResult
    public func post(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.post, urlString, parameters, headers, progress, nil, success, failure)
    }

    /// PUT.
    @discardableResult
    public func put(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.put, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// PUT with parameters of any shape.
    @_disfavoredOverload @discardableResult
    public func put(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.put, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// PATCH.
    @discardableResult
    public func patch(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.patch, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// PATCH with parameters of any shape.
    @_disfavoredOverload @discardableResult
    public func patch(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.patch, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// DELETE: parameters go in the query (with the default serializer).
    @discardableResult
    public func delete(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.delete, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// DELETE with parameters of any shape.
    @_disfavoredOverload @discardableResult
    public func delete(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        self.resumed(.delete, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// Multipart POST (AFHTTPSessionManager `POST:parameters:headers:constructingBodyWithBlock:progress:success:failure:`):
    /// one form part per parameter, then the parts `constructingBodyWith` appends, sent as a
    /// `multipart/form-data` body with a `Content-Length`. The body is streamed in bounded chunks
    /// (files are read as they are sent, never loaded whole), and replayed from the form if a 307/308
    /// redirect needs it again.
    ///
    /// The form is built by ``requestSerializer`` when it is an ``HTTPRequestSerializing``;
    /// another serializer gets the finished multipart request with nil parameters, so it can add
    /// its headers. A closure that throws (a file that cannot be read:
    /// ``SerializationError`` `.fileNotReachable`) or a form that cannot be built calls `failure`
    /// with a nil task on the completion queue and returns nil; a file that fails while the body is
    /// sent fails the task (`.bodyReadFailed`), reported to `failure` as well.
    @discardableResult
    public func post(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        constructingBodyWith build: ((inout MultipartFormData) throws -> Void)?,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        let built: (request: HTTPClientRequest, form: MultipartFormData?)
        do {
            built = try self.makeMultipartRequest(
                urlString: urlString,
                parameters: parameters,
                headers: headers,
                build: build
            )
        } catch {
            self.reportBuildFailure(error, to: failure)
            return nil
        }
        let task = self.makeUpload(
            built.request,
            preflightError: nil,
            progress: progress,
            completion: Self.completion(success: success, failure: failure)
        )
        if let form = built.form { task.replayableBody = { form.makeRequestBody() } }
        task.resume()
        return task
    }

    /// Multipart POST, async: the serialized response object and the response. Throws what
    /// building the form throws, the engine's error or the serializer's.
    public func post(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil,
        constructingBodyWith build: ((inout MultipartFormData) throws -> Void)?
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        let built = try self.makeMultipartRequest(
            urlString: urlString,
            parameters: parameters,
            headers: headers,
            build: build
        )
        let task = self.makeUpload(built.request, preflightError: nil, progress: nil, completion: .awaiting)
        if let form = built.form { task.replayableBody = { form.makeRequestBody() } }
        return try await Self.outcome(of: task).value()
    }

    /// The multipart request and its form (nil when the form stayed empty and the request has no
    /// multipart body).
    func makeMultipartRequest(
        urlString: String,
        parameters: Parameters?,
        headers: HTTPHeaders?,
        build: ((inout MultipartFormData) throws -> Void)?
    ) throws -> (request: HTTPClientRequest, form: MultipartFormData?) {
        let url = try self.checkedURL(urlString)
        let serializer = self.requestSerializer
        let http = (serializer as? any HTTPRequestSerializing) ?? HTTPRequestSerializer()
        // The closure runs once here; the form it filled is captured so the body can be produced
        // again (redirects) without running the closure twice.
        let captured = Locked<MultipartFormData?>(nil)
        var request = try http.multipartFormRequest(
            withMethod: .post,
            urlString: url.absoluteString,
            parameters: parameters
        ) { form in
            try build?(&form)
            captured.withLock { $0 = form }
        }
        if !(serializer is any HTTPRequestSerializing) {
            request = try serializer.request(bySerializing: request, parameters: nil as Parameters?)
        }
        for field in headers ?? [:] { request.headers.replaceOrAdd(name: field.name, value: field.value) }
        let form = captured.withLock { $0 }
        return (request, (form?.isEmpty ?? true) ? nil : form)
    }

    private func reportBuildFailure(_ error: any Error, to failure: (@Sendable (DataTask?, any Error) -> Void)?) {
        guard let failure else { return }
        let settings = self.core.currentSettings
        (settings.completionQueue ?? self.defaultCompletionQueue).async(
            group: settings.completionGroup ?? defaultCompletionGroup
        ) {
            failure(nil, error)
        }
    }

    private func resumed(
        _ method: HTTPMethod,
        _ urlString: String,
        _ parameters: (any Sendable)?,
        _ headers: HTTPHeaders?,
        _ up: (@Sendable (TransferProgress) -> Void)?,
        _ down: (@Sendable (TransferProgress) -> Void)?,
        _ success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
        _ failure: (@Sendable (DataTask?, any Error) -> Void)?
    ) -> DataTask? {
        let task = self.dataTask(
            withHTTPMethod: method,
            urlString: urlString,
            parameters: parameters,
            headers: headers,
            uploadProgress: up,
            downloadProgress: down,
            success: success,
            failure: failure
        )
        task?.resume()
        return task
    }

    // MARK: - async

    /// Sends `method` to `urlString` and returns the serialized response object and the response.
    /// Throws the request-building, engine or serialization error. Cancelling the Swift task
    /// cancels the request.
    public func request(
        _ method: HTTPMethod,
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        try await self.request(method, urlString, parameters: parameters as (any Sendable)?, headers: headers)
    }

    /// ``request(_:_:parameters:headers:)`` with parameters of any shape (an array, a set, a JSON value).
    @_disfavoredOverload
    public func request(
        _ method: HTTPMethod,
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let request = try self.makeRequest(
            method: method,
            urlString: urlString,
            parameters: parameters,
            headers: headers
        )
        return try await self.data(for: request)
    }

    /// GET, async.
    public func get(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.get, urlString, parameters: parameters, headers: headers)
    }
    /// HEAD, async: the response.
    public func head(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws -> HawserResponse {
        try await self.request(.head, urlString, parameters: parameters, headers: headers).response
    }
    /// POST, async.
    public func post(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.post, urlString, parameters: parameters, headers: headers)
    }
    /// POST, async, with parameters of any shape.
    @_disfavoredOverload
    public func post(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.post, urlString, parameters: parameters, headers: headers)
    }
    /// PUT, async.
    public func put(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.put, urlString, parameters: parameters, headers: headers)
    }
    /// PUT, async, with parameters of any shape.
    @_disfavoredOverload
    public func put(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.put, urlString, parameters: parameters, headers: headers)
    }
    /// PATCH, async.
    public func patch(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.patch, urlString, parameters: parameters, headers: headers)
    }
    /// PATCH, async, with parameters of any shape.
    @_disfavoredOverload
    public func patch(
        _ urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.patch, urlString, parameters: parameters, headers: headers)
    }
    /// DELETE, async.
    public func delete(
        _ urlString: String,
        parameters: Parameters? = nil,
        headers: HTTPHeaders? = nil
    ) async throws
        -> (value: (any Sendable)?, response: HawserResponse)
    {
        try await self.request(.delete, urlString, parameters: parameters, headers: headers)
    }
}
