// Which domains are public suffixes, for refusing cookies set on them (RFC 6265 §5.3 step 5).
// The rules are the whole Public Suffix List, compiled in: PublicSuffixData.swift, generated
// by scripts/gen-public-suffixes.py.
import HawserPosix

/// The Public Suffix List (https://publicsuffix.org): the domains under which anyone can
/// register names, such as `com`, `co.uk`, `nom.es`, `*.ck` or `github.io`.
///
/// Every rule of the list is built in — the ICANN section and the PRIVATE one (shared hosting
/// such as `github.io`), as browsers and libpsl use them for cookies — with the list's
/// algorithm: the rule matching the most labels wins, a wildcard (`*.kawasaki.jp`) matches any
/// one label, an exception (`!city.kawasaki.jp`) beats every other rule and makes its parent
/// the suffix, and a name no rule matches has its last label as suffix (the implicit `*`
/// rule), so every top-level domain, listed or not, is a public suffix. As browsers, libpsl and
/// the list's own linter read it, a wildcard lists its parent too (`kawasaki.jp`).
/// Internationalized rules match in both spellings: Unicode (`公司.cn`) and A-labels
/// (`xn--55qx5d.cn`).
///
/// Names are expected canonical: lower-case (ASCII letters are folded anyway), no leading or
/// trailing dot. The list's version is named at the top of `PublicSuffixData.swift`.
public enum PublicSuffixes {
    /// Whether `domain` (canonical: lower-case, no leading dot) is a public suffix.
    ///
    /// An IP address literal never is; the empty name is; a name with an empty label
    /// (`a..com`) is not (it names no domain).
    public static func isPublicSuffix(_ domain: String) -> Bool {
        if domain.isEmpty { return true }
        var domain = domain
        return domain.withUTF8 { name in
            if name.contains(UInt8(ascii: ":")) { return false }  // an IPv6 literal
            return self.suffixStart(name) == 0
        }
    }

    /// The public suffix of `domain`: the labels its prevailing rule matches (the whole name
    /// when it is a public suffix itself). Nil for an empty name, a name with an empty label
    /// and an IP address literal.
    ///
    /// `publicSuffix(of: "www.example.co.uk")` is `co.uk`; of `a.b.c.kobe.jp` (rule
    /// `*.kobe.jp`) it is `c.kobe.jp`; of `www.city.kobe.jp` (rule `!city.kobe.jp`), `kobe.jp`.
    public static func publicSuffix(of domain: String) -> String? {
        guard let start = self.suffixStartIfDomainName(domain) else { return nil }
        return String(decoding: domain.utf8.dropFirst(start), as: UTF8.self)
    }

    /// The registrable domain of `domain`: its public suffix and one more label, the part a
    /// registrant controls (`example.co.uk` for `www.example.co.uk`). Nil when `domain` is a
    /// public suffix itself, and for the names ``publicSuffix(of:)`` gives nil for.
    public static func registrableDomain(of domain: String) -> String? {
        guard let start = self.suffixStartIfDomainName(domain), start > 0 else { return nil }
        let head = domain.utf8.prefix(start - 1)  // up to the dot before the suffix
        let labelStart = head.lastIndex(of: UInt8(ascii: ".")).map { head.index(after: $0) } ?? head.startIndex
        return String(decoding: domain.utf8[labelStart...], as: UTF8.self)
    }

    /// The offset of `domain`'s public suffix in its UTF-8 bytes, or nil when `domain` is not
    /// a domain name (empty, an empty label, an IP address literal).
    static func suffixStartIfDomainName(_ domain: String) -> Int? {
        if domain.isEmpty || hasEmptyLabel(domain.utf8) || CookieRules.isIPAddress(domain) { return nil }
        var domain = domain
        return domain.withUTF8 { self.suffixStart($0) }
    }

