// Authentication.swift: HTTP authentication as pure engine components.
//
//   HTTPAuthChallenge      WWW-Authenticate / Proxy-Authenticate parsing (RFC 9110 §11)
//   ProtectionSpace        where a credential applies (host, port, URL scheme, realm, method, proxy)
//   Credential / CredentialStore   user + password, kept per protection space (thread-safe)
//   BasicAuthentication    RFC 7617
//   DigestChallenge / DigestAuthenticator   RFC 7616 (MD5, SHA-256, SHA-512-256, their -sess forms)
//   AuthenticationAttempts the loop breaker for repeated 401/407 answers
//
// None of this touches the network: the request path (RequestTask) decides when to call it.

import CHawser
import HawserHTTP1
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// MARK: - Errors

/// What was wrong with a challenge, a credential or a request that authentication was asked
/// to answer.
public struct AuthenticationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: Sendable, Hashable {
        /// A `WWW-Authenticate` / `Proxy-Authenticate` value does not follow RFC 9110 §11.
        case malformedChallenge
        /// A challenge field, or its number of challenges or parameters, exceeds the parser's bounds.
        case limitExceeded
        /// The challenge is for a scheme this component does not implement.
        case unsupportedScheme
        /// A Digest challenge names an algorithm that is not implemented.
        case unsupportedAlgorithm
        /// A Digest challenge offers no quality of protection that can be used.
        case unsupportedQualityOfProtection
        /// A required challenge parameter (realm, nonce) is absent.
        case missingParameter
        /// The credential cannot be sent (a Basic user-id with a colon, control characters).
        case invalidCredential
        /// The request target cannot be echoed in a Digest `uri` parameter.
        case invalidRequestTarget
        /// OpenSSL failed to compute a digest.
        case hashFailure
    }

    /// The kind of failure.
    public var kind: Kind
    /// What exactly was wrong.
    public var message: String

    /// An error of `kind` with a human-readable `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(self.kind): \(self.message)" }
}

// MARK: - Challenges

/// One challenge from a `WWW-Authenticate` or `Proxy-Authenticate` field (RFC 9110 §11.3):
/// an auth-scheme followed by either a token68 or a list of auth-params.
public struct HTTPAuthChallenge: Sendable, Hashable, CustomStringConvertible {
    /// One `name=value` auth-param. The name is lower-cased (names are case-insensitive);
    /// the value is unquoted and unescaped.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name, lower-cased (`realm`, `nonce`, `qop`…).
        public var name: String
        /// The parameter's value, unquoted and unescaped.
        public var value: String

        /// Creates a parameter; `name` is lower-cased.
        public init(name: String, value: String) {
            self.name = name.lowercased()
            self.value = value
        }
    }

    /// The auth-scheme as received (compare with ``hasScheme(_:)``: schemes are case-insensitive).
    public var scheme: String
    /// The auth-params, in order; empty when the challenge carries a token68 or nothing.
    public var parameters: [Parameter]
    /// The token68 form of the challenge data (`Negotiate abc==`), if that form was used.
    public var token68: String?

    /// Bounds of the parser: a longer field, or more challenges or parameters, is refused
    /// with ``AuthenticationError/Kind/limitExceeded``.
    public static let maximumFieldLength = 16 * 1024
    /// The most challenges one set of fields may hold.
    public static let maximumChallenges = 32
    /// The most auth-params one challenge may hold.
    public static let maximumParameters = 64

    /// A challenge with the given parts.
    public init(scheme: String, parameters: [Parameter] = [], token68: String? = nil) {
        self.scheme = scheme
        self.parameters = parameters
        self.token68 = token68
    }

    /// The value of the auth-param `name` (case-insensitive), or nil.
    public subscript(parameter name: String) -> String? {
        let wanted = name.lowercased()
        return self.parameters.first { $0.name == wanted }?.value
    }

    /// The `realm` parameter, if any.
    public var realm: String? { self[parameter: "realm"] }

    /// Whether the challenge's scheme is `scheme`, ASCII case-insensitively.
    public func hasScheme(_ scheme: String) -> Bool {
        self.scheme.lowercased() == scheme.lowercased()
    }

    public var description: String {
        if let t = self.token68 { return "\(self.scheme) \(t)" }
        if self.parameters.isEmpty { return self.scheme }
        return self.scheme + " "
            + self.parameters.map { "\($0.name)=\(quotedString($0.value))" }.joined(separator: ", ")
    }

    /// Every challenge in the `WWW-Authenticate` (or, with `proxy`, `Proxy-Authenticate`)
    /// fields of `headers`, in order, across fields.
    ///
    /// Lenient by design, because a response may carry a scheme this parser cannot read next
    /// to one it can: a malformed field contributes the challenges completed before the
    /// error; the other fields are still read. At most ``maximumChallenges`` are returned.
    /// Use ``parse(fieldValue:)`` to get the error itself.
    public static func parse(_ headers: HTTPHeaders, proxy: Bool) -> [HTTPAuthChallenge] {
        var result: [HTTPAuthChallenge] = []
        for value in headers.values(for: proxy ? "Proxy-Authenticate" : "WWW-Authenticate") {
            let (challenges, _) = ChallengeParser.parse(Array(value.utf8))
            result.append(contentsOf: challenges.prefix(Self.maximumChallenges - result.count))
            if result.count >= Self.maximumChallenges { break }
        }
        return result
    }

    /// The challenges of one field value, or the error that names what is wrong with it.
    public static func parse(fieldValue: String) throws(AuthenticationError) -> [HTTPAuthChallenge] {
        let (challenges, error) = ChallengeParser.parse(Array(fieldValue.utf8))
        if let error { throw error }
        return challenges
    }

    /// The challenge to answer among `challenges`: Digest (SHA-512-256, then SHA-256, then
    /// MD5, each with its -sess form) before Basic; challenges this engine cannot answer
    /// (other schemes, Digest with an unknown algorithm or qop) are never chosen. Ties go to
    /// the first offered.
    public static func strongest(of challenges: [HTTPAuthChallenge]) -> HTTPAuthChallenge? {
        var best: (rank: Int, challenge: HTTPAuthChallenge)?
        for challenge in challenges {
            let rank: Int
            if challenge.hasScheme("Digest") {
                guard let digest = try? DigestChallenge(challenge) else { continue }
                rank = 10 + digest.algorithm.strength
            } else if challenge.hasScheme("Basic") {
                rank = 1
            } else {
                continue
            }
            if best == nil || rank > best!.rank { best = (rank, challenge) }
        }
        return best?.challenge
    }
}

