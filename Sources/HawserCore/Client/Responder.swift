import HawserBase
import HawserHTTP1
import HawserPosix
import Synchronization

// Test doubles for users: a responder the session asks before any IO (URLProtocol's role for
// Alamofire users), scripted per URL or answered by a closure, with delays on the loop's clock
// and failures. Loop-confined where it touches a task.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Answers a session's requests in-process, before any IO: no name is resolved, no socket is
/// opened, nothing is read from the cache (``SessionConfiguration/responder``).
///
/// The session asks it once per task, on its event loop, with the request as it would go on the
/// wire: the caller's fields and those the session adds (`Host`, `User-Agent`, `Cookie` from the
/// jar, `Accept-Encoding`). A non-nil answer is the task's outcome; nil lets the request go to
/// the network as usual. Keep `answer(to:)` quick: it runs on the loop. A body in memory is in
/// the request (`RequestBody.bytes`); a streamed body's producer is not run for a stubbed answer.
///
/// ``StubResponder`` is the scripted one (routes per URL and method, a closure fallback, the
/// requests it saw). For what a stubbed answer goes through and what it skips, see
/// ``StubAnswer``.
public protocol HTTPResponder: Sendable {
    /// The answer to `request`, or nil to send it to the network.
    func answer(to request: HTTPClientRequest) -> StubAnswer?
}

/// A response or a failure a ``HTTPResponder`` gives a task instead of the network, after an
/// optional delay.
///
/// What it goes through: the delay on the session loop's clock (a `ManualClock` loop moves it in
/// virtual time) bounded by the task's timeouts (a delay past `timeoutIntervalForRequest` or
/// `timeoutIntervalForResource` fails the task with `idleTimeout` or `resourceTimeout` at that
/// moment, as a silent server would); `Set-Cookie` stored in the session's cookie jar (unless the
/// request or the configuration turns cookies off); the task's delegate (head, body, one
/// completion), so every layer above it — the buffered APIs, streaming responses, the
/// `SessionManager`'s response serializers and their status and content-type validation — sees it
/// as a network response; cancellation and the session's shutdown. What it skips: connections
/// and their metrics (a stubbed task's `TaskMetrics` has its start and end marks only, no
/// bytes), content decoding (give the body decoded), the HTTP cache, 401/407 challenges and
/// redirects (a 3xx answer is the final response; script the final one).
public struct StubAnswer: Sendable {
    /// What the task gets.
    public enum Outcome: Sendable {
        /// A response: its head and its whole body.
        case response(HTTPResponseHead, body: [UInt8])
        /// The task fails with this error.
        case failure(HawserError)
    }

    /// What the task gets.
    public var outcome: Outcome
    /// Seconds on the session loop's clock before the outcome (0: on the next turn of the loop).
    public var delay: Double
    /// The body is handed to the delegate in pieces of at most this many bytes, a piece a turn of
    /// the loop, as a network response would arrive (nil: in one piece).
    public var chunkSize: Int?

    /// An answer of `outcome` after `delay` seconds.
    public init(_ outcome: Outcome, delay: Double = 0, chunkSize: Int? = nil) {
        self.outcome = outcome
        self.delay = delay
        self.chunkSize = chunkSize
    }

    /// A response of `status` with `headers` and `body`, after `delay` seconds. A
    /// `Content-Length` is not added: the body is the body, whatever the fields say.
    public static func response(
        status: Int,
        headers: HTTPHeaders = [:],
        body: [UInt8] = [],
        delay: Double = 0
    ) -> StubAnswer {
        StubAnswer(.response(HTTPResponseHead(status: status, headers: headers), body: body), delay: delay)
    }

    /// A response of `status` with `headers` and a UTF-8 `body`, after `delay` seconds.
    public static func response(
        status: Int,
        headers: HTTPHeaders = [:],
        body: String,
        delay: Double = 0
    ) -> StubAnswer {
        .response(status: status, headers: headers, body: Array(body.utf8), delay: delay)
    }

    /// A 200 with `Content-Type: application/json` and `json` as the body, after `delay` seconds.
    public static func json(_ json: String, status: Int = 200, delay: Double = 0) -> StubAnswer {
        .response(status: status, headers: ["Content-Type": "application/json"], body: json, delay: delay)
    }

    /// The task fails with `error` after `delay` seconds (its URL filled in when it has none).
    public static func failure(_ error: HawserError, delay: Double = 0) -> StubAnswer {
        StubAnswer(.failure(error), delay: delay)
    }

    /// The task fails with a `code` error saying `message` after `delay` seconds:
    /// `.cannotConnect` for a refused connection, `.connectionLost` for a peer that went away,
    /// `.cannotResolveHost`, `.idleTimeout`, …
    public static func failure(_ code: HawserError.Code, _ message: String, delay: Double = 0) -> StubAnswer {
        StubAnswer(.failure(HawserError(code, message)), delay: delay)
    }

