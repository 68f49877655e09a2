import HawserCore

// Beyond AFNetworking: request adaptation and retry (Alamofire's RequestInterceptor), a retry
// policy with exponential back-off, and the authentication-refresh pattern.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Rewrites a request before each attempt is sent (adds a token, signs it…).
public protocol RequestAdapter: Sendable {
    /// Returns the request to send. Throwing fails the task with
    /// ``SessionManagerError/adapterFailed(underlying:)``; nothing is sent.
    func adapt(_ request: HTTPClientRequest, for task: SessionTask) async throws -> HTTPClientRequest
}

/// What a retrier decided.
public enum RetryDecision: Sendable, Hashable {
    /// Complete the task with its error or response.
    case doNotRetry
    /// Send the task again now (the adapter runs again).
    case retry
    /// Send the task again after this many seconds.
    case retryWithDelay(Double)
}

/// Decides, after an attempt failed (an error, or a status ≥ 400), whether to send it again.
public protocol RequestRetrier: Sendable {
    /// Decides whether the failed attempt is sent again, and when.
    ///
    /// - Parameters:
    ///   - task: the task whose attempt failed.
    ///   - request: the request of the failed attempt (after adaptation).
    ///   - response: its response head, if one arrived.
    ///   - error: the engine's error, nil when a response arrived.
    ///   - retryCount: how many retries the task had so far.
    func retry(
        _ task: SessionTask,
        request: HTTPClientRequest,
        response: HawserResponse?,
        error: HawserError?,
        retryCount: Int
    ) async -> RetryDecision
}

/// Both: set one on ``SessionManager/interceptor``. Each half has a do-nothing default.
public protocol RequestInterceptor: RequestAdapter, RequestRetrier {}

extension RequestInterceptor {
    public func adapt(_ request: HTTPClientRequest, for task: SessionTask) async throws -> HTTPClientRequest { request }
    public func retry(
        _ task: SessionTask,
        request: HTTPClientRequest,
        response: HawserResponse?,
        error: HawserError?,
        retryCount: Int
    ) async -> RetryDecision { .doNotRetry }
}

/// Chains adapters (in order, each gets the previous one's output) and retriers (the first that
/// does not answer ``RetryDecision/doNotRetry`` decides).
public struct Interceptor: RequestInterceptor {
    /// The adapters, run in order before each attempt, each on the previous one's output.
    public var adapters: [any RequestAdapter]
    /// The retriers, asked in order after a failed attempt; the first that does not answer
    /// ``RetryDecision/doNotRetry`` decides.
    public var retriers: [any RequestRetrier]

    /// Creates an interceptor from adapters and retriers; none of either by default.
    public init(adapters: [any RequestAdapter] = [], retriers: [any RequestRetrier] = []) {
        self.adapters = adapters
        self.retriers = retriers
    }

    public func adapt(_ request: HTTPClientRequest, for task: SessionTask) async throws -> HTTPClientRequest {
        var r = request
        for a in self.adapters { r = try await a.adapt(r, for: task) }
        return r
    }

    public func retry(
        _ task: SessionTask,
        request: HTTPClientRequest,
        response: HawserResponse?,
        error: HawserError?,
        retryCount: Int
    ) async -> RetryDecision {
        for r in self.retriers {
            let d = await r.retry(task, request: request, response: response, error: error, retryCount: retryCount)
            if d != .doNotRetry { return d }
        }
        return .doNotRetry
    }
}

/// Retries idempotent requests that failed in a transient way, with exponential back-off:
/// the n-th retry waits `exponentialBackoffScale × exponentialBackoffBase^n` seconds, or the
/// server's `Retry-After` (in seconds) when that is longer.
public struct RetryPolicy: RequestInterceptor {
    /// Retries per task at most. Default 2.
    public var retryLimit: Int
    /// The factor each further delay grows by. Default 2 (0.5 s, 1 s, 2 s…); values below 1 count as 1.
    public var exponentialBackoffBase: Double
    /// Seconds of the first delay. Default 0.5.
    public var exponentialBackoffScale: Double
    /// Only these methods are retried (RFC 9110 §9.2.2's idempotent methods by default).
    public var retryableMethods: Set<HTTPMethod>
    /// Responses with these statuses are retried (408, 429, 500, 502, 503, 504 by default).
    public var retryableStatusCodes: Set<Int>
    /// Engine errors with these codes are retried (lost or failed connections, timeouts, DNS).
    public var retryableErrorCodes: Set<HawserError.Code>

