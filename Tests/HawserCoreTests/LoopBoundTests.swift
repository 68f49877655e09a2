import Testing

@testable import HawserPosix

/// `LoopBound`: a value confined to one event loop, its confinement checked on every access in
/// debug builds. The traps run in a child process (an exit test): a trap ends the process.
@Suite("LoopBound")
struct LoopBoundTests {
    /// A loop-confined, non-Sendable value.
    final class Counter {
        var count = 0
    }

    @Test("a value bound on its loop is read and written there, and comes back through submitAndWait")
    func roundTripOnItsLoop() throws {
        let loop = try EventLoop(name: "loop-bound")
        defer { loop.shutdown() }
        let bound = try loop.submitAndWait { LoopBound([1, 2], loop: loop) }
        let grown = try loop.submitAndWait { () -> LoopBound<[Int]> in
            var b = bound
            b.value.append(3)
            return b
        }
        #expect(try loop.submitAndWait { grown.value } == [1, 2, 3])
        // The box it started as is a copy: unchanged.
        #expect(try loop.submitAndWait { bound.value } == [1, 2])
    }

    @Test("a value made off its loop is handed over: every use on the loop sees the same instance")
    func handedOver() throws {
        let loop = try EventLoop(name: "loop-bound")
        defer { loop.shutdown() }
        let bound = LoopBound(handingOver: Counter(), to: loop)
        try loop.submitAndWait { bound.value.count += 1 }
        try loop.submitAndWait { bound.value.count += 1 }
        #expect(try loop.submitAndWait { bound.value.count } == 2)
        #expect(bound.loop === loop)
    }

    #if DEBUG
    @Test("reading the value off its loop traps in a debug build")
    func readOffLoopTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = try! EventLoop(name: "loop-bound")
            let bound = LoopBound(handingOver: Counter(), to: loop)
            _ = bound.value
        }
    }

    @Test("writing the value off its loop traps in a debug build")
    func writeOffLoopTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = try! EventLoop(name: "loop-bound")
            var bound = LoopBound(handingOver: 0, to: loop)
            bound.value = 1
        }
    }

    @Test("binding a value with init(_:loop:) off the loop traps in a debug build")
    func bindOffLoopTraps() async {
        await #expect(processExitsWith: .failure) {
            let loop = try! EventLoop(name: "loop-bound")
            _ = LoopBound(0, loop: loop)
        }
    }

    @Test("the same accesses on the loop exit normally (the traps above are not the child failing anyway)")
    func onLoopExitsNormally() async {
        await #expect(processExitsWith: .success) {
            let loop = try! EventLoop(name: "loop-bound")
            let bound = try! loop.submitAndWait { () -> LoopBound<Int> in
                var b = LoopBound(0, loop: loop)
                b.value = 1
                return b
            }
            precondition(try! loop.submitAndWait { bound.value } == 1)
            loop.shutdown()
        }
    }
    #endif
}
