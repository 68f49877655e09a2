import Foundation
import Synchronization
import Testing

@testable import HawserCore
@testable import HawserPosix

/// The event loops as the Swift concurrency global executor. The install changes the whole
/// process, so it happens in a child process (HawserExecutorProbe, built next to the tests),
/// which prints one `name=value` line per check.
@Suite("Global executor", .serialized)
struct GlobalExecutorTests {
    /// Runs the probe in `mode` and returns its report.
    static func probe(_ mode: String) throws -> [String: String] {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("HawserExecutorProbe").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = [mode]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "the probe (\(mode)) exited with \(p.terminationStatus)")
        var report: [String: String] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            report[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        return report
    }

    @Test("installed: tasks, their children and nonisolated functions run on the loops, and stay on theirs")
    func tasksRunOnTheLoops() throws {
        let r = try Self.probe("install")
        #expect(r["installed"] == "true")
        #expect(r["is_global_executor"] == "true")
        #expect(r["task_on_loop"] == "true")
        #expect(r["nonisolated_on_loop"] == "true")
        #expect(r["stays_on_loop"] == "true")
        // The same checks without the install see Dispatch's threads: they are not vacuous.
        let plain = try Self.probe("not-installed")
        #expect(plain["task_on_loop"] == "false")
        #expect(plain["nonisolated_on_loop"] == "false")
    }

    @Test("installed: after Task.sleep (Duration, nanoseconds, a suspending-clock deadline) the task resumes on a loop")
    func sleepRunsOnTheLoops() throws {
        let r = try Self.probe("install")
        #expect(r["sleep_on_loop"] == "true")
        #expect(try Self.probe("not-installed")["sleep_on_loop"] == "false")
    }

    @Test("installed: a request through a Session with a plain await completes, and resumes on a loop")
    func requestWithPlainAwait() throws {
        let r = try Self.probe("install")
        #expect(r["request"] == "200 on_loop=true")
    }

    @Test("installed: a synchronous wait on a loop for its own work throws waitOnOwnLoop instead of hanging")
    func syncWaitOnTheLoopThrows() throws {
        let r = try Self.probe("install")
        #expect(r["sync_wait"] == "waitOnOwnLoop")
    }

    @Test("installed: a task that prefers the blocking-IO pool runs off the loops")
    func optOutRunsOffTheLoops() throws {
        let r = try Self.probe("install")
        #expect(r["opt_out_off_loop"] == "true")
    }

    @Test("installing again: the same group is a no-op, a different group is refused")
    func installTwice() throws {
        let r = try Self.probe("install")
        #expect(r["install_again"] == "ok")
        #expect(r["other_group"] == "differentGroupInstalled")
    }

    @Test("refused with anotherExecutorInstalled when another global-enqueue hook was set first, which keeps working")
    func refusedWhenAnotherHookIsInstalled() throws {
        let r = try Self.probe("foreign-hook")
        #expect(r["installed"]?.hasPrefix("anotherExecutorInstalled: ") == true, "\(r["installed"] ?? "nil")")
        #expect(r["is_global_executor"] == "false")
        #expect(r["task_on_loop"] == "false")
        #expect(r["foreign_hook_used"] == "true")
    }

    @Test("submitAndWait on the loop's own thread throws waitOnOwnLoop at once and does not run the work")
    func submitAndWaitOnOwnLoopThrows() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let ran = Atomic<Bool>(false)
        let outcome = try loop.submitAndWait { () -> String in
            do {
                try loop.submitAndWait { ran.store(true, ordering: .relaxed) }
                return "no error"
            } catch let e as EventLoopError {
                return "\(e.code) \(e.loopName)"
            } catch {
                return "\(error)"
            }
        }
        #expect(outcome == "waitOnOwnLoop \(loop.name)")
        try loop.submitAndWait {}  // anything the inner call queued would have run by now
        let didRun = ran.load(ordering: .relaxed)
        #expect(!didRun)
    }

    @Test("a BlockingIOPool is a task executor: a task that prefers it runs on the pool's threads")
    func blockingPoolIsATaskExecutor() async throws {
        let pool = BlockingIOPool(maxThreads: 2, name: "probe-pool")
        let names = await withTaskExecutorPreference(pool) { () -> [String] in
            var seen = [Self.threadName()]
            await Task.yield()
            seen.append(Self.threadName())
            async let child = Self.threadName()
            seen.append(await child)
            return seen
        }
        #expect(names == ["probe-pool", "probe-pool", "probe-pool"])
    }

    /// The calling thread's name (as `CHawser_set_thread_name` set it).
    nonisolated static func threadName() -> String {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return comm.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