/// The RFC 9110 §11 challenge grammar over the bytes of one field value.
///
///     challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
///     auth-param = token BWS "=" BWS ( token / quoted-string )
///     token68    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
///
/// Commas separate both challenges and parameters; after a comma, `token BWS "="` continues
/// the parameter list and anything else starts a new challenge.
struct ChallengeParser {
    private let bytes: [UInt8]
    private var index = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The challenges completed before any error, and the error.
    static func parse(_ bytes: [UInt8]) -> ([HTTPAuthChallenge], AuthenticationError?) {
        if bytes.count > HTTPAuthChallenge.maximumFieldLength {
            return (
                [],
                AuthenticationError(
                    .limitExceeded,
                    "challenge field is \(bytes.count) bytes; the limit is \(HTTPAuthChallenge.maximumFieldLength)"
                )
            )
        }
        var parser = ChallengeParser(bytes)
        var result: [HTTPAuthChallenge] = []
        do throws(AuthenticationError) {
            while let challenge = try parser.nextChallenge() {
                if result.count == HTTPAuthChallenge.maximumChallenges {
                    throw AuthenticationError(
                        .limitExceeded,
                        "more than \(HTTPAuthChallenge.maximumChallenges) challenges in one field"
                    )
                }
                result.append(challenge)
            }
            return (result, nil)
        } catch {
            return (result, error)
        }
    }

    private var atEnd: Bool { self.index >= self.bytes.count }
    private var current: UInt8 { self.bytes[self.index] }

    private func malformed(_ what: String) -> AuthenticationError {
        AuthenticationError(.malformedChallenge, "\(what) at offset \(self.index)")
    }

    private mutating func skipOWS() {
        while !self.atEnd && (self.current == 0x20 || self.current == 0x09) { self.index += 1 }
    }

    private mutating func skipOWSAndCommas() {
        while !self.atEnd && (self.current == 0x20 || self.current == 0x09 || self.current == 0x2C) { self.index += 1 }
    }

    private mutating func readToken() -> String? {
        let start = self.index
        while !self.atEnd && isTokenChar(self.current) { self.index += 1 }
        return start == self.index ? nil : String(decoding: self.bytes[start..<self.index], as: UTF8.self)
    }

