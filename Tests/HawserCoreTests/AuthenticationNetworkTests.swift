import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

extension NetworkTests {
    @Suite("HTTP authentication on the wire", .serialized)
    struct AuthenticationNetworkTests {
        /// Answers every challenge with `disposition` and records what it was asked.
        final class Answering: RecordingDelegate, @unchecked Sendable {
            let answer: @Sendable (AuthenticationChallenge) -> ChallengeDisposition
            let seen = Mutex<[AuthenticationChallenge]>([])
            init(_ answer: @escaping @Sendable (AuthenticationChallenge) -> ChallengeDisposition) {
                self.answer = answer
            }
            override func task(
                _ task: RequestTask,
                didReceive challenge: AuthenticationChallenge,
                completion: @escaping @Sendable (ChallengeDisposition) -> Void
            ) {
                self.seen.withLock { $0.append(challenge) }
                let d = self.answer(challenge)
                Thread.detachNewThread { completion(d) }
            }
        }

        static func run(_ session: Session, _ u: String, _ d: RecordingDelegate) async -> RecordingDelegate.Record {
            session.execute(HTTPClientRequest(url: URL(string: u)!), delegate: d)
            return await d.wait()
        }

        @Test("Basic and Digest (MD5, SHA-256, auth-int) against httpbin, answered by the task's delegate")
        func httpbin() async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            try await FaultTests.withSession { session in
                let good = Credential(user: "user", password: "passwd", persistence: .none)
                for path in [
                    "/basic-auth/user/passwd", "/digest-auth/auth/user/passwd/MD5",
                    "/digest-auth/auth/user/passwd/SHA-256", "/digest-auth/auth-int/user/passwd/SHA-256",
                ] {
                    let d = Answering { _ in .useCredential(good) }
                    let rec = await Self.run(session, bin.baseURL + path, d)
                    #expect(rec.head?.status == 200, "\(path)")
                    #expect(
                        String(decoding: rec.body, as: UTF8.self).replacingOccurrences(of: " ", with: "").contains(
                            "\"authenticated\":true"
                        ),
                        "\(path)"
                    )
                    let challenge = try #require(d.seen.withLock { $0.first })
                    #expect(
                        challenge.protectionSpace.authenticationMethod == (path.hasPrefix("/basic") ? .basic : .digest)
                    )
                    #expect(challenge.previousFailureCount == 0)
                    #expect(challenge.failureResponse?.status == 401)
                    #expect(rec.completions == 1)
                }
            }
        }

        @Test("wrong credentials: asked again with previousFailureCount, then the 401 is the response")
        func wrongPassword() async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            try await FaultTests.withSession({ $0.maximumAuthenticationFailures = 3 }) { session in
                let d = Answering { _ in .useCredential(Credential(user: "user", password: "nope", persistence: .none))
                }
                let rec = await Self.run(session, bin.baseURL + "/basic-auth/user/passwd", d)
                #expect(rec.head?.status == 401)
                #expect(rec.completions == 1)
                #expect(d.seen.withLock { $0.map(\.previousFailureCount) } == [0, 1, 2])
            }
        }

        @Test(
            "default handling uses the credential store, or the URL's user info; without either the 401 is the response"
        )
        func defaultHandling() async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            try await FaultTests.withSession { session in
                let none = RecordingDelegate()
                #expect(await Self.run(session, bin.baseURL + "/basic-auth/user/passwd", none).head?.status == 401)
                let withUserInfo = RecordingDelegate()
                let u = "http://user:passwd@127.0.0.1:\(bin.port)/digest-auth/auth/user/passwd/MD5"
                #expect(await Self.run(session, u, withUserInfo).head?.status == 200)
            }
            let store = CredentialStore()
            store.set(
                Credential(user: "user", password: "passwd"),
                for: ProtectionSpace(
                    host: "127.0.0.1",
                    port: bin.port,
                    urlScheme: .http,
                    realm: "Fake Realm",
                    authenticationMethod: .basic
                )
            )
            try await FaultTests.withSession({ $0.urlCredentialStorage = store }) { session in
                let d = RecordingDelegate()
                #expect(await Self.run(session, bin.baseURL + "/basic-auth/user/passwd", d).head?.status == 200)
            }
        }

        @Test("cancelling the challenge fails the task with userCancelledAuthentication")
        func cancel() async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            try await FaultTests.withSession { session in
                let d = Answering { _ in .cancelAuthenticationChallenge }
                let rec = await Self.run(session, bin.baseURL + "/basic-auth/user/passwd", d)
                #expect(rec.completions == 1)
                #expect(FaultTests.error(rec)?.code == .userCancelledAuthentication)
                #expect(FaultTests.error(rec)?.urlErrorCode == -1012)
            }
        }

        @Test("a server that always challenges cannot loop: the exchange ends after the maximum")
        func noLoop() async throws {
            let challenge =
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nContent-Length: 2\r\n\r\nno"
            let script: [ScriptedServer.Step] = [
                .readRequest(), .sendText(challenge), .readRequest(), .sendText(challenge),
                .readRequest(), .sendText(challenge), .readRequest(), .sendText(challenge), .waitForClose,
            ]
            try await FaultTests.withSession({ $0.maximumAuthenticationFailures = 2 }) { session in
                let server = try ScriptedServer([script])
                defer { server.stop() }
                let d = Answering { _ in .useCredential(Credential(user: "a", password: "b", persistence: .none)) }
                let rec = await Self.run(session, "http://127.0.0.1:\(server.port)/", d)
                #expect(rec.head?.status == 401)
                #expect(String(decoding: rec.body, as: UTF8.self) == "no")
                #expect(rec.completions == 1)
                #expect(server.requests.count == 3, "one request without and two with credentials")
            }
        }
    }
}
