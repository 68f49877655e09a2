// HTTPCache.swift: a private HTTP cache (RFC 9111) as an engine component.
//
//   storability (§3) → CachedResponse → memory LRU (bytes-bounded) + optional disk store
//   lookup: key (URL without fragment) → variants (Vary, §4.1) → freshness (§4.2) →
//           .fresh / .stale(+ conditional headers, §4.3.1) / .miss
//   304 → updateAfterNotModified (§4.3.4);  unsafe method → invalidate (§4.4)
//
// The request path (RequestTask) decides when to call what; nothing here does network IO.
// CachedResponse.swift has the values and the freshness arithmetic, CacheMemoryStore.swift the
// stored entries and the memory LRU, HTTPCacheDiskStore.swift the disk store.

import HawserBase
import HawserHTTP1
import HawserPosix
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

// MARK: - The cache

/// A private HTTP cache (RFC 9111): an in-memory LRU bounded by bytes, and optionally a
/// directory of files bounded by bytes (one file per stored response, written atomically;
/// the index is rebuilt from the files when the cache is opened; unreadable files are
/// removed). Thread-safe. A fresh hit from memory takes one lock, a dictionary lookup and
/// a copy of the header fields (to set `Age`).
///
/// File IO never runs on the calling thread's behalf inside the cache's locks: every disk
/// operation runs on ``ioPool``, one at a time per URL, in the order asked (a lookup asked
/// after a store of the same URL completed sees it; an entry being written is not served
/// until its file is complete and renamed into place). The methods that return a value
/// (``lookup(_:policy:now:)``, ``store(_:for:)``…) wait for their disk operation and so block
/// the calling thread: call them off event loops. The engine uses the forms that take an
/// `EventLoop` and complete there, which never block it.
public final class HTTPCache: Sendable {
    /// Bytes the memory store may hold.
    public let memoryCapacity: Int
    /// Bytes the disk store may hold (0 without a directory).
    public let diskCapacity: Int
    /// The disk store's directory, if any.
    public let directory: String?

    /// A response larger than `capacity / maximumEntryDivisor` of a store is not kept in it.
    public static let maximumEntryDivisor = 10

    /// The largest body any of this cache's stores would keep (callers stop recording past it).
    public var maximumEntrySize: Int {
        max(self.memoryCapacity, self.diskCapacity) / Self.maximumEntryDivisor
    }
    /// Vary'd variants kept per URL; storing one more drops the least recently stored.
    public static let maximumVariantsPerKey = 8

    private let memory: Mutex<MemoryStore>
    private let disk: DiskStore?
    /// The threads the disk store's file IO runs on.
    public let ioPool: BlockingIOPool

    /// A memory-only cache of `memoryCapacity` bytes.
    public init(memoryCapacity: Int) {
        self.memoryCapacity = max(0, memoryCapacity)
        self.diskCapacity = 0
        self.directory = nil
        self.memory = Mutex(MemoryStore(capacity: memoryCapacity))
        self.disk = nil
        self.ioPool = .shared
    }

    /// A cache of `memoryCapacity` bytes in memory and, with a `directory`, `diskCapacity`
    /// bytes on disk. The directory is created if needed and its files are indexed (files
    /// that are not valid entries are removed). Throws `ioError` when the directory cannot
    /// be created or read. Opening reads the directory on the calling thread (once, before any
    /// request uses the cache); afterwards the disk is used only from `ioPool` (by default
    /// `BlockingIOPool.shared`).
    public init(
        memoryCapacity: Int,
        diskCapacity: Int,
        directory: String?,
        ioPool: BlockingIOPool = .shared
    ) throws(HawserError) {
        self.ioPool = ioPool
        self.memoryCapacity = max(0, memoryCapacity)
        self.memory = Mutex(MemoryStore(capacity: memoryCapacity))
        if let directory, diskCapacity > 0 {
            self.disk = try DiskStore(directory: directory, capacity: diskCapacity)
            self.diskCapacity = diskCapacity
            self.directory = directory
        } else {
            self.disk = nil
            self.diskCapacity = 0
            self.directory = nil
        }
    }

