// Running a load: the engines start their connections on their loops, and this file's ticker,
// on the calling thread, takes each loop's numbers four times a second for the per-second
// timeline, the --hdr-out intervals and the live line, then gathers the totals at the end.
import HawserCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An engine's side of a run, as the ticker sees it.
protocol LoadEngine: AnyObject {
    /// One recorder per loop, and the loop that owns it.
    var recorders: [(EventLoop, LoadRecorder)] { get }
    /// Starts every connection; `onDone` runs (on some loop) when the last one has finished.
    func start(at origin: UInt64, onDone: @escaping @Sendable () -> Void)
    /// Stops every connection now (the -d deadline); requests in flight are dropped.
    func stop()
    /// Closes everything (after the totals were taken).
    func shutdown()
    /// Runs `body` on recorder `index` where reading it is safe (by default on the loop that
    /// owns it).
    func read<T: Sendable>(_ index: Int, _ body: @escaping @Sendable (LoadRecorder) -> T) -> T
}

extension LoadEngine {
    func read<T: Sendable>(_ index: Int, _ body: @escaping @Sendable (LoadRecorder) -> T) -> T {
        let (loop, recorder) = self.recorders[index]
        return (try? loop.submitAndWait { body(recorder) }) ?? body(recorder)
    }
}

/// Set once, by whichever thread finishes the run; waited on with a timeout by the ticker.
final class LoadCompletion: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var cond = pthread_cond_t()
    private var doneAt: UInt64?

    init() {
        pthread_mutex_init(&self.mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(&self.cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    func finish() {
        let now = TaskMetrics.now()
        pthread_mutex_lock(&self.mutex)
        if self.doneAt == nil { self.doneAt = now }
        pthread_cond_broadcast(&self.cond)
        pthread_mutex_unlock(&self.mutex)
    }

    /// Waits until finished or until the monotonic time `deadline` (ns); returns when it finished.
    func wait(until deadline: UInt64) -> UInt64? {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        pthread_mutex_lock(&self.mutex)
        while self.doneAt == nil {
            if pthread_cond_timedwait(&self.cond, &self.mutex, &ts) == ETIMEDOUT { break }
        }
        let d = self.doneAt
        pthread_mutex_unlock(&self.mutex)
        return d
    }
}

/// What a finished run measured, before it becomes a LoadReport.
struct LoadRunResult {
    var startedAt: Double
    var elapsedSeconds: Double
    var requests: UInt64 = 0
    var bytes: UInt64 = 0
    var status: [Int: UInt64] = [:]
    var errors: [LoadErrorKind: LoadErrorCount] = [:]
    var corrected = LatencyHistogram()
    var uncorrected = LatencyHistogram()
    var timeline: [LoadSecond] = []
    var intervals: [LoadInterval] = []
}

/// The ticker: per-second accounting from the loops' deltas.
struct LoadTimeline {
    let keepIntervals: Bool
    private(set) var seconds: [LoadSecond] = []
    private(set) var intervals: [LoadInterval] = []
    /// Corrected latencies of the whole run so far (the live line's percentiles).
    private(set) var soFar = LatencyHistogram()
    private var second = LatencyHistogram()
    private var last = (requests: UInt64(0), errors: UInt64(0), bytes: UInt64(0))
    private var secondStart = (requests: UInt64(0), errors: UInt64(0), bytes: UInt64(0))
    private(set) var totals = (requests: UInt64(0), errors: UInt64(0), bytes: UInt64(0))

    init(keepIntervals: Bool) { self.keepIntervals = keepIntervals }

    /// Adds the deltas of every loop (cumulative counters, latencies since the last take).
    mutating func add(_ deltas: [LoadRecorder.Delta]) {
        var t = (requests: UInt64(0), errors: UInt64(0), bytes: UInt64(0))
        for d in deltas {
            t.requests += d.requests
            t.errors += d.errors
            t.bytes += d.bytes
            self.second.add(d.recent)
            self.soFar.add(d.recent)
        }
        self.totals = t
    }

    /// Closes second number `seconds.count`, `length` seconds long (1 but for the last).
    mutating func closeSecond(length: Double) {
        let s = self.seconds.count
        let h = self.second
        self.seconds.append(
            LoadSecond(
                second: s,
                requests: self.totals.requests - self.secondStart.requests,
                errors: self.totals.errors - self.secondStart.errors,
                bytes: self.totals.bytes - self.secondStart.bytes,
                p50: h.totalCount == 0 ? 0 : h.value(atPercentile: 50),
                p99: h.totalCount == 0 ? 0 : h.value(atPercentile: 99),
                max: h.totalCount == 0 ? 0 : h.maxValue
            )
        )
        if self.keepIntervals {
            self.intervals.append(LoadInterval(startSeconds: Double(s), lengthSeconds: length, histogram: h))
        }
        self.second.reset()
        self.secondStart = self.totals
    }
}

enum LoadRunner {
    static let tick: UInt64 = 250_000_000

    /// Runs `engine` for `duration` seconds (nil: until its connections have sent their quota),
    /// calling `live` after each tick with the elapsed seconds and the timeline so far.
    static func run(
        _ engine: any LoadEngine,
        duration: Double?,
        keepIntervals: Bool,
        live: ((Double, LoadTimeline) -> Void)?
    ) -> LoadRunResult {
        let completion = LoadCompletion()
        let wallStart = Self.unixTime()
        let origin = TaskMetrics.now()
        engine.start(at: origin) { completion.finish() }
        let deadline = duration.map { origin + UInt64($0 * 1e9) }
        var timeline = LoadTimeline(keepIntervals: keepIntervals)
        var ticks: UInt64 = 0
        var finishedAt: UInt64?
        while finishedAt == nil {
            ticks += 1
            var wake = origin + ticks * Self.tick
            if let d = deadline, wake >= d { wake = d }
            finishedAt = completion.wait(until: wake)
            if finishedAt == nil, let d = deadline, TaskMetrics.now() >= d {
                engine.stop()
                finishedAt = completion.wait(until: UInt64.max) ?? TaskMetrics.now()
            }
            guard finishedAt == nil else { break }
            timeline.add(Self.deltas(engine))
            if ticks % 4 == 0 { timeline.closeSecond(length: 1) }
            live?(Double(TaskMetrics.now() - origin) / 1e9, timeline)
        }
        let end = finishedAt!
        let elapsed = Double(end - origin) / 1e9
        timeline.add(Self.deltas(engine))
        let partial = elapsed - Double(timeline.seconds.count)
        if partial > 0.001 || timeline.seconds.isEmpty { timeline.closeSecond(length: max(partial, 0.001)) }

        var r = LoadRunResult(startedAt: wallStart, elapsedSeconds: elapsed)
        for index in engine.recorders.indices {
            let box = Self.totals(engine, index)
            r.requests += box.requests
            r.bytes += box.bytes
            r.corrected.add(box.corrected)
            r.uncorrected.add(box.uncorrected)
            for (code, n) in box.status { r.status[code, default: 0] += n }
            for (kind, e) in box.errors {
                if r.errors[kind] == nil { r.errors[kind] = e } else { r.errors[kind]!.count += e.count }
            }
        }
        r.timeline = timeline.seconds
        r.intervals = timeline.intervals
        engine.shutdown()
        return r
    }

    struct Totals: Sendable {
        var requests: UInt64
        var bytes: UInt64
        var corrected: LatencyHistogram
        var uncorrected: LatencyHistogram
        var status: [Int: UInt64]
        var errors: [LoadErrorKind: LoadErrorCount]
    }

    static func totals(_ engine: any LoadEngine, _ index: Int) -> Totals {
        engine.read(index) { recorder in
            Totals(
                requests: recorder.requests,
                bytes: recorder.bytes,
                corrected: recorder.corrected,
                uncorrected: recorder.uncorrectedLatencies,
                status: recorder.status,
                errors: recorder.errors
            )
        }
    }

    static func deltas(_ engine: any LoadEngine) -> [LoadRecorder.Delta] {
        engine.recorders.indices.map { index in engine.read(index) { $0.takeDelta() } }
    }

    static func unixTime() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
