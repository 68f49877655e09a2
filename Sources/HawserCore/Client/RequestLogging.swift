// swift-log for a session's requests (trait "Logging"): a RequestObserver made per task when the
// session or the request has a logger. One `debug` line when the task ends; a `warning` when the
// cookie jar's caps left cookies out of a head's `Cookie` field; at `trace`, each head
// as sent and as received, with credentials and cookies redacted. Without a logger no observer
// exists and nothing here runs.
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

    init(logger: Logger, request: HTTPClientRequest) {
        var logger = logger
        let id = nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
        logger[metadataKey: "hawser.request.id"] = "\(id)"
        logger[metadataKey: "http.request.method"] = "\(request.method.rawValue)"
        logger[metadataKey: "url.full"] = "\(request.urlWithoutCredentials)"
        self.logger = logger
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
            self.logger[metadataKey: "url.full"] = "\(exchange.request.urlWithoutCredentials)"
        }
        var metadata: Logger.Metadata = [
            "hawser.head": "\(Self.redactedRequestHead(exchange.wireHead))",
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

    /// The head as written, one line per field, secrets replaced; lines joined by `\n`.
    static func redactedRequestHead(_ wire: [UInt8]) -> String {
        let text = String(decoding: wire, as: UTF8.self)
        var lines: [String] = []
        for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) {
            if let colon = line.firstIndex(of: ":"), !lines.isEmpty, Self.isRedacted(line[..<colon]) {
                lines.append("\(line[..<colon]): <redacted>")
            } else {
                lines.append(String(line))
            }
        }
        return lines.joined(separator: "\n")
    }

    /// A response head as text, secrets replaced; lines joined by `\n`.
    static func redactedResponseHead(_ head: HTTPResponseHead) -> String {
        var text = "HTTP/\(head.version.major).\(head.version.minor) \(head.status) \(head.reasonPhrase)"
        for field in head.headers {
            text += "\n\(field.name): \(Self.isRedacted(field.name) ? "<redacted>" : field.value)"
        }
        return text
    }
}
#endif
