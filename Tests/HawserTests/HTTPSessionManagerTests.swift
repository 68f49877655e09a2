// The intent of AFHTTPSessionManagerTests, plus interceptors and curl descriptions.
import Foundation
import Hawser
import HawserTestServer
import Testing

func makeHTTPManager(_ server: TestServer?) -> HTTPSessionManager {
    let m = HTTPSessionManager(baseURL: server.map { URL(string: $0.baseURL + "/")! })
    m.requestSerializer = QuerySerializer()
    m.responseSerializer = DataSerializer()
    return m
}

@Suite struct BaseURLTests {
    @Test(arguments: [
        ("foo", "http://example.com/v1/foo"),
        ("foo?bar=baz", "http://example.com/v1/foo?bar=baz"),
        ("/foo", "http://example.com/foo"),
        // RFC 3986 keeps the slash (AFNetworking's header comment says otherwise).
        ("foo/", "http://example.com/v1/foo/"),
        ("/foo/", "http://example.com/foo/"),
        ("http://example2.com/", "http://example2.com/"),
        ("", "http://example.com/v1/"),
    ])
    func relativeResolution(path: String, expected: String) {
        for base in ["http://example.com/v1/", "http://example.com/v1"] {  // a missing trailing slash is added
            let m = HTTPSessionManager(baseURL: URL(string: base)!)
            #expect(m.url(for: path)?.absoluteString == expected, "\(base) + \(path)")
            m.invalidateSessionCancelingTasks(true, resetSession: false)
        }
    }

    @Test func trailingSlashRule() {
        #expect(
            HTTPSessionManager(baseURL: URL(string: "http://example.com/v1")!).baseURL?.absoluteString
                == "http://example.com/v1/"
        )
        #expect(
            HTTPSessionManager(baseURL: URL(string: "http://example.com")!).baseURL?.absoluteString
                == "http://example.com",
            "no path: nothing added, as in AFNetworking"
        )
        #expect(HTTPSessionManager().url(for: "relative/only") == nil, "no base URL: a relative string is not a URL")
    }

    @Test("a relative reference with a space is not a URL: the failure is -1000 at serialization, nothing is sent")
    func relativeReferenceWithASpace() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let m = makeHTTPManager(server)
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        #expect(m.url(for: "foo bar") == nil, "NSURL's URLWithString:relativeToURL: refuses it")
        for bad in ["foo bar", "echo?q=a b", "a\\b", "http://127.0.0.1:18446744073709570171/"] {
            let done = Expectation()
            let failure = Box<(any Error)?>(nil)
            let task = m.get(
                bad,
                success: { _, _ in done.fulfill() },
                failure: { _, e in
                    failure.value = e
                    done.fulfill()
                }
            )
            #expect(task == nil, "\(bad): a task was made")
            #expect(await done.wait())
            let e = failure.value as? SerializationError
            #expect(e?.code == .invalidURL && e?.errorCode == -1000, "\(bad): \(String(describing: failure.value))")
        }
    }

    @Test func curlDescriptionQuotesEverything() {
        var r = HTTPClientRequest(method: .post, url: URL(string: "http://example.com/a?b=c")!)
        r.headers.add(name: "X-Quote", value: "it's")
        r.body = .bytes(Array("{\"k\":1}".utf8))
        #expect(
            r.curlDescription
                == #"curl -X 'POST' -H 'X-Quote: it'\''s' --data-binary '{"k":1}' 'http://example.com/a?b=c'"#
        )
        #expect(
            HTTPClientRequest(method: .head, url: URL(string: "http://h/")!).curlDescription
                == "curl --head 'http://h/'"
        )
        var binary = HTTPClientRequest(method: .put, url: URL(string: "http://h/")!)
        binary.body = .bytes([0xff, 0xfe])
        #expect(
            binary.curlDescription == "curl -X 'PUT' --data-binary @- 'http://h/' # 2 bytes of binary body on stdin"
        )
    }

    @Test func retryPolicyBacksOffExponentiallyForIdempotentMethods() async {
        let p = RetryPolicy(retryLimit: 3, exponentialBackoffBase: 2, exponentialBackoffScale: 0.5)
        let task = SessionManager().dataTask(
            with: HTTPClientRequest(url: URL(string: "http://h/")!),
            completionHandler: nil
        )
        let get = HTTPClientRequest(url: URL(string: "http://h/")!)
        let post = HTTPClientRequest(method: .post, url: URL(string: "http://h/")!)
        let lost = HawserError(.connectionLost, "reset")
        #expect(await p.retry(task, request: get, response: nil, error: lost, retryCount: 0) == .retryWithDelay(0.5))
        #expect(await p.retry(task, request: get, response: nil, error: lost, retryCount: 2) == .retryWithDelay(2))
        #expect(
            await p.retry(task, request: get, response: nil, error: lost, retryCount: 3) == .doNotRetry,
            "limit reached"
        )
        #expect(
            await p.retry(task, request: post, response: nil, error: lost, retryCount: 0) == .doNotRetry,
            "POST is not idempotent"
        )
        let busy = HawserResponse(url: get.url, statusCode: 503, headers: ["Retry-After": "7"])
        #expect(
            await p.retry(task, request: get, response: busy, error: nil, retryCount: 0) == .retryWithDelay(7),
            "Retry-After wins when longer"
        )
        let notFound = HawserResponse(url: get.url, statusCode: 404, headers: [:])
        #expect(await p.retry(task, request: get, response: notFound, error: nil, retryCount: 0) == .doNotRetry)
        #expect(
            await p.retry(task, request: get, response: nil, error: HawserError(.cancelled, "x"), retryCount: 0)
                == .doNotRetry
        )
    }
}

