// FuzzCookieParser: libFuzzer target for Set-Cookie parsing, the storage model and the
// Netscape cookie-file parser (built with -DFUZZING by Fuzz/run.sh; without it, a replay
// `main` runs the same check on the files named).
//
// Invariants (a trap is a bug):
// - a parsed Set-Cookie has a non-empty name, name + value within 4096 bytes and no
//   control characters in either;
// - a stored cookie domain-matches the host it came from (exactly, when host-only), has a
//   path starting with '/', expires no later than 400 days from now, is not Secure from an
//   insecure origin, and is sent back to a URL on its own path when not expired;
// - every stored cookie survives a Netscape file round trip unchanged, and parsing a
//   file, writing it and parsing it again gives the same cookies;
// - the input as a host name: its public suffix, if any, ends it at a label boundary, and
//   agrees with isPublicSuffix and registrableDomain.

import FoundationEssentials
import FuzzSupport
import HawserCore

let now = Date(timeIntervalSince1970: 1_700_000_000)
let origins = [
    "http://www.example.com/a/b", "https://sub.example.co.uk/", "http://127.0.0.1:8080/x/", "http://localhost/",
].map { URL(string: $0)! }

func fileKey(_ c: Cookie) -> String {
    "\(c.name)\t\(c.value)\t\(c.domain)\t\(c.path)\t\(Int64(c.expires?.timeIntervalSince1970.rounded(.down) ?? 0))\t\(c.isSecure)\t\(c.isHTTPOnly)\t\(c.isHostOnly)"
}

func checkSetCookie(_ text: String, seed: UInt64) {
    if let sc = SetCookie(text) {
        precondition(!sc.name.isEmpty, "empty name")
        precondition(sc.name.utf8.count + sc.value.utf8.count <= SetCookie.maxNameValueBytes, "over 4096 bytes")
        precondition(!(sc.name + sc.value).utf8.contains { $0 < 0x20 || $0 == 0x7F }, "control character kept")
    }
    let origin = origins[Int(seed % UInt64(origins.count))]
    // No caps on the Cookie field here (FuzzCookieHeader checks those): every cookie that
    // matches is sent, so a cookie on its own path must be among them.
    let jar = CookieJar(maxCookiesPerDomain: 5, maxCookies: 8, maxCookieHeaderBytes: .max, maxCookiesPerRequest: .max)
    // Several lines may be several Set-Cookie fields.
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).prefix(16) {
        guard case .success(let c) = jar.setCookie(fromSetCookie: String(line), for: origin, now: now) else { continue }
        let host = CookieRules.canonicalHost(origin)!
        precondition(
            c.isHostOnly ? c.domain == host : CookieRules.domainMatches(host, c.domain),
            "domain \(c.domain) for \(host)"
        )
        precondition(c.path.utf8.first == UInt8(ascii: "/"), "path \(c.path)")
        if let e = c.expires { precondition(e <= now.addingTimeInterval(Cookie.maxLifetime), "expiry past 400 days") }
        precondition(!c.isSecure || CookieRules.isSecureOrigin(origin), "Secure from an insecure origin")
        if !c.isExpired(at: now) {
            var comps = "\(origin.scheme!)://\(origin.host(percentEncoded: true)!)"
            if let p = origin.port { comps += ":\(p)" }
            if let u = URL(string: comps + c.path) {
                let sent = jar.cookies(for: u, now: now)
                precondition(
                    sent.contains { $0.name == c.name && $0.path == c.path && $0.domain == c.domain }
                        || CookieRules.requestPath(u) != c.path,
                    "cookie \(c) not sent to its own path"
                )
            }
        }
    }
    precondition(jar.count <= 8, "total limit passed")
    // Netscape round trip of everything stored.
    let back = CookieJar()
    back.load(netscapeText: jar.netscapeFileContents(now: now), now: now)
    let before = jar.allCookies.filter { !$0.isExpired(at: now) }.map(fileKey)
    let after = back.allCookies.map(fileKey)
    precondition(before == after, "Netscape round trip changed the cookies:\n\(before)\n\(after)")
}

func checkNetscape(_ text: String) {
    let first = NetscapeCookieFile.parse(text, now: now)
    for c in first {
        precondition(!c.domain.isEmpty && !c.name.isEmpty && c.path.utf8.first == UInt8(ascii: "/"), "bad cookie \(c)")
    }
    let second = NetscapeCookieFile.parse(NetscapeCookieFile.render(first), now: now)
    precondition(
        first.map(fileKey) == second.map(fileKey),
        "render/parse is not stable:\n\(first.map(fileKey))\n\(second.map(fileKey))"
    )
}

/// The public-suffix lookup on any bytes: no suffix (not a domain name), or a suffix of the
/// name that starts at a label; the name is a public suffix exactly when it is its own; the
/// registrable domain is the suffix and one more label.
func checkPublicSuffix(_ name: String) {
    let n = Array(name.utf8)
    guard let suffix = PublicSuffixes.publicSuffix(of: name) else { return }
    let s = Array(suffix.utf8)
    precondition(
        !s.isEmpty && s.count <= n.count && n.reversed().starts(with: s.reversed())
            && (s.count == n.count || n[n.count - s.count - 1] == UInt8(ascii: ".")),
        "suffix \(suffix) of \(name)"
    )
    precondition(PublicSuffixes.isPublicSuffix(name) == (s.count == n.count), "isPublicSuffix(\(name))")
    if let registrable = PublicSuffixes.registrableDomain(of: name) {
        let r = Array(registrable.utf8)
        precondition(
            r.count > s.count + 1 && r.reversed().starts(with: s.reversed())
                && r[r.count - s.count - 1] == UInt8(ascii: ".")
                && !r[..<(r.count - s.count - 1)].contains(UInt8(ascii: ".")),
            "registrable \(registrable) of \(name)"
        )
    } else {
        precondition(s.count == n.count, "no registrable domain for \(name), suffix \(suffix)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCookieParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
    checkPublicSuffix(text)
    if bytes[0] & 1 == 0 {
        checkSetCookie(text, seed: fnv1a(bytes))
    } else {
        checkNetscape(text)
        _ = CookieDate.parse(text)
    }
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzCookieParser) }
}
#endif
