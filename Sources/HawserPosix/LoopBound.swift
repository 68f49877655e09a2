/// A value that belongs to one event loop.
///
/// It may travel inside `@Sendable` closures (to be submitted to its loop, or to come back from
/// `submitAndWait`), but it is read and written only on its loop's thread, and debug builds check
/// that on every access: a value used from the wrong thread traps with the caller's file and line
/// instead of racing. This is the checked form of what a comment used to promise ("only used back
/// on the same loop"); release builds pay nothing for it.
///
/// `init(_:loop:)` checks that the value starts on its loop. A value built elsewhere and handed to
/// the loop before anyone uses it (a listener made inside `submitAndWait`, a task created on the
/// caller's thread and then scheduled) uses `init(handingOver:to:)`, which checks only the uses.
/// The checks are compiled only into debug builds (`#if DEBUG`), so a release build's accessors
/// are plain loads and stores even where the call into the loop's module is not inlined.
package struct LoopBound<Value>: @unchecked Sendable {
    /// The loop the value belongs to.
    package let loop: EventLoop
    private var storage: Value

    /// Binds `value`, created on `loop`'s thread, to that loop.
    @inline(__always)
    package init(_ value: Value, loop: EventLoop, file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        loop.assertInLoop(file, line)
        #endif
        self.loop = loop
        self.storage = value
    }

    /// Binds `value` to `loop` without checking the current thread: for a value that is handed
    /// over to the loop before any use (every later access is still checked).
    @inline(__always)
    package init(handingOver value: Value, to loop: EventLoop) {
        self.loop = loop
        self.storage = value
    }

    /// The value; only on the loop's thread (checked in debug builds).
    package var value: Value {
        @inline(__always) get {
            #if DEBUG
            self.loop.assertInLoop()
            #endif
            return self.storage
        }
        @inline(__always) set {
            #if DEBUG
            self.loop.assertInLoop()
            #endif
            self.storage = newValue
        }
    }
}