    /// This answer after `seconds` more.
    public func delayed(by seconds: Double) -> StubAnswer {
        var copy = self
        copy.delay += seconds
        return copy
    }

    /// This answer with its body handed over `size` bytes at a time.
    public func inChunks(of size: Int) -> StubAnswer {
        var copy = self
        copy.chunkSize = max(1, size)
        return copy
    }
}

/// A scripted ``HTTPResponder``: routes by method and URL, each answering with one answer or a
/// sequence of them, a closure for what no route matches, and a record of the requests it saw.
/// Thread-safe: routes may be added while a session uses it.
///
/// A route's pattern is either a path (it starts with `/`) compared with the request's path, or
/// an absolute URL compared with the request's URL; with a `?` in it the query is compared too,
/// without one the request's query is ignored. A fragment is never compared. The route added
/// last wins when several match. A request no route and no closure answers fails with
/// `resourceUnavailable` naming it (``unmatched``), so a test never reaches the network by
/// mistake; set ``unmatched`` to ``Unmatched/network`` to let such requests through.
///
/// ```swift
/// let stub = StubResponder()
/// stub.on(.get, "/users/1", .json(#"{"id":1}"#))
/// stub.on(.post, "https://api.example.com/login", [.failure(.cannotConnect, "refused"), .json("{}")])
/// var configuration = SessionConfiguration()
/// configuration.responder = stub
/// ```
public final class StubResponder: HTTPResponder {
    /// What happens to a request that no route and no closure answers.
    public enum Unmatched: Sendable {
        /// It fails with `resourceUnavailable` naming the method and URL.
        case fail
        /// It goes to the network.
        case network
    }

    private struct Route {
        var method: HTTPMethod?
        var pattern: String
        var answers: [StubAnswer]
        var used = 0
    }

    private struct State {
        var routes: [Route] = []
        var handler: (@Sendable (HTTPClientRequest) -> StubAnswer?)?
        var unmatched: Unmatched = .fail
        var requests: [HTTPClientRequest] = []
    }

    private let state: Mutex<State>

    /// A responder with no routes; `handler`, if given, answers what no route matches.
    public init(unmatched: Unmatched = .fail, _ handler: (@Sendable (HTTPClientRequest) -> StubAnswer?)? = nil) {
        self.state = Mutex(State(handler: handler, unmatched: unmatched))
    }

    /// What happens to a request no route and no closure answers.
    public var unmatched: Unmatched {
        get { self.state.withLock { $0.unmatched } }
        set { self.state.withLock { $0.unmatched = newValue } }
    }

    /// Answers requests of any method that match `pattern` with `answer`, every time.
    public func on(_ pattern: String, _ answer: StubAnswer) {
        self.add(nil, pattern, [answer])
    }

    /// Answers requests of any method that match `pattern` with `answers` in turn: the first
    /// request gets the first, and so on; the last one answers every request after it (a retry
    /// test: `[.failure(.connectionLost, "reset"), .json("{}")]`). An empty list answers every
    /// request with an `invalidRequest` failure saying so.
    public func on(_ pattern: String, _ answers: [StubAnswer]) {
        self.add(nil, pattern, answers)
    }

    /// Answers `method` requests that match `pattern` with `answer`, every time.
    public func on(_ method: HTTPMethod, _ pattern: String, _ answer: StubAnswer) {
        self.add(method, pattern, [answer])
    }

    /// Answers `method` requests that match `pattern` with `answers` in turn, as the list form
    /// without a method does.
    public func on(_ method: HTTPMethod, _ pattern: String, _ answers: [StubAnswer]) {
        self.add(method, pattern, answers)
    }

    private func add(_ method: HTTPMethod?, _ pattern: String, _ answers: [StubAnswer]) {
        self.state.withLock { $0.routes.append(Route(method: method, pattern: pattern, answers: answers)) }
    }

    /// Answers what no route matches with `handler` (nil from it: ``unmatched`` decides).
    public func otherwise(_ handler: @escaping @Sendable (HTTPClientRequest) -> StubAnswer?) {
        self.state.withLock { $0.handler = handler }
    }

    /// Every request the responder was asked about, in order, as it would have gone on the wire.
    public var requests: [HTTPClientRequest] { self.state.withLock { $0.requests } }

    /// Forgets the routes, the closure and the recorded requests.
    public func reset() {
        self.state.withLock { $0 = State(unmatched: $0.unmatched) }
    }

