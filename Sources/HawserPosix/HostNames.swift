// Byte-level helpers for host names. Host names are compared as DNS and curl compare them:
// byte for byte, ASCII letters case-insensitively, split into labels at every '.' byte. Swift's
// String compares by grapheme cluster and canonical equivalence instead: a '.' followed by a
// combining mark is not a "." Character, and different bytes can be equal Strings.

/// `b` with ASCII upper-case letters folded to lower case.
@inline(__always)
package func asciiLowercase(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

/// Whether a dotted name is empty, starts or ends with a dot, or has two dots in a row.
package func hasEmptyLabel(_ name: some Collection<UInt8>) -> Bool {
    var previous = UInt8(ascii: ".")
    for b in name {
        if b == UInt8(ascii: ".") && previous == b { return true }
        previous = b
    }
    return previous == UInt8(ascii: ".")
}
