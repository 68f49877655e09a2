// hawser-executor-probe: installs the event loops as the global executor in a process of its
// own (installing it in the test process would change every other test) and prints what it saw,
// one `name=value` line per check; GlobalExecutorTests runs it and reads the lines.
//
//   probe install         install, then check where tasks, sleeps and a request run
//   probe foreign-hook    set a hook of another "executor" first, then try to install
//   probe not-installed   no install: the same checks, to show what the default executor does
import HawserCore
import HawserTestServer
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

func report(_ name: String, _ value: Any) {
    print("\(name)=\(value)")
}

/// Whether the calling thread is one of the shared group's loops, and which.
func loopIndex() -> Int? {
    EventLoopGroup.shared.loops.firstIndex { $0.inEventLoop }
}

/// A nonisolated async function: it runs on the global executor, whatever called it.
nonisolated func whereAmI() async -> Int? {
    loopIndex()
}

/// Counts the jobs that a hook of another "executor" saw, then hands them to the runtime's own.
let foreignHookCalls = Atomic<Int>(0)

typealias OriginalEnqueue = @convention(thin) (UnownedJob) -> Void
typealias EnqueueHook = @convention(thin) (UnownedJob, OriginalEnqueue) -> Void

func installForeignHook() {
    let slot = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "swift_task_enqueueGlobal_hook")!
        .assumingMemoryBound(to: EnqueueHook?.self)
    slot.pointee = { job, original in
        foreignHookCalls.add(1, ordering: .relaxed)
        original(job)
    }
}

func checks() async {
    report("task_on_loop", await Task { loopIndex() != nil }.value)
    report("nonisolated_on_loop", await whereAmI() != nil)
    // A child task and a task started from a task on loop K stay on loop K.
    let affinity = await Task { () -> Bool in
        guard let k = loopIndex() else { return false }
        let child = await Task { loopIndex() }.value
        async let grandchild = whereAmI()
        await Task.yield()
        let grandchildLoop = await grandchild
        return child == k && loopIndex() == k && grandchildLoop == k
    }.value
    report("stays_on_loop", affinity)
    // Task.sleep: the timer fires on a loop and the task resumes there.
    let slept = await Task { () -> Bool in
        do {
            try await Task.sleep(for: .milliseconds(20))
            let afterDuration = loopIndex() != nil
            try await Task.sleep(nanoseconds: 5_000_000)
            let afterNanoseconds = loopIndex() != nil
            try await Task.sleep(until: .now + .milliseconds(5), clock: .suspending)
            return afterDuration && afterNanoseconds && loopIndex() != nil
        } catch {
            return false
        }
    }.value
    report("sleep_on_loop", slept)
    // How many of them came through the runtime's delayed and deadline hooks as loop timers
    // (informational: Swift 6.3's Task.sleep keeps its timer in the runtime's own scheduling
    // executor and enqueues the resumption through the global hook).
    report("sleep_timer_jobs", globalExecutorTimedJobs.load(ordering: .relaxed))
    // A request through a Session with a plain await.
    do {
        let serverLoop = try EventLoop(name: "probe-server")
        let server = try TestServer(loop: serverLoop)
        let outcome = await Task { () -> String in
            let session = Session()
            defer { session.shutdown() }
            do {
                let r = try await session.response(for: HTTPClientRequest(url: URL(string: server.baseURL + "/hello")!))
                return "\(r.status) on_loop=\(loopIndex() != nil)"
            } catch {
                return "error \(error)"
            }
        }.value
        report("request", outcome)
    } catch {
        report("request", "server error \(error)")
    }
    // Waiting synchronously on a loop for that loop's own work throws instead of hanging.
    let wait = await Task { () -> String in
        guard let k = loopIndex() else { return "not on a loop" }
        do {
            try EventLoopGroup.shared.loops[k].submitAndWait { () }
            return "no error"
        } catch let e as EventLoopError {
            return "\(e.code)"
        } catch {
            return "other \(error)"
        }
    }.value
    report("sync_wait", wait)
    // Opting out: a task that prefers the blocking-IO pool runs off the loops.
    let optOut = await withTaskExecutorPreference(BlockingIOPool.shared) { loopIndex() == nil }
    report("opt_out_off_loop", optOut)
}

let mode = CommandLine.arguments.dropFirst().first ?? "install"
switch mode {
case "install":
    do {
        try EventLoopGroup.shared.installAsGlobalExecutor()
        report("installed", true)
        try EventLoopGroup.shared.installAsGlobalExecutor()
        report("install_again", "ok")
    } catch {
        report("installed", "\(error.code): \(error)")
    }
    do {
        try EventLoopGroup(numberOfThreads: 1).installAsGlobalExecutor()
        report("other_group", "installed")
    } catch let e as GlobalExecutorInstallError {
        report("other_group", "\(e.code)")
    } catch {
        report("other_group", "\(error)")
    }
    report("is_global_executor", EventLoopGroup.shared.isGlobalExecutor)
    await checks()
case "foreign-hook":
    installForeignHook()
    do {
        try EventLoopGroup.shared.installAsGlobalExecutor()
        report("installed", true)
    } catch {
        report("installed", "\(error.code): \(error)")
    }
    report("is_global_executor", EventLoopGroup.shared.isGlobalExecutor)
    // The other executor keeps working: its hook still sees the jobs (a nonisolated function's,
    // here: top-level code runs on the main actor).
    report("task_on_loop", await whereAmI() != nil)
    report("foreign_hook_used", foreignHookCalls.load(ordering: .relaxed) > 0)
case "not-installed":
    await checks()
default:
    print("usage: hawser-executor-probe install|foreign-hook|not-installed")
    exit(2)
}
exit(0)
