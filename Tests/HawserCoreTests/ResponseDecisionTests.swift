// The request path's decisions as pure functions, without sockets: a final head's class (the
// 417 retry, a 401/407 challenge, a redirect given or refused by the rules, delivery), the 206
// rule for content decoding, the credential proposed for a challenge and its protection space,
// and the cache's answers (a lookup under each policy, a delivered head: 304, invalidation,
// recording). The sockets-and-servers suites (RedirectTests, AuthenticationNetworkTests,
// CacheNetworkTests, ExpectContinueTests, DecodingNetworkTests) cover the same paths end to end.
import Foundation
import HawserAuth
import HawserCache
import HawserHTTP1
import Testing

@testable import HawserCore

@Suite("Response decisions (pure)")
struct ResponseDecisionTests {
    static let url = URL(string: "http://a.test/page")!
    static var request: HTTPClientRequest { HTTPClientRequest(url: Self.url) }

    static func head(_ status: Int, _ fields: [(name: String, value: String)] = []) -> HTTPResponseHead {
        HTTPResponseHead(status: status, headers: HTTPHeaders(fields))
    }

    static func kind(_ c: ResponseClassification.Class) -> String {
        switch c {
        case .head(let k): return Self.word(k)
        case .challenge(let isProxy, let challenges, let otherwise):
            return "challenge(\(isProxy ? "proxy" : "origin"),\(challenges.count),otherwise:\(Self.word(otherwise)))"
        }
    }

    static func word(_ k: RequestStateMachine.HeadKind) -> String {
        switch k {
        case .deliver: return "deliver"
        case .retryWithoutExpectation: return "retryWithoutExpectation"
        case .redirect(let next): return "redirect(\(next.url.absoluteString))"
        case .challenge: return "challenge"
        case .failure(let e): return "failure(\(e.code))"
        }
    }

    static func classify(
        _ head: HTTPResponseHead,
        request: HTTPClientRequest = Self.request,
        withheld: Bool = false,
        redirectsSoFar: Int = 0,
        redirects: RedirectConfiguration = RedirectConfiguration()
    ) -> ResponseClassification.Class {
        ResponseClassification.classify(
            head,
            request: request,
            bodyWasWithheld: withheld,
            redirectsSoFar: redirectsSoFar,
            redirects: redirects
        )
    }

    // MARK: - Classification

