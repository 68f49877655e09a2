// The session's HTTP cache in the request path: a fresh stored response is served without a
// request, a stale one is revalidated (a 304 serves it), and storable responses are recorded
// as they stream and stored at the end. Loop-confined.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserHTTP1
import HawserAuth
import HawserBase
import HawserCache
import HawserPosix
import HawserReachability

extension RequestTask {
    var effectiveCachePolicy: CachePolicy {
        self.request.cachePolicy ?? self.context.configuration.requestCachePolicy
    }

    /// Before the first request goes out: answers from the cache when it may. Returns true
    /// when the task was answered (or failed) without the network.
    func consultCache() -> Bool {
        guard let cache = self.context.configuration.urlCache else { return false }
        let policy = self.effectiveCachePolicy
        self.requestTime = Date()
        switch cache.lookup(self.request, policy: policy, now: self.requestTime) {
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
                self.prepared.head = try Session.prepare(conditional, configuration: self.context.configuration,
                                                         addedFields: self.observer?.headerFields).head
            } catch {
                return false   // the original head stands; the response is simply not revalidated
            }
            self.cacheCandidate = cached
            return false
        case .miss:
            if policy == .returnCacheDataDontLoad {
                let e = HawserError(.resourceUnavailable, "returnCacheDataDontLoad: no stored response for \(self.request.url.absoluteString)",
                                    url: self.request.url)
                self.eventLoop.executeInLoop { [self] in self.complete(.failure(e)) }
                return true
            }
            return false
        }
    }

    /// Delivers `cached` as the response, on the next turn of the loop (never inside `execute`).
    /// The task is finished for its machine already: this is its one completion.
    private func serveFromCache(_ cached: CachedResponse, use: TaskMetrics.CacheUse) {
        self.eventLoop.executeInLoop { [self] in
            self.metrics.cacheUse = use
            self.delegate.task(self, didReceiveHead: cached.head)
            if !cached.body.isEmpty {
                cached.body.withUnsafeBytes { self.delegate.task(self, didReceiveBody: $0) }
            }
            self.complete(.success(nil))
        }
    }

    /// A final head that will be delivered: 304 → the revalidated stored response; otherwise
    /// starts recording a storable response; unsafe methods invalidate. Returns the head to
    /// deliver.
    func cacheHead(_ head: HTTPResponseHead) -> HTTPResponseHead {
        guard let cache = self.context.configuration.urlCache else { return head }
        let responseTime = Date()
        if head.status == 304, self.cacheCandidate != nil,
           let updated = cache.updateAfterNotModified(head, for: self.request, requestTime: self.requestTime, responseTime: responseTime) {
            self.cacheCandidate = nil
            self.servedFromCache = true
            self.metrics.cacheUse = .validated
            self.pendingCachedBody = updated.body
            return updated.head
        }
        self.cacheCandidate = nil
        if self.request.method != .get && self.request.method != .head {
            cache.invalidate(after: self.request, response: head)
            return head
        }
        if self.effectiveCachePolicy != .returnCacheDataDontLoad, HTTPCache.isStorable(head, for: self.request) {
            var stored = head
            if self.decoder != nil {
                // The body is kept as delivered (decoded): the stored head must not claim a coding.
                stored.headers.remove(name: "Content-Encoding")
                stored.headers.remove(name: "Content-Length")
            }
            self.cacheRecording = (stored, [], self.requestTime)
        }
        return head
    }

    /// Body bytes as delivered to the delegate, recorded for the cache while they fit.
    func recordForCache(_ bytes: UnsafeRawBufferPointer) {
        guard self.cacheRecording != nil, let cache = self.context.configuration.urlCache else { return }
        if self.cacheRecording!.body.count + bytes.count > cache.maximumEntrySize {
            self.cacheRecording = nil   // too large to be kept: stop copying
            return
        }
        self.cacheRecording!.body.append(contentsOf: bytes)
    }

    /// At a successful end: offers the recorded response to the delegate's will-cache hook, then stores it.
    func storeInCache(_ recording: (head: HTTPResponseHead, body: [UInt8], requestTime: Date)) {
        guard let cache = self.context.configuration.urlCache,
              let proposed = HTTPCache.cacheableResponse(recording.head, body: recording.body, for: self.request,
                                                         requestTime: recording.requestTime, responseTime: Date()) else { return }
        let request = self.request
        self.delegate.task(self, willCacheResponse: proposed) { chosen in
            if let chosen { _ = cache.store(chosen, for: request) }
        }
    }
}
