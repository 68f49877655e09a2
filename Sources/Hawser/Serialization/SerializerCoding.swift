import HawserCore
import Synchronization

// AFNetworking's NSSecureCoding and NSCopying for the serializers, as Codable and copy().
//
// Every setting round-trips, in a stable form (sorted sets, status codes as ranges). What cannot
// be encoded is said where it is: a custom query-string closure (AF does not encode its block
// either) and the Decodable serializer's decoder. The compound serializer encodes its members
// tagged with their type's ``CodableResponseSerialization/codingName`` and decodes the types it
// knows: Hawser's own, and those registered with ``CompoundResponseSerializer/register(_:)``.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Pieces

/// Status codes as `[[lower, upper)]` ranges: RangeSet's own encoding, written out.
package enum StatusCodesCoding {
    package static func encode(_ codes: RangeSet<Int>?) -> [[Int]]? {
        codes.map { $0.ranges.map { [$0.lowerBound, $0.upperBound] } }
    }

    package static func decode(_ ranges: [[Int]]?) throws -> RangeSet<Int>? {
        guard let ranges else { return nil }
        var set = RangeSet<Int>()
        for r in ranges {
            guard r.count == 2, r[0] <= r[1] else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: [],
                        debugDescription: "a status-code range is not [lower, upper] with lower ≤ upper: \(r)"
                    )
                )
            }
            set.insert(contentsOf: r[0]..<r[1])
        }
        return set
    }
}

extension CachePolicy {
    var codingName: String {
        switch self {
        case .useProtocolCachePolicy: return "useProtocolCachePolicy"
        case .reloadIgnoringLocalCacheData: return "reloadIgnoringLocalCacheData"
        case .returnCacheDataElseLoad: return "returnCacheDataElseLoad"
        case .returnCacheDataDontLoad: return "returnCacheDataDontLoad"
        }
    }

    init?(codingName: String) {
        switch codingName {
        case "useProtocolCachePolicy": self = .useProtocolCachePolicy
        case "reloadIgnoringLocalCacheData": self = .reloadIgnoringLocalCacheData
        case "returnCacheDataElseLoad": self = .returnCacheDataElseLoad
        case "returnCacheDataDontLoad": self = .returnCacheDataDontLoad
        default: return nil
        }
    }
}

// MARK: - Request serializers

extension HTTPRequestSerializer: Codable {
    private enum Keys: String, CodingKey {
        case httpRequestHeaders, httpMethodsEncodingParametersInURI, timeoutInterval, timeoutIntervalForResource,
            cachePolicy, shouldHandleCookies, allowsCellularAccess, shouldUsePipelining
    }

