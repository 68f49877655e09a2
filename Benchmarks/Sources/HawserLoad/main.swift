// hawser-load: a wrk-like HTTP/1.1 load generator on HawserCore.
//
//   hawser-load [-c CONNECTIONS] [-t LOOPS] [-d SECONDS | -n REQUESTS] [--latency] [--session] URL
//   TLS (--session only; the raw mode speaks plain HTTP): --cacert FILE (trust only these PEM
//   certificates: DefaultTrustEvaluator(anchors: .custom)), --no-resumption
//   (config.tls.sessionResumption = false), --cache (an in-memory HTTP cache), --new-connection (`Connection: close` on every
//   request: one request per TCP+TLS connection). With https, a `TLS` line reports the
//   handshakes seen in the metrics (count, resumed, mean secureConnectionEnd − Start).
//
// Default (raw) mode: each connection lives on one of the -t event loops and runs
// request → parse → next request from the readiness event, with HawserHTTP1's parser over
// the connection's own buffer: the engine's floor, comparable to wrk.
// --session: the same load through the engine's public API (`Session.response(for:)`, async),
// -c concurrent Swift tasks over a pool of -c connections: what an application gets. With
// -t N, one session over an N-loop group (the -c connections spread over its loops).
//
// The summary uses wrk's wording (Requests/sec:, Transfer/sec:, Latency Distribution), and the
// last line is `RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K`
// (the same as Benchmarks/peers/curl-multi) for Benchmarks/scripts/compare.sh.
import FoundationEssentials
import HawserCore
import Histogram
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct Options {
    var connections = 10
    var loops = 1
    var seconds: Double? = nil
    var requests: Int? = nil
    var latency = false
    var session = false
    var onLoop = false
    var idleSeconds: Double? = nil
    var hold = false
    var caCert: String? = nil
    var resumption = true
    var newConnection = false
    /// --cache: give the Session an in-memory HTTP cache (a cacheable URL is then served from it).
    var cache = false
    /// --api completion: Session.execute(_:completion:) chains instead of `await response(for:)`.
    var completionAPI = false
    var url: URL?
}

func usage(_ message: String) -> Never {
    let text =
        "hawser-load: \(message)\nusage: hawser-load [-c N] [-t N] [-d SECONDS | -n REQUESTS] [--latency] [--session [--executor global|loop] [--api async|completion] [--cacert FILE] [--no-resumption] [--new-connection] [--cache]] URL\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

func parseOptions() -> Options {
    var o = Options()
    var args = Array(CommandLine.arguments.dropFirst())[...]
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else { usage("\(flag) needs a value") }
        return v
    }
    while let a = args.popFirst() {
        switch a {
        case "-c", "--connections": o.connections = Int(value(a)) ?? 0
        case "-t", "--threads": o.loops = Int(value(a)) ?? 0
        case "-d", "--duration":
            var v = value(a)
            if v.hasSuffix("s") { v.removeLast() }
            o.seconds = Double(v)
        case "-n", "--requests": o.requests = Int(value(a))
        case "--latency": o.latency = true
        case "--idle": o.idleSeconds = Double(value(a))
        case "--hold": o.hold = true
        case "--session": o.session = true
        case "--cacert": o.caCert = value(a)
        case "--no-resumption": o.resumption = false
        case "--new-connection": o.newConnection = true
        case "--cache": o.cache = true
        case "--api":
            switch value(a) {
            case "completion": o.completionAPI = true
            case "async": o.completionAPI = false
            default: usage("--api takes async or completion")
            }
        case "--executor":
            switch value(a) {
            case "loop": o.onLoop = true
            case "global": o.onLoop = false
            default: usage("--executor takes loop or global")
            }
        default:
            if a.hasPrefix("-") { usage("unknown option '\(a)'") }
            o.url = URL(string: a)
        }
    }
    if o.idleSeconds != nil { return o }
    guard o.url != nil else { usage("no URL") }
    guard o.connections > 0, o.loops > 0 else { usage("-c and -t must be positive") }
    if o.seconds == nil && o.requests == nil { o.seconds = 10 }
    if !o.session && (o.caCert != nil || !o.resumption || o.newConnection || o.url?.scheme == "https") {
        usage(
            "https, --cacert, --no-resumption and --new-connection need --session (the raw mode speaks plain HTTP only)"
        )
    }
    return o
}

func raiseFileLimit() {
    var r = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
    r.rlim_cur = r.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
}

