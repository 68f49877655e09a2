// --fail-if: conditions that turn a run into an exit status for CI. Grammar (docs/LOAD.md):
//   condition := metric op value           (spaces around the parts are allowed)
//   op        := "<" | "<=" | ">" | ">=" | "=="
//   metric    := latency | "errors" | "requests" | "rps" | "status_" code
//   latency   := ["uncorrected."] ("p" percentile | "max" | "min" | "mean")
//                percentile: a number in 0 ... 100 (p50, p99, p99.9, p99.999); the corrected
//                histogram unless "uncorrected." is written (in closed loop they are the same)
//   code      := three digits (status_503) or a class (status_5xx: 500 ... 599)
//   value     := a number; for a latency it takes a unit, ns, us, ms or s (50ms, 1.5s)
// A condition is violated when it holds: `p99>50ms` fails the run when p99 is above 50 ms.

/// One --fail-if condition, such as `p99>50ms`.
struct FailCondition: CustomStringConvertible {
    enum Metric: Equatable {
        case percentile(Double, uncorrected: Bool)
        case max(uncorrected: Bool)
        case min(uncorrected: Bool)
        case mean(uncorrected: Bool)
        case errors, requests, rps
        case status(Int)
        case statusClass(Int)
    }
    enum Operator: String, CaseIterable {
        case lessOrEqual = "<="
        case greaterOrEqual = ">="
        case equal = "=="
        case less = "<"
        case greater = ">"
    }

    let metric: Metric
    let op: Operator
    /// The threshold; nanoseconds for a latency.
    let threshold: Double
    /// The condition as written.
    let description: String

    /// Parses `text`; a malformed condition throws a usage failure that says what is wrong.
    init(parsing text: String) throws {
        let condition = String(text.filter { $0 != " " && $0 != "\t" })
        func fail(_ why: String) -> ToolFailure { ToolFailure(ExitCode.usage, "--fail-if '\(text)': \(why)") }
        guard let opRange = Self.operatorRange(in: condition) else {
            throw fail("no comparison (write one of <, <=, >, >=, == between a metric and a value, as in p99>50ms)")
        }
        let name = String(condition[..<opRange.range.lowerBound]).lowercased()
        let valueText = String(condition[opRange.range.upperBound...]).lowercased()
        guard !name.isEmpty else { throw fail("no metric before '\(opRange.op.rawValue)'") }
        guard !valueText.isEmpty else { throw fail("no value after '\(opRange.op.rawValue)'") }
        let metric = try Self.parseMetric(name, fail)
        let threshold: Double
        switch metric {
        case .percentile, .max, .min, .mean:
            guard let (number, unit) = Self.splitUnit(valueText), let scale = Self.unitScale[unit] else {
                throw fail("'\(valueText)' is not a duration (a number and a unit: ns, us, ms or s, as in 50ms)")
            }
            threshold = number * scale
        default:
            guard let number = Double(valueText), number.isFinite, number >= 0 else {
                throw fail("'\(valueText)' is not a number")
            }
            threshold = number
        }
        self.metric = metric
        self.op = opRange.op
        self.threshold = threshold
        self.description = condition
    }

    /// Whether the condition holds for `report` (then the run fails).
    func isViolated(by report: LoadReport) -> Bool {
        let v = self.value(in: report)
        switch self.op {
        case .less: return v < self.threshold
        case .lessOrEqual: return v <= self.threshold
        case .greater: return v > self.threshold
        case .greaterOrEqual: return v >= self.threshold
        case .equal: return v == self.threshold
        }
    }

    /// The measured value of the metric (nanoseconds for a latency).
    func value(in report: LoadReport) -> Double {
        func h(_ uncorrected: Bool) -> LatencyHistogram { uncorrected ? report.uncorrected : report.corrected }
        switch self.metric {
        case .percentile(let p, let u): return Double(h(u).value(atPercentile: p))
        case .max(let u): return Double(h(u).maxValue)
        case .min(let u): return Double(h(u).minValue)
        case .mean(let u): return h(u).mean
        case .errors: return Double(report.errorCount)
        case .requests: return Double(report.requests)
        case .rps: return report.rps
        case .status(let code): return Double(report.status[code] ?? 0)
        case .statusClass(let c):
            return Double(report.status.filter { $0.key / 100 == c }.values.reduce(0, +))
        }
    }

