// The task's part of 401/407 authentication, and its decisions without IO: the rounds per
// direction (the loop-breaker and previousFailureCount), the plan for a challenge (the challenge
// chosen, its protection space, the credential proposed by default), what a handler's disposition
// leads to, and the Authorization or Proxy-Authorization value of the request sent again. The
// shell asks the credential store and the handlers; ChallengeExchangeTests covers it without sockets.
import HawserAuth
import HawserBase
import HawserHTTP1

struct ChallengeExchange {
    /// 401 rounds of this task (nil until the first).
    var serverAttempts: AuthenticationAttempts?
    /// 407 rounds of this task (nil until the first).
    var proxyAttempts: AuthenticationAttempts?
    /// The 401/407 answer being decided.
    var pending: Plan?

    /// What answering a 401/407 needs: the challenge chosen, its protection space, and the
    /// credential proposed by default.
    struct Plan {
        var head: HTTPResponseHead
        var challenge: HTTPAuthChallenge
        var answerable: Bool
        var space: ProtectionSpace
        var isProxy: Bool
        var proposed: Credential?
        var authenticationChallenge: AuthenticationChallenge
    }

    /// Records the round and plans the answer; nil when the response is to be delivered as it
    /// is (nothing to answer with, a streamed body, or too many failures). `proxy`: the proxy
    /// the request goes through, its configured credentials; `store`: the credential store,
    /// consulted for the challenge's protection space.
    mutating func plan(
        _ head: HTTPResponseHead,
        _ challenges: [HTTPAuthChallenge],
        isProxy: Bool,
        request: HTTPClientRequest,
        maximumFailures: Int,
        proxy: (host: String, port: Int, credentials: (user: String, password: String)?)?,
        store: CredentialStore?
    ) -> Plan? {
        let chosen = HTTPAuthChallenge.strongest(of: challenges)
        let field = isProxy ? "Proxy-Authorization" : "Authorization"
        let sentCredentials = request.headers.contains(name: field)
        var attempts =
            (isProxy ? self.proxyAttempts : self.serverAttempts)
            ?? AuthenticationAttempts(maximumFailures: maximumFailures)
        let decision = attempts.record(chosen, sentCredentials: sentCredentials)
        if isProxy { self.proxyAttempts = attempts } else { self.serverAttempts = attempts }
        guard decision == .retry, let challenge = chosen ?? challenges.first,
            let originSpace = ProtectionSpace(url: request.url, challenge: challenge, isProxy: isProxy)
        else { return nil }
        // A proxy's protection space is the proxy's, not the origin's.
        let space = CredentialChoice.space(
            origin: originSpace,
            realm: challenge.realm,
            isProxy: isProxy,
            proxy: proxy.map { ($0.host, $0.port) }
        )
        if case .stream? = request.body { return nil }  // cannot be sent again
        let proposed = CredentialChoice.proposed(
            storedDefault: store?.defaultCredential(for: space),
            stored: store?.credentials(for: space) ?? [:],
            isProxy: isProxy,
            proxyCredentials: proxy?.credentials,
            urlUser: request.url.user(percentEncoded: false),
            urlPassword: request.url.password(percentEncoded: false),
            refused: sentCredentials && attempts.failureCount > 0,
            staleRetry: attempts.staleRetries > 0 && chosen?[parameter: "stale"]?.lowercased() == "true"
        )
        return Plan(
            head: head,
            challenge: challenge,
            answerable: chosen != nil,
            space: space,
            isProxy: isProxy,
            proposed: proposed,
            authenticationChallenge: AuthenticationChallenge(
                protectionSpace: space,
                httpChallenges: challenges,
                previousFailureCount: attempts.failureCount,
                failureResponse: head,
                proposedCredential: proposed
            )
        )
    }

    /// What a handler's `disposition` of `plan` leads to for `request`: sent again with a
    /// credential (the one given, or the proposed one by default when the challenge is
    /// answerable), the response delivered as it is, or a cancelled challenge's failure.
    static func decision(
        _ disposition: ChallengeDisposition,
        _ plan: Plan,
        request: HTTPClientRequest,
        digest: DigestAuthenticator
    ) -> RequestStateMachine.Decision {
        switch disposition {
        case .useCredential(let credential):
            return Self.answer(plan, credential, request: request, digest: digest)
        case .performDefaultHandling:
            guard plan.answerable, let credential = plan.proposed else { return .deliver }
            return Self.answer(plan, credential, request: request, digest: digest)
        case .cancelAuthenticationChallenge:
            return .fail(
                HawserError(
                    .userCancelledAuthentication,
                    "the \(plan.head.status) challenge from \(plan.space.host) was cancelled by its handler",
                    url: request.url
                )
            )
        case .rejectProtectionSpace, .useServerTrust, .refuseServerTrust:
            return .deliver
        }
    }

    /// The request again with credentials for the challenge (Basic or Digest); a credential that
    /// cannot be encoded fails the task with the reason; an unknown scheme delivers the response.
    static func answer(
        _ plan: Plan,
        _ credential: Credential,
        request: HTTPClientRequest,
        digest: DigestAuthenticator
    ) -> RequestStateMachine.Decision {
        let value: String
        do throws(AuthenticationError) {
            if plan.challenge.hasScheme("Digest") {
                var target = request.url.path(percentEncoded: true)
                if target.isEmpty { target = "/" }
                if let q = request.url.query(percentEncoded: true) { target += "?" + q }
                // qop=auth-int hashes the body: a request without one has an empty body.
                var body: [UInt8]? = nil
                switch request.body {
                case nil: body = []
                case .bytes(let b)?: body = b
                case .stream?: body = nil
                }
                value = try digest.authorization(
                    responding: plan.challenge,
                    in: plan.space,
                    credential: credential,
                    method: request.method,
                    target: target,
                    body: body
                )
            } else if plan.challenge.hasScheme("Basic") {
                value = try BasicAuthentication.authorizationValue(for: credential)
            } else {
                return .deliver
            }
        } catch {
            return .fail(
                HawserError(
                    .userAuthenticationRequired,
                    "cannot answer the \(plan.challenge.scheme) challenge of \(plan.space.host): \(error)",
                    url: request.url,
                    underlying: error
                )
            )
        }
        var again = request
        again.headers.replaceOrAdd(name: plan.isProxy ? "Proxy-Authorization" : "Authorization", value: value)
        return .followUp(again, countsAsRedirect: false)
    }
}
