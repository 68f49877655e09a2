// What the cache hands out (CachedResponse, CacheLookup, ResponseFreshness) and the freshness
// arithmetic of RFC 9111 §4.2 they rest on.

import HawserHTTP1

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Values

/// A stored response (NSCachedURLResponse's role): a value a will-cache hook may change
/// before it is stored.
public struct CachedResponse: Sendable {
    /// Where a response may be kept.
    public enum StoragePolicy: Sendable, Hashable {
        /// Memory and disk.
        case allowed
        /// Memory only.
        case allowedInMemoryOnly
        /// Not at all (a will-cache hook's way to refuse).
        case notAllowed
    }

    /// The response head. When served by ``HTTPCache/lookup(_:policy:now:)`` it carries an
    /// `Age` field with the response's current age (RFC 9111 §4).
    public var head: HTTPResponseHead
    /// The body as delivered to the caller.
    public var body: [UInt8]
    /// When the request that produced this response was sent (for the age calculation).
    public var requestTime: Date
    /// When the response was received (for the age calculation); also the stored date.
    public var responseTime: Date
    /// Caller data stored with the response (on disk too).
    public var userInfo: [String: String]
    /// Where the cache may keep the response: memory and disk, memory only, or nowhere.
    public var storagePolicy: StoragePolicy

    /// Creates a response to store in an ``HTTPCache``.
    ///
    /// - Parameters:
    ///   - head: the response head.
    ///   - body: the body as delivered to the caller (decoded).
    ///   - requestTime: when the request was sent.
    ///   - responseTime: when the response was received.
    ///   - userInfo: caller data kept with the response; none by default.
    ///   - storagePolicy: where it may be kept; memory and disk by default.
    public init(
        head: HTTPResponseHead,
        body: [UInt8],
        requestTime: Date,
        responseTime: Date,
        userInfo: [String: String] = [:],
        storagePolicy: StoragePolicy = .allowed
    ) {
        self.head = head
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.userInfo = userInfo
        self.storagePolicy = storagePolicy
    }

    /// The date the response was stored (its response time).
    public var storedDate: Date { self.responseTime }
}

/// What the cache has for a request.
public enum CacheLookup: Sendable {
    /// A response that may be served as is.
    case fresh(CachedResponse)
    /// A response that must be validated first: send the request with `conditionalHeaders`
    /// added (If-None-Match from its ETag, If-Modified-Since from its Last-Modified; empty
    /// when it has neither, and the request is then sent as is), then on 304 call
    /// ``HTTPCache/updateAfterNotModified(_:for:requestTime:responseTime:)``.
    case stale(CachedResponse, conditionalHeaders: HTTPHeaders)
    /// Nothing usable.
    case miss
}

/// The freshness of a response (RFC 9111 §4.2), in seconds.
public struct ResponseFreshness: Sendable, Hashable {
    /// The freshness lifetime (§4.2.1); 0 when the response has none.
    public var lifetime: Double
    /// Whether `lifetime` is heuristic (§4.2.2).
    public var isHeuristic: Bool
    /// The corrected initial age (§4.2.3): the age the response had when it arrived.
    public var correctedInitialAge: Double
    /// The current age at the time asked for.
    public var currentAge: Double

    /// `lifetime > currentAge`.
    public var isFresh: Bool { self.lifetime > self.currentAge }

    /// The freshness of a response with `headers` and `status`, requested at `requestTime`,
    /// received at `responseTime`, as of `now`, for a private cache (s-maxage is ignored).
    /// Arithmetic saturates: arbitrary headers and dates never trap.
    public init(headers: HTTPHeaders, status: Int, requestTime: Date, responseTime: Date, now: Date) {
        let cacheControl = CacheControl(headers)
        let responseSeconds = finiteSeconds(responseTime)
        let (lifetime, heuristic) = freshnessLifetime(
            headers,
            cacheControl,
            status: status,
            responseTime: responseSeconds
        )
        self.lifetime = lifetime
        self.isHeuristic = heuristic
        self.correctedInitialAge = computeCorrectedInitialAge(
            headers,
            requestTime: finiteSeconds(requestTime),
            responseTime: responseSeconds
        )
        self.currentAge = computeCurrentAge(
            correctedInitialAge: self.correctedInitialAge,
            responseTime: responseSeconds,
            now: finiteSeconds(now)
        )
    }
}

// MARK: - Freshness arithmetic (RFC 9111 §4.2)

func finiteSeconds(_ date: Date) -> Double {
    let t = date.timeIntervalSince1970
    return t.isFinite ? t : 0
}

/// The status codes RFC 9110 defines as heuristically cacheable (§15.1).
func isHeuristicallyCacheable(_ status: Int) -> Bool {
    switch status {
    case 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501: return true
    default: return false
    }
}

/// The Date value, or the response time when absent or invalid (RFC 9110 §6.6.1).
private func dateValue(_ headers: HTTPHeaders, responseTime: Double) -> Double {
    headers["Date"].flatMap(HTTPDate.epochSeconds).map(Double.init) ?? responseTime
}

func freshnessLifetime(
    _ headers: HTTPHeaders,
    _ cc: CacheControl,
    status: Int,
    responseTime: Double
) -> (Double, heuristic: Bool) {
    if let maxAge = cc.maxAge { return (Double(maxAge), false) }
    let date = dateValue(headers, responseTime: responseTime)
    if let expires = headers["Expires"] {
        // An invalid Expires (e.g. "0") means "already expired" (§5.3).
        guard let e = HTTPDate.epochSeconds(expires) else { return (0, false) }
        return (max(0, Double(e) - date), false)
    }
    guard isHeuristicallyCacheable(status) || cc.isPublic else { return (0, false) }
    guard let lm = headers["Last-Modified"].flatMap(HTTPDate.epochSeconds), Double(lm) < date else { return (0, true) }
    return (min((date - Double(lm)) / 10, 86_400), true)
}

func computeCorrectedInitialAge(_ headers: HTTPHeaders, requestTime: Double, responseTime: Double) -> Double {
    let ageValue = headers["Age"].flatMap(CacheControl.parseDeltaSeconds).map(Double.init) ?? 0
    let apparentAge = max(0, responseTime - dateValue(headers, responseTime: responseTime))
    let responseDelay = max(0, responseTime - requestTime)
    let corrected = ageValue + responseDelay
    let result = max(apparentAge, corrected)
    return result.isFinite ? result : Double(CacheControl.maximumDeltaSeconds)
}

func computeCurrentAge(correctedInitialAge: Double, responseTime: Double, now: Double) -> Double {
    let resident = max(0, now - responseTime)
    let age = correctedInitialAge + resident
    return age.isFinite ? age : Double(CacheControl.maximumDeltaSeconds)
}

/// A finite, non-negative age as whole seconds for the Age field, clamped to 2^31.
func ageField(_ age: Double) -> String {
    guard age.isFinite, age > 0 else { return "0" }
    return String(Int(min(age, Double(CacheControl.maximumDeltaSeconds))))
}
