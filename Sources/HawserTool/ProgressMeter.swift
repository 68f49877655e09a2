/// curl's progress meter: the two header lines, then one line redrawn (with `\r`) at most once a
/// second and at the end:
///
///       % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current
///                                      Dload  Upload   Total   Spent    Left  Speed
///     100  1000k  100  1000k    0     0  5000k      0 --:--:-- --:--:-- --:--:-- 5000k
///
/// The formatting is pure (``line(_:)``, ``size(_:)``, ``time(_:)``); ``ProgressMeter`` keeps
/// the counters and the samples for the current speed.
struct ProgressMeter {
    static let header = """
          % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current
                                         Dload  Upload   Total   Spent    Left  Speed

        """

    /// What one line shows.
    struct Snapshot: Equatable {
        /// Bytes expected to arrive and to be sent, when known.
        var downloadTotal: Int64?
        var uploadTotal: Int64?
        var downloaded: Int64
        var uploaded: Int64
        /// Milliseconds since the transfer started.
        var elapsedMilliseconds: Int64
        /// Bytes a second over the last few seconds.
        var currentSpeed: Int64
    }

    /// A size in at most five columns: `12345`, ` 976k`, `97.6M`, ` 9765M`, `95.3G`, ` 9536G`, ` 9313T`, …
    static func size(_ bytes: Int64) -> String {
        // curl prints into six bytes (five and the NUL): a longer text is cut to five.
        String(Self.unclippedSize(bytes).prefix(5))
    }

    private static func unclippedSize(_ bytes: Int64) -> String {
        let k: Int64 = 1024
        let m = k * k
        let g = m * k
        let t = g * k
        let p = t * k
        func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
        if bytes < 100_000 { return pad(String(bytes), 5) }
        if bytes < 10000 * k { return pad(String(bytes / k), 4) + "k" }
        if bytes < 100 * m { return pad(String(bytes / m), 2) + "." + String((bytes % m) / (m / 10)) + "M" }
        if bytes < 10000 * m { return pad(String(bytes / m), 4) + "M" }
        if bytes < 100 * g { return pad(String(bytes / g), 2) + "." + String((bytes % g) / (g / 10)) + "G" }
        if bytes < 10000 * g { return pad(String(bytes / g), 4) + "G" }
        if bytes < 10000 * t { return pad(String(bytes / t), 4) + "T" }
        return pad(String(bytes / p), 4) + "P"
    }

    /// A duration in eight columns: `--:--:--` when unknown (zero or less), ` 1:02:03`, beyond 99
    /// hours `  4d 05h`, beyond 999 days `   1234d`.
    static func time(_ seconds: Int64) -> String {
        if seconds <= 0 { return "--:--:--" }
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
        let h = seconds / 3600
        if h <= 99 {
            return pad(String(h), 2) + ":" + two(seconds % 3600 / 60) + ":" + two(seconds % 60)
        }
        let d = seconds / 86400
        if d <= 999 { return pad(String(d), 3) + "d " + two(seconds % 86400 / 3600) + "h" }
        return pad(String(d), 7) + "d"
    }

    /// Integer percent of `part` in `total` (curl's rounding: by hundredths above 10000 bytes).
    static func percent(_ part: Int64, of total: Int64) -> Int64 {
        if total > 10000 { return part / (total / 100) }
        if total > 0 { return part * 100 / total }
        return 0
    }

    /// One meter line (without the leading `\r`).
    static func line(_ s: Snapshot) -> String {
        let ms = max(1, s.elapsedMilliseconds)
        let spent = s.elapsedMilliseconds / 1000
        let dlSpeed = s.downloaded * 1000 / ms
        let ulSpeed = s.uploaded * 1000 / ms
        var dlPercent: Int64 = 0
        var ulPercent: Int64 = 0
        var dlEstimate: Int64 = 0
        var ulEstimate: Int64 = 0
        if let total = s.uploadTotal, ulSpeed > 0 {
            ulEstimate = total / ulSpeed
            ulPercent = Self.percent(s.uploaded, of: total)
        }
        if let total = s.downloadTotal, dlSpeed > 0 {
            dlEstimate = total / dlSpeed
            dlPercent = Self.percent(s.downloaded, of: total)
        }
        let estimate = max(ulEstimate, dlEstimate)
        let expected = (s.uploadTotal ?? s.uploaded) + (s.downloadTotal ?? s.downloaded)
        let transferred = s.downloaded + s.uploaded
        let totalPercent = Self.percent(transferred, of: expected)
        func three(_ v: Int64) -> String { String(repeating: " ", count: max(0, 3 - String(v).count)) + String(v) }
        return "\(three(totalPercent)) \(Self.size(expected))  \(three(dlPercent)) \(Self.size(s.downloaded))  "
            + "\(three(ulPercent)) \(Self.size(s.uploaded))  \(Self.size(dlSpeed))  \(Self.size(ulSpeed)) "
            + "\(Self.time(estimate)) \(Self.time(spent)) \(Self.time(estimate > 0 ? estimate - spent : 0)) "
            + Self.size(s.currentSpeed)
    }

    // MARK: - State

    private let start: UInt64
    private(set) var downloadTotal: Int64?
    private(set) var uploadTotal: Int64?
    private(set) var downloaded: Int64 = 0
    private(set) var uploaded: Int64 = 0
    private var headerShown = false
    private var lastShownSecond: UInt64 = .max
    /// (time, bytes moved) once a second, the last six: the current speed spans up to five seconds.
    private var samples: [(UInt64, Int64)] = []

    init(start: UInt64) {
        self.start = start
    }

    mutating func setDownloadTotal(_ n: Int64?) { self.downloadTotal = n }
    mutating func setUploadTotal(_ n: Int64?) { self.uploadTotal = n }
    mutating func setDownloaded(_ n: Int64) { self.downloaded = n }
    mutating func setUploaded(_ n: Int64) { self.uploaded = n }

    /// The text to write now (header and/or `\r` line), or nil when less than a new second has
    /// passed since the last line; `force` for the last line.
    mutating func update(now: UInt64, force: Bool = false) -> String? {
        let second = (now &- self.start) / 1_000_000_000
        guard force || second != self.lastShownSecond else { return nil }
        self.lastShownSecond = second
        let moved = self.downloaded + self.uploaded
        self.samples.append((now, moved))
        if self.samples.count > 6 { self.samples.removeFirst() }
        let elapsedMs = Int64((now &- self.start) / 1_000_000)
        var current: Int64
        if self.samples.count > 1, let first = self.samples.first {
            let spanMs = max(1, Int64((now &- first.0) / 1_000_000))
            current = (moved - first.1) * 1000 / spanMs
        } else {
            current = moved * 1000 / max(1, elapsedMs)
        }
        current = max(0, current)
        var out = ""
        if !self.headerShown {
            out += Self.header
            self.headerShown = true
        }
        out +=
            "\r"
            + Self.line(
                Snapshot(
                    downloadTotal: self.downloadTotal,
                    uploadTotal: self.uploadTotal,
                    downloaded: self.downloaded,
                    uploaded: self.uploaded,
                    elapsedMilliseconds: elapsedMs,
                    currentSpeed: current
                )
            )
        return out
    }
}
