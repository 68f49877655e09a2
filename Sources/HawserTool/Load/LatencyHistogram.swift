// LatencyHistogram: an HdrHistogram (Gil Tene's high dynamic range histogram) written for
// `hawser load`. The layout is HdrHistogram's, so that its V2 encoding (LatencyHistogramCoding.swift)
// is read by HdrHistogram's own tools:
//   - values are kept to `significantDigits` decimal digits: the smallest power of two at least
//     2 * 10^digits is the sub-bucket count (2048 for 3 digits);
//   - the unit is the largest power of two not above `lowestDiscernible` (512 ns for 1 us);
//   - bucket 0 holds sub-buckets 0 ..< subBucketCount at the unit's resolution, every later
//     bucket holds the upper half of its sub-buckets at twice the previous resolution, so the
//     counts array is (bucketCount + 1) * subBucketHalfCount long.

/// HdrHistogram (3 significant digits by default), values in nanoseconds.
struct LatencyHistogram: Sendable, Equatable {
    /// The smallest value told apart from 0 (rounded down to a power of two for the layout).
    let lowestDiscernible: UInt64
    /// The largest value recorded as itself; larger ones are counted at this value.
    let highestTrackable: UInt64
    /// Decimal digits of precision kept for every value (1 ... 5).
    let significantDigits: Int

    let unitMagnitude: Int
    let subBucketHalfCountMagnitude: Int
    let subBucketCount: Int
    let subBucketHalfCount: Int
    let subBucketMask: UInt64
    let bucketCount: Int
    private(set) var counts: [UInt64]
    private(set) var totalCount: UInt64 = 0
    /// The smallest and largest values recorded (raw, not rounded to their buckets); 0 when empty.
    private var minRecorded: UInt64 = .max
    private var maxRecorded: UInt64 = 0

    init(lowestDiscernible: UInt64 = 1_000, highestTrackable: UInt64 = 3_600_000_000_000, significantDigits: Int = 3) {
        let lowest = max(lowestDiscernible, 1)
        let digits = min(max(significantDigits, 1), 5)
        self.lowestDiscernible = lowest
        self.highestTrackable = max(highestTrackable, 2 * lowest)
        self.significantDigits = digits
        var singleUnit: UInt64 = 2
        for _ in 0..<digits { singleUnit *= 10 }
        // ceil(log2(2 * 10^digits)) bits of sub-bucket index.
        let subBucketCountMagnitude = 64 - (singleUnit - 1).leadingZeroBitCount
        self.subBucketHalfCountMagnitude = subBucketCountMagnitude - 1
        self.unitMagnitude = 63 - lowest.leadingZeroBitCount
        self.subBucketCount = 1 << subBucketCountMagnitude
        self.subBucketHalfCount = self.subBucketCount / 2
        self.subBucketMask = UInt64(self.subBucketCount - 1) << UInt64(self.unitMagnitude)
        // Buckets until the first value beyond the last bucket exceeds highestTrackable.
        var smallestUntrackable = UInt64(self.subBucketCount) << UInt64(self.unitMagnitude)
        var buckets = 1
        while smallestUntrackable <= self.highestTrackable {
            if smallestUntrackable > UInt64(Int64.max) / 2 {
                buckets += 1
                break
            }
            smallestUntrackable <<= 1
            buckets += 1
        }
        self.bucketCount = buckets
        self.counts = [UInt64](repeating: 0, count: (buckets + 1) * self.subBucketHalfCount)
    }

    static func == (a: LatencyHistogram, b: LatencyHistogram) -> Bool {
        a.unitMagnitude == b.unitMagnitude && a.subBucketCount == b.subBucketCount
            && a.highestTrackable == b.highestTrackable && a.totalCount == b.totalCount && a.counts == b.counts
    }

    // MARK: - Index arithmetic

    func bucketIndex(_ value: UInt64) -> Int {
        // The power of two above the sub-bucket range, counted from bucket 0.
        let base = 64 - self.unitMagnitude - self.subBucketHalfCountMagnitude - 1
        return base - (value | self.subBucketMask).leadingZeroBitCount
    }

    func countsIndex(_ value: UInt64) -> Int {
        let bucket = self.bucketIndex(value)
        let subBucket = Int(value >> UInt64(bucket + self.unitMagnitude))
        return ((bucket + 1) << self.subBucketHalfCountMagnitude) + (subBucket - self.subBucketHalfCount)
    }

    /// The lowest value of the counts slot `index`.
    func valueFromIndex(_ index: Int) -> UInt64 {
        var bucket = (index >> self.subBucketHalfCountMagnitude) - 1
        var subBucket = (index & (self.subBucketHalfCount - 1)) + self.subBucketHalfCount
        if bucket < 0 {
            subBucket -= self.subBucketHalfCount
            bucket = 0
        }
        return UInt64(subBucket) << UInt64(bucket + self.unitMagnitude)
    }

    /// The width of the range of values counted together with `value`.
    func sizeOfEquivalentRange(_ value: UInt64) -> UInt64 {
        let bucket = self.bucketIndex(value)
        let subBucket = Int(value >> UInt64(bucket + self.unitMagnitude))
        let adjusted = subBucket >= self.subBucketCount ? bucket + 1 : bucket
        return 1 << UInt64(self.unitMagnitude + adjusted)
    }

