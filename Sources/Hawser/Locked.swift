import Foundation

/// A value behind a lock, for the layer's small shared states (a task's counters, a manager's
/// callback blocks). Critical sections are short and never call out.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }

    var value_: Value { self.withLock { $0 } }
}
