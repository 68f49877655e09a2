import HawserHTTP1
import Synchronization

// Streaming in the async API, on the engine's public delegate API only: a `ResponseDelegate`
// that hands the body to an `AsyncSequence`, pausing the socket (`RequestTask.pauseReading`)
// when the consumer falls behind and resuming it when the consumer catches up.

/// A response whose body is read as it arrives: the final head now, the body as an
/// `AsyncSequence` of byte chunks (``ResponseBodyStream``).
///
/// The body is single-consumer. Reading it at your own pace is the back-pressure: while at
/// most ``ResponseBodyStream/highWatermark`` bytes wait for the consumer the socket is read; past
/// that, reading stops (TCP tells the server) until the consumer takes what is buffered.
/// Dropping the body before its end, or cancelling the Swift task that iterates it, cancels the
/// request: its connection is closed, never reused with half a response in it.
public struct HTTPClientStreamingResponse: Sendable {
    /// The final response head (after redirects, authentication and the cache, as for the
    /// buffered API).
    public var head: HTTPResponseHead
    /// The body, as it arrives (content coding already undone when the session decodes).
    public var body: ResponseBodyStream
    /// The request's task: its metrics, its current request (after redirects), or to cancel it.
    public let task: RequestTask

    /// The status code.
    public var status: Int { self.head.status }
    /// The header fields.
    public var headers: HTTPHeaders { self.head.headers }
}

/// A response body as an `AsyncSequence` of byte chunks, in order, as the engine reads them.
///
/// Iteration ends (`nil`) when the body is complete, or throws the `HawserError` that broke
/// the transfer (a connection lost mid-body, a timeout, a body that fails to decode,
/// `.cancelled`) once the chunks received before it were delivered. One iterator only: a second
/// one throws `invalidRequest`.
public struct ResponseBodyStream: AsyncSequence, Sendable {
    /// A chunk of the body: the bytes of one or more reads, never empty.
    public typealias Element = [UInt8]
    /// What a broken transfer throws.
    public typealias Failure = HawserError

    /// Bytes the stream buffers for its consumer before it stops reading the socket.
    public static let highWatermark = 1024 * 1024

    /// While chunks arrive less than ``coalescingInterval`` nanoseconds after the consumer was last
    /// woken (a fast transfer), a waiting consumer is woken once this many bytes are buffered, or
    /// when that interval has passed: one thread hand-off per batch instead of one per read.
    /// A chunk after a quiet spell wakes the consumer at once.
    static let wakeBatchBytes = 512 * 1024
    static let coalescingInterval: UInt64 = 1_000_000

    /// Keeps the request alive while the sequence or its iterator exists; cancels it when both are
    /// gone before the end.
    let lifetime: StreamLifetime

    init(delegate: StreamingResponseDelegate) {
        self.lifetime = StreamLifetime(delegate)
    }

    /// The body's one iterator (a second one throws `invalidRequest` from `next()`).
    public func makeAsyncIterator() -> Iterator {
        Iterator(lifetime: self.lifetime, isFirst: self.lifetime.delegate.claimIterator())
    }

    /// The trailer fields, once the body has been read to its end (nil before, or when there were none).
    public var trailers: HTTPHeaders? { self.lifetime.delegate.completion?.trailers ?? nil }

    /// The task's metrics, once the body has been read to its end or failed.
    public var metrics: TaskMetrics? { self.lifetime.delegate.completion?.metrics }

    /// Reads the whole body into memory, failing with `limitExceeded` past `maximumBytes` (the
    /// request is then cancelled). A body whose `Content-Length` already says it is longer (when
    /// it is delivered as framed, not decoded) fails at once, before any of it is read.
    public func collect(upTo maximumBytes: Int) async throws(HawserError) -> [UInt8] {
        if let declared = self.lifetime.delegate.declaredLength, declared > maximumBytes {
            self.lifetime.delegate.cancelTask()
            throw HawserError(
                .limitExceeded,
                "the response declares a \(declared)-byte body (Content-Length), larger than \(maximumBytes) bytes; refused before reading it"
            )
        }
        var out: [UInt8] = []
        var iterator = self.makeAsyncIterator()
        while let chunk = try await iterator.next(isolation: #isolation) {
            if out.count + chunk.count > maximumBytes {
                self.lifetime.delegate.cancelTask()
                throw HawserError(.limitExceeded, "the response body is larger than \(maximumBytes) bytes")
            }
            if out.isEmpty { out = chunk } else { out.append(contentsOf: chunk) }
        }
        return out
    }

