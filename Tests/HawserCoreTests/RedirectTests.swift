import Foundation
import HawserTestServer
import Synchronization
import Testing

@testable import HawserCore

@Suite("Redirect rules (pure)")
struct RedirectRuleTests {
    static func response(_ status: Int, _ location: String?) -> HTTPResponseHead {
        var h = HTTPHeaders()
        if let location { h.add(name: "Location", value: location) }
        return HTTPResponseHead(status: status, reasonPhrase: "", headers: h)
    }

    static func next(
        _ method: HTTPMethod,
        _ status: Int,
        from: String = "http://a.test/x/y",
        to: String? = "/z",
        body: RequestBody? = .bytes([1, 2, 3]),
        headers: HTTPHeaders = ["Content-Type": "text/plain", "Authorization": "Basic eA==", "Cookie": "a=b"],
        so: Int = 0,
        configure: (inout RedirectConfiguration) -> Void = { _ in }
    ) -> Result<HTTPClientRequest, HawserError>? {
        var r = HTTPClientRequest(method: method, url: URL(string: from)!, headers: headers, body: body)
        r.timeoutInterval = 5
        var c = RedirectConfiguration()
        configure(&c)
        return Redirect.nextRequest(after: r, response: response(status, to), redirectsSoFar: so, configuration: c)
    }

    @Test(
        "method and body per status",
        arguments: [
            // (method, status, expected method, body kept)
            (HTTPMethod.post, 301, HTTPMethod.get, false), (.post, 302, .get, false), (.post, 303, .get, false),
            (.post, 307, .post, true), (.post, 308, .post, true),
            (.put, 301, .put, true), (.put, 302, .put, true), (.put, 303, .get, false), (.put, 307, .put, true),
            (.delete, 303, .get, false), (.head, 303, .head, false), (.get, 303, .get, false), (.get, 301, .get, true),
        ]
    )
    func methodRewrite(method: HTTPMethod, status: Int, expected: HTTPMethod, keepsBody: Bool) throws {
        let next = try #require(Self.next(method, status)).get()
        #expect(next.method == expected)
        #expect((next.body != nil) == keepsBody)
        #expect(next.url.absoluteString == "http://a.test/z")
        #expect(next.timeoutInterval == 5)
        #expect(next.headers.contains(name: "Content-Type") == keepsBody, "body fields go with the body")
        #expect(next.headers["Authorization"] == "Basic eA==", "same origin keeps credentials")
    }

    @Test("not a redirect to follow: other statuses, no Location, following disabled")
    func notFollowed() {
        #expect(Self.next(.get, 300) == nil)
        #expect(Self.next(.get, 304) == nil)
        #expect(Self.next(.get, 200) == nil)
        #expect(Self.next(.get, 302, to: nil) == nil)
        #expect(Self.next(.get, 302) { $0.followsRedirects = false } == nil)
    }

    @Test(
        "a new origin drops Authorization, Cookie and Proxy-Authorization",
        arguments: [
            "http://b.test/z", "https://a.test/z", "http://a.test:8080/z",
        ]
    )
    func crossOrigin(target: String) throws {
        let headers: HTTPHeaders = [
            "Authorization": "Basic eA==", "Cookie": "a=b", "Proxy-Authorization": "Basic eQ==", "X-Keep": "1",
        ]
        let next = try #require(Self.next(.get, 302, to: target, headers: headers)).get()
        #expect(!next.headers.contains(name: "Authorization"))
        #expect(!next.headers.contains(name: "Cookie"))
        #expect(!next.headers.contains(name: "Proxy-Authorization"))
        #expect(next.headers["X-Keep"] == "1")
        #expect(next.url.absoluteString == target)
    }

