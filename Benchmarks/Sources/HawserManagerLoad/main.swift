import Hawser
import HawserCore
import Synchronization

// hawser-manager-load: load through the AFNetworking layer — `HTTPSessionManager.get` (async)
// with the JSON or the HTTP response serializer — to set against hawser-load's raw engine and
// --session modes.
//
//   hawser-manager-load [-c CONCURRENCY] [-d SECONDS | -n REQUESTS] [--executor global|loop|installed]
//                       [--serializer json|http | --download] [--cacert FILE] URL
//
// -c 1 is sequential; -c 64 runs 64 requests at a time over up to 64 keep-alive connections
// (maximumConnectionsPerHost = CONCURRENCY). Each request goes through the whole manager path:
// URL resolution and the request serializer, the task and its TaskDelegate, the engine, and the
// response serializer in the awaiting task. A response the serializer refuses counts as an error.
//
// --serializer json (the default) is AFNetworking's default JSONResponseSerializer (point it at
// nginx.sh's /json); http is HTTPResponseSerializer, validation only (any path, e.g. /hello).
// --download runs `SessionManager.download(for:to:)` instead (a download task: the body goes to
// a temporary file as it arrives, then is moved to a destination in the temporary directory,
// removed after each request); point it at a large static file. The RESULT line then also has
// `bytes` and `mb_per_s` (MB = 10^6 bytes) and `cpu_s_per_gb`.
// --cacert FILE trusts only the PEM certificates in FILE (a SecurityPolicy without pinning whose
// anchors are those), for https URLs against Benchmarks/scripts/nginx.sh's TLS port.
//
// --executor loop runs the calling tasks on the manager's event loop
// (`withTaskExecutorPreference`-style, through `addTask(executorPreference:)`): the engine and
// the awaiting task then share one thread, with no hand-off per request. This is Hawser's
// counterpart of AsyncHTTPClient's best configuration (futures on its event loops).
// --executor installed makes the shared EventLoopGroup the process's global executor
// (`EventLoopGroup.shared.installAsGlobalExecutor()`, before any task) and puts the manager on
// one of its loops: the calling tasks are plain tasks with a plain `await`, as an application
// that installs the executor writes them.
//
// The last line has hawser-load's RESULT keys plus `cpu_s` (user + system from getrusage),
// `req_per_cpu_s` and `vmhwm_kb` (peak RSS from /proc/self/status):
//   RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K cpu_s=C req_per_cpu_s=Q vmhwm_kb=H
//
// Like an application that uses `Hawser` alone, it imports FoundationEssentials, not Foundation,
// so its peak RSS is what such an application pays.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

struct Options {
    var concurrency = 1
    var seconds: Double? = nil
    var requests: Int? = nil
    var url: String?
    var onLoop = false
    var installed = false
    var json = true
    var download = false
    var caCert: String?
}

func usage(_ message: String) -> Never {
    let text =
        "hawser-manager-load: \(message)\nusage: hawser-manager-load [-c N] [-d SECONDS | -n REQUESTS] [--executor global|loop|installed] [--serializer json|http | --download] [--cacert FILE] URL\n"
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
        case "-c", "--concurrency", "--connections": o.concurrency = Int(value(a)) ?? 0
        case "-d", "--duration":
            var v = value(a)
            if v.hasSuffix("s") { v.removeLast() }
            o.seconds = Double(v)
        case "-n", "--requests": o.requests = Int(value(a))
        case "--executor":
            switch value(a) {
            case "loop": o.onLoop = true
            case "global": o.onLoop = false
            case "installed": o.installed = true
            default: usage("--executor takes loop, global or installed")
            }
        case "--serializer":
            switch value(a) {
            case "json": o.json = true
            case "http": o.json = false
            default: usage("--serializer takes json or http")
            }
        case "--download": o.download = true
        case "--cacert": o.caCert = value(a)
        default:
            if a.hasPrefix("-") { usage("unknown option '\(a)'") }
            o.url = a
        }
    }
    guard let url = o.url, URL(string: url)?.scheme != nil else { usage("no URL") }
    guard o.concurrency > 0 else { usage("-c must be positive") }
    if o.seconds == nil && o.requests == nil { o.seconds = 10 }
    return o
}

/// Hands out at most `n` requests across the workers.
final class Budget: Sendable {
    private let left: Mutex<Int>
    init(_ n: Int) { self.left = Mutex(n) }
    func take() -> Bool {
        self.left.withLock { left in
            guard left > 0 else { return false }
            left -= 1
            return true
        }
    }
}

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func vmHWMKiB() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in s.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// `v` with two decimals (`%.2f`).
func f2(_ v: Double) -> String {
    guard v.isFinite else { return "\(v)" }
    let hundredths = Int64((abs(v) * 100).rounded())
    let frac = hundredths % 100
    return (v < 0 && hundredths != 0 ? "-" : "") + "\(hundredths / 100)." + (frac < 10 ? "0" : "") + "\(frac)"
}