    private mutating func nextChallenge() throws(AuthenticationError) -> HTTPAuthChallenge? {
        self.skipOWSAndCommas()
        if self.atEnd { return nil }
        guard let scheme = self.readToken() else { throw self.malformed("expected an auth-scheme") }
        var challenge = HTTPAuthChallenge(scheme: scheme)
        if self.atEnd || self.current == 0x2C { return challenge }
        guard self.current == 0x20 || self.current == 0x09 else {
            throw self.malformed("expected a space after the auth-scheme '\(scheme)'")
        }
        self.skipOWS()
        if self.atEnd || self.current == 0x2C { return challenge }
        if let end = self.token68End() {
            challenge.token68 = String(decoding: self.bytes[self.index..<end], as: UTF8.self)
            self.index = end
            self.skipOWS()
            return challenge
        }
        var seen = Set<String>()
        while true {
            guard let rawName = self.readToken() else { throw self.malformed("expected an auth-param name") }
            let name = rawName.lowercased()
            self.skipOWS()
            guard !self.atEnd && self.current == 0x3D else {
                throw self.malformed("expected '=' after the auth-param name '\(rawName)'")
            }
            self.index += 1
            self.skipOWS()
            let value: String
            if !self.atEnd && self.current == 0x22 {
                value = try self.readQuotedString()
            } else if let token = self.readToken() {
                value = token
            } else {
                throw self.malformed("missing value for the auth-param '\(rawName)'")
            }
            guard seen.insert(name).inserted else { throw self.malformed("duplicate auth-param '\(name)'") }
            guard challenge.parameters.count < HTTPAuthChallenge.maximumParameters else {
                throw AuthenticationError(
                    .limitExceeded,
                    "more than \(HTTPAuthChallenge.maximumParameters) auth-params in one challenge"
                )
            }
            challenge.parameters.append(.init(name: name, value: value))
            self.skipOWS()
            if self.atEnd { return challenge }
            guard self.current == 0x2C else { throw self.malformed("expected ',' after the auth-param '\(rawName)'") }
            self.skipOWSAndCommas()
            if self.atEnd { return challenge }
            // `token BWS "="` continues this challenge's list; anything else starts the next.
            let mark = self.index
            let continues =
                self.readToken() != nil
                && { () -> Bool in
                    self.skipOWS()
                    return !self.atEnd && self.current == 0x3D
                }()
            self.index = mark
            if !continues { return challenge }
        }
    }

    /// Where a token68 starting at the current index ends, if what follows is a token68
    /// (its characters, `=` padding, then OWS and the end of the field or a comma).
    private func token68End() -> Int? {
        var i = self.index
        while i < self.bytes.count && isToken68Char(self.bytes[i]) { i += 1 }
        if i == self.index { return nil }
        while i < self.bytes.count && self.bytes[i] == 0x3D { i += 1 }
        let end = i
        while i < self.bytes.count && (self.bytes[i] == 0x20 || self.bytes[i] == 0x09) { i += 1 }
        return i == self.bytes.count || self.bytes[i] == 0x2C ? end : nil
    }

    /// A quoted-string (RFC 9110 §5.6.4) starting at the current `"`, unescaped.
    private mutating func readQuotedString() throws(AuthenticationError) -> String {
        self.index += 1
        var out: [UInt8] = []
        while !self.atEnd {
            let c = self.current
            if c == 0x22 {
                self.index += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c == 0x5C {
                self.index += 1
                guard !self.atEnd else { break }
                let escaped = self.current
                guard escaped == 0x09 || escaped >= 0x20 && escaped != 0x7F else {
                    throw self.malformed("invalid quoted-pair")
                }
                out.append(escaped)
            } else {
                guard c == 0x09 || c >= 0x20 && c != 0x7F else {
                    throw self.malformed("control character in a quoted-string")
                }
                out.append(c)
            }
            self.index += 1
        }
        throw self.malformed("unterminated quoted-string")
    }
}

/// token68 characters other than the trailing `=` (RFC 9110 §11.2).
@inline(__always)
private func isToken68Char(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E, 0x2B, 0x2F: return true
    default: return false
    }
}

// MARK: - Protection spaces and credentials

/// Where a credential applies (NSURLProtectionSpace's role): the server (or proxy) by host,
/// port and URL scheme, the realm it named, and the authentication method.
public struct ProtectionSpace: Sendable, Hashable, CustomStringConvertible {
    /// The URL scheme of the protected server (for a proxy: how the proxy is reached).
    public enum URLScheme: String, Sendable, Hashable {
        /// Plain `http`: the default port is 80.
        case http
        /// `https`: the default port is 443.
        case https
    }

    /// The authentication scheme, lower-cased for schemes without a case of their own.
    public enum AuthenticationMethod: Sendable, Hashable {
        /// `Basic` (RFC 7617): the user name and password, base64-encoded, on every request.
        case basic
        /// `Digest` (RFC 7616): a hash of the credentials and the server's nonce; the password is never sent.
        case digest
        /// Any other scheme, lower-cased (`bearer`, `negotiate`…).
        case other(String)
        /// A TLS server-trust challenge (NSURLAuthenticationMethodServerTrust): evaluate the chain.
        case serverTrust
        /// A TLS client-certificate request (NSURLAuthenticationMethodClientCertificate).
        case clientCertificate

