// The IO shell of one HTTP/1.1 client connection: a non-blocking socket (or a TLS stream over
// it), the response parser, a gathered-write queue and the shared read buffer. Reuse, retry and
// close are HTTP1ConnectionStateMachine's answers; what the request does is its task's
// (RequestStateMachine, through RequestTask). The connection reports events to its task and
// carries out the task's commands; neither writes the other's fields. Loop-confined.
import HawserBase
import HawserHTTP1
import HawserPosix
import HawserTLS

#if canImport(Glibc)
import Glibc
#endif

final class HTTP1Connection: EventLoopIOHandler {
    typealias ConnectTimings = Connector.ConnectTimings

    private struct PendingWrite {
        var bytes: [UInt8]
        var offset = 0
        /// How many of `bytes` are request-body bytes; they are always the tail of `bytes`
        /// (a head with a small body appended, or body only). For upload progress.
        var bodyBytes = 0
        /// Called when the last byte was handed to the socket (nil), or when the connection
        /// closed first (the error).
        var completion: ((HawserError?) -> Void)?

        /// Body bytes among `bytes[from..<to]`.
        func bodyBytes(from: Int, to: Int) -> Int {
            max(0, to - max(from, self.bytes.count - self.bodyBytes))
        }
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
    unowned(unsafe) let context: SessionContext
    unowned(unsafe) let pool: ConnectionPool
    /// How the connection was opened (for its first task's metrics).
    let connectTimings: ConnectTimings
    private let readChunkSize: Int

    // Loop-confined state. Swift checks exclusive access to a class's stored properties at run
    // time; in release builds the hottest of them opt out with `@exclusivity(unchecked)` (the
    // checks cost about an eighth of a keep-alive request's instructions:
    // Benchmarks/results/2026-11-27-engine-regression/). Debug builds, where the tests run, keep
    // every check. Nothing here can overlap: the state machines return actions that are
    // performed after the mutation that produced them has returned.
    #if DEBUG
    private var machine = HTTP1ConnectionStateMachine()
    #else
    @exclusivity(unchecked) private var machine = HTTP1ConnectionStateMachine()
    #endif
    #if DEBUG
    private var parser: HTTP1ResponseParser
    #else
    @exclusivity(unchecked) private var parser: HTTP1ResponseParser
    #endif
    /// This connection's unparsed bytes between reads: usually empty; at most a partial head or
    /// chunk-size line, or what arrived while reading was paused. Reads go into the session's one
    /// shared buffer (see `acquireBuffer`), so an idle connection holds no buffer at all.
    #if DEBUG
    private var stash: [UInt8] = []
    #else
    @exclusivity(unchecked) private var stash: [UInt8] = []
    #endif
    /// The task whose exchange is on this connection.
    #if DEBUG
    private(set) var task: RequestTask?
    #else
    @exclusivity(unchecked) private(set) var task: RequestTask?
    #endif
    #if DEBUG
    private var writes: [PendingWrite] = []
    #else
    @exclusivity(unchecked) private var writes: [PendingWrite] = []
    #endif
    #if DEBUG
    private var writingInterest = false
    #else
    @exclusivity(unchecked) private var writingInterest = false
    #endif
    #if DEBUG
    private var readingInterest = true
    #else
    @exclusivity(unchecked) private var readingInterest = true
    #endif
    #if DEBUG
    private(set) var isClosed = false
    #else
    @exclusivity(unchecked) private(set) var isClosed = false
    #endif
    #if DEBUG
    private var trailers: HTTPHeaders?
    #else
    @exclusivity(unchecked) private var trailers: HTTPHeaders?
    #endif
    /// The request body held back for 100 Continue.
    #if DEBUG
    private var heldBody: RequestBody?
    #else
    @exclusivity(unchecked) private var heldBody: RequestBody?
    #endif
    /// For streamed bodies: the declared length (nil: chunked) and what was written so far.
    private var streamLength: Int64?
    private var streamChunked = false
    private var streamWritten: Int64 = 0
    private var bodyProgress: Int64 = 0

