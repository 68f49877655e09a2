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

    typealias PendingWrite = HTTP1WriteQueue.PendingWrite

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
    /// The machine's actions, one buffer for the connection's life (no allocation per event).
    /// Each event appends at most one; the shell takes it at once (`takeAction`).
    #if DEBUG
    private var actions: [HTTP1ConnectionStateMachine.Action] = []
    #else
    @exclusivity(unchecked) private var actions: [HTTP1ConnectionStateMachine.Action] = []
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
    /// The bytes waiting for the socket (HTTP1WriteQueue.swift); the request body's side of the
    /// connection is in HTTP1Connection+RequestBody.swift.
    #if DEBUG
    var writeQueue = HTTP1WriteQueue()
    #else
    @exclusivity(unchecked) var writeQueue = HTTP1WriteQueue()
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
    var heldBody: RequestBody?
    #else
    @exclusivity(unchecked) var heldBody: RequestBody?
    #endif
    /// For streamed bodies: the declared length (nil: chunked) and what was written so far.
    var streamLength: Int64?
    var streamChunked = false
    var streamWritten: Int64 = 0
    /// Request-body bytes handed to the socket in this exchange (upload progress).
    var bodyProgress: Int64 = 0

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
        self.actions.reserveCapacity(1)
    }

    /// The action the machine's last event appended, if any (each event appends at most one);
    /// the buffer is emptied, keeping its capacity.
    private func takeAction() -> HTTP1ConnectionStateMachine.Action? {
        guard !self.actions.isEmpty else { return nil }
        assert(self.actions.count == 1, "a connection event appends at most one action: \(self.actions)")
        return self.actions.removeLast()
    }

    /// True when a request has already completed on this connection.
    var isReused: Bool { self.machine.isReused }

    // MARK: - Executing a task

    /// Runs `task`'s current exchange on this (idle) connection.
    func execute(_ task: RequestTask) {
        self.loop.assertInLoop()
        precondition(!self.isClosed, "the pool hands out open connections only")
        self.machine.startRequest(idempotent: task.request.method.isIdempotent, into: &self.actions)
        guard case .sendRequest? = self.takeAction() else {
            preconditionFailure("the pool hands out idle connections only")
        }
        self.task = task
        self.trailers = nil
        self.bodyProgress = 0
        self.parser.expectResponse(to: task.request.method)
        task.connectionAssigned(self)
        if !self.isClosed { self.updateReadInterest() }
        // No stash to process: a connection is reused only when nothing followed its last response.
    }

    /// The request's last byte was handed to the socket: the machine and the task hear of it.
    func requestWritten(_ task: RequestTask) {
        self.machine.requestSent()
        task.requestWritten()
    }

    /// The task gave up (cancelled, timed out, a limit, a refused response): the connection
    /// cannot be reused. It is reset (SO_LINGER 0) rather than closed: a graceful close would
    /// leave the kernel retrying unsent request bytes to a peer that may never read them.
    func abort(_ task: RequestTask) {
        guard self.task === task else { return }
        self.task = nil
        self.heldBody = nil
        self.machine.abort(into: &self.actions)
        if case .close? = self.takeAction() {
            Posix.setLingerZero(self.fd)
            self.tls?.abandon()
            self.close()
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
                self.machine.connectionFailed(into: &self.actions)
                if self.takeAction() != nil { self.close() }
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
        var ended: (RequestTask, HTTP1ConnectionStateMachine.Action?)? = nil
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
                self.machine.responseEnded(
                    keepAlive: keepAlive,
                    leftoverBytes: buffer.readableCount > 0,
                    into: &self.actions
                )
                let action = self.takeAction()
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
    private func endResponse(_ task: RequestTask, _ action: HTTP1ConnectionStateMachine.Action?) {
        let trailers = self.trailers
        self.trailers = nil
        self.heldBody = nil
        switch action {
        case .completeAndReuse?:
            // Reading held for the task that ended (its receive limit, a pause) is not the idle
            // connection's: in the pool it must see the server's close.
            self.updateReadInterest()
            self.pool.release(self)
        case .completeAndClose?:
            self.close()
        default:
            preconditionFailure(
                "a response end is answered with completeAndReuse or completeAndClose, not \(String(describing: action))"
            )
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
            self.machine.connectionFailed(into: &self.actions)
            if self.takeAction() != nil { self.close() }
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
                self.machine.responseEnded(keepAlive: false, leftoverBytes: false, into: &self.actions)
                let action = self.takeAction()
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
        self.machine.connectionFailed(into: &self.actions)
        let action = self.takeAction()
        let task = self.task
        self.task = nil
        self.close()
        guard let task else { return }
        if case .failAndClose(let retryable)? = action {
            task.connectionFailed(error, retryable: retryable)
        } else {
            task.connectionFailed(error, retryable: false)
        }
    }

    // MARK: - Writing

    func enqueue(_ w: PendingWrite) {
        self.writeQueue.enqueue(w)
    }

    func ioWritable() {
        if self.tlsReadWantsWrite {
            self.tlsReadWantsWrite = false
            if self.writeQueue.isEmpty { self.setWriteInterest(false) }
            self.ioReadable()
            if self.isClosed { return }
        }
        self.flush()
    }

    /// The send limit allows writing again.
    func resumeWriting() {
        self.flush()
    }

    func flush() {
        guard !self.isClosed else { return }
        while !self.writeQueue.isEmpty {
            // Under a send limit a write takes at most what the limit allows now; at 0 the
            // connection stops writing and the task's timer resumes it (an empty write, which
            // only completes, goes through).
            var allowance = Int.max
            if let task = self.task, task.sendLimit != nil, self.writeQueue.firstHasBytes {
                allowance = task.sendAllowance()
                if allowance == 0 {
                    self.setWriteInterest(false)
                    return
                }
            }
            let result: IOResult<Int>
            do {
                result = try self.writeQueue.writeSome(
                    fd: self.fd,
                    tls: self.tls,
                    max: allowance,
                    wantsRead: &self.tlsWriteWantsRead
                )
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

    /// The socket took `written` bytes: progress, then the completions of what was written.
    private func advance(_ written: Int) {
        let done = self.writeQueue.advance(written)
        if let task = self.task {
            if done.bodyBytes > 0 { self.bodyProgress += Int64(done.bodyBytes) }
            task.wroteBytes(written, bodyTotal: done.bodyBytes > 0 ? self.bodyProgress : nil)
        }
        done.complete()
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
        let pending = self.writeQueue.removeAll()
        let error = HawserError(.connectionLost, "the connection was closed")
        for w in pending { w.completion?(error) }
        self.pool.connectionClosed(self)
    }
}
