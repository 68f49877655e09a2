// Where a credential applies and the credentials kept for it; RFC 7617 Basic.

import HawserHTTP1
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
