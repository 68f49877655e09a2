// decode-bench: ContentDecoder against zlib's own inflate loop, on the same gzip body.
//
//   decode-bench [N] [PIECE]
//
// Generates a deterministic ~1 MiB JSON-like body, gzips it (level 6), then runs N rounds;
// each round decodes the body once with ContentDecoder (a new decoder, as for each response)
// and once with a bare zlib loop (one z_stream reused with inflateReset, the same 32 KiB
// output buffer size), the order alternating between rounds. The input is handed over in
// PIECE-byte pieces (default 65536, a typical read size) to both. Times are the thread's
// CPU time. Prints the median MB/s of each, and the median of the per-round ratios.
import CHawser
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// This thread's CPU time: on the shared, loaded VM, wall-clock time mostly measures the
/// other tenants (time slices lost to them), CPU time measures the decoding.
func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// ~1 MiB of JSON records with repeated keys and varied values, like an API response.
func makeBody(bytes target: Int) -> [UInt8] {
    let names = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    let tags = ["swift", "linux", "http", "zlib", "epoll", "tls", "json", "cookie"]
    var x: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt64 {
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        return x
    }
    var s = "[\n"
    var id = 0
    while s.utf8.count < target {
        let n = names[Int(next() % 10)]
        let t1 = tags[Int(next() % 8)]
        let t2 = tags[Int(next() % 8)]
        s +=
            #"  {"id": \#(id), "user": "\#(n)\#(next() % 1000)", "email": "\#(n)@example.com", "score": \#(next() % 100_000), "#
        s +=
            #""active": \#(next() & 1 == 0), "tags": ["\#(t1)", "\#(t2)"], "balance": \#(next() % 1_000_000).\#(next() % 100), "#
        s += #""token": "\#(String(next(), radix: 36))"},"# + "\n"
        id += 1
    }
    s += "  {}\n]\n"
    return Array(s.utf8)
}

func gzip(_ input: [UInt8]) -> [UInt8] {
    var s = z_stream()
    precondition(CHawser_deflateInit2(&s, 6, 15 + 16) == Z_OK)
    defer { deflateEnd(&s) }
    var out = [UInt8](repeating: 0, count: Int(deflateBound(&s, uLong(input.count))) + 64)
    var inp = input
    let n = inp.withUnsafeMutableBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            s.next_in = i.baseAddress
            s.avail_in = uInt(i.count)
            s.next_out = o.baseAddress
            s.avail_out = uInt(o.count)
            precondition(deflate(&s, Z_FINISH) == Z_STREAM_END)
            return o.count - Int(s.avail_out)
        }
    }
    return Array(out[0..<n])
}

/// The baseline: zlib's inflate in a tight loop, one reused stream, 32 KiB output buffer.
final class ZlibLoop {
    var stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    let out = UnsafeMutablePointer<Bytef>.allocate(capacity: 32 * 1024)

    init() {
        self.stream.initialize(to: z_stream())
        precondition(CHawser_inflateInit2(self.stream, 15 + 16) == Z_OK)
    }

    /// Decoded byte count and a checksum-lite (sum of the last byte of each chunk).
    func run(_ input: UnsafeRawBufferPointer, piece: Int) -> (Int, UInt64) {
        precondition(inflateReset(self.stream) == Z_OK)
        var total = 0
        var check: UInt64 = 0
        var offset = 0
        while offset < input.count {
            let n = min(piece, input.count - offset)
            self.stream.pointee.next_in = UnsafeMutablePointer(
                mutating: (input.baseAddress! + offset).assumingMemoryBound(to: Bytef.self)
            )
            self.stream.pointee.avail_in = uInt(n)
            offset += n
            repeat {
                self.stream.pointee.next_out = self.out
                self.stream.pointee.avail_out = 32 * 1024
                let rc = inflate(self.stream, Z_NO_FLUSH)
                precondition(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR)
                let produced = 32 * 1024 - Int(self.stream.pointee.avail_out)
                total += produced
                if produced > 0 { check &+= UInt64(self.out[produced - 1]) }
                if rc == Z_STREAM_END { break }
            } while self.stream.pointee.avail_out == 0 || self.stream.pointee.avail_in > 0
        }
        return (total, check)
    }
}

func hawser(_ input: UnsafeRawBufferPointer, piece: Int) -> (Int, UInt64) {
    var total = 0
    var check: UInt64 = 0
    do {
        var decoder = try ContentDecoder(contentEncoding: "gzip")
        var offset = 0
        while offset < input.count {
            let n = min(piece, input.count - offset)
            try decoder.decode(UnsafeRawBufferPointer(rebasing: input[offset..<(offset + n)])) { chunk in
                total += chunk.count
                check &+= UInt64(chunk[chunk.count - 1])
            }
            offset += n
        }
        try decoder.finish()
    } catch {
        fatalError("ContentDecoder failed: \(error)")
    }
    return (total, check)
}

/// `x` with `digits` decimals (no Foundation here), right-aligned to `width`.
func fmt(_ x: Double, _ digits: Int, width: Int = 0) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let n = Int((x * scale).rounded())
    var s = String(n / Int(scale))
    if digits > 0 {
        let frac = String(abs(n) % Int(scale))
        s += "." + String(repeating: "0", count: digits - frac.count) + frac
    }
    return String(repeating: " ", count: max(0, width - s.count)) + s
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

let args = CommandLine.arguments
let rounds = args.count > 1 ? Int(args[1]) ?? 30 : 30
let piece = args.count > 2 ? Int(args[2]) ?? 65536 : 65536
let body = makeBody(bytes: 1 << 20)
let encoded = gzip(body)
let loop = ZlibLoop()
print(
    "body \(body.count) bytes, gzip \(encoded.count) bytes (ratio \(fmt(Double(body.count) / Double(encoded.count), 2))), \(rounds) rounds, \(piece)-byte pieces"
)

encoded.withUnsafeBytes { raw in
    // Same output from both, and a warm-up.
    let a = hawser(raw, piece: piece)
    let b = loop.run(raw, piece: piece)
    precondition(a == b && a.0 == body.count, "outputs differ: \(a) vs \(b)")
    var hawserMBs: [Double] = []
    var zlibMBs: [Double] = []
    var ratios: [Double] = []
    for round in 0..<rounds {
        var th = 0.0
        var tz = 0.0
        for step in 0..<2 {
            let t0 = nowNanos()
            if (round + step) % 2 == 0 { _ = hawser(raw, piece: piece) } else { _ = loop.run(raw, piece: piece) }
            let dt = Double(nowNanos() - t0) / 1e9
            if (round + step) % 2 == 0 { th = dt } else { tz = dt }
        }
        hawserMBs.append(Double(body.count) / th / 1e6)
        zlibMBs.append(Double(body.count) / tz / 1e6)
        ratios.append(tz / th)
    }
    let h = median(hawserMBs)
    let z = median(zlibMBs)
    print(
        "ContentDecoder  \(fmt(h, 1, width: 8)) MB/s (median; min \(fmt(hawserMBs.min()!, 1)), max \(fmt(hawserMBs.max()!, 1)))"
    )
    print(
        "zlib inflate    \(fmt(z, 1, width: 8)) MB/s (median; min \(fmt(zlibMBs.min()!, 1)), max \(fmt(zlibMBs.max()!, 1)))"
    )
    print("RESULT ratio ContentDecoder/zlib = \(fmt(median(ratios), 3)) (median of per-round ratios)")
}
