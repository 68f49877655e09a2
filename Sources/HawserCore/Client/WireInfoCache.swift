import HawserBase
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
        /// The prefix's bytes.
        var prefix: [UInt8]
        var key: ConnectionKey
        var hostHeader: String
    }

    static let shared = WireInfoCache()
    private static let slots = 16

    private let entries = Mutex<[Entry?]>(Array(repeating: nil, count: WireInfoCache.slots))

    /// FNV-1a of the prefix's bytes, reduced to a slot.
    private static func slot(_ prefix: UnsafeBufferPointer<UInt8>) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in prefix { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(Self.slots))
    }

    func lookup(_ prefix: Substring) -> (key: ConnectionKey, hostHeader: String)? {
        var prefix = prefix
        return prefix.withUTF8 { bytes in
            let slot = Self.slot(bytes)
            return self.entries.withLock { entries in
                guard let entry = entries[slot], entry.prefix.count == bytes.count,
                    entry.prefix.withUnsafeBufferPointer({
                        memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0
                    })
                else { return nil }
                return (entry.key, entry.hostHeader)
            }
        }
    }

    func store(_ prefix: Substring, key: ConnectionKey, hostHeader: String) {
        let bytes = Array(prefix.utf8)
        let slot = bytes.withUnsafeBufferPointer { Self.slot($0) }
        let entry = Entry(prefix: bytes, key: key, hostHeader: hostHeader)
        self.entries.withLock { $0[slot] = entry }
    }
}

extension HTTPClientRequest {
    /// The URL's text split into its `scheme://authority` prefix and the request target (path and
    /// query, as percent-encoded in the URL; "/" for an empty path), when the URL is absolute, has
    /// no base URL and an `http` or `https` scheme; nil otherwise (the general path handles it).
    static func splitForWire(_ url: URL) -> (prefix: Substring, target: String)? {
        guard url.baseURL == nil else { return nil }
        var text = url.absoluteString
        // The scan reads the text's contiguous UTF-8 bytes (String's index-by-index view checks
        // its representation at every step).
        let split: (prefixEnd: Int, target: String)? = text.withUTF8 { bytes in
            guard let (end, targetEnd) = Self.wireBounds(bytes) else { return nil }
            let rest = UnsafeBufferPointer(rebasing: bytes[end..<targetEnd])
            let target: String
            if rest.isEmpty {
                target = "/"
            } else if rest[0] == UInt8(ascii: "?") {
                target = "/" + String(decoding: rest, as: UTF8.self)
            } else {
                target = String(decoding: rest, as: UTF8.self)
            }
            return (end, target)
        }
        guard let split else { return nil }
        let utf8 = text.utf8
        return (Substring(utf8[utf8.startIndex..<utf8.index(utf8.startIndex, offsetBy: split.prefixEnd)]), split.target)
    }

    /// Where the `scheme://authority` prefix of an `http`/`https` URL's bytes ends and where its
    /// request target ends (before a fragment); nil for any other scheme or shape.
    private static func wireBounds(_ bytes: UnsafeBufferPointer<UInt8>) -> (prefixEnd: Int, targetEnd: Int)? {
        var i = 0
        while i < bytes.count, bytes[i] != UInt8(ascii: ":") {
            i += 1
            if i > 5 { return nil }
        }
        guard i == 4 || i == 5 else { return nil }
        // ASCII letters | 0x20 are their lower case.
        let expectedScheme: StaticString = "https"
        for k in 0..<i where bytes[k] | 0x20 != expectedScheme.utf8Start[k] { return nil }
        // "://"
        guard i + 3 <= bytes.count, bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"),
            bytes[i + 2] == UInt8(ascii: "/")
        else { return nil }
        var end = i + 3
        while end < bytes.count {
            let b = bytes[end]
            if b == UInt8(ascii: "/") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") { break }
            end += 1
        }
        var targetEnd = end
        while targetEnd < bytes.count, bytes[targetEnd] != UInt8(ascii: "#") { targetEnd += 1 }
        return (end, targetEnd)
    }
}
