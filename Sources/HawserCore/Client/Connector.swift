// Opens one TCP connection for the pool: resolve (off-loop unless the host is a literal),
// then try each address in turn with a non-blocking connect, all under one connect
// timeout. Loop-confined.
import CHawser

#if canImport(Glibc)
import Glibc
#endif

final class Connector: EventLoopIOHandler {
    typealias Completion = (Connector, Result<(fd: Int32, address: SocketAddress, timings: HTTP1Connection.ConnectTimings), HawserError>) -> Void

    let key: ConnectionKey
    private let loop: EventLoop
    private let timeoutSeconds: Double
    private var completion: Completion?
    private var addresses: [SocketAddress] = []
    private var index = 0
    private var fd: Int32 = -1
    private var timer: Scheduled?
    private var timings = HTTP1Connection.ConnectTimings()
    private var errors: [String] = []

    init(key: ConnectionKey, loop: EventLoop, timeoutSeconds: Double, completion: @escaping Completion) {
        self.key = key
        self.loop = loop
        self.timeoutSeconds = timeoutSeconds
        self.completion = completion
    }

    func start() {
        self.timer = self.loop.scheduleInLoop(in: RequestTask.nanos(self.timeoutSeconds)) { [unowned(unsafe) self] in
            self.timer = nil
            self.finish(.failure(HawserError(.connectTimeout, "connecting to \(self.key.host):\(self.key.port) took longer than \(self.timeoutSeconds) s")))
        }
        if let literal = SocketAddress(ipAddress: self.key.host, port: self.key.port) {
            self.addresses = [literal]
            self.tryNext()
            return
        }
        self.timings.domainLookupStart = TaskMetrics.now()
        let loop = self.loop
        let box = UnsafeTransfer(self)
        Resolver.shared.resolve(host: self.key.host, port: self.key.port) { result in
            loop.execute { box.value.resolved(result) }
        }
    }

    private func resolved(_ result: Result<[SocketAddress], ResolutionError>) {
        guard self.completion != nil else { return }
        self.timings.domainLookupEnd = TaskMetrics.now()
        switch result {
        case .success(let a):
            self.addresses = a
            self.tryNext()
        case .failure(let e):
            self.finish(.failure(HawserError(.cannotResolveHost, e.description, underlying: e)))
        }
    }

    private func tryNext() {
        while self.index < self.addresses.count, self.completion != nil {
            let address = self.addresses[self.index]
            self.index += 1
            if self.timings.connectStart == nil { self.timings.connectStart = TaskMetrics.now() }
            do {
                let fd = try Posix.socket(family: address.family)
                self.fd = fd
                try Posix.setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1)
                switch try Posix.connect(fd, address) {
                case .processed:
                    self.connected()
                    return
                case .wouldBlock:
                    try self.loop.register(fd: fd, handler: self, readable: false, writable: true)
                    return
                }
            } catch {
                self.errors.append("\(address): \(error)")
                self.closeSocket()
            }
        }
        if self.completion != nil {
            let detail = self.errors.isEmpty ? "no address to try" : self.errors.joined(separator: "; ")
            self.finish(.failure(HawserError(.cannotConnect, "cannot connect to \(self.key.host):\(self.key.port): \(detail)")))
        }
    }

    func ioWritable() { self.checkConnect() }
    func ioReadable() { self.checkConnect() }

    private func checkConnect() {
        guard self.fd >= 0, self.completion != nil else { return }
        let address = self.addresses[self.index - 1]
        do {
            let err = try Posix.socketError(self.fd)
            if err == 0 {
                self.loop.deregister(fd: self.fd)
                self.connected()
                return
            }
            self.errors.append("\(address): \(IOError(errnoCode: err, function: "connect"))")
        } catch {
            self.errors.append("\(address): \(error)")
        }
        self.closeSocket()
        self.tryNext()
    }

    private func connected() {
        self.timings.connectEnd = TaskMetrics.now()
        let fd = self.fd
        self.fd = -1
        let address = self.addresses[self.index - 1]
        self.timer?.cancel()
        self.timer = nil
        let c = self.completion
        self.completion = nil
        c?(self, .success((fd, address, self.timings)))
    }

    private func closeSocket() {
        if self.fd >= 0 {
            self.loop.deregister(fd: self.fd)
            Posix.close(self.fd)
            self.fd = -1
        }
    }

    /// Ends the attempt with `result`; closes any half-open socket. Idempotent.
    func finish(_ result: Result<(fd: Int32, address: SocketAddress, timings: HTTP1Connection.ConnectTimings), HawserError>) {
        guard let c = self.completion else { return }
        self.completion = nil
        self.timer?.cancel()
        self.timer = nil
        self.closeSocket()
        c(self, result)
    }

}

/// Moves a loop-confined reference through a @Sendable closure that only uses it back on
/// the same loop.
struct UnsafeTransfer<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
