// The Cookie field with its caps, and the jar's store of cookies by domain (guarded by the
// jar's mutex).

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - The Cookie field and its caps

/// The `Cookie` field a jar builds for one request (``CookieJar/cookieHeader(for:now:)``).
public struct CookieHeader: Sendable, Hashable {
    /// The field value, byte for byte: `name=value` pairs joined by `; `, in RFC 6265's order
    /// (longer paths first, then older cookies first). Empty when no cookie fit the caps.
    public var value: [UInt8]
    /// How many cookies ``value`` holds.
    public var cookieCount: Int
    /// How many matching cookies were left out because the field reached a cap: the first
    /// that would have passed ``maxBytes`` or ``maxCount``, and every one after it.
    public var omittedCount: Int
    /// The byte cap the field was built under (the jar's ``CookieJar/maxCookieHeaderBytes``).
    public var maxBytes: Int
    /// The count cap the field was built under (the jar's ``CookieJar/maxCookiesPerRequest``).
    public var maxCount: Int

    /// A field value and what was left out of it (the jar makes these; tests build them to compare).
    public init(value: [UInt8], cookieCount: Int, omittedCount: Int, maxBytes: Int, maxCount: Int) {
        self.value = value
        self.cookieCount = cookieCount
        self.omittedCount = omittedCount
        self.maxBytes = maxBytes
        self.maxCount = maxCount
    }

    /// The bytes of the field line `Cookie: value`, without CRLF (what ``maxBytes`` limits).
    public var lineBytes: Int { Self.linePrefixBytes + self.value.count }

    /// `Cookie: `.
    static let linePrefixBytes = 8
}

/// The caps of one `Cookie` field.
struct CookieHeaderCaps: Sendable {
    var maxBytes: Int
    var maxCount: Int

    /// How many of `sorted` (in sending order) go into the field: the longest prefix whose
    /// line (`Cookie: ` and `name=value` pairs joined by `; `) stays within both caps.
    func fitting(_ sorted: [Cookie]) -> Int {
        var line = CookieHeader.linePrefixBytes
        for (i, c) in sorted.enumerated() {
            if i >= self.maxCount { return i }
            line += (i == 0 ? 0 : 2) + c.nameBytes.count + 1 + c.valueBytes.count
            if line > self.maxBytes { return i }
        }
        return sorted.count
    }
}

extension Cookie {
    /// Whether the name and value can be written in a field value: no control byte or DEL, no
    /// blank at the pair's edges. Cookies from `Set-Cookie` and cookie files always can; one
    /// made by hand might not, and is then never sent.
    var isSendable: Bool {
        func clean(_ b: [UInt8]) -> Bool { !b.contains { $0 < 0x20 || $0 == 0x7F } }
        let blank: (UInt8?) -> Bool = { $0 == 0x20 }
        return clean(self.nameBytes) && clean(self.valueBytes) && !self.nameBytes.isEmpty
            && !blank(self.nameBytes.first) && !blank(self.valueBytes.last)
    }
}

// MARK: - The store (guarded by the jar's mutex)

struct CookieStore: ~Copyable {
    /// Cookies by their domain; lookups walk the request host's parent domains.
    var byDomain: [String: [Cookie]] = [:]
    var count = 0
    /// Ordering clock for creation and access (dates tie too easily).
    var tick: UInt64 = 0

    mutating func nextTick() -> UInt64 {
        self.tick += 1
        return self.tick
    }

    func all() -> [Cookie] {
        self.byDomain.values.joined().sorted { $0.creationIndex < $1.creationIndex }
    }

    /// RFC 6265bis §5.7 step 16 (insecure cookie would shadow a Secure one).
    func wouldShadowSecure(_ new: Cookie) -> Bool {
        for (_, list) in self.byDomain {
            for old in list
            where old.isSecure && old.nameBytes == new.nameBytes
                && (CookieRules.domainMatches(old.domain, new.domain)
                    || CookieRules.domainMatches(new.domain, old.domain))
                && CookieRules.pathMatches(new.path, old.path)
            {
                return true
            }
        }
        return false
    }

    mutating func remove(_ key: CookieKey) -> Cookie? {
        guard var list = self.byDomain[key.domain], let i = list.firstIndex(where: { $0.key == key }) else {
            return nil
        }
        let old = list.remove(at: i)
        self.byDomain[key.domain] = list.isEmpty ? nil : list
        self.count -= 1
        return old
    }

