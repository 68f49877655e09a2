import Synchronization

/// A value behind a lock, for the layer's small shared states (a task's counters, a manager's
/// callback blocks). Critical sections are short and never call out.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = Mutex(())

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try self.lock.withLock { _ in try body(&self.value) }
    }

    var value_: Value { self.withLock { $0 } }
}
