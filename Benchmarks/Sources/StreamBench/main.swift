// stream-bench: one large download through the engine, with the body read either by a
// ResponseDelegate on the event loop (the delegate API: no copy, no hop) or as the async API's
// AsyncSequence (`Session.streamingResponse`: each read handed to the consuming task as the array
// the socket was read into, with back-pressure). `--api file` is the delegate API writing each
// chunk to a temporary file with write(2) on the loop: the reference for a download task's CPU per
// GB. Benchmarks/scripts/stream-compare.sh runs delegate and sequence side by side.
//
//   stream-bench --api delegate|sequence|file [-n TIMES] URL
//
// Prints one RESULT line per download and exits non-zero if a download failed or came short of
// its Content-Length:
//   RESULT api=A bytes=N seconds=S mb_per_s=R cpu_s=C peak_rss_mib=M
// MB/s is 10^6 bytes per wall second; CPU is the whole process's user+sys (getrusage) over the
// download; peak RSS is VmHWM, reset (clear_refs 5) before each download when the kernel allows.
import FoundationEssentials
import HawserCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

func usage(_ message: String) -> Never {
    let text = "stream-bench: \(message)\nusage: stream-bench --api delegate|sequence|file [-n TIMES] URL\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(
        u.ru_stime.tv_usec
    ) / 1e6
}

func peakRSSKiB() -> Int {
    guard let f = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(f) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), f) != nil {
        let s = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        if s.hasPrefix("VmHWM:") { return Int(s.dropFirst(6).filter { $0.isNumber }) ?? 0 }
    }
    return 0
}

func resetPeakRSS() {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return }
    _ = write(fd, "5", 1)
    close(fd)
}

/// The delegate API: counts body bytes on the loop, signals the end.
final class CountingDelegate: ResponseDelegate, @unchecked Sendable {
    private var bytes = 0
    private var expected: Int?
    private let done: @Sendable (Result<(Int, Int?), HawserError>) -> Void
    init(done: @escaping @Sendable (Result<(Int, Int?), HawserError>) -> Void) { self.done = done }
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) { self.expected = head.headers.contentLength }
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) { self.bytes += bytes.count }
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.done(result.map { _ in (self.bytes, self.expected) })
    }
}

/// The delegate API writing the body to a file on the loop (write(2) per chunk).
final class FileDelegate: ResponseDelegate, @unchecked Sendable {
    private var bytes = 0
    private var expected: Int?
    private let fd: Int32
    private let done: @Sendable (Result<(Int, Int?), HawserError>) -> Void
    init(fd: Int32, done: @escaping @Sendable (Result<(Int, Int?), HawserError>) -> Void) {
        self.fd = fd
        self.done = done
    }
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) { self.expected = head.headers.contentLength }
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        var off = 0
        while off < bytes.count {
            let n = write(self.fd, bytes.baseAddress! + off, bytes.count - off)
            if n <= 0 { break }
            off += n
        }
        self.bytes += bytes.count
    }
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.done(result.map { _ in (self.bytes, self.expected) })
    }
}

func viaFile(_ session: Session, _ request: HTTPClientRequest) async throws -> (Int, Int?) {
    let path = "/tmp/stream-bench-\(getpid()).tmp"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { usage("cannot create \(path)") }
    defer {
        close(fd)
        unlink(path)
    }
    return try await withCheckedThrowingContinuation { (c: CheckedContinuation<(Int, Int?), any Error>) in
        session.execute(request, delegate: FileDelegate(fd: fd) { c.resume(with: $0) })
    }
}

func viaDelegate(_ session: Session, _ request: HTTPClientRequest) async throws -> (Int, Int?) {
    try await withCheckedThrowingContinuation { (c: CheckedContinuation<(Int, Int?), any Error>) in
        session.execute(request, delegate: CountingDelegate { c.resume(with: $0) })
    }
}

func viaSequence(_ session: Session, _ request: HTTPClientRequest) async throws -> (Int, Int?) {
    let response = try await session.streamingResponse(for: request)
    var bytes = 0
    for try await chunk in response.body { bytes += chunk.count }
    return (bytes, response.headers.contentLength)
}

@main
struct StreamBench {
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        var api = ""
        var times = 1
        var urlString = ""
        var args = CommandLine.arguments.dropFirst()[...]
        while let a = args.popFirst() {
            switch a {
            case "--api": api = args.popFirst() ?? ""
            case "-n": times = Int(args.popFirst() ?? "") ?? 0
            default:
                if a.hasPrefix("-") { usage("unknown option '\(a)'") }
                urlString = a
            }
        }
        guard api == "delegate" || api == "sequence" || api == "file" else {
            usage("--api takes delegate, sequence or file")
        }
        guard times > 0, let url = URL(string: urlString) else { usage("need -n > 0 and a URL") }
        let session = Session()
        let request = HTTPClientRequest(url: url)
        var failed = false
        for _ in 0..<times {
            resetPeakRSS()
            let cpu0 = cpuSeconds()
            let t0 = now()
            do {
                let (bytes, expected) =
                    switch api {
                    case "delegate": try await viaDelegate(session, request)
                    case "file": try await viaFile(session, request)
                    default: try await viaSequence(session, request)
                    }
                let seconds = Double(now() - t0) / 1e9
                let cpu = cpuSeconds() - cpu0
                if let expected, expected != bytes { failed = true }
                let mbps = Double(bytes) / seconds / 1e6
                print(
                    "RESULT api=\(api) bytes=\(bytes) seconds=\(Self.fixed(seconds, 3)) mb_per_s=\(Self.fixed(mbps, 1)) cpu_s=\(Self.fixed(cpu, 3)) peak_rss_mib=\(Self.fixed(Double(peakRSSKiB()) / 1024, 1))"
                )
            } catch {
                print("stream-bench: \(error)")
                failed = true
            }
        }
        session.shutdown()
        exit(failed ? 1 : 0)
    }

    static func fixed(_ v: Double, _ digits: Int) -> String {
        var m = 1.0
        for _ in 0..<digits { m *= 10 }
        let scaled = (v * m).rounded()
        let whole = Int(scaled / m)
        var frac = String(Int(scaled.truncatingRemainder(dividingBy: m)))
        while frac.count < digits { frac = "0" + frac }
        return "\(whole).\(frac)"
    }
}