func resolve(_ url: URL) -> SocketAddress {
    let host = url.host(percentEncoded: false) ?? "127.0.0.1"
    let port = url.port ?? 80
    if let a = SocketAddress(ipAddress: host, port: port) { return a }
    let box = Mutex<[SocketAddress]?>(nil)
    let done = DispatchSemaphoreLite()
    Resolver.shared.resolve(host: host, port: port) { r in
        box.withLock { $0 = (try? r.get()) ?? [] }
        done.signal()
    }
    done.wait()
    guard let a = box.withLock({ $0 })?.first else { usage("cannot resolve \(host)") }
    return a
}

/// A tiny semaphore (no Dispatch needed for one wait).
final class DispatchSemaphoreLite: @unchecked Sendable {
    private var m = pthread_mutex_t()
    private var c = pthread_cond_t()
    private var count = 0
    init() {
        pthread_mutex_init(&m, nil)
        pthread_cond_init(&c, nil)
    }
    func signal() {
        pthread_mutex_lock(&m)
        count += 1
        pthread_cond_signal(&c)
        pthread_mutex_unlock(&m)
    }
    func wait() {
        pthread_mutex_lock(&m)
        while count == 0 { pthread_cond_wait(&c, &m) }
        count -= 1
        pthread_mutex_unlock(&m)
    }
}

struct Totals {
    var requests = 0
    var errors = 0
    var bytes = 0
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var perLoopRPS: [Double] = []
    /// TLS handshakes seen in the metrics (new connections), how many resumed, their total ns.
    var handshakes = 0
    var resumed = 0
    var handshakeNanos: UInt64 = 0
    var resumedNanos: UInt64 = 0

    /// Counts one answered request sent at `sent` (monotonic ns).
    mutating func record(_ r: HTTPClientResponse, sent: UInt64) {
        _ = self.histogram.record((TaskMetrics.now() - sent) / 1000)
        self.requests += 1
        self.bytes += Int(r.metrics.bytesReceived)
        if let s = r.metrics.secureConnectionStart, let e = r.metrics.secureConnectionEnd, e >= s {
            self.handshakes += 1
            self.handshakeNanos += e - s
            if r.metrics.isResumedTLSSession == true {
                self.resumed += 1
                self.resumedNanos += e - s
            }
        }
    }

    mutating func add(_ l: Totals) {
        self.requests += l.requests
        self.errors += l.errors
        self.bytes += l.bytes
        self.histogram.add(l.histogram)
        self.handshakes += l.handshakes
        self.resumed += l.resumed
        self.handshakeNanos += l.handshakeNanos
        self.resumedNanos += l.resumedNanos
    }
}

func runRaw(_ o: Options) -> (Totals, Double) {
    let url = o.url!
    let address = resolve(url)
    var target = url.path(percentEncoded: true)
    if target.isEmpty { target = "/" }
    if let q = url.query(percentEncoded: true) { target += "?" + q }
    var hostHeader = url.host(percentEncoded: false) ?? "127.0.0.1"
    if let p = url.port { hostHeader += ":\(p)" }
    var request: [UInt8] = []
    try! HTTP1Encoder.writeRequestHead(
        HTTPRequestHead(method: .get, target: target, headers: ["Host": hostHeader]),
        into: &request
    )

    let group = try! EventLoopGroup(numberOfThreads: o.loops)
    let stats = group.loops.map { _ in LoopStats() }
    let remaining = Atomic<Int>(o.connections)
    let allDone = DispatchSemaphoreLite()
    var connections: [UnsafeTransferBox<LoadConnection>] = []
    let quota = o.requests.map { max(1, ($0 + o.connections - 1) / o.connections) } ?? Int.max
    for i in 0..<o.connections {
        let li = i % o.loops
        let c = LoadConnection(
            loop: group.loops[li],
            address: address,
            request: request,
            stats: stats[li],
            quota: quota
        )
        connections.append(UnsafeTransferBox(c))
    }
    let start = TaskMetrics.now()
    for (i, box) in connections.enumerated() {
        group.loops[i % o.loops].execute {
            box.value.start {
                if remaining.subtract(1, ordering: .relaxed).newValue == 0 { allDone.signal() }
            }
        }
    }
    if let s = o.seconds {
        // Stop every connection at the deadline (each on its own loop).
        for (i, box) in connections.enumerated() {
            group.loops[i % o.loops].schedule(in: UInt64(s * 1e9)) { box.value.stop() }
        }
    }
    allDone.wait()
    let elapsed = Double(TaskMetrics.now() - start) / 1e9
    var t = Totals()
    for (i, s) in stats.enumerated() {
        let r = try! group.loops[i].submitAndWait {
            UnsafeTransferBox((s.requests, s.errors + s.connectErrors, s.bytesRead, s.histogram))
        }.value
        t.requests += r.0
        t.errors += r.1
        t.bytes += r.2
        t.histogram.add(r.3)
        t.perLoopRPS.append(Double(r.0) / elapsed)
    }
    group.shutdown()
    return (t, elapsed)
}

