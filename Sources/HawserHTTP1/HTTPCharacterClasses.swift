// HTTPCharacterClasses.swift: byte classes of RFC 9110 / RFC 9112, as one 256-entry table.
//
// The grammar (RFC 9110 §5.6.2, §5.5; RFC 9112 §3.2):
//   tchar         = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
//                   "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
//   field-vchar   = VCHAR / obs-text            ; plus SP / HTAB inside a value
//   obs-text      = %x80-FF
//   request-target: printable ASCII %x21-7E (RFC 3986 characters; no SP, no CTL)
//
// The table lives in a StaticString so it is a constant in the binary: no lazy
// global initialisation, no bounds check, one load per byte (like picohttpparser's
// token_char_map).

@usableFromInline
enum CharClass {
    /// tchar: allowed in a token (field names, methods, transfer codings).
    @usableFromInline static let token: UInt8 = 1
    /// HTAB / SP / VCHAR / obs-text: allowed in a field value or a reason phrase.
    @usableFromInline static let fieldValue: UInt8 = 2
    /// %x21-7E: allowed in a request-target.
    @usableFromInline static let target: UInt8 = 4

    /// The table: entry `b` holds the classes of byte `b`, or-ed together.
    @inlinable @inline(__always)
    static var table: UnsafePointer<UInt8> {
        ("\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{2}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{2}\u{7}\u{6}\u{7}\u{7}\u{7}\u{7}\u{7}\u{6}\u{6}\u{7}\u{7}\u{6}\u{7}\u{7}\u{6}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{6}\u{6}\u{6}\u{6}\u{6}\u{6}\u{6}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{6}\u{6}\u{6}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{7}\u{6}\u{7}\u{6}\u{7}\u{0}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}\u{2}"
            as StaticString).utf8Start
    }

    @inlinable @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool { table[Int(byte)] & token != 0 }

    @inlinable @inline(__always)
    static func isFieldValue(_ byte: UInt8) -> Bool { table[Int(byte)] & fieldValue != 0 }

    @inlinable @inline(__always)
    static func isTarget(_ byte: UInt8) -> Bool { table[Int(byte)] & target != 0 }
}

@usableFromInline let asciiCR: UInt8 = 0x0D
@usableFromInline let asciiLF: UInt8 = 0x0A
@usableFromInline let asciiSP: UInt8 = 0x20
@usableFromInline let asciiHT: UInt8 = 0x09
@usableFromInline let asciiColon: UInt8 = 0x3A

@inlinable @inline(__always)
func isOWS(_ byte: UInt8) -> Bool { byte == asciiSP || byte == asciiHT }

/// SWAR helpers over 8 bytes at a time (Hacker's Delight / "Bit Twiddling Hacks").
@usableFromInline
enum SWAR {
    @usableFromInline static let ones: UInt64 = 0x0101_0101_0101_0101
    @usableFromInline static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Non-zero iff some byte of `x` is zero; the lowest set bit marks the first zero byte exactly.
    @inlinable @inline(__always)
    static func zeroMask(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }

    /// Flags bytes below 0x20 or equal to 0x7F. The lowest flagged byte is at or before the
    /// first such byte (higher flags may be false: borrows and carries), so everything below
    /// it is a valid field-value byte other than HTAB.
    @inlinable @inline(__always)
    static func controlOrDELMask(_ x: UInt64) -> UInt64 {
        ((x &- 0x2020_2020_2020_2020) | (x &+ 0x0101_0101_0101_0101)) & ~x & highs
    }

    /// Flags bytes that are not ASCII letters. The lowest flagged byte is the first
    /// non-letter (higher flags may be false), so everything below it is a letter.
    @inlinable @inline(__always)
    static func nonLetterMask(_ x: UInt64) -> UInt64 {
        let lower = x | 0x2020_2020_2020_2020  // A-Z → a-z; no other byte lands in a-z
        let below = (lower &- 0x6161_6161_6161_6161) & ~lower  // bytes < "a" (among those < 0x80)
        let above = (lower &+ 0x0505_0505_0505_0505) | lower  // bytes > "z", and bytes >= 0x80
        return (below | above) & highs
    }

    /// Index of the first LF in `[from, end)` of `base`, or nil.
    @inlinable
    static func firstLF(_ base: UnsafePointer<UInt8>, from: Int, end: Int) -> Int? {
        var i = from
        let pattern: UInt64 = 0x0A0A_0A0A_0A0A_0A0A
        while i &+ 8 <= end {
            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self) ^ pattern
            let mask = zeroMask(word)
            if mask != 0 { return i &+ (mask.trailingZeroBitCount >> 3) }
            i &+= 8
        }
        while i < end {
            if base[i] == asciiLF { return i }
            i &+= 1
        }
        return nil
    }
}