    /// Creates a policy; each parameter sets the property of the same name, with the defaults
    /// documented there. Negative counts and scales count as 0.
    public init(
        retryLimit: Int = 2,
        exponentialBackoffBase: Double = 2,
        exponentialBackoffScale: Double = 0.5,
        retryableMethods: Set<HTTPMethod> = [.get, .head, .put, .delete, .options, .trace],
        retryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504],
        retryableErrorCodes: Set<HawserError.Code> = [
            .connectionLost, .cannotConnect, .connectTimeout,
            .idleTimeout, .cannotResolveHost,
        ]
    ) {
        self.retryLimit = max(0, retryLimit)
        self.exponentialBackoffBase = max(1, exponentialBackoffBase)
        self.exponentialBackoffScale = max(0, exponentialBackoffScale)
        self.retryableMethods = retryableMethods
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableErrorCodes = retryableErrorCodes
    }

    /// The delay before retry number `retryCount + 1`.
    public func delay(forRetry retryCount: Int, response: HawserResponse?) -> Double {
        let backoff = self.exponentialBackoffScale * pow(self.exponentialBackoffBase, Double(retryCount))
        let retryAfter = response?.headers["Retry-After"].flatMap { Double(Substring($0).trimmingOWS()) } ?? 0
        return max(backoff, min(retryAfter, 3600))
    }

    public func retry(
        _ task: SessionTask,
        request: HTTPClientRequest,
        response: HawserResponse?,
        error: HawserError?,
        retryCount: Int
    ) async -> RetryDecision {
        guard retryCount < self.retryLimit, self.retryableMethods.contains(request.method) else { return .doNotRetry }
        let transient: Bool
        if let error {
            transient = self.retryableErrorCodes.contains(error.code)
        } else if let status = response?.statusCode {
            transient = self.retryableStatusCodes.contains(status)
        } else {
            transient = false
        }
        guard transient else { return .doNotRetry }
        let d = self.delay(forRetry: retryCount, response: response)
        return d > 0 ? .retryWithDelay(d) : .retry
    }
}

/// The authentication-refresh pattern: every request gets the current token; a request that comes
/// back 401 with the token that is current triggers one refresh, requests adapted meanwhile wait
/// for it, and the failed requests are replayed with the new token. A request that failed with an
/// older token is replayed at once. A task is replayed at most `maximumReplays` times.
public final class AuthenticationInterceptor: RequestInterceptor, @unchecked Sendable {
    /// Produces a new token; gets the token that was refused (nil when there was none).
    public typealias Refresh = @Sendable (_ refusedToken: String?) async throws -> String

    private struct State {
        var token: String?
        var refreshing: Task<String, any Error>?
        var refreshCount = 0
    }
    private let state: Locked<State>
    private let refresh: Refresh
    /// The header the token goes in. Default `Authorization`.
    public let headerName: String
    /// Put before the token. Default `Bearer `.
    public let prefix: String
    /// How many times one task may be replayed after refreshes. Default 1.
    public let maximumReplays: Int
    private let isAuthenticationFailure: @Sendable (HawserResponse) -> Bool

    /// Creates an interceptor.
    ///
    /// - Parameters:
    ///   - token: the current token; nil to have the first 401 fetch one.
    ///   - headerName: the header the token goes in; `Authorization` by default.
    ///   - prefix: put before the token; `Bearer ` by default.
    ///   - maximumReplays: how many times one task may be replayed after refreshes; 1 by default.
    ///   - isAuthenticationFailure: which responses mean the token was refused; status 401 by default.
    ///   - refresh: produces a new token from the refused one; its error fails the waiting tasks.
    public init(
        token: String?,
        headerName: String = "Authorization",
        prefix: String = "Bearer ",
        maximumReplays: Int = 1,
        isAuthenticationFailure: @escaping @Sendable (HawserResponse) -> Bool = { $0.statusCode == 401 },
        refresh: @escaping Refresh
    ) {
        self.state = Locked(State(token: token))
        self.headerName = headerName
        self.prefix = prefix
        self.maximumReplays = maximumReplays
        self.isAuthenticationFailure = isAuthenticationFailure
        self.refresh = refresh
    }

    /// The token requests get now.
    public var token: String? { self.state.withLock { $0.token } }
    /// How many refreshes ran.
    public var refreshCount: Int { self.state.withLock { $0.refreshCount } }

    public func adapt(_ request: HTTPClientRequest, for task: SessionTask) async throws -> HTTPClientRequest {
        let pending = self.state.withLock { $0.refreshing }
        let token: String?
        if let pending { token = try await pending.value } else { token = self.token }
        var r = request
        if let token { r.headers.replaceOrAdd(name: self.headerName, value: self.prefix + token) }
        return r
    }

    public func retry(
        _ task: SessionTask,
        request: HTTPClientRequest,
        response: HawserResponse?,
        error: HawserError?,
        retryCount: Int
    ) async -> RetryDecision {
        guard let response, self.isAuthenticationFailure(response), retryCount < self.maximumReplays else {
            return .doNotRetry
        }
        let sent = request.headers[self.headerName].map {
            $0.hasPrefix(self.prefix) ? String($0.dropFirst(self.prefix.count)) : $0
        }
        let refreshTask = self.state.withLock { s -> Task<String, any Error>? in
            if let r = s.refreshing { return r }
            if let current = s.token, current != sent { return nil }  // already refreshed since this request went out
            s.refreshCount += 1
            let refresh = self.refresh
            let t = Task<String, any Error> { try await refresh(sent) }
            s.refreshing = t
            return t
        }
        guard let refreshTask else { return .retry }
        do {
            let token = try await refreshTask.value
            self.state.withLock { s in
                if s.refreshing == refreshTask {
                    s.token = token
                    s.refreshing = nil
                }
            }
            return .retry
        } catch {
            self.state.withLock { s in if s.refreshing == refreshTask { s.refreshing = nil } }
            return .doNotRetry
        }
    }
}
