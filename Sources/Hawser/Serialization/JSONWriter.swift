// JSONRequestSerializer's writer: parameters straight to JSON bytes, without a Foundation object
// graph, in the bytes NSJSONSerialization writes for the same values (checked against it in
// JSONWriterTests), so Hawser needs FoundationEssentials only.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A parameter value of a type Hawser's serializers do not know by themselves, seen as the JSON
/// value it stands for: in a JSON body that value, in a query string or form its leaf
/// (``JSONValue/null`` is the NSNull role, the bare key).
///
/// `HawserFoundation` conforms Foundation's `NSNull` and `NSNumber`, so parameter
/// dictionaries built for AFNetworking keep working when it is linked.
public protocol ParameterValueConvertible {
    /// The value as JSON.
    var parameterValue: JSONValue { get }
}

/// Writes one parameter tree as JSON.
///
/// Output matches `JSONSerialization.data(withJSONObject:options:)` byte for byte, with one
/// exception: under `.sortedKeys` object keys are ordered by Unicode scalar values (`"B" < "a"`,
/// `"10" < "9"`), where Foundation uses a numeric, case-insensitive collation. Strings escape
/// `"`, `\`, `/` (unless `.withoutEscapingSlashes`) and the C0 controls (`\b \t \n \f \r`, the
/// rest as `\u00xx`); a `Double` or `Float` is written as Swift's shortest round-trip
/// `description` without a trailing `.0`; NaN and infinity are refused.
struct JSONWriter {
    let options: JSONRequestSerializer.WritingOptions
    private(set) var bytes: [UInt8] = []

    init(options: JSONRequestSerializer.WritingOptions) {
        self.options = options
        self.bytes.reserveCapacity(128)
    }

    /// `value` as JSON bytes.
    static func write(_ value: Any, options: JSONRequestSerializer.WritingOptions) throws(SerializationError) -> [UInt8]
    {
        var w = JSONWriter(options: options)
        try w.value(value, depth: 0)
        return w.bytes
    }

    private var pretty: Bool { self.options.contains(.prettyPrinted) }

