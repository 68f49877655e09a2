// The header fields a request carries on the wire (`Session.Prepared.wireHeaders`): collected
// while the head is encoded, for a session with a cache or a responder (Vary and stubs match on
// them), in the head's order and with the session's additions; nil for a plain session.
import Foundation
import HawserBase
import HawserCache
import HawserCookies
import HawserHTTP1
import Testing

@testable import HawserCore

@Suite("The wire header fields of an encoded request")
struct WireHeadersTests {
    /// The fields of an encoded head, read back from its bytes (the test's own reader).
    private func fields(of head: [UInt8]) -> [String] {
        let text = String(decoding: head, as: UTF8.self)
        return text.components(separatedBy: "\r\n").dropFirst().filter { !$0.isEmpty }
    }

    private func names(_ headers: HTTPHeaders) -> [String] { headers.map { "\($0.name): \($0.value)" } }

    @Test("with a cache: the fields are the head's, in its order, the session's additions included")
    func collectedWithCache() throws {
        var configuration = SessionConfiguration()
        configuration.urlCache = HTTPCache(memoryCapacity: 1 << 20)
        let jar = CookieJar()
        let url = try #require(URL(string: "http://example.test:8080/a?b=1"))
        jar.setCookies(fromResponseHeaders: ["Set-Cookie": "k=v"], for: url)
        configuration.httpCookieStorage = jar
        var request = HTTPClientRequest(method: .post, url: url, headers: ["X-One": "1", "Content-Length": "99"])
        request.body = .bytes(Array("hello".utf8))
        let prepared = try Session.prepare(request, configuration: configuration)
        let wire = try #require(prepared.wireHeaders)
        #expect(self.names(wire) == self.fields(of: prepared.head))
        #expect(wire["Host"] == "example.test:8080")
        #expect(wire["Cookie"] == "k=v")
        #expect(wire["Content-Length"] == "5")  // the caller's framing field is dropped, the session's kept
        #expect(wire["X-One"] == "1")
        #expect(wire["Accept-Encoding"] != nil)
    }

    @Test("with a responder and no cache: collected too")
    func collectedWithResponder() throws {
        var configuration = SessionConfiguration()
        configuration.responder = StubResponder { _ in nil }
        let request = HTTPClientRequest(url: try #require(URL(string: "http://example.test/")))
        let prepared = try Session.prepare(request, configuration: configuration)
        let wire = try #require(prepared.wireHeaders)
        #expect(self.names(wire) == self.fields(of: prepared.head))
    }

    @Test("a plain session builds no header fields")
    func notCollected() throws {
        let request = HTTPClientRequest(url: try #require(URL(string: "http://example.test/")))
        #expect(try Session.prepare(request, configuration: SessionConfiguration()).wireHeaders == nil)
    }
}
