// `hawser load merge FILE...`: runs from several machines as one report. Each FILE is either a
// `hawser load --json` report (everything: counts, status codes, errors, both histograms) or an
// HdrHistogram interval log (`--hdr-out`, or another tool's: latencies only). Counts are summed
// and histograms added slot by slot, so the merged percentiles are exactly those of all the
// requests together (never an average of percentiles).

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension LoadReport {
    /// Several runs as one: counts, status codes and errors summed (each kind's first message
    /// from the earliest run that has it), histograms added, connections, threads and rates
    /// summed. The run spans from the earliest start to the latest end, and rps is the requests
    /// over that span (the runs are taken to run at the same time, as from several hosts). The
    /// timeline is aligned on the runs' start times: requests, errors and bytes of the same
    /// second summed, its p50 and p99 the largest of the runs' (a bound: a second's exact
    /// percentiles need that second's histograms), its max exact.
    static func merged(_ reports: [LoadReport]) -> LoadReport {
        guard var out = reports.first else {
            return LoadReport(
                url: "",
                method: "",
                connections: 0,
                threads: 0,
                targetRate: nil,
                startedAt: 0,
                elapsedSeconds: 0,
                requests: 0,
                bytesRead: 0,
                status: [:],
                errors: [:],
                corrected: LatencyHistogram(),
                uncorrected: LatencyHistogram(),
                timeline: [],
                intervals: []
            )
        }
        let ordered = reports.sorted { $0.startedAt < $1.startedAt }
        let start = ordered[0].startedAt
        let end = reports.map { $0.startedAt + $0.elapsedSeconds }.max() ?? start
        out = ordered[0]
        out.elapsedSeconds = end - start
        out.timeline = []
        out.intervals = []
        var seconds: [Int: LoadSecond] = [:]
        for (n, r) in ordered.enumerated() {
            if n > 0 {
                if r.url != out.url && !out.url.split(separator: " ").contains(Substring(r.url)) {
                    out.url += " " + r.url
                }
                out.connections += r.connections
                out.threads += r.threads
                out.targetRate = out.targetRate.flatMap { a in r.targetRate.map { a + $0 } }
                out.requests += r.requests
                out.bytesRead += r.bytesRead
                for (code, c) in r.status { out.status[code, default: 0] += c }
                for (kind, e) in r.errors {
                    out.errors[kind, default: LoadErrorCount(count: 0, firstMessage: e.firstMessage)].count += e.count
                }
                out.corrected.add(r.corrected)
                out.uncorrected.add(r.uncorrected)
            }
            let offset = Int((r.startedAt - start).rounded())
            for s in r.timeline {
                let k = s.second + offset
                var m = seconds[k] ?? LoadSecond(second: k, requests: 0, errors: 0, bytes: 0, p50: 0, p99: 0, max: 0)
                m.requests += s.requests
                m.errors += s.errors
                m.bytes += s.bytes
                m.p50 = max(m.p50, s.p50)
                m.p99 = max(m.p99, s.p99)
                m.max = max(m.max, s.max)
                seconds[k] = m
            }
            for i in r.intervals {
                out.intervals.append(
                    LoadInterval(
                        startSeconds: i.startSeconds + r.startedAt - start,
                        lengthSeconds: i.lengthSeconds,
                        histogram: i.histogram
                    )
                )
            }
        }
        out.startedAt = start
        out.timeline = seconds.keys.sorted().compactMap { seconds[$0] }
        out.intervals.sort { $0.startSeconds < $1.startSeconds }
        return out
    }

    /// A report from an interval log: the latencies of its intervals (corrected and uncorrected
    /// alike: a log has one series), requests their count, the span of its intervals, and a
    /// timeline from its intervals of one second or less.
    init(intervalLog log: IntervalLog, name: String) {
        var h = LatencyHistogram()
        var end = 0.0
        var seconds: [Int: (LatencyHistogram, UInt64)] = [:]
        for i in log.intervals {
            h.add(i.histogram)
            end = max(end, i.startSeconds + i.lengthSeconds)
            if i.lengthSeconds <= 1.0001 {
                let k = Int(i.startSeconds.rounded(.down))
                var s = seconds[k] ?? (LatencyHistogram(), 0)
                s.0.add(i.histogram)
                s.1 += i.histogram.totalCount
                seconds[k] = s
            }
        }
        self.init(
            url: name,
            method: "",
            connections: 0,
            threads: 0,
            targetRate: nil,
            startedAt: log.startTime,
            elapsedSeconds: end,
            requests: h.totalCount,
            bytesRead: 0,
            status: [:],
            errors: [:],
            corrected: h,
            uncorrected: h,
            timeline: seconds.keys.sorted().map { k in
                let (sh, n) = seconds[k]!
                return LoadSecond(
                    second: k,
                    requests: n,
                    errors: 0,
                    bytes: 0,
                    p50: sh.value(atPercentile: 50),
                    p99: sh.value(atPercentile: 99),
                    max: sh.maxValue
                )
            },
            intervals: log.intervals
        )
    }

    /// Reads a --json report or an interval log (told apart by the first character: `{`).
    static func read(path: String) throws -> LoadReport {
        let bytes = try FileIO.readAll(path: path)
        let first = bytes.first(where: { $0 != 0x20 && $0 != 0x0a && $0 != 0x0d && $0 != 0x09 })
        if first == UInt8(ascii: "{") { return try LoadReport(json: bytes, name: path) }
        let log = try parseIntervalLog(String(decoding: bytes, as: UTF8.self), name: path)
        guard !log.intervals.isEmpty else {
            throw FileIO.Error(
                description: "\(path): neither a hawser load --json report nor an interval log with intervals"
            )
        }
        return LoadReport(intervalLog: log, name: path)
    }
}