    init(
        fd: Int32,
        remoteAddress: SocketAddress,
        key: ConnectionKey,
        context: SessionContext,
        pool: ConnectionPool,
        timings: ConnectTimings,
        tls: TLSStream? = nil
    ) {
        self.fd = fd
        self.tls = tls
        self.remoteAddress = remoteAddress
        self.key = key
        self.loop = context.loop
        self.context = context
        self.pool = pool
        self.connectTimings = timings
        self.readChunkSize = context.configuration.readChunkSize
        self.parser = HTTP1ResponseParser(
            limits: context.configuration.parserLimits,
            obsoleteLineFolding: context.configuration.obsoleteLineFolding
        )
    }

    /// True when a request has already completed on this connection.
    var isReused: Bool { self.machine.isReused }

    // MARK: - Executing a task

    /// Runs `task`'s current exchange on this (idle) connection.
    func execute(_ task: RequestTask) {
        self.loop.assertInLoop()
        precondition(!self.isClosed, "the pool hands out open connections only")
        switch self.machine.startRequest(idempotent: task.request.method.isIdempotent) {
        case .sendRequest: break
        default: preconditionFailure("the pool hands out idle connections only")
        }
        self.task = task
        self.trailers = nil
        self.bodyProgress = 0
        self.parser.expectResponse(to: task.request.method)
        task.connectionAssigned(self)
        if !self.isClosed { self.updateReadInterest() }
        // No stash to process: a connection is reused only when nothing followed its last response.
    }

    /// Writes the request head and, unless `holdBody`, its body (`body`, as prepared).
    func writeRequest(head: [UInt8], body: RequestBody?, holdBody: Bool) {
        guard let task = self.task, !self.isClosed else { return }
        if holdBody {
            // Expect: 100-continue: the head now, the body on 100, on the timeout, or never.
            self.enqueue(PendingWrite(bytes: head))
            self.heldBody = body
        } else {
            self.queueBody(body, after: head, for: task)
        }
        self.flush()
    }

    /// Sends the body held for 100 Continue.
    func sendHeldBody() {
        guard let task = self.task, !self.isClosed, let body = self.heldBody else { return }
        self.heldBody = nil
        self.queueBody(body, after: [], for: task)
        self.flush()
    }

    /// A final status came before the held body was sent: it never will be (the connection then
    /// closes after the response, RFC 9110 §10.1.1: the state machine sees the request unsent).
    func dropHeldBody() {
        self.heldBody = nil
    }

    /// Queues `body` (after `head`, which may be empty).
    private func queueBody(_ body: RequestBody?, after head: [UInt8], for task: RequestTask) {
        var head = head
        let sent = self.sentCompletion(for: task)
        switch body {
        case nil:
            self.enqueue(PendingWrite(bytes: head, completion: sent))
        case .bytes(let bytes)? where bytes.count <= 16 * 1024 && !head.isEmpty:
            head.append(contentsOf: bytes)
            self.enqueue(PendingWrite(bytes: head, bodyBytes: bytes.count, completion: sent))
        case .bytes(let bytes)?:
            if !head.isEmpty { self.enqueue(PendingWrite(bytes: head)) }
            self.enqueue(PendingWrite(bytes: bytes, bodyBytes: bytes.count, completion: sent))
        case .stream(let length, let producer)?:
            self.streamLength = length
            self.streamChunked = length == nil
            self.streamWritten = 0
            // An empty body of known length is complete with the head.
            self.enqueue(PendingWrite(bytes: head, completion: length == 0 ? sent : nil))
            task.startBodyStream(producer)
        }
    }

    private func requestWritten(_ task: RequestTask) {
        self.machine.requestSent()
        task.requestWritten()
    }