    /// The body's iterator. Chunks that arrived while the consumer was busy are taken in one batch
    /// and handed out one by one, without a lock per chunk.
    public struct Iterator: AsyncIteratorProtocol {
        let lifetime: StreamLifetime
        let isFirst: Bool
        private var batch: [[UInt8]] = []
        private var index = 0

        init(lifetime: StreamLifetime, isFirst: Bool) {
            self.lifetime = lifetime
            self.isFirst = isFirst
        }

        /// The next chunk; nil at the end of the body (and after the error, once thrown).
        /// Waits for the network when nothing is buffered; cancelling the waiting task cancels
        /// the request.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(HawserError) -> [UInt8]? {
            guard self.isFirst else {
                throw HawserError(.invalidRequest, "a response body can be iterated once, by one iterator")
            }
            if self.index < self.batch.count {
                return self.takeFromBatch()
            }
            self.batch.removeAll(keepingCapacity: true)
            self.index = 0
            let delegate = self.lifetime.delegate
            if Task.isCancelled { delegate.cancelTask() }
            switch await delegate.nextBatch(isolation: actor) {
            case .success(let chunks):
                guard let chunks else { return nil }
                self.batch = chunks
                return self.takeFromBatch()
            case .failure(let error):
                throw error
            }
        }

        /// The next chunk, as ``next(isolation:)``.
        public mutating func next() async throws(HawserError) -> [UInt8]? {
            try await self.next(isolation: nil)
        }

        private mutating func takeFromBatch() -> [UInt8] {
            // Hand the chunk over without keeping a second reference (its buffer is freed as soon
            // as the consumer drops it).
            var chunk: [UInt8] = []
            swap(&chunk, &self.batch[self.index])
            self.index += 1
            return chunk
        }
    }
}

/// Cancels the request when the last copy of a body (sequence or iterator) goes away before its end.
final class StreamLifetime: Sendable {
    let delegate: StreamingResponseDelegate
    init(_ delegate: StreamingResponseDelegate) { self.delegate = delegate }
    deinit { self.delegate.consumerGone() }
}

/// The `ResponseDelegate` behind ``HTTPClientStreamingResponse``. Callbacks run on the loop and
/// never block: a chunk is buffered (kept as it is when the engine gives it away, copied out of
/// the engine's buffer otherwise), or handed straight to a waiting consumer.
/// The consumer's side runs on any thread; the two meet under one lock.
final class StreamingResponseDelegate: OwnedBodyDelegate, @unchecked Sendable {
    typealias HeadResult = Result<HTTPResponseHead, HawserError>
    /// A batch of chunks (never empty), nil at the end, or the error that ended the body.
    typealias BatchResult = Result<[[UInt8]]?, HawserError>

    struct State {
        /// The task, once known (the caller sets it after `execute`; callbacks may come first).
        var task: RequestTask?
        /// A cancel asked for before the task was known.
        var cancelPending = false
        var headWaiter: UnsafeContinuation<HeadResult, Never>?
        var headResult: HeadResult?
        var chunks: [[UInt8]] = []
        var bufferedBytes = 0
        var paused = false
        var bodyWaiter: UnsafeContinuation<BatchResult, Never>?
        var completion: (trailers: HTTPHeaders?, metrics: TaskMetrics)?
        var failure: HawserError?
        var ended = false
        /// The end (or the error) was handed to the consumer; later calls return nil.
        var endDelivered = false
        var consumerGone = false
        var iteratorClaimed = false
        /// When the consumer was last handed chunks by the loop (monotonic ns).
        var lastWake: UInt64 = 0
        /// A wake is deferred (coalescing): the loop's timer will hand the batch over.
        var wakeDeferred = false
        /// Body bytes received so far, and how many the head announced (nil: unknown, or a
        /// content coding is being undone), to size the chunks a fast transfer gathers into.
        var received = 0
        var expected: Int?
        /// Body bytes the engine gave away (``OwnedBodyDelegate``) rather than had copied.
        var ownedBytes = 0
    }

