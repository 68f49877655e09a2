import HawserBase
import HawserHTTP1
import HawserPosix

// The hook tracing and metrics (HawserTracing, HawserMetrics, or an application's own) plug into.
// It costs nothing when unused: the session keeps an optional, and a task without an observer
// checks one nil per event. Nothing here depends on a package.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Watches a session's requests: the hook tracing and metrics plug into
/// (`SessionConfiguration.instrumentation`).
///
/// For each task the session asks ``observe(_:)`` once, on the thread that calls
/// `Session.execute` (so task-local values such as a tracing context are the caller's), and
/// calls the returned ``RequestObserver`` on the session's event loop from then on. A task for
/// which it returns nil costs nothing more.
public protocol RequestInstrumentation: Sendable {
    /// Starts watching a task that is about to run `request`; nil to leave it alone.
    func observe(_ request: HTTPClientRequest) -> (any RequestObserver)?

    /// The session's pool changed its counts (a connection opened, went idle, was reused or
    /// closed). Called on the event loop, only when a count changed; the default does nothing.
    /// Of a session over several loops, the counts are the sums over its loops, told in order
    /// (from whichever loop changed them, one call at a time).
    func poolCountsChanged(_ counts: PoolCounts)
}

extension RequestInstrumentation {
    /// Does nothing.
    public func poolCountsChanged(_ counts: PoolCounts) {}
}

/// The connection counts of a session's pool, as ``RequestInstrumentation`` sees them.
public struct PoolCounts: Sendable, Hashable {
    /// Connections open, in use or idle.
    public var open: Int
    /// Open connections with no task, kept alive for reuse.
    public var idle: Int

    /// Counts of `open` connections of which `idle` are idle.
    public init(open: Int, idle: Int) {
        self.open = open
        self.idle = idle
    }
}

/// Why an exchange (one request head on the wire) of a task started.
public enum ExchangeReason: Sendable, Hashable {
    /// The task's first exchange.
    case initial
    /// A redirect was followed (3xx): the request went to the redirect's location.
    case redirect
    /// The request was replayed on a new connection after a reused one closed under it.
    case retry
    /// The request was sent again as the server's answer asked: with credentials after a
    /// 401/407, or without `Expect: 100-continue` after a 417.
    case resend
}

/// One exchange of a task, as ``RequestObserver/exchangeStarted(_:)`` reports it.
public struct ExchangeInfo: Sendable {
    /// Why this exchange started.
    public var reason: ExchangeReason
    /// Exchanges of the task before this one (0 for the first): OpenTelemetry's resend count.
    public var resendCount: Int
    /// The request as it is now (a redirect changes its URL and perhaps its method).
    public var request: HTTPClientRequest
    /// The head as written to the socket, credentials included: redact before showing it.
    public var wireHead: [UInt8]
    /// The peer the connection goes to (the proxy, when there is one); nil for a Unix socket.
    public var remoteAddress: SocketAddress?
    /// Whether the exchange runs on a kept-alive connection.
    public var reusedConnection: Bool
    /// Cookies the jar matched for this request but left out of its `Cookie` field, because
    /// the field reached the jar's caps (`CookieJar.maxCookieHeaderBytes`,
    /// `CookieJar.maxCookiesPerRequest`); nil when none was. The session's logger warns.
    public var cookiesLeftOut: CookiesLeftOut?

    /// Describes an exchange.
    public init(
        reason: ExchangeReason,
        resendCount: Int,
        request: HTTPClientRequest,
        wireHead: [UInt8],
        remoteAddress: SocketAddress?,
        reusedConnection: Bool,
        cookiesLeftOut: CookiesLeftOut? = nil
    ) {
        self.reason = reason
        self.resendCount = resendCount
        self.request = request
        self.wireHead = wireHead
        self.remoteAddress = remoteAddress
        self.reusedConnection = reusedConnection
        self.cookiesLeftOut = cookiesLeftOut
    }
}

/// Cookies left out of a request's `Cookie` field by the jar's caps (the defence against a
/// "cookie header bomb": many large cookies set for a parent domain would otherwise make every
/// request to its hosts too large to be accepted).
public struct CookiesLeftOut: Sendable, Hashable {
    /// Cookies the field carries.
    public var sent: Int
    /// Matching cookies left out: the first that would have passed a cap, and every one after
    /// it in RFC 6265's order (shorter paths, then newer cookies).
    public var omitted: Int
    /// The cap on the field line's bytes (`Cookie: …`, without CRLF).
    public var maxBytes: Int
    /// The cap on the number of cookies.
    public var maxCount: Int

