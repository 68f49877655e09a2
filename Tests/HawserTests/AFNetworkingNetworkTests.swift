// AFNetworking's expectations that need a server: against the project's TestServer and a local
// httpbin (AF's tests ran against httpbin.org). Bounded buffering, the managers' copies, the
// notifications under AF's names, the -1202 wording over real TLS, and parameters of any shape
// on the wire.
import Foundation
import Hawser
import HawserFoundation
import HawserTestServer
import Testing

extension ManagerNetworkTests {
    @Suite("AFNetworking parity on the wire", .serialized)
    struct AFNetworkingNetworkTests {
        // MARK: - Bounded buffering

        @Test(
            "a data task buffers at most maximumBufferedBodySize: -1103 by Content-Length at the head, or while a chunked body grows; the connection is closed"
        )
        func boundedBuffering() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await expectNoFDLeak("bounded buffering") {
                var config = SessionConfiguration()
                config.maximumBufferedBodySize = 10_000
                let m = SessionManager(configuration: config)
                m.responseSerializer = DataSerializer()
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                for path in ["/bytes/50000", "/bytes/50000?chunk=3000", "/close-delimited/50000"] {
                    do {
                        _ = try await m.data(for: request(server, path))
                        Issue.record("\(path): a body over the limit was buffered")
                    } catch let e as HawserError {
                        #expect(e.code == .limitExceeded && e.urlErrorCode == -1103, "\(path): \(e)")
                        #expect((e as NSError).localizedDescription == "resource exceeds maximum size")
                        #expect(
                            e.message.contains("maximumBufferedBodySize"),
                            "the error says which limit: \(e.message)"
                        )
                    }
                }
                #expect(
                    await eventually { m.session.poolStatistics().openConnections == 0 },
                    "a refused body's connection is closed, not reused"
                )
                // A HEAD answer's Content-Length describes the GET's body, not one to buffer.
                let (empty, headResponse) = try await m.data(for: request(server, "/bytes/50000", method: .head))
                #expect(headResponse.statusCode == 200 && headResponse.headers["Content-Length"] == "50000")
                #expect((empty as? Data)?.isEmpty ?? true, "HEAD: \(String(describing: empty))")
                // At the limit it is fine, and a download task is not limited (it goes to a file).
                let (ok, _) = try await m.data(for: request(server, "/bytes/10000"))
                #expect((ok as? Data)?.count == 10_000)
                let target = tempURL("unbounded")
                defer { try? FileManager.default.removeItem(at: target) }
                let (url, _) = try await m.download(for: request(server, "/bytes/50000")) { _, _ in target }
                #expect(try Data(contentsOf: url).count == 50_000)
            }
        }

        // MARK: - Redirect count

        @Test("the manager follows 20 redirects, as AFNetworking on NSURLSession does; the 21st fails with -1007")
        func twentyRedirects() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL + "/")!)
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            m.responseSerializer = HTTPResponseSerializer()
            // /redirect/20 → … → /redirect/1 → /hello: 20 redirects.
            let (_, response) = try await m.get("redirect/20")
            #expect(response.statusCode == 200)
            #expect(response.url.path == "/hello")
            do {
                _ = try await m.get("redirect/21")
                Issue.record("a 21st redirect was followed")
            } catch let e as HawserError {
                #expect(e.code == .tooManyRedirects && e.urlErrorCode == -1007, "\(e)")
            }
        }

        // MARK: - Copying managers

        @Test(
            "a manager's copy has the same settings, its own session and tasks, and shares no mutable state (AFHTTPSessionManagerTests testCanBeCopied)"
        )
        func managerCopy() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            var serializer = HTTPRequestSerializer()
            serializer.setValue("original", forHTTPHeaderField: "X-Which")
            m.requestSerializer = serializer
            m.responseSerializer = HTTPResponseSerializer()
            let queue = DispatchQueue(label: "test.copy")
            m.completionQueue = queue
            m.waitsForConnectivity = true
            m.taskDidComplete = { _, _ in }
            let copy = m.copy()
            defer { copy.invalidateSessionCancelingTasks(true, resetSession: false) }
            #expect(copy.baseURL == m.baseURL)
            #expect(copy.session !== m.session, "its own session")
            #expect(
                (copy.requestSerializer as? HTTPRequestSerializer)?.value(forHTTPHeaderField: "X-Which") == "original"
            )
            #expect(copy.responseSerializer is HTTPResponseSerializer)
            #expect(copy.completionQueue === queue && copy.waitsForConnectivity)
            #expect(copy.taskDidComplete == nil, "blocks are not copied")
            // Changing the copy's serializer leaves the original's.
            var changed = HTTPRequestSerializer()
            changed.setValue("copy", forHTTPHeaderField: "X-Which")
            copy.requestSerializer = changed
            #expect((m.requestSerializer as? HTTPRequestSerializer)?.value(forHTTPHeaderField: "X-Which") == "original")
            let task = copy.get("echo", success: nil, failure: nil)
            #expect(task != nil && !m.tasks.contains { $0 === task }, "a task of the copy is not the original's")
            let (_, response) = try await copy.get("echo")
            #expect(response.headers["X-Echo-H-X-Which"] == "copy")
            let (_, original) = try await m.get("echo")
            #expect(original.headers["X-Echo-H-X-Which"] == "original")
        }

        // MARK: - AFNetworking's notifications

        @Test(
            "AF's notification names and user-info keys on NotificationCenter (AFURLSessionManagerTests testDidResume/Suspend…, the complete notification's user info)"
        )
        func notifications() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeManager()
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            let resumed = Expectation()
            let suspended = Expectation()
            let completed = Expectation()
            /// What the complete notification's user info held (its values are not Sendable).
            struct Seen: Sendable {
                var data: Data?, serialized: Data?, serializerIsOurs = false, hasError = true, hasMetrics = false
            }
            let info = Box<Seen?>(nil)
            let task = m.dataTask(with: request(server, "/hello"), completionHandler: nil)
            let center = NotificationCenter.default
            let tokens = [
                center.addObserver(forName: .AFNetworkingTaskDidResume, object: task, queue: nil) { _ in
                    resumed.fulfill()
                },
                center.addObserver(forName: .AFNetworkingTaskDidSuspend, object: task, queue: nil) { _ in
                    suspended.fulfill()
                },
                center.addObserver(
                    forName: Notification.Name(AFNetworkingTaskDidCompleteNotification),
                    object: task,
                    queue: nil
                ) { n in
                    let u = n.userInfo ?? [:]
                    info.value = Seen(
                        data: u[AFNetworkingTaskDidCompleteResponseDataKey] as? Data,
                        serialized: u[AFNetworkingTaskDidCompleteSerializedResponseKey] as? Data,
                        serializerIsOurs: u[AFNetworkingTaskDidCompleteResponseSerializerKey] is DataSerializer,
                        hasError: u[AFNetworkingTaskDidCompleteErrorKey] != nil,
                        hasMetrics: u[AFNetworkingTaskDidCompleteSessionTaskMetrics] is TaskMetrics
                    )
                    completed.fulfill()
                },
            ]
            defer { tokens.forEach(center.removeObserver) }
            #expect(Notification.Name.AFNetworkingTaskDidComplete.rawValue == "com.alamofire.networking.task.complete")
            #expect(Notification.Name.AFNetworkingTaskDidResume.rawValue == "com.alamofire.networking.task.resume")
            task.resume()
            #expect(await resumed.wait())
            #expect(await completed.wait())
            let user = try #require(info.value)
            #expect(user.data == Data("Hello, World!".utf8))
            #expect(user.serialized == Data("Hello, World!".utf8))
            #expect(user.serializerIsOurs && !user.hasError && user.hasMetrics)
            #expect(
                AFNetworkingTaskDidCompleteResponseDataKey == "com.alamofire.networking.complete.finish.responsedata"
            )

            let held = m.dataTask(with: request(server, "/fault/no-answer"), completionHandler: nil)
            let heldSuspended = Expectation()
            let token = center.addObserver(forName: .AFNetworkingTaskDidSuspend, object: held, queue: nil) { _ in
                heldSuspended.fulfill()
            }
            defer { center.removeObserver(token) }
            held.resume()
            held.suspend()
            #expect(await heldSuspended.wait())
            held.cancel()
            #expect(suspended.fulfilled == 0, "the first task was never suspended")

            // The reachability notification's AF name is the same notification.
            #expect(Notification.Name.AFNetworkingReachabilityDidChange == .reachabilityDidChange)
            #expect(Notification.Name.reachabilityDidChange.rawValue == "com.alamofire.networking.reachability.change")
            #expect(AFNetworkingReachabilityNotificationStatusItem == "AFNetworkingReachabilityNotificationStatusItem")
        }

        // MARK: - The -1202 wording over TLS

        @Test(
            "a refused chain reads as AF's -1202 error naming the host (testInvalidServerTrustProducesCorrectErrorForCertificatePinning)"
        )
        func untrustedWording() async throws {
            try await ManagerWiringTests.withTLSServer { server, pki in
                let m = HTTPSessionManager(baseURL: URL(string: "https://localhost:\(server.port)/")!)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                m.responseSerializer = HTTPResponseSerializer()
                try m.setSecurityPolicy(
                    SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.untrustedRoot])
                )
                let done = Expectation()
                let failure = Box<(any Error)?>(nil)
                m.get(
                    "",
                    success: { _, _ in done.fulfill() },
                    failure: { _, e in
                        failure.value = e
                        done.fulfill()
                    }
                )
                #expect(await done.wait())
                let error = try #require(failure.value) as NSError
                #expect(error.domain == NSURLErrorDomain)
                #expect(error.code == -1202)
                #expect(
                    error.localizedDescription
                        == "The certificate for this server is invalid. You might be connecting to a server that is pretending to be “localhost” which could put your confidential information at risk."
                )
                #expect(
                    error.userInfo[NSURLErrorFailingURLErrorKey] as? URL
                        == URL(string: "https://localhost:\(server.port)/")
                )
                // The peer's trust under NSURLSession's key, as AFServerTrustErrorForServerTrust puts it.
                let trust = try #require(error.userInfo["NSURLErrorFailingURLPeerTrustErrorKey"] as? ServerTrust)
                #expect(trust.host == "localhost")
                #expect(trust.certificates == pki.valid.presentedChain)
                #expect(HawserError.failingURLPeerTrustErrorKey == "NSURLErrorFailingURLPeerTrustErrorKey")
            }
        }

        // MARK: - httpbin

        @Test(
            "against httpbin: a top-level JSON array and an array query arrive as sent; a GET, a 404 and a 204 as AF's tests expect"
        )
        func httpbin() async throws {
            let bin = try HttpbinFixture()
            defer { bin.stop() }
            let m = HTTPSessionManager(baseURL: URL(string: bin.baseURL)!)
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            m.requestSerializer = JSONRequestSerializer()
            let (posted, _) = try await m.post("post", parameters: [["key": "value"], ["other": 2]] as [Parameters])
            #expect(
                (posted as? JSONValue)?["json"] == [["key": "value"], ["other": 2]],
                "\(String(describing: posted))"
            )
            m.requestSerializer = HTTPRequestSerializer()
            let (got, _) = try await m.request(.get, "get", parameters: ["x", "y"])
            #expect((got as? JSONValue)?["args"]?["[]"] == ["x", "y"], "\(String(describing: got))")
            // testThatSuccessBlockIsCalledFor200 / testThatFailureBlockIsCalledFor404 / testThatResponseObjectIsEmptyFor204
            let (ok, response) = try await m.get("status/200")
            #expect(response.statusCode == 200 && ok == nil)
            do {
                _ = try await m.get("status/404")
                Issue.record("a 404 succeeded")
            } catch let e as SerializationError {
                #expect(e.code == .unacceptableStatusCode && e.response?.statusCode == 404)
            }
            let (empty, r204) = try await m.get("status/204")
            #expect(r204.statusCode == 204 && empty == nil)
        }
    }
}
