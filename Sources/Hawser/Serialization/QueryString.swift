// AFQueryStringFromParameters and AFPercentEscapedStringFromString: how parameters become
// `a=1&b%5B%5D=2`, with AFNetworking's ordering and escaping rules.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The NSNull role in ``Parameters``: a key without a value. In a query string it is the bare
/// key (`flag`, not `flag=`); in a multipart form an empty part; in JSON `null`.
public struct ParameterNull: Sendable, Hashable, CustomStringConvertible {
    /// Creates the null value (the same as ``null``).
    public init() {}
    /// The one null value.
    public static let null = ParameterNull()
    public var description: String { "<null>" }
}

/// One `field=value` pair of a flattened parameter tree (AFQueryStringPair). `value` nil means
/// the bare field (a ``ParameterNull``, a ``ParameterValueConvertible`` null such as `NSNull`, or
/// a nil optional).
struct QueryStringPair {
    var field: String
    var value: Any?

    var urlEncoded: String {
        guard let value = self.value else { return HTTPRequestSerializer.percentEscaped(self.field) }
        return HTTPRequestSerializer.percentEscaped(self.field) + "="
            + HTTPRequestSerializer.percentEscaped(parameterDescription(value))
    }
}

extension HTTPRequestSerializer {
    /// AFQueryStringFromParameters: `parameters` as an `application/x-www-form-urlencoded`
    /// string.
    ///
    /// Keys are sorted (so the result is deterministic); a nested dictionary gives `key[sub]=v`,
    /// an array `key[]=v` per element (in order), a set one `key=v` per element, sorted; a
    /// ``ParameterNull`` the bare key. Leaves are written as AF's `description` would write the
    /// NSNumber / NSString: strings as they are, `true`/`false` as `1`/`0`, integral doubles
    /// without a fraction (`2.0` → `2`). Keys and values are escaped with ``percentEscaped(_:)``.
    public static func queryString(from parameters: Parameters) -> String {
        queryStringPairs(from: parameters).map(\.urlEncoded).joined(separator: "&")
    }

    /// AFQueryStringFromParameters for any parameter value, with AF's recursion from an empty
    /// key: a dictionary (of any value type) as above; an array gives `[]=v` per element (in
    /// order), a set `=v` per element (sorted), a single value `=v`, nested values as in a
    /// dictionary (`[][k]=v` for a dictionary in an array). Where AF would write `(null)` for the
    /// missing key, Hawser writes nothing.
    @_disfavoredOverload
    public static func queryString(from parameters: any Sendable) -> String {
        if let dictionary = parameters as? Parameters { return queryString(from: dictionary) }
        var pairs: [QueryStringPair] = []
        flatten(key: nil, value: parameters, into: &pairs)
        return pairs.map(\.urlEncoded).joined(separator: "&")
    }

