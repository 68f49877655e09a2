// Host names to what goes on the wire: UTS #46 processing (nontransitional, UseSTD3ASCIIRules on
// the result's ASCII, CheckHyphens, CheckBidi, CheckJoiners) and RFC 3492 Punycode. Pure Swift,
// no ICU: the tables are in IDNAData.swift (scripts/gen-idna-tables.py); NFC is the standard
// library's.

/// Internationalized domain names: a host as a URL may spell it (Unicode, percent-encoded UTF-8,
/// A-labels) to the lower-case ASCII form that goes in `Host`, SNI, the proxy's `CONNECT`
/// line, the DNS query, cookie domains and the certificate's name check.
public enum IDNA {
    /// Why a host name was refused.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong, in words.
        public var message: String

        /// Creates a failure that says `message`.
        public init(_ message: String) { self.message = message }

        public var description: String { self.message }
    }

    /// The ASCII form of `host` (UTS #46 ToASCII, nontransitional): each label mapped (case
    /// folded, compatibility forms replaced, ignorable code points removed), normalized to NFC,
    /// checked (hyphens, a leading combining mark, disallowed code points, RFC 5892's CONTEXTJ
    /// rules, RFC 5893's Bidi rule) and Punycode-encoded with `xn--` when not ASCII. A label that
    /// is `xn--` already must decode to a valid label. ASCII-only hosts come back lower-cased
    /// with their `xn--` labels checked, and nothing else changed.
    ///
    /// `host` is the host's bytes, percent-decoded; they must be UTF-8. A host with a forbidden
    /// domain code point (a control, space, `#`, `%`, `/`, `:`, `<`, `>`, `?`, `@`, `[`, `\`,
    /// `]`, `^`, `|`, DEL), before or after the mapping, is refused, as WHATWG URL does.
    public static func toASCII<Bytes: Collection<UInt8>>(_ host: Bytes) -> Result<String, Failure> {
        guard !host.isEmpty else { return .failure(Failure("the host is empty")) }
        var ascii = true
        var upper = false
        var xn = false
        // Position in the current label while it still reads "xn--" (case-insensitive); -1 once not.
        var prefix = 0
        for b in host {
            if b >= 0x80 {
                ascii = false
                prefix = -1
                continue
            }
            if Self.isForbidden(b) { return .failure(Self.forbidden(b)) }
            if b >= 0x41 && b <= 0x5A { upper = true }
            if b == 0x2E {
                prefix = 0
                continue
            }
            switch (prefix, b | 0x20) {
            case (0, 0x78), (1, 0x6E), (2, 0x2D): prefix += 1
            case (3, 0x2D):
                xn = true
                prefix = -1
            default: prefix = -1
            }
        }
        if ascii && !xn {
            // The fast path: the common host, no allocation beyond the string itself.
            if upper {
                return .success(
                    String(decoding: host.lazy.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                )
            }
            return .success(String(decoding: host, as: UTF8.self))
        }
        guard let text = String(validating: host, as: UTF8.self) else {
            return .failure(Failure("the host is not UTF-8"))
        }
        // A host of code points UTS #46 maps to nothing (U+034F, U+200B…) is no host at all.
        let converted = Self.process(text)
        if case .success(let name) = converted, name.isEmpty || name == "." {
            return .failure(Failure("the host is empty once mapped (UTS #46 ignores every code point in it)"))
        }
        return converted
    }

    /// ``toASCII(_:)`` of a string's UTF-8.
    public static func toASCII(_ host: String) -> Result<String, Failure> {
        Self.toASCII(host.utf8)
    }

    // MARK: - Processing

    private static func process(_ host: String) -> Result<String, Failure> {
        // 1. Map.
        var mapped = ""
        mapped.reserveCapacity(host.utf8.count)
        for scalar in host.unicodeScalars {
            switch Self.status(of: scalar.value) {
            case .valid:
                mapped.unicodeScalars.append(scalar)
            case .ignored:
                break
            case .mapped(let range):
                mapped += Self.mapping(range)
            case .disallowed:
                return .failure(
                    Failure("the host has the code point U+\(Self.hex(scalar.value)), disallowed in a domain name")
                )
            }
        }
        // 2. Normalize (NFC, the standard library's).
        let normalized = String(decoding: mapped._nfcCodeUnits, as: UTF8.self)
        // 3. Break into labels (the mapping made U+3002 and the like full stops already).
        // By scalars, not Characters: a full stop followed by a combining mark is one Character
        // that is not "." (found by FuzzURLValidation), and still ends a label.
        let labels = normalized.unicodeScalars.split(separator: ".", omittingEmptySubsequences: false).map {
            Substring($0)
        }
        var bidiDomain = false
        var decodedLabels: [[Unicode.Scalar]] = []
        decodedLabels.reserveCapacity(labels.count)
        for label in labels {
            var scalars = Array(label.unicodeScalars)
            if label.utf8.count >= 4, label.utf8.starts(with: "xn--".utf8) {
                let encoded = label.utf8.dropFirst(4)
                guard label.utf8.count <= 63 else {
                    return .failure(Failure("the label '\(label)' is longer than 63 bytes"))
                }
                guard !encoded.isEmpty, encoded.allSatisfy({ $0 < 0x80 }),
                    let decoded = Punycode.decode(Array(encoded))
                else {
                    return .failure(Failure("the label '\(label)' is not valid Punycode"))
                }
                guard decoded.contains(where: { $0.value >= 0x80 }) else {
                    return .failure(Failure("the label '\(label)' decodes to ASCII"))
                }
                // An A-label must be what ToASCII makes of its U-label: valid, NFC, unmapped.
                for s in decoded {
                    guard case .valid = Self.status(of: s.value) else {
                        return .failure(
                            Failure(
                                "the label '\(label)' decodes to the code point U+\(Self.hex(s.value)), which is not valid in a domain name"
                            )
                        )
                    }
                }
                var decodedString = ""
                decodedString.unicodeScalars.append(contentsOf: decoded)
                guard Array(decodedString._nfcCodeUnits) == Array(decodedString.utf8) else {
                    return .failure(Failure("the label '\(label)' does not decode to NFC"))
                }
                scalars = decoded
            }
            if let failure = Self.validate(scalars, label: label) { return .failure(failure) }
            if !bidiDomain {
                bidiDomain = scalars.contains {
                    let c = Self.bidiClass(of: $0.value)
                    return c == .r || c == .al || c == .an
                }
            }
            decodedLabels.append(scalars)
        }
        if bidiDomain {
            for (label, scalars) in zip(labels, decodedLabels) where !scalars.isEmpty {
                if let failure = Self.checkBidi(scalars, label: label) { return .failure(failure) }
            }
        }
        // 4. Convert: the ASCII labels as they are, the others Punycode-encoded.
        var out: [UInt8] = []
        out.reserveCapacity(normalized.utf8.count + 8)
        for (i, label) in labels.enumerated() {
            if i > 0 { out.append(0x2E) }
            if label.utf8.allSatisfy({ $0 < 0x80 }) {
                for b in label.utf8 {
                    if Self.isForbidden(b) { return .failure(Self.forbidden(b)) }
                    out.append(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
                }
            } else {
                guard let encoded = Punycode.encode(decodedLabels[i]) else {
                    return .failure(Failure("the label '\(label)' is too long to encode"))
                }
                guard encoded.count + 4 <= 63 else {
                    return .failure(Failure("the label '\(label)' is longer than 63 bytes as an A-label"))
                }
                out += "xn--".utf8
                out += encoded
            }
        }
        guard out.count <= 253 || (out.count == 254 && out.last == 0x2E) else {
            return .failure(Failure("the host is longer than 253 bytes as A-labels"))
        }
        return .success(String(decoding: out, as: UTF8.self))
    }

    /// UTS #46 §4.1 validity criteria for one label (after mapping and NFC), CheckJoiners included;
    /// the Bidi rule is checked across the domain afterwards.
    private static func validate(_ scalars: [Unicode.Scalar], label: Substring) -> Failure? {
        guard scalars.contains(where: { $0.value >= 0x80 }) else { return nil }
        // CheckHyphens.
        if scalars.count >= 4, scalars[2] == "-", scalars[3] == "-" {
            return Failure("the label '\(label)' has hyphens in its third and fourth positions")
        }
        if scalars.first == "-" || scalars.last == "-" {
            return Failure("the label '\(label)' begins or ends with a hyphen")
        }
        switch scalars[0].properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark:
            return Failure("the label '\(label)' begins with a combining mark")
        default:
            break
        }
        for (i, s) in scalars.enumerated() {
            if s.value < 0x80 {
                if Self.isForbidden(UInt8(s.value)) { return Self.forbidden(UInt8(s.value)) }
                continue
            }
            guard case .valid = Self.status(of: s.value) else {
                return Failure(
                    "the label '\(label)' has the code point U+\(Self.hex(s.value)), not valid in a domain name"
                )
            }
            if s.value == 0x200C || s.value == 0x200D {
                if !Self.contextJ(scalars, at: i) {
                    return Failure(
                        "the label '\(label)' has a zero-width joiner where RFC 5892's CONTEXTJ rule refuses it"
                    )
                }
            }
        }
        return nil
    }

    /// RFC 5892 Appendix A.1 (U+200C ZERO WIDTH NON-JOINER) and A.2 (U+200D ZERO WIDTH JOINER).
    private static func contextJ(_ scalars: [Unicode.Scalar], at i: Int) -> Bool {
        // Both: allowed after a virama (Canonical_Combining_Class 9).
        if i > 0, scalars[i - 1].properties.canonicalCombiningClass.rawValue == 9 { return true }
        guard scalars[i].value == 0x200C else { return false }
        // (Joining_Type:{L,D})(Joining_Type:T)*\u200C(Joining_Type:T)*(Joining_Type:{R,D})
        var j = i - 1
        while j >= 0, Self.joiningType(of: scalars[j].value) == .t { j -= 1 }
        guard j >= 0 else { return false }
        let before = Self.joiningType(of: scalars[j].value)
        guard before == .l || before == .d else { return false }
        var k = i + 1
        while k < scalars.count, Self.joiningType(of: scalars[k].value) == .t { k += 1 }
        guard k < scalars.count else { return false }
        let after = Self.joiningType(of: scalars[k].value)
        return after == .r || after == .d
    }

    /// RFC 5893 §2, the Bidi rule, for one label of a Bidi domain name.
    private static func checkBidi(_ scalars: [Unicode.Scalar], label: Substring) -> Failure? {
        let classes = scalars.map { Self.bidiClass(of: $0.value) }
        let fail = Failure("the label '\(label)' breaks the Bidi rule of RFC 5893")
        // 1. The first character is L, R or AL.
        switch classes[0] {
        case .r, .al:
            // 2. Only R, AL, AN, EN, ES, CS, ET, ON, BN, NSM.
            let allowed: Set<BidiClass> = [.r, .al, .an, .en, .es, .cs, .et, .on, .bn, .nsm]
            guard classes.allSatisfy({ allowed.contains($0) }) else { return fail }
            // 3. Ends with R, AL, EN or AN, then NSMs.
            guard let last = classes.last(where: { $0 != .nsm }), [.r, .al, .en, .an].contains(last) else {
                return fail
            }
            // 4. Not both EN and AN.
            if classes.contains(.en) && classes.contains(.an) { return fail }
        case .l:
            // 5. Only L, EN, ES, CS, ET, ON, BN, NSM.
            let allowed: Set<BidiClass> = [.l, .en, .es, .cs, .et, .on, .bn, .nsm]
            guard classes.allSatisfy({ allowed.contains($0) }) else { return fail }
            // 6. Ends with L or EN, then NSMs.
            guard let last = classes.last(where: { $0 != .nsm }), last == .l || last == .en else { return fail }
        default:
            return fail
        }
        return nil
    }

    // MARK: - Forbidden code points

    /// WHATWG URL's forbidden domain code points (ASCII): C0 controls, space, `#`, `%`, `/`,
    /// `:`, `<`, `>`, `?`, `@`, `[`, `\`, `]`, `^`, `|`, DEL.
    static func isForbidden(_ b: UInt8) -> Bool {
        switch b {
        case 0x00...0x20, 0x7F, 0x23, 0x25, 0x2F, 0x3A, 0x3C, 0x3E, 0x3F, 0x40, 0x5B, 0x5C, 0x5D, 0x5E, 0x7C:
            return true
        default:
            return false
        }
    }

    private static func forbidden(_ b: UInt8) -> Failure {
        let shown = b > 0x20 && b < 0x7F ? "'\(Character(Unicode.Scalar(b)))'" : "the byte 0x\(Self.hex(UInt32(b)))"
        return Failure("the host has \(shown), which no host name may have")
    }

    static func hex(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    // MARK: - Tables

    enum Status {
        case valid
        case mapped(Range<Int>)
        case ignored
        case disallowed
    }

    /// Bidi_Class, the values RFC 5893 names (and `other`), as the table numbers them.
    enum BidiClass: UInt8 {
        case l = 0
        case r
        case al
        case an
        case en
        case es
        case cs
        case et
        case on
        case bn
        case nsm
        case other
    }

    /// Joining_Type, as the table numbers them.
    enum JoiningType: UInt8 {
        case u = 0
        case d
        case r
        case l
        case t
        case c
    }

    /// The record at `index` of a table of `width`-character records, as an integer.
    private static func record(_ table: StaticString, width: Int, at index: Int) -> UInt64 {
        let p = table.utf8Start + index * width
        var v: UInt64 = 0
        for k in (0..<width).reversed() { v = v << 6 | UInt64(p[k] &- 0x30) }
        return v
    }

    /// The last record whose first code point is at most `cp`.
    private static func lookup(_ table: StaticString, width: Int, count: Int, _ cp: UInt32) -> UInt64 {
        var lo = 0
        var hi = count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if Self.record(table, width: width, at: mid) & 0x1F_FFFF <= UInt64(cp) { lo = mid } else { hi = mid - 1 }
        }
        return Self.record(table, width: width, at: lo)
    }

    static func status(of cp: UInt32) -> Status {
        let r = Self.lookup(Self.mappingRecords, width: 8, count: Self.mappingCount, cp)
        switch (r >> 21) & 3 {
        case 0: return .valid
        case 1:
            let offset = Int((r >> 23) & 0x7FFFF)
            return .mapped(offset..<offset + Int(r >> 42))
        case 2: return .ignored
        default: return .disallowed
        }
    }

    private static func mapping(_ range: Range<Int>) -> String {
        let bytes = UnsafeBufferPointer(start: Self.mappings.utf8Start + range.lowerBound, count: range.count)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func bidiClass(of cp: UInt32) -> BidiClass {
        let r = Self.lookup(Self.bidiRecords, width: 5, count: Self.bidiCount, cp)
        return BidiClass(rawValue: UInt8((r >> 21) & 15)) ?? .other
    }

    static func joiningType(of cp: UInt32) -> JoiningType {
        let r = Self.lookup(Self.joiningRecords, width: 4, count: Self.joiningCount, cp)
        return JoiningType(rawValue: UInt8((r >> 21) & 7)) ?? .u
    }
}

/// RFC 3492 Punycode, the encoding of a label's code points in `xn--` labels.
public enum Punycode {
    private static let base = 36
    private static let tMin = 1
    private static let tMax = 26
    private static let skew = 38
    private static let damp = 700
    private static let initialBias = 72
    private static let initialN = 0x80

    private static func adapt(_ delta: Int, _ numPoints: Int, _ first: Bool) -> Int {
        var delta = first ? delta / Self.damp : delta / 2
        delta += delta / numPoints
        var k = 0
        while delta > ((Self.base - Self.tMin) * Self.tMax) / 2 {
            delta /= Self.base - Self.tMin
            k += Self.base
        }
        return k + (Self.base - Self.tMin + 1) * delta / (delta + Self.skew)
    }

    private static func digit(_ d: Int) -> UInt8 {
        d < 26 ? UInt8(0x61 + d) : UInt8(0x30 + d - 26)
    }

    /// The Punycode of `scalars` (without `xn--`), lower-case; nil when it would overflow.
    public static func encode(_ scalars: [Unicode.Scalar]) -> [UInt8]? {
        var out: [UInt8] = []
        let input = scalars.map { Int($0.value) }
        for c in input where c < 0x80 { out.append(UInt8(c)) }
        let b = out.count
        var h = b
        if b > 0 { out.append(0x2D) }
        var n = Self.initialN
        var delta = 0
        var bias = Self.initialBias
        while h < input.count {
            guard let m = input.filter({ $0 >= n }).min() else { return nil }
            let (step, o1) = (m - n).multipliedReportingOverflow(by: h + 1)
            guard !o1, delta <= Int(UInt32.max) - step else { return nil }
            delta += step
            n = m
            for c in input {
                if c < n {
                    delta += 1
                    guard delta <= Int(UInt32.max) else { return nil }
                }
                if c == n {
                    var q = delta
                    var k = Self.base
                    while true {
                        let t = k <= bias ? Self.tMin : (k >= bias + Self.tMax ? Self.tMax : k - bias)
                        if q < t { break }
                        out.append(Self.digit(t + (q - t) % (Self.base - t)))
                        q = (q - t) / (Self.base - t)
                        k += Self.base
                    }
                    out.append(Self.digit(q))
                    bias = Self.adapt(delta, h + 1, h == b)
                    delta = 0
                    h += 1
                }
            }
            delta += 1
            n += 1
        }
        return out
    }

    /// The code points of a Punycode string (without `xn--`); nil when it is not valid Punycode
    /// (a bad digit, an overflow, a code point that is not a Unicode scalar).
    public static func decode(_ input: [UInt8]) -> [Unicode.Scalar]? {
        var output: [UInt32] = []
        var rest = input[...]
        if let dash = input.lastIndex(of: 0x2D) {
            for c in input[..<dash] {
                guard c < 0x80 else { return nil }
                output.append(UInt32(c))
            }
            rest = input[(dash + 1)...]
            // A basic code point part needs a following extended part, or it would not be Punycode of non-ASCII.
        }
        var n = Self.initialN
        var i = 0
        var bias = Self.initialBias
        var index = rest.startIndex
        while index < rest.endIndex {
            let oldI = i
            var w = 1
            var k = Self.base
            while true {
                guard index < rest.endIndex else { return nil }
                let c = rest[index]
                index += 1
                let d: Int
                switch c {
                case 0x30...0x39: d = Int(c) - 0x30 + 26
                case 0x41...0x5A: d = Int(c) - 0x41
                case 0x61...0x7A: d = Int(c) - 0x61
                default: return nil
                }
                let (dw, o1) = d.multipliedReportingOverflow(by: w)
                guard !o1, i <= Int(UInt32.max) - dw else { return nil }
                i += dw
                let t = k <= bias ? Self.tMin : (k >= bias + Self.tMax ? Self.tMax : k - bias)
                if d < t { break }
                let (nw, o2) = w.multipliedReportingOverflow(by: Self.base - t)
                guard !o2, nw <= Int(UInt32.max) else { return nil }
                w = nw
                k += Self.base
            }
            let count = output.count + 1
            bias = Self.adapt(i - oldI, count, oldI == 0)
            guard n <= 0x10FFFF, i / count <= 0x10FFFF - n else { return nil }
            n += i / count
            i %= count
            guard output.count < 1024 else { return nil }
            output.insert(UInt32(n), at: i)
            i += 1
        }
        var scalars: [Unicode.Scalar] = []
        scalars.reserveCapacity(output.count)
        for v in output {
            guard let s = Unicode.Scalar(v) else { return nil }
            scalars.append(s)
        }
        return scalars
    }
}
