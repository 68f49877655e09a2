// FuzzJSON: libFuzzer target for the JSON parser behind JSONResponseSerializer (built with
// -DFUZZING by Fuzz/run.sh; without it, a replay `main` runs the same check on the files named).
//
// Differential: the one-pass parser (`JSONValue(parsing:)`) against the Codable decode through
// Foundation's JSONDecoder it replaced. Invariants (a trap is a bug):
// - when both accept a text, they give the same value, numbers equal in value to within the
//   rounding of a Double and the decoder's truncation (whether a number is exact follows its
//   written value here: `1e-999` is the Double 0.0 and `14223372036854757.85` the nearest
//   Double, where the decoder made the first the integer 0 and cut the second to an integer);
// - the parser accepts nothing the decoder refuses;
// - what the parser accepts survives a round trip through JSONEncoder, numbers equal in value
//   (JSONEncoder writes an integral Double such as 9.2e16 without a fraction, which then reads
//   back exact, as an integer).

import Foundation
import FuzzSupport
import Hawser

/// Equal, with numbers compared by value: an integer and a Double match when they are within 1
/// plus two units in the last place of each other.
func sameValue(_ x: JSONValue, _ y: JSONValue) -> Bool {
    switch (x, y) {
    case (.number(let a), .number(let b)):
        if a == b { return true }
        let (u, v) = (a.doubleValue, b.doubleValue)
        return (u - v).magnitude <= 1 + max(u.magnitude, v.magnitude) * 4.5e-16
    case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameValue($0, $1) }
    case (.object(let a), .object(let b)):
        return a.count == b.count && a.allSatisfy { k, v in b[k].map { sameValue(v, $0) } ?? false }
    default: return x == y
    }
}

func check(_ bytes: [UInt8]) {
    let mine = Result { try JSONValue(parsing: bytes, allowFragments: true) }
    // A space after the text: FoundationEssentials' scanner traps when its depth error falls
    // on the last byte (exactly 513 '['; found by this target, seed 4), which the old
    // serializer passed on to the app as a crash. Trailing whitespace changes no verdict.
    let theirs = Result { try JSONDecoder().decode(JSONValue.self, from: Data(bytes + [0x20])) }
    switch (mine, theirs) {
    case (.success(let a), .success(let b)):
        precondition(sameValue(a, b), "values differ: \(a) vs \(b)")
        let again = try! JSONValue(parsing: Array(JSONEncoder().encode(a)), allowFragments: true)
        precondition(sameValue(again, a), "round trip changed \(a) into \(again)")
    case (.success(let a), .failure(let e)):
        preconditionFailure("the parser accepted \(a), the decoder refused: \(e)")
    case (.failure, _):
        break
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    check(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzJSON) }
}
#endif
