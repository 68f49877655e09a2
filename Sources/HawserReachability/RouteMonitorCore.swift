// The loop-confined core of a RouteMonitor: one run's sockets, the evaluation state machine
// (route queries, then link and address dumps, then a verdict) and the coalescing timer. See
// RouteMonitor.swift for the theory of operation.
import CHawser
import HawserPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// MARK: - The loop-confined core

/// One run of a monitor: its sockets, the evaluation state machine and the timers. Lives on the
/// loop's thread; `closeAndWait` may be called from anywhere.
final class RouteMonitorCore: @unchecked Sendable {
    private let loop: EventLoop
    private let sockets: RouteSockets
    private let target: RouteTarget
    private let namespaced: Bool
    private let delayNanoseconds: UInt64
    private let deliver: (RouteStatus) -> Void
    private let portID: UInt32

    // Loop-confined.
    private var closed = false
    private var started = false
    private var dirty = false
    private var coalesce: Scheduled?
    private var evaluation: Evaluation?
    private var evaluationID: UInt64 = 0
    private var sequence: UInt32 = 0
    private var last: RouteStatus?
    private var eventReader: Reader?
    private var queryReader: Reader?
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    private var failures = 0

    // Shared between the closer (any thread) and the loop.
    private let socketsClosed = Mutex(false)
    private let closeSignal = OneShotSignal()

    init(
        loop: EventLoop,
        sockets: RouteSockets,
        target: RouteTarget,
        namespaced: Bool,
        delay: Duration,
        deliver: @escaping (RouteStatus) -> Void
    ) {
        self.loop = loop
        self.sockets = sockets
        self.target = target
        self.namespaced = namespaced
        let c = delay.components
        self.delayNanoseconds =
            UInt64(max(0, c.seconds)) * 1_000_000_000 + UInt64(max(0, c.attoseconds / 1_000_000_000))
        self.deliver = deliver
        self.portID = CHawser_netlink_port_id(sockets.query)
    }

    /// Registers the sockets and runs the first evaluation (loop thread).
    func begin() {
        self.loop.assertInLoop()
        guard !self.closed, !self.started else { return }
        if self.loop.isShutDown {  // a late task of a stopping loop: never register
            self.teardown()
            return
        }
        self.started = true
        self.loop.onShutdown(for: ObjectIdentifier(self)) { [self] in self.teardown() }
        let ev = Reader { [unowned self] in self.readEvents() }
        let q = Reader { [unowned self] in self.readQueryAnswers() }
        do {
            try self.loop.register(fd: self.sockets.events, handler: ev, readable: true, writable: false)
            self.eventReader = ev
            try self.loop.register(fd: self.sockets.query, handler: q, readable: true, writable: false)
            self.queryReader = q
        } catch {
            self.publish(.unknown)
            self.teardown()
            return
        }
        self.startEvaluation()
    }

    /// Closes the sockets on the loop and waits until they are closed. Runs inline on the loop
    /// thread. If the loop shuts down meanwhile, its shutdown hook closes them; if this core was
    /// never started there (the loop was already stopping), they are closed here once the
    /// loop's thread has finished, so the wait always ends.
    func closeAndWait() {
        if self.loop.inEventLoop {
            self.teardown()
            return
        }
        if !self.loop.isShutDown {
            self.loop.execute { [self] in self.teardown() }
        }
        while !self.closeSignal.wait(milliseconds: 100) {
            if self.loop.isShutDown {
                self.loop.shutdown()  // already requested by someone else: this only waits for its end
                self.closeSocketsOnce()
                return
            }
        }
    }

    private func teardown() {
        if !self.closed {
            self.closed = true
            self.coalesce?.cancel()
            self.coalesce = nil
            self.evaluation = nil
            if self.started {
                self.loop.removeShutdownHook(for: ObjectIdentifier(self))
            }
            if self.eventReader != nil { self.loop.deregister(fd: self.sockets.events) }
            if self.queryReader != nil { self.loop.deregister(fd: self.sockets.query) }
            self.eventReader = nil
            self.queryReader = nil
        }
        self.closeSocketsOnce()
    }

    /// Closes both sockets exactly once, whoever gets here first, and wakes `closeAndWait`.
    private func closeSocketsOnce() {
        let first = self.socketsClosed.withLock { c -> Bool in
            defer { c = true }
            return !c
        }
        if first { self.sockets.close() }
        self.closeSignal.signal()
    }

    // MARK: Notifications

