// The cache's part of one task, as values and pure decisions: what a lookup means for the task
// (serve, revalidate, refuse, go to the network), what a delivered final head means for the cache
// (serve the revalidated stored response, invalidate, record, nothing), and the state that spans
// the exchange (the candidate a 304 revalidates, the response being recorded, the stored body a
// 304 serves). CachePipeline.swift is the IO around it. Loop-confined.
import HawserBase
import HawserCache

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The cache's state and decisions for one task.
struct CacheExchange {
    /// A response being stored: its head (Content-Encoding removed: the body is kept decoded),
    /// the body so far, and when the request went out.
    struct Recording {
        var head: HTTPResponseHead
        var body: [UInt8]
        var requestTime: Date
    }

    /// The stored response a conditional request revalidates (a 304 serves it).
    var candidate: CachedResponse?
    /// The response being recorded; nil when it is not to be stored, or after the body outgrew
    /// what the cache would keep.
    var recording: Recording?
    /// The stored body a 304 revalidated: delivered when the 304 ends, a chunk a turn.
    var revalidatedBody: [UInt8]?
    /// When the request went out (for the stored response's age).
    var requestTime: Date?

    /// What a lookup means for the task.
    enum LookupAnswer {
        /// Deliver the stored response without a request.
        case serve(CachedResponse)
        /// Send the request with these conditions; a 304 serves `candidate`.
        case revalidate(CachedResponse, conditions: HTTPHeaders)
        /// No request may be sent and nothing is stored: fail with this error.
        case refuse(HawserError)
        /// Send the request as it is.
        case network
    }

    /// The answer to a lookup under `policy` for `url`.
    static func answer(_ lookup: CacheLookup, policy: CachePolicy, url: URL) -> LookupAnswer {
        switch lookup {
        case .fresh(let cached):
            return .serve(cached)
        case .stale(let cached, let conditions):
            if policy == .returnCacheDataDontLoad || policy == .returnCacheDataElseLoad { return .serve(cached) }
            return .revalidate(cached, conditions: conditions)
        case .miss:
            if policy == .returnCacheDataDontLoad {
                return .refuse(
                    HawserError(
                        .resourceUnavailable,
                        "returnCacheDataDontLoad: no stored response for \(url.absoluteString)",
                        url: url
                    )
                )
            }
            return .network
        }
    }

    /// What a final head that will be delivered means for the cache.
    enum HeadPlan: Equatable {
        /// A 304 to a conditional request: the stored response, updated, is the response.
        case serveRevalidated
        /// An unsafe method's response: stored responses for the URL are invalidated.
        case invalidate
        /// A storable response: record its body as it is delivered.
        case record
        /// Nothing to do.
        case none
    }

    /// The plan for `head`, the answer to `request` under `policy`; `hasCandidate`: a stored
    /// response is being revalidated (and can still be updated by a 304).
    static func plan(
        for head: HTTPResponseHead,
        request: HTTPClientRequest,
        policy: CachePolicy,
        hasCandidate: Bool
    ) -> HeadPlan {
        if head.status == 304, hasCandidate { return .serveRevalidated }
        if request.method != .get && request.method != .head { return .invalidate }
        if policy != .returnCacheDataDontLoad, HTTPCache.isStorable(head, for: request) { return .record }
        return .none
    }

    /// The head to store for `head` and the body's initial capacity: a decoded body is stored
    /// without its coding (`decoded`); an identity body of a known length that fits
    /// `maximumEntrySize` gets its room at once (no reallocation, a copy of the body so far, on
    /// the loop).
    static func recordingStart(
        _ head: HTTPResponseHead,
        decoded: Bool,
        maximumEntrySize: Int
    ) -> (head: HTTPResponseHead, capacity: Int) {
        var stored = head
        if decoded {
            stored.headers.remove(name: "Content-Encoding")
            stored.headers.remove(name: "Content-Length")
            return (stored, 0)
        }
        if let length = head.headers["Content-Length"].flatMap(Int.init), length > 0, length <= maximumEntrySize {
            return (stored, length)
        }
        return (stored, 0)
    }

    /// Body bytes as delivered, recorded while they fit `maximumEntrySize` (past it the
    /// recording is dropped: too large to be kept).
    mutating func record(_ bytes: UnsafeRawBufferPointer, maximumEntrySize: Int) {
        guard self.recording != nil else { return }
        if self.recording!.body.count + bytes.count > maximumEntrySize {
            self.recording = nil
            return
        }
        self.recording!.body.append(contentsOf: bytes)
    }
}
