// Shared by every test target: descriptor-leak checks, the recording delegate, one-shot
// signals and bounded waits, scripted raw-socket servers, process fixtures (nginx, httpbin,
// tinyproxy, Dante) and network namespaces. Test-only: never part of the library.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Descriptors that can be ours: everything but libdispatch's lazily created timerfds (one per
/// clock kind, made by the Swift runtime's first timed wait). Hawser never creates a timerfd:
/// its timers ride the epoll_wait timeout, so excluding them hides nothing of the engine's.
func ownFDs() -> [Int: String] {
    openDescriptors().filter { $0.value != "anon_inode:[timerfd]" }
}

func openFDCount() -> Int { ownFDs().count }

/// Runs `body`, then asserts the process holds no more descriptors than before.
/// Sockets close on their loop, so the check waits (bounded) for the loop to catch up.
public func expectNoFDLeak(_ what: String = "", _ body: () async throws -> Void) async rethrows {
    // The Swift runtime's timer (libdispatch's timerfd) is created by the first Task.sleep:
    // make sure it exists before counting, so it is not blamed on the code under test.
    try? await Task.sleep(nanoseconds: 1)
    let beforeSet = Set(ownFDs().keys)
    let before = beforeSet.count
    try await body()
    var after = openFDCount()
    var spins = 0
    while after > before && spins < 200 {
        await Task.yield()
        try? await Task.sleep(nanoseconds: 5_000_000)
        after = openFDCount()
        spins += 1
    }
    let leaked = ownFDs().filter { !beforeSet.contains($0.key) }.map { "\($0.key) → \($0.value)" }.sorted()
    #expect(after <= before, "file descriptors leaked \(what): \(before) before, \(after) after: \(leaked)")
}

/// Counts every delegate event and records the order, for exactly-once assertions.
open class RecordingDelegate: ResponseDelegate, @unchecked Sendable {
    public struct Record: Sendable {
        public var interim: [Int] = []
        public var head: HTTPResponseHead?
        public var body: [UInt8] = []
        public var completions = 0
        public var result: Result<HTTPHeaders?, HawserError>?
        public var metrics: TaskMetrics?
        public var sentProgress: [Int64] = []
    }
    public let record = Mutex(Record())
    private let finished = AsyncStreamBox()
    /// Called on the loop with each body chunk (e.g. to cancel mid-body).
    public var onBody: (@Sendable (RequestTask, Int) -> Void)?
    public var onHead: (@Sendable (RequestTask) -> Void)?

    public init() {}

    open func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead) {
        self.record.withLock { $0.interim.append(head.status) }
    }
    open func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.record.withLock { $0.head = head }
        self.onHead?(task)
    }
    open func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        let total = self.record.withLock { r -> Int in
            r.body.append(contentsOf: bytes)
            return r.body.count
        }
        self.onBody?(task, total)
    }
    open func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
        self.record.withLock { $0.sentProgress.append(totalSent) }
    }
    open func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics)
    {
        self.record.withLock {
            $0.completions += 1
            $0.result = result
            $0.metrics = metrics
        }
        self.finished.signal()
    }

    // The protocol's defaults, as methods so subclasses can override them.
    open func task(
        _ task: RequestTask,
        willPerformRedirection response: HTTPResponseHead,
        newRequest: HTTPClientRequest,
        completion: @escaping @Sendable (HTTPClientRequest?) -> Void
    ) {
        completion(newRequest)
    }
    open func task(_ task: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void) {
        completion(nil)
    }
    open func task(
        _ task: RequestTask,
        didReceive challenge: AuthenticationChallenge,
        completion: @escaping @Sendable (ChallengeDisposition) -> Void
    ) {
        completion(.performDefaultHandling)
    }
    open func task(
        _ task: RequestTask,
        willCacheResponse proposed: CachedResponse,
        completion: @escaping @Sendable (CachedResponse?) -> Void
    ) {
        completion(proposed)
    }

    /// Waits for the completion, then gives the loop a moment to deliver a (wrong) second one.
    public func wait() async -> Record {
        await self.finished.wait()
        return self.record.withLock { $0 }
    }

    public var error: HawserError? {
        self.record.withLock { r in
            if case .failure(let e)? = r.result { return e }
            return nil
        }
    }
}

/// A one-shot signal usable from any thread.
public final class AsyncStreamBox: Sendable {
    public init() {}
    private let state = Mutex<(signalled: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    public func signal() {
        let w = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.signalled = true
            let w = s.waiters
            s.waiters = []
            return w
        }
        for c in w { c.resume() }
    }
    public func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = self.state.withLock { s -> Bool in
                if s.signalled { return true }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }
}

public func url(_ s: String) -> URL { URL(string: s)! }

/// Runs `body` with a test server (https with the test PKI's valid leaf when `tls`, on `host`)
/// and a session on a loop of its own (trusting the test root when `tls`), torn down and
/// descriptor-checked at the end, also when `body` throws.
public func withServer(
    host: String = "127.0.0.1",
    tls: Bool = false,
    _ configure: (inout SessionConfiguration) -> Void = { _ in },
    _ body: (TestServer, Session) async throws -> Void
) async throws {
    try await expectNoFDLeak {
        var config = SessionConfiguration()
        var serverTLS: TestServer.TLS? = nil
        if tls {
            let pki = try TestPKI.shared()
            serverTLS = TestServer.TLS(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
            config.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.root]))
        }
        configure(&config)
        let server = try TestServer(host: host, tls: serverTLS)
        let loop = try EventLoop()
        let session = Session(configuration: config, eventLoop: loop)
        defer {
            session.shutdown()
            loop.shutdown()
            server.shutdown()
        }
        try await body(server, session)
    }
}
