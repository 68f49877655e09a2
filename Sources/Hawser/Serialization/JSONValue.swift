// The value JSONResponseSerializer returns: a Sendable JSON tree instead of AF's Foundation
// object graph, with integers kept exact and booleans distinct from numbers.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON number as it was written: an integer that fits `Int64` stays exact; anything with a
/// fraction or exponent, or beyond `Int64`, is a `Double`.
public enum JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// A number written as an integer that fits `Int64` (`1`, `-7`, `1.0`, `1e2`), kept exact.
    case integer(Int64)
    /// Any other number: with a fraction, or outside `Int64`'s range.
    case double(Double)

    /// The value as a `Double` (an integer beyond 2^53 rounds).
    public var doubleValue: Double {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        }
    }

    /// The value as an `Int64` when it is one exactly (`2.0` is, `2.5` is not).
    public var int64Value: Int64? {
        switch self {
        case .integer(let i): return i
        case .double(let d): return Int64(exactly: d)
        }
    }

    public var description: String {
        switch self {
        case .integer(let i): return String(i)
        case .double(let d): return "\(d)"
        }
    }
}

/// A JSON document: what ``JSONResponseSerializer`` returns (AF returns NSDictionary / NSArray /
/// NSString / NSNumber / NSNull).
///
/// Objects are `[String: JSONValue]`, so **key order is not kept** (as with NSDictionary); a
/// duplicated key keeps one of its values. Booleans are ``bool(_:)``, never numbers; integers
/// are exact (``JSONNumber``): a number whose value is an integer that fits `Int64` is
/// `.integer`, whether written `1`, `1.0` or `1e0`. Parsing is RFC 8259 in one pass over the
/// bytes (JSON5, when asked for, goes to Foundation's `JSONDecoder`); like Foundation's readers
/// it tolerates a trailing comma in arrays and objects and a UTF-8 byte-order mark, and limits
/// nesting to 512 levels. Use the subscripts and `…Value` accessors to walk it, or
/// ``decode(_:decoder:)`` to turn it into a `Decodable` type.
public enum JSONValue: Sendable, Hashable {
    /// An object; member order is not kept, and of repeated names the first wins.
    case object([String: JSONValue])
    /// An array, in order.
    case array([JSONValue])
    /// A string, with its escapes decoded.
    case string(String)
    /// A number, exact when it is an `Int64` integer.
    case number(JSONNumber)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null

    /// The member `key` of an object; nil for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    /// The members when this is an object; nil otherwise.
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The elements when this is an array; nil otherwise.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The string when this is a string; nil otherwise (a number is not converted).
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number when this is a number; nil otherwise.
    public var numberValue: JSONNumber? {
        if case .number(let n) = self { return n }
        return nil
    }

    /// The number as an `Int` when it is an integer that fits.
    public var intValue: Int? {
        self.numberValue?.int64Value.flatMap { Int(exactly: $0) }
    }

    /// The number as an `Int64` when it is an integer that fits; nil for a fraction or a non-number.
    public var int64Value: Int64? { self.numberValue?.int64Value }

    /// Any number as a `Double`.
    public var doubleValue: Double? { self.numberValue?.doubleValue }

    /// Only `true` and `false` (a number is not a boolean).
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool { self == .null }

    /// The value with every `null` object member and array element removed, recursively
    /// (AF's `AFJSONObjectByRemovingKeysWithNullValues`). A top-level null stays null.
    public func removingNullValues() -> JSONValue {
        switch self {
        case .object(let o):
            var out: [String: JSONValue] = [:]
            out.reserveCapacity(o.count)
            for (k, v) in o where v != .null { out[k] = v.removingNullValues() }
            return .object(out)
        case .array(let a):
            return .array(a.filter { $0 != .null }.map { $0.removingNullValues() })
        default:
            return self
        }
    }

    /// Decodes the value into `T`, through `decoder` (its key and date strategies apply).
    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: JSONEncoder().encode(self))
    }

    /// Parses a JSON text. `allowFragments` permits a top-level scalar (`"a"`, `1`, `null`).
    /// - Throws: `DecodingError.dataCorrupted` for malformed JSON (from the parser), or a
    ///   ``SerializationError`` `.cannotParseResponse` for a fragment when not allowed.
    public init(parsing bytes: [UInt8], allowFragments: Bool = false, allowJSON5: Bool = false) throws {
        let value: JSONValue
        if allowJSON5 {
            let decoder = JSONDecoder()
            decoder.allowsJSON5 = true
            value = try decoder.decodeReceived(JSONValue.self, from: bytes)
        } else {
            do {
                value = try JSONParser.parse(bytes)
            } catch {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: [],
                        debugDescription: "The given data was not valid JSON: \(error)",
                        underlyingError: error
                    )
                )
            }
        }
        if !allowFragments {
            switch value {
            case .object, .array: break
            default:
                throw SerializationError(
                    .cannotParseResponse,
                    "the JSON text is a fragment (\(value)) and fragments are not allowed"
                )
            }
        }
        self = value
    }

    /// Whether a `null` is anywhere in the tree (a property list cannot hold one).
    package var containsNull: Bool {
        switch self {
        case .null: return true
        case .object(let o): return o.values.contains { $0.containsNull }
        case .array(let a): return a.contains { $0.containsNull }
        default: return false
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .number(.integer(i))
        } else if let d = try? c.decode(Double.self) {
            self = .number(.double(d))
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .object(let o): try c.encode(o)
        case .array(let a): try c.encode(a)
        case .string(let s): try c.encode(s)
        case .number(.integer(let i)): try c.encode(i)
        case .number(.double(let d)): try c.encode(d)
        case .bool(let b): try c.encode(b)
        case .null: try c.encodeNil()
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text (object keys sorted), written as JSONRequestSerializer writes bodies.
    public var description: String {
        guard let bytes = try? JSONWriter.write(self, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "<unencodable JSON>"
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONValue: ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .number(.integer(value)) }
    public init(floatLiteral value: Double) { self = .number(.double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONDecoder {
    /// `decode(_:from:)` for bytes from outside (a response body, a resume-data file), with one
    /// space appended. The space is whitespace to JSON and JSON5, and keeps FoundationEssentials'
    /// scanner off a trap: it crashes the process (swift-foundation with Swift 6.3.1) when its
    /// nesting-depth error falls on the last byte, as in a body of exactly 513 `[`.
    func decodeReceived<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        var data = Data(capacity: bytes.count + 1)
        data.append(contentsOf: bytes)
        data.append(0x20)
        return try self.decode(T.self, from: data)
    }
}
