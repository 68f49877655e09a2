// The IO shell around HTTP1ConnectionStateMachine: a non-blocking socket, a reusable read
// buffer, the response parser and a gathered-write queue. Loop-confined. Every decision
// about reuse, retry and close comes from the state machine; this file only runs actions.
import CHawser
import HawserHTTP1

#if canImport(Glibc)
import Glibc
#endif

final class HTTP1Connection: EventLoopIOHandler {
    struct ConnectTimings {
        var domainLookupStart: UInt64?
        var domainLookupEnd: UInt64?
        var connectStart: UInt64?
        var connectEnd: UInt64?
        var secureConnectionStart: UInt64?
        var secureConnectionEnd: UInt64?
        var tlsResumed: Bool?
        var tlsProtocol: String?
        var tlsCipherSuite: String?
        var tlsALPN: String?
    }

    private struct PendingWrite {
        var bytes: [UInt8]
        var offset = 0
        /// How many of `bytes` are request-body bytes; they are always the tail of `bytes`
        /// (a head with a small body appended, or body only). For upload progress.
        var bodyBytes = 0

        /// Body bytes among `bytes[from..<to]`.
        func bodyBytes(from: Int, to: Int) -> Int {
            max(0, to - max(from, self.bytes.count - self.bodyBytes))
        }
        var completion: ((HawserError?) -> Void)?
    }

    let fd: Int32
    /// The TLS session over `fd`, for https; nil for plain http.
    private let tls: TLSStream?
    /// A TLS read that needs the socket writable, or a TLS write that needs it readable
    /// (renegotiation-like record flows); the next event of that kind retries the other side.
    private var tlsReadWantsWrite = false
    private var tlsWriteWantsRead = false
    let loop: EventLoop
    let key: ConnectionKey
    let remoteAddress: SocketAddress
    unowned(unsafe) let pool: ConnectionPool
    private let connectTimings: ConnectTimings
    private let readChunkSize: Int

    private var machine = HTTP1ConnectionStateMachine()
    private var parser: HTTP1ResponseParser
    /// This connection's unparsed bytes between reads: usually empty; at most a partial head or
    /// chunk-size line, or what arrived while reading was paused. Reads go into the pool's one
    /// shared buffer (see `acquireBuffer`), so an idle connection holds no buffer at all.
    private var stash: [UInt8] = []
    private(set) var task: RequestTask?
    private var writes: [PendingWrite] = []
    private var writingInterest = false
    private var readingInterest = true
    private(set) var isClosed = false
    private var trailers: HTTPHeaders?
    /// For streamed bodies: the declared length (nil: chunked) and what was written so far.
    private var streamLength: Int64?
    private var streamChunked = false
    /// One long-lived timer per connection, re-armed lazily (see `startIdleTimer`).
    private var idleTimer: Scheduled?
    private var idleSince: UInt64?
    private var idleTimeoutNanos: UInt64 = 0

    init(fd: Int32, remoteAddress: SocketAddress, key: ConnectionKey, loop: EventLoop, pool: ConnectionPool,
         configuration: SessionConfiguration, timings: ConnectTimings, tls: TLSStream? = nil) {
        self.fd = fd
        self.tls = tls
        self.remoteAddress = remoteAddress
        self.key = key
        self.loop = loop
        self.pool = pool
        self.connectTimings = timings
        self.readChunkSize = configuration.readChunkSize
        self.parser = HTTP1ResponseParser(limits: configuration.parserLimits)
    }

    // MARK: - Executing a task

