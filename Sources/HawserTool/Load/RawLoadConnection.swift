// One connection of the raw engine: writes pre-encoded requests, parses each response with
// the engine's HTTP/1.1 parser straight out of its own buffer, and sends the next request from
// the same readiness event (closed loop) or when the schedule says it is due (open loop).
// Confined to its event loop.
import HawserCore

#if canImport(Glibc)
import Glibc
#endif

/// A request encoded once, sent as it is every time.
struct EncodedLoadRequest {
    var bytes: [UInt8]
    var method: HTTPMethod
}

final class RawLoadConnection: EventLoopIOHandler {
    let loop: EventLoop
    let address: SocketAddress
    let requests: [EncodedLoadRequest]
    var picker: RequestPicker
    let recorder: LoadRecorder
    /// Requests this connection may start (errors included); Int.max: until stopped.
    let quota: Int
    /// The open-loop schedule; nil: closed loop (the next request goes out when the last ends).
    var schedule: OpenLoopSchedule?
    /// --timeout in nanoseconds; nil: none.
    let timeout: UInt64?

    private var fd: Int32 = -1
    private var parser = HTTP1ResponseParser()
    /// Bytes of an unfinished head or chunk line left over from the last read.
    private var carry: [UInt8] = []
    private var intendedAt: UInt64 = 0
    private var sentAt: UInt64 = 0
    private var awaiting = false
    private var status = 0
    private var responseBytes: UInt64 = 0
    private var started = 0
    private var stopping = false
    private var pending: Scheduled?
    private var timer: Scheduled?
    private var generation: UInt64 = 0
    private var onDone: (() -> Void)?

    init(
        loop: EventLoop,
        address: SocketAddress,
        requests: [EncodedLoadRequest],
        picker: RequestPicker,
        recorder: LoadRecorder,
        quota: Int,
        schedule: OpenLoopSchedule?,
        timeout: UInt64?
    ) {
        self.loop = loop
        self.address = address
        self.requests = requests
        self.picker = picker
        self.recorder = recorder
        self.quota = quota
        self.schedule = schedule
        self.timeout = timeout
    }

    /// Starts the connection's requests (on its loop); `onDone` runs once, when it has sent its
    /// quota or was stopped.
    func start(onDone: @escaping () -> Void) {
        self.onDone = onDone
        self.next()
    }

    /// Stops at once: a request in flight is dropped, not counted (as wrk does).
    func stop() {
        self.stopping = true
        self.pending?.cancel()
        self.pending = nil
        self.finish()
    }

    /// Opens the connection before the run starts (its time is not measured); when that fails
    /// the first request tries again and counts the error.
    func preconnect() {
        if self.fd < 0 { _ = self.connect() }
    }

    // MARK: - Sending

    private func next() {
        if self.stopping || self.started >= self.quota {
            self.finish()
            return
        }
        let now = TaskMetrics.now()
        if self.schedule != nil {
            switch self.schedule!.next(now: now) {
            case .send(let intended):
                self.send(intended: intended, now: now)
            case .wait(let until):
                let base = self.loop.now
                self.pending = self.loop.scheduleInLoop(in: until > base ? until - base : 0) { [unowned self] in
                    self.pending = nil
                    self.next()
                }
            }
        } else {
            self.send(intended: now, now: now)
        }
    }

    private func send(intended: UInt64, now: UInt64) {
        self.started += 1
        self.intendedAt = intended
        self.sentAt = now
        if self.fd < 0 {
            if let message = self.connect() {
                self.recorder.error(.connect, message, now: TaskMetrics.now())
                self.afterError()
                return
            }
        }
        let request = self.requests[self.picker.next()]
        self.parser.expectResponse(to: request.method)
        self.status = 0
        self.responseBytes = 0
        self.awaiting = true
        let n = request.bytes.withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n != request.bytes.count {
            // Requests are small: a short write on a connection with nothing in flight means
            // the peer is gone.
            self.failed(.reset, n < 0 ? "send: \(String(cString: strerror(errno)))" : "send: short write")
            return
        }
        if let t = self.timeout {
            self.generation &+= 1
            let g = self.generation
            self.timer = self.loop.scheduleInLoop(in: t) { [unowned self] in
                guard self.awaiting, self.generation == g else { return }
                self.timer = nil
                self.failed(.timeout, "no complete response within the --timeout")
            }
        }
    }