        /// The method named by an auth-scheme (case-insensitive).
        public init(scheme: String) {
            switch scheme.lowercased() {
            case "basic": self = .basic
            case "digest": self = .digest
            case let other: self = .other(other)
            }
        }
    }

    /// The host, lower-cased.
    public var host: String
    /// The port of the protected server (or proxy): the URL's, or 80 / 443 by scheme.
    public var port: Int
    /// How the protected server (or the proxy) is reached: http or https.
    public var urlScheme: URLScheme
    /// The realm the server named; nil when it named none.
    public var realm: String?
    /// The authentication scheme the challenge asked for.
    public var authenticationMethod: AuthenticationMethod
    /// Whether this is a proxy's protection space (407 / Proxy-Authenticate).
    public var isProxy: Bool

    /// A protection space; `host` is lower-cased.
    public init(
        host: String,
        port: Int,
        urlScheme: URLScheme,
        realm: String?,
        authenticationMethod: AuthenticationMethod,
        isProxy: Bool = false
    ) {
        self.host = host.lowercased()
        self.port = port
        self.urlScheme = urlScheme
        self.realm = realm
        self.authenticationMethod = authenticationMethod
        self.isProxy = isProxy
    }

    /// The protection space of `challenge` received for `url` (for a proxy challenge: the
    /// proxy's URL). nil when the URL has no host or is not http/https.
    public init?(url: URL, challenge: HTTPAuthChallenge, isProxy: Bool = false) {
        guard let scheme = url.scheme.flatMap({ URLScheme(rawValue: $0.lowercased()) }),
            var host = url.host(percentEncoded: false), !host.isEmpty
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.init(
            host: host,
            port: url.port ?? (scheme == .https ? 443 : 80),
            urlScheme: scheme,
            realm: challenge.realm,
            authenticationMethod: AuthenticationMethod(scheme: challenge.scheme),
            isProxy: isProxy
        )
    }

    public var description: String {
        "\(self.isProxy ? "proxy " : "")\(self.urlScheme.rawValue)://\(self.host):\(self.port) realm=\(self.realm.map { quotedString($0) } ?? "none") \(self.authenticationMethod)"
    }
}

/// A user name and password, and how long a store keeps them (NSURLCredential's role).
public struct Credential: Sendable, Hashable, CustomStringConvertible {
    /// How long a ``CredentialStore`` keeps the credential.
    public enum Persistence: Sendable, Hashable {
        /// Used for the request at hand only; a store never keeps it.
        case none
        /// Kept by the store until removed or the store goes away.
        case forSession
        /// Like `forSession`: the engine has no keychain, so nothing outlives the process.
        case permanent
    }

    /// The user name.
    public var user: String
    /// The password. Never printed: ``description`` leaves it out.
    public var password: String
    /// How long a ``CredentialStore`` keeps this credential.
    public var persistence: Persistence

    /// Creates a credential, kept for the session's life by default.
    public init(user: String, password: String, persistence: Persistence = .forSession) {
        self.user = user
        self.password = password
        self.persistence = persistence
    }

    /// The user and persistence; never the password.
    public var description: String { "Credential(user: \(self.user), persistence: \(self.persistence))" }
}

/// Credentials per protection space, and one default per space (NSURLCredentialStorage's
/// role). Thread-safe; everything is in memory.
public final class CredentialStore: Sendable {
    private struct State {
        var credentials: [ProtectionSpace: [String: Credential]] = [:]
        var defaults: [ProtectionSpace: String] = [:]
    }

    private let state = Mutex(State())

    /// An empty store.
    public init() {}

    /// Keeps `credential` for `space`, replacing one with the same user. A credential with
    /// persistence `.none` is not kept: returns false.
    @discardableResult
    public func set(_ credential: Credential, for space: ProtectionSpace) -> Bool {
        guard credential.persistence != .none else { return false }
        self.state.withLock { $0.credentials[space, default: [:]][credential.user] = credential }
        return true
    }

    /// Keeps `credential` for `space` and makes it the space's default. Returns false (and
    /// changes nothing) for persistence `.none`.
    @discardableResult
    public func setDefault(_ credential: Credential, for space: ProtectionSpace) -> Bool {
        guard credential.persistence != .none else { return false }
        self.state.withLock {
            $0.credentials[space, default: [:]][credential.user] = credential
            $0.defaults[space] = credential.user
        }
        return true
    }

    /// The credentials kept for `space`, by user.
    public func credentials(for space: ProtectionSpace) -> [String: Credential] {
        self.state.withLock { $0.credentials[space] ?? [:] }
    }

