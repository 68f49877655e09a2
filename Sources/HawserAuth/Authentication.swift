// Authentication.swift: HTTP authentication as pure engine components.
//
//   HTTPAuthChallenge      WWW-Authenticate / Proxy-Authenticate parsing (RFC 9110 §11)
//   AuthenticationAttempts the loop breaker for repeated 401/407 answers
// and, in Credentials.swift:
//   ProtectionSpace        where a credential applies (host, port, URL scheme, realm, method, proxy)
//   Credential / CredentialStore   user + password, kept per protection space (thread-safe)
//   BasicAuthentication    RFC 7617
// and, in DigestAuthentication.swift:
//   DigestChallenge / DigestAuthenticator   RFC 7616 (MD5, SHA-256, SHA-512-256, their -sess forms)
//

import HawserHTTP1

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
