// AFNetworking's lifetime rules: NSURLSession keeps its delegate (the manager) until it is
// invalidated, so `[[AFHTTPSessionManager manager] GET:…]` completes; here in-flight tasks keep
// their manager and session alive until they complete, and nothing more. Both habits: the manager
// nobody keeps, and the manager invalidated when done (AFURLSessionManagerTests'
// testSessionIsStillValid / testSessionRecreatesAgain).
import Foundation
import Hawser
import HawserTestServer
import Testing

extension ManagerNetworkTests {
    @Suite("Manager lifetime", .serialized)
    struct ManagerLifetimeTests {
        /// `HTTPSessionManager().get(…)` with nothing holding the manager, weakly watched.
        private static func getWithoutKeepingTheManager(
            _ url: String,
            observe: (SessionManager, Session) -> Void,
            done: @escaping @Sendable ((any Sendable)?, (any Error)?) -> Void
        ) {
            let manager = HTTPSessionManager()
            observe(manager, manager.session)
            manager.get(url, success: { _, object in done(object, nil) }, failure: { _, error in done(nil, error) })
        }

        @Test("HTTPSessionManager().get(…) completes, then the manager and its session are freed")
        func unheldManagerCompletes() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let done = Expectation()
            let result = Box<((any Sendable)?, (any Error)?)>((nil, nil))
            weak var weakManager: SessionManager?
            weak var weakSession: Session?
            _ = EventLoopGroup.shared.next()  // the shared loops' descriptors are not the manager's
            await expectNoFDLeak("an unheld manager") {
                Self.getWithoutKeepingTheManager(
                    server.baseURL + "/json",
                    observe: { m, s in
                        weakManager = m
                        weakSession = s
                    }
                ) { object, error in
                    result.value = (object, error)
                    done.fulfill()
                }
                #expect(await done.wait(), "the task of a manager nobody holds never completed")
                #expect(result.value.1 == nil, "\(String(describing: result.value.1))")
                #expect((result.value.0 as? JSONValue)?["name"] == .string("hawser"))
                // The handler ran; the manager goes once the completion path has let go of it.
                #expect(await eventually { weakManager == nil }, "the manager was kept after its task completed")
                #expect(await eventually { weakSession == nil }, "the session was kept after its manager went")
            }
        }

        @Test("an in-flight task keeps its manager alive; a never-resumed one does not")
        func inFlightTasksKeepTheManager() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            weak var weakManager: SessionManager?
            let done = Expectation()
            let task: DataTask = {
                let m = makeManager()
                weakManager = m
                let t = m.dataTask(with: request(server, "/delay/300")) { _, _, _ in done.fulfill() }
                t.resume()
                return t
            }()
            #expect(weakManager != nil, "released while its task was in flight")
            #expect(task.state == .running)
            #expect(await done.wait())
            #expect(task.state == .completed && task.error == nil, "\(String(describing: task.error))")
            #expect(await eventually { weakManager == nil }, "the manager was kept after its task completed")

            // A task never resumed does not keep its manager: releasing the manager cancels it.
            let cancelled = Expectation()
            let failure = Box<HawserError?>(nil)
            let idle: DataTask = {
                let m = makeManager()
                weakManager = m
                return m.dataTask(with: request(server, "/hello")) { _, _, e in
                    failure.value = e as? HawserError
                    cancelled.fulfill()
                }
            }()
            #expect(weakManager == nil)
            #expect(await cancelled.wait())
            #expect(idle.state == .completed)
            #expect(failure.value?.code == .cancelled)
            #expect(
                failure.value?.message.contains("released") == true,
                "the error says why: \(String(describing: failure.value))"
            )
            idle.resume()
            #expect(idle.state == .completed, "a completed task does not start again")
        }

        @Test(
            "invalidate without reset: the session stays readable, its tasks end, later tasks fail, connections close"
        )
        func invalidateKeepsTheSessionReadable() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let manager = makeManager()
            // A kept-alive connection in the pool first.
            let warm = Expectation()
            manager.dataTask(with: request(server, "/hello")) { _, _, _ in warm.fulfill() }.resume()
            #expect(await warm.wait())
            let session = manager.session
            #expect(session.poolStatistics().idleConnections == 1)

            let running = Expectation()
            let runningStatus = Box<Int?>(nil)
            manager.dataTask(with: request(server, "/delay/200")) { r, _, e in
                runningStatus.value = e == nil ? r?.statusCode : nil
                running.fulfill()
            }.resume()
            let invalidated = Expectation()
            manager.sessionDidBecomeInvalid = { _ in invalidated.fulfill() }
            manager.invalidateSessionCancelingTasks(false, resetSession: false)
            #expect(manager.session === session, "AFNetworking's testSessionIsStillValid")
            #expect(await running.wait())
            #expect(runningStatus.value == 200, "finishTasksAndInvalidate lets a running task finish")
            #expect(await invalidated.wait())
            #expect(
                await eventually { session.poolStatistics().openConnections == 0 },
                "the invalidated session closed its connections"
            )

            let late = Expectation()
            let lateError = Box<(any Error)?>(nil)
            manager.dataTask(with: request(server, "/hello")) { _, _, e in
                lateError.value = e
                late.fulfill()
            }.resume()
            #expect(await late.wait())
            guard case .sessionInvalidated? = lateError.value as? SessionManagerError else {
                Issue.record("expected sessionInvalidated, got \(String(describing: lateError.value))")
                return
            }
            #expect(manager.session === session)
        }

        @Test("invalidate with reset: a new session at once (testSessionRecreatesAgain), the old one shut down")
        func invalidateWithReset() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            try await expectNoFDLeak("reset") {
                let manager = makeManager()
                let (_, first) = try await manager.data(for: request(server, "/hello"))
                #expect(first.statusCode == 200)
                let old = manager.session
                manager.invalidateSessionCancelingTasks(true, resetSession: true)
                #expect(manager.session !== old)
                #expect(await eventually { old.poolStatistics().openConnections == 0 })
                let (_, again) = try await manager.data(for: request(server, "/hello"))
                #expect(again.statusCode == 200)
                manager.invalidateSessionCancelingTasks(true, resetSession: false)
            }
        }
    }
}
