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
        /// The URL as the tool read it (`http://` added when it had no scheme): curl's `url`.
        var inputURL: String
        /// Where the body was written (-o, -O), nil for stdout: curl's `filename_effective`.
        var outputFile: String?

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
            exitCode: Int32 = 0,
            inputURL: String? = nil,
            outputFile: String? = nil
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
            self.inputURL = inputURL ?? url.absoluteString
            self.outputFile = outputFile
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
                    if name == "json" {
                        out += Self.json(t)
                    } else if name == "header_json" {
                        out += Self.headerJSON(t.head)
                    } else if let v = vars[name] {
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
            "url": t.inputURL,
            "num_headers": String(t.head?.headers.count ?? 0),
            "filename_effective": t.outputFile ?? "",
        ]
        return vars
    }

    /// How `%{json}` writes a variable, as curl 7.88 types it.
    enum JSONKind {
        /// A JSON number (`000` is 0, an empty value 0).
        case number
        /// A JSON string, empty when there is no value.
        case string
        /// A JSON string, or null when there is no value.
        case stringOrNull
    }

    /// The variables `%{json}` writes, by name (curl's names, in its alphabetical order).
    /// Every other variable curl has is one Hawser cannot fill (FTP, local address, certificates,
    /// proxy TLS), and is left out rather than made up.
    static let jsonVariables: [(name: String, kind: JSONKind)] = [
        ("content_type", .stringOrNull), ("errormsg", .stringOrNull), ("exitcode", .number),
        ("filename_effective", .stringOrNull), ("http_code", .number), ("http_version", .string),
        ("method", .string), ("num_connects", .number), ("num_headers", .number), ("num_redirects", .number),
        ("remote_ip", .string), ("remote_port", .number), ("response_code", .number), ("scheme", .stringOrNull),
        ("size_download", .number), ("size_header", .number), ("size_upload", .number), ("speed_download", .number),
        ("speed_upload", .number), ("ssl_verify_result", .number), ("time_appconnect", .number),
        ("time_connect", .number), ("time_namelookup", .number), ("time_pretransfer", .number),
        ("time_redirect", .number), ("time_starttransfer", .number), ("time_total", .number), ("url", .string),
        ("url_effective", .string),
    ]

    /// `%{json}`: every variable of ``jsonVariables`` in one JSON object on one line, numbers as
    /// numbers (times with curl's six decimals), strings escaped.
    static func json(_ t: Transfer) -> String {
        let vars = Self.variables(t)
        var out = "{"
        for (i, (name, kind)) in Self.jsonVariables.enumerated() {
            if i > 0 { out += "," }
            out += Self.jsonString(Array(name.utf8)) + ":"
            let value = vars[name] ?? ""
            switch kind {
            case .number:
                // The values are digits with at most one point; anything else (an empty port) is 0.
                let numeric = !value.isEmpty && value.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
                out += numeric ? Self.withoutLeadingZeros(value) : "0"
            case .string: out += Self.jsonString(Array(value.utf8))
            case .stringOrNull: out += value.isEmpty ? "null" : Self.jsonString(Array(value.utf8))
            }
        }
        return out + "}"
    }

    /// `%{header_json}`: the last response's fields as curl 7.83+ writes them, one JSON object
    /// whose keys are the field names in lower case, in the order each first appeared, each
    /// mapping to the array of its values in order, a line per name (`{` and `}` on lines of
    /// their own without a response, as curl prints them).
    static func headerJSON(_ head: HTTPResponseHead?) -> String {
        let headers = head?.headers ?? HTTPHeaders()
        var order: [String] = []
        var values: [String: [[UInt8]]] = [:]
        for i in 0..<headers.count {
            let name = headers.name(at: i).lowercased()
            if values[name] == nil { order.append(name) }
            values[name, default: []].append(headers.valueBytes(at: i))
        }
        let members = order.map { name in
            Self.jsonString(Array(name.utf8)) + ":["
                + values[name, default: []].map(Self.jsonString).joined(separator: ",")
                + "]"
        }
        return "{" + members.joined(separator: ",\n") + "\n}"
    }

    /// A JSON string of `bytes`: `"` and `\\` escaped, control characters as `\n`, `\r`, `\t` or
    /// `\u00XX`. Bytes that are valid UTF-8 stay as they are; a value that is not valid UTF-8
    /// (obs-text, RFC 9110 §5.5) is read as ISO 8859-1, each byte 0x80-0xFF written `\u00XX`, so
    /// the output is always valid JSON and the bytes can be recovered.
    static func jsonString(_ bytes: [UInt8]) -> String {
        let hex = Array("0123456789abcdef")
        let scalars: [Unicode.Scalar]
        let latin1: Bool
        if let text = String(validating: bytes, as: UTF8.self) {
            (scalars, latin1) = (Array(text.unicodeScalars), false)
        } else {
            (scalars, latin1) = (bytes.map(Unicode.Scalar.init), true)
        }
        var out = "\""
        for scalar in scalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (latin1 && scalar.value >= 0x80):
                let v = Int(scalar.value)
                out += "\\u00" + String(hex[v >> 4]) + String(hex[v & 0xF])
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A number as JSON writes it: `000` is `0`, `007` is `7`, `0.5` stays.
    static func withoutLeadingZeros(_ s: String) -> String {
        var digits = Substring(s)
        while digits.count > 1, digits.first == "0", digits.dropFirst().first != "." { digits = digits.dropFirst() }
        return String(digits)
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