signal(SIGPIPE, SIG_IGN)
let o = parseOptions()
if o.installed {
    do { try EventLoopGroup.shared.installAsGlobalExecutor() } catch { usage("\(error)") }
}
var configuration = SessionConfiguration()
configuration.maximumConnectionsPerHost = o.concurrency
configuration.httpCookieStorage = nil
let loop = o.installed ? EventLoopGroup.shared.next() : try! EventLoop(name: "hawser-manager-load")
let manager = HTTPSessionManager(configuration: configuration, eventLoop: loop)
manager.responseSerializer = o.json ? JSONResponseSerializer() as any ResponseSerialization : HTTPResponseSerializer()
if let path = o.caCert {
    do {
        var policy = SecurityPolicy.default
        policy.anchors = .custom(try Certificate.load(contentsOf: path))
        try manager.setSecurityPolicy(policy)
    } catch {
        usage("cannot use --cacert \(path): \(error)")
    }
}
let url = o.url!

let executorLabel =
    o.installed
    ? "event loops installed as the global executor" : o.onLoop ? "tasks on the manager's loop" : "global executor"
print("Running \(o.seconds.map { "\(f2($0))s" } ?? "\(o.requests!)-request") test @ \(url)")
print(
    o.download
        ? "  SessionManager.download(for:to:), concurrency \(o.concurrency), keep-alive, \(executorLabel)"
        : "  HTTPSessionManager.get + \(o.json ? "JSONResponseSerializer" : "HTTPResponseSerializer"), concurrency \(o.concurrency), keep-alive, \(executorLabel)"
)
/// Body bytes of the finished downloads (--download).
let downloaded = Atomic<Int>(0)
let deadline = o.seconds.map { now() + UInt64($0 * 1e9) } ?? UInt64.max
let budget = Budget(o.requests ?? Int.max)
let start = now()
let (requests, errors, firstError) = await withTaskGroup(of: (Int, Int, String?).self) { group in
    for _ in 0..<o.concurrency {
        group.addTask(executorPreference: o.onLoop ? loop : nil) {
            var ok = 0
            var failed = 0
            var first: String? = nil
            while now() < deadline && budget.take() {
                do {
                    if o.download {
                        let target = FileManager.default.temporaryDirectory
                            .appendingPathComponent("hawser-manager-load-\(UUID().uuidString)")
                        let (file, _) = try await manager.download(
                            for: HTTPClientRequest(url: URL(string: url)!),
                            to: { _, _ in target }
                        )
                        var st = stat()
                        if stat(file.path, &st) == 0 { downloaded.add(Int(st.st_size), ordering: .relaxed) }
                        try? FileManager.default.removeItem(at: file)
                    } else {
                        _ = try await manager.get(url)
                    }
                    ok += 1
                } catch {
                    failed += 1
                    if first == nil { first = "\(error)" }
                }
            }
            return (ok, failed, first)
        }
    }
    var all = (0, 0, nil as String?)
    for await r in group {
        all.0 += r.0
        all.1 += r.1
        all.2 = all.2 ?? r.2
    }
    return all
}
let elapsed = Double(now() - start) / 1e9
manager.invalidateSessionCancelingTasks(true, resetSession: false)

var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
let sys = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
let cpu = user + sys
let hwm = vmHWMKiB()
print(
    "  \(requests) requests in \(f2(elapsed))s, \(f2(cpu)) CPU s (\(f2(user)) user, \(f2(sys)) sys), peak RSS \(hwm / 1024) MiB"
)
if errors > 0 { print("  Non-2xx, serializer or socket errors: \(errors) (first: \(firstError ?? "?"))") }
let bytes = downloaded.load(ordering: .relaxed)
var downloadKeys = ""
if o.download {
    let mbps = Double(bytes) / 1e6 / elapsed
    let perGB = bytes > 0 ? cpu / (Double(bytes) / 1e9) : 0
    print("  \(bytes) bytes downloaded: \(f2(mbps)) MB/s, \(f2(perGB)) CPU s per GB")
    downloadKeys = " bytes=\(bytes) mb_per_s=\(f2(mbps)) cpu_s_per_gb=\(f2(perGB))"
}
print("Requests/sec: \(f2(Double(requests) / elapsed))")
print("Requests/CPU-s: \(f2(cpu > 0 ? Double(requests) / cpu : 0))")
print(
    "RESULT requests=\(requests) errors=\(errors) seconds=\(f2(elapsed)) rps=\(f2(Double(requests) / elapsed)) cpu_user=\(f2(user)) cpu_sys=\(f2(sys)) maxrss_kb=\(usage.ru_maxrss) cpu_s=\(f2(cpu)) req_per_cpu_s=\(f2(cpu > 0 ? Double(requests) / cpu : 0)) vmhwm_kb=\(hwm)\(downloadKeys)"
)
exit(requests > 0 ? 0 : 1)
