// Placeholder bodies of the output side; replaced file by file.

extension LoadReport {
    /// wrk-like summary; with `latencyDistribution` the percentile table.
    func renderText(latencyDistribution: Bool) -> String {
        "requests: \(self.requests), errors: \(self.errorCount), rps: \(self.rps)\n"
    }

    /// The whole report as one JSON object.
    func renderJSON() -> String {
        "{\"requests\":\(self.requests),\"errors\":\(self.errorCount),\"rps\":\(self.rps)}\n"
    }

    /// Percentile spectrum and per-second timeline as a self-contained SVG.
    func renderSVG() -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n"
    }

    /// Several runs as one: counts summed, histograms merged.
    static func merged(_ reports: [LoadReport]) -> LoadReport {
        var out = reports[0]
        for r in reports.dropFirst() {
            out.requests += r.requests
            out.bytesRead += r.bytesRead
            out.corrected.add(r.corrected)
            out.uncorrected.add(r.uncorrected)
        }
        return out
    }
}

/// One --fail-if condition, such as `p99>50ms`.
struct FailCondition {
    var description: String
    init(parsing text: String) throws {
        self.description = text
    }
    func isViolated(by report: LoadReport) -> Bool { false }
}

/// Writes the report's intervals as an HdrHistogram interval log.
func writeIntervalLog(_ report: LoadReport, to path: String) throws {}

/// `hawser load merge FILE...`.
func runLoadMerge(arguments: [String]) -> Int32 { 0 }