    /// The default credential of `space`, if one was set and is still kept.
    public func defaultCredential(for space: ProtectionSpace) -> Credential? {
        self.state.withLock { state in state.defaults[space].flatMap { state.credentials[space]?[$0] } }
    }

    /// Every kept credential, by protection space and user.
    public var allCredentials: [ProtectionSpace: [String: Credential]] {
        self.state.withLock { $0.credentials }
    }

    /// Removes the credential of `credential.user` from `space` (and its default mark).
    public func remove(_ credential: Credential, for space: ProtectionSpace) {
        self.state.withLock { state in
            state.credentials[space]?[credential.user] = nil
            if state.credentials[space]?.isEmpty == true { state.credentials[space] = nil }
            if state.defaults[space] == credential.user { state.defaults[space] = nil }
        }
    }

    /// Removes everything.
    public func removeAll() {
        self.state.withLock { $0 = State() }
    }

    /// The credential to answer `challenge`, received for `url`: the default credential of
    /// its protection space, else the space's only credential; nil when there is none or
    /// several without a default.
    public func credential(for challenge: HTTPAuthChallenge, url: URL, isProxy: Bool = false) -> Credential? {
        guard let space = ProtectionSpace(url: url, challenge: challenge, isProxy: isProxy) else { return nil }
        return self.state.withLock { state in
            if let user = state.defaults[space], let credential = state.credentials[space]?[user] { return credential }
            if let all = state.credentials[space], all.count == 1 { return all.first!.value }
            return nil
        }
    }
}

// MARK: - Basic (RFC 7617)

/// The Basic scheme (RFC 7617).
public enum BasicAuthentication {
    /// The `Authorization` / `Proxy-Authorization` value for `user` and `password`:
    /// `Basic base64(user ":" password)`, the user-id and password encoded as UTF-8 (what
    /// RFC 7617 §2.1 specifies for `charset="UTF-8"`, and what this engine sends when the
    /// server names no charset). Unicode normalization is not applied.
    ///
    /// Throws ``AuthenticationError/Kind/invalidCredential`` for a user-id containing `:`
    /// or either part containing control characters (RFC 7617 §2).
    public static func authorizationValue(user: String, password: String) throws(AuthenticationError) -> String {
        if user.utf8.contains(0x3A) {
            throw AuthenticationError(.invalidCredential, "a Basic user-id cannot contain ':'")
        }
        if user.utf8.contains(where: isControl) || password.utf8.contains(where: isControl) {
            throw AuthenticationError(
                .invalidCredential,
                "a Basic user-id or password cannot contain control characters"
            )
        }
        return "Basic " + Data((user + ":" + password).utf8).base64EncodedString()
    }

    /// ``authorizationValue(user:password:)`` for `credential`.
    public static func authorizationValue(for credential: Credential) throws(AuthenticationError) -> String {
        try self.authorizationValue(user: credential.user, password: credential.password)
    }
}

@inline(__always)
private func isControl(_ c: UInt8) -> Bool { c < 0x20 || c == 0x7F }

// MARK: - Digest (RFC 7616)

/// A Digest algorithm (RFC 7616 §3.3 and the IANA registry).
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// `MD5`: the default when a challenge names none; weak, kept for old servers.
    case md5 = "MD5"
    /// `MD5-sess`: MD5 with the client nonce folded into the first hash.
    case md5Session = "MD5-sess"
    /// `SHA-256` (RFC 7616): chosen over an MD5 challenge when a server offers both.
    case sha256 = "SHA-256"
    /// `SHA-256-sess`: SHA-256 with the client nonce folded into the first hash.
    case sha256Session = "SHA-256-sess"
    /// `SHA-512-256` (RFC 7616): SHA-512 truncated to 256 bits; the strongest, chosen over the others.
    case sha512_256 = "SHA-512-256"
    /// `SHA-512-256-sess`: SHA-512-256 with the client nonce folded into the first hash.
    case sha512_256Session = "SHA-512-256-sess"

    /// The algorithm named by `token`, ASCII case-insensitively; nil for an unknown one.
    public init?(token: String) {
        let lower = token.lowercased()
        guard let match = Self.allCases.first(where: { $0.rawValue.lowercased() == lower }) else { return nil }
        self = match
    }

    /// Whether A1 includes the nonce and cnonce (the `-sess` variants).
    public var isSession: Bool {
        switch self {
        case .md5Session, .sha256Session, .sha512_256Session: return true
        default: return false
        }
    }

    /// 1 (MD5), 2 (SHA-256), 3 (SHA-512-256): what ``HTTPAuthChallenge/strongest(of:)`` ranks by.
    public var strength: Int {
        switch self {
        case .md5, .md5Session: return 1
        case .sha256, .sha256Session: return 2
        case .sha512_256, .sha512_256Session: return 3
        }
    }

    /// The OpenSSL digest (EVP_md5, EVP_sha256, EVP_sha512_256).
    private var evp: OpaquePointer? {
        switch self {
        case .md5, .md5Session: return EVP_md5()
        case .sha256, .sha256Session: return EVP_sha256()
        case .sha512_256, .sha512_256Session: return EVP_sha512_256()
        }
    }

    /// The lower-case hex digest of `bytes` (OpenSSL's one-shot EVP_Digest).
    func hex(_ bytes: [UInt8]) throws(AuthenticationError) -> String {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let md = self.evp
        let ok = bytes.withUnsafeBytes { raw in
            out.withUnsafeMutableBufferPointer { o in
                // EVP_Digest wants a non-null pointer even for zero bytes.
                withUnsafeBytes(of: UInt8(0)) { empty in
                    EVP_Digest(
                        raw.count > 0 ? raw.baseAddress : empty.baseAddress,
                        raw.count,
                        o.baseAddress,
                        &size,
                        md,
                        nil
                    )
                }
            }
        }
        guard md != nil, ok == 1, size > 0 else {
            throw AuthenticationError(.hashFailure, "OpenSSL could not compute \(self.rawValue)")
        }
        return hexString(out[0..<Int(size)])
    }

    func hex(_ string: String) throws(AuthenticationError) -> String { try self.hex(Array(string.utf8)) }
}