    /// The answer of the last route added that matches, else of the closure, else per ``unmatched``.
    public func answer(to request: HTTPClientRequest) -> StubAnswer? {
        let (routed, handler, unmatched) = self.state.withLock {
            s -> (StubAnswer?, (@Sendable (HTTPClientRequest) -> StubAnswer?)?, Unmatched) in
            s.requests.append(request)
            for i in s.routes.indices.reversed() where Self.matches(s.routes[i], request) {
                let route = s.routes[i]
                s.routes[i].used += 1
                guard !route.answers.isEmpty else {
                    let e = HawserError(
                        .invalidRequest,
                        "StubResponder: the route '\(route.pattern)' has no answers",
                        url: request.url
                    )
                    return (.failure(e), nil, s.unmatched)
                }
                return (route.answers[min(route.used, route.answers.count - 1)], nil, s.unmatched)
            }
            return (nil, s.handler, s.unmatched)
        }
        if let routed { return routed }
        if let answer = handler?(request) { return answer }
        switch unmatched {
        case .network:
            return nil
        case .fail:
            return .failure(
                HawserError(
                    .resourceUnavailable,
                    "StubResponder: no route answers \(request.method) \(request.url.absoluteString) (add a route with on(_:_:), or set unmatched to .network)",
                    url: request.url
                )
            )
        }
    }

    private static func matches(_ route: Route, _ request: HTTPClientRequest) -> Bool {
        if let method = route.method, method != request.method { return false }
        let url = request.url
        var pattern = Substring(route.pattern)
        if let hash = pattern.firstIndex(of: "#") { pattern = pattern[..<hash] }
        let withQuery = pattern.contains("?")
        let query = url.query(percentEncoded: true).map { "?" + $0 } ?? ""
        if pattern.hasPrefix("/") {
            let path = url.path(percentEncoded: true)
            return pattern == (withQuery ? path + query : path)
        }
        var text = url.absoluteString
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        if !withQuery, let q = text.firstIndex(of: "?") { text = String(text[..<q]) }
        return pattern == text
    }
}

// MARK: - The task's side

extension RequestTask {
    /// Asks the session's responder about this task, before the cache and the pool. True when it
    /// answered: the machine is then answering from the responder, and the answer is delivered
    /// on a later turn of the loop, after its delay (in the task's timer, which a cancel or a
    /// failure releases).
    func answerFromResponder(_ responder: any HTTPResponder) -> Bool {
        guard let answer = responder.answer(to: self.cacheRequest) else { return false }
        self.machine.answeredByResponder()
        let delay = SessionContext.nanos(answer.delay)
        // A delay that outlasts a timeout is a server that stays silent: the timeout wins.
        var at = delay
        var outcome = answer.outcome
        if delay >= self.machine.timeouts.idle || delay >= self.machine.timeouts.total {
            if self.machine.timeouts.idle <= self.machine.timeouts.total {
                at = self.machine.timeouts.idle
                outcome = .failure(
                    HawserError(
                        .idleTimeout,
                        "no data moved for \(Double(at) / 1e9) s (the idle timeout, timeoutIntervalForRequest): the responder's answer came later"
                    )
                )
            } else {
                at = self.machine.timeouts.total
                outcome = .failure(
                    HawserError(
                        .resourceTimeout,
                        "the total deadline passed (timeoutIntervalForResource, \(Double(at) / 1e9) s): the responder's answer came later"
                    )
                )
            }
        }
        let chunk = answer.chunkSize
        if at == 0 {
            // Never inside `execute`: the caller gets its task handle first, as from the network.
            self.eventLoop.executeInLoop { [self] in self.deliverStub(outcome, chunkSize: chunk) }
        } else {
            self.timer = self.eventLoop.scheduleInLoop(in: at) { [self] in
                self.timer = nil
                self.deliverStub(outcome, chunkSize: chunk)
            }
        }
        return true
    }

    private func deliverStub(_ outcome: StubAnswer.Outcome, chunkSize: Int?) {
        guard self.machine.answersFromResponder else { return }  // cancelled or failed meanwhile
        switch outcome {
        case .failure(let error):
            self.fail(error)
        case .response(let head, let body):
            if self.request.shouldHandleCookies ?? self.context.httpShouldSetCookies,
                let jar = self.context.httpCookieStorage, head.headers.contains(name: "Set-Cookie")
            {
                jar.setCookies(fromResponseHeaders: head.headers, for: self.request.url)
            }
            self.metrics.responseStart = self.eventLoop.now
            self.delegate.task(self, didReceiveHead: head)
            self.deliverStubBody(body, from: 0, chunkSize: max(1, chunkSize ?? max(body.count, 1)))
        }
    }

    private func deliverStubBody(_ body: [UInt8], from offset: Int, chunkSize: Int) {
        guard self.machine.answersFromResponder else { return }  // the delegate failed or cancelled it
        if self.request.method != .head, offset < body.count {
            let end = min(body.count, offset + chunkSize)
            body.withUnsafeBytes {
                self.delegate.task(self, didReceiveBody: UnsafeRawBufferPointer(rebasing: $0[offset..<end]))
            }
            if end < body.count {
                self.eventLoop.executeInLoop { [self] in self.deliverStubBody(body, from: end, chunkSize: chunkSize) }
                return
            }
        }
        self.machine.responderDelivered(into: &self.pool.requestQueue.scratch)
        self.runActions()
    }
}
