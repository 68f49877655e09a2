// The 401/407 part of a task without sockets: the plan for a challenge (rounds per direction,
// the protection space, the credential proposed, a streamed body, too many failures), what each
// handler disposition leads to, and the Authorization or Proxy-Authorization value of the request
// sent again (Basic, Digest, an unknown scheme, a credential that cannot be encoded).
// AuthenticationNetworkTests covers the same paths end to end.
import Foundation
import HawserAuth
import HawserHTTP1
import Testing

@testable import HawserCore

@Suite("Challenge exchange (pure)")
struct ChallengeExchangeTests {
    static let url = URL(string: "http://a.test/page?q=1")!
    static var request: HTTPClientRequest { HTTPClientRequest(url: Self.url) }
    static let basic = HTTPAuthChallenge(scheme: "Basic", parameters: [.init(name: "realm", value: "r")])
    static let digest = HTTPAuthChallenge(
        scheme: "Digest",
        parameters: [
            .init(name: "realm", value: "r"), .init(name: "nonce", value: "n1"), .init(name: "qop", value: "auth"),
        ]
    )
    static let alice = Credential(user: "alice", password: "a", persistence: .none)

    static func head(_ status: Int) -> HTTPResponseHead { HTTPResponseHead(status: status, headers: HTTPHeaders()) }

    static func plan(
        _ exchange: inout ChallengeExchange,
        _ challenges: [HTTPAuthChallenge] = [Self.basic],
        status: Int = 401,
        request: HTTPClientRequest = Self.request,
        maximumFailures: Int = 3,
        proxy: (host: String, port: Int, credentials: (user: String, password: String)?)? = nil,
        store: CredentialStore? = nil
    ) -> ChallengeExchange.Plan? {
        exchange.plan(
            Self.head(status),
            challenges,
            isProxy: status == 407,
            request: request,
            maximumFailures: maximumFailures,
            proxy: proxy,
            store: store
        )
    }

    static func word(_ d: RequestStateMachine.Decision) -> String {
        switch d {
        case .deliver: return "deliver"
        case .followUp(let r, let counts):
            let field =
                r.headers["Authorization"].map { "Authorization: \($0)" }
                ?? r.headers["Proxy-Authorization"].map { "Proxy-Authorization: \($0)" } ?? "none"
            return "followUp(\(field), counts:\(counts))"
        case .needBodyStream: return "needBodyStream"
        case .fail(let e): return "fail(\(e.code))"
        }
    }

    @Test("A 401: the origin's space, no credential proposed without one, the round recorded for the origin only")
    func originPlan() throws {
        var exchange = ChallengeExchange()
        let planned1 = Self.plan(&exchange)
        let plan = try #require(planned1)
        #expect(plan.space.host == "a.test")
        #expect(plan.space.realm == "r")
        #expect(!plan.isProxy)
        #expect(plan.answerable)
        #expect(plan.proposed == nil)
        #expect(plan.authenticationChallenge.previousFailureCount == 0)
        #expect(exchange.serverAttempts?.rounds == 1)
        #expect(exchange.proxyAttempts == nil)
    }

    @Test("A 401 proposes the store's default credential for its space, then the URL's user info")
    func proposedFromStoreAndURL() throws {
        let store = CredentialStore()
        var exchange = ChallengeExchange()
        let planned2 = Self.plan(&exchange)
        let space = try #require(planned2).space
        #expect(store.setDefault(Credential(user: "alice", password: "a", persistence: .forSession), for: space))
        var fresh = ChallengeExchange()
        let stored = Self.plan(&fresh, store: store)
        #expect(stored?.proposed?.user == "alice")
        var withUser = ChallengeExchange()
        let userURL = HTTPClientRequest(url: URL(string: "http://bob:pw@a.test/page")!)
        let fromURL = Self.plan(&withUser, request: userURL)
        #expect(fromURL?.proposed?.user == "bob")
    }

    @Test("A 407 through a proxy: the proxy's space and its configured credentials, recorded as a proxy round")
    func proxyPlan() throws {
        var exchange = ChallengeExchange()
        let planned3 = Self.plan(
            &exchange,
            status: 407,
            proxy: (host: "proxy.test", port: 3128, credentials: ("p", "pw"))
        )
        let plan = try #require(planned3)
        #expect(plan.isProxy)
        #expect(plan.space.host == "proxy.test")
        #expect(plan.space.port == 3128)
        #expect(plan.proposed?.user == "p")
        #expect(exchange.proxyAttempts?.rounds == 1)
        #expect(exchange.serverAttempts == nil)
    }

