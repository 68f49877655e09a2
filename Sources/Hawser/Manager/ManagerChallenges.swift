// AFURLSessionManager's challenge delegate methods: the task's block, then the session's block,
// then the manager's security policy for server trust; everything else to the engine's default.
import HawserCore

/// The manager's session-level delegate (the NSURLSessionDelegate half of AFURLSessionManager):
/// answers the challenges a task left to default handling, and those that arrive with no task
/// waiting. Holds its manager weakly: the session keeps its delegate, the manager its session.
final class ManagerSessionDelegate: SessionDelegate, @unchecked Sendable {
    private struct Weak { weak var manager: SessionManager? }
    private let ref = Locked(Weak())

    var manager: SessionManager? {
        get { self.ref.withLock { $0.manager } }
        set { self.ref.withLock { $0.manager = newValue } }
    }

    func session(
        _ session: Session,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        guard let manager = self.manager else {
            completion(.performDefaultHandling)
            return
        }
        completion(manager.sessionDisposition(for: challenge))
    }

    /// The manager's security policy checks stapled OCSP (its evaluation needs the staple).
    func session(_ session: Session, requestsStapledOCSPForHost host: String) -> Bool {
        self.manager?.securityPolicy.revocation.requestsStapledOCSP ?? false
    }
}

extension SessionManager {
    /// AFURLSessionManager's `URLSession:task:didReceiveChallenge:completionHandler:`: the task
    /// block decides when set; with only a session block, the challenge goes on to the session
    /// delegate (which runs it); otherwise a server-trust challenge is decided by the policy and
    /// any other challenge gets the engine's default handling.
    func taskDisposition(for challenge: AuthenticationChallenge, task: SessionTask) -> ChallengeDisposition {
        let blocks = self.hooks.withLock {
            ($0.taskDidReceiveAuthenticationChallenge, $0.sessionDidReceiveAuthenticationChallenge)
        }
        if let taskBlock = blocks.0 { return taskBlock(task, challenge) }
        if blocks.1 != nil { return .performDefaultHandling }
        return self.policyDisposition(for: challenge)
    }

    /// AFURLSessionManager's `URLSession:didReceiveChallenge:completionHandler:`: the session
    /// block when set; otherwise the policy for server trust (a challenge with no task waiting,
    /// or one a task block deferred), and the engine's default for the rest.
    func sessionDisposition(for challenge: AuthenticationChallenge) -> ChallengeDisposition {
        if let block = self.hooks.withLock({ $0.sessionDidReceiveAuthenticationChallenge }) { return block(challenge) }
        return self.policyDisposition(for: challenge)
    }

    /// The security policy's verdict on a server-trust challenge, with the reason when it refuses
    /// (the engine turns it into `serverCertificateUntrusted`, -1202, with the chain).
    func policyDisposition(for challenge: AuthenticationChallenge) -> ChallengeDisposition {
        guard challenge.protectionSpace.authenticationMethod == .serverTrust, let trust = challenge.serverTrust else {
            return .performDefaultHandling
        }
        let policy = self.securityPolicy
        do throws(TrustFailure) {
            try policy.validateServerTrust(trust, forDomain: challenge.protectionSpace.host)
            return .useServerTrust
        } catch {
            return .refuseServerTrust(error)
        }
    }
}