extension ManagerNetworkTests {
    @Suite struct HTTPSessionManagerTests {
        @Test(arguments: [HTTPMethod.get, .head, .post, .put, .patch, .delete])
        func everyVerbReachesTheServerWithParametersAndHeaders(method: HTTPMethod) async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let done = Expectation()
            let seen = Box<HawserResponse?>(nil)
            let params: Parameters = ["a": 1, "b": "x"]
            let headers: HTTPHeaders = ["X-Default": "per-request", "X-Extra": "1"]
            let success: @Sendable (DataTask, (any Sendable)?) -> Void = { task, _ in
                seen.value = task.response
                done.fulfill()
            }
            let failure: @Sendable (DataTask?, any Error) -> Void = { _, e in
                Issue.record("\(method): \(e)")
                done.fulfill()
            }
            let task: DataTask?
            switch method {
            case .get: task = m.get("echo", parameters: params, headers: headers, success: success, failure: failure)
            case .head:
                task = m.head(
                    "echo",
                    parameters: params,
                    headers: headers,
                    success: { success($0, nil) },
                    failure: failure
                )
            case .post: task = m.post("echo", parameters: params, headers: headers, success: success, failure: failure)
            case .put: task = m.put("echo", parameters: params, headers: headers, success: success, failure: failure)
            case .patch:
                task = m.patch("echo", parameters: params, headers: headers, success: success, failure: failure)
            default: task = m.delete("echo", parameters: params, headers: headers, success: success, failure: failure)
            }
            #expect(task != nil && task?.state != .suspended, "the conveniences return a resumed task")
            #expect(await done.wait())
            let r = try #require(seen.value)
            #expect(r.headers["X-Echo-Method"] == method.rawValue)
            #expect(r.headers["X-Echo-H-X-Default"] == "per-request", "per-request headers replace the serializer's")
            #expect(r.headers["X-Echo-H-X-Extra"] == "1")
            let inQuery = [HTTPMethod.get, .head, .delete].contains(method)
            #expect((r.headers["X-Echo-Target"] ?? "").hasSuffix("?a=1&b=x") == inQuery)
            #expect(r.headers["X-Echo-Body-Length"] == (inQuery ? "0" : "7"))
        }

        @Test func failureFor404AndEmptySuccessFor204() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let done = Expectation()
            let failed = Box<(DataTask?, (any Error)?)>((nil, nil))
            m.get(
                "status/404",
                success: { _, _ in done.fulfill() },
                failure: { t, e in
                    failed.value = (t, e)
                    done.fulfill()
                }
            )
            #expect(await done.wait())
            #expect((failed.value.1 as? StatusError)?.status == 404)
            #expect(failed.value.0?.response?.statusCode == 404, "the failure gets the task with its response")

