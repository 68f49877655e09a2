import Testing

@testable import HawserCore

@Suite("HTTP1ConnectionStateMachine")
struct ConnectionStateMachineTests {
    @Test("a keep-alive exchange returns the connection to idle and counts it")
    func keepAliveReuse() {
        var m = HTTP1ConnectionStateMachine()
        #expect(m.actions { $0.startRequest(idempotent: true, into: &$1) } == [.sendRequest])
        m.requestSent()
        m.responseBytesReceived()
        #expect(m.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) } == [.completeAndReuse])
        #expect(m.isIdle)
        #expect(m.isReused)
    }

    @Test("Connection: close (keepAlive false) closes after completing")
    func closeAfterResponse() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.actions { $0.startRequest(idempotent: true, into: &$1) }
        m.requestSent()
        #expect(
            m.actions { $0.responseEnded(keepAlive: false, leftoverBytes: false, into: &$1) } == [.completeAndClose]
        )
        #expect(m.state == .closed)
    }

    @Test("a response that ends before the request body was sent closes the connection")
    func earlyResponse() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.actions { $0.startRequest(idempotent: false, into: &$1) }
        // No requestSent(): the server answered (say 413) while we were still uploading.
        #expect(m.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) } == [.completeAndClose])
    }

    @Test("bytes after the end of a response (no pipelining) forbid reuse")
    func leftoverBytes() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.actions { $0.startRequest(idempotent: true, into: &$1) }
        m.requestSent()
        #expect(m.actions { $0.responseEnded(keepAlive: true, leftoverBytes: true, into: &$1) } == [.completeAndClose])
    }

    @Test("a reused connection that dies before any response byte makes an idempotent request retryable")
    func staleRetry() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.actions { $0.startRequest(idempotent: true, into: &$1) }
        m.requestSent()
        _ = m.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) }
        _ = m.actions { $0.startRequest(idempotent: true, into: &$1) }
        m.requestSent()
        #expect(m.actions { $0.connectionFailed(into: &$1) } == [.failAndClose(retryable: true)])
    }

    @Test("no retry on a fresh connection, after response bytes, or for POST")
    func noRetry() {
        var fresh = HTTP1ConnectionStateMachine()
        _ = fresh.actions { $0.startRequest(idempotent: true, into: &$1) }
        #expect(fresh.actions { $0.connectionFailed(into: &$1) } == [.failAndClose(retryable: false)])

        var midResponse = HTTP1ConnectionStateMachine()
        _ = midResponse.actions { $0.startRequest(idempotent: true, into: &$1) }
        midResponse.requestSent()
        _ = midResponse.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) }
        _ = midResponse.actions { $0.startRequest(idempotent: true, into: &$1) }
        midResponse.responseBytesReceived()
        #expect(midResponse.actions { $0.connectionFailed(into: &$1) } == [.failAndClose(retryable: false)])

        var post = HTTP1ConnectionStateMachine()
        _ = post.actions { $0.startRequest(idempotent: true, into: &$1) }
        post.requestSent()
        _ = post.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) }
        _ = post.actions { $0.startRequest(idempotent: false, into: &$1) }
        #expect(post.actions { $0.connectionFailed(into: &$1) } == [.failAndClose(retryable: false)])
    }

    @Test("an idle connection that fails just closes; a closed one ignores further events")
    func idleFailure() {
        var m = HTTP1ConnectionStateMachine()
        #expect(m.actions { $0.connectionFailed(into: &$1) } == [.close])
        #expect(m.actions { $0.connectionFailed(into: &$1) } == [])
        #expect(m.actions { $0.abort(into: &$1) } == [])
        #expect(m.actions { $0.responseEnded(keepAlive: true, leftoverBytes: false, into: &$1) } == [])
    }
}

extension HTTP1ConnectionStateMachine {
    /// The actions one event appends to an empty buffer.
    mutating func actions(_ event: (inout Self, inout [Action]) -> Void) -> [Action] {
        var actions: [Action] = []
        event(&self, &actions)
        return actions
    }
}
