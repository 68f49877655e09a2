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

    init() {
        self.scratch.reserveCapacity(4)
        self.pending.reserveCapacity(8)
    }
}
