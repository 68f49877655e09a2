// One keep-alive connection of the raw load generator: writes a pre-encoded request, parses
// the response with HawserHTTP1 straight out of its read buffer, records the latency, and
// sends the next request from the same event. Confined to its event loop.
import HawserCore
import Histogram

#if canImport(Glibc)
import Glibc
#endif

/// Per-loop statistics (one per event loop, so no locking on the hot path).
final class LoopStats: @unchecked Sendable {
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)  // µs
    var requests = 0
    var errors = 0
    var bytesRead = 0
    var connectErrors = 0
}

final class LoadConnection: EventLoopIOHandler {
    let loop: EventLoop
    let address: SocketAddress
    let request: [UInt8]
    unowned let stats: LoopStats
    let quota: Int  // requests this connection may send (Int.max: until stopped)
    var fd: Int32 = -1
    var parser = HTTP1ResponseParser()
    let buffer: UnsafeMutableRawBufferPointer
    var start = 0
    var end = 0
    var sentAt: UInt64 = 0
    var sent = 0
    var stopping = false
    var onDone: (() -> Void)?

    init(loop: EventLoop, address: SocketAddress, request: [UInt8], stats: LoopStats, quota: Int) {
        self.loop = loop
        self.address = address
        self.request = request
        self.stats = stats
        self.quota = quota
        self.buffer = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit { self.buffer.deallocate() }

    /// Connects (blocking: set-up is not measured) and sends the first request.
    func start(onDone: @escaping () -> Void) {
        self.onDone = onDone
        guard self.connect() else {
            self.stats.connectErrors += 1
            self.finish()
            return
        }
        self.sendRequest()
    }

    private func connect() -> Bool {
        let fd = socket(self.address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        let rc = LoadAddress.connect(fd, self.address)
        if rc != 0 {
            close(fd)
            return false
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.fd = fd
        do {
            try self.loop.register(fd: fd, handler: self, readable: true, writable: false)
        } catch {
            close(fd)
            self.fd = -1
            return false
        }
        return true
    }

    private func sendRequest() {
        if self.stopping || self.sent >= self.quota {
            self.finish()
            return
        }
        self.sent += 1
        self.parser.expectResponse(to: .get)
        self.sentAt = Clock.nowNanos()
        let n = self.request.withUnsafeBytes { send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n != self.request.count {
            // Requests are tiny; a short write on a fresh socket means the peer is gone.
            self.fail()
        }
    }

    func ioReadable() {
        guard self.fd >= 0 else { return }
        if self.end == self.buffer.count {
            // Compact (a partial head at the end of the buffer).
            let n = self.end - self.start
            self.buffer.baseAddress!.copyMemory(from: self.buffer.baseAddress! + self.start, byteCount: n)
            self.start = 0
            self.end = n
        }
        let n = read(self.fd, self.buffer.baseAddress! + self.end, self.buffer.count - self.end)
        if n <= 0 {
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            self.fail()
            return
        }
        self.end += n
        self.stats.bytesRead += n
        while self.fd >= 0 {
            let input = UnsafeRawBufferPointer(rebasing: self.buffer[self.start..<self.end])
            let step: (consumed: Int, event: HTTP1ResponseEvent?)
            do {
                step = try self.parser.next(input)
            } catch {
                self.fail()
                return
            }
            self.start += step.consumed
            if self.start == self.end {
                self.start = 0
                self.end = 0
            }
            guard let event = step.event else { return }
            if case .end(let keepAlive) = event {
                let latency = (Clock.nowNanos() - self.sentAt) / 1000
                _ = self.stats.histogram.record(latency)
                self.stats.requests += 1
                if !keepAlive {
                    self.reconnect()
                    return
                }
                self.sendRequest()
                return
            }
        }
    }

    func ioWritable() {}

    private func reconnect() {
        self.closeSocket()
        self.parser = HTTP1ResponseParser()
        self.start = 0
        self.end = 0
        if self.stopping || self.sent >= self.quota {
            self.finish()
            return
        }
        if self.connect() {
            self.sendRequest()
        } else {
            self.stats.connectErrors += 1
            self.finish()
        }
    }

    private func fail() {
        self.stats.errors += 1
        self.reconnect()
    }

    func stop() {
        self.stopping = true
        self.finish()
    }

    private func closeSocket() {
        if self.fd >= 0 {
            self.loop.deregister(fd: self.fd)
            close(self.fd)
            self.fd = -1
        }
    }

    private func finish() {
        self.closeSocket()
        let d = self.onDone
        self.onDone = nil
        d?()
    }
}

enum LoadAddress {
    static func connect(_ fd: Int32, _ address: SocketAddress) -> Int32 {
        address.withSockAddr { Glibc.connect(fd, $0, $1) }
    }
}

enum Clock {
    @inline(__always)
    static func nowNanos() -> UInt64 { TaskMetrics.now() }
}
