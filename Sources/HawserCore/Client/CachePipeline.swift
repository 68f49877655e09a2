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
    /// jar, `Accept-Encoding`), so that `Vary` is stored and matched on what the server saw. The
    /// fields were collected while the head was encoded (`Session.Prepared.wireHeaders`).
    var cacheRequest: HTTPClientRequest {
        var wire = self.request
        if let fields = self.prepared.wireHeaders { wire.headers = fields }
        return wire
    }

    /// Before the first request goes out: answers from the cache when it may, else sends the
    /// task to the pool (revalidating a stale stored response). A disk lookup reads the file on
    /// the cache's IO pool; the answer then comes on a later turn of the loop.
    func consultCache() {
        guard let cache = self.context.urlCache else { return self.submitToPool() }
        let policy = self.effectiveCachePolicy
        self.cache.requestTime = Date()
        let task = LoopBound(self, loop: self.eventLoop)
        cache.lookup(self.cacheRequest, policy: policy, on: self.eventLoop) { lookup in
            // On the loop: inline for a memory hit, else from the IO pool by `execute`.
            let task = task.value
            guard !task.isFinished else { return }  // cancelled or timed out while the file was read
            task.answer(CacheExchange.answer(lookup, policy: policy, url: task.request.url))
        }
    }

    private func answer(_ answer: CacheExchange.LookupAnswer) {
        switch answer {
        case .serve(let cached):
            self.machine.servedFromCache()
            self.serveFromCache(cached, use: .fresh)
        case .revalidate(let cached, let conditions):
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
                self.prepared.wireHeaders = revalidation.wireHeaders
                self.cache.candidate = cached
            } catch {
                // The original head stands; the response is simply not revalidated.
            }
            self.submitToPool()
        case .refuse(let e):
            self.machine.answeredElsewhere()
            self.eventLoop.executeInLoop { [self] in self.complete(.failure(e)) }
        case .network:
            self.submitToPool()
        }
    }

    /// The most body bytes a cached response hands the delegate in one turn of the loop, so
    /// that serving a large stored body never holds the loop for long.
    static let cachedBodyChunk = 1 << 20

    /// Delivers `cached` as the response, on the next turns of the loop (never inside `execute`):
    /// the head, then the body a chunk a turn. The machine is serving from the cache: a cancel
    /// or a delegate's `fail(with:)` during the body ends it with that error at the next chunk.
    private func serveFromCache(_ cached: CachedResponse, use: TaskMetrics.CacheUse) {
        self.eventLoop.executeInLoop { [self] in
            self.metrics.cacheUse = use
            self.delegate.task(self, didReceiveHead: cached.head)
            self.deliverCachedBody(cached.body, from: 0)
        }
    }

    /// Delivers the body a 304 revalidated, once the 304 has ended (its head was delivered as the
    /// stored response's): the first chunk now, the rest a chunk a turn, then the completion.
    func deliverRevalidatedBody() {
        let body = self.cache.revalidatedBody ?? []
        self.cache.revalidatedBody = nil
        self.deliverCachedBody(body, from: 0)
    }

    private func deliverCachedBody(_ body: [UInt8], from offset: Int) {
        let due = self.machine.cachedChunkDue(into: &self.pool.requestQueue.scratch)
        guard due, offset < body.count else {
            if due { self.machine.cachedBodyDelivered(into: &self.pool.requestQueue.scratch) }
            return self.runActions()
        }
        let end = min(body.count, offset + Self.cachedBodyChunk)
        body.withUnsafeBytes {
            self.delegate.task(self, didReceiveBody: UnsafeRawBufferPointer(rebasing: $0[offset..<end]))
        }
        if end == body.count {
            self.machine.cachedBodyDelivered(into: &self.pool.requestQueue.scratch)
            return self.runActions()
        }
        self.eventLoop.executeInLoop { [self] in self.deliverCachedBody(body, from: end) }
    }

    /// A final head that will be delivered: 304 → the revalidated stored response; otherwise
    /// starts recording a storable response; unsafe methods invalidate. Returns the head to
    /// deliver.
    func cacheHead(_ head: HTTPResponseHead) -> HTTPResponseHead {
        guard let cache = self.context.urlCache else { return head }
        let policy = self.effectiveCachePolicy
        var plan = CacheExchange.plan(
            for: head,
            request: self.request,
            policy: policy,
            hasCandidate: self.cache.candidate != nil
        )
        let requestTime = self.cache.requestTime ?? Date()
        if plan == .serveRevalidated {
            if let candidate = self.cache.candidate,
                let updated = cache.updateAfterNotModified(
                    head,
                    revalidating: candidate,
                    for: self.cacheRequest,
                    requestTime: requestTime,
                    responseTime: Date(),
                    on: self.eventLoop
                )
            {
                self.cache.candidate = nil
                self.machine.revalidated()
                self.metrics.cacheUse = .validated
                self.cache.revalidatedBody = updated.body
                return updated.head
            }
            plan = CacheExchange.plan(for: head, request: self.request, policy: policy, hasCandidate: false)
        }
        self.cache.candidate = nil
        switch plan {
        case .invalidate:
            cache.invalidate(after: self.request, response: head, waitForDisk: false)
        case .record:
            let start = CacheExchange.recordingStart(
                head,
                decoded: self.decoder != nil,
                maximumEntrySize: cache.maximumEntrySize
            )
            var body: [UInt8] = []
            if start.capacity > 0 { body.reserveCapacity(start.capacity) }
            self.cache.recording = CacheExchange.Recording(head: start.head, body: body, requestTime: requestTime)
        case .serveRevalidated, .none:
            break
        }
        return head
    }

    /// Body bytes as delivered to the delegate, recorded for the cache while they fit.
    func recordForCache(_ bytes: UnsafeRawBufferPointer) {
        guard let cache = self.context.urlCache else { return }
        self.cache.record(bytes, maximumEntrySize: cache.maximumEntrySize)
    }

    /// At a successful end: offers the recorded response to the delegate's will-cache hook, then
    /// stores it: in memory at once, on disk on the cache's IO pool (the loop never waits for
    /// the file).
    func storeInCache(_ recording: CacheExchange.Recording) {
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
