import Testing

@testable import HawserCore

@Suite("HTTP1ConnectionStateMachine")
struct ConnectionStateMachineTests {
    @Test("a keep-alive exchange returns the connection to idle and counts it")
    func keepAliveReuse() {
        var m = HTTP1ConnectionStateMachine()
        #expect(m.startRequest(idempotent: true) == .sendRequest)
        m.requestSent()
        m.responseBytesReceived()
        #expect(m.responseEnded(keepAlive: true, leftoverBytes: false) == .completeAndReuse)
        #expect(m.isIdle)
        #expect(m.isReused)
    }

    @Test("Connection: close (keepAlive false) closes after completing")
    func closeAfterResponse() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.startRequest(idempotent: true)
        m.requestSent()
        #expect(m.responseEnded(keepAlive: false, leftoverBytes: false) == .completeAndClose)
        #expect(m.state == .closed)
    }

    @Test("a response that ends before the request body was sent closes the connection")
    func earlyResponse() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.startRequest(idempotent: false)
        // No requestSent(): the server answered (say 413) while we were still uploading.
        #expect(m.responseEnded(keepAlive: true, leftoverBytes: false) == .completeAndClose)
    }

    @Test("bytes after the end of a response (no pipelining) forbid reuse")
    func leftoverBytes() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.startRequest(idempotent: true)
        m.requestSent()
        #expect(m.responseEnded(keepAlive: true, leftoverBytes: true) == .completeAndClose)
    }

    @Test("a reused connection that dies before any response byte makes an idempotent request retryable")
    func staleRetry() {
        var m = HTTP1ConnectionStateMachine()
        _ = m.startRequest(idempotent: true)
        m.requestSent()
        _ = m.responseEnded(keepAlive: true, leftoverBytes: false)
        _ = m.startRequest(idempotent: true)
        m.requestSent()
        #expect(m.connectionFailed() == .failAndClose(retryable: true))
    }

    @Test("no retry on a fresh connection, after response bytes, or for POST")
    func noRetry() {
        var fresh = HTTP1ConnectionStateMachine()
        _ = fresh.startRequest(idempotent: true)
        #expect(fresh.connectionFailed() == .failAndClose(retryable: false))

        var midResponse = HTTP1ConnectionStateMachine()
        _ = midResponse.startRequest(idempotent: true)
        midResponse.requestSent()
        _ = midResponse.responseEnded(keepAlive: true, leftoverBytes: false)
        _ = midResponse.startRequest(idempotent: true)
        midResponse.responseBytesReceived()
        #expect(midResponse.connectionFailed() == .failAndClose(retryable: false))

        var post = HTTP1ConnectionStateMachine()
        _ = post.startRequest(idempotent: true)
        post.requestSent()
        _ = post.responseEnded(keepAlive: true, leftoverBytes: false)
        _ = post.startRequest(idempotent: false)
        #expect(post.connectionFailed() == .failAndClose(retryable: false))
    }

    @Test("an idle connection that fails just closes; a closed one ignores further events")
    func idleFailure() {
        var m = HTTP1ConnectionStateMachine()
        #expect(m.connectionFailed() == .close)
        #expect(m.connectionFailed() == .none)
        #expect(m.abort() == .none)
        #expect(m.responseEnded(keepAlive: true, leftoverBytes: false) == .none)
    }
}
