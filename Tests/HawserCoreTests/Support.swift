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
func expectNoFDLeak(_ what: String = "", _ body: () async throws -> Void) async rethrows {
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
class RecordingDelegate: ResponseDelegate, @unchecked Sendable {
    struct Record: Sendable {
        var interim: [Int] = []
        var head: HTTPResponseHead?
        var body: [UInt8] = []
        var completions = 0
        var result: Result<HTTPHeaders?, HawserError>?
        var metrics: TaskMetrics?
        var sentProgress: [Int64] = []
    }
    let record = Mutex(Record())
    private let finished = AsyncStreamBox()
    /// Called on the loop with each body chunk (e.g. to cancel mid-body).
    var onBody: (@Sendable (RequestTask, Int) -> Void)?
    var onHead: (@Sendable (RequestTask) -> Void)?

    func task(_ task: RequestTask, didReceiveInterimHead head: HTTPResponseHead) {
        self.record.withLock { $0.interim.append(head.status) }
    }
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {
        self.record.withLock { $0.head = head }
        self.onHead?(task)
    }
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {
        let total = self.record.withLock { r -> Int in
            r.body.append(contentsOf: bytes)
            return r.body.count
        }
        self.onBody?(task, total)
    }
    func task(_ task: RequestTask, didSendBodyBytes totalSent: Int64, expected: Int64?) {
        self.record.withLock { $0.sentProgress.append(totalSent) }
    }
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        self.record.withLock {
            $0.completions += 1
            $0.result = result
            $0.metrics = metrics
        }
        self.finished.signal()
    }

    // The protocol's defaults, as methods so subclasses can override them.
    func task(_ task: RequestTask, willPerformRedirection response: HTTPResponseHead, newRequest: HTTPClientRequest,
              completion: @escaping @Sendable (HTTPClientRequest?) -> Void) {
        completion(newRequest)
    }
    func task(_ task: RequestTask, needNewBodyStream completion: @escaping @Sendable (RequestBody?) -> Void) {
        completion(nil)
    }
    func task(_ task: RequestTask, didReceive challenge: AuthenticationChallenge,
              completion: @escaping @Sendable (ChallengeDisposition) -> Void) {
        completion(.performDefaultHandling)
    }
    func task(_ task: RequestTask, willCacheResponse proposed: CachedResponse,
              completion: @escaping @Sendable (CachedResponse?) -> Void) {
        completion(proposed)
    }

    /// Waits for the completion, then gives the loop a moment to deliver a (wrong) second one.
    func wait() async -> Record {
        await self.finished.wait()
        return self.record.withLock { $0 }
    }

    var error: HawserError? {
        self.record.withLock { r in
            if case .failure(let e)? = r.result { return e }
            return nil
        }
    }
}

/// A one-shot signal usable from any thread.
final class AsyncStreamBox: Sendable {
    private let state = Mutex<(signalled: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    func signal() {
        let w = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.signalled = true
            let w = s.waiters
            s.waiters = []
            return w
        }
        for c in w { c.resume() }
    }
    func wait() async {
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

func url(_ s: String) -> URL { URL(string: s)! }

/// Every suite that opens sockets or threads nests in here: `.serialized` applies to nested
/// suites too, so the descriptor counts of one test never see another test's sockets.
/// No test may take more than two minutes: one that waits for an event that never comes (a
/// virtual-time test whose timer was never armed) fails instead of hanging the run.
@Suite(.serialized, .timeLimit(.minutes(2))) enum NetworkTests {}
