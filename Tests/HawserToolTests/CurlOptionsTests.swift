import Foundation
import HawserCore
import HawserTestServer
@testable import HawserTool
import Testing

@Suite("hawser get: curl's flags")
struct CurlOptionsTests {
    @Test("common flags parse as curl's do")
    func flags() throws {
        let o = try CurlOptions.parse(["-X", "PUT", "-H", "Accept: application/json", "-H", "X-Empty:", "-i", "-o", "out.bin",
                                       "-D", "-", "--max-time", "2.5", "-w", "%{http_code}", "http://127.0.0.1:1/x"])
        #expect(o.method == "PUT")
        #expect(o.headers.map { "\($0.0)=\($0.1)" } == ["Accept=application/json", "X-Empty="])
        #expect(o.includeHead && o.outputPath == "out.bin" && o.dumpHeaderPath == "-")
        #expect(o.maxTime == 2.5 && o.writeOut == "%{http_code}" && o.url == "http://127.0.0.1:1/x")
    }

    @Test("combined short flags expand like curl's -sS")
    func combined() throws {
        let o = try CurlOptions.parse(["-sSf", "http://x/"])
        #expect(o.silent && o.showError && o.failOnError)
    }

    @Test("an unknown flag is an error that names the flag", arguments: ["--frobnicate", "-Z", "-sZ"])
    func unknown(flag: String) {
        do {
            _ = try CurlOptions.parse([flag, "http://x/"])
            Issue.record("\(flag) was accepted")
        } catch {
            #expect("\(error)".contains(flag.count == 3 ? "-Z" : flag))
        }
    }

    @Test("a flag without its value, a bad number, a second URL: each a clear error")
    func malformed() {
        #expect(throws: CurlOptions.UsageError.self) { try CurlOptions.parse(["http://x/", "-H"]) }
        #expect(throws: CurlOptions.UsageError.self) { try CurlOptions.parse(["--max-time", "soon", "http://x/"]) }
        #expect(throws: CurlOptions.UsageError.self) { try CurlOptions.parse(["http://x/", "http://y/"]) }
        #expect(throws: CurlOptions.UsageError.self) { try CurlOptions.parse(["-H", "no colon here", "http://x/"]) }
    }

    @Test("-d @FILE reads the body from the file")
    func dataFromFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-data-\(UUID().uuidString)").path
        try Data("a=1&b=2".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let o = try CurlOptions.parse(["-d", "@" + path, "http://x/"])
        #expect(o.data == Array("a=1&b=2".utf8))
    }

    @Test("exit codes are curl's", arguments: [
        (HawserError.Code.cannotResolveHost, Int32(6)), (.cannotConnect, 7), (.connectTimeout, 28),
        (.idleTimeout, 28), (.resourceTimeout, 28), (.protocolError, 8), (.invalidRequest, 3),
    ])
    func exitCodes(code: HawserError.Code, expected: Int32) {
        #expect(GetCommand.exitCode(for: HawserError(code, "x")) == expected)
    }

    @Test("-w renders curl's variables")
    func writeOut() {
        var m = TaskMetrics()
        m.fetchStart = 1_000_000_000
        m.responseEnd = 1_250_000_000
        let head = HTTPResponseHead(status: 201, headers: ["Content-Type": "text/plain"])
        let s = WriteOut.render("%{http_code} %{size_download} %{time_total} %{content_type}\\n", head: head, metrics: m,
                                url: URL(string: "http://x/")!, bodyBytes: 42, headBytes: 10)
        #expect(s == "201 42 0.250000 text/plain\n")
    }
}

@Suite("hawser get against the test server", .serialized)
struct GetCommandTests {
    static func temp(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hawser-\(name)-\(UUID().uuidString)").path
    }

