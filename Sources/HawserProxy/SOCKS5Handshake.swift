// The client side of a SOCKS5 handshake (RFC 1928) with username/password authentication
// (RFC 1929), as a pure state machine: bytes from the proxy in, bytes to send out. It never
// touches a socket, so every split of the proxy's replies can be tested.
//
//   client                         proxy
//   05 n methods…          →
//                          ←       05 method            (00 none, 02 user/pass, FF none acceptable)
//   01 ulen user plen pass →                            (only for method 02)
//                          ←       01 status            (00 success)
//   05 01 00 atyp addr port →                           (CONNECT)
//                          ←       05 rep 00 atyp bnd.addr bnd.port
//
// After the last reply the connection is a tunnel to the destination; any bytes that came
// with the reply are handed back as the tunnel's first bytes.

import HawserBase
import HawserHTTP1
import HawserPosix

#if canImport(Glibc)
import Glibc
#endif

/// A SOCKS5 failure, with the reason in words.
public struct SOCKS5Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// The input cannot be sent (a name or credential over 255 bytes, an empty name…).
        case invalidRequest
        /// The proxy broke the protocol (wrong version, unknown address type…).
        case protocolViolation
        /// The proxy accepts none of the offered authentication methods (method 0xFF).
        case noAcceptableAuthenticationMethod
        /// The proxy rejected the user name and password.
        case authenticationFailed
        /// The proxy answered the CONNECT with this non-zero reply code.
        case connectFailed(replyCode: UInt8)
    }

    /// What went wrong, the value to match on.
    public var kind: Kind
    /// What went wrong in words, with the proxy's reply code explained when it sent one.
    public var message: String

    /// Creates an error of `kind` with a message that says what went wrong.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "SOCKS5 proxy: \(self.message)" }

    /// The engine's error for this failure (`.proxyError`).
    public var hawserError: HawserError { HawserError(.proxyError, self.description, underlying: self) }

    /// RFC 1928 §6's meaning of a reply code.
    public static func describe(replyCode: UInt8) -> String {
        switch replyCode {
        case 0x00: return "succeeded"
        case 0x01: return "general SOCKS server failure"
        case 0x02: return "connection not allowed by ruleset"
        case 0x03: return "network unreachable"
        case 0x04: return "host unreachable"
        case 0x05: return "connection refused"
        case 0x06: return "TTL expired"
        case 0x07: return "command not supported"
        case 0x08: return "address type not supported"
        default: return "unassigned reply code 0x\(String(replyCode, radix: 16))"
        }
    }
}

/// The client half of a SOCKS5 handshake.
///
/// ```swift
/// var hs = try SOCKS5Handshake(destination: .hostname("example.com"), port: 443, credentials: creds)
/// send(hs.start())
/// while true {
///     switch try hs.receive(readSomeBytes()) {
///     case .send(let bytes): send(bytes)
///     case .needMore: continue
///     case .connected(let bound, let leftover): /* tunnel up */ return
///     }
/// }
/// ```
public struct SOCKS5Handshake: Sendable {
    /// What to connect to through the proxy.
    public enum Destination: Sendable, Hashable {
        /// A host name the proxy resolves (remote DNS, `socks5h`).
        case hostname(String)
        /// A resolved address (local DNS, `socks5`).
        case address(SocketAddress)
    }

    /// The address the proxy reports it bound for the connection (`BND.ADDR`), any type.
    public enum BoundAddress: Sendable, Hashable {
        /// An IPv4 address (4 bytes) and a port.
        case ipv4([UInt8], port: Int)
        /// An IPv6 address (16 bytes) and a port.
        case ipv6([UInt8], port: Int)
        /// A host name (as the proxy sent it, up to 255 bytes) and a port.
        case hostname(String, port: Int)
    }

    /// What the caller does next.
    public enum Step: Sendable, Hashable {
        /// Send these bytes to the proxy, then read more.
        case send([UInt8])
        /// Read more bytes and call `receive` again.
        case needMore
        /// The tunnel is up. `leftover`: bytes that arrived after the reply (the tunnel's).
        case connected(bound: BoundAddress, leftover: [UInt8])
    }

    private enum State: Sendable {
        case initial
        case awaitingMethod
        case awaitingAuthentication
        case awaitingReply
        case connected
        case failed(SOCKS5Error)
    }

