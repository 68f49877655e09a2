import HawserCore

// AFHTTPResponseSerializer and its JSON, property-list and compound subclasses, plus a
// Decodable serializer AF never had. Value types, for the same reason as the request serializers.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The validation every response serializer shares with AFHTTPResponseSerializer: acceptable
/// status codes and content types, and ``validate(response:data:)``.
public protocol HTTPResponseValidating: ResponseSerialization {
    /// Status codes that are not an error (AF's `NSIndexSet`; here a `RangeSet`, e.g.
    /// `RangeSet(200..<300)`); nil accepts any. Default 200..<300.
    var acceptableStatusCodes: RangeSet<Int>? { get set }
    /// Whether `code` is in ``acceptableStatusCodes`` (nil accepts any). The default asks the
    /// `RangeSet`; Hawser's serializers answer from a plain array kept next to it, because
    /// `RangeSet`'s lookups are generic calls that cost more than the rest of validation.
    func isAcceptableStatusCode(_ code: Int) -> Bool
    /// MIME types (no parameters, compared case-insensitively) that are not an error; nil
    /// accepts any.
    var acceptableContentTypes: Set<String>? { get set }
}

extension HTTPResponseValidating {
    public func isAcceptableStatusCode(_ code: Int) -> Bool {
        guard let codes = self.acceptableStatusCodes else { return true }
        return codes.contains(code)
    }

    /// AF's `validateResponse:data:error:`.
    ///
    /// - A MIME type outside ``acceptableContentTypes`` is a `.unacceptableContentType`
    ///   (-1016) error, unless the body is empty (then the response is still invalid for AF, but
    ///   without an error: Hawser does not throw, and the decoding serializers return nil).
    /// - A status outside ``acceptableStatusCodes`` is a `.unacceptableStatusCode` (-1011)
    ///   error, with the content-type error (if any) as its ``SerializationError/underlying``.
    /// - Both carry the response's URL, the response and the data. A nil response is valid.
    public func validate(response: HawserResponse?, data: [UInt8]?) throws {
        guard let response else { return }
        var error: SerializationError?
        let bodyIsEmpty = data?.isEmpty ?? true
        if let types = self.acceptableContentTypes, !bodyIsEmpty {
            let mime = response.mimeType
            // `mime` is lower-case; so are acceptable types nearly always: a set lookup first.
            if mime == nil || (!types.contains(mime!) && !types.contains(where: { $0.lowercased() == mime })) {
                error = SerializationError(
                    .unacceptableContentType,
                    "Request failed: unacceptable content-type: \(mime ?? "(none)")",
                    url: response.url,
                    response: response,
                    data: data
                )
            }
        }
        if response.statusCode < 0 || !self.isAcceptableStatusCode(response.statusCode) {
            let status = SerializationError(
                .unacceptableStatusCode,
                "Request failed: \(localizedString(forStatusCode: response.statusCode)) (\(response.statusCode))",
                url: response.url,
                response: response,
                data: data
            )
            error = status.chaining(error)
        }
        if let error { throw error }
    }

    /// Runs ``validate(response:data:)`` the way AF's decoding serializers do: a content-type
    /// failure ends serialization (thrown); a status-code failure is returned so the body can
    /// still be parsed and the failure chained under a parse error.
    package func validationFailure(response: HawserResponse?, data: [UInt8]?) throws -> SerializationError? {
        do {
            try self.validate(response: response, data: data)
            return nil
        } catch let e as SerializationError {
            if e.contains(.unacceptableContentType) { throw e }
            return e
        }
    }
}

/// AF's empty-body rule: no bytes, or one space (Rails' `head :ok`). Compared in place (an
/// array literal to compare with would be allocated on every response).
@inline(__always)
func isEmptyJSONBody(_ data: [UInt8]) -> Bool {
    data.isEmpty || (data.count == 1 && data[0] == UInt8(ascii: " "))
}