    /// Connects (blocking: on loopback or a LAN this is the TCP handshake) and registers the
    /// socket; returns what went wrong, or nil.
    private func connect() -> String? {
        let fd = socket(self.address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        let rc = self.address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if rc != 0 {
            let message = "connect to \(self.address): \(String(cString: strerror(errno)))"
            close(fd)
            return message
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        do {
            try self.loop.register(fd: fd, handler: self, readable: true, writable: false)
        } catch {
            close(fd)
            return "register: \(error)"
        }
        self.fd = fd
        return nil
    }

    // MARK: - Receiving

    func ioReadable() {
        guard self.fd >= 0 else { return }
        // Read into the loop's scratch buffer after what is left of the last read (a partial
        // head or chunk line, usually nothing): an idle connection holds no buffer of its own.
        let buffer = self.recorder.scratch
        let carried = self.carry.count
        if carried > 0 {
            self.carry.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: carried) }
        }
        let n = read(self.fd, buffer.baseAddress! + carried, buffer.count - carried)
        if n <= 0 {
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            if !self.awaiting {
                // An idle keep-alive connection the server closed: connect again when needed.
                self.closeSocket()
                return
            }
            if n == 0 {
                self.failed(.reset, "the server closed the connection before the response was complete")
            } else {
                let e = errno
                self.failed(e == ECONNRESET ? .reset : .other, "read: \(String(cString: strerror(e)))")
            }
            return
        }
        self.carry.removeAll(keepingCapacity: false)
        let end = carried + n
        var start = 0
        self.responseBytes &+= UInt64(n)
        while self.fd >= 0 {
            let input = UnsafeRawBufferPointer(rebasing: buffer[start..<end])
            let step: (consumed: Int, event: HTTP1ResponseEvent?)
            do {
                step = try self.parser.next(input)
            } catch {
                self.failed(.protocol, "\(error)")
                return
            }
            start += step.consumed
            guard let event = step.event else {
                if end - start == buffer.count {
                    self.failed(.protocol, "a response head longer than \(buffer.count) bytes")
                } else if start < end {
                    self.carry = Array(UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
                }
                return
            }
            switch event {
            case .head(let h) where !h.isInterim:
                self.status = h.status
            case .end(let keepAlive):
                self.completed(keepAlive: keepAlive && start == end)
                return
            default:
                continue
            }
        }
    }

    func ioWritable() {}

    private func completed(keepAlive: Bool) {
        self.awaiting = false
        self.timer?.cancel()
        self.timer = nil
        self.recorder.response(
            status: self.status,
            bytes: self.responseBytes,
            intended: self.intendedAt,
            sent: self.sentAt,
            now: TaskMetrics.now()
        )
        if !keepAlive {
            // Closed by the server, or bytes after the end of a response nobody asked for.
            self.closeSocket()
        }
        self.next()
    }

    // MARK: - Failure and the end

    private func failed(_ kind: LoadErrorKind, _ message: String) {
        self.awaiting = false
        self.timer?.cancel()
        self.timer = nil
        self.recorder.read(bytes: self.responseBytes)
        self.recorder.error(kind, message, now: TaskMetrics.now())
        self.closeSocket()
        self.afterError()
    }

    /// After an error: the next request. A closed loop pauses 10 ms first so a refused or
    /// resetting server is not hammered in a busy loop; an open loop keeps its schedule.
    private func afterError() {
        if self.schedule != nil || self.stopping {
            self.next()
            return
        }
        self.pending = self.loop.scheduleInLoop(in: 10_000_000) { [unowned self] in
            self.pending = nil
            self.next()
        }
    }

    private func closeSocket() {
        if self.fd >= 0 {
            self.loop.deregister(fd: self.fd)
            close(self.fd)
            self.fd = -1
        }
        self.parser = HTTP1ResponseParser()
        self.carry = []
    }

    private func finish() {
        self.timer?.cancel()
        self.timer = nil
        self.awaiting = false
        self.closeSocket()
        let d = self.onDone
        self.onDone = nil
        d?()
    }
}