    /// The next chunk of a streamed body, from the task's producer.
    func writeBodyChunk(_ bytes: [UInt8], for task: RequestTask, completion: @escaping (HawserError?) -> Void) {
        guard self.task === task, !self.isClosed else {
            completion(HawserError(.cancelled, "the task is no longer running"))
            return
        }
        self.streamWritten += Int64(bytes.count)
        if let length = self.streamLength, self.streamWritten > length {
            let e = HawserError(
                .invalidRequest,
                "the body stream wrote \(self.streamWritten) bytes, more than its declared length \(length)"
            )
            completion(e)
            task.bodyStreamFailed(e)
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
            if self.streamWritten == self.streamLength {
                // The declared length is reached: the request is complete when these bytes are
                // written, whenever the producer returns (a server may answer at once).
                self.enqueue(PendingWrite(bytes: [], completion: self.sentCompletion(for: task)))
            }
        }
        self.flush()
    }

    private func sentCompletion(for task: RequestTask) -> (HawserError?) -> Void {
        { [unowned(unsafe) self] error in
            guard error == nil, self.task === task else { return }
            self.requestWritten(task)
        }
    }

    /// The producer returned: the body is complete.
    func finishBodyStream(for task: RequestTask) {
        guard self.task === task, !self.isClosed else { return }
        if let length = self.streamLength {
            // A body of known length was complete at its last byte (see writeBodyChunk).
            if self.streamWritten == length { return }
            task.bodyStreamFailed(
                HawserError(
                    .invalidRequest,
                    "the body stream ended after \(self.streamWritten) of its declared \(length) bytes"
                )
            )
            return
        }
        var last: [UInt8] = []
        HTTP1Encoder.writeLastChunk(trailers: nil, into: &last)
        self.enqueue(PendingWrite(bytes: last, completion: self.sentCompletion(for: task)))
        self.flush()
    }

    /// The task gave up (cancelled, timed out, a limit, a refused response): the connection
    /// cannot be reused. It is reset (SO_LINGER 0) rather than closed: a graceful close would
    /// leave the kernel retrying unsent request bytes to a peer that may never read them.
    func abort(_ task: RequestTask) {
        guard self.task === task else { return }
        self.task = nil
        self.heldBody = nil
        switch self.machine.abort() {
        case .close:
            Posix.setLingerZero(self.fd)
            self.tls?.abandon()
            self.close()
        default:
            break
        }
    }

    // MARK: - Reading

    func updateReadInterest() {
        guard !self.isClosed else { return }
        let wantRead = !(self.task?.holdsSocketReading ?? false)
        if wantRead != self.readingInterest {
            self.readingInterest = wantRead
            self.loop.setInterest(fd: self.fd, readable: wantRead, writable: self.writingInterest)
        }
    }

    /// Reading resumes for the task: bytes epoll will not report again (the stash, what OpenSSL
    /// read and holds) are processed on the next turn of the loop.
    func resumeAfterPause() {
        self.updateReadInterest()
        let tlsHolds = self.tls?.hasBufferedPlaintext ?? false
        guard !self.stash.isEmpty || !self.parser.isIdle || tlsHolds, let task = self.task else { return }
        // Deferred: this may be called from inside another connection's delegate callback,
        // while that connection owns the shared buffer.
        self.loop.executeInLoop { [self] in  // strong: the connection may close (and leave the pool) before this runs
            guard self.task === task, !task.readingSuspended, !self.isClosed else { return }
            self.processBuffer(self.acquireBuffer())
            if self.task === task, !task.readingSuspended, !self.isClosed, self.tls?.hasBufferedPlaintext == true {
                self.ioReadable()
            }
        }
    }

    // MARK: - The shared read buffer

