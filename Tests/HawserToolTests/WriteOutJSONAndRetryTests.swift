import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@testable import HawserTool

/// `-w '%{json}'` and `%{header_json}`, `--retry-all-errors` and `--cn-fallback` (issue 24, item 7).
@Suite("hawser get: %{json}, --retry-all-errors, --cn-fallback", .serialized)
struct WriteOutJSONAndRetryTests {
    /// The keys `%{json}` writes, as `hawser get --help` and the README document them.
    static let documentedKeys: Set<String> = [
        "content_type", "errormsg", "exitcode", "filename_effective", "http_code", "http_version", "method",
        "num_connects", "num_headers", "num_redirects", "remote_ip", "remote_port", "response_code", "scheme",
        "size_download", "size_header", "size_upload", "speed_download", "speed_upload", "ssl_verify_result",
        "time_appconnect", "time_connect", "time_namelookup", "time_pretransfer", "time_redirect",
        "time_starttransfer", "time_total", "url", "url_effective",
    ]

    /// curl's stdout for `args`, as a string.
    static func curlStdout(_ args: [String], _ t: TempFiles) throws -> (status: Int32, stdout: [UInt8]) {
        let out = t.path("curl-stdout")
        #expect(FileManager.default.createFile(atPath: out, contents: nil))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Curl.path)
        p.arguments = ["-q"] + args
        p.standardOutput = FileHandle(forWritingAtPath: out)
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return (p.terminationStatus, try TempFiles.read(out))
    }

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(bytes))
        return try #require(value as? [String: Any], "not a JSON object: \(String(decoding: bytes, as: UTF8.self))")
    }

    /// number, string or null: the JSON type of a value JSONSerialization read.
    static func kind(_ v: Any) -> String {
        if v is NSNull { return "null" }
        if v is String { return "string" }
        if v is NSNumber { return "number" }
        return "other"
    }

    @Test("-w '%{json}' prints one JSON object: the transfer's values, curl's names, the documented keys")
    func json() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let url = server.baseURL + "/json"
        let body = t.path("body")
        let r = try HawserBinary.run(["get", "-s", "-o", body, "-w", "%{json}", url])
        #expect(r.status == 0)
        let o = try Self.object(r.stdout)
        #expect(Set(o.keys) == Self.documentedKeys)
        #expect((o["http_code"] as? NSNumber)?.intValue == 200)
        #expect((o["response_code"] as? NSNumber)?.intValue == 200)
        #expect((o["size_download"] as? NSNumber)?.intValue == (try TempFiles.read(body)).count)
        #expect((o["exitcode"] as? NSNumber)?.intValue == 0)
        #expect(o["errormsg"] is NSNull)
        #expect(o["url_effective"] as? String == url)
        #expect(o["url"] as? String == url)
        #expect(o["method"] as? String == "GET")
        #expect(o["filename_effective"] as? String == body)
        #expect((o["remote_port"] as? NSNumber)?.intValue == server.port)
        #expect((o["num_connects"] as? NSNumber)?.intValue == 1)
        #expect((o["time_total"] as? NSNumber).map { $0.doubleValue >= 0 } == true)
        #expect((o["content_type"] as? String)?.hasPrefix("application/json") == true)

        // A failure: the exit status and curl's message, http_code 0; a quote in the URL escaped.
        let probe = try TestServer()
        let refused = "http://127.0.0.1:\(probe.port)/a%22b"
        probe.shutdown()
        let f = try HawserBinary.run(["get", "-s", "-w", "before %{json} after", refused])
        #expect(f.status == 7)
        let text = String(decoding: f.stdout, as: UTF8.self)
        #expect(text.hasPrefix("before {") && text.hasSuffix("} after"), "\(text)")
        let failed = try Self.object(Array(f.stdout.dropFirst(7).dropLast(6)))
        #expect((failed["exitcode"] as? NSNumber)?.intValue == 7)
        #expect((failed["http_code"] as? NSNumber)?.intValue == 0)
        #expect((failed["errormsg"] as? String)?.isEmpty == false)
        #expect(failed["url_effective"] as? String == refused)
    }

    @Test("-w '%{json}' side by side with curl: every key is one of curl's, with curl's JSON type")
    func jsonTypesLikeCurl() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        for (args, url) in [
            ([String](), server.baseURL + "/json"), (["-f"], server.baseURL + "/status/404"),
            (["-L", "-d", "a=1"], server.baseURL + "/redirect/1"),
        ] {
            let ours = try HawserBinary.run(["get", "-s", "-o", t.path("o"), "-w", "%{json}"] + args + [url])
            let theirs = try Self.curlStdout(["-s", "-o", t.path("o"), "-w", "%{json}"] + args + [url], t)
            #expect(ours.status == theirs.status, "\(args) \(url)")
            let mine = try Self.object(ours.stdout)
            let curl = try Self.object(theirs.stdout)
            #expect(
                Set(mine.keys).subtracting(curl.keys).isEmpty,
                "not curl's: \(Set(mine.keys).subtracting(curl.keys))"
            )
            for (key, value) in mine {
                guard let c = curl[key] else { continue }
                #expect(Self.kind(value) == Self.kind(c), "\(key): \(value) vs curl's \(c) (\(args) \(url))")
            }
            for key in ["http_code", "response_code", "exitcode", "size_download", "num_redirects", "num_headers"] {
                #expect(
                    (mine[key] as? NSNumber)?.intValue == (curl[key] as? NSNumber)?.intValue,
                    "\(key) (\(args) \(url))"
                )
            }
            #expect(mine["url_effective"] as? String == curl["url_effective"] as? String)
        }
    }

    @Test("-w '%{header_json}': names in lower case to arrays of values, as curl; obs-text bytes as \\u00XX")
    func headerJSON() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let url = server.baseURL + "/hello"
        let ours = try HawserBinary.run(["get", "-s", "-o", t.path("o"), "-w", "%{header_json}", url])
        let theirs = try Self.curlStdout(["-s", "-o", t.path("o"), "-w", "%{header_json}", url], t)
        let mine = try Self.object(ours.stdout)
        let curl = try Self.object(theirs.stdout)
        #expect(Set(mine.keys) == Set(curl.keys))
        #expect(mine["content-length"] as? [String] == curl["content-length"] as? [String])
        // Bytes that are not UTF-8 (0xE9 0x20 0xFF 0xA0): valid JSON, each byte a \u00XX escape.
        let obs = try HawserBinary.run([
            "get", "-s", "-o", t.path("o"), "-w", "%{header_json}", server.baseURL + "/obs-text",
        ])
        #expect(String(decoding: obs.stdout, as: UTF8.self).contains(#""x-obs-text":["caf\u00e9 \u00ff\u00a0end"]"#))
        let parsed = try Self.object(obs.stdout)
        #expect(parsed["x-obs-text"] as? [String] == ["caf\u{E9} \u{FF}\u{A0}end"])

        // A quote, a backslash and a tab escaped; a repeated name is one array, in order; as curl.
        let response = "HTTP/1.1 200 OK\r\nX-Q: a\"b\\c\td\r\nX-Multi: 1\r\nx-multi: 2\r\nContent-Length: 2\r\n\r\nok"
        let script: [ScriptedServer.Step] = [.readRequest(), .sendText(response), .waitForClose]
        let scripted = try ScriptedServer([script, script])
        defer { scripted.stop() }
        let args = ["-s", "-o", t.path("o"), "-w", "%{header_json}", scripted.baseURL + "/"]
        let quoted = try Self.object(try HawserBinary.run(["get"] + args).stdout)
        let curlQuoted = try Self.object(try Self.curlStdout(args, t).stdout)
        #expect(quoted["x-q"] as? [String] == ["a\"b\\c\td"])
        #expect(quoted["x-multi"] as? [String] == ["1", "2"])
        #expect(quoted["x-q"] as? [String] == curlQuoted["x-q"] as? [String])
        #expect(quoted["x-multi"] as? [String] == curlQuoted["x-multi"] as? [String])
    }

    /// A POST that the server answers with an empty reply, then a 503, then 200; each time it reads the body.
    static func flakyPostServer() throws -> ScriptedServer {
        let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        let unavailable = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        return try ScriptedServer([
            [.readRequest(body: 3), .close],
            [.readRequest(body: 3), .sendText(unavailable), .waitForClose],
            [.readRequest(body: 3), .sendText(ok), .waitForClose],
        ])
    }

    @Test("--retry-all-errors retries a POST on any error (an empty reply, a 503), the body sent each time; as curl")
    func retryAllErrorsPost() async throws {
        let t = TempFiles()
        let args = ["-s", "-d", "a=1", "--retry", "3", "--retry-delay", "0", "-o", t.path("o")]
        // Without it: a POST is not retried (the empty reply is 52).
        let plain = try Self.flakyPostServer()
        defer { plain.stop() }
        #expect(await GetCommand.run(args + [plain.baseURL + "/"]) == 52)
        #expect(plain.requestCount == 1)

        let server = try Self.flakyPostServer()
        defer { server.stop() }
        let r = try HawserBinary.run(
            ["get"] + args.filter { $0 != "-s" } + ["--retry-all-errors", server.baseURL + "/"]
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(server.requestCount == 3)
        for request in server.requests {
            let text = String(decoding: request, as: UTF8.self)
            #expect(text.hasPrefix("POST / HTTP/1.1\r\n") && text.hasSuffix("\r\n\r\na=1"), "\(text)")
        }
        #expect(r.stderr.contains("Warning: Problem (retrying all errors). Will retry in 0 seconds. 3 retries left."))
        #expect(r.stderr.contains("Warning: Problem : HTTP error. Will retry in 0 seconds. 2 retries left."))

        // curl does the same: three requests with the body, exit 0 (and without the flag, 52 and one request).
        let curlServer = try Self.flakyPostServer()
        defer { curlServer.stop() }
        #expect(try Curl.run(args + ["--retry-all-errors", curlServer.baseURL + "/"]) == 0)
        #expect(curlServer.requestCount == 3)
        let curlPlain = try Self.flakyPostServer()
        defer { curlPlain.stop() }
        #expect(try Curl.run(args + [curlPlain.baseURL + "/"]) == 52)
        #expect(curlPlain.requestCount == 1)
    }

    @Test("--retry-all-errors: an HTTP error is retried with -f only, as curl; --no-retry-all-errors turns it off")
    func retryAllErrorsHTTP() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let base = ["-s", "--retry", "2", "--retry-delay", "0", "-o", t.path("o")]
        func run(_ args: [String], _ id: String) async -> (Int32, Int) {
            let target = "/flaky?fail=1&status=404&id=\(id)"
            let status = await GetCommand.run(base + args + [server.baseURL + target])
            return (status, server.requestCount(target: target))
        }
        #expect(await run(["-f", "--retry-all-errors"], "a") == (0, 2))
        #expect(await run(["-f"], "b") == (22, 1))
        #expect(await run(["--retry-all-errors"], "c") == (0, 1), "without -f a 404 is no error")
        #expect(await run(["-f", "--retry-all-errors", "--no-retry-all-errors"], "d") == (22, 1))
        let curlTarget = "/flaky?fail=1&status=404&id=curl"
        #expect(try Curl.run(base + ["-f", "--retry-all-errors", server.baseURL + curlTarget]) == 0)
        #expect(server.requestCount(target: curlTarget) == 2)
        let curlPlain = "/flaky?fail=1&status=404&id=curl-plain"
        #expect(try Curl.run(base + ["--retry-all-errors", server.baseURL + curlPlain]) == 0)
        #expect(server.requestCount(target: curlPlain) == 1)
    }

    @Test("--cn-fallback accepts a certificate that names the host only in its CN (never for an IP address)")
    func commonNameFallback() async throws {
        let pki = try TestPKI.shared()
        let server = try ToolTLSAndVerboseTests.tlsServer(pki.cnOnly)
        defer { server.shutdown() }
        let t = TempFiles()
        let ca = ["-s", "-o", t.path("o"), "--cacert", pki.rootPath]
        let url = "https://localhost:\(server.port)/hello"
        #expect(await GetCommand.run(ca + [url]) == 60)
        #expect(await GetCommand.run(ca + ["--cn-fallback", url]) == 0)
        #expect(try !TempFiles.read(ca[2]).isEmpty, "the body arrived")
        #expect(await GetCommand.run(ca + ["--cn-fallback", "https://127.0.0.1:\(server.port)/hello"]) == 60)
        // curl with OpenSSL still falls back to the CN when there is no subjectAltName.
        #expect(try Curl.run(ca + [url]) == 0)
    }
}