    /// The host the tunnel is for: a name (resolved by the proxy) or an address.
    public let destination: Destination
    /// The destination's port, 1 through 65535.
    public let port: Int
    /// The user name and password offered (method 02, RFC 1929), or nil to offer no authentication only.
    public let credentials: ProxyCredentials?
    private var state = State.initial
    private var buffer: [UInt8] = []
    private let user: [UInt8]
    private let password: [UInt8]

    /// Prepares a handshake. Throws ``SOCKS5Error/Kind/invalidRequest`` for a host name that is
    /// empty or over 255 bytes, a user name or password over 255 bytes (or an empty user name),
    /// or a port outside 1…65535: SOCKS5 cannot carry them.
    public init(destination: Destination, port: Int, credentials: ProxyCredentials? = nil) throws(SOCKS5Error) {
        guard (1...65535).contains(port) else { throw SOCKS5Error(.invalidRequest, "port \(port) is out of range") }
        if case .hostname(let h) = destination {
            guard !h.isEmpty else { throw SOCKS5Error(.invalidRequest, "empty host name") }
            guard h.utf8.count <= 255 else {
                throw SOCKS5Error(.invalidRequest, "host name of \(h.utf8.count) bytes is longer than SOCKS5's 255")
            }
        }
        if let c = credentials {
            guard !c.user.isEmpty else { throw SOCKS5Error(.invalidRequest, "empty user name") }
            guard c.user.utf8.count <= 255 else {
                throw SOCKS5Error(
                    .invalidRequest,
                    "user name of \(c.user.utf8.count) bytes is longer than SOCKS5's 255"
                )
            }
            guard c.password.utf8.count <= 255 else {
                throw SOCKS5Error(
                    .invalidRequest,
                    "password of \(c.password.utf8.count) bytes is longer than SOCKS5's 255"
                )
            }
        }
        self.destination = destination
        self.port = port
        self.credentials = credentials
        self.user = Array((credentials?.user ?? "").utf8)
        self.password = Array((credentials?.password ?? "").utf8)
    }

    /// The greeting: version 5 and the offered methods (no authentication, plus
    /// username/password when credentials are set). Call once, first.
    public mutating func start() -> [UInt8] {
        precondition(self.isInitial, "SOCKS5Handshake.start() called twice")
        self.state = .awaitingMethod
        return self.credentials == nil ? [0x05, 0x01, 0x00] : [0x05, 0x02, 0x00, 0x02]
    }

    private var isInitial: Bool {
        if case .initial = self.state { return true }
        return false
    }

    /// True once the tunnel is up.
    public var isConnected: Bool {
        if case .connected = self.state { return true }
        return false
    }

    /// Feeds bytes read from the proxy (any amount, any split). After an error every call
    /// throws it again.
    public mutating func receive(_ bytes: [UInt8]) throws(SOCKS5Error) -> Step {
        switch self.state {
        case .failed(let e): throw e
        case .initial: throw self.failing(.protocolViolation, "the proxy sent data before the greeting")
        case .connected: throw self.failing(.protocolViolation, "data after the tunnel was up belongs to the tunnel")
        case .awaitingMethod, .awaitingAuthentication, .awaitingReply: break
        }
        self.buffer += bytes
        let step = try self.advance()
        if case .send = step, !self.buffer.isEmpty {
            // A proxy cannot answer a message it has not received yet.
            throw self.failing(.protocolViolation, "the proxy sent \(self.buffer.count) bytes before being asked")
        }
        return step
    }

