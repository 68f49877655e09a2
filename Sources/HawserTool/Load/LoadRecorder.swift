// What one event loop of a load run counts. Each loop has its own recorder and only that loop
// touches it, so recording takes no lock; the run's ticker reads it on the loop (submitAndWait).
import HawserCore

/// The numbers one loop has counted: totals, and the corrected latencies since the last
/// ``takeDelta()`` (the ticker's per-second timeline and the live line's "so far").
final class LoadRecorder: @unchecked Sendable {
    var corrected = LatencyHistogram()
    var uncorrected = LatencyHistogram()
    /// Corrected latencies since the last delta was taken.
    var recent = LatencyHistogram()
    var requests: UInt64 = 0
    var bytes: UInt64 = 0
    var errorTotal: UInt64 = 0
    /// Counts of the status codes 0...599 by index (no hashing per response); others in `otherStatus`.
    var statusCounts = [UInt64](repeating: 0, count: 600)
    var otherStatus: [Int: UInt64] = [:]
    /// Closed loop: the latency from the intended time is the one from the send, recorded once.
    var closedLoop = false
    var errors: [LoadErrorKind: LoadErrorCount] = [:]
    /// The monotonic time (ns) of the last response or error.
    var lastEvent: UInt64 = 0
    /// The raw engine's read buffer, shared by the loop's connections (a read is parsed before
    /// the next one starts).
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    deinit { self.scratch.deallocate() }

    /// A response with `status` completed at `now`; it was due at `intended` and sent at `sent`.
    @inline(__always)
    func response(status: Int, bytes: UInt64, intended: UInt64, sent: UInt64, now: UInt64) {
        let fromIntended = now &- min(intended, now)
        self.corrected.record(fromIntended)
        self.recent.record(fromIntended)
        if !self.closedLoop { self.uncorrected.record(now &- min(sent, now)) }
        self.requests += 1
        self.bytes &+= bytes
        if status >= 0 && status < 600 {
            self.statusCounts[status] += 1
        } else {
            self.otherStatus[status, default: 0] += 1
        }
        self.lastEvent = now
    }

    /// The status counts as a map of the codes seen.
    var status: [Int: UInt64] {
        var out = self.otherStatus
        for (code, n) in self.statusCounts.enumerated() where n > 0 { out[code] = n }
        return out
    }

    /// The latencies from the actual send (in a closed loop the same as the corrected ones).
    var uncorrectedLatencies: LatencyHistogram { self.closedLoop ? self.corrected : self.uncorrected }

    /// Bytes read that belong to no completed response (a failed one).
    func read(bytes: UInt64) { self.bytes &+= bytes }

    func error(_ kind: LoadErrorKind, _ message: @autoclosure () -> String, now: UInt64) {
        self.errorTotal += 1
        if self.errors[kind] == nil {
            self.errors[kind] = LoadErrorCount(count: 1, firstMessage: message())
        } else {
            self.errors[kind]!.count += 1
        }
        self.lastEvent = now
    }

    /// What the ticker takes each time: the cumulative counters and the latencies since last time.
    struct Delta: Sendable {
        var requests: UInt64
        var errors: UInt64
        var bytes: UInt64
        var recent: LatencyHistogram
    }

    func takeDelta() -> Delta {
        let d = Delta(requests: self.requests, errors: self.errorTotal, bytes: self.bytes, recent: self.recent)
        self.recent.reset()
        return d
    }
}

/// Which kind of error a failed request counts as.
enum LoadErrorClassifier {
    static func kind(of e: HawserError) -> LoadErrorKind {
        switch e.code {
        case .cannotConnect, .cannotResolveHost: return .connect
        case .secureConnectionFailed, .serverCertificateUntrusted, .clientCertificateRequired: return .tls
        case .connectTimeout, .idleTimeout, .resourceTimeout: return .timeout
        case .connectionLost: return .reset
        case .protocolError, .limitExceeded, .cannotDecodeContent: return .protocol
        default: return .other
        }
    }
}
