// Number formatting for the load reports, without String(format:) (which would link ICU).

enum LoadFormat {
    /// `x` with exactly `decimals` digits after the point (rounded half away from zero).
    static func fixed(_ x: Double, _ decimals: Int) -> String {
        guard x.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let negative = x < 0
        let scaled = (abs(x) * scale).rounded()
        guard scaled < 9.0e18 else { return String(x) }
        let n = UInt64(scaled)
        let whole = n / UInt64(scale)
        var text = (negative && n > 0 ? "-" : "") + String(whole)
        if decimals > 0 {
            let frac = String(n % UInt64(scale))
            text += "." + String(repeating: "0", count: decimals - frac.count) + frac
        }
        return text
    }

    /// A latency in nanoseconds as wrk prints it: 3 significant digits and a unit (us, ms, s).
    static func duration(_ ns: UInt64) -> String {
        let v = Double(ns)
        if ns < 1_000 { return "\(ns)ns" }
        if ns < 1_000_000 { return self.significant(v / 1e3) + "us" }
        if ns < 1_000_000_000 { return self.significant(v / 1e6) + "ms" }
        if ns < 60_000_000_000 { return self.significant(v / 1e9) + "s" }
        return self.fixed(v / 60e9, 2) + "m"
    }

    /// `x` (>= 1) with 2 decimals below 10, 1 below 100, none above.
    static func significant(_ x: Double) -> String {
        x < 10 ? self.fixed(x, 2) : x < 100 ? self.fixed(x, 1) : self.fixed(x, 0)
    }

    /// A count with k/M/G as wrk prints them (1.23k).
    static func count(_ x: Double) -> String {
        if x < 1_000 { return self.fixed(x, x == x.rounded() ? 0 : 2) }
        if x < 1_000_000 { return self.fixed(x / 1e3, 2) + "k" }
        if x < 1_000_000_000 { return self.fixed(x / 1e6, 2) + "M" }
        return self.fixed(x / 1e9, 2) + "G"
    }

    /// Bytes with binary units as wrk prints them (1.23MB).
    static func bytes(_ x: Double) -> String {
        if x < 1_024 { return self.fixed(x, 0) + "B" }
        if x < 1_048_576 { return self.fixed(x / 1_024, 2) + "KB" }
        if x < 1_073_741_824 { return self.fixed(x / 1_048_576, 2) + "MB" }
        return self.fixed(x / 1_073_741_824, 2) + "GB"
    }

    /// Nanoseconds as milliseconds with 3 decimals (the JSON's latency unit: 1 us resolution).
    static func ms(_ ns: UInt64) -> String { self.fixed(Double(ns) / 1e6, 3) }

    /// `text` padded with spaces on the left to `width`.
    static func left(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    /// `text` padded with spaces on the right to `width`.
    static func right(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }
}