    func lowestEquivalent(_ value: UInt64) -> UInt64 {
        let bucket = self.bucketIndex(value)
        let subBucket = value >> UInt64(bucket + self.unitMagnitude)
        return subBucket << UInt64(bucket + self.unitMagnitude)
    }

    func highestEquivalent(_ value: UInt64) -> UInt64 {
        self.lowestEquivalent(value) + self.sizeOfEquivalentRange(value) - 1
    }

    func medianEquivalent(_ value: UInt64) -> UInt64 {
        self.lowestEquivalent(value) + self.sizeOfEquivalentRange(value) / 2
    }

    // MARK: - Recording

    mutating func record(_ nanoseconds: UInt64) {
        self.record(nanoseconds, count: 1)
    }

    mutating func record(_ nanoseconds: UInt64, count: UInt64) {
        guard count > 0 else { return }
        let value = min(nanoseconds, self.highestTrackable)
        let index = self.countsIndex(value)
        self.counts[index] &+= count
        self.totalCount &+= count
        if value < self.minRecorded { self.minRecorded = value }
        if value > self.maxRecorded { self.maxRecorded = value }
    }

    /// Adds every count of `other`. The same layout adds slot by slot; another layout records
    /// each of other's slots at its value (its highest equivalent value, as HdrHistogram does).
    mutating func add(_ other: LatencyHistogram) {
        guard other.totalCount > 0 else { return }
        if other.unitMagnitude == self.unitMagnitude && other.subBucketCount == self.subBucketCount
            && other.counts.count <= self.counts.count
        {
            for (i, c) in other.counts.enumerated() where c > 0 { self.counts[i] &+= c }
            self.totalCount &+= other.totalCount
            self.minRecorded = min(self.minRecorded, other.minRecorded)
            self.maxRecorded = max(self.maxRecorded, other.maxRecorded)
        } else {
            for (i, c) in other.counts.enumerated() where c > 0 {
                self.record(other.valueFromIndex(i), count: c)
            }
        }
    }

    mutating func reset() {
        for i in self.counts.indices { self.counts[i] = 0 }
        self.totalCount = 0
        self.minRecorded = .max
        self.maxRecorded = 0
    }

    /// Sets the count of one slot (the decoder's way in); keeps total, min and max right.
    mutating func setCount(atIndex index: Int, _ count: UInt64) {
        self.totalCount = self.totalCount - self.counts[index] + count
        self.counts[index] = count
        guard count > 0 else { return }
        let value = self.valueFromIndex(index)
        self.minRecorded = min(self.minRecorded, value)
        self.maxRecorded = max(self.maxRecorded, value)
    }

    // MARK: - Reading

    /// The smallest recorded value, at the low end of its bucket (HdrHistogram's getMinValue); 0 when empty.
    var minValue: UInt64 {
        self.totalCount == 0 || self.counts[0] > 0 ? 0 : self.lowestEquivalent(self.minRecorded)
    }

    /// The largest recorded value, at the high end of its bucket (HdrHistogram's getMaxValue); 0 when empty.
    var maxValue: UInt64 {
        self.maxRecorded == 0 ? 0 : self.highestEquivalent(self.maxRecorded)
    }

    /// The mean, each count taken at the middle of its bucket (as HdrHistogram does).
    var mean: Double {
        guard self.totalCount > 0 else { return 0 }
        var sum = 0.0
        for (i, c) in self.counts.enumerated() where c > 0 {
            sum += Double(self.medianEquivalent(self.valueFromIndex(i))) * Double(c)
        }
        return sum / Double(self.totalCount)
    }

    /// The population standard deviation, each count at the middle of its bucket.
    var standardDeviation: Double {
        guard self.totalCount > 0 else { return 0 }
        let mean = self.mean
        var sum = 0.0
        for (i, c) in self.counts.enumerated() where c > 0 {
            let d = Double(self.medianEquivalent(self.valueFromIndex(i))) - mean
            sum += d * d * Double(c)
        }
        return (sum / Double(self.totalCount)).squareRoot()
    }

    /// The value at percentile `p` (0 ... 100), HdrHistogram's semantics: the highest value
    /// equivalent to the smallest recorded value with at least ceil(p/100 * total) counts at or
    /// below it (at least 1); p = 0 gives the lowest value equivalent to the minimum. 0 when empty.
    func value(atPercentile p: Double) -> UInt64 {
        guard self.totalCount > 0 else { return 0 }
        let requested = min(max(p.nextDown, 0), 100)
        let target = max(UInt64((requested / 100 * Double(self.totalCount)).rounded(.up)), 1)
        var running: UInt64 = 0
        for (i, c) in self.counts.enumerated() where c > 0 {
            running += c
            if running >= target {
                let v = self.valueFromIndex(i)
                return p <= 0 ? self.lowestEquivalent(v) : self.highestEquivalent(v)
            }
        }
        return self.maxValue
    }

    /// The counts slots that hold counts, in value order: (lowest value of the slot, count).
    func recordedSlots() -> [(value: UInt64, count: UInt64)] {
        var out: [(value: UInt64, count: UInt64)] = []
        for (i, c) in self.counts.enumerated() where c > 0 { out.append((self.valueFromIndex(i), c)) }
        return out
    }
}
