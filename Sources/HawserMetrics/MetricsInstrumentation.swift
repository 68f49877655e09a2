// Request metrics and pool gauges (swift-metrics) over HawserCore's RequestInstrumentation hook.
// The metric objects are made once per method and status class and kept; a request costs one
// small observer, a lock-guarded look-up, a counter increment and a timer record (and an error
// counter when it fails).
import HawserCore
import Metrics
import Synchronization

/// Counts a session's requests and times them with swift-metrics.
///
/// ```swift
/// var configuration = SessionConfiguration()
/// configuration.instrumentation = MetricsInstrumentation()   // MetricsSystem.factory
/// ```
///
/// Metrics (each with the `dimensions` given at creation):
/// - `hawser.client.requests` (counter, dimensions `http.request.method` and
///   `http.response.status_class`): tasks that ended. The method is one of the nine of RFC 9110
///   (and PATCH), or `_OTHER` (OpenTelemetry's rule, so a caller's custom methods cannot grow the
///   number of series); the status class is `1xx` to `5xx` from the final response, or `none`
///   when the task ended without one.
/// - `hawser.client.errors` (counter, dimension `error.type`: the `HawserError` code, such as
///   `cannotConnect`): tasks that ended with an error. A 4xx or 5xx response is a response, not
///   an error.
/// - `hawser.client.request.duration` (timer, nanoseconds, the same method and status-class
///   dimensions): from the task's start to its end, redirects and retries included, failures too.
/// - `hawser.pool.connections.open` and `hawser.pool.connections.idle` (gauges): the session's
///   open connections and how many of them are idle, recorded whenever they change. Give each
///   session its own `dimensions` when several report to one factory.
public struct MetricsInstrumentation: RequestInstrumentation {
    /// The factory every metric is made with.
    public let factory: any MetricsFactory
    /// Dimensions added to every metric.
    public let dimensions: [(String, String)]
    private let series: SeriesCache
    private let openConnections: Gauge
    private let idleConnections: Gauge

    /// Metrics made with `factory` (by default the one bootstrapped in `MetricsSystem`), each
    /// with `dimensions`.
    public init(factory: any MetricsFactory = MetricsSystem.factory, dimensions: [(String, String)] = []) {
        self.factory = factory
        self.dimensions = dimensions
        self.series = SeriesCache(factory: factory, dimensions: dimensions)
        self.openConnections = Gauge(label: "hawser.pool.connections.open", dimensions: dimensions, factory: factory)
        self.idleConnections = Gauge(label: "hawser.pool.connections.idle", dimensions: dimensions, factory: factory)
    }

    /// Watches the task to its end, where it is counted and timed.
    public func observe(_ request: HTTPClientRequest) -> (any RequestObserver)? {
        RequestMetricsObserver(instrumentation: self, method: MethodDimension(request.method.rawValue))
    }

    /// Records the pool's open and idle connections.
    public func poolCountsChanged(_ counts: PoolCounts) {
        self.openConnections.record(counts.open)
        self.idleConnections.record(counts.idle)
    }

    /// Records a finished task.
    fileprivate func completed(method: MethodDimension, error: HawserError?, status: Int?, metrics: TaskMetrics) {
        let statusClass = StatusClassDimension(status)
        let (requests, duration) = self.series.metrics(method: method, statusClass: statusClass)
        requests.increment()
        if let end = metrics.responseEnd, end >= metrics.fetchStart {
            duration.recordNanoseconds(end - metrics.fetchStart)
        }
        if let error {
            Counter(
                label: "hawser.client.errors",
                dimensions: self.dimensions + [("error.type", "\(error.code)")],
                factory: self.factory
            ).increment()
        }
    }
}

/// The `http.request.method` dimension: a known method, or `_OTHER`.
struct MethodDimension: Hashable, Sendable {
    static let known = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]
    let index: Int  // into `known`; `known.count` for _OTHER

    init(_ method: String) { self.index = Self.known.firstIndex(of: method) ?? Self.known.count }

    var value: String { self.index < Self.known.count ? Self.known[self.index] : "_OTHER" }
}

/// The `http.response.status_class` dimension: `1xx` … `5xx`, or `none`.
struct StatusClassDimension: Hashable, Sendable {
    let index: Int  // 1...5, or 0 for none

    init(_ status: Int?) {
        if let status, (100...599).contains(status) { self.index = status / 100 } else { self.index = 0 }
    }

    var value: String { self.index == 0 ? "none" : "\(self.index)xx" }
}

/// The request counter and duration timer of each method and status class, made on first use.
final class SeriesCache: Sendable {
    private let factory: any MetricsFactory
    private let dimensions: [(String, String)]
    private let made = Mutex<[Int: (Counter, Timer)]>([:])

    init(factory: any MetricsFactory, dimensions: [(String, String)]) {
        self.factory = factory
        self.dimensions = dimensions
    }

    func metrics(method: MethodDimension, statusClass: StatusClassDimension) -> (Counter, Timer) {
        let key = method.index * 8 + statusClass.index
        if let found = self.made.withLock({ $0[key] }) { return found }
        let dims =
            self.dimensions + [
                ("http.request.method", method.value), ("http.response.status_class", statusClass.value),
            ]
        let pair = (
            Counter(label: "hawser.client.requests", dimensions: dims, factory: self.factory),
            Timer(label: "hawser.client.request.duration", dimensions: dims, factory: self.factory)
        )
        return self.made.withLock { made in
            if let found = made[key] { return found }
            made[key] = pair
            return pair
        }
    }
}

/// Waits for one task's end.
final class RequestMetricsObserver: RequestObserver {
    private let instrumentation: MetricsInstrumentation
    private let method: MethodDimension

    init(instrumentation: MetricsInstrumentation, method: MethodDimension) {
        self.instrumentation = instrumentation
        self.method = method
    }

    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics) {
        self.instrumentation.completed(method: self.method, error: error, status: status, metrics: metrics)
    }
}
