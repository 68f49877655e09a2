// The cache's stored entries (a response with its Vary selection) and the bytes-bounded memory
// LRU that holds them.

import HawserHTTP1

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Stored entries

/// The selecting header of a Vary'd response: a lower-cased name and the request's
/// normalized value (nil when the request had none).
struct VaryField: Sendable, Hashable {
    var name: String
    var value: String?
}

/// A stored response with what lookups need, derived once when stored or updated. A class
/// with constant fields, so that a lookup hands it out with one retain instead of copying
/// a dozen references.
final class CacheEntry: Sendable {
    let key: String
    /// The response as stored, without an `Age` field (its value is folded into
    /// `correctedInitialAge`; lookups add the current age).
    let response: CachedResponse
    let vary: [VaryField]
    let lifetime: Double
    let correctedInitialAge: Double
    let responseSeconds: Double
    /// Response `no-cache` (unqualified or qualified: both mean validate before use here).
    let noCache: Bool
    let mustRevalidate: Bool
    let etag: String?
    let lastModified: String?
    let size: Int

    /// An entry for `response`; `correctedInitialAge` is given when reloaded from disk
    /// (the stored head has no Age field any more), else computed.
    init(key: String, response: CachedResponse, vary: [VaryField], correctedInitialAge: Double? = nil) {
        self.key = key
        self.vary = vary
        let headers = response.head.headers
        let cc = CacheControl(headers)
        self.responseSeconds = finiteSeconds(response.responseTime)
        self.lifetime =
            freshnessLifetime(headers, cc, status: response.head.status, responseTime: self.responseSeconds).0
        self.correctedInitialAge =
            correctedInitialAge
            ?? computeCorrectedInitialAge(
                headers,
                requestTime: finiteSeconds(response.requestTime),
                responseTime: self.responseSeconds
            )
        self.noCache = cc.noCache
        self.mustRevalidate = cc.mustRevalidate
        self.etag = headers["ETag"]
        self.lastModified = headers["Last-Modified"]
        var stored = response
        if headers.contains(name: "Age") { stored.head.headers.remove(name: "Age") }
        self.response = stored
        var size = 256 + key.utf8.count + response.body.count + response.head.reasonPhrase.utf8.count
        for field in stored.head.headers { size += field.name.utf8.count + field.value.utf8.count + 16 }
        for v in vary { size += v.name.utf8.count + (v.value?.utf8.count ?? 0) }
        for (k, v) in response.userInfo { size += k.utf8.count + v.utf8.count }
        self.size = size
    }

    func matches(_ request: HTTPHeaders) -> Bool {
        for field in self.vary where field.value != selectingValue(request, field.name) { return false }
        return true
    }
}

/// The request's value for a Vary'd field: all lines joined, list elements trimmed of OWS.
func selectingValue(_ headers: HTTPHeaders, _ name: String) -> String? {
    let values = headers.values(for: name)
    if values.isEmpty { return nil }
    return values.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false)
        .map { $0.trimmingOWS() }.joined(separator: ",")
}

/// The Vary field names of `headers`, lower-cased; nil for `Vary: *`.
func varyNames(_ headers: HTTPHeaders) -> [String]? {
    var names: [String] = []
    for value in headers.values(for: "Vary") {
        for item in value.split(separator: ",") {
            let name = item.trimmingOWS().lowercased()
            if name == "*" { return nil }
            if !name.isEmpty && !names.contains(name) { names.append(name) }
        }
    }
    return names
}

/// The cache key of `url`: its absolute string without the fragment, with the scheme and
/// host lower-cased and a default port dropped (so `HTTP://Example.org:80/a` and
/// `http://example.org/a` share entries). The common, already-normal URL costs no rebuild.
func cacheKey(_ url: URL) -> String {
    let s = url.absoluteString
    let withoutFragment = s.utf8.firstIndex(of: 0x23).map { String(s[..<$0]) } ?? s
    guard let scheme = url.scheme, let host = url.host(percentEncoded: true) else { return withoutFragment }
    let lowerScheme = scheme.lowercased()
    let defaultPort = lowerScheme == "https" ? 443 : lowerScheme == "http" ? 80 : nil
    let needsRebuild =
        scheme.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } || host.utf8.contains { $0 >= 0x41 && $0 <= 0x5A }
        || (url.port != nil && url.port == defaultPort)
    guard needsRebuild, var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
        return withoutFragment
    }
    components.scheme = lowerScheme
    components.percentEncodedHost = components.percentEncodedHost?.lowercased()
    if components.port == defaultPort { components.port = nil }
    components.fragment = nil
    return components.string ?? withoutFragment
}

