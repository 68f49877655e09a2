// The joins between the AFNetworking layer and the engine: default serializers, multipart POST,
// the security policy and challenge blocks over real TLS, redirect and body-stream hooks.
import Foundation
import Hawser
import HawserCore
import HawserTestServer
import Testing

extension ManagerNetworkTests {
    @Suite("Manager wiring", .serialized)
    struct ManagerWiringTests {
        // MARK: - Default serializers

        @Test("with default settings, GET /json gives a JSONValue (HTTPRequestSerializer + JSONResponseSerializer)")
        func defaultSerializersDecodeJSON() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            #expect(m.requestSerializer is HTTPRequestSerializer)
            #expect(m.responseSerializer is JSONResponseSerializer)

            let (value, response) = try await m.get("json", parameters: ["q": "a b"])
            #expect(response.statusCode == 200)
            let json = try #require(value as? JSONValue, "got \(String(describing: value))")
            #expect(json["name"] == .string("hawser"))
            #expect(json["ok"] == .bool(true))
            #expect(json["nested"]?["a"] == .null)

            // The block form gets the same object; a text/plain body fails JSON validation (-1016).
            let done = Expectation()
            let seen = Box<((any Sendable)?, (any Error)?)>((nil, nil))
            m.get(
                "json",
                success: { _, o in
                    seen.value = (o, nil)
                    done.fulfill()
                },
                failure: { _, e in
                    seen.value = (nil, e)
                    done.fulfill()
                }
            )
            #expect(await done.wait())
            #expect(seen.value.0 as? JSONValue == json)
            await #expect(throws: SerializationError.self) { _ = try await m.get("hello") }
        }

        // MARK: - Multipart POST

        static func expectedMultipart(boundary: String, field: String, fileName: String, file: [UInt8]) -> [UInt8] {
            Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n\(field)\r\n".utf8)
                + Array(
                    "--\(boundary)\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"\(fileName)\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                        .utf8
                )
                + file + Array("\r\n--\(boundary)--\r\n".utf8)
        }