/// ``HTTPResponseValidating/acceptableStatusCodes`` kept twice: the `RangeSet` the property
/// gives and takes, and its ranges in an array that a lookup reads without generic calls.
package struct AcceptableStatusCodes: Sendable {
    package let rangeSet: RangeSet<Int>?
    /// `rangeSet` is nil: every code is acceptable. A flag, so a lookup copies no `RangeSet`.
    private let acceptsAny: Bool
    private let ranges: [Range<Int>]

    package init(_ codes: RangeSet<Int>?) {
        self.rangeSet = codes
        self.acceptsAny = codes == nil
        self.ranges = codes.map { Array($0.ranges) } ?? []
    }

    /// AF's default: 200..<300.
    package static var successful: AcceptableStatusCodes { AcceptableStatusCodes(RangeSet(200..<300)) }

    @inline(__always)
    package func contains(_ code: Int) -> Bool {
        if self.acceptsAny { return true }
        return self.ranges.withUnsafeBufferPointer { ranges in
            for r in ranges where r.lowerBound <= code && code < r.upperBound { return true }
            return false
        }
    }
}

/// AFHTTPResponseSerializer: validates status code and content type, returns the body bytes
/// (`[UInt8]`, or nil without a body).
public struct HTTPResponseSerializer: HTTPResponseValidating {
    private var statusCodes = AcceptableStatusCodes.successful
    public var acceptableStatusCodes: RangeSet<Int>? {
        get { self.statusCodes.rangeSet }
        set { self.statusCodes = AcceptableStatusCodes(newValue) }
    }
    public func isAcceptableStatusCode(_ code: Int) -> Bool { self.statusCodes.contains(code) }
    public var acceptableContentTypes: Set<String>?

    /// Creates a serializer that accepts a 2xx status and the given content types (any by default).
    public init(acceptableContentTypes: Set<String>? = nil) {
        self.acceptableContentTypes = acceptableContentTypes
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        try self.validate(response: response, data: data)
        return data
    }
}

/// AFJSONResponseSerializer: validates, then parses the body into a ``JSONValue``.
///
/// An empty body, or a body of one space (what Rails sends for `head :ok`), is nil without an
/// error. A status-code failure with a body that parses throws the status error; with a body
/// that does not parse, the parse error with the status error as its underlying error.
public struct JSONResponseSerializer: HTTPResponseValidating {
    /// What NSJSONSerialization's reading options mean here: only ``fragmentsAllowed`` and
    /// ``json5Allowed`` change parsing; the mutable-container options have no Swift meaning.
    public struct ReadingOptions: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Accept a top-level string, number, boolean or null.
        public static let fragmentsAllowed = ReadingOptions(rawValue: 1 << 2)
        /// Accept JSON5 (comments, trailing commas, unquoted keys …).
        public static let json5Allowed = ReadingOptions(rawValue: 1 << 3)
    }

    private var statusCodes = AcceptableStatusCodes.successful
    public var acceptableStatusCodes: RangeSet<Int>? {
        get { self.statusCodes.rangeSet }
        set { self.statusCodes = AcceptableStatusCodes(newValue) }
    }
    public func isAcceptableStatusCode(_ code: Int) -> Bool { self.statusCodes.contains(code) }
    public var acceptableContentTypes: Set<String>? = ["application/json", "text/json", "text/javascript"]
    /// How the body is read: ``ReadingOptions/fragmentsAllowed``, ``ReadingOptions/json5Allowed``; none by default.
    public var readingOptions: ReadingOptions
    /// Remove `null` object members and array elements, recursively.
    public var removesKeysWithNullValues: Bool

    /// Creates a serializer that accepts a 2xx status and a JSON content type.
    ///
    /// - Parameters:
    ///   - readingOptions: how the body is read; none by default (strict RFC 8259, an object or array at the top).
    ///   - removesKeysWithNullValues: whether nulls are removed; off by default.
    public init(readingOptions: ReadingOptions = [], removesKeysWithNullValues: Bool = false) {
        self.readingOptions = readingOptions
        self.removesKeysWithNullValues = removesKeysWithNullValues
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        try self.json(for: response, data: data)
    }

    /// ``responseObject(for:data:)`` with its static type.
    public func json(for response: HawserResponse?, data: [UInt8]?) throws -> JSONValue? {
        let statusFailure = try self.validationFailure(response: response, data: data)
        guard let data, !isEmptyJSONBody(data) else {
            if let statusFailure { throw statusFailure }
            return nil
        }
        var value: JSONValue
        do {
            value = try JSONValue(
                parsing: data,
                allowFragments: self.readingOptions.contains(.fragmentsAllowed),
                allowJSON5: self.readingOptions.contains(.json5Allowed)
            )
        } catch {
            throw parseError("the body is not valid JSON", error, response: response, data: data).chaining(
                statusFailure
            )
        }
        if let statusFailure { throw statusFailure }
        if self.removesKeysWithNullValues { value = value.removingNullValues() }
        return value
    }
}

