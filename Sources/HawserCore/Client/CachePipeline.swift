import HawserBase
import HawserCache
import HawserHTTP1
import HawserPosix

// The session's HTTP cache in the request path: a fresh stored response is served without a
// request, a stale one is revalidated (a 304 serves it), and storable responses are recorded
// as they stream and stored at the end. Loop-confined.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension RequestTask {
    var effectiveCachePolicy: CachePolicy {
        self.request.cachePolicy ?? self.context.configuration.requestCachePolicy
    }

    /// The request as the cache sees it: the current request with the header fields it has on
    /// the wire (the caller's, and what the session added: default headers, `Cookie` from the
    /// jar, `Accept-Encoding`), so that `Vary` is stored and matched on what the server saw.
    var cacheRequest: HTTPClientRequest {
        var wire = self.request
        wire.headers = Self.wireHeaders(self.prepared.head)
        return wire
    }

    /// The header fields of an encoded request head (the encoder checked them: one field a
    /// line, `name: value`, no obs-fold).
    static func wireHeaders(_ head: [UInt8]) -> HTTPHeaders {
        var fields: [(name: String, value: String)] = []
        var lineStart = 0
        var first = true
        var i = 0
        while i + 1 < head.count {
            guard head[i] == 0x0D, head[i + 1] == 0x0A else {
                i += 1
                continue
            }
            defer {
                lineStart = i + 2
                i += 2
            }
            if first {
                first = false
                continue
            }
            let line = head[lineStart..<i]
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
            fields.append((name, String(Substring(value).trimmingOWS())))
        }
        return HTTPHeaders(fields)
    }

    /// Before the first request goes out: answers from the cache when it may. `decided(true)`
    /// when the task was answered (or failed) without the network. A disk lookup reads the file
    /// on the cache's IO pool; `decided` then runs on a later turn of the loop.
    func consultCache(_ decided: @escaping (Bool) -> Void) {
        guard let cache = self.context.urlCache else {
            decided(false)
            return
        }
        let policy = self.effectiveCachePolicy
        self.requestTime = Date()
        let task = UnsafeTransfer(self)
        let decide = UnsafeTransfer(decided)
        cache.lookup(self.cacheRequest, policy: policy, on: self.eventLoop) { lookup in
            // On the loop: inline for a memory hit, else from the IO pool by `execute`.
            let task = task.value
            guard !task.isFinished else { return }  // cancelled or timed out while the file was read
            decide.value(task.answer(lookup, policy: policy))
        }
    }

    private func answer(_ lookup: CacheLookup, policy: CachePolicy) -> Bool {
        switch lookup {
        case .fresh(let cached):
            self.serveFromCache(cached, use: .fresh)
            return true
        case .stale(let cached, let conditions):
            if policy == .returnCacheDataDontLoad || policy == .returnCacheDataElseLoad {
                self.serveFromCache(cached, use: .fresh)
                return true
            }
            var conditional = self.request
            for f in conditions { conditional.headers.replaceOrAdd(name: f.name, value: f.value) }
            do {
                let revalidation = try Session.prepare(
                    conditional,
                    configuration: self.context.configuration,
                    addedFields: self.observer?.headerFields
                )
                self.prepared.head = revalidation.head
                self.prepared.cookiesLeftOut = revalidation.cookiesLeftOut
            } catch {
                return false  // the original head stands; the response is simply not revalidated
            }
            self.cacheCandidate = cached
            return false
        case .miss:
            if policy == .returnCacheDataDontLoad {
                let e = HawserError(
                    .resourceUnavailable,
                    "returnCacheDataDontLoad: no stored response for \(self.request.url.absoluteString)",
                    url: self.request.url
                )
                self.eventLoop.executeInLoop { [self] in self.complete(.failure(e)) }
                return true
            }
            return false
        }
    }

    /// The most body bytes a cached response hands the delegate in one turn of the loop, so
    /// that serving a large stored body never holds the loop for long.
    static let cachedBodyChunk = 1 << 20

    /// Delivers `cached` as the response, on the next turns of the loop (never inside `execute`):
    /// the head, then the body a chunk a turn. The task is finished for its machine already:
    /// this is its one completion. A cancel or a delegate's `fail(with:)` during the body ends
    /// it with that error.
    private func serveFromCache(_ cached: CachedResponse, use: TaskMetrics.CacheUse) {
        self.servingFromCache = true
        self.eventLoop.executeInLoop { [self] in
            self.metrics.cacheUse = use
            self.delegate.task(self, didReceiveHead: cached.head)
            self.deliverCachedBody(cached.body, from: 0)
        }
    }

    /// Delivers the body a 304 revalidated, once the 304 has ended (its head was delivered as the
    /// stored response's): the first chunk now, the rest a chunk a turn, then the completion. The
    /// machine is finished; a cancel or a delegate's `fail(with:)` meanwhile ends it with that error.
    func deliverRevalidatedBody(_ body: [UInt8]) {
        self.servingFromCache = true
        self.deliverCachedBody(body, from: 0)
    }

    private func deliverCachedBody(_ body: [UInt8], from offset: Int) {
        if let error = self.cacheServeError {
            self.complete(.failure(error.with(url: self.request.url)))
            return
        }
        guard offset < body.count else {
            self.complete(.success(nil))
            return
        }
        let end = min(body.count, offset + Self.cachedBodyChunk)
        body.withUnsafeBytes {
            self.delegate.task(self, didReceiveBody: UnsafeRawBufferPointer(rebasing: $0[offset..<end]))
        }
        if end == body.count && self.cacheServeError == nil {
            self.complete(.success(nil))
            return
        }
        self.eventLoop.executeInLoop { [self] in self.deliverCachedBody(body, from: end) }
    }

    /// A final head that will be delivered: 304 → the revalidated stored response; otherwise
    /// starts recording a storable response; unsafe methods invalidate. Returns the head to
    /// deliver.
    func cacheHead(_ head: HTTPResponseHead) -> HTTPResponseHead {
        guard let cache = self.context.urlCache else { return head }
        let responseTime = Date()
        if head.status == 304, let candidate = self.cacheCandidate,
            let updated = cache.updateAfterNotModified(
                head,
                revalidating: candidate,
                for: self.cacheRequest,
                requestTime: self.requestTime,
                responseTime: responseTime,
                on: self.eventLoop
            )
        {
            self.cacheCandidate = nil
            self.servedFromCache = true
            self.metrics.cacheUse = .validated
            self.pendingCachedBody = updated.body
            return updated.head
        }
        self.cacheCandidate = nil
        if self.request.method != .get && self.request.method != .head {
            cache.invalidate(after: self.request, response: head, waitForDisk: false)
            return head
        }
        if self.effectiveCachePolicy != .returnCacheDataDontLoad, HTTPCache.isStorable(head, for: self.request) {
            var stored = head
            var body: [UInt8] = []
            if self.decoder == nil, let length = head.headers["Content-Length"].flatMap(Int.init),
                length > 0, length <= cache.maximumEntrySize
            {
                body.reserveCapacity(length)  // no reallocation (a copy of the body so far) on the loop
            }
            if self.decoder != nil {
                // The body is kept as delivered (decoded): the stored head must not claim a coding.
                stored.headers.remove(name: "Content-Encoding")
                stored.headers.remove(name: "Content-Length")
            }
            self.cacheRecording = (stored, body, self.requestTime)
        }
        return head
    }

    /// Body bytes as delivered to the delegate, recorded for the cache while they fit.
    func recordForCache(_ bytes: UnsafeRawBufferPointer) {
        guard self.cacheRecording != nil, let cache = self.context.urlCache else { return }
        if self.cacheRecording!.body.count + bytes.count > cache.maximumEntrySize {
            self.cacheRecording = nil  // too large to be kept: stop copying
            return
        }
        self.cacheRecording!.body.append(contentsOf: bytes)
    }

    /// At a successful end: offers the recorded response to the delegate's will-cache hook, then
    /// stores it: in memory at once, on disk on the cache's IO pool (the loop never waits for
    /// the file).
    func storeInCache(_ recording: (head: HTTPResponseHead, body: [UInt8], requestTime: Date)) {
        let request = self.cacheRequest
        guard let cache = self.context.urlCache,
            let proposed = HTTPCache.cacheableResponse(
                recording.head,
                body: recording.body,
                for: request,
                requestTime: recording.requestTime,
                responseTime: Date()
            )
        else { return }
        let loop = self.eventLoop
        self.delegate.task(self, willCacheResponse: proposed) { chosen in
            if let chosen { cache.store(chosen, for: request, on: loop) }
        }
    }
}
