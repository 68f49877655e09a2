// The one queue the request machines' actions run from, one per pool (so one per loop): an event
// appends its machine's actions, and one loop drains them in order. An action that raises
// another event (a delegate that cancels from its callback, a connection that fails as it is
// written to, a pool that hands a waiting task the connection just released) appends that
// event's actions behind the rest: actions never run inside running ones. Loop-confined.

/// The request machines' actions of one loop, with the task each is for.
struct RequestActionQueue {
    /// Where a machine writes the actions of one event (reused: no allocation per event).
    var scratch: [RequestStateMachine.Action] = []
    /// The actions to run, in order, each with its task (reused like `scratch`).
    var pending: [(RequestTask, RequestStateMachine.Action)] = []
    /// Whether `pending` is being drained.
    var draining = false
    /// A second scratch buffer: the actions of the event that starts a drain run from the buffer
    /// they were written to (no copy into `pending`), while this one takes the events they raise.
    private var spare: [RequestStateMachine.Action] = []

    init() {
        self.scratch.reserveCapacity(4)
        self.spare.reserveCapacity(4)
        self.pending.reserveCapacity(8)
    }

    /// The actions in `scratch`, which becomes the (empty) spare buffer.
    mutating func takeScratch() -> [RequestStateMachine.Action] {
        var batch: [RequestStateMachine.Action] = []
        swap(&batch, &self.scratch)
        swap(&self.scratch, &self.spare)
        return batch
    }

    /// Gives back a buffer from ``takeScratch()``, emptied, as the spare one.
    mutating func returnScratch(_ batch: inout [RequestStateMachine.Action]) {
        batch.removeAllKeepingStorage()
        swap(&self.spare, &batch)
    }
}

extension Array {
    /// Empties an action buffer, keeping its storage. The machines' buffers hold a few actions
    /// an event, and `removeAll(keepingCapacity:)` goes through the generic `replaceSubrange`
    /// (hundreds of instructions on the per-request path); removing from the end is a count
    /// decrement and a move per element.
    @inline(__always)
    mutating func removeAllKeepingStorage() {
        while !self.isEmpty { self.removeLast() }
    }
}
