import Testing

@testable import HawserTool

/// `hawser load`'s HdrHistogram: layout, percentiles, merge and the V2 encoding (issue 25, item 3).
@Suite("hawser load: LatencyHistogram")
struct LoadHistogramTests {
    /// 1 us ... 10 ms in 1 us steps, as HdrHistogram's Python port holds them.
    static func uniform() -> LatencyHistogram {
        var h = LatencyHistogram()
        for v in 1...10_000 { h.record(UInt64(v) * 1_000) }
        return h
    }

    @Test("the layout of 3 digits from 1 us to 1 hour is HdrHistogram's")
    func layout() {
        let h = LatencyHistogram()
        #expect(h.unitMagnitude == 9)
        #expect(h.subBucketCount == 2048)
        #expect(h.bucketCount == 23)
        #expect(h.counts.count == 24 * 1024)
        // Every value is kept to 3 significant digits: its bucket is at most 1/1000 of it wide.
        for v: UInt64 in [1_048_576, 2_000_000, 123_456_789, 3_599_999_999_999] {
            #expect(h.lowestEquivalent(v) <= v && v <= h.highestEquivalent(v))
            #expect(Double(h.sizeOfEquivalentRange(v)) <= Double(v) / 1000)
        }
    }

    @Test("percentiles of 1 ... 10,000 us are the values HdrHistogram's Python port gives")
    func uniformPercentiles() {
        let h = Self.uniform()
        #expect(h.totalCount == 10_000)
        // hdrhistogram 0.10.8 (PyPI), the same values recorded into HdrHistogram(1000, 3600000000000, 3).
        #expect(h.value(atPercentile: 50) == 5_001_215)
        #expect(h.value(atPercentile: 90) == 9_003_007)
        #expect(h.value(atPercentile: 99) == 9_904_127)
        #expect(h.value(atPercentile: 99.9) == 9_994_239)
        #expect(h.value(atPercentile: 99.99) == 10_002_431)
        #expect(h.value(atPercentile: 100) == 10_002_431)
        #expect(h.maxValue == 10_002_431)
        #expect(h.minValue == 512)
        #expect(abs(h.mean - 5_000_504.6272) < 0.01)
        #expect(abs(h.standardDeviation - 2_886_751.866) < 0.01)
        // Within the 3-digit bound of the exact percentile (the k-th of n values).
        for p in [25.0, 50, 75, 90, 99, 99.9] {
            let exact = Double((p / 100 * 10_000).rounded(.up)) * 1_000
            let v = Double(h.value(atPercentile: p))
            #expect(v >= exact && v <= exact * 1.001, "p\(p): \(v) vs \(exact)")
        }
    }

    @Test("a single value, an empty histogram, values above the range, and counts")
    func edges() {
        var h = LatencyHistogram()
        #expect(h.value(atPercentile: 99) == 0 && h.maxValue == 0 && h.minValue == 0 && h.mean == 0)
        h.record(7_000_000_000_000)  // above 1 hour: counted at 1 hour
        #expect(h.totalCount == 1)
        #expect(h.maxValue >= 3_600_000_000_000 && h.maxValue <= 3_604_000_000_000)
        h.reset()
        #expect(h.totalCount == 0 && h.maxValue == 0)
        h.record(50_000_000, count: 99)
        h.record(1_000_000_000)
        // 99 of 100 at 50 ms: p99 is 50 ms (to 3 digits), p99.5 and max are the 1 s one.
        #expect(h.value(atPercentile: 99) == h.highestEquivalent(50_000_000))
        #expect(h.value(atPercentile: 99.5) == h.highestEquivalent(1_000_000_000))
        #expect(h.value(atPercentile: 0) == h.lowestEquivalent(50_000_000))
    }

    @Test("add is the same as recording every value into one histogram")
    func addIsRecordAll() {
        var a = LatencyHistogram()
        var b = LatencyHistogram()
        var all = LatencyHistogram()
        var x: UInt64 = 12345
        for i in 0..<20_000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let v = (x >> 20) % 5_000_000_000
            if i % 3 == 0 { a.record(v) } else { b.record(v) }
            all.record(v)
        }
        a.add(b)
        #expect(a == all)
        for p in [50.0, 90, 99, 99.9, 99.99, 100] { #expect(a.value(atPercentile: p) == all.value(atPercentile: p)) }
        #expect(a.maxValue == all.maxValue && a.minValue == all.minValue)
    }

    @Test("the compressed V2 encoding round-trips")
    func roundTrip() throws {
        var h = Self.uniform()
        h.record(3_000_000_000, count: 5)
        h.record(2_000_000_000_000)
        let decoded = try LatencyHistogram(base64: h.encodedBase64())
        #expect(decoded == h)
        #expect(decoded.maxValue == h.maxValue && decoded.value(atPercentile: 99.9) == h.value(atPercentile: 99.9))
        let empty = try LatencyHistogram(base64: LatencyHistogram().encodedBase64())
        #expect(empty.totalCount == 0)
    }

    @Test("decodes what HdrHistogram's Python port encodes, and its encoding decodes there")
    func decodesPythonEncoding() throws {
        // hdrhistogram 0.10.8: HdrHistogram(1000, 3600000000000, 3), record_value of 1000, 1500,
        // 2e6, 5e7, 999999999, 3e9, and 12345678 five times; then encode().
        let python = "HISTFAAAADN4nJNpmSzMwMAgxAABzFDqBRC7GexYwGD/ASLCyMS0W4+pUZNroQLTT1emwxJMAOWZCcs="
        let h = try LatencyHistogram(base64: python)
        #expect(h.totalCount == 11)
        #expect(h.value(atPercentile: 50) == 12_353_535)
        #expect(h.value(atPercentile: 99) == 3_001_024_511)
        #expect(h.maxValue == 3_001_024_511)
        #expect(h.minValue == 512)
        var same = LatencyHistogram()
        for v: UInt64 in [1000, 1500, 2_000_000, 50_000_000, 999_999_999, 3_000_000_000] { same.record(v) }
        same.record(12_345_678, count: 5)
        #expect(h == same)
        // The same uncompressed bytes as Python's (zlib output may differ between zlib builds).
        let uniformPython =
            "HISTFAAAAIZ4nJNpmSzMwCBylAECmKHUCyB2M9ixgMH+A0SEkYlYSH2FtDBz1PJRy0ctH7V81PJRy0ctJ0IhOmDBEMEFaKBy1PJRy0ctp6flLOiADUOENoL0smfU8lHLRy3HKcgBAVwcHBgsrIIEpGlr0Kjlo5aPWk5VgwQEhAQEsBNUk6G1FTwAE/ZYFg=="
        #expect(try LatencyHistogram(base64: uniformPython) == Self.uniform())
    }

    @Test("corrupt encodings are errors, not crashes")
    func corrupt() {
        #expect(throws: HistogramDecodingError.self) { try LatencyHistogram(base64: "not base64!") }
        #expect(throws: HistogramDecodingError.self) { try LatencyHistogram(base64: "HISTFAAAADN4nJNpmSzMwMAgxAAB") }
        var bytes = LoadHistogramTests.uniform().encodedV2()
        bytes[3] ^= 0xff
        #expect(throws: HistogramDecodingError.self) { try LatencyHistogram(encoded: bytes) }
        var truncated = LoadHistogramTests.uniform().encodedV2()
        truncated.removeLast(3)
        #expect(throws: HistogramDecodingError.self) { try LatencyHistogram(encoded: truncated) }
    }
}
