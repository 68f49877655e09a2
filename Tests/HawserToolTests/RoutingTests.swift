import Foundation
import HawserCore
import HawserTestServer
import Testing

@testable import HawserTool

@Suite("hawser get --resolve and --unix-socket", .serialized)
struct RoutingTests {
    @Test("--resolve applies to its HOST:PORT only, as curl's: the name stays in Host")
    func resolve() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let p = server.port
        // A name only --resolve knows; Host keeps it.
        let named = "http://hawser-resolve.localhost:\(p)/echo"
        let pair = try await CurlSideBySideTests.both(
            ["--resolve", "hawser-resolve.localhost:\(p):127.0.0.1"],
            named,
            t
        )
        #expect(pair.ours.status == 0 && pair.curl.status == 0)
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == ["X-Echo-H-Host: hawser-resolve.localhost:\(p)"])
        #expect(echoed(pair.ours.heads, ["X-Echo-H-Host"]) == echoed(pair.curl.heads, ["X-Echo-H-Host"]))
        // An entry for another port is not used; one for this port is (127.0.0.2 has no listener: 7).
        for (entry, expected) in [("localhost:1:127.0.0.2", Int32(0)), ("localhost:\(p):127.0.0.2", 7)] {
            let ours = await GetCommand.run([
                "-s", "-o", t.path("o"), "--resolve", entry, "http://localhost:\(p)/hello",
            ])
            let theirs = try Curl.run(["-s", "-o", t.path("o"), "--resolve", entry, "http://localhost:\(p)/hello"])
            #expect(ours == expected && ours == theirs, "\(entry): hawser \(ours), curl \(theirs)")
        }
    }

    @Test("--resolve over TLS: SNI and the certificate check keep the name")
    func resolveTLS() async throws {
        let pki = try TestPKI.shared()
        let server = try TestServer(
            host: "127.0.0.1",
            tls: .init(certificateChainPath: pki.wildcard.chainPath, privateKeyPath: pki.wildcard.keyPath)
        )
        defer { server.shutdown() }
        let t = TempFiles()
        let url = "https://api.hawser.localhost:\(server.port)/hello"
        let args = ["--cacert", pki.rootPath, "--resolve", "api.hawser.localhost:\(server.port):127.0.0.1"]
        let pair = try await CurlSideBySideTests.both(args, url, t)
        #expect(pair.ours.status == 0 && pair.curl.status == 0)
        #expect(pair.ours.body == Array("Hello, World!".utf8))
    }

    @Test("--unix-socket: the request goes to the socket with the URL's Host, as curl sends it")
    func unixSocket() async throws {
        let t = TempFiles()
        let path = t.path("sock")
        let server = try TestServer(unixSocketPath: path)
        defer { server.shutdown() }
        let fields = ["X-Echo-Method", "X-Echo-Target", "X-Echo-H-Host"]
        for url in ["http://example.test/echo?a=1", "http://example.test:8080/echo"] {
            let pair = try await CurlSideBySideTests.both(["--unix-socket", path, "-A", "t/1"], url, t)
            #expect(pair.ours.status == 0 && pair.curl.status == 0, "\(url)")
            #expect(echoed(pair.ours.heads, fields) == echoed(pair.curl.heads, fields), "\(url)")
        }
        // -w names the URL as given, as curl does.
        let w = try HawserBinary.run([
            "get", "-s", "-o", "/dev/null", "--unix-socket", path, "-w", "%{url_effective} %{http_code}",
            "http://example.test/hello",
        ])
        #expect(String(decoding: w.stdout, as: UTF8.self) == "http://example.test/hello 200")
        // No socket there: curl's 7.
        let missing = await GetCommand.run([
            "-s", "-o", t.path("o"), "--unix-socket", path + ".none", "http://example.test/",
        ])
        #expect(missing == 7)
        #expect(try Curl.run(["-s", "-o", t.path("o"), "--unix-socket", path + ".none", "http://example.test/"]) == 7)
    }
}
