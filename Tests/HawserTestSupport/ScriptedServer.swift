import CHawser
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A raw-socket server for broken peers: each accepted connection runs the next script,
/// step by step, on its own thread with blocking sockets. No HTTP library underneath.
public final class ScriptedServer: @unchecked Sendable {
    public enum Step: Sendable {
        /// Read until a full request head ("\r\n\r\n") plus `body` bytes arrived.
        case readRequest(body: Int = 0)
        /// Read exactly this many bytes (a body after its head), counted in `bodyBytesRead`.
        case readBody(Int)
        /// Write these bytes.
        case send([UInt8])
        /// Write a string.
        case sendText(String)
        /// Close the connection (FIN).
        case close
        /// Close with RST (SO_LINGER 0).
        case reset
        /// Wait for the client to close (or for the server to stop).
        case waitForClose
        /// Read and discard until the client closes (never answer).
        case hang
        /// Read nothing at all until the server stops or the client closes (the client's
        /// writes fill the socket buffers and block).
        case stall
        /// Wait until the server has read this many request heads in all, on any connection (or
        /// stops): the client has that many requests in flight at once.
        case awaitRequests(Int)
        /// Wait until the test opens the gate (or the server stops).
        case gate(Gate)
    }

    /// A latch a script waits on until the test opens it.
    public final class Gate: @unchecked Sendable {
        private let condition = NSCondition()
        private var open = false

        public init() {}

        public func openGate() {
            self.condition.lock()
            self.open = true
            self.condition.broadcast()
            self.condition.unlock()
        }

        fileprivate func wait(unless stopped: () -> Bool) {
            self.condition.lock()
            while !self.open && !stopped() {
                // Woken by openGate; the bound only lets a stopping server end the wait.
                _ = self.condition.wait(until: Date(timeIntervalSinceNow: 0.05))
            }
            self.condition.unlock()
        }
    }

    /// Request heads (and the body bytes `readRequest` asked for) received so far, on every connection.
    public var requestCount: Int { self.received.withLock { $0.count } }

    public let port: Int
    private let listenFD: Int32
    private let scripts: Mutex<[[Step]]>
    private let stopped = Atomic<Bool>(false)
    private let acceptThread: Thread
    public let connections = Atomic<Int>(0)
    /// Bytes the `readBody` steps have read.
    public let bodyBytes = Atomic<Int>(0)
    /// Signalled after each request head read (for `.awaitRequests`).
    private let requestCondition = NSCondition()
    private let received = Mutex<[[UInt8]]>([])
    /// Every thread (accept loop and scripts) is in this group until it has closed its sockets.
    private let threads = DispatchGroup()

