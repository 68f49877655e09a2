// Theory of operation
// -------------------
// One value per HTTP/1.1 client connection. It knows nothing of sockets, clocks or
// callbacks: the IO shell (HTTP1Connection) reports what happened and runs the actions
// the machine appends to the shell's buffer (`into actions: inout [Action]`, the shape of every
// machine of the engine: one buffer per connection, reused, so no event allocates). No
// pipelining: one request at a time.
//
//   idle ──startRequest──▶ inFlight(request, response) ──end + request sent──▶ idle (reuse)
//     │                          │                      └─end before request sent / no keep-alive──▶ closed
//     └──peerClosed──▶ closed    └──peerClosed / failure──▶ closed (request failed; maybe retryable)
//
// A request is retryable after a failure only if the connection was reused, no byte of
// the response arrived, and the method is idempotent: the classic "server closed the
// kept-alive connection just as we sent" race (RFC 9112 §9.3.1).
// It needs no module: the shell answers "is the method idempotent?" (HawserHTTP1) and passes
// the answer in.

/// The pure state machine of one client connection.
struct HTTP1ConnectionStateMachine: Sendable {
    enum RequestPhase: Sendable, Hashable {
        /// Head and (part of) the body are still being written.
        case sending
        /// Everything was handed to the socket.
        case sent
    }

    enum ResponsePhase: Sendable, Hashable {
        /// No byte of the response yet.
        case waiting
        /// Some response bytes arrived (interim heads count: the server is talking).
        case receiving
    }

    enum State: Sendable, Hashable {
        /// No request in flight; may be handed a new one. Next: inFlight, closed.
        case idle
        /// One request in flight. Next: idle (reuse), closed.
        case inFlight(request: RequestPhase, response: ResponsePhase, idempotent: Bool)
        /// Final.
        case closed
    }

    /// What the shell does after an event; an event that needs nothing appends nothing.
    enum Action: Sendable, Hashable {
        /// Write the request (head and body) on this connection.
        case sendRequest
        /// The response is complete: finish the task, then put the connection back in the pool.
        case completeAndReuse
        /// The response is complete: finish the task, then close the connection.
        case completeAndClose
        /// Fail the task and close. `retryable`: the pool may replay it on a fresh connection.
        case failAndClose(retryable: Bool)
        /// Close the connection; no task is affected.
        case close
    }

    private(set) var state: State = .idle
    /// Requests completed on this connection so far (0: the next one is on a fresh connection).
    private(set) var completedRequests = 0

    var isIdle: Bool { self.state == .idle }
    var isReused: Bool { self.completedRequests > 0 }

    mutating func startRequest(idempotent: Bool, into actions: inout [Action]) {
        switch self.state {
        case .idle:
            self.state = .inFlight(request: .sending, response: .waiting, idempotent: idempotent)
            actions.append(.sendRequest)
        case .inFlight, .closed:
            // The pool hands out idle connections only; reaching here is a pool bug.
            preconditionFailure("startRequest in state \(self.state)")
        }
    }

    /// The whole request (head and body) was written. (Nothing to decide: it only matters for
    /// reuse, decided when the response ends.)
    mutating func requestSent() {
        guard case .inFlight(_, let response, let idem) = self.state else { return }
        self.state = .inFlight(request: .sent, response: response, idempotent: idem)
    }

    /// Bytes of the response (or an interim head) arrived.
    mutating func responseBytesReceived() {
        if case .inFlight(let request, .waiting, let idem) = self.state {
            self.state = .inFlight(request: request, response: .receiving, idempotent: idem)
        }
    }

    /// The parser reported the end of the response. `keepAlive`: the message allows reuse;
    /// `leftoverBytes`: bytes beyond the response are buffered (no pipelining, so the peer is broken).
    mutating func responseEnded(keepAlive: Bool, leftoverBytes: Bool, into actions: inout [Action]) {
        guard case .inFlight(let request, _, _) = self.state else { return }
        self.completedRequests += 1
        if keepAlive && request == .sent && !leftoverBytes {
            self.state = .idle
            actions.append(.completeAndReuse)
            return
        }
        // A final response before the body was fully sent ends the exchange (RFC 9112 §9.3):
        // the rest of the body cannot be sent, so the connection cannot be reused.
        self.state = .closed
        actions.append(.completeAndClose)
    }

    /// The peer closed the connection or an IO error occurred.
    mutating func connectionFailed(into actions: inout [Action]) {
        switch self.state {
        case .idle:
            self.state = .closed
            actions.append(.close)
        case .inFlight(_, let response, let idempotent):
            let retryable = self.completedRequests > 0 && response == .waiting && idempotent
            self.state = .closed
            actions.append(.failAndClose(retryable: retryable))
        case .closed:
            return
        }
    }

    /// The shell closed the socket (after one of the answers above, or at shutdown).
    mutating func closed() {
        self.state = .closed
    }

    /// The task was cancelled, timed out or hit a protocol error: the connection is unusable.
    mutating func abort(into actions: inout [Action]) {
        switch self.state {
        case .idle, .inFlight:
            self.state = .closed
            actions.append(.close)
        case .closed:
            return
        }
    }
}
