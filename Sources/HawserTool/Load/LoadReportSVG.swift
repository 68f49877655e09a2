// `hawser load --svg FILE`: one self-contained SVG with the latency percentile spectrum (x:
// percentile on HdrHistogram's 1/(1-p) log scale, y: latency; corrected and uncorrected curves)
// above the per-second timeline (requests/s and p99 per second). The key numbers are text
// elements with ids (stat-corrected-p99, stat-rps, ...) holding the JSON report's values
// (milliseconds with 3 decimals), so a test or a script can check them.

#if canImport(Glibc)
import Glibc
#endif

extension LoadReport {
    /// Percentile spectrum and per-second timeline as a self-contained SVG document.
    func renderSVG() -> String {
        let width = 900.0
        var svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"760\" viewBox=\"0 0 900 760\""
        svg += " font-family=\"sans-serif\" font-size=\"12\">\n"
        svg += "<title>hawser load: \(Self.xml(self.method)) \(Self.xml(self.url))</title>\n"
        svg += "<rect x=\"0\" y=\"0\" width=\"\(Int(width))\" height=\"760\" fill=\"white\"/>\n"
        svg +=
            "<text x=\"20\" y=\"24\" font-size=\"15\" font-weight=\"bold\">hawser load: \(Self.xml(self.method)) \(Self.xml(self.url))</text>\n"
        let mode = self.targetRate.map { "open loop at \(LoadFormat.fixed($0, 0)) requests/s" } ?? "closed loop"
        svg += "<text x=\"20\" y=\"42\">\(self.requests) requests in \(LoadFormat.fixed(self.elapsedSeconds, 2)) s, "
        svg += "\(self.connections) connections, \(self.threads) threads, \(mode)</text>\n"
        svg += self.statsSVG(y: 62)
        svg += self.spectrumSVG(x: 70, y: 110, w: 780, h: 320)
        svg += self.timelineSVG(x: 70, y: 500, w: 780, h: 200)
        svg += "</svg>\n"
        return svg
    }

    /// The key numbers as text elements.
    private func statsSVG(y: Double) -> String {
        var out = ""
        var line = 0.0
        for (name, h) in self.latencyRows {
            var x = 20.0
            out += "<text x=\"\(Int(x))\" y=\"\(Int(y + line))\" font-weight=\"bold\">\(name)</text>\n"
            x += 90
            for (label, v) in [("p50", 50.0), ("p99", 99), ("p99.9", 99.9)] {
                let id = "stat-\(name == "latency" ? "corrected" : name)-\(label)"
                out +=
                    "<text id=\"\(id)\" x=\"\(Int(x))\" y=\"\(Int(y + line))\">\(label) \(LoadFormat.ms(h.value(atPercentile: v))) ms</text>\n"
                x += 150
            }
            let id = "stat-\(name == "latency" ? "corrected" : name)-max"
            out +=
                "<text id=\"\(id)\" x=\"\(Int(x))\" y=\"\(Int(y + line))\">max \(LoadFormat.ms(h.maxValue)) ms</text>\n"
            line += 16
        }
        out += "<text id=\"stat-rps\" x=\"20\" y=\"\(Int(y + line))\">rps \(LoadFormat.fixed(self.rps, 3))</text>\n"
        out += "<text id=\"stat-errors\" x=\"200\" y=\"\(Int(y + line))\">errors \(self.errorCount)</text>\n"
        return out
    }