    /// AFPercentEscapedStringFromString: escapes `string` for a query key or value following
    /// RFC 3986 §3.4. Everything outside the unreserved set (`A–Z a–z 0–9 - . _ ~`) is escaped
    /// as UTF-8 `%XX`, except `?` and `/`, which a query may carry unescaped; so the reserved
    /// `:#[]@!$&'()*+,;=` and the space are escaped.
    ///
    /// AF escapes in batches of 50 UTF-16 units widened to whole composed-character
    /// sequences so that an emoji with a skin-tone modifier is never split (its issue #3028).
    /// Here the string is escaped as one sequence of UTF-8 bytes, which cannot split a
    /// character at all, so the output is the same for every input.
    public static func percentEscaped(_ string: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(string.utf8.count)
        let hex: [UInt8] = Array("0123456789ABCDEF".utf8)
        for byte in string.utf8 {
            if isQueryAllowed(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// NSCharacterSet.URLQueryAllowedCharacterSet minus `:#[]@!$&'()*+,;=`.
    private static func isQueryAllowed(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"),
            UInt8(ascii: "?"):
            return true
        default:
            return false
        }
    }

    /// AFQueryStringPairsFromDictionary: the parameter tree flattened into pairs, in order.
    static func queryStringPairs(from parameters: Parameters) -> [QueryStringPair] {
        var out: [QueryStringPair] = []
        for key in parameters.keys.sorted() {
            flatten(key: key, value: parameters[key]!, into: &out)
        }
        return out
    }

    /// AFQueryStringPairsFromKeyAndValue. `key` is nil at the top level.
    private static func flatten(key: String?, value: Any, into out: inout [QueryStringPair]) {
        func nested(_ k: String) -> String { key.map { "\($0)[\(k)]" } ?? k }
        let field = key ?? ""
        guard let value = unwrapped(value) else {
            out.append(QueryStringPair(field: field, value: nil))
            return
        }
        if let json = value as? JSONValue {
            switch json {
            case .object(let o):
                for k in o.keys.sorted() { flatten(key: nested(k), value: o[k]!, into: &out) }
            case .array(let a):
                for v in a { flatten(key: "\(field)[]", value: v, into: &out) }
            case .null:
                out.append(QueryStringPair(field: field, value: nil))
            default:
                out.append(QueryStringPair(field: field, value: json))
            }
            return
        }
        // Leaves that Mirror would otherwise take apart.
        if value is String || value is Substring || value is Data || value is URL || value is Date {
            out.append(QueryStringPair(field: field, value: value))
            return
        }
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .dictionary?:
            var entries: [(key: String, value: Any)] = []
            for child in mirror.children {
                let kv = Array(Mirror(reflecting: child.value).children)
                guard kv.count == 2 else { continue }
                entries.append((parameterDescription(kv[0].value), kv[1].value))
            }
            entries.sort { $0.key < $1.key }
            for e in entries { flatten(key: nested(e.key), value: e.value, into: &out) }
        case .collection?:
            for child in mirror.children { flatten(key: "\(field)[]", value: child.value, into: &out) }
        case .set?:
            let elements = mirror.children.map(\.value).sorted { parameterDescription($0) < parameterDescription($1) }
            for e in elements { flatten(key: key, value: e, into: &out) }
        default:
            out.append(QueryStringPair(field: field, value: value))
        }
    }
}

/// `value` with optionals unwrapped and a ``ParameterValueConvertible`` as its ``JSONValue``; nil
/// for a nil optional, ``ParameterNull`` and a convertible null (`NSNull`).
package func unwrapped(_ value: Any) -> Any? {
    if value is ParameterNull { return nil }
    if let c = value as? any ParameterValueConvertible {
        let j = c.parameterValue
        return j == .null ? nil : j
    }
    let mirror = Mirror(reflecting: value)
    if mirror.displayStyle == .optional {
        guard let inner = mirror.children.first?.value else { return nil }
        return unwrapped(inner)
    }
    return value
}

/// How AF's `[value description]` writes a leaf: NSString as itself, NSNumber booleans as 1/0,
/// integral doubles without a fraction.
func parameterDescription(_ value: Any) -> String {
    switch value {
    case let b as Bool: return b ? "1" : "0"
    case let s as String: return s
    case let s as Substring: return String(s)
    case let d as Double: return numberDescription(d)
    case let f as Float: return numberDescription(Double(f))
    case let d as Data: return String(decoding: d, as: UTF8.self)
    case let u as URL: return u.absoluteString
    case let j as JSONValue:
        switch j {
        case .string(let s): return s
        case .bool(let b): return b ? "1" : "0"
        case .number(.integer(let i)): return String(i)
        case .number(.double(let d)): return numberDescription(d)
        case .null: return ""
        default: return "\(j)"
        }
    case let c as any CustomStringConvertible: return c.description
    default: return String(describing: value)
    }
}

private func numberDescription(_ d: Double) -> String {
    if d.rounded() == d, abs(d) < 9.007_199_254_740_992e15 { return String(Int64(d)) }
    return "\(d)"
}
