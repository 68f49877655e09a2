// HTTP CONNECT tunnels through an HTTP proxy (RFC 9110 §9.3.6): the request head, and the
// reading of the proxy's answer with the project's own response parser. Pure: bytes in,
// bytes and verdicts out.
import HawserBase
import HawserHTTP1
import HawserPosix

/// Why a proxy did not open a CONNECT tunnel.
public struct HTTPConnectError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// 407: the proxy wants credentials (or rejected the ones sent).
        case proxyAuthenticationRequired
        /// Any other non-2xx status.
        case refused
        /// The proxy's answer is not valid HTTP/1.1, or the request could not be encoded.
        case malformed
        /// The proxy closed the connection before a complete answer.
        case closed
    }

    /// What went wrong, the value to match on.
    public var kind: Kind
    /// What went wrong in words, with the proxy's status and reason phrase when it answered.
    public var message: String
    /// The proxy's response head, when there was one.
    public var head: HTTPResponseHead?

    /// The proxy's `Proxy-Authenticate` challenges, in order (e.g. `Basic realm="proxy"`).
    public var challenges: [String] { self.head?.headers.values(for: "Proxy-Authenticate") ?? [] }

    public var description: String { self.message }

    /// The engine's error for this failure (`.proxyError`).
    public var hawserError: HawserError { HawserError(.proxyError, self.message, underlying: self) }
}

/// Builds CONNECT requests and reads the proxy's answers.
public enum HTTPConnectTunnel {
    /// `CONNECT host:port HTTP/1.1` with `Host: host:port` and, given credentials,
    /// `Proxy-Authorization: Basic …`. IPv6 addresses are bracketed. `extraHeaders` (e.g.
    /// `User-Agent`) are appended. Throws ``HTTPConnectError/Kind/malformed`` for a host or
    /// header that cannot be sent (CR, LF, NUL, spaces in the host).
    public static func requestHead(
        host: String,
        port: Int,
        credentials: ProxyCredentials? = nil,
        extraHeaders: HTTPHeaders = HTTPHeaders()
    ) throws(HTTPConnectError) -> [UInt8] {
        guard (1...65535).contains(port) else {
            throw HTTPConnectError(kind: .malformed, message: "CONNECT: port \(port) is out of range", head: nil)
        }
        guard !host.isEmpty,
            host.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "@") })
        else {
            throw HTTPConnectError(
                kind: .malformed,
                message: "CONNECT: '\(host)' is not a host that can be sent",
                head: nil
            )
        }
        var bare = host
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        let authority = bare.contains(":") ? "[\(bare)]:\(port)" : "\(bare):\(port)"
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: authority)
        if let c = credentials {
            headers.add(name: "Proxy-Authorization", value: c.basicAuthorization)
        }
        for field in extraHeaders { headers.add(name: field.name, value: field.value) }
        var out: [UInt8] = []
        do {
            try HTTP1Encoder.writeRequestHead(
                HTTPRequestHead(method: .connect, target: authority, headers: headers),
                into: &out
            )
        } catch {
            throw HTTPConnectError(kind: .malformed, message: "CONNECT: \(error)", head: nil)
        }
        return out
    }

    /// The verdict on a final (non-1xx) response head to CONNECT: returns for 2xx (the tunnel is
    /// up), throws ``HTTPConnectError/Kind/proxyAuthenticationRequired`` for 407 (with the
    /// challenges) and ``HTTPConnectError/Kind/refused`` ("proxy refused CONNECT: 403 Forbidden")
    /// for anything else.
    public static func interpret(_ head: HTTPResponseHead, host: String, port: Int) throws(HTTPConnectError) {
        switch head.status {
        case 200..<300:
            return
        case 407:
            let challenges = head.headers.values(for: "Proxy-Authenticate")
            let offered =
                challenges.isEmpty ? "no challenge offered" : "challenges: " + challenges.joined(separator: ", ")
            throw HTTPConnectError(
                kind: .proxyAuthenticationRequired,
                message: "proxy authentication required for CONNECT \(host):\(port) (407; \(offered))",
                head: head
            )
        default:
            let reason = head.reasonPhrase.isEmpty ? "" : " \(head.reasonPhrase)"
            throw HTTPConnectError(
                kind: .refused,
                message: "proxy refused CONNECT \(host):\(port): \(head.status)\(reason)",
                head: head
            )
        }
    }

    /// Reads the proxy's answer to one CONNECT, from bytes as they arrive.
    ///
    /// Interim (1xx) heads are skipped. On a 2xx head the tunnel is up and the bytes after the
    /// head are the tunnel's (``Outcome/established(leftover:)``); for 407 and other refusals
    /// the error comes as soon as the head is complete (the body, if any, is not waited for:
    /// close the connection, or drain it yourself to reuse it).
    public struct ResponseReader: Sendable {
        /// The result of feeding bytes.
        public enum Outcome: Sendable, Hashable {
            /// More bytes are needed.
            case needMore
            /// The tunnel is up; `leftover` bytes came after the head and belong to the tunnel.
            case established(leftover: [UInt8])
        }

        private var parser: HTTP1ResponseParser
        private var pending: [UInt8] = []
        private let host: String
        private let port: Int
        private var done = false

        /// A reader for the answer to `CONNECT host:port`, with the parser's limits.
        public init(host: String, port: Int, limits: HTTP1Limits = .default) {
            self.parser = HTTP1ResponseParser(limits: limits)
            self.parser.expectResponse(to: .connect)
            self.host = host
            self.port = port
        }

        /// Feeds bytes from the proxy (any split).
        public mutating func receive(_ bytes: [UInt8]) throws(HTTPConnectError) -> Outcome {
            precondition(!self.done, "ResponseReader used after the tunnel was established")
            self.pending += bytes
            while true {
                var parser = self.parser
                let result: Result<(consumed: Int, event: HTTP1ResponseEvent?), HTTP1ParseError> =
                    self.pending.withUnsafeBytes { buf in Result { () throws(HTTP1ParseError) in try parser.next(buf) }
                    }
                self.parser = parser
                let step: (consumed: Int, event: HTTP1ResponseEvent?)
                switch result {
                case .success(let s): step = s
                case .failure(let error):
                    throw HTTPConnectError(
                        kind: .malformed,
                        message: "malformed proxy response to CONNECT: \(error)",
                        head: nil
                    )
                }
                self.pending.removeFirst(step.consumed)
                guard let event = step.event else { return .needMore }
                guard case .head(let head) = event else { continue }
                if head.isInterim && head.status != 101 {
                    self.parser.expectResponse(to: .connect)
                    continue
                }
                try HTTPConnectTunnel.interpret(head, host: self.host, port: self.port)
                self.done = true
                let leftover = self.pending
                self.pending = []
                return .established(leftover: leftover)
            }
        }

        /// The proxy closed the connection: always an error, since a complete answer would
        /// already have been returned by `receive`.
        public mutating func finish() -> HTTPConnectError {
            HTTPConnectError(
                kind: .closed,
                message: "the proxy closed the connection before answering CONNECT \(self.host):\(self.port)",
                head: nil
            )
        }
    }
}