    @Test("relative Locations resolve per RFC 3986; the fragment is inherited")
    func resolution() throws {
        #expect(
            try #require(Self.next(.get, 302, from: "http://a.test/x/y?q", to: "z")).get().url.absoluteString
                == "http://a.test/x/z"
        )
        #expect(
            try #require(Self.next(.get, 302, from: "http://a.test/x/y", to: "../w?k=v")).get().url.absoluteString
                == "http://a.test/w?k=v"
        )
        #expect(
            try #require(Self.next(.get, 302, from: "http://a.test/x", to: "//b.test/p")).get().url.absoluteString
                == "http://b.test/p"
        )
        #expect(
            try #require(Self.next(.get, 302, from: "http://a.test/x#frag", to: "/p")).get().url.absoluteString
                == "http://a.test/p#frag"
        )
        #expect(
            try #require(Self.next(.get, 302, from: "http://a.test/x#frag", to: "/p#own")).get().url.absoluteString
                == "http://a.test/p#own"
        )
    }

    @Test("too many redirects is an error naming the limit")
    func tooMany() throws {
        // The default is 20 (NSURLSession's on Apple platforms): the 20th redirect is followed,
        // the 21st is an error.
        #expect(RedirectConfiguration().maximumRedirects == 20)
        #expect(try !#require(Self.next(.get, 302, so: 19)).isFailure)
        let r = try #require(Self.next(.get, 302, so: 20))
        guard case .failure(let e) = r else {
            Issue.record("expected failure")
            return
        }
        #expect(e.code == .tooManyRedirects)
        #expect(e.message.contains("more than 20 redirects"))
        #expect(try #require(Self.next(.get, 302, so: 3) { $0.maximumRedirects = 3 }).isFailure)
        #expect(try !#require(Self.next(.get, 302, so: 2) { $0.maximumRedirects = 3 }).isFailure)
    }

    @Test("https → http is refused unless allowed; other schemes are refused")
    func downgradeAndSchemes() throws {
        let down = try #require(Self.next(.get, 302, from: "https://a.test/", to: "http://a.test/"))
        guard case .failure(let e) = down else {
            Issue.record("downgrade followed")
            return
        }
        #expect(e.code == .redirectRefused)
        #expect(
            try !#require(
                Self.next(.get, 302, from: "https://a.test/", to: "http://a.test/") {
                    $0.allowsInsecureDowngrade = true
                }
            ).isFailure
        )
        for target in ["ftp://a.test/f", "file:///etc/passwd", "javascript:alert(1)", "data:text/plain,hi"] {
            let r = try #require(Self.next(.get, 302, to: target))
            guard case .failure(let e) = r else {
                Issue.record("\(target) followed")
                continue
            }
            #expect(e.code == .redirectRefused)
            // The Location is a valid URL: the refusal says why it is not followed.
            #expect(e.message.contains("only http and https"), "\(e.message)")
            #expect(!e.message.contains("not a valid URL"), "\(e.message)")
        }
    }
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

extension NetworkTests {
    @Suite("Redirects against the test server", .serialized)
    struct RedirectNetworkTests {
        static func encoded(_ s: String) -> String {
            s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? s
        }

        @Test("a chain of 302s ends at the target; currentRequest and metrics follow")
        func chain() async throws {
            try await withServer { server, session in
                let delegate = RecordingDelegate()
                let task = session.execute(
                    HTTPClientRequest(url: url(server.baseURL + "/redirect/5")),
                    delegate: delegate
                )
                let rec = await delegate.wait()
                #expect(rec.completions == 1)
                #expect(rec.head?.status == 200)
                #expect(String(decoding: rec.body, as: UTF8.self) == "Hello, World!")
                #expect(rec.metrics?.redirectCount == 5)
                #expect(task.request.url.path == "/hello")
                #expect(task.originalRequest.url.path == "/redirect/5")
                #expect(server.acceptedConnections == 1, "the redirect bodies were drained and the connection reused")
            }
        }

        @Test("the response and its metrics carry each hop: URL, method, status, where it led, ordered timings")
        func history() async throws {
            try await withServer { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/redirect/3")))
                #expect(r.status == 200)
                let hops = r.redirects
                #expect(hops == r.metrics.redirects)
                #expect(hops.map(\.url.path) == ["/redirect/3", "/redirect/2", "/redirect/1"])
                #expect(hops.map(\.location.path) == ["/redirect/2", "/redirect/1", "/hello"])
                #expect(hops.map(\.statusCode) == [302, 302, 302])
                #expect(hops.map(\.method) == [.get, .get, .get])
                #expect(hops.map(\.isReusedConnection) == [false, true, true])
                #expect(r.metrics.redirectCount == hops.count)
                // Each hop starts where the one before ended; its request and head fall within it.
                var start = r.metrics.fetchStart
                for hop in hops {
                    #expect(hop.start == start)
                    let sent = try #require(hop.requestStart)
                    let answered = try #require(hop.responseStart)
                    #expect(hop.start <= sent && sent <= answered && answered <= hop.end)
                    #expect(hop.duration == hop.end - hop.start)
                    start = hop.end
                }
                #expect(try #require(r.metrics.requestStart) >= start, "the final request went out after the last hop")
                let plain = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/hello")))
                #expect(plain.redirects.isEmpty && plain.metrics.redirectCount == 0)
            }
        }

        @Test("a hop keeps the method it was requested with: POST + 303 is a POST hop, then a GET")
        func historyKeepsMethods() async throws {
            try await withServer { server, session in
                let target = server.baseURL + "/redirect-to?status=303&url=" + Self.encoded("/echo")
                let r = try await session.response(
                    for: HTTPClientRequest(method: .post, url: url(target), body: .bytes(Array("hello".utf8)))
                )
                #expect(r.headers["X-Echo-Method"] == "GET")
                #expect(r.redirects.count == 1)
                #expect(r.redirects.first?.method == .post)
                #expect(r.redirects.first?.statusCode == 303)
                #expect(r.redirects.first?.url.path == "/redirect-to")
                #expect(r.redirects.first?.location.path == "/echo")
            }
        }

