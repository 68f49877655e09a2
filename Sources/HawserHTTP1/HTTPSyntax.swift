// Small pieces of RFC 9110's field syntax that the engine's field parsers share (challenges,
// Cache-Control, Vary, cookies): tokens, optional whitespace, quoted strings.

/// tchar (RFC 9110 §5.6.2).
@inline(__always)
package func isTokenChar(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
    default: return false
    }
}

/// `value` as a quoted-string: `"` and `\` escaped.
package func quotedString(_ value: String) -> String {
    var out = "\""
    for scalar in value.unicodeScalars {
        if scalar == "\"" || scalar == "\\" { out.append("\\") }
        out.unicodeScalars.append(scalar)
    }
    out.append("\"")
    return out
}

extension Substring {
    /// Without leading and trailing optional whitespace (SP, HTAB; RFC 9110 §5.6.3).
    package func trimmingOWS() -> Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
