import Foundation
import HawserCore
import HawserTestServer
import Testing

@testable import HawserTool

@Suite("hawser get: bad URLs are exit 3, IDN hosts go as A-labels, --resolve on every hop", .serialized)
struct URLValidationToolTests {
    @Test("a port that overflows, a space or a backslash in the authority: exit 3, as curl")
    func badURLs() async throws {
        let t = TempFiles()
        for bad in ["http://127.0.0.1:18446744073709570171/", "http://exa mple.test/", "http://c.test\\@127.0.0.1/"] {
            let ours = await GetCommand.run(["-s", "-o", t.path("o"), bad])
            #expect(ours == 3, "\(bad): hawser \(ours)")
        }
        // curl agrees on the two it parses the same way (it goes to 127.0.0.1 for the backslash one).
        for bad in ["http://127.0.0.1:18446744073709570171/", "http://exa mple.test/"] {
            #expect(try Curl.run(["-s", "-o", t.path("o"), bad]) == 3, "curl \(bad)")
        }
    }

    @Test("an IDN host goes in Host as its A-labels, as curl sends it")
    func idnHost() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let p = server.port
        let pair = try await CurlSideBySideTests.both(
            ["--resolve", "xn--bcher-kva.example:\(p):127.0.0.1"],
            "http://bücher.example:\(p)/echo",
            t
        )
        #expect(pair.ours.status == 0 && pair.curl.status == 0, "hawser \(pair.ours.status), curl \(pair.curl.status)")
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == ["X-Echo-H-Host: xn--bcher-kva.example:\(p)"])
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == echoed(pair.curl.heads, ["X-Echo-H-Host"]))
        // --resolve given the U-label applies too (it is converted the same way).
        let ours = await GetCommand.run([
            "-s", "-o", t.path("o"), "--resolve", "bücher.example:\(p):127.0.0.1", "http://bücher.example:\(p)/hello",
        ])
        #expect(ours == 0)
    }

    @Test("--resolve applies to a redirect's target: 127.0.0.2 for the name, not the system's address")
    func resolveOnRedirect() async throws {
        let server = try TestServer(host: "127.0.0.2")
        defer { server.shutdown() }
        let t = TempFiles()
        let p = server.port
        let target = "http://localhost:\(p)/echo".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let start = "http://127.0.0.2:\(p)/redirect-to?url=\(target)"
        let pair = try await CurlSideBySideTests.both(["-L", "--resolve", "localhost:\(p):127.0.0.2"], start, t)
        #expect(pair.ours.status == 0, "hawser \(pair.ours.status): the redirect went elsewhere than 127.0.0.2")
        #expect(pair.curl.status == 0, "curl \(pair.curl.status)")
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == ["X-Echo-H-Host: localhost:\(p)"])
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == echoed(pair.curl.heads, ["X-Echo-H-Host"]))
    }
}
