import Foundation
import HawserCore
import HawserTestServer
import Testing

extension NetworkTests {
    /// `Session.shared`: one session for the process, which `shutdown()` leaves running.
    @Suite("The shared session", .serialized)
    struct SharedSessionTests {
        @Test("Session.shared is one session, marked shared; a session made with init is not")
        func identity() {
            #expect(Session.shared === Session.shared)
            #expect(Session.shared.isShared)
            #expect(Session().isShared == false)
            #expect(
                Session.shared.configuration.maximumConnectionsPerHost
                    == SessionConfiguration.default.maximumConnectionsPerHost
            )
        }

        @Test("the shared session executes requests, and shutdown() on it is a no-op: later requests still succeed")
        func shutdownIsANoOp() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            // `/close`: the server closes each connection, so none stays idle in the shared pool.
            let request = HTTPClientRequest(url: url(server.baseURL + "/close"))
            let first = try await Session.shared.response(for: request)
            #expect(first.status == 200)
            Session.shared.shutdown()
            let second = try await Session.shared.response(for: request)
            #expect(second.status == 200)
            #expect(String(decoding: second.body, as: UTF8.self) == "bye")
        }

        @Test("shutdown() on a session of one's own still fails later requests with sessionShutDown")
        func ownSessionShutsDown() async throws {
            let loop = try EventLoop()
            defer { loop.shutdown() }
            let session = Session(eventLoop: loop)
            session.shutdown()
            do {
                _ = try await session.response(for: HTTPClientRequest(url: url("http://127.0.0.1:9/")))
                Issue.record("a request on a shut-down session succeeded")
            } catch {
                #expect(error.code == .sessionShutDown)
            }
        }
    }
}