    private func readEvents() {
        var relevant = false
        while !self.closed {
            let n = self.buffer.withUnsafeMutableBytes {
                CHawser_netlink_recv(self.sockets.events, $0.baseAddress, $0.count)
            }
            if n < 0 {
                let e = CHawser_errno()
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK { break }
                // ENOBUFS: the kernel dropped notifications; the only safe reading is "changed".
                relevant = true
                if e != ENOBUFS { break }
                continue
            }
            guard n > 0 else { break }
            guard n <= self.buffer.count else {
                relevant = true
                continue
            }  // truncated: re-check
            guard let messages = try? Netlink.messages(in: Array(self.buffer[0..<n])) else {
                relevant = true
                continue
            }
            for m in messages where Self.isChange(m.type) { relevant = true }
        }
        if relevant { self.markDirty() }
    }

    private static func isChange(_ type: UInt16) -> Bool {
        switch type {
        case CHAWSER_RTM_NEWLINK, CHAWSER_RTM_DELLINK, CHAWSER_RTM_NEWADDR, CHAWSER_RTM_DELADDR,
            CHAWSER_RTM_NEWROUTE, CHAWSER_RTM_DELROUTE:
            return true
        default:
            return false
        }
    }

    private func markDirty() {
        guard !self.closed else { return }
        self.dirty = true
        self.scheduleEvaluationIfIdle()
    }

    private func scheduleEvaluationIfIdle() {
        guard !self.closed, self.dirty, self.evaluation == nil, self.coalesce == nil else { return }
        // Back off while evaluations keep failing (up to 64 times the delay), so a kernel that
        // refuses a query cannot turn the monitor into a busy loop.
        let delay = self.delayNanoseconds << UInt64(min(self.failures, 6))
        self.coalesce = self.loop.scheduleInLoop(in: delay) { [weak self] in
            guard let self else { return }
            self.coalesce = nil
            self.startEvaluation()
        }
    }

    // MARK: Evaluation

    private enum Query {
        case route(family: UInt8, destination: [UInt8])
        case links
        case addresses
    }

    private struct Evaluation {
        var id: UInt64
        var destinations: [(family: UInt8, destination: [UInt8])] = []
        var queue: [Query] = []
        var current: (query: Query, sequence: UInt32)?
        var routes: [Result<Netlink.Route, RouteFailure>] = []
        var links: [Int32: Netlink.Link] = [:]
        var addresses: [Netlink.Address] = []
        var interrupted = false
        var failure: String?
    }

    private func startEvaluation() {
        guard !self.closed else { return }
        self.dirty = false
        self.evaluationID &+= 1
        let id = self.evaluationID
        self.evaluation = Evaluation(id: id)
        switch self.target {
        case .defaultRoute:
            self.query(destinations: Self.defaultRouteProbes)
        case .address(let a):
            self.query(destinations: [Self.raw(a)])
        case .host(let h):
            let bound = LoopBound(self, loop: self.loop)
            Resolver.shared.resolve(host: h, port: 0) { result in
                bound.loop.execute {
                    let core = bound.value
                    guard !core.closed, core.evaluation?.id == id else { return }
                    switch result {
                    case .success(let addresses):
                        var seen = Set<[UInt8]>()
                        var dests: [(UInt8, [UInt8])] = []
                        for a in addresses {
                            let r = Self.raw(a)
                            if seen.insert(r.1).inserted { dests.append(r) }
                        }
                        core.query(destinations: dests)
                    case .failure(let e):
                        core.finish(.notReachable(reason: e.description))
                    }
                }
            }
        }
    }

    /// The destinations whose routes stand for "the default route": a lookup for the unspecified
    /// address would answer with the loopback route, so the monitor asks for the route to a
    /// global unicast address of each family (Google's public DNS, a common choice for this),
    /// which only a default route (or a more specific route towards the Internet) can serve.
    /// A route lookup sends no packet.
    static let defaultRouteProbes: [(UInt8, [UInt8])] = [
        (UInt8(AF_INET), [8, 8, 8, 8]),
        (UInt8(AF_INET6), [0x20, 0x01, 0x48, 0x60, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88]),
    ]

    private static func raw(_ a: SocketAddress) -> (UInt8, [UInt8]) {
        switch a.storage {
        case .v4(let host, _):
            return (UInt8(AF_INET), withUnsafeBytes(of: host) { Array($0) })
        case .v6(let host, _, _):
            return (UInt8(AF_INET6), host)
        case .unix:
            preconditionFailure("a route target is never a Unix-domain address")
        }
    }

    private func query(destinations: [(UInt8, [UInt8])]) {
        guard !self.closed, self.evaluation != nil else { return }
        self.evaluation!.destinations = destinations.map { (family: $0.0, destination: $0.1) }
        self.evaluation!.queue = destinations.map { .route(family: $0.0, destination: $0.1) } + [.links, .addresses]
        self.sendNext()
    }

