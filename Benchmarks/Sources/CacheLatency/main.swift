// cache-latency: the event loop's latency for other connections while the HTTP cache stores and
// serves a large body on that same loop.
//
//   cache-latency [--size BYTES] [--rounds N] [--idle-seconds S] [--dir PATH]
//
// One client EventLoop carries two sessions. The probe session (no cache) sends small keep-alive
// GETs (/hello) one after another, each issued from the previous one's completion on the loop,
// and records each round trip. The bulk session (a disk cache: 16 MiB in memory, so the large
// entry lives on disk only) runs ROUNDS rounds of: GET /bytes/SIZE?max-age=600&r=I (a miss:
// downloaded, recorded, stored on disk) then the same GET again (a fresh disk hit: read back
// and delivered). The probes and the bulk GETs go to two test servers, each on a loop of its own
// (making the 256 MiB body stalls the bulk server's loop, which must not be blamed on the
// client). Phase "idle" measures the probes alone for S seconds; phase "cache" measures them
// while the rounds run.
//
// Prints, per phase:
//   RESULT phase=P probes=N p50_us=A p99_us=B max_us=C
// and per round:
//   ROUND i store_s=S serve_s=T
// and exits non-zero if a bulk response came short or a probe failed.
import FoundationEssentials
import HawserCore
import HawserTestServer
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    let text = "cache-latency: \(message)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

var size = 256 << 20
var rounds = 3
var idleSeconds = 2.0
var directory = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-cache-latency-\(getpid())").path
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--size": size = args.popFirst().flatMap(Int.init) ?? size
    case "--rounds": rounds = args.popFirst().flatMap(Int.init) ?? rounds
    case "--idle-seconds": idleSeconds = args.popFirst().flatMap(Double.init) ?? idleSeconds
    case "--dir": directory = args.popFirst() ?? directory
    default:
        fail("unknown argument \(a); usage: cache-latency [--size BYTES] [--rounds N] [--idle-seconds S] [--dir PATH]")
    }
}

/// Small GETs back to back on the loop; each latency recorded into the current phase.
final class Prober: @unchecked Sendable {
    private let session: Session
    private let request: HTTPClientRequest
    // Loop-confined.
    private var samples: [UInt64] = []
    private var stopped = false
    private var failure: String?
    private let finished = Mutex<CheckedContinuation<([UInt64], String?), Never>?>(nil)

    init(session: Session, url: URL) {
        self.session = session
        self.request = HTTPClientRequest(url: url)
    }

    func start() { self.session.eventLoop.execute { self.next() } }

    private func next() {
        if self.stopped {
            let result = (self.samples, self.failure)
            self.samples = []
            self.stopped = false
            self.failure = nil
            self.finished.withLock { $0 }?.resume(returning: result)
            return
        }
        let started = now()
        self.session.execute(self.request) { result in
            if case .failure(let e) = result { self.failure = "\(e)" }
            self.samples.append(now() - started)
            self.next()
        }
    }

    /// Ends the current phase (after the probe in flight) and returns its samples.
    func collect() async -> ([UInt64], String?) {
        await withCheckedContinuation { c in
            self.finished.withLock { $0 = c }
            self.session.eventLoop.execute { self.stopped = true }
        }
    }
}

/// Counts body bytes on the loop (no copy), signals the end.
final class CountingDelegate: ResponseDelegate, @unchecked Sendable {
    private var bytes = 0
    private var cacheUse: TaskMetrics.CacheUse?
    private let done: @Sendable (Result<(Int, TaskMetrics.CacheUse?), HawserError>) -> Void
    init(done: @escaping @Sendable (Result<(Int, TaskMetrics.CacheUse?), HawserError>) -> Void) { self.done = done }
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {}
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) { self.bytes += bytes.count }
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.done(result.map { _ in (self.bytes, metrics.cacheUse) })
    }
}

func fetch(_ session: Session, _ url: URL) async -> (Int, TaskMetrics.CacheUse?) {
    let result = await withCheckedContinuation {
        (c: CheckedContinuation<Result<(Int, TaskMetrics.CacheUse?), HawserError>, Never>) in
        session.execute(HTTPClientRequest(url: url), delegate: CountingDelegate { c.resume(returning: $0) })
    }
    switch result {
    case .success(let r): return r
    case .failure(let e): fail("bulk GET \(url) failed: \(e)")
    }
}

func report(_ phase: String, _ samples: [UInt64]) {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { fail("phase \(phase): no probes completed") }
    func pct(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000 }
    print(
        "RESULT phase=\(phase) probes=\(sorted.count) p50_us=\(Int(pct(0.50))) p99_us=\(Int(pct(0.99))) max_us=\(Int(Double(sorted.last!) / 1000))"
    )
}

let bulkServerLoop = try EventLoop(name: "bulk-server")
let probeServerLoop = try EventLoop(name: "probe-server")
let clientLoop = try EventLoop(name: "client-loop")
let server = try TestServer(loop: bulkServerLoop)
let probeServer = try TestServer(loop: probeServerLoop)
let cache = try HTTPCache(memoryCapacity: 16 << 20, diskCapacity: max(size * 11, 64 << 20), directory: directory)
var bulkConfiguration = SessionConfiguration.default
bulkConfiguration.urlCache = cache
bulkConfiguration.maximumBufferedBodySize = size + 1
var probeConfiguration = SessionConfiguration.default
probeConfiguration.urlCache = nil
let bulk = Session(configuration: bulkConfiguration, eventLoop: clientLoop)
let probe = Session(configuration: probeConfiguration, eventLoop: clientLoop)
let prober = Prober(session: probe, url: URL(string: probeServer.baseURL + "/hello")!)

prober.start()
try await Task.sleep(for: .seconds(idleSeconds))
let (idle, idleFailure) = await prober.collect()
if let idleFailure { fail("a probe failed: \(idleFailure)") }
report("idle", idle)

prober.start()
for round in 0..<rounds {
    let url = URL(string: server.baseURL + "/bytes/\(size)?max-age=600&r=\(round)")!
    let t0 = now()
    let (stored, firstUse) = await fetch(bulk, url)
    let t1 = now()
    let (served, secondUse) = await fetch(bulk, url)
    let t2 = now()
    guard stored == size, served == size else { fail("round \(round): \(stored) and \(served) bytes of \(size)") }
    guard firstUse == nil, secondUse == .fresh else {
        fail(
            "round \(round): cache use \(String(describing: firstUse)), \(String(describing: secondUse)); the entry was not stored on disk"
        )
    }
    print("ROUND \(round) store_s=\(Double(t1 - t0) / 1e9) serve_s=\(Double(t2 - t1) / 1e9)")
}
let (busy, busyFailure) = await prober.collect()
if let busyFailure { fail("a probe failed: \(busyFailure)") }
report("cache", busy)

cache.removeAll()
try? FileManager.default.removeItem(atPath: directory)
bulk.shutdown()
probe.shutdown()
server.shutdown()
probeServer.shutdown()