/// A shared request budget for the --session tasks.
final class Budget: Sendable {
    private let left: Atomic<Int>
    init(_ n: Int) { self.left = Atomic(n) }
    func take() -> Bool { self.left.subtract(1, ordering: .relaxed).newValue >= 0 }
}

struct UnsafeTransferBox<T>: @unchecked Sendable {
    let value: T
    init(_ v: T) { self.value = v }
}

func runSession(_ o: Options) async -> (Totals, Double) {
    var config = SessionConfiguration()
    if o.cache { config.urlCache = HTTPCache(memoryCapacity: 8 << 20) }
    config.maximumConnectionsPerHost = o.connections
    config.tls.sessionResumption = o.resumption
    if let path = o.caCert {
        do {
            config.serverTrustEvaluator = DefaultTrustEvaluator(
                anchors: .custom(try Certificate.load(contentsOf: path))
            )
        } catch {
            usage("cannot read --cacert \(path): \(error)")
        }
    }
    // -t N: one session over an N-loop group (each loop with its own connections; tasks
    // preferring a loop, `--executor loop`, are spread over the loops and served by their own).
    let group = o.loops > 1 ? try! EventLoopGroup(numberOfThreads: o.loops) : nil
    let loops = group?.loops ?? [try! EventLoop(name: "hawser-load")]
    let session =
        group.map { Session(configuration: config, eventLoopGroup: $0) }
        ?? Session(configuration: config, eventLoop: loops[0])
    if o.completionAPI && loops.count > 1 { usage("--api completion drives one loop: leave -t out") }
    var built = HTTPClientRequest(url: o.url!)
    if o.newConnection { built.headers.add(name: "Connection", value: "close") }
    let request = built
    let deadline = o.seconds.map { TaskMetrics.now() + UInt64($0 * 1e9) } ?? UInt64.max
    let budget = Budget(o.requests ?? Int.max)
    let start = TaskMetrics.now()
    let t =
        o.completionAPI
        ? await runCompletionChains(
            session: session,
            request: request,
            connections: o.connections,
            deadline: deadline,
            budget: budget
        )
        : await runAsyncCallers(
            session: session,
            request: request,
            connections: o.connections,
            onLoop: o.onLoop ? loops : nil,
            deadline: deadline,
            budget: budget
        )
    let elapsed = Double(TaskMetrics.now() - start) / 1e9
    session.shutdown()
    for l in loops { l.shutdown() }
    var out = t
    out.perLoopRPS = [Double(t.requests) / elapsed]
    return (out, elapsed)
}

/// The default mode: `connections` Swift tasks, each awaiting `response(for:)` in a loop, on
/// the global executor or (`--executor loop`) preferring the session's loop.
func runAsyncCallers(
    session: Session,
    request: HTTPClientRequest,
    connections: Int,
    onLoop: [EventLoop]?,
    deadline: UInt64,
    budget: Budget
) async -> Totals {
    await withTaskGroup(of: Totals.self) { g in
        for i in 0..<connections {
            g.addTask(executorPreference: onLoop.map { $0[i % $0.count] }) {
                var local = Totals()
                while TaskMetrics.now() < deadline && budget.take() {
                    let sent = TaskMetrics.now()
                    do {
                        local.record(try await session.response(for: request), sent: sent)
                    } catch {
                        local.errors += 1
                    }
                }
                return local
            }
        }
        var all = Totals()
        for await l in g { all.add(l) }
        return all
    }
}

