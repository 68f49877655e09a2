// The wire info cache (WireInfoCache.swift): a request's connection key, target and Host value
// from the cache are the ones the full authority check gives, for every URL shape; a URL that
// fails the check fails every time; URLs the cache does not handle take the checked path.
import Foundation
import HawserBase
import Testing

@testable import HawserCore

@Suite("Wire info from the origin cache")
struct WireInfoCacheTests {
    private static let urls = [
        "http://example.test/",
        "http://example.test",
        "http://example.test?q=1",
        "HTTP://Example.TEST:8080/a/b?c=d#frag",
        "https://example.test:443/path%20with%20escapes?x=%2F",
        "https://user:pa%40ss@example.test:8443/p",
        "http://[::1]:8080/v6",
        "http://[fe80::1%25eth0]/zone",
        "https://bücher.test/idn",
        "http://127.0.0.1:80/default-port",
        "https://127.0.0.1:80/not-default",
        "http://example.test/#only-fragment",
        "http://example.test/a?",
    ]

    private func request(_ text: String) throws -> HTTPClientRequest {
        HTTPClientRequest(url: try #require(URL(string: text)))
    }

    @Test("a cache hit gives what the checked path gives, for every URL shape", arguments: urls)
    func hitMatchesChecked(_ text: String) throws {
        let request = try self.request(text)
        let checked = try request.checkedWireInfo()
        let first = try request.wireInfo()
        let second = try request.wireInfo()
        for info in [first, second] {
            #expect(info.key == checked.key)
            #expect(info.target == checked.target)
            #expect(info.hostHeader == checked.hostHeader)
        }
        // The second call was served by the cache.
        let split = try #require(HTTPClientRequest.splitForWire(request.url))
        #expect(WireInfoCache.shared.lookup(split.prefix) != nil)
    }

    @Test("the target is sliced from the URL's text: path and query, no fragment, / for an empty path")
    func targets() throws {
        #expect(HTTPClientRequest.splitForWire(try self.request("http://h.test").url)?.target == "/")
        #expect(HTTPClientRequest.splitForWire(try self.request("http://h.test?a=1").url)?.target == "/?a=1")
        #expect(HTTPClientRequest.splitForWire(try self.request("http://h.test/p?a#f").url)?.target == "/p?a")
        #expect(
            HTTPClientRequest.splitForWire(try self.request("http://h.test:81/p").url)?.prefix == "http://h.test:81"
        )
    }

    @Test("a URL that fails the check fails again: failures are not cached")
    func failuresNotCached() throws {
        let request = try self.request("http://example.test:99999/")
        for _ in 0..<2 {
            #expect(throws: HawserError.self) { try request.wireInfo() }
        }
        let split = try #require(HTTPClientRequest.splitForWire(request.url))
        #expect(WireInfoCache.shared.lookup(split.prefix) == nil)
    }

    @Test("URLs with a base URL, other schemes and Unix sockets take the checked path")
    func uncachedShapes() throws {
        let base = try #require(URL(string: "http://example.test/dir/"))
        let relative = try #require(URL(string: "file?x=1", relativeTo: base))
        #expect(HTTPClientRequest.splitForWire(relative) == nil)
        let info = try HTTPClientRequest(url: relative).wireInfo()
        #expect(info.target == "/dir/file?x=1")
        #expect(info.key.host == "example.test")
        #expect(HTTPClientRequest.splitForWire(try #require(URL(string: "ftp://example.test/"))) == nil)
        #expect(HTTPClientRequest.splitForWire(try #require(URL(string: "httpx://example.test/"))) == nil)
        let unix = try self.request("http+unix://%2Ftmp%2Fa.sock/p")
        #expect(HTTPClientRequest.splitForWire(unix.url) == nil)
        #expect(try unix.wireInfo().key.unixSocketPath == "/tmp/a.sock")
    }

    @Test("origins that share a slot do not answer for each other")
    func collisions() throws {
        // More origins than slots: every one still gets its own key.
        for port in 1000..<1040 {
            let request = try self.request("http://example.test:\(port)/")
            #expect(try request.wireInfo().key.port == port)
            #expect(try request.wireInfo().hostHeader == "example.test:\(port)")
        }
    }
}