    /// Bytes held in memory (bodies, header fields and bookkeeping).
    public var currentMemoryUsage: Int { self.memory.withLock { $0.bytes } }
    /// Bytes held on disk (file sizes).
    public var currentDiskUsage: Int { self.disk?.usage ?? 0 }

    // MARK: Storability (§3)

    /// Whether `response` to `request` may be stored by a private cache (RFC 9111 §3):
    /// GET; a final status other than 206 and 304; no `no-store` in the request or the
    /// response (unless `must-understand` with an understood status); with `Authorization`
    /// in the request only when the response has `public`, `must-revalidate` or `s-maxage`;
    /// a heuristically cacheable status, or explicit freshness (`max-age`, `Expires`), or
    /// `public` / `private`; and no `Vary: *` (such a response can never be selected).
    public static func isStorable(_ response: HTTPResponseHead, for request: HTTPClientRequest) -> Bool {
        guard request.method == .get else { return false }
        let status = response.status
        guard status >= 200 && status <= 599 && status != 206 && status != 304 else { return false }
        let cc = CacheControl(response.headers)
        // Every status left is one this cache understands, so `must-understand` lifts
        // `no-store` (RFC 9111 §5.2.2.3).
        if cc.noStore && !cc.mustUnderstand { return false }
        if CacheControl(request.headers).noStore { return false }
        if request.headers.contains(name: "Authorization")
            && !(cc.isPublic || cc.mustRevalidate || cc.sharedMaxAge != nil)
        {
            return false
        }
        if varyNames(response.headers) == nil { return false }
        return isHeuristicallyCacheable(status) || cc.maxAge != nil || response.headers.contains(name: "Expires")
            || cc.isPublic || cc.isPrivate
    }

    /// The value to store for `response`, or nil when it may not be stored (see
    /// ``isStorable(_:for:)``). Hop-by-hop header fields are dropped. A will-cache hook can
    /// change the result before ``store(_:for:)``.
    public static func cacheableResponse(
        _ response: HTTPResponseHead,
        body: [UInt8],
        for request: HTTPClientRequest,
        requestTime: Date,
        responseTime: Date
    ) -> CachedResponse? {
        guard self.isStorable(response, for: request) else { return nil }
        var head = response
        head.headers = storableHeaders(response.headers)
        return CachedResponse(head: head, body: body, requestTime: requestTime, responseTime: responseTime)
    }

    // MARK: Storing

    /// Stores `response` to `request` if it may be stored; returns whether it was kept.
    @discardableResult
    public func store(
        _ response: HTTPResponseHead,
        body: [UInt8],
        for request: HTTPClientRequest,
        requestTime: Date,
        responseTime: Date
    ) -> Bool {
        guard
            let cached = Self.cacheableResponse(
                response,
                body: body,
                for: request,
                requestTime: requestTime,
                responseTime: responseTime
            )
        else { return false }
        return self.store(cached, for: request)
    }

    /// Stores `cached` (typically from ``cacheableResponse(_:body:for:requestTime:responseTime:)``,
    /// possibly changed by a hook) for `request`, replacing the variant with the same Vary'd
    /// request headers. Returns whether it was kept in memory or on disk: not when its
    /// storage policy is `.notAllowed`, when it is no longer storable, or when it is larger
    /// than a tenth of every store.
    @discardableResult
    public func store(_ cached: CachedResponse, for request: HTTPClientRequest) -> Bool {
        guard cached.storagePolicy != .notAllowed, Self.isStorable(cached.head, for: request),
            let names = varyNames(cached.head.headers)
        else { return false }
        let vary = names.map { VaryField(name: $0, value: selectingValue(request.headers, $0)) }
        let entry = CacheEntry(key: cacheKey(request.url), response: cached, vary: vary)
        let inMemory = self.keepInMemory(entry)
        guard let disk = self.disk else { return inMemory }
        let onDisk = self.ioPool.runAndWait(key: entry.key) { Self.diskStore(disk, entry) }
        return inMemory || ((try? onDisk.get()) ?? false)
    }