    mutating func removeAll(where predicate: (Cookie) -> Bool) {
        for (domain, list) in self.byDomain {
            let kept = list.filter { !predicate($0) }
            if kept.count != list.count {
                self.count -= list.count - kept.count
                self.byDomain[domain] = kept.isEmpty ? nil : kept
            }
        }
    }

    /// §5.3 steps 11–12: replace (keeping the creation time), delete if expired, evict.
    mutating func insert(_ cookie: Cookie, now: Date, limits: (perDomain: Int, total: Int)) -> Cookie {
        var c = cookie
        if let old = self.remove(c.key) {
            c.creationTime = old.creationTime
            c.creationIndex = old.creationIndex
        } else {
            c.creationIndex = self.nextTick()
        }
        if c.isExpired(at: now) { return c }
        c.accessIndex = self.nextTick()
        self.byDomain[c.domain, default: []].append(c)
        self.count += 1
        self.evict(domain: c.domain, now: now, limits: limits)
        return c
    }

    /// Past a limit: expired cookies first, then the least recently used (§5.3 step 12).
    private mutating func evict(domain: String, now: Date, limits: (perDomain: Int, total: Int)) {
        if let list = self.byDomain[domain], list.count > limits.perDomain {
            var kept = list.filter { !$0.isExpired(at: now) }
            if kept.count > limits.perDomain {
                kept.sort { $0.accessIndex > $1.accessIndex }
                kept.removeLast(kept.count - limits.perDomain)
            }
            self.count -= list.count - kept.count
            self.byDomain[domain] = kept.isEmpty ? nil : kept
        }
        if self.count > limits.total {
            self.removeAll { $0.isExpired(at: now) }
            while self.count > limits.total {
                var oldest: (domain: String, index: Int, access: UInt64)?
                for (d, list) in self.byDomain {
                    for (i, c) in list.enumerated() where oldest == nil || c.accessIndex < oldest!.access {
                        oldest = (d, i, c.accessIndex)
                    }
                }
                guard let o = oldest else { break }
                self.byDomain[o.domain]!.remove(at: o.index)
                if self.byDomain[o.domain]!.isEmpty { self.byDomain[o.domain] = nil }
                self.count -= 1
            }
        }
    }

    /// §5.4: the cookies for `url`, longer paths first, then earlier created, as many as fit
    /// `caps` (the first that does not fit and every later one are counted as omitted);
    /// expired ones met on the way are removed.
    mutating func matching(
        _ url: URL,
        now: Date,
        touch: Bool,
        caps: CookieHeaderCaps
    ) -> (
        cookies: [Cookie], omitted: Int
    ) {
        guard let host = CookieRules.canonicalHost(url) else { return ([], 0) }
        let secure = CookieRules.isSecureOrigin(url)
        let path = CookieRules.requestPath(url)
        var candidates = [host]
        if !CookieRules.isIPAddress(host) {
            var rest = host.utf8[...]
            while let dot = rest.firstIndex(of: UInt8(ascii: ".")) {
                rest = rest[rest.index(after: dot)...]
                if !rest.isEmpty { candidates.append(String(decoding: rest, as: UTF8.self)) }
            }
        }
        var out: [Cookie] = []
        var sawExpired = false
        for domain in candidates {
            guard let list = self.byDomain[domain] else { continue }
            for c in list {
                if c.isExpired(at: now) {
                    sawExpired = true
                    continue
                }
                if c.isHostOnly ? c.domain != host : !CookieRules.domainMatches(host, c.domain) { continue }
                if c.isSecure && !secure { continue }
                if !CookieRules.pathMatches(path, c.path) { continue }
                if !c.isSendable { continue }
                out.append(c)
            }
        }
        if sawExpired { self.removeAll { $0.isExpired(at: now) } }
        out.sort { a, b in
            a.path.utf8.count != b.path.utf8.count
                ? a.path.utf8.count > b.path.utf8.count : a.creationIndex < b.creationIndex
        }
        let fitting = caps.fitting(out)
        let omitted = out.count - fitting
        if omitted > 0 { out.removeLast(omitted) }
        if touch {
            for i in out.indices {
                out[i].lastAccessTime = now
                out[i].accessIndex = self.nextTick()
                let key = out[i].key
                if let j = self.byDomain[key.domain]?.firstIndex(where: { $0.key == key }) {
                    self.byDomain[key.domain]![j].lastAccessTime = now
                    self.byDomain[key.domain]![j].accessIndex = out[i].accessIndex
                }
            }
        }
        return (out, omitted)
    }
}