func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// The quality of protection a Digest response uses.
public enum DigestQualityOfProtection: String, Sendable, Hashable {
    /// Authentication of the request line.
    case auth
    /// Authentication with integrity of the request body (needs the whole body up front).
    case authInt = "auth-int"
}

/// A Digest challenge, validated (RFC 7616 §3.3).
public struct DigestChallenge: Sendable, Hashable {
    /// The realm the server named; it goes into the hash and names the protection space.
    public var realm: String
    /// The server's nonce, echoed in the answer and hashed with the credentials.
    public var nonce: String
    /// The server's opaque value, echoed unchanged when present.
    public var opaque: String?
    /// `MD5` when the challenge names none.
    public var algorithm: DigestAlgorithm
    /// Whether the challenge named its algorithm (it is then echoed).
    public var algorithmWasSpecified: Bool
    /// The qop values offered; empty for an RFC 2069 challenge without qop.
    public var qualityOfProtection: [DigestQualityOfProtection]
    /// `stale=true`: the nonce expired but the credentials were right; retry with the new nonce.
    public var stale: Bool
    /// `userhash=true`: send H(user ":" realm) instead of the user name.
    public var userhash: Bool

    /// Validates a parsed challenge: scheme Digest, a realm and a nonce, a known algorithm,
    /// and (when qop is offered) `auth` or `auth-int` among the offers.
    public init(_ challenge: HTTPAuthChallenge) throws(AuthenticationError) {
        guard challenge.hasScheme("Digest") else {
            throw AuthenticationError(.unsupportedScheme, "not a Digest challenge: \(challenge.scheme)")
        }
        guard let realm = challenge.realm else {
            throw AuthenticationError(.missingParameter, "Digest challenge without a realm")
        }
        guard let nonce = challenge[parameter: "nonce"] else {
            throw AuthenticationError(.missingParameter, "Digest challenge without a nonce")
        }
        self.realm = realm
        self.nonce = nonce
        self.opaque = challenge[parameter: "opaque"]
        if let name = challenge[parameter: "algorithm"] {
            guard let algorithm = DigestAlgorithm(token: name) else {
                throw AuthenticationError(.unsupportedAlgorithm, "unsupported Digest algorithm '\(name)'")
            }
            self.algorithm = algorithm
            self.algorithmWasSpecified = true
        } else {
            self.algorithm = .md5
            self.algorithmWasSpecified = false
        }
        if let qop = challenge[parameter: "qop"] {
            var offered: [DigestQualityOfProtection] = []
            for item in qop.split(separator: ",") {
                let token = item.trimmingOWS().lowercased()
                if let q = DigestQualityOfProtection(rawValue: token), !offered.contains(q) { offered.append(q) }
            }
            guard !offered.isEmpty else {
                throw AuthenticationError(.unsupportedQualityOfProtection, "no supported qop in '\(qop)'")
            }
            self.qualityOfProtection = offered
        } else {
            self.qualityOfProtection = []
        }
        self.stale = challenge[parameter: "stale"]?.lowercased() == "true"
        self.userhash = challenge[parameter: "userhash"]?.lowercased() == "true"
    }

