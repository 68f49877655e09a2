// swift-log for a session's requests (trait "Logging"): a RequestObserver made per task when the
// session or the request has a logger. One `debug` line when the task ends; a `warning` when the
// cookie jar's caps left cookies out of a head's `Cookie` field; at `trace`, each head as sent
// and as received on one line, with credentials and cookies redacted. Query strings are written
// by the configuration's QueryLogging (values redacted by default), in `url.full` and in the
// request line. Without a logger no observer exists and nothing here runs.
#if Logging
import HawserBase
import HawserHTTP1
import Logging
import Synchronization

/// Process-wide request numbers for the `hawser.request.id` metadata.
private let nextRequestID = Atomic<UInt64>(1)

final class LoggingObserver: RequestObserver, @unchecked Sendable {
    /// The task's logger, its metadata carrying the request id, method and URL.
    private var logger: Logger
    /// How query strings are written.
    private let queryLogging: QueryLogging

    init(logger: Logger, request: HTTPClientRequest, queryLogging: QueryLogging) {
        var logger = logger
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
        logger[metadataKey: "hawser.request.id"] = "\(id)"
        logger[metadataKey: "http.request.method"] = "\(request.method.rawValue)"
        logger[metadataKey: "url.full"] = "\(request.urlForLogs(queryLogging))"
        self.logger = logger
        self.queryLogging = queryLogging
    }

    func exchangeStarted(_ exchange: ExchangeInfo) {
        if let left = exchange.cookiesLeftOut, self.logger.logLevel <= .warning {
            self.logger.warning(
                """
                \(left.omitted) cookies left out of the Cookie header, past its cap of \(left.maxBytes) bytes \
                or \(left.maxCount) cookies
                """,
                metadata: [
                    "hawser.cookies.sent": "\(left.sent)",
                    "hawser.cookies.omitted": "\(left.omitted)",
                    "hawser.cookies.max_bytes": "\(left.maxBytes)",
                    "hawser.cookies.max_count": "\(left.maxCount)",
                ]
            )
        }
        guard self.logger.logLevel <= .trace else { return }
        if exchange.reason != .initial {
            // A redirect may change the method and the URL: later lines carry the new ones.
            self.logger[metadataKey: "http.request.method"] = "\(exchange.request.method.rawValue)"
            self.logger[metadataKey: "url.full"] = "\(exchange.request.urlForLogs(self.queryLogging))"
        }
        var metadata: Logger.Metadata = [
            "hawser.head": "\(Self.redactedRequestHead(exchange.wireHead, queryLogging: self.queryLogging))",
            "hawser.exchange.reason": "\(exchange.reason)",
            "hawser.connection.reused": "\(exchange.reusedConnection)",
        ]
        if let peer = exchange.remoteAddress { metadata["network.peer.address"] = "\(peer)" }
        self.logger.trace("request head sent", metadata: metadata)
    }

    func receivedHead(_ head: HTTPResponseHead) {
        guard self.logger.logLevel <= .trace else { return }
        self.logger.trace("response head received", metadata: ["hawser.head": "\(Self.redactedResponseHead(head))"])
    }

    func completed(error: HawserError?, status: Int?, metrics: TaskMetrics) {
        guard self.logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = [
            "hawser.bytes.sent": "\(metrics.bytesSent)",
            "hawser.bytes.received": "\(metrics.bytesReceived)",
        ]
        if let status { metadata["http.response.status_code"] = "\(status)" }
        if let end = metrics.responseEnd, end >= metrics.fetchStart {
            metadata["hawser.duration.ms"] = "\(Self.milliseconds(end - metrics.fetchStart))"
        }
        if let ttfb = TaskMetrics.span(metrics.requestStart, metrics.responseStart) {
            metadata["hawser.time_to_first_byte.ms"] = "\(Self.milliseconds(ttfb))"
        }
        if let connect = TaskMetrics.span(metrics.connectStart, metrics.connectEnd) {
            metadata["hawser.connect.ms"] = "\(Self.milliseconds(connect))"
        }
        if metrics.redirectCount > 0 { metadata["hawser.redirects"] = "\(metrics.redirectCount)" }
        if metrics.retryCount > 0 { metadata["hawser.retries"] = "\(metrics.retryCount)" }
        metadata["hawser.connection.reused"] = "\(metrics.isReusedConnection)"
        if let error {
            metadata["error.code"] = "\(error.code)"
            metadata["error.message"] = "\(error.message)"
            self.logger.debug("request failed", metadata: metadata)
        } else {
            self.logger.debug("request finished", metadata: metadata)
        }
    }

