import HawserCore
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one evaluation of a server's chain found: the chain, the verdict, and OpenSSL's verify
/// result for the chain alone (curl's `ssl_verify_result`).
struct TrustRecord: Sendable {
    var host: String
    var certificates: [Certificate]
    /// Why the chain was refused; nil when it was accepted.
    var failure: TrustFailure?
    /// `X509_V_OK` (0) or OpenSSL's `X509_V_ERR_*` for the chain without the host check.
    var verifyResult: Int32
    /// The pinning mode that decided ("public-key", "certificate"), nil without pinning.
    var pinning: String?
}

/// The records of every chain evaluated during the transfer, in order. Written on the event
/// loop by ``TrustRecorder``, read by the printer (also on the loop) and at the end.
final class TrustLog: Sendable {
    private let records = Mutex<[TrustRecord]>([])

    func append(_ r: TrustRecord) { self.records.withLock { $0.append(r) } }

    /// Records not taken before, oldest first.
    func take() -> [TrustRecord] {
        self.records.withLock { r in
            defer { r.removeAll() }
            return r
        }
    }

    /// The verify result of the last evaluation (0 when there was none, as curl for plain http).
    private let lastVerify = Atomic<Int32>(0)
    var lastVerifyResult: Int32 { self.lastVerify.load(ordering: .relaxed) }
    func noteVerifyResult(_ v: Int32) { self.lastVerify.store(v, ordering: .relaxed) }
}

/// Wraps the configured evaluator: decides exactly as it does, and records the chain and the
/// verdict for `-v` and `-w %{ssl_verify_result}`. A resumed TLS session is not evaluated again
/// (the engine trusts what it accepted before), so it leaves no record.
struct TrustRecorder: ServerTrustEvaluating {
    let inner: any ServerTrustEvaluating
    let log: TrustLog
    /// The anchors of the chain check, for the verify result.
    let anchors: TrustAnchors
    let pinning: String?

    func loadTrustStores() { self.inner.loadTrustStores() }

    func requestsStapledOCSP(forHost host: String) -> Bool { self.inner.requestsStapledOCSP(forHost: host) }

    func evaluate(_ trust: ServerTrust, forHost host: String) throws(TrustFailure) {
        // curl's verify result is OpenSSL's for the chain; the host name is checked apart.
        let chainOnly = trust.evaluate(anchors: self.anchors, hostname: nil)
        let verify = chainOnly.failure.map { $0.verifyErrorCode ?? 1 } ?? 0
        self.log.noteVerifyResult(verify)
        do {
            try self.inner.evaluate(trust, forHost: host)
            self.log.append(
                TrustRecord(
                    host: host,
                    certificates: trust.certificates,
                    failure: nil,
                    verifyResult: verify,
                    pinning: self.pinning
                )
            )
        } catch {
            self.log.append(
                TrustRecord(
                    host: host,
                    certificates: trust.certificates,
                    failure: error,
                    verifyResult: verify,
                    pinning: self.pinning
                )
            )
            throw error
        }
    }
}

/// The `-v` text, as curl words it: `*` for what happened, `>` for the request head as sent,
/// `<` for response heads.
enum Verbose {
    /// The connection a request went out on, and its TLS session.
    static func connection(_ m: TaskMetrics, url: URL, trust: [TrustRecord]) -> String {
        var out = ""
        let host = url.host(percentEncoded: false) ?? "?"
        if m.isReusedConnection {
            out += "* Re-using existing connection with host \(host)\n"
            return out
        }
        if let address = m.remoteAddress {
            out += "*   Trying \(Self.hostPort(address))...\n"
            out += "* Connected to \(host) (\(address.ipAddress)) port \(address.port)\n"
        }
        if let version = m.tlsProtocolVersion {
            out += "* SSL connection using \(version) / \(m.tlsCipherSuite ?? "?")\n"
            out +=
                "* ALPN: "
                + (m.tlsALPN.map { "server accepted \($0)" } ?? "server did not agree on a protocol. Uses default.")
                + "\n"
            if m.isResumedTLSSession == true && trust.isEmpty {
                out += "* SSL session resumed: the server's certificate was checked on an earlier connection\n"
            }
        }
        for r in trust { out += Self.certificate(r) }
        return out
    }

    /// The server certificate, the chain's verdict and the pin's, as curl's "Server certificate:" block.
    static func certificate(_ r: TrustRecord) -> String {
        var out = "* Server certificate:\n"
        if let leaf = r.certificates.first {
            out += "*  subject: \(leaf.subject)\n"
            out += "*  start date: \(Self.date(leaf.notValidBefore))\n"
            out += "*  expire date: \(Self.date(leaf.notValidAfter))\n"
            if !leaf.subjectAlternativeNames.isEmpty {
                out += "*  subjectAltName: \(leaf.subjectAlternativeNames.joined(separator: ", "))\n"
            }
            out += "*  issuer: \(leaf.issuer)\n"
        }
        out +=
            r.verifyResult == 0
            ? "*  SSL certificate verify ok.\n"
            : "*  SSL certificate verify result: \(r.verifyResult)\n"
        if let pinning = r.pinning {
            if let f = r.failure, f.reason == .pinMismatch {
                out += "*  pinning (\(pinning)): no match: \(f.message)\n"
            } else if r.failure == nil {
                out += "*  pinning (\(pinning)): matched\n"
            }
        }
        if let f = r.failure {
            out += "*  certificate refused (\(f.reason)): \(f.message)\n"
        }
        return out
    }

    /// `> ` before each line of the request head as it went on the wire.
    static func request(_ head: [UInt8]) -> [UInt8] {
        Self.prefixLines(head, with: "> ")
    }

    /// `< ` before each line of a response head.
    static func response(_ head: [UInt8]) -> [UInt8] {
        Self.prefixLines(head, with: "< ")
    }

    /// Each CRLF-ended line of `head` (the last one blank), prefixed, ended with LF.
    static func prefixLines(_ head: [UInt8], with prefix: String) -> [UInt8] {
        var out: [UInt8] = []
        var lineStart = 0
        var i = 0
        while i < head.count {
            if head[i] == 0x0A {
                var end = i
                if end > lineStart && head[end - 1] == 0x0D { end -= 1 }
                out += Array(prefix.utf8)
                out += head[lineStart..<end]
                out.append(0x0A)
                lineStart = i + 1
            }
            i += 1
        }
        return out
    }

    static func hostPort(_ a: SocketAddress) -> String {
        let ip = a.ipAddress
        return ip.contains(":") ? "[\(ip)]:\(a.port)" : "\(ip):\(a.port)"
    }

    /// curl's certificate dates: `Jan  2 03:04:05 2030 GMT`.
    static func date(_ d: Date) -> String {
        let seconds = Int64(d.timeIntervalSince1970.rounded(.down))
        var days = seconds / 86400
        var rest = seconds % 86400
        if rest < 0 {
            rest += 86400
            days -= 1
        }
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        let names = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let dayText = day < 10 ? " \(day)" : "\(day)"
        return
            "\(names[Int(month) - 1]) \(dayText) \(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60)) \(year) GMT"
    }
}