    private func sendNext() {
        guard !self.closed, var ev = self.evaluation else { return }
        guard !ev.queue.isEmpty else {
            self.finish(self.verdict(ev))
            return
        }
        let q = ev.queue.removeFirst()
        self.sequence &+= 1
        if self.sequence == 0 { self.sequence = 1 }
        let bytes: [UInt8]
        switch q {
        case .route(let family, let destination):
            bytes = Netlink.routeRequest(family: family, destination: destination, sequence: self.sequence)
        case .links:
            bytes = Netlink.dumpRequest(type: CHAWSER_RTM_GETLINK, sequence: self.sequence)
        case .addresses:
            bytes = Netlink.dumpRequest(type: CHAWSER_RTM_GETADDR, sequence: self.sequence)
        }
        ev.current = (q, self.sequence)
        self.evaluation = ev
        let sent = bytes.withUnsafeBytes { CHawser_netlink_send(self.sockets.query, $0.baseAddress, $0.count) }
        if sent != bytes.count {
            let e = CHawser_errno()
            self.finish(.unknown, retryAfter: true, note: "netlink send failed: errno \(e)")
        }
    }

    private func readQueryAnswers() {
        while !self.closed {
            let n = self.buffer.withUnsafeMutableBytes {
                CHawser_netlink_recv(self.sockets.query, $0.baseAddress, $0.count)
            }
            if n < 0 {
                let e = CHawser_errno()
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK { return }
                // The answer was lost (ENOBUFS) or the socket failed: start over later.
                self.finish(.unknown, retryAfter: true, note: "netlink receive failed: errno \(e)")
                return
            }
            if n == 0 { return }
            if n > self.buffer.count {
                self.finish(.unknown, retryAfter: true, note: "netlink answer of \(n) bytes truncated")
                continue
            }
            let messages: [Netlink.Message]
            do {
                messages = try Netlink.messages(in: Array(self.buffer[0..<n]))
            } catch {
                self.finish(.unknown, retryAfter: true, note: error.description)
                continue
            }
            for m in messages {
                self.handleAnswer(m)
                if self.closed { return }
            }
        }
    }

    private func handleAnswer(_ m: Netlink.Message) {
        guard var ev = self.evaluation, let current = ev.current,
            m.sequence == current.sequence, m.portID == self.portID || m.portID == 0
        else {
            return  // an answer to an abandoned evaluation
        }
        if m.dumpInterrupted { ev.interrupted = true }
        var complete = false
        do {
            switch current.query {
            case .route:
                if m.isError {
                    let code = try m.errorCode()
                    if code == 0 { return }  // an ack; the route message is the answer
                    ev.routes.append(.failure(RouteFailure(errnoCode: code)))
                    complete = true
                } else if m.type == CHAWSER_RTM_NEWROUTE {
                    ev.routes.append(.success(try Netlink.Route(payload: m.payload)))
                    complete = true
                }
            case .links, .addresses:
                if m.isDone {
                    complete = true
                } else if m.isError {
                    let code = try m.errorCode()
                    if code != 0 {
                        ev.failure = "netlink dump failed: \(String(cString: strerror(code)))"
                        complete = true
                    }
                } else if m.type == CHAWSER_RTM_NEWLINK {
                    let l = try Netlink.Link(payload: m.payload)
                    ev.links[l.index] = l
                } else if m.type == CHAWSER_RTM_NEWADDR {
                    ev.addresses.append(try Netlink.Address(payload: m.payload))
                }
            }
        } catch {
            self.evaluation = ev
            self.finish(.unknown, retryAfter: true, note: error.description)
            return
        }
        if complete { ev.current = nil }
        self.evaluation = ev
        if complete {
            if let f = ev.failure {
                self.finish(.unknown, retryAfter: true, note: f)
            } else {
                self.sendNext()
            }
        }
    }

    /// The verdict from the answers: the first destination with a usable path wins.
    private func verdict(_ ev: Evaluation) -> RouteStatus {
        var firstReason: String?
        for (i, r) in ev.routes.enumerated() {
            let dest = ev.destinations[i]
            let what =
                self.target == .defaultRoute
                ? (dest.family == UInt8(AF_INET) ? "IPv4 default route" : "IPv6 default route")
                : "route to \(Self.text(dest))"
            switch r {
            case .failure(let failure):
                let code = failure.errnoCode
                firstReason = firstReason ?? "no \(what): \(String(cString: strerror(code)))"
            case .success(let route):
                guard route.type == CHAWSER_RTN_UNICAST || route.type == CHAWSER_RTN_LOCAL else {
                    firstReason = firstReason ?? "\(what) is of type \(route.type) (not unicast)"
                    continue
                }
                guard let oif = route.outputInterface, let link = ev.links[oif] else {
                    firstReason = firstReason ?? "\(what) has no output interface"
                    continue
                }
                guard link.flags & CHAWSER_IFF_UP != 0 else {
                    firstReason = firstReason ?? "\(what) leaves through \(link.name), which is down"
                    continue
                }
                guard link.flags & CHAWSER_IFF_RUNNING != 0 else {
                    firstReason = firstReason ?? "\(what) leaves through \(link.name), which has no carrier"
                    continue
                }
                guard ev.addresses.contains(where: { $0.index == oif && $0.isUsable }) else {
                    firstReason = firstReason ?? "\(what) leaves through \(link.name), which has no usable address"
                    continue
                }
                return .reachable(via: NetworkInterface(index: link.index, name: link.name, kind: self.kind(of: link)))
            }
        }
        return .notReachable(reason: firstReason ?? "no destination to route to")
    }