            let ok = Expectation()
            let object = Box<(any Sendable)?>("unset")
            m.get(
                "status/204",
                success: { _, o in
                    object.value = o
                    ok.fulfill()
                },
                failure: { _, _ in ok.fulfill() }
            )
            #expect(await ok.wait())
            #expect((object.value as? Data)?.isEmpty == true)
        }

        @Test func serializationErrorCallsFailureOnTheCompletionQueueAndReturnsNil() async throws {
            let m = makeHTTPManager(nil)
            let queue = DispatchQueue(label: "test.failure")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 7)
            m.completionQueue = queue
            let done = Expectation()
            let seen = Box<(Bool, Bool, (any Error)?)>((false, false, nil))
            let task = m.get(
                "http://127.0.0.1:9/x",
                parameters: ["fail": true],
                success: { _, _ in done.fulfill() },
                failure: { t, e in
                    seen.value = (t == nil, DispatchQueue.getSpecific(key: key) == 7, e)
                    done.fulfill()
                }
            )
            #expect(task == nil)
            #expect(await done.wait())
            #expect(seen.value.0 && seen.value.1)
            #expect(seen.value.2 is ParameterError)

            let bad = Expectation()
            let badError = Box<(any Error)?>(nil)
            #expect(
                m.get(
                    "no base url, no scheme",
                    success: nil,
                    failure: { _, e in
                        badError.value = e
                        bad.fulfill()
                    }
                ) == nil
            )
            #expect(await bad.wait())
            let e = badError.value as? SerializationError
            #expect(
                e?.code == .invalidURL && e?.errorCode == -1000,
                "expected invalidURL (-1000), got \(String(describing: badError.value))"
            )
        }

        @Test func asyncFormsReturnValueAndResponseOrThrow() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let (value, response) = try await m.get("hello")
            #expect(response.statusCode == 200)
            #expect((value as? Data) == Data("Hello, World!".utf8))
            let head = try await m.head("hello")
            #expect(head.headers["Content-Length"] == "13")
            await #expect(throws: StatusError(status: 500)) { _ = try await m.post("status/500") }

            // Cancelling the Swift task cancels the request.
            let t = Task { try await m.get("fault/no-answer") }
            for _ in 0..<4000 where server.acceptedConnections < 2 { await Task.yield() }
            t.cancel()
            do {
                _ = try await t.value
                Issue.record("a cancelled request returned")
            } catch {
                #expect((error as? HawserError)?.code == .cancelled)
            }
        }

        @Test func retryPolicyRetriesTransientStatusesThenGivesUp() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            final class Retries: EventMonitor, @unchecked Sendable {
                let count = Box(0)
                func task(_ task: SessionTask, willRetryAfter delay: Double, error: HawserError?) {
                    self.count.mutate { $0 += 1 }
                }
            }
            let monitor = Retries()
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!, eventMonitors: [monitor])
            m.requestSerializer = QuerySerializer()
            m.responseSerializer = DataSerializer()
            m.interceptor = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0)
            await #expect(throws: StatusError(status: 503)) { _ = try await m.get("status/503") }
            #expect(monitor.count.value == 2, "retried retryLimit times")
            await #expect(throws: StatusError(status: 503)) { _ = try await m.post("status/503") }
            #expect(monitor.count.value == 2, "POST is not retried")
            await #expect(throws: StatusError(status: 404)) { _ = try await m.get("status/404") }
            #expect(monitor.count.value == 2, "404 is not transient")
        }

        @Test func authenticationRefreshRunsOnceAndReplaysWaitingRequests() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = makeHTTPManager(server)
            let refused = Box<[String?]>([])
            let auth = AuthenticationInterceptor(token: "expired") { token in
                refused.mutate { $0.append(token) }
                return "fresh"
            }
            m.interceptor = auth
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await m.get("bearer/fresh").response.statusCode }
                }
                var statuses: [Int] = []
                for try await s in group { statuses.append(s) }
                #expect(statuses == Array(repeating: 200, count: 8), "every request was replayed with the new token")
            }
            #expect(refused.value == ["expired"] && auth.refreshCount == 1, "one refresh for all the 401s")
            #expect(auth.token == "fresh")
            // A request refused with the current token refreshes once more, is replayed once, then fails.
            await #expect(throws: StatusError(status: 401)) { _ = try await m.get("bearer/other") }
            #expect(refused.value == ["expired", "fresh"])
        }
    }
}
