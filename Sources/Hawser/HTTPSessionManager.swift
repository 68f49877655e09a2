// AFHTTPSessionManager: a SessionManager with a base URL, a request serializer and the
// GET / HEAD / POST / PUT / PATCH / DELETE conveniences.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserCore

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
public final class HTTPSessionManager: SessionManager, @unchecked Sendable {
    /// The URL relative URL strings resolve against; a path always ends with `/`.
    public let baseURL: URL?
    private let requestSerializerBox = Locked<any RequestSerialization>(ManagerDefaults.requestSerializer)

    /// Creates a manager (AFHTTPSessionManager `initWithBaseURL:sessionConfiguration:`).
    public init(baseURL: URL? = nil, configuration: SessionConfiguration = .default, eventLoop: EventLoop? = nil,
                eventMonitors: [any EventMonitor] = []) {
        self.baseURL = baseURL.map(Self.withTrailingSlash)
        super.init(configuration: configuration, eventLoop: eventLoop, eventMonitors: eventMonitors)
    }

    /// Encodes parameters and adds default headers (AFHTTPSessionManager.requestSerializer).
    public var requestSerializer: any RequestSerialization {
        get { self.requestSerializerBox.withLock { $0 } }
        set { self.requestSerializerBox.withLock { $0 = newValue } }
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

    /// `urlString` resolved against ``baseURL`` (or alone when there is none); nil if invalid.
    public func url(for urlString: String) -> URL? {
        if urlString.isEmpty { return self.baseURL }
        guard let url = URL(string: urlString, relativeTo: self.baseURL)?.absoluteURL, url.scheme != nil else { return nil }
        return url
    }

    // MARK: - Building tasks

    /// Builds, serializes and wraps a request in a data task, without resuming it
    /// (AFHTTPSessionManager `dataTaskWithHTTPMethod:URLString:parameters:headers:…`). Per-request
    /// `headers` are set after serialization, so they replace the serializer's. When the URL or the
    /// parameters cannot be serialized, `failure` gets the error (with a nil task) on the
    /// completion queue and nil is returned.
    public func dataTask(withHTTPMethod method: HTTPMethod, urlString: String, parameters: Parameters?,
                         headers: HTTPHeaders?,
                         uploadProgress: (@Sendable (TransferProgress) -> Void)?,
                         downloadProgress: (@Sendable (TransferProgress) -> Void)?,
                         success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                         failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        let request: HTTPClientRequest
        do {
            request = try self.makeRequest(method: method, urlString: urlString, parameters: parameters, headers: headers)
        } catch {
            self.reportBuildFailure(error, to: failure)
            return nil
        }
        let box = Locked<DataTask?>(nil)
        let task = self.dataTask(with: request, uploadProgress: uploadProgress, downloadProgress: downloadProgress) { _, object, error in
            guard let task = box.withLock({ $0 }) else { return }
            if let error { failure?(task, error) } else { success?(task, object) }
        }
        box.withLock { $0 = task }
        return task
    }

    func makeRequest(method: HTTPMethod, urlString: String, parameters: Parameters?, headers: HTTPHeaders?) throws -> HTTPClientRequest {
        guard let url = self.url(for: urlString) else { throw SessionManagerError.invalidURL(urlString) }
        var request = try self.requestSerializer.request(bySerializing: HTTPClientRequest(method: method, url: url), parameters: parameters)
        for field in headers ?? [:] { request.headers.replaceOrAdd(name: field.name, value: field.value) }
        return request
    }

    // MARK: - Conveniences (resumed tasks)

    /// GET: parameters go in the query (with the default serializer). Returns the resumed task, or
    /// nil when the request could not be built (`failure` is told).
    @discardableResult
    public func get(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                    progress: (@Sendable (TransferProgress) -> Void)? = nil,
                    success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                    failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        self.resumed(.get, urlString, parameters, headers, nil, progress, success, failure)
    }

    /// HEAD: `success` gets only the task (its `response` has the head).
    @discardableResult
    public func head(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                     success: (@Sendable (DataTask) -> Void)?,
                     failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        var wrapped: (@Sendable (DataTask, (any Sendable)?) -> Void)? = nil
        if let success { wrapped = { task, _ in success(task) } }
        return self.resumed(.head, urlString, parameters, headers, nil, nil, wrapped, failure)
    }

    /// POST: parameters go in the body (with the default serializer).
    @discardableResult
    public func post(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                     progress: (@Sendable (TransferProgress) -> Void)? = nil,
                     success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                     failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        self.resumed(.post, urlString, parameters, headers, progress, nil, success, failure)
    }

    /// PUT.
    @discardableResult
    public func put(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                    success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                    failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        self.resumed(.put, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// PATCH.
    @discardableResult
    public func patch(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                      success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                      failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        self.resumed(.patch, urlString, parameters, headers, nil, nil, success, failure)
    }

    /// DELETE: parameters go in the query (with the default serializer).
    @discardableResult
    public func delete(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                       success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                       failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
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
    public func post(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                     constructingBodyWith build: ((inout MultipartFormData) throws -> Void)?,
                     progress: (@Sendable (TransferProgress) -> Void)? = nil,
                     success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                     failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        let built: (request: HTTPClientRequest, form: MultipartFormData?)
        do {
            built = try self.makeMultipartRequest(urlString: urlString, parameters: parameters, headers: headers, build: build)
        } catch {
            self.reportBuildFailure(error, to: failure)
            return nil
        }
        let box = Locked<DataTask?>(nil)
        let task = self.uploadTask(withStreamedRequest: built.request, progress: progress) { _, object, error in
            guard let task = box.withLock({ $0 }) else { return }
            if let error { failure?(task, error) } else { success?(task, object) }
        }
        if let form = built.form { task.replayableBody = { form.makeRequestBody() } }
        box.withLock { $0 = task }
        task.resume()
        return task
    }

    /// Multipart POST, async: the serialized response object and the response. Throws what
    /// building the form throws, the engine's error or the serializer's.
    public func post(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil,
                     constructingBodyWith build: ((inout MultipartFormData) throws -> Void)?) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        let built = try self.makeMultipartRequest(urlString: urlString, parameters: parameters, headers: headers, build: build)
        return try await Self.run { done in
            let task = self.uploadTask(withStreamedRequest: built.request, progress: nil) { response, object, error in
                if let error { done(.failure(error)) }
                else if let response { done(.success((object, response))) }
                else { done(.failure(SessionManagerError.noRequest)) }
            }
            if let form = built.form { task.replayableBody = { form.makeRequestBody() } }
            return task
        }
    }

    /// The multipart request and its form (nil when the form stayed empty and the request has no
    /// multipart body).
    func makeMultipartRequest(urlString: String, parameters: Parameters?, headers: HTTPHeaders?,
                              build: ((inout MultipartFormData) throws -> Void)?) throws -> (request: HTTPClientRequest, form: MultipartFormData?) {
        guard let url = self.url(for: urlString) else { throw SessionManagerError.invalidURL(urlString) }
        let serializer = self.requestSerializer
        let http = (serializer as? any HTTPRequestSerializing) ?? HTTPRequestSerializer()
        // The closure runs once here; the form it filled is captured so the body can be produced
        // again (redirects) without running the closure twice.
        let captured = Locked<MultipartFormData?>(nil)
        var request = try http.multipartFormRequest(withMethod: .post, urlString: url.absoluteString, parameters: parameters) { form in
            try build?(&form)
            captured.withLock { $0 = form }
        }
        if !(serializer is any HTTPRequestSerializing) {
            request = try serializer.request(bySerializing: request, parameters: nil)
        }
        for field in headers ?? [:] { request.headers.replaceOrAdd(name: field.name, value: field.value) }
        let form = captured.withLock { $0 }
        return (request, (form?.isEmpty ?? true) ? nil : form)
    }

    private func reportBuildFailure(_ error: any Error, to failure: (@Sendable (DataTask?, any Error) -> Void)?) {
        guard let failure else { return }
        let settings = self.settings.withLock { $0 }
        (settings.completionQueue ?? self.defaultCompletionQueue).async(group: settings.completionGroup ?? defaultCompletionGroup) {
            failure(nil, error)
        }
    }

    private func resumed(_ method: HTTPMethod, _ urlString: String, _ parameters: Parameters?, _ headers: HTTPHeaders?,
                         _ up: (@Sendable (TransferProgress) -> Void)?, _ down: (@Sendable (TransferProgress) -> Void)?,
                         _ success: (@Sendable (DataTask, (any Sendable)?) -> Void)?,
                         _ failure: (@Sendable (DataTask?, any Error) -> Void)?) -> DataTask? {
        let task = self.dataTask(withHTTPMethod: method, urlString: urlString, parameters: parameters, headers: headers,
                                 uploadProgress: up, downloadProgress: down, success: success, failure: failure)
        task?.resume()
        return task
    }

    // MARK: - async

    /// Sends `method` to `urlString` and returns the serialized response object and the response.
    /// Throws the request-building, engine or serialization error. Cancelling the Swift task
    /// cancels the request.
    public func request(_ method: HTTPMethod, _ urlString: String, parameters: Parameters? = nil,
                        headers: HTTPHeaders? = nil) async throws -> (value: (any Sendable)?, response: HTTPResponse) {
        let request = try self.makeRequest(method: method, urlString: urlString, parameters: parameters, headers: headers)
        return try await self.data(for: request)
    }

    /// GET, async.
    public func get(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        try await self.request(.get, urlString, parameters: parameters, headers: headers)
    }
    /// HEAD, async: the response.
    public func head(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws -> HTTPResponse {
        try await self.request(.head, urlString, parameters: parameters, headers: headers).response
    }
    /// POST, async.
    public func post(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        try await self.request(.post, urlString, parameters: parameters, headers: headers)
    }
    /// PUT, async.
    public func put(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        try await self.request(.put, urlString, parameters: parameters, headers: headers)
    }
    /// PATCH, async.
    public func patch(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        try await self.request(.patch, urlString, parameters: parameters, headers: headers)
    }
    /// DELETE, async.
    public func delete(_ urlString: String, parameters: Parameters? = nil, headers: HTTPHeaders? = nil) async throws
        -> (value: (any Sendable)?, response: HTTPResponse) {
        try await self.request(.delete, urlString, parameters: parameters, headers: headers)
    }
}