    private mutating func advance() throws(SOCKS5Error) -> Step {
        switch self.state {
        case .awaitingMethod:
            guard self.buffer.count >= 2 else { return .needMore }
            let version = self.buffer[0]
            let method = self.buffer[1]
            self.buffer.removeFirst(2)
            guard version == 0x05 else {
                throw self.failing(.protocolViolation, "method selection has version \(version), expected 5")
            }
            switch method {
            case 0x00:
                self.state = .awaitingReply
                return .send(self.connectRequest())
            case 0x02:
                guard self.credentials != nil else {
                    throw self.failing(
                        .protocolViolation,
                        "the proxy chose username/password authentication, which was not offered"
                    )
                }
                self.state = .awaitingAuthentication
                return .send([0x01, UInt8(self.user.count)] + self.user + [UInt8(self.password.count)] + self.password)
            case 0xFF:
                throw self.failing(
                    .noAcceptableAuthenticationMethod,
                    self.credentials == nil
                        ? "the proxy requires authentication (no acceptable method among: no authentication)"
                        : "the proxy accepts none of the offered methods (no authentication, username/password)"
                )
            default:
                throw self.failing(
                    .protocolViolation,
                    "the proxy chose authentication method 0x\(String(method, radix: 16)), which was not offered"
                )
            }
        case .awaitingAuthentication:
            guard self.buffer.count >= 2 else { return .needMore }
            let version = self.buffer[0]
            let status = self.buffer[1]
            self.buffer.removeFirst(2)
            // RFC 1929 says version 1; some proxies echo 5. Both are accepted, nothing else.
            guard version == 0x01 || version == 0x05 else {
                throw self.failing(.protocolViolation, "authentication reply has version \(version), expected 1")
            }
            guard status == 0x00 else {
                throw self.failing(
                    .authenticationFailed,
                    "the proxy rejected user '\(self.credentials?.user ?? "")' (status \(status))"
                )
            }
            self.state = .awaitingReply
            return .send(self.connectRequest())
        case .awaitingReply:
            guard self.buffer.count >= 2 else { return .needMore }
            guard self.buffer[0] == 0x05 else {
                throw self.failing(.protocolViolation, "CONNECT reply has version \(self.buffer[0]), expected 5")
            }
            let rep = self.buffer[1]
            guard rep == 0x00 else {
                throw self.failing(
                    .connectFailed(replyCode: rep),
                    "CONNECT to \(self.destinationText) failed: \(SOCKS5Error.describe(replyCode: rep))"
                )
            }
            guard self.buffer.count >= 4 else { return .needMore }
            let atyp = self.buffer[3]
            let addressLength: Int
            switch atyp {
            case 0x01: addressLength = 4
            case 0x04: addressLength = 16
            case 0x03:
                guard self.buffer.count >= 5 else { return .needMore }
                addressLength = 1 + Int(self.buffer[4])
            default:
                throw self.failing(.protocolViolation, "CONNECT reply has unknown address type \(atyp)")
            }
            let total = 4 + addressLength + 2
            guard self.buffer.count >= total else { return .needMore }
            let addr = Array(self.buffer[4..<(4 + addressLength)])
            let port = Int(self.buffer[total - 2]) << 8 | Int(self.buffer[total - 1])
            let bound: BoundAddress
            switch atyp {
            case 0x01: bound = .ipv4(addr, port: port)
            case 0x04: bound = .ipv6(addr, port: port)
            default: bound = .hostname(String(decoding: addr.dropFirst(), as: UTF8.self), port: port)
            }
            let leftover = Array(self.buffer[total...])
            self.buffer = []
            self.state = .connected
            return .connected(bound: bound, leftover: leftover)
        case .initial, .connected, .failed:
            return .needMore
        }
    }

    private mutating func failing(_ kind: SOCKS5Error.Kind, _ message: String) -> SOCKS5Error {
        let e = SOCKS5Error(kind, message)
        self.state = .failed(e)
        self.buffer = []
        return e
    }

    private var destinationText: String {
        switch self.destination {
        case .hostname(let h): return "\(h):\(self.port)"
        case .address(let a):
            return a.family == AF_INET6 ? "[\(a.ipAddress)]:\(self.port)" : "\(a.ipAddress):\(self.port)"
        }
    }

    /// `05 01 00 ATYP DST.ADDR DST.PORT`.
    private func connectRequest() -> [UInt8] {
        var out: [UInt8] = [0x05, 0x01, 0x00]
        switch self.destination {
        case .hostname(let h):
            let name = Array(h.utf8)
            out += [0x03, UInt8(name.count)] + name
        case .address(let a):
            switch a.storage {
            case .v4(let host, _):
                out.append(0x01)
                out += withUnsafeBytes(of: host) { Array($0) }
            case .v6(let host, _, _):
                out.append(0x04)
                out += host
            case .unix:
                preconditionFailure("a SOCKS5 destination is never a Unix-domain address")
            }
        }
        out += [UInt8(self.port >> 8), UInt8(self.port & 0xFF)]
        return out
    }
}