    /// Stores `cached` for `request` as ``store(_:for:)`` does, without blocking: the memory
    /// store is updated before this returns, the file is written on ``ioPool``, and `completion`
    /// runs on `loop` once the entry is complete on disk (or at once, on `loop`, when there is
    /// no disk store), with whether it was kept, or an `ioError` naming the file operation
    /// that failed (the memory copy, if any, stays).
    public func store(
        _ cached: CachedResponse,
        for request: HTTPClientRequest,
        on loop: EventLoop,
        completion: @escaping @Sendable (Result<Bool, HawserError>) -> Void = { _ in }
    ) {
        guard cached.storagePolicy != .notAllowed, Self.isStorable(cached.head, for: request),
            let names = varyNames(cached.head.headers)
        else {
            loop.execute { completion(.success(false)) }
            return
        }
        let vary = names.map { VaryField(name: $0, value: selectingValue(request.headers, $0)) }
        let entry = CacheEntry(key: cacheKey(request.url), response: cached, vary: vary)
        let inMemory = self.keepInMemory(entry)
        guard let disk = self.disk else {
            loop.execute { completion(.success(inMemory)) }
            return
        }
        self.ioPool.submit(key: entry.key, on: loop, { Self.diskStore(disk, entry) }) { result in
            completion(result.map { $0 || inMemory })
        }
    }

    /// The disk part of a store (on a pool thread): the file for a disk-allowed entry, the
    /// removal of the variant's old file for a memory-only one.
    private static func diskStore(_ disk: DiskStore, _ entry: CacheEntry) -> Result<Bool, HawserError> {
        do throws(FileError) {
            if entry.response.storagePolicy == .allowed { return .success(try disk.store(entry)) }
            try disk.remove(key: entry.key, vary: entry.vary)
            return .success(false)
        } catch {
            return .failure(
                HawserError(.ioError, "the cache could not store \(entry.key): \(error)", underlying: error)
            )
        }
    }

    private func keepInMemory(_ entry: CacheEntry) -> Bool {
        var kept = false
        self.memory.withLock { memory in
            // Whatever was stored for this variant before is out of date now.
            if let same = memory.indices(for: entry.key).first(where: { memory.entry($0).vary == entry.vary }) {
                memory.remove(same)
            }
            guard entry.size <= memory.capacity / Self.maximumEntryDivisor else { return }
            let variants = memory.indices(for: entry.key)
            if variants.count >= Self.maximumVariantsPerKey, let last = variants.last { memory.remove(last) }
            memory.insert(entry)
            kept = true
        }
        return kept
    }

    // MARK: Lookup

    /// What the cache has for `request` under `policy` (default: the request's own policy,
    /// else `.useProtocolCachePolicy`), as of `now`.
    ///
    /// - `.reloadIgnoringLocalCacheData`: always `.miss`.
    /// - `.returnCacheDataElseLoad`, `.returnCacheDataDontLoad`: any stored response whose
    ///   Vary'd headers match, however old, as `.fresh`; else `.miss`.
    /// - `.useProtocolCachePolicy`: RFC 9111 — `.fresh` when the response is fresh and
    ///   neither it (`no-cache`) nor the request (`no-cache`, `Pragma: no-cache`, `max-age`,
    ///   `min-fresh`) asks for validation; a stale response within the request's `max-stale`
    ///   is `.fresh` too unless it has `must-revalidate`; otherwise `.stale` with the
    ///   conditional headers to send.
    ///
    /// Only GET requests are looked up. A served head carries `Age`.
    public func lookup(_ request: HTTPClientRequest, policy: CachePolicy? = nil, now: Date = Date()) -> CacheLookup {
        let policy = policy ?? request.cachePolicy ?? .useProtocolCachePolicy
        guard request.method == .get, policy != .reloadIgnoringLocalCacheData,
            let entry = self.find(request)
        else { return .miss }
        return self.answer(entry, request, policy: policy, now: now)
    }

