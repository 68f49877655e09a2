// In-memory ends for swift-log, swift-distributed-tracing and swift-metrics: what the library
// emits is recorded here and asserted by the tests (no global bootstrap: each test hands its own
// handler, tracer or factory to the session).
import Logging
import Metrics
import Synchronization
import Tracing

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Logging

/// One recorded log line: level, message, and the logger's metadata merged with the call's.
struct LogLine: Sendable {
    var level: Logger.Level
    var message: String
    var metadata: [String: String]
}

/// Every line logged through its handlers, in order.
final class LogRecorder: Sendable {
    private let storage = Mutex<[LogLine]>([])

    var lines: [LogLine] { self.storage.withLock { $0 } }

    func append(_ line: LogLine) { self.storage.withLock { $0.append(line) } }

    /// A logger at `level` whose lines land here.
    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "test") { _ in RecordingLogHandler(recorder: self) }
        logger.logLevel = level
        return logger
    }
}

struct RecordingLogHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged: [String: String] = [:]
        for (k, v) in self.metadata { merged[k] = "\(v)" }
        for (k, v) in event.metadata ?? [:] { merged[k] = "\(v)" }
        self.recorder.append(LogLine(level: event.level, message: "\(event.message)", metadata: merged))
    }
}

// MARK: - Tracing

/// A span's context key: the span's identifiers, so that a child finds its parent and the
/// injector can write a `traceparent`.
enum TestSpanKey: ServiceContextKey {
    typealias Value = TestSpanIdentity
}

struct TestSpanIdentity: Sendable, Hashable {
    var traceID: String
    var spanID: String
}

/// A tracer that keeps every span it started, and injects W3C `traceparent`.
final class TestTracer: Tracer, Sendable {
    private let storage = Mutex<[TestSpan]>([])
    private let nextID = Atomic<UInt64>(1)

    var spans: [TestSpan] { self.storage.withLock { $0 } }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> ServiceContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> TestSpan {
        let parentContext = context()
        let parent = parentContext[TestSpanKey.self]
        let n = self.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let identity = TestSpanIdentity(
            traceID: parent?.traceID ?? Self.hex(n, digits: 32),
            spanID: Self.hex(n, digits: 16)
        )
        var spanContext = parentContext
        spanContext[TestSpanKey.self] = identity
        let span = TestSpan(operationName: operationName, kind: kind, context: spanContext, parent: parent)
        self.storage.withLock { $0.append(span) }
        return span
    }

    func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract: Extractor, Extract.Carrier == Carrier {}

    func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        guard let identity = context[TestSpanKey.self] else { return }
        injector.inject("00-\(identity.traceID)-\(identity.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func forceFlush() {}

    private static func hex(_ n: UInt64, digits: Int) -> String {
        let s = String(n, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}

/// A span that records what is done to it.
final class TestSpan: Span, Sendable {
    struct State {
        var operationName: String
        var attributes: SpanAttributes = [:]
        var events: [SpanEvent] = []
        var status: SpanStatus?
        var errors: [String] = []
        var ended = false
        var endCount = 0
    }

    let kind: SpanKind
    let context: ServiceContext
    let parent: TestSpanIdentity?
    private let state: Mutex<State>

    init(operationName: String, kind: SpanKind, context: ServiceContext, parent: TestSpanIdentity?) {
        self.kind = kind
        self.context = context
        self.parent = parent
        self.state = Mutex(State(operationName: operationName))
    }

    var snapshot: State { self.state.withLock { $0 } }
    var identity: TestSpanIdentity { self.context[TestSpanKey.self]! }

    var operationName: String {
        get { self.state.withLock { $0.operationName } }
        set { self.state.withLock { $0.operationName = newValue } }
    }

    var attributes: SpanAttributes {
        get { self.state.withLock { $0.attributes } }
        set { self.state.withLock { $0.attributes = newValue } }
    }

    var isRecording: Bool { !self.state.withLock { $0.ended } }

    func setStatus(_ status: SpanStatus) { self.state.withLock { $0.status = status } }
    func addEvent(_ event: SpanEvent) { self.state.withLock { $0.events.append(event) } }
    func recordError<Instant: TracerInstant>(
        _ error: any Error,
        attributes: SpanAttributes,
        at instant: @autoclosure () -> Instant
    ) {
        self.state.withLock { $0.errors.append("\(error)") }
    }
    func addLink(_ link: SpanLink) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        self.state.withLock {
            $0.ended = true
            $0.endCount += 1
        }
    }
}

extension SpanAttributes {
    /// The attribute's value as text (`nil` when unset), for comparisons.
    func text(_ name: String) -> String? {
        guard let value = self.get(name) else { return nil }
        switch value {
        case .string(let s): return s
        case .int64(let i): return String(i)
        case .int32(let i): return String(i)
        case .bool(let b): return String(b)
        default: return "\(value)"
        }
    }
}

// MARK: - Metrics

/// A metrics factory that keeps every metric made, by label and dimensions.
final class TestMetricsFactory: MetricsFactory, Sendable {
    final class TestCounter: CounterHandler, Sendable {
        let value = Atomic<Int64>(0)
        func increment(by amount: Int64) { self.value.wrappingAdd(amount, ordering: .relaxed) }
        func reset() { self.value.store(0, ordering: .relaxed) }
    }

    final class TestRecorder: RecorderHandler, Sendable {
        let values = Mutex<[Double]>([])
        func record(_ value: Int64) { self.values.withLock { $0.append(Double(value)) } }
        func record(_ value: Double) { self.values.withLock { $0.append(value) } }
        var last: Double? { self.values.withLock { $0.last } }
    }

    final class TestTimer: TimerHandler, Sendable {
        let values = Mutex<[Int64]>([])
        func recordNanoseconds(_ duration: Int64) { self.values.withLock { $0.append(duration) } }
    }

    final class TestMeter: MeterHandler, Sendable {
        func set(_ value: Int64) {}
        func set(_ value: Double) {}
        func increment(by: Double) {}
        func decrement(by: Double) {}
    }

    final class TestFloatCounter: FloatingPointCounterHandler, Sendable {
        func increment(by: Double) {}
        func reset() {}
    }

    private struct Made {
        var counters: [String: TestCounter] = [:]
        var recorders: [String: TestRecorder] = [:]
        var timers: [String: TestTimer] = [:]
    }

    private let made = Mutex(Made())

    static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        ([label] + dimensions.map { "\($0.0)=\($0.1)" }).joined(separator: ",")
    }

    func counter(_ label: String, _ dimensions: [(String, String)] = []) -> TestCounter? {
        self.made.withLock { $0.counters[Self.key(label, dimensions)] }
    }
    func recorder(_ label: String, _ dimensions: [(String, String)] = []) -> TestRecorder? {
        self.made.withLock { $0.recorders[Self.key(label, dimensions)] }
    }
    func timer(_ label: String, _ dimensions: [(String, String)] = []) -> TestTimer? {
        self.made.withLock { $0.timers[Self.key(label, dimensions)] }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let key = Self.key(label, dimensions)
        return self.made.withLock { m in
            if let c = m.counters[key] { return c }
            let c = TestCounter()
            m.counters[key] = c
            return c
        }
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        let key = Self.key(label, dimensions)
        return self.made.withLock { m in
            if let r = m.recorders[key] { return r }
            let r = TestRecorder()
            m.recorders[key] = r
            return r
        }
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let key = Self.key(label, dimensions)
        return self.made.withLock { m in
            if let t = m.timers[key] { return t }
            let t = TestTimer()
            m.timers[key] = t
            return t
        }
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { TestMeter() }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        TestFloatCounter()
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