    /// Decodes every setting but ``queryStringSerialization`` (a closure is not encoded; AF does
    /// not encode its block either).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(environment: [:])
        var headers = HTTPHeaders()
        for pair in try c.decode([[String]].self, forKey: .httpRequestHeaders) {
            guard pair.count == 2 else {
                throw DecodingError.dataCorruptedError(
                    forKey: .httpRequestHeaders,
                    in: c,
                    debugDescription: "a header is not a [name, value] pair"
                )
            }
            headers.add(name: pair[0], value: pair[1])
        }
        self.replaceDefaultHeaders(with: headers)
        self.setMethodsEncodingParametersInURI(
            Set(try c.decode([String].self, forKey: .httpMethodsEncodingParametersInURI))
        )
        self.timeoutInterval = try c.decodeIfPresent(Double.self, forKey: .timeoutInterval)
        self.timeoutIntervalForResource = try c.decodeIfPresent(Double.self, forKey: .timeoutIntervalForResource)
        if let name = try c.decodeIfPresent(String.self, forKey: .cachePolicy) {
            guard let policy = CachePolicy(codingName: name) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .cachePolicy,
                    in: c,
                    debugDescription: "unknown cache policy '\(name)'"
                )
            }
            self.cachePolicy = policy
        }
        self.shouldHandleCookies = try c.decodeIfPresent(Bool.self, forKey: .shouldHandleCookies)
        self.allowsCellularAccess = try c.decodeIfPresent(Bool.self, forKey: .allowsCellularAccess)
        self.shouldUsePipelining = try c.decodeIfPresent(Bool.self, forKey: .shouldUsePipelining)
    }

    /// Encodes every setting but ``queryStringSerialization``.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(self.httpRequestHeaders.map { [$0.name, $0.value] }, forKey: .httpRequestHeaders)
        try c.encode(self.httpMethodsEncodingParametersInURI.sorted(), forKey: .httpMethodsEncodingParametersInURI)
        try c.encodeIfPresent(self.timeoutInterval, forKey: .timeoutInterval)
        try c.encodeIfPresent(self.timeoutIntervalForResource, forKey: .timeoutIntervalForResource)
        try c.encodeIfPresent(self.cachePolicy?.codingName, forKey: .cachePolicy)
        try c.encodeIfPresent(self.shouldHandleCookies, forKey: .shouldHandleCookies)
        try c.encodeIfPresent(self.allowsCellularAccess, forKey: .allowsCellularAccess)
        try c.encodeIfPresent(self.shouldUsePipelining, forKey: .shouldUsePipelining)
    }

    /// A copy (AF's NSCopying). A value: changing the copy never changes this one.
    public func copy() -> HTTPRequestSerializer { self }
}

extension JSONRequestSerializer: Codable {
    private enum Keys: String, CodingKey { case writingOptions, httpSerializer }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(
            writingOptions: WritingOptions(rawValue: try c.decode(UInt.self, forKey: .writingOptions)),
            httpSerializer: try c.decode(HTTPRequestSerializer.self, forKey: .httpSerializer)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(self.writingOptions.rawValue, forKey: .writingOptions)
        try c.encode(self.httpSerializer, forKey: .httpSerializer)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> JSONRequestSerializer { self }
}

// MARK: - Response serializers

/// A response serializer the compound serializer can encode and decode: Codable, with a stable
/// name for the tag it is stored under.
public protocol CodableResponseSerialization: ResponseSerialization, Codable {
    /// The tag of this type in a ``CompoundResponseSerializer``'s encoding (`"json"`, `"http"` …).
    static var codingName: String { get }
}

extension HTTPResponseSerializer: CodableResponseSerialization {
    public static var codingName: String { "http" }
    private enum Keys: String, CodingKey { case acceptableStatusCodes, acceptableContentTypes }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(
            acceptableContentTypes: try c.decodeIfPresent([String].self, forKey: .acceptableContentTypes).map(Set.init)
        )
        self.acceptableStatusCodes = try StatusCodesCoding.decode(
            try c.decodeIfPresent([[Int]].self, forKey: .acceptableStatusCodes)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(StatusCodesCoding.encode(self.acceptableStatusCodes), forKey: .acceptableStatusCodes)
        try c.encode(self.acceptableContentTypes?.sorted(), forKey: .acceptableContentTypes)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> HTTPResponseSerializer { self }
}

extension JSONResponseSerializer: CodableResponseSerialization {
    public static var codingName: String { "json" }
    private enum Keys: String, CodingKey {
        case acceptableStatusCodes, acceptableContentTypes, readingOptions, removesKeysWithNullValues
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        self.init(
            readingOptions: ReadingOptions(rawValue: try c.decode(Int.self, forKey: .readingOptions)),
            removesKeysWithNullValues: try c.decode(Bool.self, forKey: .removesKeysWithNullValues)
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
        try c.encode(self.readingOptions.rawValue, forKey: .readingOptions)
        try c.encode(self.removesKeysWithNullValues, forKey: .removesKeysWithNullValues)
    }