    func execute(_ task: RequestTask) {
        self.loop.assertInLoop()
        self.cancelIdleTimer()
        self.task = task
        self.trailers = nil
        task.state = .executing(self)
        let now = TaskMetrics.now()
        task.metrics.isReusedConnection = self.machine.isReused
        task.metrics.remoteAddress = self.remoteAddress
        if !self.machine.isReused {
            task.metrics.domainLookupStart = self.connectTimings.domainLookupStart
            task.metrics.domainLookupEnd = self.connectTimings.domainLookupEnd
            task.metrics.connectStart = self.connectTimings.connectStart
            task.metrics.connectEnd = self.connectTimings.connectEnd
            task.metrics.secureConnectionStart = self.connectTimings.secureConnectionStart
            task.metrics.secureConnectionEnd = self.connectTimings.secureConnectionEnd
            task.metrics.isResumedTLSSession = self.connectTimings.tlsResumed
        }
        task.metrics.tlsProtocolVersion = self.connectTimings.tlsProtocol
        task.metrics.tlsCipherSuite = self.connectTimings.tlsCipherSuite
        task.metrics.tlsALPN = self.connectTimings.tlsALPN
        task.metrics.requestStart = now
        task.lastActivity = now
        switch self.machine.startRequest(idempotent: task.request.method.isIdempotent) {
        case .sendRequest: break
        default: preconditionFailure("startRequest must answer sendRequest")
        }
        self.parser.expectResponse(to: task.request.method)

        let head = task.encodedHead
        let sent: (HawserError?) -> Void = { [unowned(unsafe) self] error in
            guard error == nil, self.task === task else { return }
            task.metrics.requestEnd = TaskMetrics.now()
            _ = self.machine.requestSent()
        }
        if task.request.body != nil, Session.expectsContinue(task.request, configuration: self.pool.configuration) {
            // Expect: 100-continue: the head now, the body on 100, on the timeout, or never
            // (a final status came first).
            self.enqueue(PendingWrite(bytes: head))
            self.heldBody = { [unowned(unsafe) self] in self.sendBody(of: task, head: [], sent: sent) }
            self.continueTimer = self.loop.scheduleInLoop(in: RequestTask.nanos(self.pool.configuration.expectContinueTimeout)) {
                [unowned(unsafe) self] in
                self.continueTimer = nil
                self.releaseHeldBody()
            }
        } else {
            self.sendBody(of: task, head: head, sent: sent)
        }
        self.flush()
        self.updateReadInterest()
        // No stash to process: a connection is reused only when nothing followed its last response.
    }

    /// The body held back for 100 Continue, and the timer that sends it anyway.
    private var heldBody: (() -> Void)?
    private var continueTimer: Scheduled?

    private func releaseHeldBody() {
        self.continueTimer?.cancel()
        self.continueTimer = nil
        guard let body = self.heldBody else { return }
        self.heldBody = nil
        body()
        self.flush()
    }

    /// A final status arrived before the body was sent: it never will be (the connection then
    /// closes after the response, RFC 9110 §10.1.1).
    private func dropHeldBody() {
        self.continueTimer?.cancel()
        self.continueTimer = nil
        self.heldBody = nil
    }

    /// Queues the request body (after `head`, which may be empty).
    private func sendBody(of task: RequestTask, head: [UInt8], sent: @escaping (HawserError?) -> Void) {
        var head = head
        switch task.wireBody {
        case nil:
            self.enqueue(PendingWrite(bytes: head, completion: sent))
        case .bytes(let body) where body.count <= 16 * 1024 && !head.isEmpty:
            head.append(contentsOf: body)
            self.enqueue(PendingWrite(bytes: head, bodyBytes: body.count, completion: sent))
        case .bytes(let body):
            if !head.isEmpty { self.enqueue(PendingWrite(bytes: head)) }
            self.enqueue(PendingWrite(bytes: body, bodyBytes: body.count, completion: sent))
        case .stream(let length, let producer):
            self.streamLength = length
            self.streamChunked = length == nil
            task.bodyBytesSent = 0
            if !head.isEmpty { self.enqueue(PendingWrite(bytes: head)) }
            let writer = RequestBodyWriter(task: task)
            task.bodyWriter = writer
            Self.startProducer(producer, writer)
        }
    }

