// What the peer load clients (peer-ahc, peer-urlsession) share with hawser-load: the
// flags (`-c N`, `-t N`, `-d SECONDS` or `-n REQUESTS`, URL), the clock, the request budget,
// and the `RESULT` line that Benchmarks/scripts/compare.sh parses:
//
//   RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K cpu_s=C req_per_cpu_s=Q peak_rss_mib=M
//
// (the first seven fields as hawser-load and curl-multi print them; the last three spelled out).
// CPU is user+sys of the whole process (all threads) from getrusage(RUSAGE_SELF) at the end;
// peak RSS is VmHWM from /proc/self/status (ru_maxrss if that cannot be read).
// No Foundation here: each client decides what it imports.
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public struct PeerOptions: Sendable {
    public var connections = 10
    /// Event-loop threads (peer-ahc); 0 = the default for the client (see its usage).
    public var threads = 0
    public var seconds: Double? = nil
    public var requests: Int? = nil
    /// Client-specific mode (`--api future|async` for peer-ahc).
    public var api: String? = nil
    public var url = ""

    public init() {}
}

public func peerUsage(_ tool: String, _ message: String, extra: String = "") -> Never {
    let text = "\(tool): \(message)\nusage: \(tool) [-c N] [-t N] [-d SECONDS | -n REQUESTS]\(extra) URL\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

/// Parses hawser-load's flags: `-c/--connections N`, `-t/--threads N`, `-d/--duration S[s]`,
/// `-n/--requests N`, `--api NAME`, and the URL (the last non-flag argument).  Default: 10 s.
public func parsePeerOptions(_ tool: String, extra: String = "") -> PeerOptions {
    var o = PeerOptions()
    var args = Array(CommandLine.arguments.dropFirst())[...]
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else { peerUsage(tool, "\(flag) needs a value", extra: extra) }
        return v
    }
    while let a = args.popFirst() {
        switch a {
        case "-c", "--connections": o.connections = Int(value(a)) ?? 0
        case "-t", "--threads": o.threads = Int(value(a)) ?? -1
        case "-d", "--duration":
            var v = value(a)
            if v.hasSuffix("s") { v.removeLast() }
            o.seconds = Double(v)
            if o.seconds == nil { peerUsage(tool, "bad duration", extra: extra) }
        case "-n", "--requests": o.requests = Int(value(a))
        case "--api": o.api = value(a)
        case "-h", "--help": peerUsage(tool, "load client", extra: extra)
        default:
            if a.hasPrefix("-") { peerUsage(tool, "unknown option '\(a)'", extra: extra) }
            o.url = a
        }
    }
    guard !o.url.isEmpty else { peerUsage(tool, "no URL", extra: extra) }
    guard o.connections > 0, o.threads >= 0 else {
        peerUsage(tool, "-c must be positive, -t not negative", extra: extra)
    }
    if o.seconds == nil && o.requests == nil { o.seconds = 10 }
    return o
}

/// Monotonic nanoseconds.
public func peerNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// When to stop issuing requests: a deadline (`-d`) and/or a request budget (`-n`), shared by
/// all workers.  `next()` is called before each request; false = this worker is done.
public final class PeerBudget: Sendable {
    private let left: Atomic<Int>
    public let deadline: UInt64
    public init(_ o: PeerOptions, start: UInt64) {
        self.left = Atomic(o.requests ?? Int.max)
        self.deadline = o.seconds.map { start + UInt64($0 * 1e9) } ?? UInt64.max
    }
    public func next() -> Bool {
        if self.deadline != UInt64.max && peerNow() >= self.deadline { return false }
        return self.left.subtract(1, ordering: .relaxed).newValue >= 0
    }
}

/// Per-run counters, shared by the workers (a few atomic adds per request).
public final class PeerCounters: Sendable {
    public let requests = Atomic<Int>(0)
    public let errors = Atomic<Int>(0)
    public let bytes = Atomic<Int>(0)
    public init() {}
    public func ok(bytes n: Int) {
        self.requests.add(1, ordering: .relaxed)
        self.bytes.add(n, ordering: .relaxed)
    }
    public func error() { self.errors.add(1, ordering: .relaxed) }
}