        @Test("a redirect loop stops at the maximum with tooManyRedirects")
        func loop() async throws {
            try await withServer({ $0.redirects.maximumRedirects = 4 }) { server, session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/redirect-loop")))
                    Issue.record("a loop completed")
                } catch let error as HawserError {
                    #expect(error.code == .tooManyRedirects)
                    #expect(error.message.contains("4"))
                }
            }
        }

        @Test(
            "POST + 303 becomes GET without a body; POST + 307 keeps both",
            arguments: [(303, "GET", 0), (307, "POST", 5), (308, "POST", 5)]
        )
        func methodsOnTheWire(status: Int, method: String, bodyLength: Int) async throws {
            try await withServer { server, session in
                let target = server.baseURL + "/redirect-to?status=\(status)&url=" + Self.encoded("/echo")
                let r = try await session.response(
                    for: HTTPClientRequest(method: .post, url: url(target), body: .bytes(Array("hello".utf8)))
                )
                #expect(r.status == 200)
                #expect(r.headers["X-Echo-Method"] == method)
                #expect(r.headers["X-Echo-Body-Length"] == String(bodyLength))
                #expect(String(decoding: r.body, as: UTF8.self) == (bodyLength > 0 ? "hello" : ""))
            }
        }

        @Test("credentials do not follow a redirect to another origin")
        func crossOriginCredentials() async throws {
            try await withServer { server, session in
                let other = try TestServer(host: "127.0.0.1")
                defer { other.shutdown() }
                let target = server.baseURL + "/redirect-to?url=" + Self.encoded(other.baseURL + "/echo")
                let headers: HTTPHeaders = ["Authorization": "Bearer secret", "Cookie": "session=1", "X-Other": "kept"]
                let r = try await session.response(for: HTTPClientRequest(url: url(target), headers: headers))
                #expect(r.status == 200)
                #expect(r.headers["X-Echo-H-Authorization"] == nil)
                #expect(r.headers["X-Echo-H-Cookie"] == nil)
                #expect(r.headers["X-Echo-H-X-Other"] == "kept")
                #expect(r.headers["X-Echo-H-Host"] == "127.0.0.1:\(other.port)")
            }
        }

        @Test("the will-perform-redirection hook can refuse (the 3xx is the response) or rewrite")
        func hook() async throws {
            final class Hooked: RecordingDelegate, @unchecked Sendable {
                let rewrite: (@Sendable (HTTPClientRequest) -> HTTPClientRequest?)
                init(_ rewrite: @escaping @Sendable (HTTPClientRequest) -> HTTPClientRequest?) {
                    self.rewrite = rewrite
                }
                override func task(
                    _ task: RequestTask,
                    willPerformRedirection response: HTTPResponseHead,
                    newRequest: HTTPClientRequest,
                    completion: @escaping @Sendable (HTTPClientRequest?) -> Void
                ) {
                    let answer = self.rewrite(newRequest)
                    // Answer from another thread, later: the task must wait for it.
                    Thread.detachNewThread { completion(answer) }
                }
            }
            try await withServer { server, session in
                let refuse = Hooked { _ in nil }
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/redirect/1")), delegate: refuse)
                let rec = await refuse.wait()
                #expect(rec.head?.status == 302)
                #expect(rec.head?.headers["Location"] == "/hello")
                #expect(rec.completions == 1)
                #expect(rec.metrics?.redirectCount == 0)

                let rewrite = Hooked { r in
                    var r = r
                    r.url = URL(string: server.baseURL + "/echo")!
                    r.headers.add(name: "X-Rewritten", value: "yes")
                    return r
                }
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/redirect/1")), delegate: rewrite)
                let rec2 = await rewrite.wait()
                #expect(rec2.head?.status == 200)
                #expect(rec2.head?.headers["X-Echo-H-X-Rewritten"] == "yes")
            }
        }

