// AFPropertyListRequestSerializer and AFPropertyListResponseSerializer. They stand on
// Foundation's PropertyListSerialization, which FoundationEssentials does not have, so they live
// here and not in `Hawser` (which needs FoundationEssentials only).
import Foundation
import Hawser
import HawserCore

/// AFPropertyListRequestSerializer: parameters as a property-list body
/// (`Content-Type: application/x-plist` unless the request sets one).
@dynamicMemberLookup
public struct PropertyListRequestSerializer: HTTPRequestSerializing {
    public var httpSerializer: HTTPRequestSerializer
    /// `.xml` (the default) or `.binary`; `.openStep` cannot be written.
    public var format: PropertyListSerialization.PropertyListFormat
    /// PropertyListSerialization's write options (none are defined; kept for parity).
    public var writeOptions: PropertyListSerialization.WriteOptions

    /// Creates a serializer that writes parameters as a property list.
    ///
    /// - Parameters:
    ///   - format: `.xml` (the default) or `.binary`.
    ///   - writeOptions: PropertyListSerialization's write options; none by default.
    ///   - httpSerializer: the settings shared with the HTTP serializer (headers, query rules,
    ///     timeouts); a default `HTTPRequestSerializer` by default.
    public init(
        format: PropertyListSerialization.PropertyListFormat = .xml,
        writeOptions: PropertyListSerialization.WriteOptions = 0,
        httpSerializer: HTTPRequestSerializer = HTTPRequestSerializer()
    ) {
        self.format = format
        self.writeOptions = writeOptions
        self.httpSerializer = httpSerializer
    }

    /// The `HTTPRequestSerializer` settings.
    public subscript<T>(dynamicMember keyPath: WritableKeyPath<HTTPRequestSerializer, T>) -> T {
        get { self.httpSerializer[keyPath: keyPath] }
        set { self.httpSerializer[keyPath: keyPath] = newValue }
    }

    public func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest {
        try self.request(bySerializing: request, parameters: parameters as (any Sendable)?)
    }

    /// Parameters of any property-list shape: a dictionary, an array at the top level, a string,
    /// a number, a boolean, a date or data.
    @_disfavoredOverload
    public func request(
        bySerializing request: HTTPClientRequest,
        parameters: (any Sendable)?
    ) throws -> HTTPClientRequest {
        try self.httpSerializer.request(request, parameters: parameters, bodyContentType: "application/x-plist") {
            parameters in
            guard self.format != .openStep else {
                throw SerializationError(
                    .invalidParameters,
                    "the OpenStep property-list format can be read but not written",
                    url: request.url
                )
            }
            let object: Any
            do {
                object = try propertyListObject(parameters)
            } catch let e as SerializationError {
                throw e.with(url: request.url)
            }
            guard PropertyListSerialization.propertyList(object, isValidFor: self.format) else {
                throw SerializationError(
                    .invalidParameters,
                    "the parameters are not a property list (a value is not a string, number, boolean, date, data, array or dictionary)",
                    url: request.url
                )
            }
            do {
                return Array(
                    try PropertyListSerialization.data(
                        fromPropertyList: object,
                        format: self.format,
                        options: self.writeOptions
                    )
                )
            } catch {
                throw SerializationError(
                    .invalidParameters,
                    "PropertyListSerialization could not write the parameters",
                    url: request.url,
                    cause: sendableError(error)
                )
            }
        }
    }
}

/// AFPropertyListResponseSerializer: validates (`application/x-plist`), then parses an XML,
/// binary or OpenStep property list. The result is Sendable Swift values: `[String: any Sendable]`,
/// `[any Sendable]`, `String`, `Int`, `Double`, `Bool`, `Date`, `Data`.
public struct PropertyListResponseSerializer: HTTPResponseValidating {
    public var acceptableStatusCodes: RangeSet<Int>? = RangeSet(200..<300)
    public var acceptableContentTypes: Set<String>? = ["application/x-plist"]
    /// Kept for parity with AF (reading detects the format).
    public var format: PropertyListSerialization.PropertyListFormat
    /// PropertyListSerialization's read options; none by default (the mutability options mean
    /// nothing for the Sendable values returned).
    public var readOptions: PropertyListSerialization.ReadOptions

    /// Creates a serializer that accepts `application/x-plist` bodies with a 2xx status.
    ///
    /// - Parameters:
    ///   - format: kept for parity with AFNetworking; reading detects the format.
    ///   - readOptions: PropertyListSerialization's read options; none by default.
    public init(
        format: PropertyListSerialization.PropertyListFormat = .xml,
        readOptions: PropertyListSerialization.ReadOptions = []
    ) {
        self.format = format
        self.readOptions = readOptions
    }

    public func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        let statusFailure = try self.validationFailure(response: response, data: data)
        guard let data else {
            if let statusFailure { throw statusFailure }
            return nil
        }
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(
                from: Data(data),
                options: self.readOptions,
                format: nil
            )
        } catch {
            throw parseError("the body is not a property list", error, response: response, data: data).chaining(
                statusFailure
            )
        }
        if let statusFailure { throw statusFailure }
        return sendablePropertyList(object)
    }
}