/// Decodes the body into `T` with a `JSONDecoder` (or any decoder of bytes you give it), after
/// the same validation and empty-body rule as ``JSONResponseSerializer``: an empty body is nil
/// unless `T` can be decoded from nothing, which JSON cannot.
public struct DecodableResponseSerializer<T: Decodable & Sendable>: HTTPResponseValidating {
    private var statusCodes = AcceptableStatusCodes.successful
    public var acceptableStatusCodes: RangeSet<Int>? {
        get { self.statusCodes.rangeSet }
        set { self.statusCodes = AcceptableStatusCodes(newValue) }
    }
    public func isAcceptableStatusCode(_ code: Int) -> Bool { self.statusCodes.contains(code) }
    public var acceptableContentTypes: Set<String>? = ["application/json", "text/json", "text/javascript"]
    /// Turns the body bytes into a `T`.
    public var decode: @Sendable ([UInt8]) throws -> T

    /// A serializer decoding JSON with `makeDecoder()` (called per response, so a configured
    /// `JSONDecoder` — key strategy, date strategy — is never shared between threads).
    public init(_ type: T.Type = T.self, makeDecoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }) {
        self.decode = { bytes in try makeDecoder().decodeReceived(T.self, from: bytes) }
    }

    /// A serializer decoding with `decode` (a PropertyListDecoder, a custom format …); set
    /// ``acceptableContentTypes`` to match.
    public init(
        _ type: T.Type = T.self,
        acceptableContentTypes: Set<String>?,
        decode: @escaping @Sendable ([UInt8]) throws -> T
    ) {
        self.acceptableContentTypes = acceptableContentTypes
        self.decode = decode
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        try self.value(for: response, data: data)
    }

    /// ``responseObject(for:data:)`` with its static type.
    public func value(for response: HawserResponse?, data: [UInt8]?) throws -> T? {
        let statusFailure = try self.validationFailure(response: response, data: data)
        guard let data, !isEmptyJSONBody(data) else {
            if let statusFailure { throw statusFailure }
            return nil
        }
        let value: T
        do {
            value = try self.decode(data)
        } catch {
            throw parseError("the body does not decode as \(T.self)", error, response: response, data: data).chaining(
                statusFailure
            )
        }
        if let statusFailure { throw statusFailure }
        return value
    }
}

/// AFCompoundResponseSerializer: asks each serializer in turn; the first that returns an object
/// without throwing wins. When none does and some threw, the first error is thrown, with the
/// second chained under it (AF's `AFErrorWithUnderlyingError` rule). When none threw and none
/// returned an object, the compound validates on its own and returns the body bytes, as
/// ``HTTPResponseSerializer`` does.
public struct CompoundResponseSerializer: HTTPResponseValidating {
    /// The serializers asked, in order.
    public var responseSerializers: [any ResponseSerialization]
    private var statusCodes = AcceptableStatusCodes.successful
    public var acceptableStatusCodes: RangeSet<Int>? {
        get { self.statusCodes.rangeSet }
        set { self.statusCodes = AcceptableStatusCodes(newValue) }
    }
    public func isAcceptableStatusCode(_ code: Int) -> Bool { self.statusCodes.contains(code) }
    public var acceptableContentTypes: Set<String>?

    /// Creates a compound of `responseSerializers`, asked in order; it accepts a 2xx status and any content type.
    public init(_ responseSerializers: [any ResponseSerialization]) {
        self.responseSerializers = responseSerializers
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        var errors: [any Error & Sendable] = []
        for serializer in self.responseSerializers {
            do {
                if let object = try serializer.responseObject(for: response, data: data) { return object }
            } catch {
                errors.append(sendableError(error))
            }
        }
        if let first = errors.first {
            if var s = first as? SerializationError {
                if errors.count > 1 { s = s.chaining(errors[1]) }
                throw s
            }
            throw first
        }
        try self.validate(response: response, data: data)
        return data
    }
}

package func parseError(
    _ what: String,
    _ error: any Error,
    response: HawserResponse?,
    data: [UInt8]
) -> SerializationError {
    SerializationError(
        .cannotParseResponse,
        "\(what): \(error)",
        url: response?.url,
        response: response,
        data: data,
        cause: sendableError(error)
    )
}