    @Test("No plan for a streamed body (it cannot be sent again) or after too many refused credentials")
    func noPlan() {
        var exchange = ChallengeExchange()
        var streamed = Self.request
        streamed.body = .stream(length: nil, producer: { _ in })
        let streamedPlan = Self.plan(&exchange, request: streamed)
        #expect(streamedPlan == nil)
        #expect(exchange.serverAttempts?.rounds == 1, "the round counts even so")

        var refused = ChallengeExchange()
        var sent = Self.request
        sent.headers.replaceOrAdd(name: "Authorization", value: "Basic eDp5")
        let refusedPlan = Self.plan(&refused, request: sent, maximumFailures: 1)
        #expect(refusedPlan == nil)
    }

    @Test("Dispositions: a credential, the default answer with and without a proposal, cancel, reject")
    func dispositions() throws {
        var exchange = ChallengeExchange()
        let planned4 = Self.plan(&exchange)
        let plan = try #require(planned4)
        let digest = DigestAuthenticator(cnonce: { "c" })
        func decide(_ d: ChallengeDisposition, _ p: ChallengeExchange.Plan = plan) -> String {
            Self.word(ChallengeExchange.decision(d, p, request: Self.request, digest: digest))
        }
        #expect(decide(.useCredential(Self.alice)) == "followUp(Authorization: Basic YWxpY2U6YQ==, counts:false)")
        #expect(decide(.performDefaultHandling) == "deliver", "nothing proposed")
        var proposed = plan
        proposed.proposed = Self.alice
        #expect(
            decide(.performDefaultHandling, proposed) == "followUp(Authorization: Basic YWxpY2U6YQ==, counts:false)"
        )
        var unanswerable = proposed
        unanswerable.answerable = false
        #expect(decide(.performDefaultHandling, unanswerable) == "deliver")
        #expect(decide(.cancelAuthenticationChallenge) == "fail(userCancelledAuthentication)")
        #expect(decide(.rejectProtectionSpace) == "deliver")
    }

    @Test("Answers: Proxy-Authorization for a 407, Digest over the request target, unknown scheme, bad credential")
    func answers() throws {
        let digest = DigestAuthenticator(cnonce: { "c" })
        var exchange = ChallengeExchange()
        let planned5 = Self.plan(&exchange, status: 407, proxy: (host: "proxy.test", port: 3128, credentials: nil))
        let proxy = try #require(planned5)
        #expect(
            Self.word(ChallengeExchange.answer(proxy, Self.alice, request: Self.request, digest: digest))
                == "followUp(Proxy-Authorization: Basic YWxpY2U6YQ==, counts:false)"
        )

        var d = ChallengeExchange()
        let planned6 = Self.plan(&d, [Self.digest])
        let digestPlan = try #require(planned6)
        guard
            case .followUp(let again, false) = ChallengeExchange.answer(
                digestPlan,
                Self.alice,
                request: Self.request,
                digest: digest
            )
        else {
            Issue.record("a Digest answer is a follow-up")
            return
        }
        let value = try #require(again.headers["Authorization"])
        #expect(value.hasPrefix("Digest "))
        #expect(value.contains("username=\"alice\""))
        #expect(value.contains("uri=\"/page?q=1\""))

        var u = ChallengeExchange()
        let planned7 = Self.plan(&u)
        var unknown = try #require(planned7)
        unknown.challenge = HTTPAuthChallenge(scheme: "Negotiate")
        #expect(
            Self.word(ChallengeExchange.answer(unknown, Self.alice, request: Self.request, digest: digest)) == "deliver"
        )

        var b = ChallengeExchange()
        let planned8 = Self.plan(&b)
        let basicPlan = try #require(planned8)
        let colon = Credential(user: "a:b", password: "x", persistence: .none)
        #expect(
            Self.word(ChallengeExchange.answer(basicPlan, colon, request: Self.request, digest: digest))
                == "fail(userAuthenticationRequired)"
        )
    }
}