    private static func text(_ d: (family: UInt8, destination: [UInt8])) -> String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        d.destination.withUnsafeBytes { _ = inet_ntop(Int32(d.family), $0.baseAddress, &buf, socklen_t(buf.count)) }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Wi-Fi from sysfs (own namespace only, and only when sysfs's interface of that name has
    /// the same index), loopback and Ethernet from the link's flags and hardware type.
    private func kind(of link: Netlink.Link) -> InterfaceKind {
        if link.flags & CHAWSER_IFF_LOOPBACK != 0 || link.hardwareType == 772 { return .loopback }
        if !self.namespaced, Self.isWireless(link) { return .wifi }
        return link.hardwareType == 1 ? .wired : .other
    }

    static func isWireless(_ link: Netlink.Link) -> Bool {
        guard !link.name.isEmpty, !link.name.contains("/"), link.name != ".", link.name != ".." else { return false }
        let base = "/sys/class/net/\(link.name)"
        guard let index = readSmallFile(base + "/ifindex"),
            Int32(index.trimmingCharacters(in: " \n")) == link.index
        else { return false }
        if access(base + "/wireless", F_OK) == 0 { return true }
        if let uevent = readSmallFile(base + "/uevent") {
            return uevent.split(separator: "\n").contains("DEVTYPE=wlan")
        }
        return false
    }

    /// Reads up to 4 KiB of a sysfs attribute (an in-memory file: this does not block).
    private static func readSmallFile(_ path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { return nil }
        defer { Posix.close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n], as: UTF8.self)
    }

    private func finish(_ status: RouteStatus, retryAfter: Bool = false, note: String = "") {
        guard !self.closed else { return }
        let interrupted = self.evaluation?.interrupted ?? false
        self.evaluation = nil
        if retryAfter || interrupted { self.dirty = true }
        self.failures = retryAfter ? self.failures + 1 : 0
        // A failed evaluation keeps the last good answer, unless there is none yet.
        if !(retryAfter && self.last != nil) {
            self.publish(status)
        }
        self.scheduleEvaluationIfIdle()
    }

    private func publish(_ status: RouteStatus) {
        guard status != self.last else { return }
        self.last = status
        self.deliver(status)
    }
}

/// A one-shot signal with a bounded wait (a pthread condition with a CLOCK_MONOTONIC timeout).
final class OneShotSignal: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var signalled = false

    init() {
        pthread_mutex_init(self.mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(self.cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(self.cond)
        pthread_mutex_destroy(self.mutex)
        self.cond.deallocate()
        self.mutex.deallocate()
    }

    func signal() {
        pthread_mutex_lock(self.mutex)
        self.signalled = true
        pthread_cond_broadcast(self.cond)
        pthread_mutex_unlock(self.mutex)
    }

    /// Waits until signalled or `milliseconds` pass; returns whether it was signalled.
    func wait(milliseconds: Int) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let ns = Int(deadline.tv_nsec) + milliseconds * 1_000_000
        deadline.tv_sec += ns / 1_000_000_000
        deadline.tv_nsec = ns % 1_000_000_000
        pthread_mutex_lock(self.mutex)
        defer { pthread_mutex_unlock(self.mutex) }
        while !self.signalled {
            if pthread_cond_timedwait(self.cond, self.mutex, &deadline) == ETIMEDOUT { break }
        }
        return self.signalled
    }
}

/// A readiness handler that calls one closure.
private final class Reader: EventLoopIOHandler {
    let onReadable: () -> Void
    init(_ onReadable: @escaping () -> Void) { self.onReadable = onReadable }
    func ioReadable() { self.onReadable() }
    func ioWritable() {}
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        let chars = Set(set)
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

/// The kernel's refusal of one route query (an errno such as ENETUNREACH).
private struct RouteFailure: Error {
    var errnoCode: Int32
}
