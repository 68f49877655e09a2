// FuzzCookieHeader: libFuzzer target for the Cookie field a jar builds (built with -DFUZZING
// by Fuzz/run.sh; without it, a replay `main` runs the same check on the files named).
//
// The input drives a jar: byte 0 picks the caps (bytes and count of the Cookie field), then
// each line ('\n') is one Set-Cookie field value, its first byte picking the URL it came from
// and the rest taken as octets (not necessarily UTF-8), one second after the line before. The
// last line's first byte also picks the request URL the Cookie field is built for.
//
// Invariants (a trap is a bug):
// - the field line (`Cookie: ` + value) never passes the byte cap, nor the value the count cap;
// - no CR, LF, NUL (no control byte, no DEL) in the value;
// - the cookies in it are in RFC 6265 §5.4's order: longer paths first, then older ones;
// - they are the first of all matching cookies (those a jar with no caps sends), and the next
//   one would not have fit: what is left out is exactly the tail, and it is counted;
// - the value is the cookies' name and value octets, joined by `; `, byte for byte as stored.

import FoundationEssentials
import FuzzSupport
import HawserCore

let start = Date(timeIntervalSince1970: 1_700_000_000)
let urls = [
    "http://example.com/", "http://www.example.com/a/b", "https://api.example.com/a/", "http://a.b.example.com/x/y/z",
    "https://www.example.com/a/b/c/d", "http://127.0.0.1:8080/x/", "http://localhost/p/q", "http://example.org/",
].map { URL(string: $0)! }
let byteCaps = [CookieJar.defaultMaxCookieHeaderBytes, 9, 40, 200, 1024, 4200, 0, 8]
let countCaps = [CookieJar.defaultMaxCookiesPerRequest, 1, 2, 3, 5, 10, 50, 1000]

/// `name=value; …` of `cookies`, from their octets.
func joined(_ cookies: [Cookie]) -> [UInt8] {
    var out: [UInt8] = []
    for c in cookies {
        if !out.isEmpty { out += Array("; ".utf8) }
        out += c.nameBytes + [UInt8(ascii: "=")] + c.valueBytes
    }
    return out
}

func check(_ bytes: [UInt8]) {
    guard let config = bytes.first else { return }
    let maxBytes = byteCaps[Int(config & 7)]
    let maxCount = countCaps[Int(config >> 3 & 7)]
    // The per-domain limit is small for some inputs, so that eviction runs too.
    let perDomain = config & 0x40 == 0 ? 50 : 4
    let jar = CookieJar(
        maxCookiesPerDomain: perDomain,
        maxCookieHeaderBytes: maxBytes,
        maxCookiesPerRequest: maxCount
    )
    let uncapped = CookieJar(
        maxCookiesPerDomain: perDomain,
        maxCookieHeaderBytes: Int.max,
        maxCookiesPerRequest: Int.max
    )
    var now = start
    var target = urls[0]
    for line in bytes.dropFirst().split(separator: 0x0A, omittingEmptySubsequences: false).prefix(64) {
        now = now.addingTimeInterval(1)
        guard let pick = line.first else { continue }
        let from = urls[Int(pick) % urls.count]
        target = urls[Int(pick >> 4) % urls.count]
        let value = Array(line.dropFirst())
        let stored = jar.setCookie(fromSetCookieBytes: value, for: from, now: now)
        let same = uncapped.setCookie(fromSetCookieBytes: value, for: from, now: now)
        precondition(stored == same, "the caps changed what was stored")
        if case .success(let c) = stored, let sc = SetCookie(bytes: value) {
            precondition(c.nameBytes == sc.nameBytes && c.valueBytes == sc.valueBytes, "octets changed when stored")
        }
    }
    now = now.addingTimeInterval(1)
    let all = uncapped.cookies(for: target, now: now)
    let sent = jar.cookies(for: target, now: now)
    let header = jar.cookieHeader(for: target, now: now)

    // Order: longer paths first, then older first.
    for (a, b) in zip(all, all.dropFirst()) {
        let (la, lb) = (a.path.utf8.count, b.path.utf8.count)
        precondition(la > lb || (la == lb && a.creationTime <= b.creationTime), "out of RFC 6265 order: \(a) \(b)")
    }
    // What goes is the head of everything that matches.
    precondition(
        sent.count <= all.count && Array(all.prefix(sent.count)) == sent,
        "not a prefix of the matching cookies"
    )
    guard let header else {
        precondition(all.isEmpty, "no Cookie field although cookies match")
        return
    }
    precondition(header.cookieCount == sent.count, "count \(header.cookieCount) != \(sent.count)")
    precondition(header.omittedCount == all.count - sent.count, "omitted count")
    precondition(header.maxBytes == maxBytes && header.maxCount == maxCount, "caps")
    precondition(header.value == joined(sent), "the value is not the cookies' octets")
    precondition(header.cookieCount <= maxCount, "past the count cap")
    precondition(header.cookieCount == 0 || header.lineBytes <= maxBytes, "past the byte cap")
    precondition(header.cookieCount > 0 || header.value.isEmpty, "an empty field with bytes")
    precondition(!header.value.contains { $0 < 0x20 || $0 == 0x7F }, "a control byte in the Cookie field")
    if header.omittedCount > 0 {
        // The next one would not have fit.
        let next = all[sent.count]
        let grown = header.lineBytes + (sent.isEmpty ? 0 : 2) + next.nameBytes.count + 1 + next.valueBytes.count
        precondition(sent.count == maxCount || grown > maxBytes, "left out a cookie that fits")
    }
    if let text = jar.cookieHeaderValue(for: target, now: now) {
        precondition(text == String(decoding: header.value, as: UTF8.self), "the String view differs")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCookieHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    check(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzCookieHeader) }
}
#endif
