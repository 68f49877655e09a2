// FuzzURLValidation: libFuzzer target for the URL authority check (URLAuthority) and the host
// conversion (IDNA, UTS #46 + Punycode) that run before any IO (built with -DFUZZING by
// Fuzz/run.sh; without it, a replay `main` runs the same check on the files named).
//
// Invariants (a trap is a bug):
// - an accepted authority's host is lower-case ASCII with no forbidden domain code point (an
//   IPv6 literal: hex digits, ':', '.', and a zone), its port, when given, in 1...65535; the
//   authority as written had no space, backslash or control byte;
// - the host of an accepted authority is accepted again, unchanged (ToASCII is idempotent), and
//   so is the authority rebuilt from it;
// - IDNA.toASCII on any bytes: an accepted name is ASCII, lower-case, each label at most 63
//   bytes when it is an A-label, and converting it again gives it back;
// - Punycode: what encodes decodes to the same code points; decoding never traps;
// - a Location's bytes percent-encoded are ASCII with no space or control byte after the authority.

import FoundationEssentials
import FuzzSupport
import HawserCore

func checkHost(_ host: String, ipv6: Bool) {
    // An IPv6 zone (after '%') is an interface name: its case is kept.
    let address = ipv6 ? host.utf8.prefix { $0 != 0x25 } : host.utf8[...]
    precondition(!address.contains { $0 >= 0x41 && $0 <= 0x5A }, "upper case in host \(host)")
    for b in host.utf8 {
        precondition(b < 0x80, "non-ASCII host \(host)")
        if ipv6 {
            precondition(b != 0x20 && b != 0x5C && b > 0x20 && b != 0x7F && b != 0x5B && b != 0x5D, "bad IPv6 \(host)")
        } else {
            let forbidden: Set<UInt8> = [0x23, 0x25, 0x2F, 0x3A, 0x3C, 0x3E, 0x3F, 0x40, 0x5B, 0x5C, 0x5D, 0x5E, 0x7C]
            precondition(b > 0x20 && b != 0x7F && !forbidden.contains(b), "forbidden byte in host \(host)")
        }
    }
}

func checkAuthority(_ text: String) {
    guard case .success(let a) = URLAuthority.parse(text) else { return }
    checkHost(a.host, ipv6: a.isIPv6)
    if let p = a.port { precondition((1...65535).contains(p), "port \(p)") }
    // The authority as written: no space, backslash or control byte.
    if let r = text.utf8.firstRange(of: "://".utf8) {
        for b in text.utf8[r.upperBound...] {
            if b == 0x2F || b == 0x3F || b == 0x23 { break }
            precondition(b > 0x20 && b != 0x7F && b != 0x5C, "accepted \(text)")
        }
    }
    // Idempotent: the wire form is accepted as it is.
    let host: String = a.isIPv6 ? "[" + String(a.host.flatMap { $0 == "%" ? Array("%25") : [$0] }) + "]" : a.host
    let port: String = a.port.map { ":\($0)" } ?? ""
    let rebuilt = "http://" + host + port + "/"
    guard case .success(let again) = URLAuthority.parse(rebuilt) else {
        preconditionFailure("\(rebuilt) (from \(text)) is refused")
    }
    precondition(again.host == a.host && again.port == a.port, "\(rebuilt) reads as \(again.host)")
}

func checkIDNA(_ bytes: [UInt8]) {
    guard case .success(let ascii) = IDNA.toASCII(bytes) else { return }
    checkHost(ascii, ipv6: false)
    for label in ascii.split(separator: ".", omittingEmptySubsequences: false) where label.hasPrefix("xn--") {
        precondition(label.utf8.count <= 63, "A-label longer than 63: \(label)")
    }
    guard case .success(let again) = IDNA.toASCII(ascii) else { preconditionFailure("\(ascii) is refused") }
    precondition(again == ascii, "not idempotent: \(ascii) -> \(again)")
}

func checkPunycode(_ bytes: [UInt8]) {
    if let scalars = Punycode.decode(bytes), let encoded = Punycode.encode(scalars) {
        precondition(Punycode.decode(encoded) == scalars, "round trip of \(scalars)")
    }
    let text = String(decoding: bytes, as: UTF8.self)
    let scalars = Array(text.unicodeScalars.prefix(256))
    if let encoded = Punycode.encode(scalars) {
        precondition(encoded.allSatisfy { $0 < 0x80 }, "non-ASCII Punycode")
        precondition(Punycode.decode(encoded) == scalars, "round trip of \(text)")
    }
}

func checkLocation(_ bytes: [UInt8]) {
    let out = Array(URLAuthority.percentEncodingReference(bytes).utf8)
    // The authority ("//" or "scheme://" up to '/', '?' or '#') is left for the check to refuse.
    var start = 0
    var i = 0
    while i < out.count,
        (out[i] | 0x20) >= 0x61 && (out[i] | 0x20) <= 0x7A
            || (i > 0 && (out[i] >= 0x30 && out[i] <= 0x39 || out[i] == 0x2B || out[i] == 0x2D || out[i] == 0x2E))
    {
        i += 1
    }
    if i > 0, out[i...].starts(with: "://".utf8) {
        start = i + 3
    } else if out.starts(with: "//".utf8) {
        start = 2
    }
    var end = start
    if start > 0 {
        while end < out.count, out[end] != 0x2F, out[end] != 0x3F, out[end] != 0x23 { end += 1 }
    }
    for (k, b) in out.enumerated() where k < start || k >= end {
        precondition(b > 0x20 && b < 0x7F && b != 0x5C, "unencoded byte \(b) at \(k) of \(out)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLValidation(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let rest = Array(bytes.dropFirst())
    switch bytes[0] % 4 {
    case 0:
        // Raw bytes as a URL's text: lossless when UTF-8, else the host part fails anyway.
        checkAuthority("http://" + String(decoding: rest, as: UTF8.self))
    case 1:
        checkIDNA(rest)
    case 2:
        checkPunycode(rest)
    default:
        checkLocation(rest)
        checkAuthority(String(decoding: rest, as: UTF8.self))
    }
    return 0
}

#if !FUZZING
@main
struct Replay {
    static func main() { replay(Array(CommandLine.arguments.dropFirst()), fuzzURLValidation) }
}
#endif