/// `--api completion`: `connections` chains of `Session.execute(_:completion:)`, each issuing
/// its next request from the previous one's completion handler (which runs on the session's
/// loop): the callback style NSURLSession and the AFNetworking layer use, with no Swift task
/// hop per request.
func runCompletionChains(
    session: Session,
    request: HTTPClientRequest,
    connections: Int,
    deadline: UInt64,
    budget: Budget
) async -> Totals {
    /// Loop-confined: every chain's completion runs on the session's one loop.
    final class Chains: @unchecked Sendable {
        var totals = Totals()
        var running = 0
    }
    let chains = Chains()
    return await withCheckedContinuation { (cont: CheckedContinuation<Totals, Never>) in
        session.eventLoop.execute {
            chains.running = connections
            @Sendable func next() {
                guard TaskMetrics.now() < deadline && budget.take() else {
                    chains.running -= 1
                    if chains.running == 0 { cont.resume(returning: chains.totals) }
                    return
                }
                let sent = TaskMetrics.now()
                session.execute(request) { result in
                    switch result {
                    case .success(let r):
                        chains.totals.record(r, sent: sent)
                        next()
                    case .failure:
                        // A failure may complete inside execute; go round the loop so a run of
                        // them does not recurse.
                        chains.totals.errors += 1
                        session.eventLoop.execute { next() }
                    }
                }
            }
            for _ in 0..<connections { next() }
        }
    }
}

func fmtTime(_ us: Int) -> String { fmtTime(Double(us)) }
func fmtTime(_ us: Double) -> String {
    if us >= 1_000_000 { return String(format2: us / 1_000_000) + "s" }
    if us >= 1000 { return String(format2: us / 1000) + "ms" }
    return String(format2: us) + "us"
}

func fmtBytes(_ b: Double) -> String {
    if b >= 1_073_741_824 { return String(format2: b / Double(1 << 30)) + "GB" }
    if b >= 1_048_576 { return String(format2: b / Double(1 << 20)) + "MB" }
    if b >= 1024 { return String(format2: b / 1024) + "KB" }
    return String(format2: b) + "B"
}

extension String {
    init(format2 v: Double) {
        let scaled = (v * 100).rounded()
        let whole = Int(scaled / 100)
        let frac = Int(abs(scaled).truncatingRemainder(dividingBy: 100))
        self = "\(whole).\(frac < 10 ? "0" : "")\(frac)"
    }
}

func pad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }

func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(
        u.ru_stime.tv_usec
    ) / 1e6
}

/// Resident set size now (VmRSS), in KiB.
func currentRSSKiB() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buf = [UInt8](repeating: 0, count: 128)
    let n = read(fd, &buf, buf.count)
    guard n > 0 else { return 0 }
    let fields = String(decoding: buf[0..<n], as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

func maxRSSKiB() -> Int {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return u.ru_maxrss
}

/// `--idle S`: an EventLoopGroup (one loop per core) and a Session on it, doing nothing for S seconds.
func runIdle(_ seconds: Double) {
    let group = try! EventLoopGroup()
    let session = Session(eventLoop: group.next())
    let before = cpuSeconds()
    let start = TaskMetrics.now()
    usleep(UInt32(seconds * 1e6))
    let used = cpuSeconds() - before
    let wall = Double(TaskMetrics.now() - start) / 1e9
    print(
        "idle EventLoopGroup: \(group.loops.count) loops for \(String(format2: wall)) s used \(String(format2: used * 1000)) ms CPU (\(String(format2: used / wall * 100))%)"
    )
    print(
        "RESULT idle_seconds=\(String(format2: wall)) cpu_ms=\(String(format2: used * 1000)) loops=\(group.loops.count)"
    )
    session.shutdown()
    group.shutdown()
}

/// Holds every response at its head (pauseReading) until all N have a connection, so the pool
/// cannot serve a late request on a connection an early one released: N requests, N connections.
final class HoldDelegate: ResponseDelegate, @unchecked Sendable {
    let total: Int
    let state = Mutex<(heads: Int, paused: [RequestTask], ok: Int, done: Int)>((0, [], 0, 0))
    let finished = DispatchSemaphoreLite()
    init(total: Int) { self.total = total }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        task.pauseReading()
        let release: [RequestTask] = self.state.withLock { s in
            s.heads += 1
            s.paused.append(task)
            if s.heads == self.total {
                defer { s.paused = [] }
                return s.paused
            }
            return []
        }
        for t in release { t.resumeReading() }
    }
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {}
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        let all = self.state.withLock { s -> Bool in
            if case .success = result { s.ok += 1 }
            s.done += 1
            return s.done == self.total
        }
        if all { self.finished.signal() }
    }
}

