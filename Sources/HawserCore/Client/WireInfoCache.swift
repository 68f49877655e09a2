import HawserBase
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What ``HTTPClientRequest/wireInfo()`` derived from a URL's `scheme://authority` prefix, kept
/// for the next request to the same origin.
///
/// Checking an authority (port digits, forbidden bytes, user part, IDNA) is a pure function of
/// its bytes, and a client sends most of its requests to a few origins, so the checked result is
/// cached by the prefix's exact bytes: a hit costs a hash of ~25 bytes and one comparison under
/// an uncontended lock, where the check allocated the host's strings every time. Only URLs without
/// a base URL take this path (the prefix and the request target are then plain slices of the
/// URL's text); only successes are cached, so a bad URL is checked, and refused, every time.
///
/// 16 direct-mapped entries: a client spraying many origins evicts and re-checks, which costs what
/// the check always costs plus one string copy.
final class WireInfoCache: Sendable {
    struct Entry {
        var prefix: String
        var key: ConnectionKey
        var hostHeader: String
    }

    static let shared = WireInfoCache()
    private static let slots = 16

    private let entries = Mutex<[Entry?]>(Array(repeating: nil, count: WireInfoCache.slots))

    /// FNV-1a of the prefix's bytes, reduced to a slot.
    private static func slot(_ prefix: Substring.UTF8View) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in prefix { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(Self.slots))
    }

    func lookup(_ prefix: Substring) -> (key: ConnectionKey, hostHeader: String)? {
        let slot = Self.slot(prefix.utf8)
        return self.entries.withLock { entries in
            guard let entry = entries[slot], entry.prefix.utf8.elementsEqual(prefix.utf8) else { return nil }
            return (entry.key, entry.hostHeader)
        }
    }

    func store(_ prefix: Substring, key: ConnectionKey, hostHeader: String) {
        let slot = Self.slot(prefix.utf8)
        let entry = Entry(prefix: String(prefix), key: key, hostHeader: hostHeader)
        self.entries.withLock { $0[slot] = entry }
    }
}

extension HTTPClientRequest {
    /// The URL's text split into its `scheme://authority` prefix and the request target (path and
    /// query, as percent-encoded in the URL; "/" for an empty path), when the URL is absolute, has
    /// no base URL and an `http` or `https` scheme; nil otherwise (the general path handles it).
    static func splitForWire(_ url: URL) -> (prefix: Substring, target: String)? {
        guard url.baseURL == nil else { return nil }
        let text = url.absoluteString
        let bytes = text.utf8
        // "http://" or "https://", in any case.
        var i = bytes.startIndex
        var schemeLength = 0
        while i < bytes.endIndex, bytes[i] != UInt8(ascii: ":") {
            schemeLength += 1
            if schemeLength > 5 { return nil }
            i = bytes.index(after: i)
        }
        guard schemeLength == 4 || schemeLength == 5 else { return nil }
        // ASCII letters | 0x20 are their lower case.
        let expectedScheme: StaticString = "https"
        var j = bytes.startIndex
        for k in 0..<schemeLength {
            guard bytes[j] | 0x20 == expectedScheme.utf8Start[k] else { return nil }
            j = bytes.index(after: j)
        }
        for _ in 0..<3 {
            guard i < bytes.endIndex else { return nil }
            let expected = bytes[i] == UInt8(ascii: ":") ? UInt8(ascii: ":") : UInt8(ascii: "/")
            guard bytes[i] == expected else { return nil }
            i = bytes.index(after: i)
        }
        var end = i
        while end < bytes.endIndex {
            let b = bytes[end]
            if b == UInt8(ascii: "/") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") { break }
            end = bytes.index(after: end)
        }
        var targetEnd = end
        while targetEnd < bytes.endIndex, bytes[targetEnd] != UInt8(ascii: "#") {
            targetEnd = bytes.index(after: targetEnd)
        }
        let rest = text[end..<targetEnd]
        let target: String
        if rest.isEmpty {
            target = "/"
        } else if rest.utf8.first == UInt8(ascii: "?") {
            target = "/" + rest
        } else {
            target = String(rest)
        }
        return (text[text.startIndex..<end], target)
    }
}