        @Test("multipart POST: a form field and a file part reach /echo byte for byte, streamed with a Content-Length")
        func multipartPostEchoesTheBody() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let file = tempURL("upload.bin")
            let bytes = pattern(200_000)
            try Data(bytes).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }

            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            m.responseSerializer = DataSerializer()
            let done = Expectation()
            let seen = Box<(DataTask?, (any Sendable)?, (any Error)?)>((nil, nil, nil))
            let progress = Box<Double>(0)
            let task = m.post(
                "echo",
                parameters: ["title": "hello multipart"],
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: file, name: "upload")
                },
                progress: { p in progress.value = p.fractionCompleted },
                success: { t, o in
                    seen.value = (t, o, nil)
                    done.fulfill()
                },
                failure: { t, e in
                    seen.value = (t, nil, e)
                    done.fulfill()
                }
            )
            #expect(task is UploadTask)
            #expect(await done.wait())
            #expect(seen.value.2 == nil, "\(String(describing: seen.value.2))")
            let response = try #require(seen.value.0?.response)
            let contentType = try #require(response.headers["X-Echo-H-Content-Type"])
            #expect(contentType.hasPrefix("multipart/form-data; boundary="))
            let boundary = String(contentType.dropFirst("multipart/form-data; boundary=".count))
            let expected = Self.expectedMultipart(
                boundary: boundary,
                field: "hello multipart",
                fileName: file.lastPathComponent,
                file: bytes
            )
            #expect(
                response.headers["X-Echo-H-Content-Length"] == String(expected.count),
                "a known length, not chunked"
            )
            let echoed = try #require(seen.value.1 as? Data)
            #expect(Array(echoed) == expected)
            #expect(progress.value == 1)

            // async form
            let (value, _) = try await m.post(
                "echo",
                parameters: ["title": "again"],
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: file, name: "upload")
                }
            )
            let again = try #require(value as? Data)
            #expect(
                again.count
                    == Self.expectedMultipart(
                        boundary: boundary,
                        field: "again",
                        fileName: file.lastPathComponent,
                        file: bytes
                    ).count
            )
        }

        @Test("multipart POST with a file that cannot be read: failure with a nil task, on the completion queue")
        func multipartUnreadableFileFails() async throws {
            let m = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:9/")!)
            let queue = DispatchQueue(label: "test.multipart.failure")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 3)
            m.completionQueue = queue
            let done = Expectation()
            let seen = Box<(Bool, Bool, (any Error)?)>((false, false, nil))
            let missing = URL(fileURLWithPath: "/nonexistent/hawser-\(UUID().uuidString).bin")
            let task = m.post(
                "upload",
                parameters: nil,
                constructingBodyWith: { form in
                    try form.appendPart(withFileURL: missing, name: "file")
                },
                success: { _, _ in done.fulfill() },
                failure: { t, e in
                    seen.value = (t == nil, DispatchQueue.getSpecific(key: key) == 3, e)
                    done.fulfill()
                }
            )
            #expect(task == nil)
            #expect(await done.wait())
            #expect(seen.value.0, "no task was made")
            #expect(seen.value.1, "failure ran on the completion queue")
            #expect(
                (seen.value.2 as? SerializationError)?.code == .fileNotReachable,
                "\(String(describing: seen.value.2))"
            )
        }

        // MARK: - Redirects and body streams

        @Test(
            "redirects: currentRequest follows them, response.url is where the response came from; the block can refuse"
        )
        func redirectsFollowAndRefuse() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            m.responseSerializer = DataSerializer()
            let base = server.baseURL

            let followed = Box<[String]>([])
            m.taskWillPerformHTTPRedirection = { _, response, request in
                followed.mutate { $0.append("\(response.statusCode) \(response.url.path) → \(request.url.path)") }
                return request
            }
            let done = Expectation()
            let made = m.get(
                "redirect/3",
                success: { _, _ in done.fulfill() },
                failure: { _, e in
                    Issue.record("\(e)")
                    done.fulfill()
                }
            )
            let task = try #require(made)
            #expect(await done.wait())
            #expect(
                followed.value == [
                    "302 /redirect/3 → /redirect/2", "302 /redirect/2 → /redirect/1", "302 /redirect/1 → /hello",
                ]
            )
            #expect(task.originalRequest?.url.absoluteString == "\(base)/redirect/3")
            #expect(task.currentRequest?.url.absoluteString == "\(base)/hello")
            #expect(task.response?.url.absoluteString == "\(base)/hello")
            #expect(task.response?.statusCode == 200)

            // nil refuses: the 302 is the task's response, from the URL that redirected.
            m.taskWillPerformHTTPRedirection = { _, _, _ in nil }
            let refused = Expectation()
            let error = Box<(any Error)?>(nil)
            let made2 = m.get(
                "redirect/2",
                success: { _, _ in refused.fulfill() },
                failure: { _, e in
                    error.value = e
                    refused.fulfill()
                }
            )
            let t2 = try #require(made2)
            #expect(await refused.wait())
            #expect((error.value as? StatusError)?.status == 302)
            #expect(t2.response?.statusCode == 302)
            #expect(t2.response?.url.absoluteString == "\(base)/redirect/2")
            #expect(t2.currentRequest?.url.absoluteString == "\(base)/redirect/2")
        }

        @Test("a 307 resends the body: a multipart form is produced again; taskNeedNewBodyStream replaces a stream")
        func redirect307ResendsTheBody() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            m.responseSerializer = DataSerializer()
            let target = "redirect-to?url=%2Fecho&status=307"

            // Without a block, the multipart form replays itself.
            let (value, response) = try await m.post(
                target,
                parameters: ["title": "t"],
                constructingBodyWith: { form in
                    form.appendPart(
                        withFileData: [1, 2, 3],
                        name: "upload",
                        fileName: "f.bin",
                        mimeType: "application/octet-stream"
                    )
                }
            )
            #expect(response.url.path == "/echo")
            #expect(response.headers["X-Echo-Method"] == "POST")
            let boundary = String(
                try #require(response.headers["X-Echo-H-Content-Type"]).dropFirst(
                    "multipart/form-data; boundary=".count
                )
            )
            #expect(
                Array(try #require(value as? Data))
                    == Self.expectedMultipart(boundary: boundary, field: "t", fileName: "f.bin", file: [1, 2, 3])
            )

            // A plain stream cannot replay: the block gives the new one, and it is what arrives.
            let asked = Box(0)
            m.taskNeedNewBodyStream = { _ in
                asked.mutate { $0 += 1 }
                return .stream(length: 6) { writer in try await writer.write(Array("second".utf8)) }
            }
            var request = HTTPClientRequest(method: .post, url: URL(string: "\(server.baseURL)/\(target)")!)
            request.body = .stream(length: 5) { writer in try await writer.write(Array("first".utf8)) }
            let (echo, r2) = try await m.data(for: request)
            #expect(asked.value == 1)
            #expect(r2.url.path == "/echo")
            #expect((echo as? Data) == Data("second".utf8))
        }

        // MARK: - Security policy and challenge blocks over TLS

        static func withTLSServer(_ body: (TestServer, TestPKI) async throws -> Void) async throws {
            let pki = try TestPKI.shared()
            try await expectNoFDLeak {
                let tls = TestServer.TLS(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
                let server = try TestServer(host: "127.0.0.1", tls: tls)
                defer { server.shutdown() }
                try await body(server, pki)
            }
        }

        @Test("the default policy refuses the test root: -1202 with the URL, the chain and the reason untrustedRoot")
        func defaultPolicyRefuses() async throws {
            try await Self.withTLSServer { server, pki in
                let m = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                let done = Expectation()
                let failure = Box<(any Error)?>(nil)
                m.get(
                    "hello",
                    success: { _, _ in done.fulfill() },
                    failure: { _, e in
                        failure.value = e
                        done.fulfill()
                    }
                )
                #expect(await done.wait())
                let e = try #require(failure.value as? HawserError, "\(String(describing: failure.value))")
                #expect(e.code == .serverCertificateUntrusted)
                #expect(e.urlErrorCode == -1202)
                #expect(e.url?.absoluteString == "https://localhost:\(server.port)/hello")
                #expect(e.peerCertificates == pki.valid.presentedChain)
                #expect((e.underlying as? TrustFailure)?.reason == .untrustedRoot)
            }
        }

        @Test("certificate pinning on the test root accepts; a pin on another root refuses with pinMismatch")
        func pinningPolicy() async throws {
            try await Self.withTLSServer { server, pki in
                let m = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                // AF's recipe for a private CA: pin it, and allow what the system store cannot verify
                // (the pin must still be in the chain).
                var pinned = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.root])
                pinned.allowInvalidCertificates = true
                try m.setSecurityPolicy(pinned)
                let (value, response) = try await m.get("json")
                #expect(response.statusCode == 200)
                #expect((value as? JSONValue)?["ok"] == .bool(true))

                // A fresh manager (no pooled connection) pinned on a root that did not issue the chain.
                let other = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { other.invalidateSessionCancelingTasks(true, resetSession: false) }
                var wrongPin = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [pki.untrustedRoot])
                wrongPin.anchors = .custom([pki.root])
                try other.setSecurityPolicy(wrongPin)
                do {
                    _ = try await other.get("json")
                    Issue.record("a chain matching no pin was accepted")
                } catch let e as HawserError {
                    #expect(e.code == .serverCertificateUntrusted)
                    #expect((e.underlying as? TrustFailure)?.reason == .pinMismatch)
                }
            }
        }

        @Test(
            "a manager's policy with strict revocation asks for the staple: good accepted, revoked refused as revoked"
        )
        func revocationPolicy() async throws {
            let pki = try TestPKI.shared()
            for (leaf, status) in [(pki.valid, TestPKI.OCSPStatus.good), (pki.revoked, .revoked)] {
                try await expectNoFDLeak {
                    let tls = TestServer.TLS(
                        certificateChainPath: leaf.chainPath,
                        privateKeyPath: leaf.keyPath,
                        stapledOCSPResponse: try pki.ocspResponse(for: leaf, status: status)
                    )
                    let server = try TestServer(host: "127.0.0.1", tls: tls)
                    defer { server.shutdown() }
                    let m = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                    defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                    var policy = SecurityPolicy.default
                    policy.anchors = .custom([pki.root])
                    policy.revocation = .strict
                    try m.setSecurityPolicy(policy)
                    do {
                        let (_, response) = try await m.get("json")
                        #expect(status == .good && response.statusCode == 200)
                    } catch let e as HawserError {
                        #expect(status == .revoked, "\(e)")
                        #expect(e.code == .serverCertificateUntrusted)
                        #expect((e.underlying as? TrustFailure)?.reason == .revoked)
                    }
                }
            }
        }

        @Test(
            "a task challenge block answering .useServerTrust wins over the policy; a session block decides when alone"
        )
        func challengeBlocksWin() async throws {
            try await Self.withTLSServer { server, pki in
                let m = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                let seen = Box<[String]>([])
                m.taskDidReceiveAuthenticationChallenge = { task, challenge in
                    seen.mutate {
                        $0.append(
                            "task \(challenge.protectionSpace.authenticationMethod) \(challenge.protectionSpace.host) \(challenge.serverTrust?.certificates.count ?? 0) \(task.currentRequest?.url.path ?? "")"
                        )
                    }
                    return .useServerTrust
                }
                m.sessionDidReceiveAuthenticationChallenge = { _ in
                    seen.mutate { $0.append("session") }
                    return .performDefaultHandling
                }
                let (_, response) = try await m.get("json")
                #expect(response.statusCode == 200)
                #expect(
                    seen.value == ["task serverTrust localhost 2 /json"],
                    "the task block decided alone: \(seen.value)"
                )

                // Only a session block: it decides (here: refuses with its own reason).
                let s = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { s.invalidateSessionCancelingTasks(true, resetSession: false) }
                var accepting = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.root])
                accepting.allowInvalidCertificates = true
                try s.setSecurityPolicy(accepting)
                s.sessionDidReceiveAuthenticationChallenge = { challenge in
                    #expect(challenge.serverTrust?.certificates == pki.valid.presentedChain)
                    return .refuseServerTrust(TrustFailure(.other, "the session block says no"))
                }
                do {
                    _ = try await s.get("json")
                    Issue.record("the session block's refusal was ignored (the policy would accept)")
                } catch let e as HawserError {
                    #expect(e.code == .serverCertificateUntrusted)
                    #expect(
                        (e.underlying as? TrustFailure)?.message.contains("the session block says no") == true,
                        "\(e)"
                    )
                }
            }
        }

        // MARK: - HTTP authentication and the cache hook

        @Test("a 401 goes to the task challenge block: a credential succeeds; refused twice, the 401 is the response")
        func httpAuthenticationBlocks() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            m.responseSerializer = HTTPResponseSerializer()
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            let counts = Box<[Int]>([])
            m.taskDidReceiveAuthenticationChallenge = { _, challenge in
                counts.mutate { $0.append(challenge.previousFailureCount) }
                #expect(challenge.protectionSpace.authenticationMethod == .basic)
                #expect(challenge.protectionSpace.realm == "hawser")
                return .useCredential(
                    Credential(
                        user: "ada",
                        password: challenge.previousFailureCount == 0 ? "lovelace" : "x",
                        persistence: .none
                    )
                )
            }
            let (_, ok) = try await m.get("basic-auth/ada/lovelace")
            #expect(ok.statusCode == 200)
            #expect(counts.value == [0])
            counts.value = []
            m.taskDidReceiveAuthenticationChallenge = { _, challenge in
                counts.mutate { $0.append(challenge.previousFailureCount) }
                return challenge.previousFailureCount < 1
                    ? .useCredential(Credential(user: "ada", password: "wrong", persistence: .none))
                    : .rejectProtectionSpace
            }
            await #expect(throws: SerializationError.self) { _ = try await m.get("basic-auth/ada/lovelace") }
            #expect(counts.value == [0, 1])
        }

        @Test("dataTaskWillCacheResponse decides whether a response is stored in the session's cache")
        func willCacheResponse() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            var config = SessionConfiguration()
            config.urlCache = HTTPCache(memoryCapacity: 1 << 20)
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!, configuration: config)
            m.responseSerializer = HTTPResponseSerializer()
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            let asked = Box(0)
            m.dataTaskWillCacheResponse = { _, response in
                asked.mutate { $0 += 1 }
                return response.statusCode == 200 && asked.value > 1  // refuse the first, keep the second
            }
            _ = try await m.get("cacheable")
            _ = try await m.get("cacheable")
            _ = try await m.get("cacheable")
            #expect(asked.value == 2, "the third request was served from the cache without asking")
            #expect(server.cacheableCounts.produced == 2)
        }
    }
}
