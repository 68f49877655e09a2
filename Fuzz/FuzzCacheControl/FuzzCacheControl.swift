// FuzzCacheControl: libFuzzer target for Cache-Control and HTTP-date parsing and the cache's
// freshness arithmetic on arbitrary header sets. Built with -DFUZZING (see Fuzz/run.sh);
// without it, a replay `main` runs the same checks on the files named on the command line.
//
// Input: line 1 is a Cache-Control value; later lines are `name: value` response fields
// (a line starting with `>` is a request field instead). A hash of the input picks the
// status and the request, response and current times, including extreme ones.
// Invariants: nothing traps; delta-seconds stay within 0...2^31; ages and lifetimes are
// finite and non-negative; a parsed date formats and parses back to itself; the cache
// stays within its memory bound whatever it is asked to store.

import FuzzSupport
import HawserCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

private let cache = HTTPCache(memoryCapacity: 64 * 1024)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheControl(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let seed = fnv1a(bytes)
    let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map {
        String(decoding: $0, as: UTF8.self)
    }

    let cc = CacheControl(parsing: lines.first ?? "")
    for name in ["max-age", "s-maxage", "min-fresh", "max-stale", "stale-if-error", "stale-while-revalidate"] {
        if let v = cc.deltaSeconds(name) { precondition(v >= 0 && v <= CacheControl.maximumDeltaSeconds) }
    }
    if let v = cc.maxStale { precondition(v >= 0 && v <= CacheControl.maximumDeltaSeconds) }
    _ = (cc.noCacheFieldNames, cc.noStore, cc.isPrivate, cc.isPublic, cc.mustRevalidate, cc.description)

    var response: [(name: String, value: String)] = [(name: "Cache-Control", value: lines.first ?? "")]
    var request: [(name: String, value: String)] = []
    for line in lines.dropFirst() {
        let isRequest = line.hasPrefix(">")
        let text = isRequest ? String(line.dropFirst()) : line
        guard let colon = text.firstIndex(of: ":") else { continue }
        let field = (
            name: String(text[..<colon]), value: String(text[text.index(after: colon)...]).trimmingCharacters()
        )
        if isRequest { request.append(field) } else { response.append(field) }
        if let date = HTTPDate.parse(field.value) {
            precondition(HTTPDate.parse(HTTPDate.format(date)) == date, "date round trip: \(field.value)")
        }
    }

    let times: [Double] = [0, 1_700_000_000, -1e300, 1e300, .nan, .infinity, 253_402_300_799, -62_135_596_800]
    func time(_ shift: UInt64) -> Date {
        let base = times[Int((seed >> shift) & 7)]
        return Date(timeIntervalSince1970: base.isFinite ? base + Double((seed >> (shift + 3)) & 0xFFFF) : base)
    }
    let statuses = [200, 203, 204, 206, 301, 302, 304, 404, 500, 599, 100, 999]
    let status = statuses[Int((seed >> 40) % UInt64(statuses.count))]
    let head = HTTPResponseHead(status: status, headers: HTTPHeaders(response))
    let freshness = ResponseFreshness(
        headers: head.headers,
        status: status,
        requestTime: time(0),
        responseTime: time(8),
        now: time(16)
    )
    for v in [freshness.lifetime, freshness.correctedInitialAge, freshness.currentAge] {
        precondition(v.isFinite && v >= 0, "freshness \(freshness)")
    }

    let url = URL(string: "http://example.org/\(seed % 64)")!
    let clientRequest = HTTPClientRequest(url: url, headers: HTTPHeaders(request))
    cache.store(head, body: Array(bytes.prefix(2048)), for: clientRequest, requestTime: time(0), responseTime: time(8))
    switch cache.lookup(clientRequest, now: time(16)) {
    case .fresh(let r), .stale(let r, _): precondition(r.head.headers.values(for: "Age").count == 1)
    case .miss: break
    }
    _ = cache.updateAfterNotModified(
        HTTPResponseHead(status: 304, headers: HTTPHeaders(response)),
        for: clientRequest,
        requestTime: time(0),
        responseTime: time(16)
    )
    var unsafe = clientRequest
    unsafe.method = .post
    cache.invalidate(after: unsafe, response: head)
    precondition(cache.currentMemoryUsage <= 64 * 1024)
    return 0
}

extension String {
    fileprivate func trimmingCharacters() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzCacheControl) }
}
#endif
