// A task's two time limits, which the request state machine checks when its one timer fires:
// the request's limits, else the session's, and when the timer is next due. Pure.
extension RequestStateMachine {
    /// A task's two time limits, in the loop clock's nanoseconds: the idle timeout (between two
    /// bytes moving, timeoutIntervalForRequest) and the total deadline (the whole task,
    /// timeoutIntervalForResource). One timer serves both: it is due at the earlier of the two.
    struct Timeouts: Sendable, Hashable {
        /// The most time allowed between two bytes moving.
        var idle: UInt64
        /// The most time the whole task may take.
        var total: UInt64
        /// When the task started plus `total`: the instant the total deadline passes.
        var deadline: UInt64

        init(start: UInt64, idle: UInt64, total: UInt64) {
            self.idle = idle
            self.total = total
            let (sum, overflow) = start.addingReportingOverflow(total)
            self.deadline = overflow ? .max : sum
        }

        /// The limits of `request` (its timeoutInterval and timeoutIntervalForResource, in
        /// seconds), else the session's (`idle`, `total`, in nanoseconds), from `start`.
        init(start: UInt64, request: HTTPClientRequest, idle: UInt64, total: UInt64) {
            self.init(
                start: start,
                idle: request.timeoutInterval.map(SessionContext.nanos) ?? idle,
                total: request.timeoutIntervalForResource.map(SessionContext.nanos) ?? total
            )
        }

        /// When the timer is next due, the last byte having moved at `lastActivity`.
        func due(lastActivity: UInt64) -> UInt64 {
            let (idleDue, overflow) = lastActivity.addingReportingOverflow(self.idle)
            return min(overflow ? .max : idleDue, self.deadline)
        }
    }
}
