import HawserCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// curl's `-w` variables.
enum WriteOut {
    /// What a transfer left for `-w`.
    struct Transfer {
        /// The last response head (nil when none arrived).
        var head: HTTPResponseHead?
        var metrics: TaskMetrics
        /// Where the transfer ended (after redirects).
        var url: URL
        var method: String
        var bodyBytes: Int64
        var headBytes: Int
        var uploadBytes: Int64
        /// When the tool started the transfer, and when the last redirect was decided.
        var start: UInt64
        var lastRedirect: UInt64?
        /// When the last request's first response byte arrived, if known better than the metrics do.
        var startTransfer: UInt64?
        var end: UInt64
        var sslVerifyResult: Int32
        /// New connections made, redirects included; nil: from the metrics.
        var connects: Int?
        var errorMessage: String
        var exitCode: Int32

        init(
            head: HTTPResponseHead?,
            metrics: TaskMetrics,
            url: URL,
            method: String = "GET",
            bodyBytes: Int64 = 0,
            headBytes: Int = 0,
            uploadBytes: Int64 = 0,
            start: UInt64? = nil,
            lastRedirect: UInt64? = nil,
            startTransfer: UInt64? = nil,
            end: UInt64? = nil,
            sslVerifyResult: Int32 = 0,
            connects: Int? = nil,
            errorMessage: String = "",
            exitCode: Int32 = 0
        ) {
            self.head = head
            self.metrics = metrics
            self.url = url
            self.method = method
            self.bodyBytes = bodyBytes
            self.headBytes = headBytes
            self.uploadBytes = uploadBytes
            self.start = start ?? metrics.fetchStart
            self.lastRedirect = lastRedirect
            self.startTransfer = startTransfer
            self.end = end ?? metrics.responseEnd ?? metrics.fetchStart
            self.sslVerifyResult = sslVerifyResult
            self.connects = connects
            self.errorMessage = errorMessage
            self.exitCode = exitCode
        }
    }

    /// `format` with `%{name}` replaced, `%%` as `%`, and `\n`, `\r`, `\t` as curl reads them.
    /// Unknown variables are left out with a warning, as curl does.
    static func render(_ format: String, _ t: Transfer, warn: (String) -> Void = { _ in }) -> String {
        let vars = Self.variables(t)
        var out = ""
        var rest = Substring(format)
        while let c = rest.first {
            if c == "%" {
                if rest.hasPrefix("%%") {
                    out += "%"
                    rest = rest.dropFirst(2)
                    continue
                }
                if rest.hasPrefix("%{"), let close = rest.firstIndex(of: "}") {
                    let name = String(rest[rest.index(rest.startIndex, offsetBy: 2)..<close])
                    if let v = vars[name] {
                        out += v
                    } else {
                        warn("unknown --write-out variable: '\(name)'")
                    }
                    rest = rest[rest.index(after: close)...]
                    continue
                }
            } else if c == "\\", rest.count >= 2 {
                let next = rest[rest.index(after: rest.startIndex)]
                let escaped: String? =
                    next == "n" ? "\n" : next == "r" ? "\r" : next == "t" ? "\t" : next == "\\" ? "\\" : nil
                if let escaped {
                    out += escaped
                    rest = rest.dropFirst(2)
                    continue
                }
            }
            out.append(c)
            rest = rest.dropFirst()
        }
        return out
    }

    static func variables(_ t: Transfer) -> [String: String] {
        let m = t.metrics
        /// Seconds from the start of the transfer to `mark`, as curl prints them (six decimals).
        func at(_ mark: UInt64?) -> String {
            guard let mark, mark >= t.start else { return "0.000000" }
            return Self.sixDecimals(Double(mark - t.start) / 1e9)
        }
        let total = Double(t.end &- t.start) / 1e9
        let namelookup = m.domainLookupEnd ?? m.connectStart ?? m.requestStart
        let connect = m.connectEnd ?? namelookup
        let vars: [String: String] = [
            "http_code": t.head.map { Self.threeDigits($0.status) } ?? "000",
            "response_code": t.head.map { Self.threeDigits($0.status) } ?? "000",
            "http_version": t.head.map { "\($0.version.major).\($0.version.minor)" } ?? "0",
            "size_download": String(t.bodyBytes),
            "size_upload": String(t.uploadBytes),
            "size_header": String(t.headBytes),
            "speed_download": String(total > 0 ? Int64(Double(t.bodyBytes) / total) : 0),
            "speed_upload": String(total > 0 ? Int64(Double(t.uploadBytes) / total) : 0),
            "time_namelookup": at(namelookup),
            "time_connect": at(connect),
            "time_appconnect": m.tlsProtocolVersion == nil ? "0.000000" : at(m.secureConnectionEnd ?? connect),
            "time_pretransfer": at(m.requestStart),
            "time_starttransfer": at(t.startTransfer ?? m.responseStart),
            "time_redirect": t.lastRedirect.map { at($0) } ?? "0.000000",
            "time_total": Self.sixDecimals(total),
            "num_connects": String(t.connects ?? (m.remoteAddress == nil || m.isReusedConnection ? 0 : 1)),
            "num_redirects": String(m.redirectCount),
            "url_effective": t.url.absoluteString,
            "scheme": (t.url.scheme ?? "").uppercased(),
            "method": t.method,
            "content_type": t.head?.headers["Content-Type"] ?? "",
            "remote_ip": m.remoteAddress?.ipAddress ?? "",
            "remote_port": m.remoteAddress.map { String($0.port) } ?? "",
            "ssl_verify_result": String(t.sslVerifyResult),
            "errormsg": t.errorMessage,
            "exitcode": String(t.exitCode),
        ]
        return vars
    }

    static func threeDigits(_ n: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, 3 - s.count)) + s
    }

    static func sixDecimals(_ s: Double) -> String {
        let micros = Int64((s * 1e6).rounded())
        let whole = micros / 1_000_000
        let frac = String(micros % 1_000_000)
        return "\(whole)." + String(repeating: "0", count: 6 - frac.count) + frac
    }
}
