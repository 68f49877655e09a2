// SessionManager.waitsForConnectivity with a NetworkReachabilityManager watching a network
// namespace the test creates (root and iproute2 needed, as ReachabilityTests).
import Foundation
import Hawser
import HawserCore
import HawserTestServer
import Testing

/// Signals when a task starts waiting for the network.
private final class WaitMonitor: EventMonitor, @unchecked Sendable {
    let waiting = Expectation()
    func taskIsWaitingForConnectivity(_ task: SessionTask) { self.waiting.fulfill() }
}

extension ManagerNetworkTests {
    @Suite("waitsForConnectivity", .serialized)
    struct WaitsForConnectivityTests {
        @Test("unknown status (not monitoring): a task starts at once")
        func unknownStartsAtOnce() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!)
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            m.waitsForConnectivity = true
            #expect(m.reachabilityManager.networkReachabilityStatus == .unknown)
            #expect(!m.reachabilityManager.isMonitoring, "the manager does not start monitoring by itself")
            let (value, _) = try await m.get("json")
            #expect(value is JSONValue)
        }

        @Test(
            "not reachable: the task waits running without connecting, then completes once reachable; a short resource timeout fails it"
        )
        func waitsUntilReachable() async throws {
            let ns = try NamespaceFixture()
            defer { ns.delete() }
            try ns.ipIn(["route", "add", "default", "via", ns.gateway, "dev", ns.a])
            try ns.ipIn(["link", "set", ns.b, "down"])  // `a` loses its carrier: not reachable
            let reach = try NetworkReachabilityManager(target: .defaultRoute, networkNamespace: ns.path)
            defer { reach.stopMonitoring() }
            let statuses = StatusRecorder<NetworkReachabilityManager.NetworkReachabilityStatus>()
            let token = reach.addObserver { statuses.record($0.status) }
            defer { reach.removeObserver(token) }
            #expect(reach.startMonitoring())
            #expect(await statuses.wait { $0.last == .notReachable }, "\(statuses.all)")

            let server = try TestServer()
            defer { server.shutdown() }
            let monitor = WaitMonitor()
            let m = HTTPSessionManager(baseURL: URL(string: server.baseURL)!, eventMonitors: [monitor])
            defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
            m.reachabilityManager = reach
            m.waitsForConnectivity = true
            let done = Expectation()
            let result = Box<((any Sendable)?, (any Error)?)>((nil, nil))
            let made = m.get(
                "json",
                success: { _, o in
                    result.value = (o, nil)
                    done.fulfill()
                },
                failure: { _, e in
                    result.value = (nil, e)
                    done.fulfill()
                }
            )
            let task = try #require(made)
            #expect(await monitor.waiting.wait(), "the task never reported waiting")
            #expect(task.state == .running)
            #expect(server.acceptedConnections == 0, "a waiting task opened a connection")
            #expect(done.fulfilled == 0)

            // Another manager with a short resource timeout gives up while the network stays down.
            var quick = SessionConfiguration()
            quick.timeoutIntervalForResource = 0.2
            let q = HTTPSessionManager(baseURL: URL(string: server.baseURL)!, configuration: quick)
            defer { q.invalidateSessionCancelingTasks(true, resetSession: false) }
            q.reachabilityManager = reach
            q.waitsForConnectivity = true
            do {
                _ = try await q.get("json")
                Issue.record("a request went out while the network was down")
            } catch let e as HawserError {
                #expect(e.code == .resourceTimeout && e.urlErrorCode == -1001, "\(e)")
            }
            #expect(server.acceptedConnections == 0)

            try ns.ipIn(["link", "set", ns.b, "up"])
            #expect(await done.wait(), "the waiting task did not complete after the network came back")
            #expect(result.value.1 == nil, "\(String(describing: result.value.1))")
            #expect(result.value.0 is JSONValue)
            #expect(server.acceptedConnections == 1)
        }
    }
}
