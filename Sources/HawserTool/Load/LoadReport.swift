// The report of one `hawser load` run (or of several merged): what the driver measured, and
// the numbers the renderers (LoadReportText.swift, LoadReportJSON.swift, LoadReportSVG.swift)
// print from it.

/// The kinds of failed requests `hawser load` counts apart.
enum LoadErrorKind: String, Sendable, CaseIterable, Codable {
    case connect, tls, timeout, reset, `protocol`, other
}

/// How often one kind of error happened, and the message of its first occurrence.
struct LoadErrorCount: Sendable, Equatable {
    var count: UInt64
    var firstMessage: String
}

/// One second of the run (the per-second timeline).
struct LoadSecond: Sendable, Equatable {
    /// 0-based since the start of measurement.
    var second: Int
    /// Responses completed in this second.
    var requests: UInt64
    var errors: UInt64
    /// Response bytes read (head + body) in this second.
    var bytes: UInt64
    /// Corrected latency percentiles of this second, ns (0 when no requests).
    var p50: UInt64
    var p99: UInt64
    var max: UInt64
}

/// One interval for --hdr-out (HdrHistogram interval log): the corrected latencies completed in it.
struct LoadInterval: Sendable {
    var startSeconds: Double
    var lengthSeconds: Double
    var histogram: LatencyHistogram
}

/// Everything one run measured.
struct LoadReport: Sendable {
    var url: String
    var method: String
    var connections: Int
    var threads: Int
    /// -R requests/s; nil = closed loop.
    var targetRate: Double?
    /// Unix time (s) of the first request.
    var startedAt: Double
    var elapsedSeconds: Double
    /// Completed responses, any status.
    var requests: UInt64
    var bytesRead: UInt64
    /// Status code -> count.
    var status: [Int: UInt64]
    var errors: [LoadErrorKind: LoadErrorCount]
    /// From each request's intended send time (open loop); = uncorrected in closed loop.
    var corrected: LatencyHistogram
    /// From the actual send time.
    var uncorrected: LatencyHistogram
    var timeline: [LoadSecond]
    /// Filled only when --hdr-out is given.
    var intervals: [LoadInterval]

    /// The sum of the errors of every kind.
    var errorCount: UInt64 { self.errors.values.reduce(0) { $0 + $1.count } }

    /// Completed responses per second of the run.
    var rps: Double { self.elapsedSeconds > 0 ? Double(self.requests) / self.elapsedSeconds : 0 }

    /// Response bytes per second of the run.
    var bytesPerSecond: Double { self.elapsedSeconds > 0 ? Double(self.bytesRead) / self.elapsedSeconds : 0 }

    /// Whether latencies were measured from intended send times (open loop, -R).
    var isOpenLoop: Bool { self.targetRate != nil }
}
