// --hdr-out: HdrHistogram's interval log (format version 1.3), read by HistogramLogProcessor and
// the other HdrHistogram ports, and by `hawser load merge`:
//   #[Logged with hawser load]
//   #[Histogram log format version 1.3]
//   #[StartTime: 1795872000.250 (seconds since epoch), 2026-11-28T12:00:00Z]
//   #[BaseTime: 1795872000.250 (seconds since epoch)]
//   "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//   0.000,1.000,12.345,HISTFAAAA...
// Timestamps are seconds since BaseTime (the run's first request), Interval_Max is in
// milliseconds (HdrHistogram's default max-value unit ratio, 10^6, for nanosecond values), the
// histogram is base64 of the compressed V2 encoding of the corrected latencies completed in the interval.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An interval log read back: its start time (Unix seconds, 0 when it has none) and its intervals.
struct IntervalLog {
    var startTime: Double
    var intervals: [LoadInterval]
}

/// The text of the interval log of `report`: its intervals, or, when the driver kept none, one
/// interval of the whole run.
func intervalLogText(_ report: LoadReport) -> String {
    let start = report.startedAt
    let date = Date(timeIntervalSince1970: start.rounded(.down)).formatted(.iso8601)
    var out = "#[Logged with hawser load]\n#[Histogram log format version 1.3]\n"
    out += "#[StartTime: \(LoadFormat.fixed(start, 3)) (seconds since epoch), \(date)]\n"
    out += "#[BaseTime: \(LoadFormat.fixed(start, 3)) (seconds since epoch)]\n"
    out += "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n"
    var intervals = report.intervals
    if intervals.isEmpty {
        intervals = [LoadInterval(startSeconds: 0, lengthSeconds: report.elapsedSeconds, histogram: report.corrected)]
    }
    for interval in intervals {
        out += LoadFormat.fixed(interval.startSeconds, 3) + "," + LoadFormat.fixed(interval.lengthSeconds, 3) + ","
        out += LoadFormat.fixed(Double(interval.histogram.maxValue) / 1e6, 3) + ","
        out += interval.histogram.encodedBase64() + "\n"
    }
    return out
}

/// Writes the interval log of `report` to `path` ("-" is stdout).
func writeIntervalLog(_ report: LoadReport, to path: String) throws {
    let file = try OutputFile.open(path)
    defer { file.close() }
    file.write(intervalLogText(report))
    if file.failed { throw FileIO.Error(description: "cannot write '\(path)'") }
}

/// Reads an interval log (the text of one): comments, the StartTime and BaseTime headers, the
/// legend, and one interval a line (an optional `Tag=...,` prefix is accepted and ignored).
func parseIntervalLog(_ text: String, name: String) throws -> IntervalLog {
    var startTime: Double?
    var baseTime: Double?
    var rows: [(Double, Double, LatencyHistogram)] = []
    for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        let line = String(raw).trimmingSpaces()
        if line.isEmpty || line.hasPrefix("\"StartTimestamp\"") { continue }
        if line.hasPrefix("#") {
            if let v = headerNumber(line, "#[StartTime:") { startTime = v }
            if let v = headerNumber(line, "#[BaseTime:") { baseTime = v }
            continue
        }
        var fields = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if fields.first?.hasPrefix("Tag=") == true { fields.removeFirst() }
        guard fields.count == 4, let s = Double(fields[0]), let l = Double(fields[1]) else {
            throw FileIO.Error(description: "\(name):\(n + 1): not an interval log line")
        }
        do {
            rows.append((s, l, try LatencyHistogram(base64: fields[3])))
        } catch {
            throw FileIO.Error(description: "\(name):\(n + 1): \(error.description)")
        }
    }
    // HdrHistogram's readers: timestamps are relative to BaseTime when there is one; without it,
    // small timestamps (under a year) are relative to StartTime, others are absolute.
    let start = startTime ?? baseTime ?? rows.first.map { $0.0 } ?? 0
    let base: Double
    if let baseTime {
        base = baseTime
    } else if let first = rows.first, first.0 < 365 * 24 * 3600 {
        base = startTime ?? 0
    } else {
        base = 0
    }
    let intervals = rows.map { LoadInterval(startSeconds: base + $0.0 - start, lengthSeconds: $0.1, histogram: $0.2) }
    return IntervalLog(startTime: start, intervals: intervals)
}

private func headerNumber(_ line: String, _ prefix: String) -> Double? {
    guard line.hasPrefix(prefix) else { return nil }
    let rest = line.dropFirst(prefix.count).drop(while: { $0 == " " })
    return Double(String(rest.prefix(while: { $0.isNumber || $0 == "." })))
}