    let state = Mutex(State())
    let highWatermark: Int

    init(highWatermark: Int = ResponseBodyStream.highWatermark) {
        self.highWatermark = highWatermark
    }

    // MARK: Consumer side (any thread)

    /// Records the task (from `Session.execute`), and cancels it if a cancel came first.
    func attach(_ task: RequestTask) {
        let cancelNow = self.state.withLock { s -> Bool in
            if s.task == nil && !s.ended { s.task = task }
            return s.cancelPending
        }
        if cancelNow { task.cancel() }
    }

    /// The body length the head declared, when the body is delivered as framed (nil: unknown).
    var declaredLength: Int? { self.state.withLock { $0.expected } }

    func cancelTask() {
        let task = self.state.withLock { s -> RequestTask? in
            if s.task == nil { s.cancelPending = true }
            return s.task
        }
        task?.cancel()
    }

    func waitForHead(isolation actor: isolated (any Actor)?) async -> HeadResult {
        await withUnsafeContinuation(isolation: actor) { (cont: UnsafeContinuation<HeadResult, Never>) in
            let ready = self.state.withLock { s -> HeadResult? in
                if let r = s.headResult { return r }
                s.headWaiter = cont
                return nil
            }
            if let ready { cont.resume(returning: ready) }
        }
    }

    func claimIterator() -> Bool {
        self.state.withLock { s in
            if s.iteratorClaimed { return false }
            s.iteratorClaimed = true
            return true
        }
    }

    var completion: (trailers: HTTPHeaders?, metrics: TaskMetrics)? {
        self.state.withLock { $0.completion }
    }

