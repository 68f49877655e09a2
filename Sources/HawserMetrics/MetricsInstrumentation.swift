// Request metrics and pool gauges (swift-metrics) over HawserCore's RequestInstrumentation hook.
// The metric objects are made once, when the instrumentation is made; a request costs one small
// observer, a counter increment and a timer record (and an error counter when it fails).
import HawserCore
import Metrics

/// Counts a session's requests and times them with swift-metrics.
///
/// ```swift
/// var configuration = SessionConfiguration()
/// configuration.instrumentation = MetricsInstrumentation()   // MetricsSystem.factory
/// ```
///
/// Metrics (each with the `dimensions` given at creation):
/// - `hawser.client.requests` (counter): tasks started.
/// - `hawser.client.errors` (counter, dimension `error.type`: the `HawserError` code, such as
///   `cannotConnect`): tasks that ended with an error. A 4xx or 5xx response is a response, not
///   an error.
/// - `hawser.client.request.duration` (timer, nanoseconds): from the task's start to its end,
///   redirects and retries included, failures too.
/// - `hawser.pool.connections.open` and `hawser.pool.connections.idle` (gauges): the session's
///   open connections and how many of them are idle, recorded whenever they change. Give each
///   session its own `dimensions` when several report to one factory.
public struct MetricsInstrumentation: RequestInstrumentation {
    /// The factory every metric is made with.
    public let factory: any MetricsFactory
    /// Dimensions added to every metric.
    public let dimensions: [(String, String)]
    private let requests: Counter
    private let duration: Timer
    private let openConnections: Gauge
    private let idleConnections: Gauge

    /// Metrics made with `factory` (by default the one bootstrapped in `MetricsSystem`), each
    /// with `dimensions`.
    public init(factory: any MetricsFactory = MetricsSystem.factory, dimensions: [(String, String)] = []) {
        self.factory = factory
        self.dimensions = dimensions
        self.requests = Counter(label: "hawser.client.requests", dimensions: dimensions, factory: factory)
        self.duration = Timer(label: "hawser.client.request.duration", dimensions: dimensions, factory: factory)
        self.openConnections = Gauge(label: "hawser.pool.connections.open", dimensions: dimensions, factory: factory)
        self.idleConnections = Gauge(label: "hawser.pool.connections.idle", dimensions: dimensions, factory: factory)
    }

    /// Counts the task and watches it to its end.
    public func observe(_ request: HTTPClientRequest) -> (any RequestObserver)? {
        self.requests.increment()
        return RequestMetricsObserver(instrumentation: self)
    }

    /// Records the pool's open and idle connections.
    public func poolCountsChanged(_ counts: PoolCounts) {
        self.openConnections.record(counts.open)
        self.idleConnections.record(counts.idle)
    }

    /// Records a finished task.
    fileprivate func completed(error: HawserError?, metrics: TaskMetrics) {
        if let end = metrics.responseEnd, end >= metrics.fetchStart {
            self.duration.recordNanoseconds(end - metrics.fetchStart)
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

/// Waits for one task's end.
final class RequestMetricsObserver: RequestObserver {
    private let instrumentation: MetricsInstrumentation

    init(instrumentation: MetricsInstrumentation) { self.instrumentation = instrumentation }

    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics) {
        self.instrumentation.completed(error: error, metrics: metrics)
    }
}