    private mutating func value(_ raw: Any, depth: Int) throws(SerializationError) {
        guard let v = unwrapped(raw) else { return self.ascii("null") }
        switch v {
        case let j as JSONValue: return try self.json(j, depth: depth)
        case let s as String: return self.string(s)
        case let s as Substring: return self.string(String(s))
        case let b as Bool: return self.ascii(b ? "true" : "false")
        case let i as any BinaryInteger: return self.ascii(String(describing: i))
        case let d as Double: return try self.number(d, d.description)
        case let f as Float: return try self.number(Double(f), f.description)
        case let d as Decimal:
            guard !d.isNaN else { throw invalid("a number is not finite") }
            return self.ascii(d.description)
        default: break
        }
        let mirror = Mirror(reflecting: v)
        switch mirror.displayStyle {
        case .dictionary?:
            var members: [(String, Any)] = []
            members.reserveCapacity(mirror.children.count)
            for child in mirror.children {
                let kv = Array(Mirror(reflecting: child.value).children)
                guard kv.count == 2, let key = kv[0].value as? String else {
                    throw invalid("a JSON object key is not a string")
                }
                members.append((key, kv[1].value))
            }
            if self.options.contains(.sortedKeys) { members.sort { $0.0 < $1.0 } }
            try self.container(open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), count: members.count, depth: depth) {
                (w: inout JSONWriter, i: Int) throws(SerializationError) in
                w.string(members[i].0)
                w.ascii(w.pretty ? " : " : ":")
                try w.value(members[i].1, depth: depth + 1)
            }
        case .collection?:
            let elements = mirror.children.map(\.value)
            try self.container(open: UInt8(ascii: "["), close: UInt8(ascii: "]"), count: elements.count, depth: depth) {
                (w: inout JSONWriter, i: Int) throws(SerializationError) in
                try w.value(elements[i], depth: depth + 1)
            }
        case .set?:
            throw invalid("a set is not valid JSON (use an array)")
        default:
            throw invalid("a value of type \(type(of: v)) is not a string, number, boolean, null, array or dictionary")
        }
    }

    private mutating func json(_ j: JSONValue, depth: Int) throws(SerializationError) {
        switch j {
        case .null: self.ascii("null")
        case .bool(let b): self.ascii(b ? "true" : "false")
        case .string(let s): self.string(s)
        case .number(.integer(let i)): self.ascii(String(i))
        case .number(.double(let d)): try self.number(d, d.description)
        case .array(let a):
            try self.container(open: UInt8(ascii: "["), close: UInt8(ascii: "]"), count: a.count, depth: depth) {
                (w: inout JSONWriter, i: Int) throws(SerializationError) in
                try w.json(a[i], depth: depth + 1)
            }
        case .object(let o):
            var members = Array(o)
            if self.options.contains(.sortedKeys) { members.sort { $0.key < $1.key } }
            try self.container(open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), count: members.count, depth: depth) {
                (w: inout JSONWriter, i: Int) throws(SerializationError) in
                w.string(members[i].key)
                w.ascii(w.pretty ? " : " : ":")
                try w.json(members[i].value, depth: depth + 1)
            }
        }
    }

    /// `{`/`[`, the members separated by commas, the close; pretty: one member per line,
    /// indented two spaces a level, and an empty container as open, two newlines, close
    /// (as Foundation writes it).
    private mutating func container(
        open: UInt8,
        close: UInt8,
        count: Int,
        depth: Int,
        _ member: (inout JSONWriter, Int) throws(SerializationError) -> Void
    ) throws(SerializationError) {
        self.bytes.append(open)
        if self.pretty { self.bytes.append(0x0A) }
        for i in 0..<count {
            if i > 0 {
                self.bytes.append(UInt8(ascii: ","))
                if self.pretty { self.bytes.append(0x0A) }
            }
            if self.pretty { self.indent(depth + 1) }
            try member(&self, i)
        }
        if self.pretty {
            self.bytes.append(0x0A)
            self.indent(depth)
        }
        self.bytes.append(close)
    }

    private mutating func indent(_ depth: Int) {
        self.bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
    }

    private mutating func number(_ d: Double, _ description: String) throws(SerializationError) {
        guard d.isFinite else { throw invalid("a number is not finite") }
        var s = Substring(description)
        if s.hasSuffix(".0") { s = s.dropLast(2) }
        self.bytes.append(contentsOf: s.utf8)
    }

    private mutating func ascii(_ s: StaticString) {
        s.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
    }

    private mutating func ascii(_ s: String) {
        self.bytes.append(contentsOf: s.utf8)
    }

    private mutating func string(_ s: String) {
        let hex: StaticString = "0123456789abcdef"
        let escapesSlash = !self.options.contains(.withoutEscapingSlashes)
        self.bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                self.bytes.append(UInt8(ascii: "\\"))
                self.bytes.append(b)
            case UInt8(ascii: "/") where escapesSlash:
                self.bytes.append(UInt8(ascii: "\\"))
                self.bytes.append(b)
            case 0x08: self.ascii("\\b")
            case 0x09: self.ascii("\\t")
            case 0x0A: self.ascii("\\n")
            case 0x0C: self.ascii("\\f")
            case 0x0D: self.ascii("\\r")
            case 0..<0x20:
                self.ascii("\\u00")
                hex.withUTF8Buffer { h in
                    self.bytes.append(h[Int(b >> 4)])
                    self.bytes.append(h[Int(b & 0x0F)])
                }
            default:
                self.bytes.append(b)
            }
        }
        self.bytes.append(UInt8(ascii: "\""))
    }
}

private func invalid(_ message: String) -> SerializationError {
    SerializationError(.invalidParameters, "the parameters are not valid JSON: \(message)")
}