    /// What the cache has for `request`, as ``lookup(_:policy:now:)``, without blocking: a
    /// memory hit (or a cache without disk) answers before this returns, on the calling thread,
    /// and `completion` returns true then; otherwise the file is read on ``ioPool`` and
    /// `completion` runs on `loop` later. `now` is taken when the answer is made.
    public func lookup(
        _ request: HTTPClientRequest,
        policy: CachePolicy? = nil,
        on loop: EventLoop,
        now: @escaping @Sendable () -> Date = { Date() },
        completion: @escaping @Sendable (CacheLookup) -> Void
    ) {
        let policy = policy ?? request.cachePolicy ?? .useProtocolCachePolicy
        guard request.method == .get, policy != .reloadIgnoringLocalCacheData else {
            completion(.miss)
            return
        }
        let key = cacheKey(request.url)
        if let hit = self.findInMemory(key, request.headers) {
            completion(self.answer(hit, request, policy: policy, now: now()))
            return
        }
        guard let disk = self.disk else {
            completion(.miss)
            return
        }
        let headers = request.headers
        self.ioPool.submit(key: key, on: loop, { disk.load(key: key, request: headers) }) { entry in
            guard let entry else {
                completion(.miss)
                return
            }
            self.promote(entry)
            completion(self.answer(entry, request, policy: policy, now: now()))
        }
    }

    private func answer(
        _ entry: CacheEntry,
        _ request: HTTPClientRequest,
        policy: CachePolicy,
        now: Date
    ) -> CacheLookup {
        let nowSeconds = finiteSeconds(now)
        let age = computeCurrentAge(
            correctedInitialAge: entry.correctedInitialAge,
            responseTime: entry.responseSeconds,
            now: nowSeconds
        )
        var served = entry.response
        served.head.headers.add(name: "Age", value: ageField(age))
        if policy == .returnCacheDataElseLoad || policy == .returnCacheDataDontLoad { return .fresh(served) }

        if self.usableWithoutValidation(entry, age: age, request: request.headers) { return .fresh(served) }
        var conditional = HTTPHeaders()
        if let etag = entry.etag { conditional.add(name: "If-None-Match", value: etag) }
        if let lastModified = entry.lastModified { conditional.add(name: "If-Modified-Since", value: lastModified) }
        return .stale(served, conditionalHeaders: conditional)
    }

    private func usableWithoutValidation(_ entry: CacheEntry, age: Double, request: HTTPHeaders) -> Bool {
        if entry.noCache { return false }
        var requestCC: CacheControl?
        if request.contains(name: "Cache-Control") {
            requestCC = CacheControl(request)
        } else if request.contains(name: "Pragma", token: "no-cache") {
            return false  // RFC 9111 §5.4: Pragma: no-cache without Cache-Control means no-cache
        }
        if let cc = requestCC {
            if cc.noCache { return false }
            if let maxAge = cc.maxAge, age > Double(maxAge) { return false }
            if let minFresh = cc.minFresh, entry.lifetime - age < Double(minFresh) { return false }
        }
        if entry.lifetime > age { return true }
        if let maxStale = requestCC?.maxStale, !entry.mustRevalidate, age - entry.lifetime <= Double(maxStale) {
            return true
        }
        return false
    }

    /// Any stored response for `request` whose Vary'd headers match, however old (for
    /// `returnCacheDataElseLoad` / `returnCacheDataDontLoad`, and for a `stale-if-error`
    /// decision by the caller). Its head carries no `Age`.
    public func cachedResponse(for request: HTTPClientRequest) -> CachedResponse? {
        guard request.method == .get else { return nil }
        return self.find(request)?.response
    }

    /// The matching entry: memory first, then disk (a disk hit is promoted to memory).
    private func find(_ request: HTTPClientRequest) -> CacheEntry? {
        let key = cacheKey(request.url)
        if let hit = self.findInMemory(key, request.headers) { return hit }
        guard let disk = self.disk else { return nil }
        let headers = request.headers
        guard let entry = self.ioPool.runAndWait(key: key, { disk.load(key: key, request: headers) }) else {
            return nil
        }
        self.promote(entry)
        return entry
    }

    private func findInMemory(_ key: String, _ headers: HTTPHeaders) -> CacheEntry? {
        self.memory.withLock { memory in
            guard let index = memory.find(key, headers) else { return nil }
            memory.touch(index)
            return memory.entry(index)
        }
    }

