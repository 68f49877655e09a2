import Foundation
import FoundationXML
import Testing

@testable import HawserTool

/// `hawser load`'s outputs: --json names, --fail-if, `load merge`, --hdr-out and --svg (issue 25, item 4).
@Suite("hawser load: report, --json, --fail-if, merge, --hdr-out, --svg")
struct LoadReportTests {
    /// A 10-second open-loop run at 100 requests/s whose server stalls for 1 s at second 5:
    /// `offset` shifts its values so that two runs differ.
    static func report(offset: UInt64 = 0, startedAt: Double = 1_795_872_000, errors: Bool = true) -> LoadReport {
        var corrected = LatencyHistogram()
        var uncorrected = LatencyHistogram()
        var timeline: [LoadSecond] = []
        var intervals: [LoadInterval] = []
        for s in 0..<10 {
            var second = LatencyHistogram()
            for i in 0..<100 {
                let base = 1_000_000 + UInt64(i) * 10_000 + offset
                // Requests intended in the stalled second wait for its end (coordinated omission).
                let late: UInt64 = s == 5 ? UInt64(100 - i) * 10_000_000 : 0
                corrected.record(base + late)
                uncorrected.record(s == 5 && i == 0 ? base + 1_000_000_000 : base)
                second.record(base + late)
            }
            timeline.append(
                LoadSecond(
                    second: s,
                    requests: 100,
                    errors: s == 5 ? 1 : 0,
                    bytes: 100 * 256,
                    p50: second.value(atPercentile: 50),
                    p99: second.value(atPercentile: 99),
                    max: second.maxValue
                )
            )
            intervals.append(LoadInterval(startSeconds: Double(s), lengthSeconds: 1, histogram: second))
        }
        return LoadReport(
            url: "http://127.0.0.1:8080/",
            method: "GET",
            connections: 16,
            threads: 1,
            targetRate: 100,
            startedAt: startedAt,
            elapsedSeconds: 10,
            requests: 1_000,
            bytesRead: 256_000,
            status: [200: 990, 503: 10],
            errors: errors ? [.timeout: LoadErrorCount(count: 10, firstMessage: "timed out after 2 s")] : [:],
            corrected: corrected,
            uncorrected: uncorrected,
            timeline: timeline,
            intervals: intervals
        )
    }

