// psl-bench: the cost of one public-suffix lookup, HawserCore's compiled-in list against
// libpsl (what curl uses), in one process, interleaved.
//
//   psl-bench [ROUNDS] [ITERATIONS]      time both; ROUNDS [21], ITERATIONS [20000] passes over the names
//   psl-bench --check FILE|-             compare both on every name of FILE (one a line)
//
// Timing: every round times ITERATIONS passes over the same 24 names (registrable domains and
// suffixes of every rule kind, as a Set-Cookie Domain names them) with
// PublicSuffixes.isPublicSuffix and with libpsl's psl_is_public_suffix on the list loaded by
// psl_latest(NULL) (the newest of libpsl's built-in list and the distribution's DAFSA, as curl
// loads it), the order alternating between rounds. Times are the thread's CPU time. Prints the
// median ns per lookup of each and the median of the per-round ratios. libpsl is opened with
// dlopen (libpsl.so.5, Debian's libpsl5), so this builds without it; without it only Hawser is
// timed. Both must agree on every name, or nothing is timed.
//
// --check: for each name, Hawser's publicSuffix(of:) against psl_unregistrable_domain and
// isPublicSuffix against psl_is_public_suffix; prints the names where they differ and a count.
// Names for it: scripts/gen-public-suffixes.py --names (every rule, both IDN spellings, and
// names one and two labels under each).
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// `x` with `digits` decimals, right-aligned to `width`.
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

/// libpsl through dlopen: the four functions used, and the list it loaded.
struct LibPSL {
    typealias Latest = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    typealias IsPublicSuffix = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> CInt
    typealias Unregistrable = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> UnsafePointer<CChar>?
    typealias Version = @convention(c) () -> UnsafePointer<CChar>?
    let ctx: OpaquePointer
    let cIsPublicSuffix: IsPublicSuffix
    let cUnregistrable: Unregistrable
    let version: String

    init?() {
        guard let h = dlopen("libpsl.so.5", RTLD_NOW),
            let latest = dlsym(h, "psl_latest"), let isPS = dlsym(h, "psl_is_public_suffix"),
            let unreg = dlsym(h, "psl_unregistrable_domain"), let ver = dlsym(h, "psl_get_version"),
            let ctx = unsafeBitCast(latest, to: Latest.self)(nil)
        else { return nil }
        self.ctx = ctx
        self.cIsPublicSuffix = unsafeBitCast(isPS, to: IsPublicSuffix.self)
        self.cUnregistrable = unsafeBitCast(unreg, to: Unregistrable.self)
        self.version = unsafeBitCast(ver, to: Version.self)().map { String(cString: $0) } ?? "?"
    }

    func isPublicSuffix(_ name: [CChar]) -> Bool {
        name.withUnsafeBufferPointer { self.cIsPublicSuffix(self.ctx, $0.baseAddress) != 0 }
    }

    func publicSuffix(_ name: [CChar]) -> String? {
        name.withUnsafeBufferPointer { self.cUnregistrable(self.ctx, $0.baseAddress).map { String(cString: $0) } }
    }
}

let names = [
    "example.com", "www.example.com", "shop.example.co.uk", "co.uk", "news.example.co.uk", "a.nom.es", "nom.es",
    "alice.github.io", "github.io", "foo.ck", "www.ck", "x.kawasaki.jp", "city.kawasaki.jp", "static.example.com.au",
    "example.de", "api.service.example.org", "ec2-1-2-3-4.us-west-1.compute.amazonaws.com", "bucket.s3.amazonaws.com",
    "example.zzzunlisted", "localhost", "xn--85x722f.xn--55qx5d.cn", "食狮.公司.cn", "www.example.xn--p1ai",
    "mail.example.ac.jp",
]

