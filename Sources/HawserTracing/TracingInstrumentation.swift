import HawserCore
import Tracing

// A client span per request (swift-distributed-tracing), with OpenTelemetry's HTTP client
// semantic conventions, over HawserCore's RequestInstrumentation hook. The span starts on the
// thread that calls `Session.execute`, as a child of that thread's current ServiceContext; its
// context goes into the request head through the tracer's injector (W3C `traceparent` with an
// OpenTelemetry tracer).
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Traces a session's requests: one `client` span per task, named after the method.
///
/// Set it as the session's instrumentation:
///
/// ```swift
/// var configuration = SessionConfiguration()
/// configuration.instrumentation = TracingInstrumentation()   // InstrumentationSystem.tracer
/// ```
///
/// Attributes (OpenTelemetry HTTP client conventions): `http.request.method`, `url.full` (without
/// user name and password, query values written by ``queryLogging``), `url.scheme`, `server.address`, `server.port`,
/// `network.peer.address` and `network.peer.port` (the connection's peer), `http.response.status_code`,
/// `http.request.resend_count` (exchanges after the first: redirects, retries, credentials) and
/// `error.type` (a `HawserError` code such as `cannotConnect`, or the status code of a 4xx/5xx).
/// Each exchange after the first adds an event: `http.redirect`, `http.retry` or `http.resend`,
/// with the new exchange's `url.full` and `http.request.method`.
public struct TracingInstrumentation: RequestInstrumentation {
    /// The tracer spans are started with and whose injector writes the outgoing fields.
    public let tracer: any Tracer
    /// How query strings appear in `url.full`: values redacted by default (tokens travel in
    /// query strings, and spans are exported to systems many people read).
    public let queryLogging: QueryLogging

    /// Traces with `tracer`; by default the one bootstrapped in `InstrumentationSystem`
    /// (a no-op tracer until the application bootstraps one).
    ///
    /// - Parameters:
    ///   - tracer: the tracer spans are started with.
    ///   - queryLogging: how query strings appear in `url.full`; values redacted by default.
    public init(tracer: any Tracer = InstrumentationSystem.tracer, queryLogging: QueryLogging = .redactingValues) {
        self.tracer = tracer
        self.queryLogging = queryLogging
    }

    /// Starts the task's span as a child of the caller's current `ServiceContext` and asks the
    /// tracer which fields carry its context.
    public func observe(_ request: HTTPClientRequest) -> (any RequestObserver)? {
        let parent = ServiceContext.current ?? .topLevel
        let method = request.method.rawValue
        let span = self.tracer.startSpan(method, context: parent, ofKind: .client)
        var attributes = span.attributes
        attributes["http.request.method"] = method
        attributes["url.full"] = request.urlForLogs(self.queryLogging)
        if let scheme = request.url.scheme { attributes["url.scheme"] = scheme }
        if let host = request.url.host { attributes["server.address"] = host }
        if let port = request.url.port ?? Self.defaultPort(request.url.scheme) { attributes["server.port"] = port }
        span.attributes = attributes
        var carrier = HeaderCarrier()
        self.tracer.inject(span.context, into: &carrier, using: HeaderInjector())
        return SpanObserver(span: span, headerFields: carrier.fields, queryLogging: self.queryLogging)
    }

    private static func defaultPort(_ scheme: String?) -> Int? {
        switch scheme?.lowercased() {
        case "http"?: return 80
        case "https"?: return 443
        default: return nil
        }
    }
}

/// The fields a tracer's injector wrote.
struct HeaderCarrier: Sendable {
    var fields: [(name: String, value: String)] = []
}

/// Writes a tracer's fields into a ``HeaderCarrier`` (a field it writes twice keeps the last value).
struct HeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HeaderCarrier) {
        if let i = carrier.fields.firstIndex(where: { $0.name.lowercased() == key.lowercased() }) {
            carrier.fields[i].value = value
        } else {
            carrier.fields.append((key, value))
        }
    }
}

/// One task's span. Its mutable state is touched on the session's loop only.
final class SpanObserver: RequestObserver, @unchecked Sendable {
    let span: any Span
    let headerFields: [(name: String, value: String)]
    let queryLogging: QueryLogging

    init(span: any Span, headerFields: [(name: String, value: String)], queryLogging: QueryLogging) {
        self.span = span
        self.headerFields = headerFields
        self.queryLogging = queryLogging
    }

    func exchangeStarted(_ exchange: ExchangeInfo) {
        var attributes = self.span.attributes
        if let peer = exchange.remoteAddress, peer.unixPath == nil {
            attributes["network.peer.address"] = peer.ipAddress
            attributes["network.peer.port"] = peer.port
        }
        if exchange.resendCount > 0 {
            attributes["http.request.resend_count"] = exchange.resendCount
        }
        self.span.attributes = attributes
        let name: String
        switch exchange.reason {
        case .initial: return
        case .redirect: name = "http.redirect"
        case .retry: name = "http.retry"
        case .resend: name = "http.resend"
        }
        self.span.addEvent(
            SpanEvent(
                name: name,
                attributes: [
                    "url.full": .string(exchange.request.urlForLogs(self.queryLogging)),
                    "http.request.method": .string(exchange.request.method.rawValue),
                ]
            )
        )
    }

    func receivedHead(_ head: HTTPResponseHead) {
        self.span.attributes["http.response.status_code"] = head.status
    }

    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics) {
        if let error {
            let type = "\(error.code)"
            self.span.attributes["error.type"] = type
            self.span.recordError(error)
            self.span.setStatus(SpanStatus(code: .error, message: type))
        } else if let status, status >= 400 {
            // OpenTelemetry: a client span with a 4xx or 5xx response is an error.
            self.span.attributes["error.type"] = "\(status)"
            self.span.setStatus(SpanStatus(code: .error))
        }
        self.span.end()
    }
}