let loadMergeHelp = """
    Usage: hawser load merge [options] FILE...

    Combines the results of several `hawser load` runs (one per host) into one report. Each FILE is
    either the --json output of a run (all its numbers) or an HdrHistogram interval log written
    with --hdr-out (latencies only; another tool's interval log works too). Counts are summed and
    histograms merged exactly, so the percentiles are those of all requests together. The runs
    are taken to run at the same time: rps is all requests over the span from the earliest start
    to the latest end.

    Options:
      --json               print the merged report as JSON (the schema of `hawser load --json`)
      --latency            the percentile table and the per-second timeline in the text report
      --svg FILE           draw the percentile spectrum and the timeline to FILE
      --hdr-out FILE       write the merged latencies as an HdrHistogram interval log
      --fail-if COND       exit 110 when COND holds (repeatable; grammar in docs/LOAD.md), e.g.
                           'p99>50ms', 'p99.9<=1s', 'errors>0', 'rps<10000', 'status_5xx>0'
      -h, --help           this text

    Exit status: 0, 2 on a usage error, 26 when a FILE cannot be read or parsed, 23 when an
    output file cannot be written, 110 when a --fail-if condition holds.

    """

/// `hawser load merge FILE...`.
func runLoadMerge(arguments: [String]) -> Int32 {
    var files: [String] = []
    var json = false
    var latency = false
    var svg: String?
    var hdrOut: String?
    var conditions: [FailCondition] = []
    var i = 0
    func usage(_ message: String) -> Int32 {
        OutputFile.stderr.write("hawser load merge: \(message)\n(hawser load merge --help for usage)\n")
        return ExitCode.usage
    }
    while i < arguments.count {
        let a = arguments[i]
        i += 1
        func value() -> String? {
            guard i < arguments.count else { return nil }
            i += 1
            return arguments[i - 1]
        }
        switch a {
        case "-h", "--help":
            OutputFile.stdout.write(loadMergeHelp)
            return 0
        case "--json": json = true
        case "--latency": latency = true
        case "--svg":
            guard let v = value() else { return usage("--svg needs a file name") }
            svg = v
        case "--hdr-out":
            guard let v = value() else { return usage("--hdr-out needs a file name") }
            hdrOut = v
        case "--fail-if":
            guard let v = value() else { return usage("--fail-if needs a condition, such as 'p99>50ms'") }
            do { conditions.append(try FailCondition(parsing: v)) } catch { return usage("\(error)") }
        case "--":
            files += arguments[i...]
            i = arguments.count
        default:
            if a.hasPrefix("-") && a != "-" { return usage("unknown option '\(a)'") }
            files.append(a)
        }
    }
    guard !files.isEmpty else { return usage("no FILE to merge") }
    var reports: [LoadReport] = []
    for f in files {
        do { reports.append(try LoadReport.read(path: f)) } catch {
            OutputFile.stderr.write("hawser load merge: \(error)\n")
            return ExitCode.readError
        }
    }
    let merged = LoadReport.merged(reports)
    OutputFile.stdout.write(json ? merged.renderJSON() : merged.renderText(latencyDistribution: latency))
    do {
        if let svg {
            let file = try OutputFile.open(svg)
            file.write(merged.renderSVG())
            file.close()
            if file.failed { throw FileIO.Error(description: "cannot write '\(svg)'") }
        }
        if let hdrOut { try writeIntervalLog(merged, to: hdrOut) }
    } catch {
        OutputFile.stderr.write("hawser load merge: \(error)\n")
        return ExitCode.writeError
    }
    let failed = FailCondition.violations(conditions, merged)
    for line in failed { OutputFile.stderr.write(line + "\n") }
    return failed.isEmpty ? 0 : ExitCode.loadConditionFailed
}
