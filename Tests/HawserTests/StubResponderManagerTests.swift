// The responder (SessionConfiguration.responder) and the redirect history, seen from the manager.
import Foundation
import Hawser
import HawserTestServer
import Testing

@Suite("StubResponder through HTTPSessionManager", .serialized)
struct StubResponderManagerTests {
    static func manager(_ stub: StubResponder) -> HTTPSessionManager {
        var configuration = SessionConfiguration()
        configuration.proxy = .none
        configuration.responder = stub
        return HTTPSessionManager(baseURL: URL(string: "http://api.test/v1/")!, configuration: configuration)
    }

    @Test("a stubbed JSON answer is serialized; a stubbed 404 fails the serializer's status check (-1011)")
    func serializersSeeStubs() async throws {
        let stub = StubResponder()
        stub.on(.get, "/v1/users/1", .json(#"{"id":1,"name":"Ada"}"#))
        stub.on(.get, "/v1/missing", .response(status: 404, headers: ["Content-Type": "application/json"], body: "{}"))
        let m = Self.manager(stub)
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        let (value, response) = try await m.get("users/1")
        #expect(response.statusCode == 200)
        #expect((value as? JSONValue)?["name"] == "Ada", "\(String(describing: value))")
        do {
            _ = try await m.get("missing")
            Issue.record("a 404 succeeded")
        } catch let e as SerializationError {
            #expect(e.code == .unacceptableStatusCode && e.response?.statusCode == 404)
        }
        #expect(stub.requests.map(\.url.path) == ["/v1/users/1", "/v1/missing"])
    }

    @Test("a stubbed failure reaches the manager's caller as the engine's error")
    func failures() async throws {
        let stub = StubResponder()
        stub.on("/v1/down", .failure(.cannotConnect, "connection refused (stub)"))
        let m = Self.manager(stub)
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        do {
            _ = try await m.get("down")
            Issue.record("a failure succeeded")
        } catch let e as HawserError {
            #expect(e.code == .cannotConnect)
            #expect(e.message == "connection refused (stub)")
        }
    }

    @Test("a POST's parameters reach the responder as the serializer encoded them")
    func postBody() async throws {
        let stub = StubResponder()
        stub.on(.post, "/v1/items", .json(#"{"ok":true}"#, status: 201))
        let m = Self.manager(stub)
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        m.requestSerializer = JSONRequestSerializer()
        let (_, response) = try await m.post("items", parameters: ["name": "x"])
        #expect(response.statusCode == 201)
        let seen = try #require(stub.requests.first)
        #expect(seen.method == .post)
        #expect(seen.headers["Content-Type"]?.hasPrefix("application/json") == true)
        if case .bytes(let b)? = seen.body {
            #expect(String(decoding: b, as: UTF8.self) == #"{"name":"x"}"#)
        } else {
            Issue.record("no byte body: \(String(describing: seen.body))")
        }
    }
}

@Suite("Redirect history through the manager", .serialized)
struct ManagerRedirectHistoryTests {
    @Test("a task's metrics list the redirects it followed")
    func taskMetricsCarryHops() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        var configuration = SessionConfiguration()
        configuration.proxy = .none
        let m = HTTPSessionManager(baseURL: URL(string: server.baseURL + "/")!, configuration: configuration)
        defer { m.invalidateSessionCancelingTasks(true, resetSession: false) }
        m.responseSerializer = HTTPResponseSerializer()
        let task = try m.dataTask(with: HTTPClientRequest(url: #require(URL(string: server.baseURL + "/redirect/2")))) {
            _,
            _,
            _ in
        }
        let done = await withCheckedContinuation { (c: CheckedContinuation<TaskMetrics?, Never>) in
            _ = m.addObserver { event in
                if case .taskDidComplete(let t, let info) = event, t === task { c.resume(returning: info.metrics) }
            }
            task.resume()
        }
        let metrics = try #require(done)
        #expect(metrics.redirects.map(\.url.path) == ["/redirect/2", "/redirect/1"])
        #expect(metrics.redirects.map(\.statusCode) == [302, 302])
        #expect(metrics.redirects.last?.location.path == "/hello")
        #expect(task.metrics?.redirects == metrics.redirects)
    }
}