func check(_ path: String, _ psl: LibPSL) -> Int32 {
    let text: String
    if path == "-" {
        var all: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(0, &buf, buf.count)
            if n <= 0 { break }
            all += buf[0..<n]
        }
        text = String(decoding: all, as: UTF8.self)
    } else {
        guard let f = fopen(path, "r") else {
            print("psl-bench: cannot open \(path)")
            return 2
        }
        var all: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            all += buf[0..<n]
        }
        fclose(f)
        text = String(decoding: all, as: UTF8.self)
    }
    var count = 0
    var differ = 0
    for line in text.split(separator: "\n") where !line.isEmpty {
        let name = String(line)
        let c = Array(name.utf8CString)
        count += 1
        let ours = (PublicSuffixes.publicSuffix(of: name), PublicSuffixes.isPublicSuffix(name))
        let theirs = (psl.publicSuffix(c), psl.isPublicSuffix(c))
        if ours.0 != theirs.0 || ours.1 != theirs.1 {
            differ += 1
            print("differ\t\(name)\thawser \(ours.0 ?? "nil") \(ours.1)\tlibpsl \(theirs.0 ?? "nil") \(theirs.1)")
        }
    }
    print("RESULT \(count) names, \(differ) differ (libpsl \(psl.version))")
    return differ == 0 ? 0 : 1
}

let args = CommandLine.arguments
let psl = LibPSL()
if args.count > 2 && args[1] == "--check" {
    guard let psl else {
        print("psl-bench: libpsl.so.5 not found")
        exit(2)
    }
    exit(check(args[2], psl))
}
let rounds = args.count > 1 ? Int(args[1]) ?? 21 : 21
let iterations = args.count > 2 ? Int(args[2]) ?? 20_000 : 20_000
let cNames = names.map { Array($0.utf8CString) }

// Same answers from both (and a warm-up).
let suffixes = names.filter { PublicSuffixes.isPublicSuffix($0) }.count
for (n, c) in zip(names, cNames) {
    let ours = PublicSuffixes.isPublicSuffix(n)
    if let psl, psl.isPublicSuffix(c) != ours {
        print("psl-bench: Hawser and libpsl disagree on \(n): \(ours) vs \(!ours)")
        exit(1)
    }
}
print(
    "\(names.count) names (\(suffixes) public suffixes), \(rounds) rounds of \(iterations) passes; libpsl: \(psl.map { "\($0.version), psl_latest(NULL)" } ?? "not found")"
)

func timeHawser() -> Double {
    var hits = 0
    let t0 = nowNanos()
    for _ in 0..<iterations {
        for n in names where PublicSuffixes.isPublicSuffix(n) { hits += 1 }
    }
    let dt = nowNanos() - t0
    precondition(hits == suffixes * iterations)
    return Double(dt) / Double(iterations * names.count)
}

func timeLibPSL(_ psl: LibPSL) -> Double {
    var hits = 0
    let t0 = nowNanos()
    for _ in 0..<iterations {
        for c in cNames {
            c.withUnsafeBufferPointer { if psl.cIsPublicSuffix(psl.ctx, $0.baseAddress) != 0 { hits += 1 } }
        }
    }
    let dt = nowNanos() - t0
    precondition(hits == suffixes * iterations)
    return Double(dt) / Double(iterations * names.count)
}

var hawserNs: [Double] = []
var pslNs: [Double] = []
var ratios: [Double] = []
for round in 0..<rounds {
    if let psl {
        var h = 0.0
        var p = 0.0
        if round % 2 == 0 {
            h = timeHawser()
            p = timeLibPSL(psl)
        } else {
            p = timeLibPSL(psl)
            h = timeHawser()
        }
        hawserNs.append(h)
        pslNs.append(p)
        ratios.append(p / h)
    } else {
        hawserNs.append(timeHawser())
    }
}
print(
    "Hawser PublicSuffixes.isPublicSuffix \(fmt(median(hawserNs), 1, width: 7)) ns/lookup (median; min \(fmt(hawserNs.min()!, 1)), max \(fmt(hawserNs.max()!, 1)))"
)
if !pslNs.isEmpty {
    print(
        "libpsl psl_is_public_suffix         \(fmt(median(pslNs), 1, width: 7)) ns/lookup (median; min \(fmt(pslNs.min()!, 1)), max \(fmt(pslNs.max()!, 1)))"
    )
    print("RESULT ratio libpsl/Hawser = \(fmt(median(ratios), 2)) (median of per-round ratios; above 1: Hawser faster)")
}