    /// Milliseconds with three decimals, as text.
    private static func milliseconds(_ nanos: UInt64) -> String {
        let micros = nanos / 1000
        let fraction = micros % 1000
        let padded = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(micros / 1000).\(padded)"
    }

    // MARK: - Redaction

    /// Fields whose values are secrets (credentials, session cookies): logged as `<redacted>`.
    static func isRedacted(_ name: some StringProtocol) -> Bool {
        switch name.lowercased() {
        case "authorization", "proxy-authorization", "cookie", "set-cookie": return true
        default: return false
        }
    }

    /// The head as written, on one line: fields joined by the two characters `\r\n`, secrets
    /// replaced, the request target's query written by `queryLogging`, bytes outside printable
    /// ASCII as `\xNN` (a log line never breaks, and no byte is lost or guessed).
    static func redactedRequestHead(_ wire: [UInt8], queryLogging: QueryLogging = .verbatim) -> String {
        var out = ""
        out.reserveCapacity(wire.count + 16)
        var lineStart = 0
        var first = true
        var i = 0
        while i <= wire.count {
            let atEnd = i == wire.count
            if atEnd || (wire[i] == 0x0D && i + 1 < wire.count && wire[i + 1] == 0x0A) {
                let line = wire[lineStart..<i]
                if !line.isEmpty {
                    if first {
                        Self.appendRequestLine(line, queryLogging: queryLogging, to: &out)
                    } else {
                        out += "\\r\\n"
                        Self.appendField(line, to: &out)
                    }
                    first = false
                }
                if atEnd { break }
                i += 2
                lineStart = i
                continue
            }
            i += 1
        }
        return out
    }

    /// A response head as text on one line, as ``redactedRequestHead(_:queryLogging:)`` writes one.
    static func redactedResponseHead(_ head: HTTPResponseHead) -> String {
        var out = "HTTP/\(head.version.major).\(head.version.minor) \(head.status) "
        Self.appendEscaped(head.reasonPhraseBytes, to: &out)
        for index in 0..<head.headers.count {
            out += "\\r\\n"
            let name = head.headers.name(at: index)
            Self.appendEscaped(name.utf8, to: &out)
            out += ": "
            if Self.isRedacted(name) {
                out += "<redacted>"
            } else {
                Self.appendEscaped(head.headers.valueBytes(at: index), to: &out)
            }
        }
        return out
    }

    /// `METHOD target HTTP/1.1` with the target's query written by `queryLogging`.
    private static func appendRequestLine(_ line: ArraySlice<UInt8>, queryLogging: QueryLogging, to out: inout String) {
        guard queryLogging != .verbatim, let q = line.firstIndex(of: UInt8(ascii: "?")) else {
            Self.appendEscaped(line, to: &out)
            return
        }
        let targetEnd = line[q...].firstIndex(of: UInt8(ascii: " ")) ?? line.endIndex
        Self.appendEscaped(line[..<q], to: &out)
        out += "?"
        out += queryLogging.apply(toQuery: Substring(String(decoding: line[(q + 1)..<targetEnd], as: UTF8.self)))
        Self.appendEscaped(line[targetEnd...], to: &out)
    }

    /// `Name: value`, the value replaced when the field is a secret.
    private static func appendField(_ line: ArraySlice<UInt8>, to out: inout String) {
        if let colon = line.firstIndex(of: UInt8(ascii: ":")),
            Self.isRedacted(String(decoding: line[..<colon], as: UTF8.self))
        {
            Self.appendEscaped(line[..<colon], to: &out)
            out += ": <redacted>"
        } else {
            Self.appendEscaped(line, to: &out)
        }
    }

    /// Printable ASCII as is, a backslash doubled, every other byte as `\xNN`.
    private static func appendEscaped(_ bytes: some Sequence<UInt8>, to out: inout String) {
        let hex = Array("0123456789ABCDEF".utf8)
        for b in bytes {
            if b == UInt8(ascii: "\\") {
                out += "\\\\"
            } else if b >= 0x20 && b < 0x7F {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "\\x"
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b & 0xF)]))
            }
        }
    }
}
#endif
