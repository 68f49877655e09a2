// parser-bench FILE|R1|R2|R3 N
//
// Parses one HTTP/1.1 response N times with HawserHTTP1's HTTP1ResponseParser (one
// parser reused across messages, as on a keep-alive connection) and prints
// ns/message.  FILE is a raw response on disk; R1/R2/R3 (when no such file exists)
// are the embedded copies.  N=0 only loads the message and exits: use it as the
// baseline for callgrind, then (Ir(N) - Ir(0)) / N is instructions per message.
// Build in release: swift build -c release --package-path Benchmarks --product parser-bench
import BenchSupport
import HawserHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func fail(_ message: String) -> Never {
    let text = "parser-bench: \(message)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(2)
}

func load(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, f) }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
    }
    return bytes
}

func nowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

let args = CommandLine.arguments
guard args.count == 3, let n = Int(args[2]), n >= 0 else {
    fail("usage: parser-bench FILE|R1|R2|R3 N")
}
let name = args[1]
let bytes: [UInt8]
if let fromDisk = load(name) {
    bytes = fromDisk
} else if let embedded = BenchMessage(rawValue: name) {
    bytes = embedded.bytes
} else {
    fail("cannot read \(name)")
}

if n == 0 {
    print("hawser \(name) bytes=\(bytes.count) n=0 (load only)")
    exit(0)
}

/// The timed loop, in its own function: N parses of `buffer` with one parser.
@inline(never)
func timedLoop(_ buffer: UnsafeRawBufferPointer, _ n: Int) -> (ns: UInt64, checksum: Int) {
    var parser = HTTP1ResponseParser()
    var checksum = 0
    let t0 = nowNs()
    for _ in 0..<n {
        do {
            checksum &+= try parseOne(buffer, &parser)
        } catch {
            fail("parse error: \(error)")
        }
    }
    return (nowNs() - t0, checksum)
}

let (elapsed, checksum) = bytes.withUnsafeBytes { timedLoop($0, n) }
let tenths = (Double(elapsed) / Double(n) * 10).rounded()
let perMessage = "\(Int(tenths) / 10).\(Int(tenths) % 10)"
print("hawser \(name) bytes=\(bytes.count) n=\(n) ns/msg=\(perMessage) checksum/msg=\(checksum / n)")
if args.count == 3, getenv("PARSER_BENCH_QUIET") == nil {
    for line in bytes.withUnsafeBytes({ describeOne($0) }) { print("  " + line) }
}