    /// `scripts[i]` runs on the i-th accepted connection; later connections are closed at once.
    public init(_ scripts: [[Step]]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        precondition(fd >= 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(4))
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        sin.sin_port = 0
        let rc = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        precondition(rc == 0)
        listen(fd, 64)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
        }
        self.port = Int(UInt16(bigEndian: sin.sin_port))
        self.listenFD = fd
        self.scripts = Mutex(scripts)
        let state = ThreadState()
        self.acceptThread = Thread { state.run() }
        state.server = self
        self.threads.enter()
        self.acceptThread.start()
    }

    private final class ThreadState: @unchecked Sendable {
        weak var server: ScriptedServer?
        func run() { self.server?.acceptLoop() }
    }

    public var baseURL: String { "http://127.0.0.1:\(self.port)" }

    /// Raw bytes each connection received.
    public var requests: [[UInt8]] { self.received.withLock { $0 } }
    /// Bytes read after the last `readRequest` step of each finished script (e.g. a body the
    /// client sent although the server had answered).
    public var unrequestedBytes: Int { self.extra.withLock { $0 } }
    private let extra = Mutex<Int>(0)

    private func acceptLoop() {
        defer {
            close(self.listenFD)
            self.threads.leave()
        }
        let lfd = self.listenFD
        while !self.stopped.load(ordering: .relaxed) {
            var pfd = pollfd(fd: lfd, events: Int16(POLLIN), revents: 0)
            let r = poll(&pfd, 1, 50)
            if r <= 0 { continue }
            let c = accept(lfd, nil, nil)
            if c < 0 { continue }
            self.connections.add(1, ordering: .relaxed)
            let script = self.scripts.withLock { s -> [Step]? in s.isEmpty ? nil : s.removeFirst() }
            guard let script else {
                close(c)
                continue
            }
            self.threads.enter()
            let t = Thread { [self] in
                self.runScript(script, fd: c)
                self.threads.leave()
            }
            t.start()
        }
    }

    private func runScript(_ script: [Step], fd: Int32) {
        var inbox: [UInt8] = []
        var closed = false
        func readSome() -> Bool {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while !self.stopped.load(ordering: .relaxed) {
                if poll(&pfd, 1, 50) > 0 { break }
            }
            if self.stopped.load(ordering: .relaxed) { return false }
            var buf = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &buf, buf.count)
            if n <= 0 { return false }
            inbox.append(contentsOf: buf[0..<n])
            return true
        }
        for step in script where !closed {
            switch step {
            case .readRequest(let body):
                while true {
                    if let end = Self.find(inbox, Array("\r\n\r\n".utf8)), inbox.count >= end + 4 + body {
                        let req = Array(inbox[0..<(end + 4 + body)])
                        self.requestCondition.lock()
                        self.received.withLock { $0.append(req) }
                        self.requestCondition.broadcast()
                        self.requestCondition.unlock()
                        inbox.removeFirst(end + 4 + body)
                        break
                    }
                    if !readSome() {
                        closed = true
                        break
                    }
                }
            case .readBody(let count):
                while inbox.count < count {
                    if !readSome() {
                        closed = true
                        break
                    }
                }
                let n = min(count, inbox.count)
                inbox.removeFirst(n)
                self.bodyBytes.add(n, ordering: .relaxed)
            case .send(let bytes):
                _ = bytes.withUnsafeBytes { CHawser_send(fd, $0.baseAddress, $0.count) }
            case .sendText(let s):
                let b = Array(s.utf8)
                _ = b.withUnsafeBytes { CHawser_send(fd, $0.baseAddress, $0.count) }
            case .close:
                closed = true
            case .gate(let gate):
                gate.wait(unless: { self.stopped.load(ordering: .relaxed) })
            case .awaitRequests(let n):
                self.requestCondition.lock()
                while self.requestCount < n && !self.stopped.load(ordering: .relaxed) {
                    // Woken by each request read; the bound only lets a stopping server end the wait.
                    _ = self.requestCondition.wait(until: Date(timeIntervalSinceNow: 0.05))
                }
                self.requestCondition.unlock()
            case .reset:
                _ = CHawser_set_linger_zero(fd)
                closed = true
            case .waitForClose, .hang:
                while readSome() {}
                closed = true
            case .stall:
                // Poll for the peer's close without reading: POLLRDHUP reports it, POLLIN would
                // only say there is data.
                let rdhup: Int16 = 0x2000  // POLLRDHUP: Linux, but _GNU_SOURCE-only in glibc's headers
                var pfd = pollfd(fd: fd, events: rdhup, revents: 0)
                while !self.stopped.load(ordering: .relaxed) {
                    if poll(&pfd, 1, 50) > 0 && pfd.revents & (rdhup | Int16(POLLHUP) | Int16(POLLERR)) != 0 { break }
                }
                closed = true
            }
        }
        self.extra.withLock { $0 += inbox.count }
        close(fd)
    }

    static func find(_ hay: [UInt8], _ needle: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] {
            if Array(hay[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }

    public func stop() {
        self.stopped.store(true, ordering: .relaxed)
        // Threads poll with a 50 ms tick; wait until each has closed its socket.
        self.threads.wait()
    }
}

/// A listener with backlog 0 that never accepts, its queue filled by non-blocking connects:
/// the kernel then drops further SYNs, so a connect to it neither succeeds nor fails.
public final class FullBacklogListener {
    public let port: Int
    private let fd: Int32
    private var fillers: [Int32] = []

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(fd, 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: sin.sin_port))
        // Backlog 0 admits one completed connection; a few more fill the SYN side too.
        for _ in 0..<4 {
            let c = CHawser_socket_stream(AF_INET)
            _ = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(c, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            self.fillers.append(c)
        }
    }

    public func close() {
        for c in self.fillers { Glibc.close(c) }
        Glibc.close(self.fd)
    }
}