        @Test("a target the redirect hook moves elsewhere is checked like a Location")
        func hookRewriteChecked() async throws {
            final class Moving: RecordingDelegate, @unchecked Sendable {
                let target: URL
                let extra: HTTPHeaders
                init(_ target: URL, extra: HTTPHeaders = [:]) {
                    self.target = target
                    self.extra = extra
                }
                override func task(
                    _ task: RequestTask,
                    willPerformRedirection response: HTTPResponseHead,
                    newRequest: HTTPClientRequest,
                    completion: @escaping @Sendable (HTTPClientRequest?) -> Void
                ) {
                    var r = newRequest
                    r.url = self.target
                    for (name, value) in self.extra { r.headers.replaceOrAdd(name: name, value: value) }
                    completion(r)
                }
            }
            try await withServer { server, session in
                let other = try TestServer(host: "127.0.0.1")
                defer { other.shutdown() }
                // Same-origin redirect, so the proposed request keeps the credentials; the hook
                // moves it to another origin: the carried credentials are dropped there.
                let headers: HTTPHeaders = ["Authorization": "Bearer secret", "Cookie": "session=1", "X-Other": "kept"]
                let moved = Moving(URL(string: other.baseURL + "/echo")!)
                session.execute(
                    HTTPClientRequest(url: url(server.baseURL + "/redirect/1"), headers: headers),
                    delegate: moved
                )
                let rec = await moved.wait()
                #expect(rec.head?.status == 200)
                #expect(rec.head?.headers["X-Echo-H-Host"] == "127.0.0.1:\(other.port)")
                #expect(rec.head?.headers["X-Echo-H-Authorization"] == nil)
                #expect(rec.head?.headers["X-Echo-H-Cookie"] == nil)
                #expect(rec.head?.headers["X-Echo-H-X-Other"] == "kept")

                // A credential the hook sets itself is its choice, and goes.
                let own = Moving(URL(string: other.baseURL + "/echo")!, extra: ["Authorization": "Bearer for-other"])
                session.execute(
                    HTTPClientRequest(url: url(server.baseURL + "/redirect/1"), headers: headers),
                    delegate: own
                )
                let rec2 = await own.wait()
                #expect(rec2.head?.headers["X-Echo-H-Authorization"] == "Bearer for-other")
                #expect(rec2.head?.headers["X-Echo-H-Cookie"] == nil)

                // Another scheme is refused, and the task ends once with the reason.
                let ftp = Moving(URL(string: "ftp://127.0.0.1/x")!)
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/redirect/1")), delegate: ftp)
                let rec3 = await ftp.wait()
                #expect(rec3.completions == 1)
                guard case .failure(let error)? = rec3.result else {
                    Issue.record("a redirect to ftp:// completed: \(String(describing: rec3.result))")
                    return
                }
                #expect(error.code == .redirectRefused)
                #expect(error.message.contains("ftp://127.0.0.1/x"))
            }
        }

        @Test("a 307 with a streamed body asks for a new stream; none fails the task clearly")
        func streamedBody() async throws {
            final class Streams: RecordingDelegate, @unchecked Sendable {
                let give: Bool
                init(give: Bool) { self.give = give }
                override func task(
                    _ task: RequestTask,
                    needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void
                ) {
                    completion(self.give ? .stream(length: 3) { try await $0.write([7, 8, 9]) } : nil)
                }
            }
            try await withServer { server, session in
                let target = server.baseURL + "/redirect-to?status=307&url=" + Self.encoded("/echo")
                let body = RequestBody.stream(length: 3) { try await $0.write([1, 2, 3]) }
                let yes = Streams(give: true)
                session.execute(HTTPClientRequest(method: .put, url: url(target), body: body), delegate: yes)
                let rec = await yes.wait()
                #expect(rec.head?.status == 200)
                #expect(rec.body == [7, 8, 9])

                let no = Streams(give: false)
                session.execute(HTTPClientRequest(method: .put, url: url(target), body: body), delegate: no)
                let rec2 = await no.wait()
                #expect(rec2.completions == 1)
                guard case .failure(let e)? = rec2.result else {
                    Issue.record("expected a failure")
                    return
                }
                #expect(e.code == .invalidRequest)
                #expect(e.message.contains("needNewBodyStream"))
            }
        }

        @Test("cancelling while a redirect decision is pending completes once with cancelled")
        func cancelDuringDecision() async throws {
            final class Never: RecordingDelegate, @unchecked Sendable {
                override func task(
                    _ task: RequestTask,
                    willPerformRedirection response: HTTPResponseHead,
                    newRequest: HTTPClientRequest,
                    completion: @escaping @Sendable (HTTPClientRequest?) -> Void
                ) {
                    task.cancel()
                    completion(newRequest)  // too late: the task is already cancelled
                }
            }
            try await withServer { server, session in
                let d = Never()
                session.execute(HTTPClientRequest(url: url(server.baseURL + "/redirect/2")), delegate: d)
                let rec = await d.wait()
                #expect(rec.completions == 1)
                guard case .failure(let e)? = rec.result else {
                    Issue.record("expected cancellation")
                    return
                }
                #expect(e.code == .cancelled)
                #expect(session.poolStatistics().runningTasks == 0)
            }
        }
    }
}