    /// What was sent and left out, under which caps.
    public init(sent: Int, omitted: Int, maxBytes: Int, maxCount: Int) {
        self.sent = sent
        self.omitted = omitted
        self.maxBytes = maxBytes
        self.maxCount = maxCount
    }
}

/// Watches one task (made by ``RequestInstrumentation/observe(_:)``). Every method but
/// ``headerFields`` is called on the session's event loop, in order: an exchange starts, its
/// head arrives, perhaps another exchange (a redirect, a retry, credentials), and one completion.
public protocol RequestObserver: AnyObject, Sendable {
    /// Fields added to every head of the task unless the request sets them itself (a tracing
    /// `traceparent`). Read when a head is encoded: on the caller's thread for the first,
    /// on the loop for a redirect's.
    var headerFields: [(name: String, value: String)] { get }

    /// A request head is about to be written.
    func exchangeStarted(_ exchange: ExchangeInfo)

    /// A final (non-1xx) response head arrived: also the 3xx of a redirect and the 401/407 of a
    /// challenge, before the task decides what to do with it.
    func receivedHead(_ head: HTTPResponseHead)

    /// The task ended, exactly once: `error` nil on success; `status` the last final status, if
    /// any arrived (also on a failure after a head); `metrics` the task's.
    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics)
}

extension RequestObserver {
    /// No fields.
    public var headerFields: [(name: String, value: String)] { [] }
    /// Does nothing.
    public func exchangeStarted(_ exchange: ExchangeInfo) {}
    /// Does nothing.
    public func receivedHead(_ head: HTTPResponseHead) {}
}

/// Several instrumentations as one (tracing and metrics together): each observes every task.
public struct CombinedInstrumentation: RequestInstrumentation {
    /// The instrumentations, in the order they are called.
    public let instrumentations: [any RequestInstrumentation]

    /// Combines `instrumentations`.
    public init(_ instrumentations: [any RequestInstrumentation]) {
        self.instrumentations = instrumentations
    }

    /// Each instrumentation's observer, as one.
    public func observe(_ request: HTTPClientRequest) -> (any RequestObserver)? {
        var observers: [any RequestObserver] = []
        for i in self.instrumentations {
            if let o = i.observe(request) { observers.append(o) }
        }
        switch observers.count {
        case 0: return nil
        case 1: return observers[0]
        default: return FanOutObserver(observers)
        }
    }

    /// Tells each instrumentation.
    public func poolCountsChanged(_ counts: PoolCounts) {
        for i in self.instrumentations { i.poolCountsChanged(counts) }
    }
}

/// Several observers of one task (the logging observer and an instrumentation's, or a
/// ``CombinedInstrumentation``'s).
final class FanOutObserver: RequestObserver {
    let observers: [any RequestObserver]

    init(_ observers: [any RequestObserver]) { self.observers = observers }

    var headerFields: [(name: String, value: String)] { self.observers.flatMap { $0.headerFields } }
    func exchangeStarted(_ exchange: ExchangeInfo) { for o in self.observers { o.exchangeStarted(exchange) } }
    func receivedHead(_ head: HTTPResponseHead) { for o in self.observers { o.receivedHead(head) } }
    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics) {
        for o in self.observers { o.completed(error: error, status: status, metrics: metrics) }
    }
}

extension HTTPClientRequest {
    /// The URL as text without user name and password (what logs and spans show): the rest
    /// (scheme, host, port, path, query) as given.
    public var urlWithoutCredentials: String {
        guard self.url.user != nil || self.url.password != nil,
            var components = URLComponents(url: self.url, resolvingAgainstBaseURL: false)
        else {
            return self.url.absoluteString
        }
        components.user = nil
        components.password = nil
        return components.string ?? self.url.absoluteString
    }

    /// The URL as logs and spans show it: without user name and password, its query string
    /// written by `queryLogging` (values redacted by default, see ``QueryLogging``).
    public func urlForLogs(_ queryLogging: QueryLogging) -> String {
        let url = self.urlWithoutCredentials
        return queryLogging == .verbatim ? url : queryLogging.apply(toTarget: url)
    }
}