    /// A copy (AF's NSCopying).
    public func copy() -> JSONResponseSerializer { self }
}

extension DecodableResponseSerializer {
    /// A copy (the decoding closure is shared: it is immutable).
    public func copy() -> DecodableResponseSerializer { self }
}

/// The types a compound serializer decodes, by coding name.
private let codableResponseSerializers = Mutex<[String: any CodableResponseSerialization.Type]>([
    HTTPResponseSerializer.codingName: HTTPResponseSerializer.self,
    JSONResponseSerializer.codingName: JSONResponseSerializer.self,
    CompoundResponseSerializer.codingName: CompoundResponseSerializer.self,
])

extension CompoundResponseSerializer: CodableResponseSerialization {
    public static var codingName: String { "compound" }

    /// Makes `type` decodable inside a compound serializer (encoding needs nothing). Hawser's own
    /// serializers are known; register HawserFoundation's `PropertyListResponseSerializer` and
    /// HawserXML's serializers before decoding a compound that holds them.
    public static func register(_ type: any CodableResponseSerialization.Type) {
        codableResponseSerializers.withLock { $0[type.codingName] = type }
    }

    private enum Keys: String, CodingKey { case responseSerializers, acceptableStatusCodes, acceptableContentTypes }
    private enum MemberKeys: String, CodingKey { case type, serializer }

    /// Decodes the members by their tags.
    /// - Throws: `DecodingError` for a tag of a type that is not registered, naming it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        var list = try c.nestedUnkeyedContainer(forKey: .responseSerializers)
        var members: [any ResponseSerialization] = []
        while !list.isAtEnd {
            let member = try list.nestedContainer(keyedBy: MemberKeys.self)
            let name = try member.decode(String.self, forKey: .type)
            guard let type = codableResponseSerializers.withLock({ $0[name] }) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .type,
                    in: member,
                    debugDescription:
                        "no response serializer is registered as '\(name)'; call CompoundResponseSerializer.register(_:) with its type first"
                )
            }
            members.append(try Self.decodeMember(type, from: member))
        }
        self.init(members)
        self.acceptableStatusCodes = try StatusCodesCoding.decode(
            try c.decodeIfPresent([[Int]].self, forKey: .acceptableStatusCodes)
        )
        self.acceptableContentTypes = try c.decodeIfPresent([String].self, forKey: .acceptableContentTypes).map(
            Set.init
        )
    }

    private static func decodeMember<T: CodableResponseSerialization>(
        _ type: T.Type,
        from c: KeyedDecodingContainer<MemberKeys>
    ) throws -> T {
        try c.decode(T.self, forKey: .serializer)
    }

    /// Encodes the members with their tags.
    /// - Throws: `EncodingError` for a member that is not a ``CodableResponseSerialization``
    ///   (a `DecodableResponseSerializer`, a serializer of your own that is not Codable).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        var list = c.nestedUnkeyedContainer(forKey: .responseSerializers)
        for s in self.responseSerializers {
            guard let codable = s as? any CodableResponseSerialization else {
                throw EncodingError.invalidValue(
                    s,
                    .init(
                        codingPath: c.codingPath,
                        debugDescription: "\(type(of: s)) cannot be encoded: it is not a CodableResponseSerialization"
                    )
                )
            }
            var member = list.nestedContainer(keyedBy: MemberKeys.self)
            try member.encode(type(of: codable).codingName, forKey: .type)
            try member.encode(codable, forKey: .serializer)
        }
        try c.encode(StatusCodesCoding.encode(self.acceptableStatusCodes), forKey: .acceptableStatusCodes)
        try c.encode(self.acceptableContentTypes?.sorted(), forKey: .acceptableContentTypes)
    }

    /// A copy (AF's NSCopying): the members are copied as the values they are (a member that is a
    /// class instance of your own is shared).
    public func copy() -> CompoundResponseSerializer { self }
}

extension SecurityPolicy {
    /// A copy (AF's NSCopying). A value: changing the copy never changes this one.
    public func copy() -> SecurityPolicy { self }
}
