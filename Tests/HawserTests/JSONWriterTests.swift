// JSONRequestSerializer writes JSON itself (Hawser has no JSONSerialization); these tests hold
// its bytes to Foundation's for the same parameters.
import Foundation
import Hawser
import HawserFoundation
import Testing

/// A deterministic generator (SplitMix64), so a failure names a seed that reproduces it.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One random parameter tree, twice: as Hawser takes it (`ParameterNull`) and as
/// JSONSerialization takes it (`NSNull`).
private struct TreePair {
    var hawser: any Sendable
    var foundation: Any
}

private func randomString(_ rng: inout SplitMix) -> String {
    let pieces = [
        "a", "Z", "/", "\\", "\"", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{1}", "\u{1f}", "\u{7f}",
        "é", "😀", "\u{2028}", " ", "%", "&", "0", "<>", "\u{0}",
    ]
    return (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
}

private func randomDouble(_ rng: inout SplitMix) -> Double {
    let special: [Double] = [
        0, -0.0, 1, -1, 0.1, 1.5, 1e15, 1e16, 9_007_199_254_740_992, 1e-7, 1e21, 123456789.123,
        .pi, .leastNonzeroMagnitude, .greatestFiniteMagnitude, .leastNormalMagnitude, 2.5e-5, 100, 1e100,
    ]
    if Bool.random(using: &rng) { return special.randomElement(using: &rng)! }
    while true {
        let d = Double(bitPattern: rng.next())
        if d.isFinite { return d }
    }
}

private func randomTree(_ rng: inout SplitMix, depth: Int) -> TreePair {
    let kind = depth >= 4 ? Int.random(in: 0..<6, using: &rng) : Int.random(in: 0..<8, using: &rng)
    switch kind {
    case 0:
        let s = randomString(&rng)
        return TreePair(hawser: s, foundation: s)
    case 1:
        let i = Int(truncatingIfNeeded: rng.next()) >> Int.random(in: 0..<64, using: &rng)
        return TreePair(hawser: i, foundation: i)
    case 2:
        let d = randomDouble(&rng)
        return TreePair(hawser: d, foundation: d)
    case 3:
        let b = Bool.random(using: &rng)
        return TreePair(hawser: b, foundation: b)
    case 4: return TreePair(hawser: ParameterNull.null, foundation: NSNull())
    case 5:
        let f = Float(bitPattern: UInt32(truncatingIfNeeded: rng.next()) & 0x7EFF_FFFF)
        return TreePair(hawser: f, foundation: f)
    case 6:
        let items = (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomTree(&rng, depth: depth + 1) }
        return TreePair(hawser: items.map(\.hawser), foundation: items.map(\.foundation))
    default:
        return randomObject(&rng, depth: depth + 1)
    }
}

/// Keys of lowercase letters only: the one alphabet on which Foundation's `.sortedKeys`
/// collation and Hawser's scalar order agree.
private func randomObject(_ rng: inout SplitMix, depth: Int) -> TreePair {
    var h: [String: any Sendable] = [:]
    var f: [String: Any] = [:]
    for _ in 0..<Int.random(in: 0...4, using: &rng) {
        let key = String(
            (0..<Int.random(in: 1...3, using: &rng)).map { _ in
                Character(Unicode.Scalar(UInt8.random(in: 97...122, using: &rng)))
            }
        )
        let v = randomTree(&rng, depth: depth)
        h[key] = v.hawser
        f[key] = v.foundation
    }
    return TreePair(hawser: h, foundation: f)
}

private func hawserJSON(_ parameters: Parameters, _ options: JSONRequestSerializer.WritingOptions) throws -> String {
    let r = try JSONRequestSerializer(writingOptions: options).request(
        withMethod: .post,
        urlString: "http://example.com",
        parameters: parameters
    )
    guard case .bytes(let b)? = r.body else {
        Issue.record("no body")
        return ""
    }
    return String(decoding: b, as: UTF8.self)
}

private func foundationJSON(_ object: Any, _ options: JSONSerialization.WritingOptions) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: object, options: options), as: UTF8.self)
}

@Suite struct JSONWriterTests {
    @Test(
        "random parameter trees: the same bytes as JSONSerialization, for each writing option",
        arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8]
    )
    func sameBytesAsFoundation(seed: UInt64) throws {
        var rng = SplitMix(state: seed)
        for round in 0..<150 {
            let tree = randomObject(&rng, depth: 0)
            let parameters = tree.hawser as! Parameters
            for (mine, theirs) in [
                (JSONRequestSerializer.WritingOptions.sortedKeys, JSONSerialization.WritingOptions.sortedKeys),
                ([.sortedKeys, .prettyPrinted], [.sortedKeys, .prettyPrinted]),
                ([.sortedKeys, .withoutEscapingSlashes], [.sortedKeys, .withoutEscapingSlashes]),
            ] {
                let expected = try foundationJSON(tree.foundation, theirs)
                let got = try hawserJSON(parameters, mine)
                #expect(got == expected, "seed \(seed) round \(round) options \(mine.rawValue)")
            }
        }
    }

    @Test("escapes, numbers and empty containers, written out")
    func knownBytes() throws {
        let p: Parameters = [
            "s": "a/b\"\\\u{1}\u{1f}\u{7f}\t\n\r\u{8}\u{c}é😀",
            "n": [1, -2, 1.5, 1.0, 1e16, 1e-7, -0.0, Int64.max, UInt64.max] as [any Sendable],
        ]
        let expected =
            "{\"n\":[1,-2,1.5,1,1e+16,1e-07,-0,9223372036854775807,18446744073709551615],"
            + "\"s\":\"a\\/b\\\"\\\\\\u0001\\u001f\u{7f}\\t\\n\\r\\b\\fé😀\"}"
        #expect(try hawserJSON(p, .sortedKeys) == expected)
        #expect(
            try hawserJSON(["a": [String: Int](), "b": [Int]()], [.sortedKeys, .prettyPrinted])
                == "{\n  \"a\" : {\n\n  },\n  \"b\" : [\n\n  ]\n}"
        )
        #expect(try hawserJSON(["u": "x/y"], .withoutEscapingSlashes) == #"{"u":"x/y"}"#)
    }

    @Test("sortedKeys orders by Unicode scalars (the documented difference from Foundation)")
    func sortedKeysOrder() throws {
        #expect(
            try hawserJSON(["b": 1, "B": 2, "10": 3, "9": 4, "_": 5], .sortedKeys)
                == #"{"10":3,"9":4,"B":2,"_":5,"b":1}"#
        )
    }

    @Test("NSNull and NSNumber work as parameters once HawserFoundation is linked")
    func foundationLeaves() throws {
        let p: Parameters = [
            "t": NSNumber(value: true), "d": NSNumber(value: 2.5), "i": NSNumber(value: 7),
            "z": NSNull(),
        ]
        #expect(try hawserJSON(p, .sortedKeys) == #"{"d":2.5,"i":7,"t":true,"z":null}"#)
        #expect(HTTPRequestSerializer.queryString(from: p) == "d=2.5&i=7&t=1&z")
    }

    @Test("a value JSON cannot hold is an .invalidParameters error naming it")
    func invalidNamesTheValue() {
        #expect {
            _ = try hawserJSON(["when": Date(timeIntervalSince1970: 0)], [])
        } throws: { e in
            guard let e = e as? SerializationError else { return false }
            return e.code == .invalidParameters && "\(e)".contains("Date")
        }
    }
}