    @Test("a 101: a protocol error that names the peer, the 101 and its Upgrade, and whether the request asked for it")
    func switchingProtocols() {
        let head = Self.head(101, [("Upgrade", "websocket")])
        let unasked = ResponseClassification.switchingProtocolsError(head, request: Self.request, peer: "a.test:80")
        #expect(unasked.code == .protocolError)
        #expect(
            unasked.message
                == "a.test:80 answered 101 Switching Protocols to 'websocket': the request asked for no upgrade"
        )
        var asking = Self.request
        asking.headers.replaceOrAdd(name: "Upgrade", value: "websocket")
        let asked = ResponseClassification.switchingProtocolsError(Self.head(101), request: asking, peer: "p")
        #expect(
            asked.message
                == "p answered 101 Switching Protocols: the request asked for an upgrade, but Hawser speaks HTTP/1.1 only and cannot switch"
        )
    }

    @Test("417 to a withheld body: retried without the expectation and without Expect; otherwise delivered")
    func expectationFailed() {
        var request = Self.request
        request.method = .post
        request.body = .bytes([1, 2, 3])
        request.expectsContinue = true
        request.headers.replaceOrAdd(name: "Expect", value: "100-continue")
        guard
            case .head(.retryWithoutExpectation(let again)) = Self.classify(
                Self.head(417),
                request: request,
                withheld: true
            )
        else {
            Issue.record("not a retry")
            return
        }
        #expect(again.expectsContinue == false)
        #expect(!again.headers.contains(name: "Expect"))
        #expect(again.body != nil && again.method == .post, "the same request otherwise")
        #expect(
            Self.kind(Self.classify(Self.head(417), request: request, withheld: false)) == "deliver",
            "the body went: a plain 417"
        )
    }

    @Test("a redirect the rules give is proposed; one past the limit or without Location is refused or delivered")
    func redirects() {
        let found = Self.head(302, [("Location", "/there")])
        #expect(Self.kind(Self.classify(found)) == "redirect(http://a.test/there)")
        var max = RedirectConfiguration()
        max.maximumRedirects = 2
        #expect(Self.kind(Self.classify(found, redirectsSoFar: 2, redirects: max)) == "failure(tooManyRedirects)")
        #expect(Self.kind(Self.classify(Self.head(302))) == "deliver", "no Location: the response itself")
        var off = RedirectConfiguration()
        off.followsRedirects = false
        #expect(Self.kind(Self.classify(found, redirects: off)) == "deliver")
        #expect(Self.kind(Self.classify(Self.head(200))) == "deliver")
    }

    @Test("401/407 with challenges: a challenge for the origin or the proxy; without any, delivered")
    func challenges() {
        let basic = Self.head(401, [("WWW-Authenticate", "Basic realm=\"r\"")])
        #expect(Self.kind(Self.classify(basic)) == "challenge(origin,1,otherwise:deliver)")
        let proxy = Self.head(
            407,
            [("Proxy-Authenticate", "Basic realm=\"p\""), ("Proxy-Authenticate", "Digest realm=\"p\", nonce=\"n\"")]
        )
        #expect(Self.kind(Self.classify(proxy)) == "challenge(proxy,2,otherwise:deliver)")
        #expect(Self.kind(Self.classify(Self.head(401))) == "deliver", "nothing to answer")
        let wrongField = Self.head(407, [("WWW-Authenticate", "Basic realm=\"r\"")])
        #expect(Self.kind(Self.classify(wrongField)) == "deliver", "a 407 answers Proxy-Authenticate only")
    }

    // MARK: - The 206 rule

    @Test(
        "content decoding: a coded body is decoded; a coded 206 is refused; HEAD, 204, 304 and identity are not decoded"
    )
    func decoding() {
        let gzip = [(name: "Content-Encoding", value: "gzip")]
        #expect(BodyDecoding.plan(for: Self.head(200, gzip), method: .get, automatic: true) == .decode("gzip"))
        let partial = BodyDecoding.plan(for: Self.head(206, gzip), method: .get, automatic: true)
        guard case .refuse(let e) = partial else {
            Issue.record("a coded 206 was not refused: \(partial)")
            return
        }
        #expect(e.code == .cannotDecodeContent)
        #expect(e.message.contains("206"))
        #expect(
            BodyDecoding.plan(for: Self.head(206), method: .get, automatic: true) == .identity,
            "an identity 206 is fine"
        )
        #expect(BodyDecoding.plan(for: Self.head(200, gzip), method: .head, automatic: true) == .identity)
        #expect(BodyDecoding.plan(for: Self.head(204, gzip), method: .get, automatic: true) == .identity)
        #expect(BodyDecoding.plan(for: Self.head(304, gzip), method: .get, automatic: true) == .identity)
        #expect(BodyDecoding.plan(for: Self.head(200, gzip), method: .get, automatic: false) == .identity)
        #expect(
            BodyDecoding.plan(for: Self.head(206, gzip), method: .get, automatic: false) == .identity,
            "not decoding: nothing to refuse"
        )
        #expect(
            BodyDecoding.plan(for: Self.head(200, [("Content-Encoding", "x-unknown")]), method: .get, automatic: true)
                == .identity
        )
    }

    // MARK: - The credential choice

    static let alice = Credential(user: "alice", password: "a", persistence: .forSession)
    static let bob = Credential(user: "bob", password: "b", persistence: .forSession)

    static func propose(
        storedDefault: Credential? = nil,
        stored: [String: Credential] = [:],
        isProxy: Bool = false,
        proxyCredentials: (user: String, password: String)? = nil,
        urlUser: String? = nil,
        urlPassword: String? = nil,
        refused: Bool = false,
        staleRetry: Bool = false
    ) -> String? {
        CredentialChoice.proposed(
            storedDefault: storedDefault,
            stored: stored,
            isProxy: isProxy,
            proxyCredentials: proxyCredentials,
            urlUser: urlUser,
            urlPassword: urlPassword,
            refused: refused,
            staleRetry: staleRetry
        ).map { "\($0.user):\($0.password)" }
    }

    @Test("the proposed credential: the store's default, else its only one, else the proxy's or the URL's")
    func proposedCredential() {
        #expect(Self.propose(storedDefault: Self.bob, stored: ["alice": Self.alice, "bob": Self.bob]) == "bob:b")
        #expect(Self.propose(stored: ["alice": Self.alice]) == "alice:a", "the only one")
        #expect(Self.propose(stored: ["alice": Self.alice, "bob": Self.bob]) == nil, "two and no default: none")
        #expect(Self.propose(stored: ["alice": Self.alice], urlUser: "u") == "alice:a", "the store first")
        #expect(Self.propose(urlUser: "u", urlPassword: "p") == "u:p")
        #expect(Self.propose(urlUser: "u") == "u:", "a user without a password")
        #expect(Self.propose(isProxy: true, urlUser: "u") == nil, "the URL's user info is the origin's")
        #expect(Self.propose(isProxy: true, proxyCredentials: ("proxy", "pw")) == "proxy:pw")
        #expect(Self.propose(isProxy: false, proxyCredentials: ("proxy", "pw")) == nil, "the proxy's are the proxy's")
    }

    @Test("a credential the server refused is not proposed again, unless it asked again for a stale nonce")
    func refusedCredential() {
        #expect(Self.propose(stored: ["alice": Self.alice], refused: true) == nil)
        #expect(Self.propose(urlUser: "u", refused: true) == nil)
        #expect(Self.propose(stored: ["alice": Self.alice], refused: true, staleRetry: true) == "alice:a")
    }

    @Test("the protection space: the origin's, or for a 407 through a proxy, the proxy's host and port")
    func space() throws {
        let challenge = HTTPAuthChallenge(scheme: "Basic", parameters: [.init(name: "realm", value: "r")])
        let origin = try #require(ProtectionSpace(url: Self.url, challenge: challenge))
        let same = CredentialChoice.space(origin: origin, realm: "r", isProxy: false, proxy: ("proxy.test", 3128))
        #expect(same.host == "a.test" && !same.isProxy)
        let proxied = CredentialChoice.space(origin: origin, realm: "p", isProxy: true, proxy: ("Proxy.Test", 3128))
        #expect(proxied.host == "proxy.test" && proxied.port == 3128 && proxied.isProxy)
        #expect(proxied.realm == "p")
        let direct = CredentialChoice.space(origin: origin, realm: "r", isProxy: true, proxy: nil)
        #expect(direct.host == "a.test", "no proxy configured: the space the challenge names")
    }

    // MARK: - The cache exchange

    static let stored = CachedResponse(
        head: Self.head(200),
        body: [1, 2, 3],
        requestTime: Date(),
        responseTime: Date()
    )

    static func answer(_ lookup: CacheLookup, _ policy: CachePolicy) -> String {
        switch CacheExchange.answer(lookup, policy: policy, url: Self.url) {
        case .serve: return "serve"
        case .revalidate(_, let conditions): return "revalidate(\(conditions["If-None-Match"] ?? "-"))"
        case .refuse(let e): return "refuse(\(e.code))"
        case .network: return "network"
        }
    }

    @Test(
        "a lookup: fresh is served; stale is revalidated, or served when the policy prefers the cache; a miss goes out or is refused"
    )
    func lookupAnswers() {
        let stale = CacheLookup.stale(Self.stored, conditionalHeaders: ["If-None-Match": "\"e\""])
        #expect(Self.answer(.fresh(Self.stored), .useProtocolCachePolicy) == "serve")
        #expect(Self.answer(stale, .useProtocolCachePolicy) == "revalidate(\"e\")")
        #expect(Self.answer(stale, .returnCacheDataElseLoad) == "serve")
        #expect(Self.answer(stale, .returnCacheDataDontLoad) == "serve")
        #expect(Self.answer(.miss, .useProtocolCachePolicy) == "network")
        #expect(Self.answer(.miss, .returnCacheDataElseLoad) == "network")
        #expect(Self.answer(.miss, .returnCacheDataDontLoad) == "refuse(resourceUnavailable)")
    }

    @Test(
        "a delivered head: a 304 to a revalidation serves the stored one; unsafe methods invalidate; storable responses are recorded"
    )
    func headPlans() {
        let fresh = Self.head(200, [("Cache-Control", "max-age=60")])
        #expect(
            CacheExchange.plan(
                for: Self.head(304),
                request: Self.request,
                policy: .useProtocolCachePolicy,
                hasCandidate: true
            ) == .serveRevalidated
        )
        #expect(
            CacheExchange.plan(
                for: Self.head(304),
                request: Self.request,
                policy: .useProtocolCachePolicy,
                hasCandidate: false
            ) != .serveRevalidated,
            "a 304 nobody asked for"
        )
        var post = Self.request
        post.method = .post
        #expect(
            CacheExchange.plan(for: fresh, request: post, policy: .useProtocolCachePolicy, hasCandidate: false)
                == .invalidate
        )
        #expect(
            CacheExchange.plan(for: fresh, request: Self.request, policy: .useProtocolCachePolicy, hasCandidate: false)
                == .record
        )
        #expect(
            CacheExchange.plan(for: fresh, request: Self.request, policy: .returnCacheDataDontLoad, hasCandidate: false)
                == .none
        )
        let noStore = Self.head(200, [("Cache-Control", "no-store")])
        #expect(
            CacheExchange.plan(
                for: noStore,
                request: Self.request,
                policy: .useProtocolCachePolicy,
                hasCandidate: false
            ) == .none
        )
    }

    @Test(
        "recording: a decoded body is stored without its coding; a known length reserves its room; past the limit it is dropped"
    )
    func recording() {
        let coded = Self.head(200, [("Content-Encoding", "gzip"), ("Content-Length", "10")])
        let decoded = CacheExchange.recordingStart(coded, decoded: true, maximumEntrySize: 100)
        #expect(
            !decoded.head.headers.contains(name: "Content-Encoding")
                && !decoded.head.headers.contains(name: "Content-Length")
        )
        #expect(decoded.capacity == 0)
        let plain = CacheExchange.recordingStart(
            Self.head(200, [("Content-Length", "10")]),
            decoded: false,
            maximumEntrySize: 100
        )
        #expect(plain.capacity == 10)
        #expect(
            CacheExchange.recordingStart(
                Self.head(200, [("Content-Length", "1000")]),
                decoded: false,
                maximumEntrySize: 100
            ).capacity == 0
        )

        var exchange = CacheExchange()
        exchange.recording = CacheExchange.Recording(head: Self.head(200), body: [], requestTime: Date())
        [UInt8](repeating: 1, count: 6).withUnsafeBytes { exchange.record($0, maximumEntrySize: 10) }
        #expect(exchange.recording?.body.count == 6)
        [UInt8](repeating: 2, count: 5).withUnsafeBytes { exchange.record($0, maximumEntrySize: 10) }
        #expect(exchange.recording == nil, "too large to be kept: the recording stops")
    }
}