    /// The offset in `name` at which its public suffix starts, by the list's algorithm.
    /// Reads labels right to left, walking the trie as long as a node matches; the implicit
    /// `*` rule is the root's wildcard. The suffix never reaches past an empty label: it is
    /// what matched to the right of it (callers that care reject such names first).
    static func suffixStart(_ name: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = name.baseAddress, !name.isEmpty else { return 0 }
        let records = self.records.utf8Start
        let labels = self.labels.utf8Start
        var suffix = name.count  // no rule matched yet
        var parentWildcard = true  // the implicit "*" rule
        var lo = 0
        var hi = self.rootCount
        var end = name.count
        while true {
            var start = end
            while start > 0 && base[start - 1] != UInt8(ascii: ".") { start -= 1 }
            if start == end { break }  // an empty label matches no rule, not even a wildcard
            if parentWildcard { suffix = start }
            guard let node = self.find(base + start, end - start, lo, hi, records, labels) else { break }
            let flags = self.flags(node, records)
            if flags & 2 != 0 {  // exception: the suffix is its parent
                return min(end + 1, name.count)
            }
            // A rule; or the parent of a wildcard, which browsers, libpsl and the list's own
            // linter take as listed too (`*.kawasaki.jp` makes kawasaki.jp a public suffix).
            if flags & 5 != 0 { suffix = start }
            parentWildcard = flags & 4 != 0
            lo = self.firstChild(node, records)
            hi = self.firstChild(node + 1, records)
            if start == 0 { break }
            end = start - 1
        }
        return suffix
    }

    // MARK: The records (encoding: scripts/gen-public-suffixes.py)

    /// A trie node, decoded: its label, its flags (1 rule, 2 exception, 4 wildcard child is a
    /// rule) and its children's records, `firstChild..<endChild`.
    struct Node {
        var label: String
        var flags: Int
        var firstChild: Int
        var endChild: Int
    }

    /// Record `i` (`0..<nodeCount`), decoded; the table's tests walk it with this.
    static func node(_ i: Int) -> Node {
        precondition(i >= 0 && i < self.nodeCount)
        let records = self.records.utf8Start
        let (offset, count) = self.label(i, records)
        precondition(offset + count <= self.labels.utf8CodeUnitCount)
        let bytes = UnsafeBufferPointer(start: self.labels.utf8Start + offset, count: count)
        return Node(
            label: String(decoding: bytes, as: UTF8.self),
            flags: self.flags(i, records),
            firstChild: self.firstChild(i, records),
            endChild: self.firstChild(i + 1, records)
        )
    }

    /// Bits `from ..< from + count` of record `i`, from its characters (6 bits each).
    @inline(__always)
    private static func bits(_ i: Int, _ from: Int, _ count: Int, _ records: UnsafePointer<UInt8>) -> Int {
        let p = records + i * self.recordSize
        var value = 0
        var k = from / 6
        var shift = k * 6
        while shift < from + count {
            value |= Int(p[k] &- 0x30) << shift
            k += 1
            shift += 6
        }
        return (value >> from) & ((1 << count) - 1)
    }

    @inline(__always)
    private static func flags(_ i: Int, _ records: UnsafePointer<UInt8>) -> Int { self.bits(i, 23, 3, records) }

    @inline(__always)
    private static func firstChild(_ i: Int, _ records: UnsafePointer<UInt8>) -> Int { self.bits(i, 26, 16, records) }

    /// Record `i`'s label: offset and length in `labels`.
    @inline(__always)
    private static func label(_ i: Int, _ records: UnsafePointer<UInt8>) -> (offset: Int, count: Int) {
        let v = self.bits(i, 0, 23, records)
        return (v & 0x1_FFFF, v >> 17)
    }

    /// The record among `lo..<hi` (siblings, sorted by label bytes) whose label is the `count`
    /// bytes at `key`, ASCII letters folded to lower case.
    private static func find(
        _ key: UnsafePointer<UInt8>,
        _ count: Int,
        _ lo: Int,
        _ hi: Int,
        _ records: UnsafePointer<UInt8>,
        _ labels: UnsafePointer<UInt8>
    ) -> Int? {
        var lo = lo
        var hi = hi
        while lo < hi {
            let mid = (lo + hi) / 2
            let (offset, length) = self.label(mid, records)
            let order = self.compare(key, count, labels + offset, length)
            if order == 0 { return mid }
            if order < 0 { hi = mid } else { lo = mid + 1 }
        }
        return nil
    }

    @inline(__always)
    private static func compare(
        _ a: UnsafePointer<UInt8>,
        _ aCount: Int,
        _ b: UnsafePointer<UInt8>,
        _ bCount: Int
    ) -> Int {
        let n = min(aCount, bCount)
        var i = 0
        while i < n {
            let x = asciiLowercase(a[i])
            let y = b[i]
            if x != y { return x < y ? -1 : 1 }
            i += 1
        }
        return aCount - bCount
    }
}