/// Blocks a thread until signalled (pthread; no Dispatch, no Foundation).
public final class PeerSemaphore: @unchecked Sendable {
    private var m = pthread_mutex_t()
    private var c = pthread_cond_t()
    private var count = 0
    public init() {
        pthread_mutex_init(&m, nil)
        pthread_cond_init(&c, nil)
    }
    public func signal() {
        pthread_mutex_lock(&m)
        count += 1
        pthread_cond_signal(&c)
        pthread_mutex_unlock(&m)
    }
    public func wait() {
        pthread_mutex_lock(&m)
        while count == 0 { pthread_cond_wait(&c, &m) }
        count -= 1
        pthread_mutex_unlock(&m)
    }
}

/// VmHWM (peak resident set size) in KiB, from /proc/self/status; ru_maxrss if unreadable.
public func peakRSSKiB() -> Int {
    if let f = fopen("/proc/self/status", "r") {
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), f) != nil {
            let s = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if s.hasPrefix("VmHWM:") {
                let digits = s.dropFirst(6).filter { $0.isNumber }
                if let v = Int(digits) { return v }
            }
        }
    }
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return u.ru_maxrss
}

public func fixed(_ v: Double, _ digits: Int = 2) -> String {
    var m = 1.0
    for _ in 0..<digits { m *= 10 }
    let scaled = (abs(v) * m).rounded()
    let whole = Int(scaled / m)
    var frac = String(Int(scaled.truncatingRemainder(dividingBy: m)))
    while frac.count < digits { frac = "0" + frac }
    return (v < 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + frac : "")
}

/// Prints a short wrk-like summary and the `RESULT` line; returns the exit status
/// (0 when at least one request succeeded).
public func peerReport(_ c: PeerCounters, elapsedNanos: UInt64) -> Int32 {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    let user = Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6
    let sys = Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
    let cpu = user + sys
    let seconds = Double(elapsedNanos) / 1e9
    let n = c.requests.load(ordering: .relaxed)
    let e = c.errors.load(ordering: .relaxed)
    let b = c.bytes.load(ordering: .relaxed)
    let rss = peakRSSKiB()
    let rps = seconds > 0 ? Double(n) / seconds : 0
    let rpc = cpu > 0 ? Double(n) / cpu : 0
    print("  \(n) requests in \(fixed(seconds))s, \(b) body bytes read")
    if e > 0 { print("  Non-2xx or socket errors: \(e)") }
    print("Requests/sec: \(fixed(rps))")
    print(
        "CPU: \(fixed(cpu, 3))s (user \(fixed(user, 3)) sys \(fixed(sys, 3))), \(fixed(rpc, 0)) req/cpu-s, peak RSS \(fixed(Double(rss) / 1024, 1)) MiB"
    )
    print(
        "RESULT requests=\(n) errors=\(e) seconds=\(fixed(seconds, 3)) rps=\(fixed(rps, 1)) cpu_user=\(fixed(user, 3)) cpu_sys=\(fixed(sys, 3)) maxrss_kb=\(rss) cpu_s=\(fixed(cpu, 3)) req_per_cpu_s=\(fixed(rpc, 0)) peak_rss_mib=\(fixed(Double(rss) / 1024, 1))"
    )
    return n > 0 ? 0 : 1
}

/// Lets many file descriptors be open (-c 10000 style runs) and ignores SIGPIPE.
public func peerProcessSetup() {
    var r = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
    r.rlim_cur = r.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r)
    signal(SIGPIPE, SIG_IGN)
}

/// Online CPUs.
public func peerCoreCount() -> Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

/// Counts the workers down; `arrive()` is true for the last one.
public final class PeerCountdown: Sendable {
    private let left: Atomic<Int>
    public init(_ n: Int) { self.left = Atomic(n) }
    public func arrive() -> Bool { self.left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
