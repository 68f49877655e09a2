import HawserBase
import HawserCache
import HawserHTTP1

/// Receives the events of one task, on the session's event loop thread, in order:
/// interim heads (0…n), the final head (0…1), body bytes (0…n), then exactly one completion.
///
/// Callbacks run on the event loop: they must not block. To slow the response down, call
/// ``RequestTask/pauseReading()`` and later ``RequestTask/resumeReading()`` (back-pressure:
/// the loop stops reading the socket, and TCP tells the server).
public protocol ResponseDelegate: AnyObject, Sendable {
    /// An interim (1xx) response head arrived, e.g. 100 Continue or 103 Early Hints.
    func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead)
    /// The final response head arrived.
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead)
    /// Body bytes (decoded from chunked framing). The buffer is valid only during the call.
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer)
    /// Request body bytes were written to the socket.
    func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?)
    /// The task ended: with the trailers (if any) on success, or with the error. Called exactly once.
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics)

    /// A redirect (`response`, 301/302/303/307/308) is about to be followed with `newRequest`
    /// (NSURLSession's willPerformHTTPRedirection). Call `completion` once, from any thread:
    /// with `newRequest`, a changed request, or nil to refuse — then the redirect response itself
    /// is delivered as the final response. Reading pauses until it is called. Default: follow.
    func task(
        _ task: RequestTask,
        willPerformRedirection response: HTTPResponseHead,
        newRequest: HTTPClientRequest,
        completion: @escaping @Sendable (HTTPClientRequest?) -> Void
    )

    /// A 307/308 redirect must send the request body again but it was a stream, which cannot be
    /// replayed: answer a new stream, or nil to fail the task. Default: nil.
    func task(_ task: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void)

    /// The response is about to be stored in the session's HTTP cache (NSURLSession's
    /// willCacheResponse): call `completion` once with it, a changed one, or nil to not store
    /// it. The task completes without waiting. Default: store it as proposed.
    func task(
        _ task: RequestTask,
        willCacheResponse proposed: CachedResponse,
        completion: @escaping @Sendable (CachedResponse?) -> Void
    )

    /// A challenge for this task: the server's TLS chain on a new connection opened for it, or a
    /// 401/407 response. Call `completion` exactly once, from any thread; reading (or the
    /// connection) waits for it. Default: `.performDefaultHandling`.
    func task(
        _ task: RequestTask,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    )
}

extension ResponseDelegate {
    public func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead) {}
    public func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {}
    public func task(
        _ task: RequestTask,
        willPerformRedirection response: HTTPResponseHead,
        newRequest: HTTPClientRequest,
        completion: @escaping @Sendable (HTTPClientRequest?) -> Void
    ) {
        completion(newRequest)
    }
    public func task(_ task: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void) {
        completion(nil)
    }
    public func task(
        _ task: RequestTask,
        willCacheResponse proposed: CachedResponse,
        completion: @escaping @Sendable (CachedResponse?) -> Void
    ) {
        completion(proposed)
    }
    public func task(
        _ task: RequestTask,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        completion(.performDefaultHandling)
    }
}