    /// A disk hit goes to memory when it fits there.
    private func promote(_ entry: CacheEntry) {
        self.memory.withLock { memory in
            guard entry.size <= memory.capacity / Self.maximumEntryDivisor else { return }
            memory.insert(entry)  // replaces the variant with the same Vary'd values
        }
    }

    // MARK: Validation (§4.3.4)

    /// Updates the stored response that a 304 `notModified` validates (RFC 9111 §4.3.4) and
    /// returns it, ready to serve; nil when none matches (send the request again without
    /// conditions). Selection: the stored variants matching the request's Vary'd headers
    /// whose ETag equals the 304's (weak comparison), else whose Last-Modified equals it,
    /// else the only one when the 304 carries neither. The 304's header fields replace the
    /// stored ones of the same name, except hop-by-hop fields and Content-Length; the new
    /// request and response times restart the age calculation.
    public func updateAfterNotModified(
        _ notModified: HTTPResponseHead,
        for request: HTTPClientRequest,
        requestTime: Date,
        responseTime: Date
    ) -> CachedResponse? {
        guard request.method == .get else { return nil }
        let key = cacheKey(request.url)
        var candidates: [CacheEntry] = self.memory.withLock { memory in
            memory.indices(for: key).map { memory.entry($0) }.filter { $0.matches(request.headers) }
        }
        if candidates.isEmpty, let disk = self.disk {
            let headers = request.headers
            if let entry = self.ioPool.runAndWait(key: key, { disk.load(key: key, request: headers) }) {
                candidates = [entry]
            }
        }
        guard let old = Self.select(candidates, notModified) else { return nil }
        let entry = Self.updated(old, notModified, key: key, requestTime: requestTime, responseTime: responseTime)
        _ = self.keepInMemory(entry)
        if let disk = self.disk { _ = self.ioPool.runAndWait(key: key) { Self.diskStore(disk, entry) } }
        return Self.served(entry)
    }

    /// The 304 `notModified` applied to `stored`, the response this task sent the conditional
    /// request for (a ``CacheLookup/stale(_:conditionalHeaders:)`` answer), as
    /// ``updateAfterNotModified(_:for:requestTime:responseTime:)`` does, without reading the
    /// disk: nil when the 304's validators do not select `stored`. The updated entry replaces
    /// the stored one in memory at once and on disk on ``ioPool`` (then `completion` runs on
    /// `loop`).
    public func updateAfterNotModified(
        _ notModified: HTTPResponseHead,
        revalidating stored: CachedResponse,
        for request: HTTPClientRequest,
        requestTime: Date,
        responseTime: Date,
        on loop: EventLoop,
        completion: @escaping @Sendable (Result<Bool, HawserError>) -> Void = { _ in }
    ) -> CachedResponse? {
        guard request.method == .get, let names = varyNames(stored.head.headers) else { return nil }
        var response = stored
        response.head.headers.remove(name: "Age")  // the served copy's; the stored one has none
        let key = cacheKey(request.url)
        let vary = names.map { VaryField(name: $0, value: selectingValue(request.headers, $0)) }
        let old = CacheEntry(key: key, response: response, vary: vary, correctedInitialAge: 0)
        guard let selected = Self.select([old], notModified) else { return nil }
        let entry = Self.updated(selected, notModified, key: key, requestTime: requestTime, responseTime: responseTime)
        _ = self.keepInMemory(entry)
        if let disk = self.disk, entry.response.storagePolicy != .notAllowed {
            self.ioPool.submit(key: key, on: loop, { Self.diskStore(disk, entry) }, completion: completion)
        } else {
            loop.execute { completion(.success(true)) }
        }
        return Self.served(entry)
    }

    private static func select(_ candidates: [CacheEntry], _ notModified: HTTPResponseHead) -> CacheEntry? {
        if let etag = notModified.headers["ETag"] {
            return candidates.first { $0.etag.map { weakETagEquals($0, etag) } ?? false }
        } else if let lastModified = notModified.headers["Last-Modified"] {
            return candidates.first { $0.lastModified == lastModified }
        } else {
            return candidates.count == 1 ? candidates[0] : nil
        }
    }