/// `--hold -c N -d S URL`: N concurrent requests through one Session, each held at its head
/// until all N are in flight (so N keep-alive connections open), then released to go idle in
/// the pool; hold them for S seconds and report the RSS.
func runHold(_ o: Options) {
    var config = SessionConfiguration()
    config.maximumConnectionsPerHost = o.connections
    config.idleConnectionTimeout = 3600
    let loop = try! EventLoop(name: "hawser-hold")
    let session = Session(configuration: config, eventLoop: loop)
    let rssBefore = maxRSSKiB()
    let request = HTTPClientRequest(url: o.url!)
    let delegate = HoldDelegate(total: o.connections)
    for _ in 0..<o.connections { session.execute(request, delegate: delegate) }
    delegate.finished.wait()
    let ok = delegate.state.withLock { $0.ok }
    let stats = session.poolStatistics()
    usleep(UInt32((o.seconds ?? 5) * 1e6))
    let still = session.poolStatistics()
    let holding = currentRSSKiB()
    print(
        "held \(still.idleConnections) idle keep-alive connections (\(ok) requests answered; \(stats.openConnections) open after the burst)"
    )
    print(
        "RSS while holding \(holding / 1024) MiB; peak RSS \(maxRSSKiB() / 1024) MiB (the burst of requests included); \(rssBefore / 1024) MiB before connecting"
    )
    print(
        "RESULT connections=\(still.idleConnections) ok=\(ok) rss_holding_kb=\(holding) maxrss_kb=\(maxRSSKiB()) rss_before_kb=\(rssBefore)"
    )
    session.shutdown()
    loop.shutdown()
}

raiseFileLimit()
signal(SIGPIPE, SIG_IGN)
let options = parseOptions()
if let idle = options.idleSeconds {
    runIdle(idle)
    exit(0)
}
if options.hold {
    runHold(options)
    exit(0)
}
let mode =
    !options.session
    ? "raw engine"
    : options.completionAPI
        ? "Session API (completion handlers on the session's loop)"
        : "Session API (async, \(options.onLoop ? "tasks on the session's loop" : "global executor"))"
print(
    "Running \(options.seconds.map { "\(String(format2: $0))s" } ?? "\(options.requests!)-request") test @ \(options.url!.absoluteString)"
)
print("  \(options.loops) loop(s) and \(options.connections) connections, \(mode)")
let (totals, elapsed) = options.session ? await runSession(options) : runRaw(options)
var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
let sys = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
let h = totals.histogram
print("  Thread Stats   Avg      Stdev     Max   +/- Stdev")
let rpsMean = totals.perLoopRPS.reduce(0, +) / Double(max(1, totals.perLoopRPS.count))
let rpsStd =
    (totals.perLoopRPS.map { ($0 - rpsMean) * ($0 - rpsMean) }.reduce(0, +) / Double(max(1, totals.perLoopRPS.count)))
    .squareRoot()
print("    Latency \(pad(fmtTime(h.mean), 9)) \(pad(fmtTime(h.stdDeviation), 9)) \(pad(fmtTime(Double(h.max)), 9))")
print("    Req/Sec \(pad(String(format2: rpsMean / 1000) + "k", 9)) \(pad(String(format2: rpsStd / 1000) + "k", 9))")
if options.latency {
    print("  Latency Distribution")
    for p in [50.0, 75.0, 90.0, 99.0] {
        print("  \(pad(String(Int(p)), 4))% \(pad(fmtTime(Double(h.valueAtPercentile(p))), 9))")
    }
}
print("  \(totals.requests) requests in \(String(format2: elapsed))s, \(fmtBytes(Double(totals.bytes))) read")
if totals.errors > 0 { print("  Non-2xx or socket errors: \(totals.errors)") }
print("Requests/sec: \(pad(String(format2: Double(totals.requests) / elapsed), 10))")
print("Transfer/sec: \(pad(fmtBytes(Double(totals.bytes) / elapsed), 10))")
if options.url?.scheme == "https" {
    let full = totals.handshakes - totals.resumed
    let fullUs = full > 0 ? Double(totals.handshakeNanos - totals.resumedNanos) / Double(full) / 1000 : 0
    let resUs = totals.resumed > 0 ? Double(totals.resumedNanos) / Double(totals.resumed) / 1000 : 0
    print(
        "TLS handshakes=\(totals.handshakes) resumed=\(totals.resumed) full_us=\(String(format2: fullUs)) resumed_us=\(String(format2: resUs)) (secureConnectionEnd - secureConnectionStart, means)"
    )
}
print(
    "RESULT requests=\(totals.requests) errors=\(totals.errors) seconds=\(String(format2: elapsed)) rps=\(String(format2: Double(totals.requests) / elapsed)) cpu_user=\(String(format2: user)) cpu_sys=\(String(format2: sys)) maxrss_kb=\(usage.ru_maxrss)\(options.url?.scheme == "https" ? " handshakes=\(totals.handshakes) resumed=\(totals.resumed)" : "")"
)
exit(totals.requests > 0 ? 0 : 1)
