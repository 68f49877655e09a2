/// Setting up TLS failed before any byte reached a server: a context, a connection object or
/// the client's identity could not be made. (What a server does during a handshake is reported
/// by the client as a `HawserError`; certificate trust as a ``TrustFailure``.)
public struct TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What could not be set up.
    public enum Kind: Sendable, Hashable {
        /// The TLS context or connection: OpenSSL refused a setting (protocol range, cipher
        /// list) or ran out of resources.
        case setupFailed
        /// The client certificate or its private key: unreadable, mismatched, or the wrong password.
        case clientIdentity
    }

    /// What could not be set up.
    public var kind: Kind
    /// What OpenSSL said, with the file or setting concerned.
    public var message: String

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { self.message }
}