/// PropertyListSerialization's object graph as Sendable Swift values.
func sendablePropertyList(_ object: Any) -> any Sendable {
    if type(of: object) == Bool.self, let b = object as? Bool { return b }
    switch object {
    case let s as String: return s
    case let d as Data: return d
    case let d as Date: return d
    case let n as NSNumber:
        let kind = String(cString: n.objCType)
        if kind == "c" || kind == "B" { return n.boolValue }
        if kind == "d" || kind == "f" { return n.doubleValue }
        return n.intValue
    case let a as [Any]: return a.map(sendablePropertyList)
    case let d as [String: Any]: return d.mapValues(sendablePropertyList) as [String: any Sendable]
    default: return "\(object)"
    }
}

// MARK: - Parameters → a property list

/// `value` as the object graph PropertyListSerialization takes: no null anywhere (a property list
/// has none), ``JSONValue`` as its Foundation form, `Data` and `Date` leaves kept, dictionaries
/// with `String` keys, and arrays (a set stays a set, which PropertyListSerialization refuses).
func propertyListObject(_ value: Any) throws -> Any {
    let noNull = "a property list cannot hold a null value"
    guard let v = unwrapped(value) else { throw SerializationError(.invalidParameters, noNull) }
    if let j = v as? JSONValue {
        if j.containsNull { throw SerializationError(.invalidParameters, noNull) }
        return j.foundationObject
    }
    if v is String || v is Bool || v is NSNumber || v is Data || v is Date { return v }
    let mirror = Mirror(reflecting: v)
    switch mirror.displayStyle {
    case .dictionary?:
        var out: [String: Any] = [:]
        for child in mirror.children {
            let kv = Array(Mirror(reflecting: child.value).children)
            guard kv.count == 2, let key = kv[0].value as? String else {
                throw SerializationError(.invalidParameters, "a property-list dictionary key is not a string")
            }
            out[key] = try propertyListObject(kv[1].value)
        }
        return out
    case .collection?:
        return try mirror.children.map { try propertyListObject($0.value) }
    default:
        return v
    }
}

extension JSONValue {
    /// The Foundation object graph (NSDictionary / NSArray / NSString / NSNumber / NSNull roles).
    var foundationObject: Any {
        switch self {
        case .object(let o): return o.mapValues { $0.foundationObject } as [String: Any]
        case .array(let a): return a.map { $0.foundationObject } as [Any]
        case .string(let s): return s
        case .number(.integer(let i)): return NSNumber(value: i)
        case .number(.double(let d)): return NSNumber(value: d)
        case .bool(let b): return b
        case .null: return NSNull()
        }
    }
}

// MARK: - Codable and copy() (AF's NSSecureCoding and NSCopying)

extension PropertyListRequestSerializer: Codable {
    private enum Keys: String, CodingKey { case format, writeOptions, httpSerializer }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        guard
            let format = PropertyListSerialization.PropertyListFormat(
                rawValue: try c.decode(UInt.self, forKey: .format)
            )
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .format,
                in: c,
                debugDescription: "unknown property-list format"
            )
        }
        self.init(
            format: format,
            writeOptions: try c.decode(PropertyListSerialization.WriteOptions.self, forKey: .writeOptions),
            httpSerializer: try c.decode(HTTPRequestSerializer.self, forKey: .httpSerializer)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(self.format.rawValue, forKey: .format)
        try c.encode(self.writeOptions, forKey: .writeOptions)
        try c.encode(self.httpSerializer, forKey: .httpSerializer)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> PropertyListRequestSerializer { self }
}

extension PropertyListResponseSerializer: CodableResponseSerialization {
    /// Register it before decoding a compound serializer that holds one:
    /// `CompoundResponseSerializer.register(PropertyListResponseSerializer.self)`.
    public static var codingName: String { "propertyList" }
    private enum Keys: String, CodingKey { case acceptableStatusCodes, acceptableContentTypes, format, readOptions }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        guard
            let format = PropertyListSerialization.PropertyListFormat(
                rawValue: try c.decode(UInt.self, forKey: .format)
            )
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .format,
                in: c,
                debugDescription: "unknown property-list format"
            )
        }
        self.init(
            format: format,
            readOptions: PropertyListSerialization.ReadOptions(rawValue: try c.decode(UInt.self, forKey: .readOptions))
        )
        self.acceptableStatusCodes = try StatusCodesCoding.decode(
            try c.decodeIfPresent([[Int]].self, forKey: .acceptableStatusCodes)
        )
        self.acceptableContentTypes = try c.decodeIfPresent([String].self, forKey: .acceptableContentTypes).map(
            Set.init
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(StatusCodesCoding.encode(self.acceptableStatusCodes), forKey: .acceptableStatusCodes)
        try c.encode(self.acceptableContentTypes?.sorted(), forKey: .acceptableContentTypes)
        try c.encode(self.format.rawValue, forKey: .format)
        try c.encode(self.readOptions.rawValue, forKey: .readOptions)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> PropertyListResponseSerializer { self }
}