    /// Everything buffered, or waits for the next chunk, the end or the error. Cancelling the
    /// waiting Swift task cancels the request (which then ends the wait with `.cancelled`).
    func nextBatch(isolation actor: isolated (any Actor)?) async -> BatchResult {
        if let ready = self.takeReady() { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (cont: UnsafeContinuation<BatchResult, Never>) in
                var resume: (() -> Void)? = nil
                let ready = self.state.withLock { s -> BatchResult? in
                    if let r = Self.take(&s, resume: &resume) { return r }
                    s.bodyWaiter = cont
                    return nil
                }
                resume?()
                if let ready { cont.resume(returning: ready) }
            }
        } onCancel: {
            self.cancelTask()
        }
    }

    private func takeReady() -> BatchResult? {
        var resume: (() -> Void)? = nil
        let r = self.state.withLock { Self.take(&$0, resume: &resume) }
        resume?()
        return r
    }

    /// What the consumer can have now, if anything; sets `resume` when reading must restart.
    private static func take(_ s: inout State, resume: inout (() -> Void)?) -> BatchResult? {
        if !s.chunks.isEmpty {
            var out: [[UInt8]] = []
            swap(&out, &s.chunks)
            s.bufferedBytes = 0
            s.wakeDeferred = false
            if s.paused, let task = s.task {
                s.paused = false
                resume = { task.resumeReading() }
            }
            return .success(out)
        }
        guard s.ended else { return nil }
        if s.endDelivered { return .success(nil) }
        s.endDelivered = true
        if let e = s.failure { return .failure(e) }
        return .success(nil)
    }

    /// The sequence and its iterator are gone: cancel the request if its body has not ended, and
    /// free what is buffered.
    func consumerGone() {
        let task = self.state.withLock { s -> RequestTask? in
            s.consumerGone = true
            s.chunks = []
            s.bufferedBytes = 0
            return s.ended ? nil : s.task
        }
        task?.cancel()
    }

    // MARK: Delegate side (the event loop)

    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        let waiter = self.state.withLock { s -> UnsafeContinuation<HeadResult, Never>? in
            if s.task == nil { s.task = task }
            s.headResult = .success(head)
            s.expected = task.deliveredBodyLength(of: head).map { Int(clamping: $0) }
            defer { s.headWaiter = nil }
            return s.headWaiter
        }
        waiter?.resume(returning: .success(head))
    }

    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        if bytes.isEmpty { return }
        self.receive(task, count: bytes.count) { s, gathering in Self.append(bytes, to: &s, gathering: gathering) }
    }

    var takesBodyChunks: Bool { true }

    /// A read the engine gave away (``OwnedBodyDelegate``): buffered as it is, not copied.
    func task(_ task: RequestTask, didReceiveBodyChunk chunk: [UInt8]) {
        if chunk.isEmpty { return }
        self.receive(task, count: chunk.count) { s, _ in
            s.chunks.append(chunk)
            s.bufferedBytes += chunk.count
            s.received += chunk.count
            s.ownedBytes += chunk.count
        }
    }

    /// Buffers `count` body bytes (`buffer` adds them to the state, under the lock), then wakes
    /// the consumer, pauses reading past the high-water mark, or arms the coalescing timer.
    @inline(__always)
    private func receive(_ task: RequestTask, count: Int, _ buffer: (inout State, _ gathering: Bool) -> Void) {
        var pause = false
        var armTimer = false
        var wake: (UnsafeContinuation<BatchResult, Never>, [[UInt8]])?
        self.state.withLock { s in
            if s.consumerGone { return }
            // A waiting consumer is woken now after a quiet spell or once a batch is full; while
            // chunks stream in, a few accumulate first (the timer bounds the delay).
            var wakeNow = false
            var now: UInt64 = 0
            if s.bodyWaiter != nil {
                now = TaskMetrics.now()
                wakeNow =
                    s.bufferedBytes + count >= ResponseBodyStream.wakeBatchBytes
                    || now &- s.lastWake > ResponseBodyStream.coalescingInterval
            }
            buffer(&s, !wakeNow)
            if s.bodyWaiter != nil {
                if wakeNow {
                    wake = Self.handOver(&s, now: now)
                } else if !s.wakeDeferred {
                    s.wakeDeferred = true
                    armTimer = true
                }
            } else if !s.paused && s.bufferedBytes >= self.highWatermark {
                s.paused = true
                pause = true
            }
        }
        if let (waiter, batch) = wake { waiter.resume(returning: .success(batch)) }
        if pause { task.pauseReading() }
        if armTimer {
            _ = task.eventLoop.schedule(in: ResponseBodyStream.coalescingInterval) { [self] in self.deferredWake() }
        }
    }

    /// Copies a read into the buffer. While reads are being gathered (a fast transfer), they go
    /// into the last buffered chunk as long as it has room, and a new chunk reserves room for a
    /// batch: fewer, larger allocations, whose frees do not keep shrinking and regrowing the
    /// heap (glibc trims a free top above 128 KiB, and every page is then faulted in again). A
    /// read handed over at once, or one among reads the engine gives away (a chunked body's
    /// framing read), is copied at its own size.
    private static func append(_ bytes: UnsafeRawBufferPointer, to s: inout State, gathering: Bool) {
        let last = s.chunks.count - 1
        if last >= 0, s.chunks[last].capacity - s.chunks[last].count >= bytes.count {
            s.chunks[last].append(contentsOf: bytes)
        } else if gathering && s.ownedBytes == 0 {
            // Room for a batch, but never more than the body has left (a small body is copied at
            // its size), and for a body of unknown length only once it has proved large.
            let batch = ResponseBodyStream.wakeBatchBytes
            let room = s.expected.map { min(batch, $0 - s.received) } ?? (s.received >= batch / 4 ? batch : 0)
            var chunk: [UInt8] = []
            chunk.reserveCapacity(max(bytes.count, room))
            chunk.append(contentsOf: bytes)
            s.chunks.append(chunk)
        } else {
            s.chunks.append([UInt8](bytes))
        }
        s.bufferedBytes += bytes.count
        s.received += bytes.count
    }

    /// Everything buffered, for the waiting consumer (under the lock).
    private static func handOver(_ s: inout State, now: UInt64) -> (UnsafeContinuation<BatchResult, Never>, [[UInt8]])?
    {
        guard let w = s.bodyWaiter, !s.chunks.isEmpty else { return nil }
        s.bodyWaiter = nil
        var batch: [[UInt8]] = []
        swap(&batch, &s.chunks)
        s.bufferedBytes = 0
        s.lastWake = now
        s.wakeDeferred = false
        return (w, batch)
    }

    /// The coalescing timer: hands over what accumulated, if the consumer still waits for it.
    private func deferredWake() {
        let wake = self.state.withLock { s -> (UnsafeContinuation<BatchResult, Never>, [[UInt8]])? in
            guard s.wakeDeferred else { return nil }
            s.wakeDeferred = false
            return Self.handOver(&s, now: TaskMetrics.now())
        }
        if let (waiter, batch) = wake { waiter.resume(returning: .success(batch)) }
    }

    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        var headWaiter: UnsafeContinuation<HeadResult, Never>?
        var headResult: HeadResult?
        var bodyWaiter: UnsafeContinuation<BatchResult, Never>?
        var bodyResult: BatchResult?
        self.state.withLock { s in
            s.ended = true
            // Completed: the task no longer needs us, nor we it (this breaks the task ↔ delegate cycle).
            s.task = nil
            s.paused = false
            s.completion = (try? result.get(), metrics)
            if case .failure(let e) = result { s.failure = e }
            if s.headResult == nil {
                switch result {
                case .failure(let e):
                    s.headResult = .failure(e)
                case .success:
                    s.headResult = .failure(
                        HawserError(.protocolError, "the response ended without a head", url: task.request.url)
                    )
                }
                headWaiter = s.headWaiter
                s.headWaiter = nil
                headResult = s.headResult
            }
            if let w = s.bodyWaiter {
                s.bodyWaiter = nil
                bodyWaiter = w
                var none: (() -> Void)? = nil
                bodyResult = Self.take(&s, resume: &none)
            }
        }
        if let headWaiter, let headResult { headWaiter.resume(returning: headResult) }
        if let bodyWaiter, let bodyResult { bodyWaiter.resume(returning: bodyResult) }
    }
}