    /// "p99>50ms (p99 = 73.2ms)": the condition and what was measured.
    func explain(_ report: LoadReport) -> String {
        let v = self.value(in: report)
        let name = String(self.description.prefix(while: { !"<>=".contains($0) }))
        switch self.metric {
        case .percentile, .max, .min, .mean:
            return "\(self.description) (\(name) = \(LoadFormat.duration(UInt64(max(0, v.rounded())))))"
        case .rps: return "\(self.description) (rps = \(LoadFormat.fixed(v, 2)))"
        default: return "\(self.description) (\(name) = \(UInt64(v)))"
        }
    }

    /// The conditions of `report` that hold, as "fail-if: ..." lines; empty when the run passes.
    static func violations(_ conditions: [FailCondition], _ report: LoadReport) -> [String] {
        conditions.filter { $0.isViolated(by: report) }.map { "fail-if: \($0.explain(report))" }
    }

    // MARK: - Parsing

    private static let unitScale: [String: Double] = ["ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9]

    private static func operatorRange(in s: String) -> (op: Operator, range: Range<String.Index>)? {
        guard let first = s.firstIndex(where: { "<>=".contains($0) }) else { return nil }
        let rest = s[first...]
        for op in Operator.allCases where rest.hasPrefix(op.rawValue) {
            let end = s.index(first, offsetBy: op.rawValue.count)
            if end < s.endIndex && "<>=".contains(s[end]) { return nil }
            return (op, first..<end)
        }
        return nil
    }

    private static func splitUnit(_ s: String) -> (Double, String)? {
        guard let unitStart = s.firstIndex(where: { $0.isLetter }) else { return nil }
        guard let number = Double(s[..<unitStart]), number.isFinite, number >= 0 else { return nil }
        return (number, String(s[unitStart...]))
    }

    private static func parseMetric(_ name: String, _ fail: (String) -> ToolFailure) throws -> Metric {
        var latency = name
        var uncorrected = false
        for prefix in ["uncorrected.", "corrected."] where name.hasPrefix(prefix) {
            latency = String(name.dropFirst(prefix.count))
            uncorrected = prefix == "uncorrected."
        }
        switch latency {
        case "max": return .max(uncorrected: uncorrected)
        case "min": return .min(uncorrected: uncorrected)
        case "mean": return .mean(uncorrected: uncorrected)
        default: break
        }
        if latency.hasPrefix("p"), latency.count > 1 {
            guard let p = Double(latency.dropFirst()), p >= 0, p <= 100,
                latency.dropFirst().allSatisfy({ $0.isNumber || $0 == "." })
            else { throw fail("'\(latency)' is not a percentile (p followed by 0 ... 100, as in p99 or p99.9)") }
            return .percentile(p, uncorrected: uncorrected)
        }
        guard latency == name else {
            throw fail("'\(name)': only latencies (pNN, max, min, mean) are corrected or uncorrected")
        }
        switch name {
        case "errors": return .errors
        case "requests": return .requests
        case "rps": return .rps
        default: break
        }
        if name.hasPrefix("status_") {
            let code = name.dropFirst("status_".count)
            if code.count == 3, let c = Int(code), (100...599).contains(c) { return .status(c) }
            if code.count == 3, code.hasSuffix("xx"), let c = Int(code.prefix(1)), (1...5).contains(c) {
                return .statusClass(c)
            }
            throw fail("'\(name)': a status is status_ and a code (status_503) or a class (status_5xx)")
        }
        throw fail("unknown metric '\(name)' (pNN, max, min, mean, errors, requests, rps, status_NNN, status_Nxx)")
    }
}
