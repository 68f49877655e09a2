// Authentication challenges (NSURLAuthenticationChallenge's role): the server's TLS chain after
// a handshake, and 401/407 responses. The task's delegate is asked first; if it answers
// "perform default handling", the session's delegate is asked; if that one does too, the
// engine's default applies (the configuration's trust evaluator, or stored credentials).
import HawserAuth
import HawserHTTP1
import HawserTLS

/// A challenge a delegate may answer.
public struct AuthenticationChallenge: Sendable {
    /// Who asks: host, port, scheme, realm and method (`.serverTrust`, `.basic`, `.digest`, …).
    public var protectionSpace: ProtectionSpace
    /// For `.serverTrust`: the chain the server presented.
    public var serverTrust: ServerTrust?
    /// For 401/407: every challenge the server offered, in the order it sent them.
    public var httpChallenges: [HTTPAuthChallenge]
    /// How many times credentials for this challenge were already refused in this task.
    public var previousFailureCount: Int
    /// For 401/407: the response that carried the challenge.
    public var failureResponse: HTTPResponseHead?
    /// A credential the engine would use by default (from the credential store), if any.
    public var proposedCredential: Credential?

    /// Creates a challenge; the engine makes these, and tests make them to drive a delegate.
    /// Each parameter sets the property of the same name.
    public init(
        protectionSpace: ProtectionSpace,
        serverTrust: ServerTrust? = nil,
        httpChallenges: [HTTPAuthChallenge] = [],
        previousFailureCount: Int = 0,
        failureResponse: HTTPResponseHead? = nil,
        proposedCredential: Credential? = nil
    ) {
        self.protectionSpace = protectionSpace
        self.serverTrust = serverTrust
        self.httpChallenges = httpChallenges
        self.previousFailureCount = previousFailureCount
        self.failureResponse = failureResponse
        self.proposedCredential = proposedCredential
    }
}

/// How a challenge is answered (NSURLSessionAuthChallengeDisposition, with the credential).
public enum ChallengeDisposition: Sendable {
    /// Answer a 401/407 with this user and password.
    case useCredential(Credential)
    /// Trust the server's chain as presented (NSURLCredential(forTrust:)).
    case useServerTrust
    /// Refuse the server's chain for this reason: the task fails with
    /// `serverCertificateUntrusted` (-1202) carrying it.
    case refuseServerTrust(TrustFailure)
    /// Let the next in line decide: the session's delegate, then the engine's default.
    case performDefaultHandling
    /// Give up: the task fails with `cancelled` (401/407: `userCancelledAuthentication`).
    case cancelAuthenticationChallenge
    /// Decline this protection space: a trust challenge fails as untrusted; a 401/407 response
    /// is delivered as it is.
    case rejectProtectionSpace
}

/// Session-level callbacks (NSURLSessionDelegate's role).
public protocol SessionDelegate: AnyObject, Sendable {
    /// A challenge the task's delegate left to default handling. Call `completion` exactly
    /// once, from any thread. Default: `.performDefaultHandling`.
    func session(
        _ session: Session,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    )

    /// Whether the TLS handshake with `host` should ask the server to staple an OCSP response
    /// (for the server-trust challenge's `ServerTrust.stapledOCSPResponse`), besides when the
    /// configuration's evaluator or `TLSConfiguration.requestsStapledOCSP` asks. Called on the
    /// event loop before each handshake: be quick. Default: false.
    func session(_ session: Session, requestsStapledOCSPForHost host: String) -> Bool
}

extension SessionDelegate {
    /// No staple asked for.
    public func session(_ session: Session, requestsStapledOCSPForHost host: String) -> Bool { false }

    public func session(
        _ session: Session,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        completion(.performDefaultHandling)
    }
}
