import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A fixed set of event loops, handed out round-robin. Connections stay on the loop they
/// were created on.
public final class EventLoopGroup: Sendable {
    /// The loops of this group.
    public let loops: [EventLoop]
    private let index = Atomic<Int>(0)

    /// Creates `numberOfThreads` loops (default: one per core).
    public init(numberOfThreads: Int = EventLoopGroup.coreCount) throws(IOError) {
        precondition(numberOfThreads > 0, "an EventLoopGroup needs at least one loop")
        var loops: [EventLoop] = []
        for i in 0..<numberOfThreads {
            loops.append(try EventLoop(name: "hawser-loop-\(i)"))
        }
        self.loops = loops
    }

    /// The next loop, round-robin.
    public func next() -> EventLoop {
        let i = self.index.add(1, ordering: .relaxed).newValue
        return self.loops[i % self.loops.count]
    }

    /// Shuts every loop down (see ``EventLoop/shutdown()``). A group installed as the global
    /// executor (``installAsGlobalExecutor()``) must never shut down: doing so stops the program.
    public func shutdown() {
        precondition(!self.isGlobalExecutor, "the EventLoopGroup installed as the global executor cannot shut down")
        for l in self.loops { l.shutdown() }
    }

    /// The number of online CPUs.
    public static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// A process-wide group with one loop per core, created on first use and never shut down.
    public static let shared: EventLoopGroup = {
        do { return try EventLoopGroup() } catch { fatalError("cannot create the shared event loop group: \(error)") }
    }()
}