    /// Runs the body producer as a Swift task; its writes hop to the loop and wait for the socket.
    private static func startProducer(_ producer: @escaping @Sendable (RequestBodyWriter) async throws -> Void,
                                      _ writer: RequestBodyWriter) {
        Task {
            let failure: HawserError?
            do {
                try await producer(writer)
                failure = nil
            } catch let e as HawserError {
                failure = e
            } catch {
                failure = HawserError(.invalidRequest, "the request body stream failed: \(error)")
            }
            if let failure {
                writer.task.eventLoop.execute { writer.task.fail(failure) }
            } else {
                await Self.endStream(writer)
            }
        }
    }

    private static func endStream(_ writer: RequestBodyWriter) async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            writer.task.eventLoop.execute {
                if writer.ended == nil, writer.task.bodyWriter === writer, case .executing(let c) = writer.task.state {
                    c.finishBodyStream(for: writer.task)
                }
                cont.resume()
            }
        }
    }

    func writeBodyChunk(_ bytes: [UInt8], for task: RequestTask, completion: @escaping (HawserError?) -> Void) {
        guard self.task === task, !self.isClosed else {
            completion(HawserError(.cancelled, "the task is no longer running"))
            return
        }
        task.bodyBytesSent += Int64(bytes.count)
        if let length = self.streamLength, task.bodyBytesSent > length {
            let e = HawserError(.invalidRequest, "the body stream wrote \(task.bodyBytesSent) bytes, more than its declared length \(length)")
            completion(e)
            task.fail(e)
            return
        }
        if self.streamChunked {
            var header: [UInt8] = []
            HTTP1Encoder.writeChunkHeader(size: bytes.count, into: &header)
            self.enqueue(PendingWrite(bytes: header))
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count))
            var end: [UInt8] = []
            HTTP1Encoder.writeChunkEnd(into: &end)
            self.enqueue(PendingWrite(bytes: end, completion: completion))
        } else {
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count, completion: completion))
        }
        self.flush()
    }

    func finishBodyStream(for task: RequestTask) {
        guard self.task === task, !self.isClosed else { return }
        if let length = self.streamLength, task.bodyBytesSent != length {
            task.fail(HawserError(.invalidRequest, "the body stream ended after \(task.bodyBytesSent) of its declared \(length) bytes"))
            return
        }
        let sent: (HawserError?) -> Void = { [unowned(unsafe) self] error in
            guard error == nil, self.task === task else { return }
            task.metrics.requestEnd = TaskMetrics.now()
            _ = self.machine.requestSent()
        }
        if self.streamChunked {
            var last: [UInt8] = []
            HTTP1Encoder.writeLastChunk(trailers: nil, into: &last)
            self.enqueue(PendingWrite(bytes: last, completion: sent))
        } else {
            self.enqueue(PendingWrite(bytes: [], completion: sent))
        }
        self.flush()
    }

    /// The task gave up (cancelled, timed out, limit): the connection cannot be reused. It is
    /// reset (SO_LINGER 0) rather than closed: a graceful close would leave the kernel retrying
    /// unsent request bytes to a peer that may never read them, and the FIN queued behind them.
    func abort(_ task: RequestTask) {
        guard self.task === task else { return }
        self.task = nil
        self.dropHeldBody()
        _ = self.machine.abort()
        _ = CHawser_set_linger_zero(self.fd)
        self.tls?.abandon()
        self.close()
    }

    // MARK: - Reading

    func updateReadInterest() {
        guard !self.isClosed else { return }
        let wantRead = !(self.task?.readingSuspended ?? false)
        if wantRead != self.readingInterest {
            self.readingInterest = wantRead
            self.loop.setInterest(fd: self.fd, readable: wantRead, writable: self.writingInterest)
        }
    }

    func resumeAfterPause() {
        self.updateReadInterest()
        // Bytes epoll will not report again: the stash, and what OpenSSL read and holds.
        let tlsHolds = self.tls?.hasBufferedPlaintext ?? false
        guard !self.stash.isEmpty || !self.parser.isIdle || tlsHolds, let task = self.task else { return }
        // Deferred to the next turn of the loop: this may be called from inside another
        // connection's delegate callback, while that connection owns the shared buffer.
        self.loop.executeInLoop { [self] in  // strong: the connection may close (and leave the pool) before this runs
            guard self.task === task, !task.readingSuspended, !self.isClosed else { return }
            self.processBuffer(self.acquireBuffer())
            if self.task === task, !task.readingSuspended, !self.isClosed, self.tls?.hasBufferedPlaintext == true {
                self.ioReadable()
            }
        }
    }

    // MARK: - The shared read buffer

    /// Takes the pool's shared read buffer, with this connection's stash in front.
    /// Only one connection owns it at a time; it is released before any completion runs.
    private func acquireBuffer() -> ReadBuffer {
        let b = self.pool.readBuffer
        precondition(self.pool.readBufferOwner == nil, "the shared read buffer is already in use")
        self.pool.readBufferOwner = ObjectIdentifier(self)
        b.clear()
        if !self.stash.isEmpty {
            b.append(self.stash)
            self.stash = []
        }
        return b
    }

    /// Keeps what was not parsed in the stash and gives the shared buffer back.
    private func releaseBuffer(_ b: ReadBuffer) {
        if b.readableCount > 0 { self.stash = [UInt8](b.readable) }
        b.clear()
        self.pool.readBufferOwner = nil
    }

    func ioReadable() {
        if self.tls != nil {
            if self.tlsWriteWantsRead {
                self.tlsWriteWantsRead = false
                self.flush()
            }
            // OpenSSL may hold decrypted bytes epoll cannot see: read until it holds none.
            repeat {
                self.readOnce()
            } while !self.isClosed && self.tls!.hasBufferedPlaintext && !(self.task?.readingSuspended ?? true)
            return
        }
        self.readOnce()
    }

    private func readOnce() {
        guard !self.isClosed else { return }
        // Reading is held (back-pressure, or a delegate deciding): leave the bytes — and an
        // EOF — in the socket until it resumes.
        if let task = self.task, task.readingSuspended {
            self.updateReadInterest()
            return
        }
        let b = self.acquireBuffer()
        let space = b.writableSpace(minimum: min(self.readChunkSize, 16 * 1024))
        let result: IOResult<Int>
        if let tls = self.tls {
            switch tls.read(into: space) {
            case .bytes(let n):
                result = .processed(n)
            case .wantRead:
                result = .wouldBlock
            case .wantWrite:
                self.tlsReadWantsWrite = true
                self.setWriteInterest(true)
                result = .wouldBlock
            case .closed(let clean):
                self.releaseBuffer(b)
                self.peerClosed(cleanTLSClose: clean)
                return
            case .failed(let message, let reasons):
                self.releaseBuffer(b)
                let code: HawserError.Code = TLSStream.isClientCertificateRefusal(reasons) ? .clientCertificateRequired : .secureConnectionFailed
                self.connectionFailed(HawserError(code, "TLS read from \(self.remoteAddress) failed: \(message)"))
                return
            }
        } else {
            do {
                result = try Posix.read(self.fd, space)
            } catch {
                self.releaseBuffer(b)
                self.connectionFailed(HawserError(.connectionLost, "reading from \(self.remoteAddress) failed: \(error)", underlying: error))
                return
            }
        }
        switch result {
        case .wouldBlock:
            self.releaseBuffer(b)
        case .processed(0):
            self.releaseBuffer(b)
            self.peerClosed(cleanTLSClose: true)
        case .processed(let n):
            b.didWrite(n)
            guard let task = self.task else {
                // Bytes or EOF on an idle pooled connection: the server gave up on it (or is broken).
                b.clear()
                self.releaseBuffer(b)
                _ = self.machine.connectionFailed()
                self.close()
                return
            }
            task.metrics.bytesReceived += Int64(n)
            task.lastActivity = TaskMetrics.now()
            if task.metrics.responseStart == nil { task.metrics.responseStart = task.lastActivity }
            self.machine.responseBytesReceived()
            self.processBuffer(b)
        }
    }

    /// Turns the bytes in `buffer` (owned by this connection until released here) into delegate
    /// events until they are drained, the response ends, reading is paused, or the task goes away.
    private func processBuffer(_ buffer: ReadBuffer) {
        var completed: (RequestTask, HTTP1ConnectionStateMachine.Action)? = nil
        while let task = self.task, !task.readingSuspended, !self.isClosed {
            let consumed: Int
            let event: HTTP1ResponseEvent?
            do {
                (consumed, event) = try self.parser.next(buffer.readable)
            } catch {
                self.releaseBuffer(buffer)
                self.protocolError(error, task: task)
                return
            }
            guard let event else {
                buffer.consume(consumed)
                break
            }
            switch event {
            case .head(let head):
                buffer.consume(consumed)
                if head.isInterim {
                    if head.status == 100 { self.releaseHeldBody() }
                    task.delegate.task(task, didReceiveInterimHead: head)
                } else {
                    if self.heldBody != nil {
                        self.dropHeldBody()
                        task.bodyWithheld = true
                    }
                    task.receivedHead(head)
                }
            case .body(let range):
                let slice = UnsafeRawBufferPointer(rebasing: buffer.readable[range])
                task.receivedBody(slice)
                buffer.consume(consumed)
            case .trailers(let t):
                buffer.consume(consumed)
                self.trailers = t
            case .end(let keepAlive):
                buffer.consume(consumed)
                let action = self.machine.responseEnded(keepAlive: keepAlive, leftoverBytes: buffer.readableCount > 0)
                self.task = nil
                completed = (task, action)
            }
            if completed != nil { break }
        }
        self.releaseBuffer(buffer)
        guard let (task, action) = completed else { return }
        task.metrics.responseEnd = TaskMetrics.now()
        let trailers = self.trailers
        self.trailers = nil
        switch action {
        case .completeAndReuse:
            // Release first so a request issued from the completion callback can reuse us.
            self.pool.release(self)
        default:
            self.close()
        }
        task.finish(.success(trailers))
    }

    private func protocolError(_ error: HTTP1ParseError, task: RequestTask) {
        task.fail(HawserError(.protocolError, "invalid response from \(self.remoteAddress): \(error)", underlying: error))
    }

    /// EOF. Over TLS, `cleanTLSClose` says whether close_notify came first: a close-delimited
    /// body cut off without it may be a truncation attack, so it fails instead of ending.
    private func peerClosed(cleanTLSClose: Bool) {
        guard let task = self.task else {
            _ = self.machine.connectionFailed()
            self.close()
            return
        }
        if !cleanTLSClose, self.tls != nil, self.parser.isReadingCloseDelimitedBody {
            let action = self.machine.connectionFailed()
            _ = action
            self.task = nil
            self.close()
            task.finish(.failure(HawserError(.connectionLost,
                "\(self.remoteAddress) closed the TLS connection without close_notify during a close-delimited body: the response may be truncated",
                url: task.request.url)))
            return
        }
        do {
            if case .end = try self.parser.finish() {
                // A close-delimited body ends with the connection.
                let action = self.machine.responseEnded(keepAlive: false, leftoverBytes: false)
                precondition(action == .completeAndClose || action == .none)
                self.task = nil
                task.metrics.responseEnd = TaskMetrics.now()
                self.close()
                task.finish(.success(self.trailers))
                return
            }
            self.connectionFailed(HawserError(.connectionLost, "\(self.remoteAddress) closed the connection before sending a response"))
        } catch {
            self.connectionFailed(HawserError(.connectionLost, "\(self.remoteAddress) closed the connection: \(error)", underlying: error))
        }
    }

    /// EOF, reset or write failure: let the machine decide between failing and retrying.
    private func connectionFailed(_ error: HawserError) {
        let action = self.machine.connectionFailed()
        let task = self.task
        self.task = nil
        self.close()
        guard let task else { return }
        if case .failAndClose(let retryable) = action, retryable, task.metrics.retryCount == 0, Self.isReplayable(task) {
            task.metrics.retryCount += 1
            self.pool.retry(task)
        } else {
            task.finish(.failure(error.with(url: task.request.url)))
        }
    }

    private static func isReplayable(_ task: RequestTask) -> Bool {
        switch task.wireBody {
        case nil, .bytes: return true
        case .stream: return false
        }
    }

    // MARK: - Writing

    private func enqueue(_ w: PendingWrite) {
        self.writes.append(w)
    }

    func ioWritable() {
        if self.tlsReadWantsWrite {
            self.tlsReadWantsWrite = false
            if self.writes.isEmpty { self.setWriteInterest(false) }
            self.ioReadable()
            if self.isClosed { return }
        }
        self.flush()
    }

    private func flush() {
        guard !self.isClosed else { return }
        while !self.writes.isEmpty {
            let result: IOResult<Int>
            do {
                result = try self.writeSome()
            } catch {
                if let tls = self.tls, let alert = tls.pendingAlert() {
                    // The peer said why before it went away (a refused client certificate…).
                    let code: HawserError.Code = TLSStream.isClientCertificateRefusal(alert.reasons) ? .clientCertificateRequired : .secureConnectionFailed
                    self.connectionFailed(HawserError(code, "\(self.remoteAddress) ended the TLS connection: \(alert.message)"))
                    return
                }
                self.connectionFailed(HawserError(.connectionLost, "writing to \(self.remoteAddress) failed: \(error)", underlying: error))
                return
            }
            switch result {
            case .wouldBlock:
                self.setWriteInterest(true)
                return
            case .processed(let n):
                self.advance(n)
                if self.isClosed { return }
            }
        }
        self.setWriteInterest(false)
    }

    /// One send/writev of up to 8 pending buffers (over TLS: one SSL_write of the first buffer,
    /// at most 64 KiB, which OpenSSL cuts into records).
    private func writeSome() throws(IOError) -> IOResult<Int> {
        if let tls = self.tls {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let status = w.bytes.withUnsafeBytes { raw in
                tls.write(UnsafeRawBufferPointer(rebasing: raw[w.offset..<min(raw.count, w.offset + 64 * 1024)]))
            }
            switch status {
            case .bytes(let n): return .processed(n)
            case .wantWrite: return .wouldBlock
            case .wantRead:
                self.tlsWriteWantsRead = true
                return .wouldBlock
            case .closed:
                throw IOError(errnoCode: EPIPE, function: "SSL_write")
            case .failed(let message, _):
                throw IOError(errnoCode: EPROTO, function: "SSL_write: \(message)")
            }
        }
        if self.writes.count == 1 || self.writes[0].bytes.count - self.writes[0].offset >= 64 * 1024 {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let r = w.bytes.withUnsafeBytes { raw in
                Result { () throws(IOError) in try Posix.send(self.fd, UnsafeRawBufferPointer(rebasing: raw[w.offset...])) }
            }
            return try r.get()
        }
        let n = min(self.writes.count, 8)
        var iov = [iovec](repeating: iovec(), count: n)
        return try self.gather(0, n, &iov)
    }

    private func gather(_ i: Int, _ n: Int, _ iov: inout [iovec]) throws(IOError) -> IOResult<Int> {
        if i == n {
            let r = iov.withUnsafeBufferPointer { p in
                Result { () throws(IOError) in try Posix.writev(self.fd, p.baseAddress!, Int32(n)) }
            }
            return try r.get()
        }
        let w = self.writes[i]
        let r = w.bytes.withUnsafeBytes { raw in
            Result { () throws(IOError) in
                iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress.map { $0 + w.offset }),
                               iov_len: raw.count - w.offset)
                return try self.gather(i + 1, n, &iov)
            }
        }
        return try r.get()
    }

    private func advance(_ written: Int) {
        var n = written
        // Usually one write completes (a request's last): no array for it.
        var firstDone: ((HawserError?) -> Void)? = nil
        var moreDone: [(HawserError?) -> Void] = []
        var bodyDone = 0
        if let task = self.task {
            task.metrics.bytesSent += Int64(n)
            task.lastActivity = TaskMetrics.now()
        }
        // Progress counts body bytes as they reach the socket, also inside a partly written
        // buffer, so a large upload reports progress from its first write.
        while !self.writes.isEmpty {
            let w = self.writes[0]
            let remaining = w.bytes.count - w.offset
            if n >= remaining {
                n -= remaining
                bodyDone += w.bodyBytes(from: w.offset, to: w.bytes.count)
                self.writes.removeFirst()
                if let c = w.completion {
                    if firstDone == nil { firstDone = c } else { moreDone.append(c) }
                }
            } else {
                bodyDone += w.bodyBytes(from: w.offset, to: w.offset + n)
                self.writes[0].offset += n
                break
            }
        }
        if bodyDone > 0, let task = self.task {
            let expected = task.wireBody?.knownLength
            self.bodyProgress += Int64(bodyDone)
            task.delegate.task(task, didSendBodyBytes: self.bodyProgress, expected: expected)
        }
        firstDone?(nil)
        for c in moreDone { c(nil) }
    }

    private var bodyProgress: Int64 = 0

    private func setWriteInterest(_ on: Bool) {
        guard on != self.writingInterest, !self.isClosed else { return }
        self.writingInterest = on
        self.loop.setInterest(fd: self.fd, readable: self.readingInterest, writable: on)
    }

    // MARK: - Pool life

    /// The connection went idle in the pool. Only the first call arms a timer; later ones just
    /// note the time, and the timer re-arms itself for the remainder when it fires early. So
    /// keep-alive reuse costs no timer work per request.
    func startIdleTimer(_ seconds: Double) {
        self.bodyProgress = 0
        let now = TaskMetrics.now()
        self.idleSince = now
        self.idleTimeoutNanos = RequestTask.nanos(seconds)
        if self.idleTimer == nil { self.armIdleTimer(after: self.idleTimeoutNanos) }
    }

    private func armIdleTimer(after nanos: UInt64) {
        self.idleTimer = self.loop.scheduleInLoop(in: nanos) { [unowned(unsafe) self] in
            self.idleTimer = nil
            guard !self.isClosed else { return }
            guard let since = self.idleSince else {
                // Busy now: check again one timeout from now.
                self.armIdleTimer(after: self.idleTimeoutNanos)
                return
            }
            let elapsed = TaskMetrics.now() &- since
            if elapsed >= self.idleTimeoutNanos {
                _ = self.machine.abort()
                self.close()
            } else {
                self.armIdleTimer(after: self.idleTimeoutNanos - elapsed)
            }
        }
    }

    func cancelIdleTimer() {
        self.bodyProgress = 0
        self.idleSince = nil
    }

    /// Closes the socket and tells the pool. Pending write completions fail. Idempotent.
    func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.dropHeldBody()
        self.idleSince = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
        self.loop.deregister(fd: self.fd)
        self.tls?.shutdown()
        Posix.close(self.fd)
        let pending = self.writes
        self.writes.removeAll()
        let error = HawserError(.connectionLost, "the connection was closed")
        for w in pending { w.completion?(error) }
        self.pool.connectionClosed(self)
    }
}
