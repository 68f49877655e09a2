// Typed calls: a response decoded into the caller's `Decodable` type, or handled by a serializer
// given for that one request. The manager's `responseSerializer` is never read or written, so
// concurrent calls with different types share nothing.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension HTTPSessionManager {
    // MARK: - Typed calls (async)

    /// Sends `method` to `urlString` and decodes the JSON body into `T`; returns the value and
    /// the response.
    ///
    /// The request is built as the untyped forms build it (``requestSerializer``, the base URL,
    /// `headers` set last). The response is validated as ``DecodableResponseSerializer`` validates
    /// it (a 2xx status, a JSON content type) and decoded with `decoder`, which this call alone
    /// uses. The manager's ``SessionManager/responseSerializer`` is not consulted.
    ///
    /// ```swift
    /// struct User: Decodable, Sendable { let id: Int; let name: String }
    /// let (user, response) = try await api.request(.get, "users/42", as: User.self)
    /// ```
    ///
    /// - Throws: a ``HawserFailure``: ``SerializationError`` when the request cannot be built or
    ///   the response is refused or does not decode as `T` (`.cannotParseResponse`, also for an
    ///   empty body), `HawserError` for the exchange, ``SessionManagerError`` from the manager.
    ///   Cancelling the calling Swift task cancels the request.
    public func request<T: Decodable & Sendable>(
        _ method: HTTPMethod,
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> (value: T, response: HawserResponse) {
        let request = try self.makeRequest(
            method: method,
            urlString: urlString,
            parameters: parameters,
            headers: headers
        )
        let serializer = Self.decoding(type, decoder)
        let (object, response) = try await self.data(for: request, responseSerializer: serializer)
        return (try Self.typed(object, type, response), response)
    }

    /// Sends `method` to `urlString` and hands the response to `responseSerializer` instead of the
    /// manager's (which stays as it is); returns what it returns and the response.
    public func request(
        _ method: HTTPMethod,
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        responseSerializer: any ResponseSerialization
    ) async throws -> (value: (any Sendable)?, response: HawserResponse) {
        let request = try self.makeRequest(
            method: method,
            urlString: urlString,
            parameters: parameters,
            headers: headers
        )
        return try await self.data(for: request, responseSerializer: responseSerializer)
    }

    /// GET, decoded into `T` (see ``request(_:_:parameters:headers:as:decoder:)``).
    ///
    /// ```swift
    /// let user = try await api.get("users/42", as: User.self)
    /// ```
    public func get<T: Decodable & Sendable>(
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await self.request(.get, urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
            .value
    }

    /// POST, the response decoded into `T` (see ``request(_:_:parameters:headers:as:decoder:)``).
    public func post<T: Decodable & Sendable>(
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await self.request(.post, urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
            .value
    }

    /// PUT, the response decoded into `T` (see ``request(_:_:parameters:headers:as:decoder:)``).
    public func put<T: Decodable & Sendable>(
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await self.request(.put, urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
            .value
    }

    /// PATCH, the response decoded into `T` (see ``request(_:_:parameters:headers:as:decoder:)``).
    public func patch<T: Decodable & Sendable>(
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await self.request(.patch, urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
            .value
    }

    /// DELETE, the response decoded into `T` (see ``request(_:_:parameters:headers:as:decoder:)``).
    public func delete<T: Decodable & Sendable>(
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder()
    ) async throws -> T {
        try await self.request(.delete, urlString, parameters: parameters, headers: headers, as: type, decoder: decoder)
            .value
    }

    // MARK: - Typed calls (completion handlers)

    /// Builds, sends and decodes a request into `T`, calling `completion` on the completion
    /// queue with the value and the response, or the error (a ``HawserFailure``). Returns the
    /// resumed task, or nil when the request could not be built (`completion` gets the error).
    /// The manager's ``SessionManager/responseSerializer`` is not consulted.
    @discardableResult
    public func request<T: Decodable & Sendable>(
        _ method: HTTPMethod,
        _ urlString: String,
        parameters: (any Sendable)? = nil,
        headers: HTTPHeaders? = nil,
        as type: T.Type,
        decoder: JSONDecoder = JSONDecoder(),
        completion: @escaping @Sendable (Result<(value: T, response: HawserResponse), any Error>) -> Void
    ) -> DataTask? {
        let task = self.dataTask(
            withHTTPMethod: method,
            urlString: urlString,
            parameters: parameters,
            headers: headers,
            responseSerializer: Self.decoding(type, decoder),
            uploadProgress: nil,
            downloadProgress: nil,
            success: { task, object in
                guard let response = task.response else {
                    return completion(.failure(SessionManagerError.noRequest))
                }
                completion(Result { (try Self.typed(object, type, response), response) })
            },
            failure: { _, error in completion(.failure(error)) }
        )
        task?.resume()
        return task
    }

    /// `dataTask(withHTTPMethod:urlString:parameters:headers:uploadProgress:downloadProgress:success:failure:)`
    /// with a serializer for this task alone: `responseSerializer` validates and decodes its
    /// response, and the manager's ``SessionManager/responseSerializer`` stays as it is.
    public func dataTask(
        withHTTPMethod method: HTTPMethod,
        urlString: String,
        parameters: (any Sendable)?,
        headers: HTTPHeaders?,
        responseSerializer: any ResponseSerialization,
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
            responseSerializer: responseSerializer,
            uploadProgress,
            downloadProgress,
            success,
            failure
        )
    }

    // MARK: - Helpers

    /// The serializer of a typed call: the JSON content types, a 2xx status, `decoder` alone.
    static func decoding<T: Decodable & Sendable>(
        _ type: T.Type,
        _ decoder: JSONDecoder
    ) -> DecodableResponseSerializer<T> {
        let shared = UncheckedDecoder(decoder)
        return DecodableResponseSerializer(type) { shared.decoder }
    }

    /// The serialized object as a `T`: a typed call's serializer returns a `T`, or nil for an
    /// empty body, which no JSON `T` decodes from.
    static func typed<T>(_ object: (any Sendable)?, _ type: T.Type, _ response: HawserResponse) throws -> T {
        if let value = object as? T { return value }
        throw SerializationError(
            .cannotParseResponse,
            "the response body is empty; \(T.self) cannot be decoded from nothing",
            url: response.url,
            response: response,
            data: []
        )
    }
}

/// A caller's `JSONDecoder`, used by one request's serializer in the task that awaits it (or on
/// the completion queue), once: never by two threads at a time.
private struct UncheckedDecoder: @unchecked Sendable {
    let decoder: JSONDecoder
    init(_ decoder: JSONDecoder) { self.decoder = decoder }
}
