// A user's program, as a new user writes one: the AFNetworking manager with typed calls, one
// catch for every failure, and swift-http-types in the same file. It imports Hawser and HTTPTypes
// together and names `HTTPResponse`, `HTTPRequest`, `HTTPFields` and Hawser's types without one
// module qualification: it compiles only while no Hawser type is named like one of HTTPTypes'.
import Foundation
import HTTPTypes
import Hawser
import HawserHTTPTypes
import HawserTestServer
import Testing

/// The service's model.
struct Greeting: Decodable, Sendable, Equatable {
    let message: String
}

/// What the service reports for a failed call, from any layer.
struct Failure: Equatable {
    let domain: String
    let code: Int
    let status: Int?
}

/// The service's client: typed calls on the manager, failures read through one protocol.
struct GreetingClient {
    let api: HTTPSessionManager

    init(baseURL: String) {
        self.api = HTTPSessionManager(baseURL: URL(string: baseURL + "/api/"))
    }

    func greeting(for name: String) async throws -> Greeting {
        try await self.api.get("greeting", parameters: ["name": name], as: Greeting.self)
    }

    func greetingAndResponse() async throws -> (Greeting, HawserResponse) {
        let (greeting, response) = try await self.api.request(.get, "greeting", as: Greeting.self)
        return (greeting, response)
    }

    /// Any call's failure as the service logs it.
    func failure(of call: () async throws -> Greeting) async -> Failure? {
        do {
            _ = try await call()
            return nil
        } catch let error as any HawserFailure {
            return Failure(domain: error.domain, code: error.errorCode, status: error.response?.statusCode)
        } catch {
            return Failure(domain: "other", code: 0, status: nil)
        }
    }
}

@Suite(.serialized) struct UserProgramTests {
    @Test func typedCallsDecodeIntoTheCallersType() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let client = GreetingClient(baseURL: server.baseURL)
        #expect(try await client.greeting(for: "Ada") == Greeting(message: "Hello, Ada!"))
        let (greeting, response) = try await client.greetingAndResponse()
        #expect(greeting.message == "Hello, World!")
        #expect(response.statusCode == 200 && response.mimeType == "application/json")
    }

    @Test func everyFailureIsReadThroughOneProtocol() async throws {
        let server = try TestServer()
        let client = GreetingClient(baseURL: server.baseURL)
        // The server answers 404 for an unknown operation: the serializer refuses it.
        let refused = await client.failure { try await client.api.get("nothing", as: Greeting.self) }
        #expect(refused == Failure(domain: "com.alamofire.error.serialization.response", code: -1011, status: 404))
        // A body of another shape does not decode.
        let undecodable = await client.failure {
            _ = try await client.api.post("items", parameters: ["x": 1], as: [Int].self)
            return Greeting(message: "")
        }
        #expect(undecodable?.code == 3840 && undecodable?.domain == "NSCocoaErrorDomain")
        // No server at all: the engine's failure, in the same shape.
        server.shutdown()
        let unreachable = await client.failure { try await client.greeting(for: "x") }
        #expect(unreachable == Failure(domain: "NSURLErrorDomain", code: -1004, status: nil))
    }

    @Test func httpTypesAndHawserTypesMeetWithoutQualification() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let session = Session()
        defer { session.shutdown() }
        let url = URL(string: server.baseURL)!
        var fields = HTTPFields()
        fields[.accept] = "application/json"
        let request = HTTPRequest(
            method: .get,
            scheme: "http",
            authority: "\(url.host!):\(url.port!)",
            path: "/api/greeting?name=types",
            headerFields: fields
        )
        let (response, body): (HTTPResponse, ResponseBodyStream) = try await session.streamingResponse(for: request)
        var bytes: [UInt8] = []
        for try await chunk in body { bytes += chunk }
        #expect(response.status == .ok)
        #expect(response.headerFields[.contentType] == "application/json")
        let greeting = try JSONDecoder().decode(Greeting.self, from: Data(bytes))
        #expect(greeting.message == "Hello, types!")

        // Hawser's response beside HTTPTypes' in one expression.
        let hawser = HawserResponse(
            url: url,
            statusCode: response.status.code,
            headers: HTTPHeaders(response.headerFields)
        )
        #expect(hawser.statusCode == 200 && hawser.mimeType == "application/json")
    }
}
