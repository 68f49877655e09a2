// `hawser load --json`: the whole report as one JSON object (schema in docs/LOAD.md). Latencies
// are milliseconds with 3 decimals (microsecond resolution); `histograms` carries both
// histograms in HdrHistogram's compressed V2 encoding (base64), so that `hawser load merge`
// merges reports exactly.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension LoadReport {
    /// The percentiles every latency object of the JSON carries, with their names.
    static let jsonPercentiles: [(name: String, percentile: Double)] = [
        ("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("p99.99", 99.99), ("p99.999", 99.999),
    ]

    /// The whole report as one JSON object (one line, then a newline).
    func renderJSON() -> String {
        var o = JSONObjectWriter()
        o.number("requests", String(self.requests))
        o.number("errors", String(self.errorCount))
        o.number("rps", LoadFormat.fixed(self.rps, 3))
        o.number("bytes", String(self.bytesRead))
        o.number("bytes_per_s", LoadFormat.fixed(self.bytesPerSecond, 3))
        o.number("elapsed_s", LoadFormat.fixed(self.elapsedSeconds, 6))
        o.number("started_at", LoadFormat.fixed(self.startedAt, 6))
        var status = JSONObjectWriter()
        for code in self.status.keys.sorted() { status.number(String(code), String(self.status[code] ?? 0)) }
        o.raw("status", status.text)
        var kinds = JSONObjectWriter()
        for kind in LoadErrorKind.allCases {
            guard let e = self.errors[kind] else { continue }
            var k = JSONObjectWriter()
            k.number("count", String(e.count))
            k.string("first_message", e.firstMessage)
            kinds.raw(kind.rawValue, k.text)
        }
        o.raw("error_kinds", kinds.text)
        var latency = JSONObjectWriter()
        latency.raw("corrected", Self.latencyJSON(self.corrected))
        latency.raw("uncorrected", Self.latencyJSON(self.uncorrected))
        o.raw("latency_ms", latency.text)
        var config = JSONObjectWriter()
        config.string("url", self.url)
        config.string("method", self.method)
        config.number("connections", String(self.connections))
        config.number("threads", String(self.threads))
        config.number("rate", self.targetRate.map { LoadFormat.fixed($0, 3) } ?? "null")
        config.raw("open_loop", self.isOpenLoop ? "true" : "false")
        o.raw("config", config.text)
        var seconds: [String] = []
        for s in self.timeline {
            var t = JSONObjectWriter()
            t.number("second", String(s.second))
            t.number("requests", String(s.requests))
            t.number("errors", String(s.errors))
            t.number("bytes", String(s.bytes))
            t.number("p50_ms", LoadFormat.ms(s.p50))
            t.number("p99_ms", LoadFormat.ms(s.p99))
            t.number("max_ms", LoadFormat.ms(s.max))
            seconds.append(t.text)
        }
        o.raw("timeline", "[" + seconds.joined(separator: ",") + "]")
        var histograms = JSONObjectWriter()
        histograms.string("corrected", self.corrected.encodedBase64())
        histograms.string("uncorrected", self.uncorrected.encodedBase64())
        o.raw("histograms", histograms.text)
        return o.text + "\n"
    }

    static func latencyJSON(_ h: LatencyHistogram) -> String {
        var o = JSONObjectWriter()
        o.number("count", String(h.totalCount))
        o.number("min", LoadFormat.ms(h.minValue))
        o.number("mean", LoadFormat.fixed(h.mean / 1e6, 3))
        o.number("stddev", LoadFormat.fixed(h.standardDeviation / 1e6, 3))
        for (name, p) in Self.jsonPercentiles { o.number(name, LoadFormat.ms(h.value(atPercentile: p))) }
        o.number("max", LoadFormat.ms(h.maxValue))
        return o.text
    }
}

/// Builds one JSON object, members in the order they are added.
struct JSONObjectWriter {
    private var members: [String] = []

    var text: String { "{" + self.members.joined(separator: ",") + "}" }

    mutating func number(_ name: String, _ literal: String) { self.raw(name, literal) }

    mutating func string(_ name: String, _ value: String) { self.raw(name, Self.quote(value)) }

    mutating func raw(_ name: String, _ json: String) { self.members.append(Self.quote(name) + ":" + json) }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }
}

// MARK: - Reading a --json report back (for `hawser load merge`)

private struct JSONReport: Decodable {
    struct Config: Decodable {
        var url: String
        var method: String
        var connections: Int
        var threads: Int
        var rate: Double?
    }
    struct Kind: Decodable {
        var count: UInt64
        var first_message: String
    }
    struct Second: Decodable {
        var second: Int
        var requests: UInt64
        var errors: UInt64
        var bytes: UInt64
        var p50_ms: Double
        var p99_ms: Double
        var max_ms: Double
    }
    var requests: UInt64
    var bytes: UInt64
    var elapsed_s: Double
    var started_at: Double
    var status: [String: UInt64]
    var error_kinds: [String: Kind]
    var config: Config
    var timeline: [Second]
    var histograms: [String: String]
}

extension LoadReport {
    /// A report read back from `hawser load --json` output.
    init(json bytes: [UInt8], name: String) throws {
        let j: JSONReport
        do {
            j = try JSONDecoder().decode(JSONReport.self, from: Data(bytes))
        } catch {
            throw FileIO.Error(description: "\(name): not a hawser load --json report (\(error))")
        }
        guard let c = j.histograms["corrected"], let u = j.histograms["uncorrected"] else {
            throw FileIO.Error(description: "\(name): the report has no histograms")
        }
        let corrected: LatencyHistogram
        let uncorrected: LatencyHistogram
        do {
            corrected = try LatencyHistogram(base64: c)
            uncorrected = try LatencyHistogram(base64: u)
        } catch {
            throw FileIO.Error(description: "\(name): \(error.description)")
        }
        var status: [Int: UInt64] = [:]
        for (k, v) in j.status {
            guard let code = Int(k) else { throw FileIO.Error(description: "\(name): status code '\(k)'") }
            status[code] = v
        }
        var errors: [LoadErrorKind: LoadErrorCount] = [:]
        for (k, v) in j.error_kinds {
            errors[
                LoadErrorKind(rawValue: k) ?? .other,
                default: LoadErrorCount(count: 0, firstMessage: v.first_message)
            ]
            .count += v.count
        }
        let ns: (Double) -> UInt64 = { UInt64(max(0, ($0 * 1e6).rounded())) }
        self.init(
            url: j.config.url,
            method: j.config.method,
            connections: j.config.connections,
            threads: j.config.threads,
            targetRate: j.config.rate,
            startedAt: j.started_at,
            elapsedSeconds: j.elapsed_s,
            requests: j.requests,
            bytesRead: j.bytes,
            status: status,
            errors: errors,
            corrected: corrected,
            uncorrected: uncorrected,
            timeline: j.timeline.map {
                LoadSecond(
                    second: $0.second,
                    requests: $0.requests,
                    errors: $0.errors,
                    bytes: $0.bytes,
                    p50: ns($0.p50_ms),
                    p99: ns($0.p99_ms),
                    max: ns($0.max_ms)
                )
            },
            intervals: []
        )
    }
}
