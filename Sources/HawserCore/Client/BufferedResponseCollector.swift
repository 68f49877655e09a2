import HawserBase
import HawserHTTP1

/// Collects a response in memory for the buffered APIs. Loop-confined.
///
/// It never holds more than `limit` bytes, nor reserves more: a body that declares more (its
/// Content-Length, when the delegate gets the body as framed) is refused at the head, before a
/// byte of it is read, and the connection is closed; a body of unknown length (chunked,
/// close-delimited, decoded) is refused as soon as one more byte would go past the limit, and
/// the buffer grows by doubling but never past the limit.
///
/// `@unchecked Sendable` because `ResponseDelegate` is `Sendable`: its fields are used only on
/// its task's loop (the delegate callbacks run there); they are not in a `LoopBound` because the
/// body grows per chunk and a get/set box would copy it on each append.
final class BufferedResponseCollector: ResponseDelegate, @unchecked Sendable {
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private let limit: Int
    private let completion: @Sendable (Result<HTTPClientResponse, HawserError>) -> Void

    init(limit: Int, completion: @escaping @Sendable (Result<HTTPClientResponse, HawserError>) -> Void) {
        self.limit = limit
        self.completion = completion
    }

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.head = head
        guard let length = task.deliveredBodyLength(of: head), length > 0 else { return }
        if length > Int64(self.limit) {
            task.fail(
                HawserError(
                    .limitExceeded,
                    "the response declares a \(length)-byte body (Content-Length), larger than maximumBufferedBodySize (\(self.limit) bytes); refused before reading it"
                )
            )
            return
        }
        self.body.reserveCapacity(Int(length))
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        let needed = self.body.count + bytes.count
        if needed > self.limit {
            task.fail(
                HawserError(
                    .limitExceeded,
                    "the response body is larger than maximumBufferedBodySize (\(self.limit) bytes): more than that arrived"
                )
            )
            return
        }
        if needed > self.body.capacity {
            // Grow as append would (doubling), but never reserve past the limit.
            self.body.reserveCapacity(min(self.limit, max(needed, 2 * self.body.capacity)))
        }
        self.body.append(contentsOf: bytes)
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        switch result {
        case .success:
            guard let head = self.head else {
                self.completion(
                    .failure(HawserError(.protocolError, "the response ended without a head", url: task.request.url))
                )
                return
            }
            self.completion(.success(HTTPClientResponse(head: head, body: self.body, metrics: metrics)))
        case .failure(let e):
            self.completion(.failure(e))
        }
        self.body = []
    }
}