    static func object(_ json: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    @Test("--json is one object with the names scripts rely on")
    func jsonNames() throws {
        let r = Self.report()
        let o = try Self.object(r.renderJSON())
        #expect(o["requests"] as? Int == 1_000)
        #expect(o["errors"] as? Int == 10)
        #expect((o["rps"] as? Double).map { abs($0 - 100) < 1e-9 } == true)
        let status = try #require(o["status"] as? [String: Any])
        #expect(status["200"] as? Int == 990 && status["503"] as? Int == 10)
        let latency = try #require(o["latency_ms"] as? [String: Any])
        for name in ["corrected", "uncorrected"] {
            let l = try #require(latency[name] as? [String: Any])
            for key in ["p50", "p90", "p99", "p99.9", "max"] {
                #expect(l[key] is Double || l[key] is Int, "\(name).\(key)")
            }
        }
        let corrected = try #require(latency["corrected"] as? [String: Any])
        let expected = Double(r.corrected.value(atPercentile: 99.9)) / 1e6
        #expect(abs((corrected["p99.9"] as? Double ?? 0) - expected) < 0.0005)
        let kinds = try #require(o["error_kinds"] as? [String: Any])
        let timeout = try #require(kinds["timeout"] as? [String: Any])
        #expect(timeout["count"] as? Int == 10 && timeout["first_message"] as? String == "timed out after 2 s")
        #expect((o["timeline"] as? [Any])?.count == 10)
        #expect((o["config"] as? [String: Any])?["open_loop"] as? Bool == true)
    }

    @Test("--json reads back into the same report (the input of load merge)")
    func jsonRoundTrip() throws {
        let r = Self.report()
        let back = try LoadReport(json: Array(r.renderJSON().utf8), name: "r.json")
        #expect(back.corrected == r.corrected && back.uncorrected == r.uncorrected)
        #expect(back.requests == r.requests && back.status == r.status && back.errors == r.errors)
        #expect(back.timeline == r.timeline && back.targetRate == r.targetRate && back.startedAt == r.startedAt)
        #expect(back.renderJSON() == r.renderJSON())
    }

    @Test("the text report carries wrk's lines and, with --latency, both percentile columns")
    func text() {
        let r = Self.report()
        let short = r.renderText(latencyDistribution: false)
        #expect(short.contains("1000 requests in 10.00s"))
        #expect(short.contains("Requests/sec:     100.00"))
        #expect(short.contains("Status codes: 200: 990, 503: 10"))
        #expect(short.contains("timeout") && short.contains("first: timed out after 2 s"))
        #expect(!short.contains("Latency Distribution"))
        let long = r.renderText(latencyDistribution: true)
        #expect(long.contains("Latency Distribution") && long.contains("99.999%") && long.contains("uncorrected"))
        #expect(long.contains("Timeline (per second)"))
    }

    @Test("--fail-if grammar: metrics, operators, units; bad conditions say what is wrong")
    func failIfGrammar() throws {
        let r = Self.report()
        let p99 = Double(r.corrected.value(atPercentile: 99))
        let cases: [(String, Bool)] = [
            ("p99>50ms", p99 > 50e6), ("p99.9<=1s", Double(r.corrected.value(atPercentile: 99.9)) <= 1e9),
            ("errors>0", true), ("errors > 10", false), ("errors>=10", true), ("rps<10000", true), ("rps<50", false),
            ("status_5xx>0", true), ("status_503==10", true), ("status_2xx<990", false), ("max>2s", false),
            ("max>900ms", true), ("uncorrected.p99>100ms", false), ("uncorrected.max>=1s", true),
            ("requests==1000", true), ("p50<1500us", true), ("p50<1000000ns", false), ("mean>0.001s", true),
        ]
        for (text, violated) in cases {
            #expect(try FailCondition(parsing: text).isViolated(by: r) == violated, "\(text)")
        }
        let bad: [(String, String)] = [
            ("p99", "no comparison"), ("p99>50", "not a duration"), ("p99>50xs", "not a duration"),
            ("p101>1ms", "not a percentile"), ("latency>1ms", "unknown metric"), ("errors>ten", "not a number"),
            ("status_5x>0", "a status is"), (">5", "no metric"), ("rps<", "no value"), ("p99=>5ms", "no comparison"),
            ("uncorrected.errors>0", "only latencies"),
        ]
        for (text, why) in bad {
            do {
                _ = try FailCondition(parsing: text)
                Issue.record("\(text) parsed")
            } catch let e as ToolFailure {
                #expect(e.code == ExitCode.usage && e.message.contains(why) && e.message.contains(text), "\(e.message)")
            }
        }
        let lines = FailCondition.violations(
            [try FailCondition(parsing: "errors>0"), try FailCondition(parsing: "rps<50")],
            r
        )
        #expect(lines == ["fail-if: errors>0 (errors = 10)"])
    }

    @Test("merging two reports equals the report of all their requests")
    func mergeIsUnion() throws {
        let a = Self.report()
        let b = Self.report(offset: 333_000, startedAt: 1_795_872_000.2, errors: false)
        let m = LoadReport.merged([b, a])
        var corrected = a.corrected
        corrected.add(b.corrected)
        // Recording both runs' values into one histogram gives the same counts.
        var direct = LatencyHistogram()
        for r in [a, b] {
            for slot in r.corrected.recordedSlots() { direct.record(slot.value, count: slot.count) }
        }
        #expect(m.corrected == corrected && m.corrected == direct)
        #expect(m.requests == 2_000 && m.status == [200: 1_980, 503: 20] && m.errorCount == 10)
        #expect(m.errors[.timeout]?.firstMessage == "timed out after 2 s")
        #expect(abs(m.elapsedSeconds - 10.2) < 1e-9 && m.startedAt == a.startedAt)
        #expect(m.connections == 32 && m.targetRate == 200)
        #expect(m.timeline.count == 10 && m.timeline.allSatisfy { $0.requests == 200 })
        for p in [50.0, 99, 99.9, 100] {
            #expect(m.corrected.value(atPercentile: p) == direct.value(atPercentile: p))
        }
        // Through the files `hawser load merge` reads: two --json reports.
        let t = TempFiles()
        let pa = try t.file("a.json", Array(a.renderJSON().utf8))
        let pb = try t.file("b.json", Array(b.renderJSON().utf8))
        let fromFiles = LoadReport.merged([try LoadReport.read(path: pa), try LoadReport.read(path: pb)])
        #expect(fromFiles.renderJSON() == m.renderJSON())
        #expect(runLoadMerge(arguments: ["--fail-if", "errors>0", "--json", pa, pb]) == 110)
        #expect(runLoadMerge(arguments: ["--fail-if", "errors>10", pa, pb]) == 0)
        #expect(runLoadMerge(arguments: ["--fail-if", "errors>", pa]) == ExitCode.usage)
        #expect(runLoadMerge(arguments: [t.path("missing.json")]) == ExitCode.readError)
    }

    @Test("--hdr-out writes HdrHistogram's interval log, which reads back interval by interval")
    func intervalLog() throws {
        let r = Self.report()
        let text = intervalLogText(r)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains("#[StartTime: 1795872000.000 (seconds since epoch), 2026-11-28T08:00:00Z]"))
        #expect(lines.contains("#[BaseTime: 1795872000.000 (seconds since epoch)]"))
        #expect(
            lines.contains("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")
        )
        let rows = lines.filter { !$0.hasPrefix("#") && !$0.hasPrefix("\"") }
        #expect(rows.count == 10)
        #expect(rows[5].hasPrefix("5.000,1.000,1000.991,HISTF"))
        let log = try parseIntervalLog(text, name: "log")
        #expect(log.startTime == r.startedAt)
        #expect(log.intervals.count == 10)
        for (a, b) in zip(log.intervals, r.intervals) {
            #expect(
                a.histogram == b.histogram && a.startSeconds == b.startSeconds && a.lengthSeconds == b.lengthSeconds
            )
        }
        // Merging the interval log gives the run's corrected latencies exactly.
        let fromLog = LoadReport(intervalLog: log, name: "log")
        #expect(fromLog.corrected == r.corrected && fromLog.requests == 1_000)
        #expect(throws: (any Error).self) { try parseIntervalLog("0.000,1.000,1.0,AAAA\n", name: "bad") }
    }

    @Test("--svg is well-formed XML and carries the report's numbers as text")
    func svg() throws {
        var r = Self.report()
        r.url = "http://127.0.0.1:8080/?a=1&b=<2>"
        let svg = r.renderSVG()
        final class Texts: NSObject, XMLParserDelegate {
            var byID: [String: String] = [:]
            var current: String?
            var polylines = 0
            func parser(
                _ parser: XMLParser,
                didStartElement name: String,
                namespaceURI: String?,
                qualifiedName: String?,
                attributes: [String: String] = [:]
            ) {
                if name == "polyline" { self.polylines += 1 }
                self.current = name == "text" ? attributes["id"] : nil
            }
            func parser(_ parser: XMLParser, foundCharacters string: String) {
                if let id = self.current { self.byID[id, default: ""] += string }
            }
        }
        let parser = XMLParser(data: Data(svg.utf8))
        let texts = Texts()
        parser.delegate = texts
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(texts.polylines == 4)  // two percentile curves, requests/s and p99 per second
        let o = try Self.object(r.renderJSON())
        let latency = try #require(o["latency_ms"] as? [String: [String: Any]])
        for name in ["corrected", "uncorrected"] {
            for key in ["p50", "p99", "p99.9", "max"] {
                let v = try #require(latency[name]?[key] as? Double)
                let shown = try #require(texts.byID["stat-\(name)-\(key)"])
                #expect(shown == "\(key) \(LoadFormat.fixed(v, 3)) ms", "\(name) \(key)")
            }
        }
        #expect(texts.byID["stat-rps"] == "rps 100.000")
    }
}
