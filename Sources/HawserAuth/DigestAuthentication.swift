// RFC 7616 Digest: the challenge's parameters, the response computed with OpenSSL's digests, and
// the per-protection-space nonce counts.

import CHawser
import HawserHTTP1
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