    private static func served(_ entry: CacheEntry) -> CachedResponse {
        let age = computeCurrentAge(
            correctedInitialAge: entry.correctedInitialAge,
            responseTime: entry.responseSeconds,
            now: entry.responseSeconds
        )
        var served = entry.response
        served.head.headers.add(name: "Age", value: ageField(age))
        return served
    }

    private static func updated(
        _ old: CacheEntry,
        _ notModified: HTTPResponseHead,
        key: String,
        requestTime: Date,
        responseTime: Date
    ) -> CacheEntry {
        var updated = old.response
        let incoming = storableHeaders(notModified.headers)
        var replaced = Set<String>()
        for field in incoming {
            let name = field.name.lowercased()
            if name == "content-length" || replaced.contains(name) { continue }
            replaced.insert(name)
            updated.head.headers.remove(name: field.name)
            for value in incoming.values(for: field.name) { updated.head.headers.add(name: field.name, value: value) }
        }
        updated.requestTime = requestTime
        updated.responseTime = responseTime
        return CacheEntry(key: key, response: updated, vary: old.vary)
    }

    // MARK: Invalidation (§4.4)

    /// After an unsafe request (anything but GET, HEAD, OPTIONS, TRACE) got a non-error
    /// (2xx or 3xx) response, removes what is stored for its URL and for the response's
    /// `Location` and `Content-Location` when they are on the same origin.
    /// The memory store changes before this returns; the files are removed on ``ioPool``, before
    /// any later disk operation on the same URLs, and this waits for that unless `waitForDisk`
    /// is false (the engine's form, which never blocks its loop).
    public func invalidate(after request: HTTPClientRequest, response: HTTPResponseHead, waitForDisk: Bool = true) {
        switch request.method {
        case .get, .head, .options, .trace: return
        default: break
        }
        guard response.status >= 200 && response.status < 400 else { return }
        self.removeResponses(for: request.url, waitForDisk: waitForDisk)
        for name in ["Location", "Content-Location"] {
            guard let value = response.headers[name],
                let target = URL(string: value, relativeTo: request.url)?.absoluteURL,
                sameOrigin(target, request.url)
            else { continue }
            self.removeResponses(for: target, waitForDisk: waitForDisk)
        }
    }

    /// Removes every stored variant for `url`: from memory before this returns, from disk on
    /// ``ioPool`` before any later disk operation on `url` (waited for unless `waitForDisk` is
    /// false). A file that cannot be removed is forgotten by the index either way.
    public func removeResponses(for url: URL, waitForDisk: Bool = true) {
        let key = cacheKey(url)
        self.memory.withLock { $0.removeKey(key) }
        guard let disk = self.disk else { return }
        if waitForDisk {
            self.ioPool.runAndWait(key: key) { try? disk.remove(key: key) }
        } else {
            self.ioPool.submit(key: key) { try? disk.remove(key: key) }
        }
    }

    /// Removes everything, from memory and disk (waiting for the files to go; a barrier: no
    /// disk operation asked for after it runs before it).
    public func removeAll() {
        self.memory.withLock { $0.removeAll() }
        guard let disk = self.disk else { return }
        self.ioPool.runAndWait(key: nil) { try? disk.removeAll() }
    }
}

/// RFC 9110 §8.8.3.2 weak comparison: the opaque tags match, W/ prefixes ignored.
func weakETagEquals(_ a: String, _ b: String) -> Bool {
    func opaque(_ s: String) -> Substring {
        let t = Substring(s).trimmingOWS()
        return t.hasPrefix("W/") ? t.dropFirst(2) : t
    }
    return opaque(a) == opaque(b)
}

func sameOrigin(_ a: URL, _ b: URL) -> Bool {
    func origin(_ u: URL) -> (String, String, Int)? {
        guard let scheme = u.scheme?.lowercased(), let host = u.host(percentEncoded: false)?.lowercased() else {
            return nil
        }
        return (scheme, host, u.port ?? (scheme == "https" ? 443 : 80))
    }
    guard let x = origin(a), let y = origin(b) else { return false }
    return x == y
}