/// Header fields a cache does not store (RFC 9111 §3.1): hop-by-hop fields, the fields
/// named by Connection, and the proxy authentication fields.
func storableHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
    var excluded: Set<String> = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authentication-info", "proxy-authorization",
    ]
    for value in headers.values(for: "Connection") {
        for item in value.split(separator: ",") { excluded.insert(item.trimmingOWS().lowercased()) }
    }
    var needsFilter = false
    for field in headers where excluded.contains(field.name.lowercased()) {
        needsFilter = true
        break
    }
    guard needsFilter else { return headers }
    return HTTPHeaders(headers.filter { !excluded.contains($0.name.lowercased()) })
}

// MARK: - Memory store

/// A byte-bounded LRU of entries, several variants per key. Entries live in an array and
/// are linked by index: touching, inserting and evicting are O(1) (plus the key's variants).
struct MemoryStore {
    let capacity: Int
    private(set) var bytes = 0
    private var byKey: [String: [Int]] = [:]
    private var entries: [CacheEntry?] = []
    private var prev: [Int] = []
    private var next: [Int] = []
    private var free: [Int] = []
    private var newest = -1
    private var oldest = -1

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var count: Int { self.entries.count - self.free.count }

    /// The index of the entry for `key` whose Vary'd headers match `request`.
    func find(_ key: String, _ request: HTTPHeaders) -> Int? {
        guard let list = self.byKey[key] else { return nil }
        for index in list where self.entries[index]!.matches(request) { return index }
        return nil
    }

    func entry(_ index: Int) -> CacheEntry { self.entries[index]! }

    func indices(for key: String) -> [Int] { self.byKey[key] ?? [] }

    mutating func touch(_ index: Int) {
        guard index != self.newest else { return }
        self.unlink(index)
        self.linkNewest(index)
    }

    /// Inserts (replacing the variant with the same Vary'd values); evicts the least
    /// recently used entries to stay within capacity.
    mutating func insert(_ entry: CacheEntry) {
        if let same = self.byKey[entry.key]?.first(where: { self.entries[$0]!.vary == entry.vary }) {
            self.remove(same)
        }
        while self.bytes + entry.size > self.capacity && self.oldest >= 0 { self.remove(self.oldest) }
        let index: Int
        if let reused = self.free.popLast() {
            index = reused
            self.entries[index] = entry
        } else {
            index = self.entries.count
            self.entries.append(entry)
            self.prev.append(-1)
            self.next.append(-1)
        }
        self.linkNewest(index)
        self.byKey[entry.key, default: []].insert(index, at: 0)
        self.bytes += entry.size
    }

    mutating func remove(_ index: Int) {
        guard let entry = self.entries[index] else { return }
        self.unlink(index)
        self.bytes -= entry.size
        if var list = self.byKey[entry.key] {
            list.removeAll { $0 == index }
            self.byKey[entry.key] = list.isEmpty ? nil : list
        }
        self.entries[index] = nil
        self.free.append(index)
    }

    mutating func removeKey(_ key: String) {
        for index in self.byKey[key] ?? [] { self.remove(index) }
    }

    mutating func removeAll() {
        self = MemoryStore(capacity: self.capacity)
    }

    private mutating func unlink(_ index: Int) {
        let p = self.prev[index]
        let n = self.next[index]
        if p >= 0 { self.next[p] = n } else { self.newest = n }
        if n >= 0 { self.prev[n] = p } else { self.oldest = p }
        self.prev[index] = -1
        self.next[index] = -1
    }

    private mutating func linkNewest(_ index: Int) {
        self.prev[index] = -1
        self.next[index] = self.newest
        if self.newest >= 0 { self.prev[self.newest] = index }
        self.newest = index
        if self.oldest < 0 { self.oldest = index }
    }
}