    /// The `Authorization` value for one request (RFC 7616 §3.4), with the given nonce count
    /// and client nonce. `body` is the whole request body when known; it is needed only when
    /// the challenge offers `auth-int` alone. `auth` is chosen whenever it is offered.
    public func authorizationValue(
        user: String,
        password: String,
        method: HTTPMethod,
        target: String,
        nonceCount: UInt32,
        cnonce: String,
        body: [UInt8]? = nil
    ) throws(AuthenticationError) -> String {
        guard !target.isEmpty, target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 }) else {
            throw AuthenticationError(
                .invalidRequestTarget,
                "request target '\(target)' cannot be sent in a Digest uri"
            )
        }
        guard !cnonce.isEmpty, cnonce.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) else {
            throw AuthenticationError(.invalidCredential, "a cnonce must be printable ASCII without quotes")
        }
        let h = self.algorithm
        let qop: DigestQualityOfProtection?
        if self.qualityOfProtection.isEmpty {
            qop = nil
        } else if self.qualityOfProtection.contains(.auth) {
            qop = .auth
        } else if body != nil {
            qop = .authInt
        } else {
            throw AuthenticationError(
                .unsupportedQualityOfProtection,
                "the server requires qop=auth-int and the request body is not available"
            )
        }
        var ha1 = try h.hex("\(user):\(self.realm):\(password)")
        if h.isSession { ha1 = try h.hex("\(ha1):\(self.nonce):\(cnonce)") }
        var a2 = "\(method.rawValue):\(target)"
        if qop == .authInt { a2 += ":" + (try h.hex(body ?? [])) }
        let ha2 = try h.hex(a2)
        let nc = hexString(withUnsafeBytes(of: nonceCount.bigEndian) { Array($0) }).uppercased()
        let response: String
        if let qop {
            response = try h.hex("\(ha1):\(self.nonce):\(nc):\(cnonce):\(qop.rawValue):\(ha2)")
        } else {
            response = try h.hex("\(ha1):\(self.nonce):\(ha2)")
        }

        var parts: [String] = []
        if self.userhash {
            parts.append("username=\"\(try h.hex("\(user):\(self.realm)"))\"")
        } else if user.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            parts.append("username=\(quotedString(user))")
        } else {
            parts.append("username*=UTF-8''\(rfc8187Encoded(user))")
        }
        parts.append("realm=\(quotedString(self.realm))")
        parts.append("uri=\"\(target)\"")
        if self.algorithmWasSpecified { parts.append("algorithm=\(h.rawValue)") }
        parts.append("nonce=\(quotedString(self.nonce))")
        if let qop {
            parts.append("nc=\(nc)")
            parts.append("cnonce=\"\(cnonce)\"")
            parts.append("qop=\(qop.rawValue)")
        }
        parts.append("response=\"\(response)\"")
        if let opaque = self.opaque { parts.append("opaque=\(quotedString(opaque))") }
        if self.userhash { parts.append("userhash=true") }
        return "Digest " + parts.joined(separator: ", ")
    }
}

/// RFC 8187 ext-value encoding of `value` (the part after `UTF-8''`).
private func rfc8187Encoded(_ value: String) -> String {
    var out = ""
    for b in value.utf8 {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x21, 0x23, 0x24, 0x26, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C,
            0x7E:
            out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            out += "%" + hexString([b]).uppercased()
        }
    }
    return out
}

/// Answers Digest challenges and keeps, per protection space, the last nonce and its nonce
/// count, so that later requests in the same space can authenticate pre-emptively (`nc`
/// counts up per nonce; a new nonce starts again at 1). Thread-safe.
public final class DigestAuthenticator: Sendable {
    private struct NonceState {
        var challenge: DigestChallenge
        var nonceCount: UInt32
    }

    private let states = Mutex<[ProtectionSpace: NonceState]>([:])
    private let makeCnonce: @Sendable () -> String

    /// An authenticator that makes each cnonce with `cnonce` (default: 128 random bits from
    /// the system's CSPRNG, as hex). Tests pass a fixed one.
    public init(cnonce: @escaping @Sendable () -> String = DigestAuthenticator.randomCnonce) {
        self.makeCnonce = cnonce
    }

    /// 16 bytes from `SystemRandomNumberGenerator` (getrandom(2)), as 32 hex digits.
    public static func randomCnonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The `Authorization` (or `Proxy-Authorization`) value answering `challenge` for a
    /// request `method target` in `space`. A challenge with a new nonce restarts the nonce
    /// count at 1; the same nonce continues it. Throws for a challenge that is not a usable
    /// Digest challenge, or a target or qop that cannot be answered.
    public func authorization(
        responding challenge: HTTPAuthChallenge,
        in space: ProtectionSpace,
        credential: Credential,
        method: HTTPMethod,
        target: String,
        body: [UInt8]? = nil
    ) throws(AuthenticationError) -> String {
        let digest = try DigestChallenge(challenge)
        let count: UInt32 = self.states.withLock { states in
            var state = states[space]
            if state == nil || state!.challenge.nonce != digest.nonce || state!.nonceCount == .max {
                state = NonceState(challenge: digest, nonceCount: 0)
            }
            state!.challenge = digest
            state!.nonceCount += 1
            states[space] = state
            return state!.nonceCount
        }
        return try digest.authorizationValue(
            user: credential.user,
            password: credential.password,
            method: method,
            target: target,
            nonceCount: count,
            cnonce: self.makeCnonce(),
            body: body
        )
    }

