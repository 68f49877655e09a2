// The manager's per-request total deadline (the serializer's timeoutIntervalForResource) against
// a peer that trickles under the idle timeout, in virtual time, on a scripted server on loopback.
import Foundation
import Hawser
import HawserTestServer
import Synchronization
import Testing

extension ManagerNetworkTests {
    @Suite("The manager's total deadline", .serialized)
    struct ManagerDeadlineTests {
        @Test(
            "the request serializer's timeoutIntervalForResource ends a data task trickled under the idle timeout, with -1001 at the deadline"
        )
        func serializerDeadline() async throws {
            let gates = (0..<3).map { _ in ScriptedServer.Gate() }
            var script: [ScriptedServer.Step] = [
                .readRequest(), .sendText("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\na"),
            ]
            for g in gates { script += [.gate(g), .sendText("b")] }
            script.append(.hang)
            let server = try ScriptedServer([script])
            defer {
                for g in gates { g.openGate() }
                server.stop()
            }
            try await expectNoFDLeak("manager deadline") {
                let second: UInt64 = 1_000_000_000
                let clock = ManualClock()
                let loop = try EventLoop(clock: clock)
                defer { loop.shutdown() }
                var config = SessionConfiguration()
                config.timeoutIntervalForRequest = 5
                let m = HTTPSessionManager(configuration: config, eventLoop: loop)
                defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
                var serializer = HTTPRequestSerializer()
                serializer.timeoutIntervalForResource = 10
                m.requestSerializer = serializer
                m.responseSerializer = DataSerializer()
                let received = Atomic<Int64>(0)
                let outcome = Mutex<(any Error)?>(nil)
                let done = Atomic<Bool>(false)
                m.get(
                    server.baseURL + "/",
                    progress: { p in received.store(p.completedUnitCount, ordering: .relaxed) },
                    success: { _, _ in done.store(true, ordering: .relaxed) },
                    failure: { _, e in
                        outcome.withLock { $0 = e }
                        done.store(true, ordering: .relaxed)
                    }
                )
                #expect(await eventually { received.load(ordering: .relaxed) == 1 })
                // A byte every 3 s: the 5 s idle timeout never passes.
                for (i, g) in gates.prefix(3).enumerated() {
                    try loop.advanceTime(by: 3 * second)
                    g.openGate()
                    #expect(await eventually { received.load(ordering: .relaxed) == Int64(2 + i) })
                }
                let early = done.load(ordering: .relaxed)
                #expect(!early, "9 s: still running")
                try loop.advanceTime(by: second)
                #expect(await eventually { done.load(ordering: .relaxed) }, "the deadline ended the task")
                let e = outcome.withLock { $0 } as? HawserError
                #expect(e?.code == .resourceTimeout && e?.urlErrorCode == -1001, "\(String(describing: e))")
                #expect(e?.message.contains("total deadline passed") == true, "\(String(describing: e))")
            }
        }
    }
}