extension Session {
    /// Executes `request` and returns as soon as the final response head arrived, with the body
    /// to read as an `AsyncSequence` of byte chunks (back-pressure: the socket is read only as
    /// fast as the body is consumed, with a small buffer between).
    ///
    /// Throws what failed before the head (resolution, connection, TLS, timeouts, redirects…).
    /// Cancelling the calling Swift task before the head cancels the request; afterwards, cancel
    /// the task iterating the body, or drop the body.
    public func streamingResponse(
        for request: HTTPClientRequest
    ) async throws(HawserError) -> HTTPClientStreamingResponse {
        let delegate = StreamingResponseDelegate()
        let result = await withTaskCancellationHandler {
            let task = self.execute(request, delegate: delegate)
            delegate.attach(task)
            if Task.isCancelled { task.cancel() }
            return (task, await delegate.waitForHead(isolation: #isolation))
        } onCancel: {
            delegate.cancelTask()
        }
        switch result.1 {
        case .success(let head):
            return HTTPClientStreamingResponse(head: head, body: ResponseBodyStream(delegate: delegate), task: result.0)
        case .failure(let error):
            throw error
        }
    }
}

extension RequestBody {
    /// A body read from an `AsyncSequence` of byte chunks (`[UInt8]`, `ArraySlice<UInt8>`, …),
    /// each written as it comes with back-pressure: the next chunk is requested once the previous
    /// one reached the socket. With `length` the body is sent with `Content-Length` and must be
    /// exactly that long; without it, chunked. An error the sequence throws fails the request with
    /// `invalidRequest`, the sequence's error as its `underlying`.
    ///
    /// The sequence is iterated once per send: a redirect that must resend the body (307/308)
    /// asks the delegate for a new one, as for any stream.
    public static func stream<Bytes: AsyncSequence & Sendable>(_ chunks: Bytes, length: Int64? = nil) -> RequestBody
    where Bytes.Element: Collection, Bytes.Element.Element == UInt8 {
        .stream(length: length) { writer in
            do {
                for try await chunk in chunks {
                    if let bytes = chunk as? [UInt8] {
                        try await writer.write(bytes)
                    } else {
                        try await writer.write(Array(chunk))
                    }
                }
            } catch let error as HawserError {
                throw error
            } catch {
                throw HawserError(.invalidRequest, "the request body sequence failed: \(error)", underlying: error)
            }
        }
    }
}