    /// Takes the session's shared read buffer, with this connection's stash in front.
    /// Only one connection owns it at a time; it is released before any completion runs.
    private func acquireBuffer() -> ReadBuffer {
        let b = self.context.readBuffer
        precondition(self.context.readBufferOwner == nil, "the shared read buffer is already in use")
        self.context.readBufferOwner = ObjectIdentifier(self)
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
        self.context.readBufferOwner = nil
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
            } while !self.isClosed && self.tls!.hasBufferedPlaintext && !(self.task?.holdsSocketReading ?? true)
            return
        }
        self.readOnce()
    }

    private func readOnce() {
        guard !self.isClosed else { return }
        // Reading is held (back-pressure, a delegate deciding, the receive limit): leave the
        // bytes — and an EOF — in the socket until it resumes.
        var allowance = Int.max
        if let task = self.task {
            if task.holdsSocketReading {
                self.updateReadInterest()
                return
            }
            allowance = task.receiveAllowance()
        }
        // Pure body data next, for a delegate that keeps its chunks: read it into an array of its
        // own and hand that over, instead of reading into the shared buffer to be copied out.
        if self.tls == nil, self.stash.isEmpty, let task = self.task {
            let ahead = self.parser.bodyDataAhead
            if ahead > 0, task.takesOwnedBody {
                self.readOwned(task, limit: min(ahead, allowance, self.readChunkSize))
                return
            }
        }
        let b = self.acquireBuffer()
        var space = b.writableSpace(minimum: min(self.readChunkSize, 16 * 1024))
        // Under a receive limit a read takes at most what the limit allows now (at least a byte:
        // a task whose bucket is empty holds reading, above).
        if allowance < space.count { space = UnsafeMutableRawBufferPointer(rebasing: space[..<max(1, allowance)]) }
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
                let code: HawserError.Code =
                    TLSStream.isClientCertificateRefusal(reasons) ? .clientCertificateRequired : .secureConnectionFailed
                self.connectionFailed(HawserError(code, "TLS read from \(self.remoteAddress) failed: \(message)"))
                return
            }
        } else {
            do {
                result = try Posix.read(self.fd, space)
            } catch {
                self.releaseBuffer(b)
                self.connectionFailed(
                    HawserError(
                        .connectionLost,
                        "reading from \(self.remoteAddress) failed: \(error)",
                        underlying: error
                    )
                )
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
                if self.machine.connectionFailed() != .none { self.close() }
                return
            }
            self.machine.responseBytesReceived()
            task.receivedBytes(n)
            self.processBuffer(b)
        }
    }

    /// Reads at most `limit` bytes, all of them body data (`bodyDataAhead`), into a fresh array and
    /// gives it to the task's delegate: the bytes are copied once, by the kernel. A short read is
    /// copied into an array of its size (`ownedReadWasteFactor`). An end the parser owes after the
    /// last body byte goes through the shared buffer's path.
    private func readOwned(_ task: RequestTask, limit: Int) {
        var result: IOResult<Int> = .wouldBlock
        var failure: IOError?
        var chunk = [UInt8](unsafeUninitializedCapacity: limit) { buffer, count in
            do throws(IOError) {
                result = try Posix.read(self.fd, UnsafeMutableRawBufferPointer(buffer))
            } catch {
                failure = error
            }
            if case .processed(let n) = result { count = n }
        }
        if let failure {
            self.connectionFailed(
                HawserError(
                    .connectionLost,
                    "reading from \(self.remoteAddress) failed: \(failure)",
                    underlying: failure
                )
            )
            return
        }
        guard case .processed(let n) = result else { return }
        if n == 0 {
            self.peerClosed(cleanTLSClose: true)
            return
        }
        self.machine.responseBytesReceived()
        task.receivedBytes(n)
        let parsed = chunk.withUnsafeBytes {
            bytes -> Result<(consumed: Int, event: HTTP1ResponseEvent?), HTTP1ParseError> in
            do throws(HTTP1ParseError) { return .success(try self.parser.next(bytes)) } catch { return .failure(error) }
        }
        let step: (consumed: Int, event: HTTP1ResponseEvent?)
        switch parsed {
        case .success(let s): step = s
        case .failure(let error):
            task.responseInvalid(Self.parseError(error, from: self.remoteAddress))
            return
        }
        guard step.consumed == n, case .body(let range)? = step.event, range == 0..<n else {
            preconditionFailure("bodyDataAhead promised \(n) body bytes; the parser answered \(step)")
        }
        if n * ownedReadWasteFactor < chunk.capacity {
            chunk = chunk.withUnsafeBufferPointer { read in
                [UInt8](unsafeUninitializedCapacity: n) { copy, count in
                    count = copy.initialize(fromContentsOf: read)
                }
            }
        }
        task.receivedOwnedBody(chunk)
        if self.task === task, self.parser.bodyDataAhead == 0, !self.isClosed {
            self.processBuffer(self.acquireBuffer())
        }
    }

    /// Turns the bytes in `buffer` (owned by this connection until released here) into task
    /// events until they are drained, the response ends, reading is held, or the task goes away.
    private func processBuffer(_ buffer: ReadBuffer) {
        var ended: (RequestTask, HTTP1ConnectionStateMachine.Action)? = nil
        while let task = self.task, !task.readingSuspended, !self.isClosed {
            let consumed: Int
            let event: HTTP1ResponseEvent?
            do {
                (consumed, event) = try self.parser.next(buffer.readable)
            } catch {
                self.releaseBuffer(buffer)
                task.responseInvalid(Self.parseError(error, from: self.remoteAddress))
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
                    task.receivedInterim(head)
                } else {
                    task.receivedHead(head)
                }
            case .body(let range):
                task.receivedBody(UnsafeRawBufferPointer(rebasing: buffer.readable[range]))
                buffer.consume(consumed)
            case .trailers(let t):
                buffer.consume(consumed)
                self.trailers = t
            case .end(let keepAlive):
                buffer.consume(consumed)
                let action = self.machine.responseEnded(keepAlive: keepAlive, leftoverBytes: buffer.readableCount > 0)
                self.task = nil
                ended = (task, action)
            }
            if ended != nil { break }
        }
        self.releaseBuffer(buffer)
        guard let (task, action) = ended else { return }
        self.endResponse(task, action)
    }

    /// The response ended: the connection goes back to the pool (first, so a request made from
    /// the completion callback can reuse it) or closes; then the task hears of it.
    private func endResponse(_ task: RequestTask, _ action: HTTP1ConnectionStateMachine.Action) {
        let trailers = self.trailers
        self.trailers = nil
        self.heldBody = nil
        switch action {
        case .completeAndReuse:
            // Reading held for the task that ended (its receive limit, a pause) is not the idle
            // connection's: in the pool it must see the server's close.
            self.updateReadInterest()
            self.pool.release(self)
        case .completeAndClose:
            self.close()
        default:
            preconditionFailure("a response end is answered with completeAndReuse or completeAndClose, not \(action)")
        }
        task.responseEnded(trailers: trailers)
    }

    static func parseError(_ error: HTTP1ParseError, from address: SocketAddress) -> HawserError {
        if error.kind.isLimitExceeded {
            return HawserError(
                .limitExceeded,
                "the response from \(address) exceeds a parser limit: \(error)",
                underlying: error
            )
        }
        return HawserError(.protocolError, "invalid response from \(address): \(error)", underlying: error)
    }

    /// EOF. Over TLS, `cleanTLSClose` says whether close_notify came first: a close-delimited
    /// body cut off without it may be a truncation attack, so it fails instead of ending.
    private func peerClosed(cleanTLSClose: Bool) {
        guard self.task != nil else {
            if self.machine.connectionFailed() != .none { self.close() }
            return
        }
        if !cleanTLSClose, self.tls != nil, self.parser.isReadingCloseDelimitedBody {
            self.connectionFailed(
                HawserError(
                    .connectionLost,
                    "\(self.remoteAddress) closed the TLS connection without close_notify during a close-delimited body: the response may be truncated"
                )
            )
            return
        }
        do {
            if case .end = try self.parser.finish(), let task = self.task {
                // A close-delimited body ends with the connection.
                let action = self.machine.responseEnded(keepAlive: false, leftoverBytes: false)
                self.task = nil
                self.endResponse(task, action)
                return
            }
            self.connectionFailed(
                HawserError(.connectionLost, "\(self.remoteAddress) closed the connection before sending a response")
            )
        } catch {
            self.connectionFailed(
                HawserError(.connectionLost, "\(self.remoteAddress) closed the connection: \(error)", underlying: error)
            )
        }
    }

    /// EOF, reset or write failure under a task: the machine says whether the request may be
    /// replayed; the connection closes and the task decides.
    private func connectionFailed(_ error: HawserError) {
        let action = self.machine.connectionFailed()
        let task = self.task
        self.task = nil
        self.close()
        guard let task else { return }
        if case .failAndClose(let retryable) = action {
            task.connectionFailed(error, retryable: retryable)
        } else {
            task.connectionFailed(error, retryable: false)
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

    /// The send limit allows writing again.
    func resumeWriting() {
        self.flush()
    }

    private func flush() {
        guard !self.isClosed else { return }
        while !self.writes.isEmpty {
            // Under a send limit a write takes at most what the limit allows now; at 0 the
            // connection stops writing and the task's timer resumes it (an empty write, which
            // only completes, goes through).
            var allowance = Int.max
            if let task = self.task, task.sendBucket != nil, self.writes[0].bytes.count > self.writes[0].offset {
                allowance = task.sendAllowance()
                if allowance == 0 {
                    self.setWriteInterest(false)
                    return
                }
            }
            let result: IOResult<Int>
            do {
                result = try self.writeSome(max: allowance)
            } catch {
                if let tls = self.tls, let alert = tls.pendingAlert() {
                    // The peer said why before it went away (a refused client certificate…).
                    let code: HawserError.Code =
                        TLSStream.isClientCertificateRefusal(alert.reasons)
                        ? .clientCertificateRequired : .secureConnectionFailed
                    self.connectionFailed(
                        HawserError(code, "\(self.remoteAddress) ended the TLS connection: \(alert.message)")
                    )
                    return
                }
                self.connectionFailed(
                    HawserError(.connectionLost, "writing to \(self.remoteAddress) failed: \(error)", underlying: error)
                )
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
    /// at most 64 KiB, which OpenSSL cuts into records). Under a send limit (`limit` below
    /// `Int.max`): at most `limit` bytes of the first buffer.
    private func writeSome(max limit: Int) throws(IOError) -> IOResult<Int> {
        if let tls = self.tls {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let end = w.offset + min(64 * 1024, limit)
            let status = w.bytes.withUnsafeBytes { raw in
                tls.write(UnsafeRawBufferPointer(rebasing: raw[w.offset..<min(raw.count, end)]))
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
        if self.writes.count == 1 || self.writes[0].bytes.count - self.writes[0].offset >= 64 * 1024
            || limit != .max
        {
            let w = self.writes[0]
            if w.bytes.count == w.offset { return .processed(0) }
            let end = limit == .max ? w.bytes.count : min(w.bytes.count, w.offset + limit)
            let r = w.bytes.withUnsafeBytes { raw in
                Result { () throws(IOError) in
                    try Posix.send(self.fd, UnsafeRawBufferPointer(rebasing: raw[w.offset..<end]))
                }
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
                iov[i] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress.map { $0 + w.offset }),
                    iov_len: raw.count - w.offset
                )
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
        if let task = self.task {
            if bodyDone > 0 { self.bodyProgress += Int64(bodyDone) }
            task.wroteBytes(written, bodyTotal: bodyDone > 0 ? self.bodyProgress : nil)
        }
        firstDone?(nil)
        for c in moreDone { c(nil) }
    }

    private func setWriteInterest(_ on: Bool) {
        guard on != self.writingInterest, !self.isClosed else { return }
        self.writingInterest = on
        self.loop.setInterest(fd: self.fd, readable: self.readingInterest, writable: on)
    }

    // MARK: - Closing

    /// Closes the socket and tells the pool. Pending write completions fail. Idempotent.
    func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.heldBody = nil
        self.machine.closed()
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
