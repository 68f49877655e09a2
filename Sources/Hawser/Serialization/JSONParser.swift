// RFC 8259 JSON text → JSONValue, in one pass over the bytes.
//
// It replaces a decode through JSONDecoder's Codable machinery, which tried Bool, Int64 and
// Double (each failure a thrown DecodingError) before every string and cost more than the whole
// HTTP exchange for a small document. It accepts what that decoder accepted (JSON5 still goes
// to JSONDecoder): one value with whitespace around it, a UTF-8 byte-order mark before it, and a
// trailing comma before `]` or `}`, as Foundation's JSON readers tolerate. Nesting is limited,
// strings must be valid UTF-8 with no raw control characters, and `\u` escapes must pair their
// surrogates.

/// A malformed JSON text: what was wrong and at which byte.
struct JSONParseError: Error, CustomStringConvertible {
    var message: String
    var offset: Int
    var description: String { "\(self.message) at byte \(self.offset)" }
}

struct JSONParser: ~Copyable {
    /// Foundation's JSON readers stop at the same depth.
    static let maximumDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0

    /// Parses `bytes` as one JSON value.
    static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in
            var p = JSONParser(bytes: buffer)
            if buffer.count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF { p.i = 3 }
            p.skipWhitespace()
            let value = try p.value()
            p.skipWhitespace()
            if p.i != buffer.count { throw p.error("unexpected data after the JSON value") }
            return value
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private func error(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: self.i) }

    private var current: UInt8? { self.i < self.bytes.count ? self.bytes[self.i] : nil }

    private mutating func skipWhitespace() {
        while self.i < self.bytes.count {
            switch self.bytes[self.i] {
            case 0x20, 0x09, 0x0A, 0x0D: self.i += 1
            default: return
            }
        }
    }

    private mutating func value() throws(JSONParseError) -> JSONValue {
        guard let c = self.current else { throw self.error("unexpected end of the JSON text") }
        switch c {
        case UInt8(ascii: "{"): return try self.object()
        case UInt8(ascii: "["): return try self.array()
        case UInt8(ascii: "\""): return .string(try self.string())
        case UInt8(ascii: "t"):
            try self.literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try self.literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try self.literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.number())
        default: throw self.error("unexpected character '\(Unicode.Scalar(c))'")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard self.bytes.count - self.i >= w.count,
            UnsafeBufferPointer(rebasing: self.bytes[self.i..<self.i + w.count]).elementsEqual(w)
        else {
            throw self.error("invalid literal (expected '\(word)')")
        }
        self.i += w.count
    }

    private mutating func enter() throws(JSONParseError) {
        self.depth += 1
        if self.depth > Self.maximumDepth { throw self.error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func object() throws(JSONParseError) -> JSONValue {
        try self.enter()
        self.i += 1
        self.skipWhitespace()
        // Room for a small object up front: growing a dictionary rehashes every member.
        // (`init(minimumCapacity:)` is specialized here; `reserveCapacity` is a generic call.)
        var members = self.current == UInt8(ascii: "}") ? [:] : [String: JSONValue](minimumCapacity: 4)
        while self.current != UInt8(ascii: "}") {
            guard self.current == UInt8(ascii: "\"") else { throw self.error("expected a member name in quotes") }
            let key = try self.string()
            self.skipWhitespace()
            guard self.current == UInt8(ascii: ":") else { throw self.error("expected ':' after a member name") }
            self.i += 1
            self.skipWhitespace()
            let member = try self.value()
            // A repeated name keeps its first value, as Foundation's JSONDecoder does. One hash
            // lookup for a new name (the usual case), a second to put the first value back.
            if let first = members.updateValue(member, forKey: key) { members[key] = first }
            try self.afterElement(closing: UInt8(ascii: "}"), "expected ',' or '}' in an object")
        }
        self.i += 1
        self.depth -= 1
        return .object(members)
    }

    private mutating func array() throws(JSONParseError) -> JSONValue {
        try self.enter()
        self.i += 1
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.current != UInt8(ascii: "]") { elements.reserveCapacity(4) }
        while self.current != UInt8(ascii: "]") {
            elements.append(try self.value())
            try self.afterElement(closing: UInt8(ascii: "]"), "expected ',' or ']' in an array")
        }
        self.i += 1
        self.depth -= 1
        return .array(elements)
    }

    /// After a member or element: a ',' (and the whitespace after it), or the closing bracket,
    /// left for the caller's loop to see. A ',' right before the bracket is the tolerated
    /// trailing comma.
    private mutating func afterElement(closing: UInt8, _ message: String) throws(JSONParseError) {
        self.skipWhitespace()
        if self.current == UInt8(ascii: ",") {
            self.i += 1
            self.skipWhitespace()
        } else if self.current != closing {
            throw self.error(message)
        }
    }

    /// `bytes` as a String, or an error if they are not UTF-8. `String(decoding:as:)` is the
    /// specialized path (`String(validating:as:)` is a generic call that looks up metadata on
    /// every string); it repairs bad bytes, so a non-ASCII result is compared with the input.
    private static func decodeUTF8(
        _ bytes: UnsafeBufferPointer<UInt8>,
        ascii: Bool,
        offset: Int
    ) throws(JSONParseError) -> String {
        let s = String(decoding: bytes, as: UTF8.self)
        if ascii || s.utf8.elementsEqual(bytes) { return s }
        throw JSONParseError(message: "a string is not valid UTF-8", offset: offset)
    }

    /// A string starting at the opening quote; the cursor ends after the closing one.
    private mutating func string() throws(JSONParseError) -> String {
        self.i += 1
        let start = self.i
        // The common case: no escapes. Find the closing quote and validate the bytes once.
        var ascii = true
        while self.i < self.bytes.count {
            let c = self.bytes[self.i]
            if c == UInt8(ascii: "\"") {
                let s = try Self.decodeUTF8(
                    UnsafeBufferPointer(rebasing: self.bytes[start..<self.i]),
                    ascii: ascii,
                    offset: start
                )
                self.i += 1
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw self.error("a control character in a string must be escaped") }
            if c >= 0x80 { ascii = false }
            self.i += 1
        }
        var out = Array(UnsafeBufferPointer(rebasing: self.bytes[start..<self.i]))
        while self.i < self.bytes.count {
            let c = self.bytes[self.i]
            if c == UInt8(ascii: "\"") {
                let s = try out.withUnsafeBufferPointer { bytes throws(JSONParseError) in
                    try Self.decodeUTF8(bytes, ascii: false, offset: start)
                }
                self.i += 1
                return s
            }
            if c < 0x20 { throw self.error("a control character in a string must be escaped") }
            if c != UInt8(ascii: "\\") {
                out.append(c)
                self.i += 1
                continue
            }
            self.i += 1
            guard let e = self.current else { break }
            self.i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = UInt32(try self.hex4())
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard self.current == UInt8(ascii: "\\"), self.i + 1 < self.bytes.count,
                        self.bytes[self.i + 1] == UInt8(ascii: "u")
                    else {
                        throw self.error("a high surrogate escape without its low surrogate")
                    }
                    self.i += 2
                    let low = UInt32(try self.hex4())
                    guard low >= 0xDC00 && low < 0xE000 else {
                        throw self.error("a high surrogate escape without its low surrogate")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw self.error("a low surrogate escape without its high surrogate")
                }
                out.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar)!)!)
            default:
                throw self.error("invalid escape '\\\(Unicode.Scalar(e))'")
            }
        }
        throw JSONParseError(message: "unterminated string", offset: start - 1)
    }

    private mutating func hex4() throws(JSONParseError) -> UInt16 {
        guard self.bytes.count - self.i >= 4 else { throw self.error("a \\u escape needs four hex digits") }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let c = self.bytes[self.i]
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw self.error("a \\u escape needs four hex digits")
            }
            v = v << 4 | UInt16(d)
            self.i += 1
        }
        return v
    }

    /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. A number whose
    /// written value is an integer that fits Int64 is exact, however it is written (`100`,
    /// `100.0`, `1e2`, `0.5e3`); every other number is the nearest Double.
    private mutating func number() throws(JSONParseError) -> JSONNumber {
        let start = self.i
        let negative = self.current == UInt8(ascii: "-")
        if negative { self.i += 1 }
        func isDigit(_ c: UInt8?) -> Bool { c.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
        guard isDigit(self.current) else { throw self.error("a number needs a digit") }
        let intStart = self.i
        if self.current == UInt8(ascii: "0") {
            self.i += 1
            if isDigit(self.current) { throw self.error("a number cannot have a leading zero") }
        } else {
            while isDigit(self.current) { self.i += 1 }
        }
        let intEnd = self.i
        var fracStart = self.i
        var fracEnd = self.i
        if self.current == UInt8(ascii: ".") {
            self.i += 1
            guard isDigit(self.current) else { throw self.error("a fraction needs a digit") }
            fracStart = self.i
            while isDigit(self.current) { self.i += 1 }
            fracEnd = self.i
        }
        var exponent = 0
        if self.current == UInt8(ascii: "e") || self.current == UInt8(ascii: "E") {
            self.i += 1
            var expNegative = false
            if self.current == UInt8(ascii: "+") || self.current == UInt8(ascii: "-") {
                expNegative = self.current == UInt8(ascii: "-")
                self.i += 1
            }
            guard isDigit(self.current) else { throw self.error("an exponent needs a digit") }
            while isDigit(self.current) {
                exponent = min(exponent * 10 + Int(self.bytes[self.i] - 0x30), 1_000_000)
                self.i += 1
            }
            if expNegative { exponent = -exponent }
        }
        if let exact = self.exactInteger(
            negative: negative,
            integer: intStart..<intEnd,
            fraction: fracStart..<fracEnd,
            exponent: exponent
        ) {
            return .integer(exact)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.i]), as: UTF8.self)
        guard let d = Double(text), d.isFinite else {
            throw JSONParseError(message: "the number \(text) is out of range", offset: start)
        }
        return .double(d)
    }

    /// The written value (the digits of `integer` then `fraction`, times 10^(exponent - fraction
    /// digits)) as an Int64, when that value is an integer within Int64's range.
    private func exactInteger(negative: Bool, integer: Range<Int>, fraction: Range<Int>, exponent: Int) -> Int64? {
        // Digit j of the significand, for j in 0..<count: the integer digits, then the fraction's.
        let count = integer.count + fraction.count
        func digit(_ j: Int) -> Int64 {
            Int64(
                self.bytes[j < integer.count ? integer.lowerBound + j : fraction.lowerBound + j - integer.count] - 0x30
            )
        }
        var first = 0
        var end = count
        var scale = exponent - fraction.count
        while first < end && digit(first) == 0 { first += 1 }
        if first == end { return 0 }
        while digit(end - 1) == 0 {
            end -= 1
            scale += 1
        }
        // A fraction is left, or more than 19 digits: not an Int64.
        guard scale >= 0, end - first + scale <= 19 else { return nil }
        // Accumulate negatively so that Int64.min fits.
        var value: Int64 = 0
        for j in first..<end {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (n, o2) = m.subtractingReportingOverflow(digit(j))
            if o1 || o2 { return nil }
            value = n
        }
        for _ in 0..<scale {
            let (m, o) = value.multipliedReportingOverflow(by: 10)
            if o { return nil }
            value = m
        }
        if negative { return value }
        return value == Int64.min ? nil : -value
    }
}
