// `hawser load`'s text report, in wrk's shape: the run, latency averages, (with --latency) the
// percentile table and the per-second timeline, counts, status codes, errors by kind, and
// Requests/sec and Transfer/sec as wrk's last two lines (scripts that read wrk's read ours).

extension LoadReport {
    /// The percentiles of the --latency table (wrk2's list, then max).
    static let textPercentiles: [Double] = [50, 75, 90, 99, 99.9, 99.99, 99.999]

    /// wrk-like summary; with `latencyDistribution` the percentile table and the timeline.
    func renderText(latencyDistribution: Bool) -> String {
        typealias F = LoadFormat
        var out = "hawser load: \(self.method) \(self.url)\n"
        out += "  \(self.threads) threads and \(self.connections) connections, "
        if let rate = self.targetRate {
            out += "open loop at \(F.count(rate)) requests/s (latency from each request's intended send time)\n"
        } else {
            out += "closed loop\n"
        }
        out += "  Latency        " + F.left("Avg", 9) + F.left("Stdev", 9) + F.left("Max", 9) + "\n"
        for (name, h) in self.latencyRows {
            out += "    " + F.right(name, 11) + F.left(F.duration(UInt64(h.mean.rounded())), 9)
            out +=
                F.left(F.duration(UInt64(h.standardDeviation.rounded())), 9) + F.left(F.duration(h.maxValue), 9) + "\n"
        }
        if latencyDistribution {
            out += "  Latency Distribution (HdrHistogram, 3 significant digits)\n"
            out += "    " + F.left("", 9) + self.latencyRows.map { F.left($0.name, 13) }.joined() + "\n"
            for p in Self.textPercentiles {
                out += "    " + F.left(Self.percentLabel(p), 9)
                out +=
                    self.latencyRows.map { F.left(F.duration($0.histogram.value(atPercentile: p)), 13) }.joined() + "\n"
            }
            out +=
                "    " + F.left("max", 9)
                + self.latencyRows.map { F.left(F.duration($0.histogram.maxValue), 13) }.joined()
            out += "\n"
            out += self.timelineText()
        }
        out +=
            "  \(self.requests) requests in \(F.fixed(self.elapsedSeconds, 2))s, \(F.bytes(Double(self.bytesRead))) read\n"
        if !self.status.isEmpty {
            let codes = self.status.keys.sorted().map { "\($0): \(self.status[$0] ?? 0)" }
            out += "  Status codes: " + codes.joined(separator: ", ") + "\n"
        }
        if self.errorCount > 0 {
            out += "  Errors: \(self.errorCount)\n"
            for kind in LoadErrorKind.allCases {
                guard let e = self.errors[kind] else { continue }
                out +=
                    "    " + F.right(kind.rawValue, 9) + F.left(String(e.count), 8) + "  first: " + e.firstMessage
                    + "\n"
            }
        }
        out += "Requests/sec: " + F.left(F.fixed(self.rps, 2), 10) + "\n"
        out += "Transfer/sec: " + F.left(F.bytes(self.bytesPerSecond), 10) + "\n"
        return out
    }

    /// The latency histograms shown: corrected and uncorrected in open loop, one in closed loop.
    var latencyRows: [(name: String, histogram: LatencyHistogram)] {
        self.isOpenLoop
            ? [("corrected", self.corrected), ("uncorrected", self.uncorrected)] : [("latency", self.corrected)]
    }

    /// `99.9` as `99.900%` (wrk2's labels).
    static func percentLabel(_ p: Double) -> String { LoadFormat.fixed(p, 3) + "%" }

    /// The per-second timeline, at most 60 rows: longer runs are shown in groups of seconds
    /// (requests/s over the group; p50 the group's median of seconds; p99 and max the largest).
    func timelineText() -> String {
        guard !self.timeline.isEmpty else { return "" }
        typealias F = LoadFormat
        let group = (self.timeline.count + 59) / 60
        var out = "  Timeline" + (group > 1 ? " (\(group)-second groups)" : " (per second)") + "\n"
        out += "    " + F.left("second", 7) + F.left("req/s", 10) + F.left("errors", 8) + F.left("p50", 9)
        out += F.left("p99", 9) + F.left("max", 9) + "\n"
        var i = 0
        while i < self.timeline.count {
            let rows = self.timeline[i..<min(i + group, self.timeline.count)]
            let requests = rows.reduce(0) { $0 + $1.requests }
            let errors = rows.reduce(0) { $0 + $1.errors }
            let p50s = rows.map(\.p50).sorted()
            out +=
                "    " + F.left(String(rows.first!.second), 7)
                + F.left(F.count(Double(requests) / Double(rows.count)), 10)
            out += F.left(String(errors), 8) + F.left(F.duration(p50s[p50s.count / 2]), 9)
            out += F.left(F.duration(rows.map(\.p99).max() ?? 0), 9) + F.left(F.duration(rows.map(\.max).max() ?? 0), 9)
            out += "\n"
            i += group
        }
        return out
    }
}