    /// A pre-emptive `Authorization` value for a later request in `space`, reusing the last
    /// nonce with the next nonce count; nil when no challenge was answered in `space` yet,
    /// the count is exhausted, or the request cannot be answered without a new challenge.
    public func authorization(
        for space: ProtectionSpace,
        credential: Credential,
        method: HTTPMethod,
        target: String,
        body: [UInt8]? = nil
    ) -> String? {
        let next: (DigestChallenge, UInt32)? = self.states.withLock { states in
            guard var state = states[space], state.nonceCount < .max else { return nil }
            state.nonceCount += 1
            states[space] = state
            return (state.challenge, state.nonceCount)
        }
        guard let (challenge, count) = next else { return nil }
        return try? challenge.authorizationValue(
            user: credential.user,
            password: credential.password,
            method: method,
            target: target,
            nonceCount: count,
            cnonce: self.makeCnonce(),
            body: body
        )
    }

    /// The nonce count last used in `space` (nil when none).
    public func nonceCount(for space: ProtectionSpace) -> UInt32? {
        self.states.withLock { $0[space]?.nonceCount }
    }

    /// Forgets the nonce of `space` (after its credentials were rejected or removed).
    public func forget(_ space: ProtectionSpace) {
        _ = self.states.withLock { $0.removeValue(forKey: space) }
    }

    /// Forgets every nonce.
    public func removeAll() {
        self.states.withLock { $0.removeAll() }
    }
}

// MARK: - Loop breaking

/// Counts the 401/407 answers of one request so that the request path stops re-sending:
/// `record` after each challenge response, and re-send only on `.retry`.
///
/// A challenge to a request that carried no credentials is not a failure (it is the normal
/// first round). A challenge to a request that carried credentials is a failure, except a
/// Digest challenge with `stale=true` (the credentials were right, the nonce had expired),
/// which is allowed up to ``maximumStaleRetries`` times. Whatever the answers, the number
/// of rounds is bounded.
public struct AuthenticationAttempts: Sendable, Hashable {
    /// What to do after a challenge response.
    public enum Decision: Sendable, Hashable {
        /// Send the request again with (new) credentials.
        case retry
        /// Stop: deliver the 401/407 (or fail with `userAuthenticationRequired`).
        case giveUp
    }

    /// Rejected credential attempts that end the exchange: the request gives up at the
    /// `maximumFailures`-th rejection (with 1, rejected credentials are never re-sent).
    public var maximumFailures: Int
    /// `stale=true` rounds tolerated (they do not count as failures).
    public var maximumStaleRetries: Int
    /// Credential attempts rejected so far (NSURLAuthenticationChallenge.previousFailureCount).
    public private(set) var failureCount = 0
    /// `stale=true` rounds so far.
    public private(set) var staleRetries = 0
    /// Challenge responses recorded so far.
    public private(set) var rounds = 0

    /// Creates a counter for one request's authentication rounds; negative limits count as 0.
    ///
    /// - Parameters:
    ///   - maximumFailures: the rejection that ends the exchange (default 3).
    ///   - maximumStaleRetries: how many `stale=true` rounds are answered (default 3).
    public init(maximumFailures: Int = 3, maximumStaleRetries: Int = 3) {
        self.maximumFailures = max(0, maximumFailures)
        self.maximumStaleRetries = max(0, maximumStaleRetries)
    }

    /// Records one 401/407 response: the chosen `challenge` (nil when none could be
    /// answered) and whether the request that got it carried credentials.
    public mutating func record(_ challenge: HTTPAuthChallenge?, sentCredentials: Bool) -> Decision {
        self.rounds += 1
        guard let challenge else { return .giveUp }
        if self.rounds > self.maximumFailures + self.maximumStaleRetries + 1 { return .giveUp }
        guard sentCredentials else { return .retry }
        if challenge.hasScheme("Digest"), challenge[parameter: "stale"]?.lowercased() == "true",
            self.staleRetries < self.maximumStaleRetries
        {
            self.staleRetries += 1
            return .retry
        }
        self.failureCount += 1
        return self.failureCount < self.maximumFailures ? .retry : .giveUp
    }
}