    @Test("-o writes the body byte for byte, -D writes the head, exit status 0")
    func download() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body"), heads = Self.temp("heads")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: heads) }
        let status = await GetCommand.run(["-s", "-o", out, "-D", heads, server.baseURL + "/bytes/300000?chunk=7000"])
        #expect(status == 0)
        let body = try Data(contentsOf: URL(fileURLWithPath: out))
        #expect(body.count == 300_000 && body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
        let head = try String(contentsOfFile: heads, encoding: .utf8)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.contains("Transfer-Encoding: chunked\r\n"))
    }

    @Test("-D records the interim heads too, as curl -i shows them")
    func interim() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body"), heads = Self.temp("heads")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: heads) }
        let status = await GetCommand.run(["-s", "-o", out, "-D", heads, server.baseURL + "/interim"])
        #expect(status == 0)
        let head = try String(contentsOfFile: heads, encoding: .utf8)
        #expect(head.components(separatedBy: "HTTP/1.1 ").count - 1 == 3)
        #expect(head.contains("100 Continue") && head.contains("103 Early Hints") && head.contains("200 OK"))
    }

    @Test("failures exit with curl's codes", arguments: [
        ("/fault/garbage", Int32(8)), ("/fault/close-mid-body", Int32(56)), ("/status/404", Int32(22)),
    ])
    func failures(path: String, expected: Int32) async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(await GetCommand.run(["-s", "-f", "-o", out, server.baseURL + path]) == expected)
    }

    @Test("--max-time ends a request that takes too long with 28")
    func maxTime() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(await GetCommand.run(["-s", "--max-time", "0.2", "-o", out, server.baseURL + "/delay/3000"]) == 28)
    }

    @Test("without -L a redirect is the response; -L follows and -D shows every head; --max-redirs stops with 47")
    func redirects() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body"), heads = Self.temp("heads")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: heads) }
        #expect(await GetCommand.run(["-s", "-o", out, "-D", heads, server.baseURL + "/redirect/2"]) == 0)
        #expect(try String(contentsOfFile: heads, encoding: .utf8).hasPrefix("HTTP/1.1 302"))

        #expect(await GetCommand.run(["-sL", "-o", out, "-D", heads, server.baseURL + "/redirect/2"]) == 0)
        let all = try String(contentsOfFile: heads, encoding: .utf8)
        #expect(all.components(separatedBy: "HTTP/1.1 302").count - 1 == 2)
        #expect(all.contains("HTTP/1.1 200 OK"))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "Hello, World!")

        #expect(await GetCommand.run(["-s", "-L", "--max-redirs", "1", "-o", out, server.baseURL + "/redirect/3"]) == 47)
    }

    @Test("-c writes curl's cookie file, -b reads it back, -b NAME=VALUE sends it literally")
    func cookies() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body"), jar = Self.temp("jar")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: jar) }
        #expect(await GetCommand.run(["-s", "-o", out, "-c", jar, server.baseURL + "/cookies/set?k=v"]) == 0)
        let file = try String(contentsOfFile: jar, encoding: .utf8)
        #expect(file.hasPrefix("# Netscape HTTP Cookie File"))
        #expect(file.contains("\tk\tv"))
        #expect(await GetCommand.run(["-s", "-o", out, "-b", jar, server.baseURL + "/cookies"]) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "k=v")
        #expect(await GetCommand.run(["-s", "-o", out, "-b", "x=1; y=2", server.baseURL + "/cookies"]) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "x=1; y=2")
        #expect(await GetCommand.run(["-s", "-o", out, server.baseURL + "/cookies"]) == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)).isEmpty, "no cookie engine without -b/-c")
    }

    @Test("--compressed decodes; without it the coded bytes are written as curl does")
    func compressed() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(await GetCommand.run(["-s", "--compressed", "-o", out, server.baseURL + "/gzip"]) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8).contains("gzipped"))
        #expect(await GetCommand.run(["-s", "-o", out, server.baseURL + "/gzip"]) == 0)
        let raw = try Data(contentsOf: URL(fileURLWithPath: out))
        #expect(raw.prefix(2) == Data([0x1f, 0x8b]))
    }

    @Test("TLS flags: untrusted by default (60), -k, --cacert, --pinnedpubkey (match and mismatch)")
    func tls() async throws {
        let pki = try TestPKI.shared()
        let server = try TestServer(host: "127.0.0.1", tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath))
        defer { server.shutdown() }
        let out = Self.temp("body")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let u = "https://localhost:\(server.port)/hello"
        #expect(await GetCommand.run(["-s", "-o", out, u]) == 60)
        #expect(await GetCommand.run(["-sk", "-o", out, u]) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "Hello, World!")
        #expect(await GetCommand.run(["-s", "--cacert", pki.rootPath, "-o", out, u]) == 0)
        let pin = pki.intermediate.publicKeySHA256Pin.replacing("sha256/", with: "sha256//")
        #expect(await GetCommand.run(["-s", "--cacert", pki.rootPath, "--pinnedpubkey", "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=;" + pin, "-o", out, u]) == 0)
        #expect(await GetCommand.run(["-s", "--cacert", pki.rootPath, "--pinnedpubkey", "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "-o", out, u]) == 60)
    }

    @Test("-u sends Basic credentials; -C - resumes a partial file with Range")
    func userAndResume() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body"), heads = Self.temp("heads")
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: heads) }
        #expect(await GetCommand.run(["-s", "-u", "ada:lovelace", "-D", heads, "-o", out, server.baseURL + "/echo"]) == 0)
        #expect(try String(contentsOfFile: heads, encoding: .utf8).contains("X-Echo-H-Authorization: Basic YWRhOmxvdmVsYWNl"))
        // Download the first part, then resume.
        let full = server.baseURL + "/range/5000"
        #expect(await GetCommand.run(["-s", "-o", out, full]) == 0)
        let whole = try Data(contentsOf: URL(fileURLWithPath: out))
        try whole.prefix(1234).write(to: URL(fileURLWithPath: out))
        #expect(await GetCommand.run(["-s", "-C", "-", "-o", out, full]) == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == whole)
        #expect(await GetCommand.run(["-s", "-C", "-", "-o", out, full]) == 0, "416: already complete")
        try whole.prefix(10).write(to: URL(fileURLWithPath: out))
        #expect(await GetCommand.run(["-s", "-C", "-", "-o", out, full + "?ignore-range=1"]) == 33)
    }

    @Test("a refused connection exits 7; an unknown flag exits 2")
    func refusedAndUsage() async throws {
        let probe = try TestServer()
        let port = probe.port
        probe.shutdown()
        #expect(await GetCommand.run(["-s", "http://127.0.0.1:\(port)/"]) == 7)
        #expect(await GetCommand.run(["--nope", "http://127.0.0.1:\(port)/"]) == 2)
    }
}
