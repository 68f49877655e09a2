import Foundation
import HawserCore
import Testing

@Suite("Authentication")
struct AuthenticationTests {
    // MARK: - Challenge parsing

    struct ParseCase: Sendable, CustomStringConvertible {
        var field: String
        /// scheme, params as "name=value", token68
        var expected: [(String, [String], String?)]
        var description: String { self.field }
    }

    static let parseCases: [ParseCase] = [
        .init(field: #"Basic realm="simple""#, expected: [("Basic", ["realm=simple"], nil)]),
        // RFC 9110 §11.6.1's example: two challenges in one field, an escaped quote.
        .init(
            field: #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
            expected: [
                ("Newauth", ["realm=apps", "type=1", #"title=Login to "apps""#], nil), ("Basic", ["realm=simple"], nil),
            ]
        ),
        .init(
            field: #"Basic realm="simple", Newauth realm="apps", type=1"#,
            expected: [("Basic", ["realm=simple"], nil), ("Newauth", ["realm=apps", "type=1"], nil)]
        ),
        // RFC 7616 §3.9.1's challenge, as folded onto one line.
        .init(
            field:
                #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#,
            expected: [
                (
                    "Digest",
                    [
                        "realm=http-auth@example.org", "qop=auth, auth-int", "algorithm=SHA-256",
                        "nonce=7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
                        "opaque=FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS",
                    ], nil
                )
            ]
        ),
        .init(
            field: "Negotiate YIIB8wYGKwYBBQUCoIIB5zCCAeOgJDAi==",
            expected: [("Negotiate", [], "YIIB8wYGKwYBBQUCoIIB5zCCAeOgJDAi==")]
        ),
        .init(
            field: "Negotiate a+b/c=, Basic realm=x",
            expected: [("Negotiate", [], "a+b/c="), ("Basic", ["realm=x"], nil)]
        ),
        .init(field: "Basic, Bearer", expected: [("Basic", [], nil), ("Bearer", [], nil)]),
        .init(field: #" , ,Basic realm="x" ,, "#, expected: [("Basic", ["realm=x"], nil)]),
        .init(field: #"bAsIc REALM="Mixed""#, expected: [("bAsIc", ["realm=Mixed"], nil)]),
        .init(
            field: "Basic realm = \"bws\" ,\tcharset = UTF-8",
            expected: [("Basic", ["realm=bws", "charset=UTF-8"], nil)]
        ),
        .init(field: #"Basic realm="a\\b\"c""#, expected: [("Basic", [#"realm=a\b"c"#], nil)]),
        .init(field: #"Basic realm="""#, expected: [("Basic", ["realm="], nil)]),
        .init(field: #"Basic realm="comma, inside""#, expected: [("Basic", ["realm=comma, inside"], nil)]),
        .init(field: "", expected: []),
        .init(
            field: "Bearer error=invalid_token, Basic realm=r",
            expected: [("Bearer", ["error=invalid_token"], nil), ("Basic", ["realm=r"], nil)]
        ),
    ]

    @Test("challenge fields parse", arguments: parseCases)
    func parse(_ c: ParseCase) throws {
        let challenges = try HTTPAuthChallenge.parse(fieldValue: c.field)
        #expect(challenges.count == c.expected.count)
        for (challenge, expected) in zip(challenges, c.expected) {
            #expect(challenge.scheme == expected.0)
            #expect(challenge.parameters.map { "\($0.name)=\($0.value)" } == expected.1)
            #expect(challenge.token68 == expected.2)
        }
    }

    static let malformed: [(String, AuthenticationError.Kind)] = [
        (#"Basic realm="unterminated"#, .malformedChallenge),
        (#"Basic realm="x" junk"#, .malformedChallenge),
        (#""Basic""#, .malformedChallenge),
        (#"Basic"realm""#, .malformedChallenge),
        (#"Basic realm="a", REALM="b""#, .malformedChallenge),
        ("Basic realm=\"a\u{01}b\"", .malformedChallenge),
        ("Basic realm=x=y", .malformedChallenge),
        ("Basic realm=, charset=x", .malformedChallenge),
        ("Basic realm=\"x\", =y", .malformedChallenge),
        (#"Basic realm="x\"#, .malformedChallenge),
    ]

    @Test("malformed or oversized challenge fields give a typed error", arguments: malformed)
    func parseMalformed(_ field: String, _ kind: AuthenticationError.Kind) {
        #expect {
            try HTTPAuthChallenge.parse(fieldValue: field)
        } throws: { ($0 as? AuthenticationError)?.kind == kind }
    }

    @Test("oversized fields, too many parameters or challenges hit the parser's bounds")
    func parseBounds() throws {
        let fields = [
            "Basic " + String(repeating: "a", count: HTTPAuthChallenge.maximumFieldLength),
            "X " + (0...HTTPAuthChallenge.maximumParameters).map { "p\($0)=1" }.joined(separator: ", "),
            (0...HTTPAuthChallenge.maximumChallenges).map { _ in "Basic" }.joined(separator: ", "),
        ]
        for field in fields {
            #expect { try HTTPAuthChallenge.parse(fieldValue: field) } throws: {
                ($0 as? AuthenticationError)?.kind == .limitExceeded
            }
        }
        // Exactly at the bounds is fine.
        #expect(
            try HTTPAuthChallenge.parse(
                fieldValue: "X " + (1...HTTPAuthChallenge.maximumParameters).map { "p\($0)=1" }.joined(separator: ", ")
            )[0].parameters.count == HTTPAuthChallenge.maximumParameters
        )
        #expect(
            try HTTPAuthChallenge.parse(
                fieldValue: (1...HTTPAuthChallenge.maximumChallenges).map { _ in "Basic" }.joined(separator: ", ")
            ).count == HTTPAuthChallenge.maximumChallenges
        )
    }

    @Test("challenges are collected across fields; a malformed field keeps what came before its error")
    func parseHeaders() {
        let headers: HTTPHeaders = HTTPHeaders([
            (name: "WWW-Authenticate", value: #"Basic realm="one""#),
            (name: "Proxy-Authenticate", value: #"Basic realm="proxy""#),
            (name: "www-authenticate", value: #"Digest realm="two", nonce="n", Bearer realm="broken"#),
            (name: "WWW-Authenticate", value: "Negotiate"),
        ])
        let server = HTTPAuthChallenge.parse(headers, proxy: false)
        #expect(server.map(\.scheme) == ["Basic", "Digest", "Negotiate"])
        #expect(server[1][parameter: "NONCE"] == "n")
        let proxy = HTTPAuthChallenge.parse(headers, proxy: true)
        #expect(proxy.map(\.realm) == ["proxy"])
    }

    @Test("the strongest answerable challenge is chosen")
    func strongest() throws {
        func pick(_ field: String) throws -> String? {
            HTTPAuthChallenge.strongest(of: try HTTPAuthChallenge.parse(fieldValue: field)).map(\.description)
        }
        #expect(
            try pick(
                #"Basic realm="b", Digest realm="d", nonce="1", Digest realm="d", nonce="2", algorithm=SHA-256, Bearer"#
            )
                == #"Digest realm="d", nonce="2", algorithm="SHA-256""#
        )
        #expect(
            try pick(#"Digest realm="d", nonce="1", algorithm=MD5-sess, Basic realm="b""#)?.hasPrefix("Digest") == true
        )
        #expect(try pick(#"Digest realm="d", nonce="1", algorithm=SHA-1024, Basic realm="b""#) == #"Basic realm="b""#)
        #expect(try pick(#"Digest realm="d", nonce="1", qop="auth-conf", Basic realm="b""#) == #"Basic realm="b""#)
        #expect(try pick(#"Digest nonce="no realm", Bearer"#) == nil)
        #expect(try pick(#"Basic realm="first", Basic realm="second""#) == #"Basic realm="first""#)
    }

    // MARK: - Basic

    @Test("Basic follows RFC 7617's examples")
    func basic() throws {
        #expect(
            try BasicAuthentication.authorizationValue(user: "Aladdin", password: "open sesame")
                == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        )
        // §2.1: user "test", password "123£" with charset=UTF-8.
        #expect(
            try BasicAuthentication.authorizationValue(user: "test", password: "123\u{A3}") == "Basic dGVzdDoxMjPCow=="
        )
        #expect(try BasicAuthentication.authorizationValue(for: Credential(user: "", password: "")) == "Basic Og==")
        #expect { try BasicAuthentication.authorizationValue(user: "a:b", password: "c") } throws: {
            ($0 as? AuthenticationError)?.kind == .invalidCredential
        }
        #expect { try BasicAuthentication.authorizationValue(user: "a", password: "b\r\nX-Injected: 1") } throws: {
            ($0 as? AuthenticationError)?.kind == .invalidCredential
        }
    }

    // MARK: - Digest

    static let rfc7616Challenge =
        #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=ALGO, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#
    static let rfcCnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"

    static func rfcChallenge(_ algorithm: String) throws -> DigestChallenge {
        try DigestChallenge(
            try HTTPAuthChallenge.parse(fieldValue: rfc7616Challenge.replacingOccurrences(of: "ALGO", with: algorithm))[
                0
            ]
        )
    }

    static func field(_ value: String, _ name: String) -> String? {
        // The Authorization value is itself a challenge-shaped credentials field.
        let parsed = try? HTTPAuthChallenge.parse(fieldValue: value)
        return parsed?.first?[parameter: name]
    }

    @Test("Digest MD5 and SHA-256 reproduce RFC 7616 §3.9.1")
    func rfc7616WorkedExample() throws {
        for (algorithm, expected) in [
            ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
            ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
        ] {
            let value = try Self.rfcChallenge(algorithm).authorizationValue(
                user: "Mufasa",
                password: "Circle of Life",
                method: .get,
                target: "/dir/index.html",
                nonceCount: 1,
                cnonce: Self.rfcCnonce
            )
            #expect(value.hasPrefix("Digest "))
            #expect(Self.field(value, "response") == expected)
            #expect(Self.field(value, "username") == "Mufasa")
            #expect(Self.field(value, "realm") == "http-auth@example.org")
            #expect(Self.field(value, "uri") == "/dir/index.html")
            #expect(Self.field(value, "algorithm") == algorithm)
            #expect(Self.field(value, "nc") == "00000001")
            #expect(Self.field(value, "cnonce") == Self.rfcCnonce)
            #expect(Self.field(value, "qop") == "auth")
            #expect(Self.field(value, "opaque") == "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS")
        }
    }

    @Test("Digest variants: -sess, SHA-512-256, auth-int, RFC 2069 without qop, userhash, non-ASCII user")
    func digestVariants() throws {
        // Expected values computed independently (Python hashlib) from RFC 7616 §3.4's formulas.
        let sess = try Self.rfcChallenge("SHA-256-sess").authorizationValue(
            user: "Mufasa",
            password: "Circle of Life",
            method: .get,
            target: "/dir/index.html",
            nonceCount: 1,
            cnonce: Self.rfcCnonce
        )
        #expect(Self.field(sess, "response") == "2fd51b3a77ad75bad6afad6003e818d767133c46d9e2749e7f5232ae1ea3efd7")
        let sha512 = try Self.rfcChallenge("SHA-512-256").authorizationValue(
            user: "Mufasa",
            password: "Circle of Life",
            method: .get,
            target: "/dir/index.html",
            nonceCount: 1,
            cnonce: Self.rfcCnonce
        )
        #expect(Self.field(sha512, "response") == "430d05014cecc49cab6fbe03176d41a1da86cbfe24a16580e22aaad928d960d0")

        let authIntOnly = try DigestChallenge(
            try HTTPAuthChallenge.parse(
                fieldValue:
                    #"Digest realm="http-auth@example.org", qop="auth-int", nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v""#
            )[0]
        )
        let authInt = try authIntOnly.authorizationValue(
            user: "Mufasa",
            password: "Circle of Life",
            method: .post,
            target: "/dir/index.html",
            nonceCount: 2,
            cnonce: Self.rfcCnonce,
            body: Array("hello".utf8)
        )
        #expect(Self.field(authInt, "qop") == "auth-int")
        #expect(Self.field(authInt, "nc") == "00000002")
        #expect(Self.field(authInt, "response") == "2ead7d34ddf3b4f0a376c493fd5e7ba8")
        #expect(Self.field(authInt, "algorithm") == nil, "an algorithm the server did not name is not echoed")
        #expect {
            try authIntOnly.authorizationValue(
                user: "u",
                password: "p",
                method: .post,
                target: "/",
                nonceCount: 1,
                cnonce: "c"
            )
        } throws: { ($0 as? AuthenticationError)?.kind == .unsupportedQualityOfProtection }

        let legacy = try DigestChallenge(
            try HTTPAuthChallenge.parse(
                fieldValue:
                    #"Digest realm="http-auth@example.org", nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v""#
            )[0]
        )
        let legacyValue = try legacy.authorizationValue(
            user: "Mufasa",
            password: "Circle of Life",
            method: .get,
            target: "/dir/index.html",
            nonceCount: 1,
            cnonce: "x"
        )
        #expect(Self.field(legacyValue, "response") == "7b2cc3b30e75b4777ea31027084363fd")
        #expect(
            Self.field(legacyValue, "nc") == nil && Self.field(legacyValue, "cnonce") == nil
                && Self.field(legacyValue, "qop") == nil
        )

        let hashed = try DigestChallenge(
            try HTTPAuthChallenge.parse(
                fieldValue:
                    #"Digest realm="http-auth@example.org", qop=auth, algorithm=SHA-256, nonce="n", userhash=true"#
            )[0]
        )
        #expect(hashed.userhash)
        let hashedValue = try hashed.authorizationValue(
            user: "Mufasa",
            password: "Circle of Life",
            method: .get,
            target: "/",
            nonceCount: 1,
            cnonce: "c"
        )
        #expect(
            Self.field(hashedValue, "username") == "a947aad205e80e429958a387394944c6b496301e79f89d35a4cc23b6ee12b5b6"
        )
        #expect(Self.field(hashedValue, "userhash") == "true")

        let unicode = try Self.rfcChallenge("SHA-256").authorizationValue(
            user: "J\u{E4}s\u{F8}n Doe",
            password: "p",
            method: .get,
            target: "/",
            nonceCount: 1,
            cnonce: "c"
        )
        #expect(unicode.contains("username*=UTF-8''J%C3%A4s%C3%B8n%20Doe"))
        #expect(Self.field(unicode, "username") == nil)

        #expect {
            try Self.rfcChallenge("SHA-256").authorizationValue(
                user: "u",
                password: "p",
                method: .get,
                target: "/a\"b",
                nonceCount: 1,
                cnonce: "c"
            )
        } throws: { ($0 as? AuthenticationError)?.kind == .invalidRequestTarget }
    }

    @Test("invalid Digest challenges are refused with what is missing")
    func digestChallengeErrors() throws {
        let cases: [(String, AuthenticationError.Kind)] = [
            (#"Digest nonce="n""#, .missingParameter),
            (#"Digest realm="r""#, .missingParameter),
            (#"Digest realm="r", nonce="n", algorithm=SHA-1"#, .unsupportedAlgorithm),
            (#"Digest realm="r", nonce="n", qop="auth-conf""#, .unsupportedQualityOfProtection),
            (#"Basic realm="r""#, .unsupportedScheme),
        ]
        for (field, kind) in cases {
            let challenge = try HTTPAuthChallenge.parse(fieldValue: field)[0]
            #expect(throws: AuthenticationError.self) { try DigestChallenge(challenge) }
            do { _ = try DigestChallenge(challenge) } catch { #expect(error.kind == kind, "\(field)") }
        }
        let ok = try DigestChallenge(
            try HTTPAuthChallenge.parse(
                fieldValue: #"DIGEST REALM="r", NONCE="n", ALGORITHM=sha-256-SESS, QOP="Auth-Int, auth", STALE=TRUE"#
            )[0]
        )
        #expect(ok.algorithm == .sha256Session && ok.stale && ok.qualityOfProtection == [.authInt, .auth])
    }

    @Test("the authenticator counts nc per nonce, restarts on a new nonce, and answers pre-emptively")
    func nonceCounting() throws {
        let space = ProtectionSpace(
            host: "Example.org",
            port: 80,
            urlScheme: .http,
            realm: "r",
            authenticationMethod: .digest
        )
        #expect(space.host == "example.org")
        let credential = Credential(user: "u", password: "p")
        let authenticator = DigestAuthenticator(cnonce: { "fixedcnonce" })
        #expect(authenticator.authorization(for: space, credential: credential, method: .get, target: "/") == nil)

        let first = try HTTPAuthChallenge.parse(fieldValue: #"Digest realm="r", nonce="one", qop="auth""#)[0]
        let a = try authenticator.authorization(
            responding: first,
            in: space,
            credential: credential,
            method: .get,
            target: "/a"
        )
        #expect(Self.field(a, "nc") == "00000001")
        let b = try #require(
            authenticator.authorization(for: space, credential: credential, method: .get, target: "/b")
        )
        #expect(Self.field(b, "nc") == "00000002" && Self.field(b, "nonce") == "one")
        let c = try #require(
            authenticator.authorization(for: space, credential: credential, method: .get, target: "/c")
        )
        #expect(Self.field(c, "nc") == "00000003")
        #expect(authenticator.nonceCount(for: space) == 3)

        // stale=true brings a new nonce: the count starts over.
        let stale = try HTTPAuthChallenge.parse(fieldValue: #"Digest realm="r", nonce="two", qop="auth", stale=true"#)[
            0
        ]
        let d = try authenticator.authorization(
            responding: stale,
            in: space,
            credential: credential,
            method: .get,
            target: "/d"
        )
        #expect(Self.field(d, "nc") == "00000001" && Self.field(d, "nonce") == "two")
        // The same nonce again continues the count.
        let e = try authenticator.authorization(
            responding: stale,
            in: space,
            credential: credential,
            method: .get,
            target: "/e"
        )
        #expect(Self.field(e, "nc") == "00000002")

        let other = ProtectionSpace(
            host: "example.org",
            port: 80,
            urlScheme: .http,
            realm: "other",
            authenticationMethod: .digest
        )
        #expect(authenticator.authorization(for: other, credential: credential, method: .get, target: "/") == nil)
        authenticator.forget(space)
        #expect(authenticator.nonceCount(for: space) == nil)
    }

    @Test("random cnonces are 32 hex digits and differ")
    func randomCnonce() {
        let a = DigestAuthenticator.randomCnonce()
        let b = DigestAuthenticator.randomCnonce()
        #expect(a.count == 32 && a.allSatisfy { $0.isHexDigit })
        #expect(a != b)
    }

    // MARK: - Attempts

    @Test("challenge loops stop: failures count only with credentials sent, stale retries are bounded")
    func attempts() throws {
        let basic = try HTTPAuthChallenge.parse(fieldValue: #"Basic realm="r""#)[0]
        let stale = try HTTPAuthChallenge.parse(fieldValue: #"Digest realm="r", nonce="n", stale=true"#)[0]
        let digest = try HTTPAuthChallenge.parse(fieldValue: #"Digest realm="r", nonce="n""#)[0]

        var once = AuthenticationAttempts(maximumFailures: 1)
        #expect(once.record(basic, sentCredentials: false) == .retry)
        #expect(once.failureCount == 0)
        #expect(once.record(basic, sentCredentials: true) == .giveUp)
        #expect(once.failureCount == 1)

        var withStale = AuthenticationAttempts(maximumFailures: 2, maximumStaleRetries: 1)
        #expect(withStale.record(digest, sentCredentials: false) == .retry)
        #expect(withStale.record(stale, sentCredentials: true) == .retry)
        #expect(withStale.failureCount == 0 && withStale.staleRetries == 1)
        #expect(
            withStale.record(stale, sentCredentials: true) == .retry,
            "a second stale is a failure, not a free retry"
        )
        #expect(withStale.failureCount == 1)
        #expect(withStale.record(digest, sentCredentials: true) == .giveUp)

        var endless = AuthenticationAttempts(maximumFailures: 3, maximumStaleRetries: 3)
        var rounds = 0
        while endless.record(basic, sentCredentials: false) == .retry { rounds += 1 }
        #expect(rounds == 7, "rounds are bounded even when no credentials are ever sent")

        var none = AuthenticationAttempts()
        #expect(none.record(nil, sentCredentials: false) == .giveUp)
    }

    // MARK: - Protection spaces and the credential store

    @Test("protection spaces come from the URL and the challenge")
    func protectionSpace() throws {
        let challenge = try HTTPAuthChallenge.parse(fieldValue: #"Digest realm="R", nonce="n""#)[0]
        let space = try #require(ProtectionSpace(url: URL(string: "https://API.example.org/x")!, challenge: challenge))
        #expect(
            space
                == ProtectionSpace(
                    host: "api.example.org",
                    port: 443,
                    urlScheme: .https,
                    realm: "R",
                    authenticationMethod: .digest
                )
        )
        let proxy = try #require(
            ProtectionSpace(url: URL(string: "http://[::1]:3128")!, challenge: challenge, isProxy: true)
        )
        #expect(proxy.host == "::1" && proxy.port == 3128 && proxy.isProxy)
        #expect(ProtectionSpace(url: URL(string: "ftp://h/")!, challenge: challenge) == nil)
        #expect(ProtectionSpace.AuthenticationMethod(scheme: "NEGOTIATE") == .other("negotiate"))
    }

    @Test("the credential store keeps, defaults, looks up and removes per protection space")
    func credentialStore() throws {
        let store = CredentialStore()
        let url = URL(string: "http://example.org/private")!
        let challenge = try HTTPAuthChallenge.parse(fieldValue: #"Basic realm="R""#)[0]
        let space = try #require(ProtectionSpace(url: url, challenge: challenge))
        let alice = Credential(user: "alice", password: "a")
        let bob = Credential(user: "bob", password: "b", persistence: .permanent)

        #expect(store.credential(for: challenge, url: url) == nil)
        #expect(!store.set(Credential(user: "temp", password: "t", persistence: .none), for: space))
        #expect(store.credentials(for: space).isEmpty)
        #expect(store.set(alice, for: space))
        #expect(store.credential(for: challenge, url: url) == alice, "the only credential of a space answers")
        store.set(bob, for: space)
        #expect(store.credential(for: challenge, url: url) == nil, "two credentials and no default: no guess")
        store.setDefault(bob, for: space)
        #expect(store.credential(for: challenge, url: url) == bob)
        #expect(store.defaultCredential(for: space) == bob)

        let otherRealm = try HTTPAuthChallenge.parse(fieldValue: #"Basic realm="other""#)[0]
        #expect(store.credential(for: otherRealm, url: url) == nil)
        #expect(store.credential(for: challenge, url: URL(string: "https://example.org/private")!) == nil)
        #expect(store.credential(for: challenge, url: url, isProxy: true) == nil)

        store.remove(bob, for: space)
        #expect(store.defaultCredential(for: space) == nil)
        #expect(store.credential(for: challenge, url: url) == alice)
        #expect(store.allCredentials.count == 1)
        store.removeAll()
        #expect(store.allCredentials.isEmpty)
        let secret = Credential(user: "u", password: "s3cret-pw")
        #expect(!secret.description.contains("s3cret-pw"), "descriptions never show the password")
    }
}