    /// The percentile spectrum: latency against 1/(1-p) on a log scale, 90% ... 99.9999%.
    private func spectrumSVG(x: Double, y: Double, w: Double, h: Double) -> String {
        let decades = 6.0
        let top = Double(max(self.corrected.maxValue, self.uncorrected.maxValue, 1)) / 1e6
        let yMax = Self.niceCeiling(top * 1.05)
        func px(_ d: Double) -> Double { x + d / decades * w }
        func py(_ ms: Double) -> Double { y + h - ms / yMax * h }
        var out = "<text x=\"\(Int(x + w / 2))\" y=\"\(Int(y - 8))\" text-anchor=\"middle\" font-weight=\"bold\">"
        out += "Latency by percentile</text>\n"
        out += Self.axes(x: x, y: y, w: w, h: h)
        let labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]
        for (d, label) in labels.enumerated() {
            let gx = Self.n(px(Double(d)))
            out += "<line x1=\"\(gx)\" y1=\"\(Self.n(y))\" x2=\"\(gx)\" y2=\"\(Self.n(y + h))\" stroke=\"#ddd\"/>\n"
            out += "<text x=\"\(gx)\" y=\"\(Self.n(y + h + 16))\" text-anchor=\"middle\">\(label)</text>\n"
        }
        out += Self.yTicks(x: x, y: y, h: h, max: yMax, unit: "ms", anchorRight: false)
        out +=
            "<text x=\"\(Int(x + w / 2))\" y=\"\(Int(y + h + 36))\" text-anchor=\"middle\">percentile (1/(1-p), log scale)</text>\n"
        out +=
            "<text transform=\"translate(\(Int(x - 50)),\(Int(y + h / 2))) rotate(-90)\" text-anchor=\"middle\">latency (ms)</text>\n"
        let colors = ["#c0392b", "#2471a3"]
        for (n, (name, hist)) in self.latencyRows.enumerated() where hist.totalCount > 0 {
            var points: [String] = []
            // Percentiles up to the one a single request stands for; max at the right end.
            let lastDecade = min(decades, log10(Double(hist.totalCount)))
            var d = 0.0
            while d <= lastDecade + 1e-9 {
                let p = 100 * (1 - pow(10, -d))
                points.append("\(Self.n(px(d))),\(Self.n(py(Double(hist.value(atPercentile: p)) / 1e6)))")
                d += 0.02
            }
            points.append("\(Self.n(px(lastDecade))),\(Self.n(py(Double(hist.maxValue) / 1e6)))")
            out +=
                "<polyline id=\"spectrum-\(name)\" fill=\"none\" stroke=\"\(colors[n])\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>\n"
            out +=
                "<text x=\"\(Int(x + 10))\" y=\"\(Int(y + 16 + 16 * Double(n)))\" fill=\"\(colors[n])\">\(name)</text>\n"
        }
        return out
    }

    /// The per-second timeline: requests/s (left axis) and p99 (right axis).
    private func timelineSVG(x: Double, y: Double, w: Double, h: Double) -> String {
        var out = "<text x=\"\(Int(x + w / 2))\" y=\"\(Int(y - 8))\" text-anchor=\"middle\" font-weight=\"bold\">"
        out += "Per second: requests/s and p99</text>\n"
        out += Self.axes(x: x, y: y, w: w, h: h)
        let seconds = max(Double((self.timeline.map(\.second).max() ?? 0) + 1), 1)
        let rMax = Self.niceCeiling(Double(self.timeline.map(\.requests).max() ?? 1) * 1.05)
        let lMax = Self.niceCeiling(Double(self.timeline.map(\.p99).max() ?? 1) / 1e6 * 1.05)
        out += Self.yTicks(x: x, y: y, h: h, max: rMax, unit: "", anchorRight: false)
        out += Self.yTicks(x: x + w, y: y, h: h, max: lMax, unit: "ms", anchorRight: true)
        let step = max(1, Int((seconds / 10).rounded(.up)))
        for s in stride(from: 0, through: Int(seconds), by: step) {
            let gx = Self.n(x + Double(s) / seconds * w)
            out += "<text x=\"\(gx)\" y=\"\(Self.n(y + h + 16))\" text-anchor=\"middle\">\(s)</text>\n"
        }
        out +=
            "<text x=\"\(Int(x + w / 2))\" y=\"\(Int(y + h + 36))\" text-anchor=\"middle\">second of the run</text>\n"
        out +=
            "<text transform=\"translate(\(Int(x - 50)),\(Int(y + h / 2))) rotate(-90)\" text-anchor=\"middle\" fill=\"#1e8449\">requests/s</text>\n"
        out +=
            "<text transform=\"translate(\(Int(x + w + 55)),\(Int(y + h / 2))) rotate(90)\" text-anchor=\"middle\" fill=\"#c0392b\">p99 (ms)</text>\n"
        func pts(_ value: (LoadSecond) -> Double, _ scale: Double) -> String {
            self.timeline.map { s in
                "\(Self.n(x + (Double(s.second) + 0.5) / seconds * w)),\(Self.n(y + h - value(s) / scale * h))"
            }.joined(separator: " ")
        }
        if !self.timeline.isEmpty {
            out +=
                "<polyline id=\"timeline-rps\" fill=\"none\" stroke=\"#1e8449\" stroke-width=\"2\" points=\"\(pts({ Double($0.requests) }, rMax))\"/>\n"
            out +=
                "<polyline id=\"timeline-p99\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"\(pts({ Double($0.p99) / 1e6 }, lMax))\"/>\n"
        }
        return out
    }

    private static func axes(x: Double, y: Double, w: Double, h: Double) -> String {
        "<rect x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(w))\" height=\"\(n(h))\" fill=\"none\" stroke=\"#333\"/>\n"
    }

    private static func yTicks(x: Double, y: Double, h: Double, max: Double, unit: String, anchorRight: Bool) -> String
    {
        var out = ""
        for k in 0...4 {
            let v = max * Double(k) / 4
            let ty = y + h - Double(k) / 4 * h
            let label = v >= 100 || v == v.rounded() ? LoadFormat.fixed(v, 0) : LoadFormat.fixed(v, v >= 1 ? 1 : 3)
            let tx = anchorRight ? x + 6 : x - 6
            out +=
                "<text x=\"\(n(tx))\" y=\"\(n(ty + 4))\" text-anchor=\"\(anchorRight ? "start" : "end")\">\(label)</text>\n"
        }
        _ = unit
        return out
    }

    /// 1, 2 or 5 times a power of ten, at least `v`.
    static func niceCeiling(_ v: Double) -> Double {
        guard v > 0, v.isFinite else { return 1 }
        var p = 1.0
        while p * 10 <= v { p *= 10 }
        while p > v { p /= 10 }
        for m in [1.0, 2, 5, 10] where m * p >= v { return m * p }
        return 10 * p
    }

    /// A coordinate with one decimal.
    static func n(_ v: Double) -> String { LoadFormat.fixed(v, 1) }

    /// `s` with XML's five special characters escaped.
    static func xml(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(c)
            }
        }
        return out
    }
}
