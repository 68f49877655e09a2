import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@testable import HawserTool

@Suite("hawser get: curl's flags")
struct CurlOptionsTests {
    @Test("common flags parse as curl's do")
    func flags() throws {
        let o = try CurlOptions.parse([
            "-X", "PUT", "-H", "Accept: application/json", "-H", "X-Empty:", "-i", "-o", "out.bin",
            "-D", "-", "--max-time", "2.5", "-w", "%{http_code}", "http://127.0.0.1:1/x",
        ])
        #expect(o.method == "PUT")
        #expect(o.headers.map { "\($0.0)=\($0.1)" } == ["Accept=application/json", "X-Empty="])
        #expect(o.includeHead && o.outputPath == "out.bin" && o.dumpHeaderPath == "-")
        #expect(o.maxTime == 2.5 && o.writeOut == "%{http_code}" && o.url == "http://127.0.0.1:1/x")
    }

    @Test(
        "proxy flags: -x, -U, --noproxy, and the https:// proxy's own trust (--proxy-cacert, --proxy-capath, --proxy-insecure)"
    )
    func proxyFlags() throws {
        let o = try CurlOptions.parse([
            "-x", "https://p:8443", "-U", "u:pw", "--noproxy", "localhost", "--proxy-cacert", "-ca.pem",
            "--proxy-capath", "certs", "--proxy-insecure", "https://x/",
        ])
        #expect(o.proxy == "https://p:8443" && o.proxyUser == "u:pw" && o.noProxy == "localhost")
        #expect(o.proxyCACertPath == "-ca.pem", "a value starting with '-' is still the value")
        #expect(o.proxyCAPath == "certs" && o.proxyInsecure && !o.insecure)
        var config = SessionConfiguration()
        try GetCommand.applyProxy(
            try CurlOptions.parse(["-x", "https://p:8443", "--proxy-insecure", "https://x/"]),
            to: &config
        )
        #expect(config.proxy.allProxy == ProxyServer(kind: .https, host: "p", port: 8443))
        #expect(config.proxyTrustEvaluator is SecurityPolicy && config.serverTrustEvaluator == nil)
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
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-data-\(UUID().uuidString)")
            .path
        try Data("a=1&b=2".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let o = try CurlOptions.parse(["-d", "@" + path, "http://x/"])
        #expect(o.data == Array("a=1&b=2".utf8))
    }

    @Test(
        "exit codes are curl's",
        arguments: [
            (HawserError.Code.cannotResolveHost, Int32(6)), (.cannotConnect, 7), (.connectTimeout, 28),
            (.idleTimeout, 28), (.resourceTimeout, 28), (.protocolError, 8), (.invalidRequest, 3),
            (.tooManyRedirects, 47), (.secureConnectionFailed, 35), (.serverCertificateUntrusted, 60),
            (.cannotDecodeContent, 61),
        ]
    )
    func exitCodes(code: HawserError.Code, expected: Int32) {
        #expect(GetCommand.exitCode(for: HawserError(code, "x")) == expected)
    }

    @Test("exit codes read the cause: a cut body 18, an empty reply 52, not HTTP 1, bad chunks 56, a pin 90")
    func exitCodesByCause() {
        #expect(
            ExitCode.forError(
                HawserError(
                    .connectionLost,
                    "closed the connection: x",
                    underlying: HTTP1ParseError(.truncatedBody, offset: 9)
                )
            ) == 18
        )
        #expect(
            ExitCode.forError(
                HawserError(.connectionLost, "127.0.0.1:1 closed the connection before sending a response")
            ) == 52
        )
        #expect(ExitCode.forError(HawserError(.connectionLost, "reading failed: reset")) == 56)
        #expect(
            ExitCode.forError(
                HawserError(.protocolError, "x", underlying: HTTP1ParseError(.invalidStatusLine, offset: 0))
            ) == 1
        )
        #expect(
            ExitCode.forError(
                HawserError(.protocolError, "x", underlying: HTTP1ParseError(.invalidChunkSize, offset: 40))
            ) == 56
        )
        #expect(
            ExitCode.forError(
                HawserError(.protocolError, "x", underlying: HTTP1ParseError(.invalidFieldName, offset: 20))
            ) == 8
        )
        #expect(
            ExitCode.forError(
                HawserError(.serverCertificateUntrusted, "x", underlying: TrustFailure(.pinMismatch, "no pin"))
            ) == 90
        )
        #expect(
            ExitCode.forError(HawserError(.serverCertificateUntrusted, "x", underlying: TrustFailure(.expired, "old")))
                == 60
        )
    }

    @Test("-w renders curl's variables; %% is a percent sign; an unknown variable is left out with a warning")
    func writeOut() {
        var m = TaskMetrics()
        m.fetchStart = 1_000_000_000
        m.domainLookupEnd = 1_001_000_000
        m.connectEnd = 1_002_000_000
        m.requestStart = 1_003_000_000
        m.responseStart = 1_100_000_000
        m.responseEnd = 1_250_000_000
        m.redirectCount = 2
        let head = HTTPResponseHead(status: 201, headers: ["Content-Type": "text/plain"])
        var warnings: [String] = []
        let t = WriteOut.Transfer(
            head: head,
            metrics: m,
            url: URL(string: "http://x/")!,
            bodyBytes: 50_000,
            headBytes: 10,
            lastRedirect: 1_050_000_000
        )
        let s = WriteOut.render(
            "%{http_code} %{size_download} %{time_total} %{content_type} %{http_version} %{num_redirects}"
                + " %{time_namelookup} %{time_connect} %{time_appconnect} %{time_redirect} %{speed_download}"
                + " %{ssl_verify_result} [%{errormsg}] %{exitcode} 100%% %{nope}\\n",
            t
        ) { warnings.append($0) }
        #expect(s == "201 50000 0.250000 text/plain 1.1 2 0.001000 0.002000 0.000000 0.050000 200000 0 [] 0 100% \n")
        #expect(warnings == ["unknown --write-out variable: 'nope'"])
        let failed = WriteOut.Transfer(
            head: nil,
            metrics: TaskMetrics(),
            url: URL(string: "http://x/")!,
            errorMessage: "Failed to connect",
            exitCode: 7
        )
        #expect(
            WriteOut.render("%{http_code} %{http_version} %{errormsg} %{exitcode}\n", failed)
                == "000 0 Failed to connect 7\n"
        )
    }

    @Test("short flags cluster as curl's: values attached or in the next argument")
    func clusters() throws {
        let o = try CurlOptions.parse(["-XPUT", "-sSo", "out", "-Hx: 1", "-C", "-", "--max-redirs", "-1", "http://x/"])
        #expect(
            o.method == "PUT" && o.silent && o.showError && o.outputPath == "out" && o.resume && o.maxRedirects == -1
        )
        #expect(o.headers.map { "\($0.0)=\($0.1)" } == ["x=1"])
        // A value is never read as a flag.
        let d = try CurlOptions.parse(["-d", "-sS", "http://x/"])
        #expect(d.data == Array("-sS".utf8) && !d.silent)
    }

    @Test("-d pieces join with '&'; -d @FILE drops newlines, --data-binary keeps them; an unreadable file warns")
    func dataJoins() throws {
        let t = TempFiles()
        let path = try t.file("data", Array("a=1\r\nb=2\n".utf8))
        let o = try CurlOptions.parse(["-d", "x=0", "-d", "@" + path, "--data-binary", "@" + path, "http://x/"])
        #expect(o.data == Array("x=0&a=1b=2&a=1\r\nb=2\n".utf8))
        let missing = try CurlOptions.parse(["-d", "@/nonexistent/hawser", "http://x/"])
        #expect(missing.data == [] && missing.dataWarnings.count == 1)
        let json = try CurlOptions.parse(["--json", "{\"a\":", "--json", "1}", "http://x/"])
        #expect(json.json == Array("{\"a\":1}".utf8))
    }

    @Test("--limit-rate, --retry, --resolve, --pinning parse as curl writes them; bad values are usage errors")
    func transferFlags() throws {
        #expect(
            CurlOptions.rate("100K") == 102_400 && CurlOptions.rate("1.5M") == 1_572_864
                && CurlOptions.rate("2g") == 2 << 30
        )
        #expect(CurlOptions.rate("500") == 500 && CurlOptions.rate("fast") == nil && CurlOptions.rate("-1K") == nil)
        let o = try CurlOptions.parse([
            "--retry", "3", "--retry-delay", "0", "--retry-max-time", "10", "--limit-rate", "1M",
            "--resolve", "Example.com:443:127.0.0.1,[::1]", "--pinning", "public-key",
            "--pinned-cert", "a.pem", "--pinned-cert", "b.der", "--allow-invalid-certificates",
            "--no-validate-domain-name", "--unix-socket", "/tmp/s", "http://x/",
        ])
        #expect(o.retry == 3 && o.retryDelay == 0 && o.retryMaxTime == 10 && o.limitRate == 1 << 20)
        #expect(
            o.resolve == [CurlOptions.ResolveEntry(host: "example.com", port: 443, addresses: ["127.0.0.1", "::1"])]
        )
        #expect(o.pinning == .publicKey && o.pinnedCertificatePaths == ["a.pem", "b.der"])
        #expect(o.allowInvalidCertificates && !o.validatesDomainName && o.unixSocket == "/tmp/s")
        for bad in [
            ["--pinning", "strong"], ["--retry", "many"], ["--resolve", "example.com:443"], ["--limit-rate", "x"],
            ["--retry-delay", "-1"], ["-F", "x=1", "-d", "y"], ["-T", "f", "-d", "y"],
        ] {
            #expect(throws: CurlOptions.UsageError.self, "\(bad)") { try CurlOptions.parse(bad + ["http://x/"]) }
        }
    }

    @Test("--limit-rate is the session's receive and send limit (each transfer), not the printer's pacing")
    func limitRateConfiguration() throws {
        let limited = try GetCommand.configuration(CurlOptions.parse(["--limit-rate", "100K", "http://x/"]))
        #expect(limited.maximumReceiveBytesPerSecond == 102_400)
        #expect(limited.maximumSendBytesPerSecond == 102_400)
        #expect(limited.readChunkSize == SessionConfiguration().readChunkSize, "reads are sized by the limit, not here")
        let free = try GetCommand.configuration(CurlOptions.parse(["http://x/"]))
        #expect(free.maximumReceiveBytesPerSecond == nil && free.maximumSendBytesPerSecond == nil)
        // curl's --limit-rate 0 means no limit.
        let zero = try GetCommand.configuration(CurlOptions.parse(["--limit-rate", "0", "http://x/"]))
        #expect(zero.maximumReceiveBytesPerSecond == nil && zero.maximumSendBytesPerSecond == nil)
    }

    @Test("-F specs: fields, @FILE parts, <FILE fields, ;type= and ;filename=")
    func formSpecs() throws {
        typealias S = FormParts.Spec
        var warnings: [String] = []
        #expect(
            try FormParts.parse("a=b;c") { warnings.append($0) }
                == S(name: "a", kind: .text("b"), type: nil, fileName: nil)
        )
        #expect(warnings == ["skip unknown form field: c"])
        #expect(
            try FormParts.parse(#"q="a\"b\\c;d";type=text/y"#)
                == S(name: "q", kind: .text(#"a"b\c;d"#), type: "text/y", fileName: nil)
        )
        #expect(
            try FormParts.parse(#"f=@"x;y.txt";filename="z w.txt""#)
                == S(name: "f", kind: .file("x;y.txt"), type: nil, fileName: "z w.txt")
        )
        #expect(ProgressMeter.size(104_857_599) == "99.10", "curl cuts the text to five columns")
        #expect(try FormParts.parse("f=@dir/p.png") == S(name: "f", kind: .file("dir/p.png"), type: nil, fileName: nil))
        #expect(
            try FormParts.parse("f=@x.bin;type=image/png;filename=\"y.png\"")
                == S(name: "f", kind: .file("x.bin"), type: "image/png", fileName: "y.png")
        )
        #expect(
            try FormParts.parse("t=<notes.txt;type=text/plain")
                == S(name: "t", kind: .fileContents("notes.txt"), type: "text/plain", fileName: nil)
        )
        #expect(throws: CurlOptions.UsageError.self) { try FormParts.parse("novalue") }
        #expect(FormParts.curlContentType(forFileName: "a.PNG") == "image/png")
        #expect(FormParts.curlContentType(forFileName: "a.json") == "application/octet-stream")
    }

    @Test("the progress meter formats sizes and times in curl's columns")
    func meterFormatting() {
        #expect(ProgressMeter.size(0) == "    0" && ProgressMeter.size(99_999) == "99999")
        #expect(ProgressMeter.size(100_000) == "  97k" && ProgressMeter.size(10_239_999) == "9999k")
        #expect(ProgressMeter.size(10_240_000) == " 9.7M" && ProgressMeter.size(104_000_000) == "99.1M")
        #expect(ProgressMeter.size(104_857_600) == " 100M" && ProgressMeter.size(15 << 30) == "15.0G")
        #expect(ProgressMeter.size(200 << 30) == " 200G" && ProgressMeter.size(20_000 << 30) == "  19T")
        #expect(
            ProgressMeter.time(0) == "--:--:--" && ProgressMeter.time(5) == " 0:00:05"
                && ProgressMeter.time(3_723) == " 1:02:03"
        )
        #expect(ProgressMeter.time(100 * 3600) == "  4d 04h" && ProgressMeter.time(1_000 * 86_400) == "   1000d")
        #expect(
            ProgressMeter.header == "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
                + "                                 Dload  Upload   Total   Spent    Left  Speed\n"
        )
        // Half of 1 MiB in 2 s: 50 %, 256k/s average, 4 s total, 2 s spent, 2 s left.
        let half = ProgressMeter.Snapshot(
            downloadTotal: 1 << 20,
            uploadTotal: nil,
            downloaded: 1 << 19,
            uploaded: 0,
            elapsedMilliseconds: 2_000,
            currentSpeed: 300_000
        )
        #expect(
            ProgressMeter.line(half) == " 50 1024k   50  512k    0     0   256k      0  0:00:04  0:00:02  0:00:02  292k"
        )
        // Unknown size: no percentage, no estimate.
        let unknown = ProgressMeter.Snapshot(
            downloadTotal: nil,
            uploadTotal: nil,
            downloaded: 5_000,
            uploaded: 0,
            elapsedMilliseconds: 500,
            currentSpeed: 10_000
        )
        #expect(
            ProgressMeter.line(unknown)
                == "100  5000    0  5000    0     0  10000      0 --:--:-- --:--:-- --:--:-- 10000"
        )
    }

    @Test("the meter draws its header once, a line at most once a second, and always the last one")
    func meterUpdates() {
        var meter = ProgressMeter(start: 0)
        meter.setDownloadTotal(1000)
        meter.setDownloaded(100)
        let first = meter.update(now: 100_000_000)
        #expect(first?.hasPrefix(ProgressMeter.header + "\r") == true)
        meter.setDownloaded(200)
        #expect(meter.update(now: 500_000_000) == nil, "same second")
        #expect(meter.update(now: 1_200_000_000)?.hasPrefix("\r") == true)
        meter.setDownloaded(1000)
        #expect(meter.update(now: 1_300_000_000, force: true)?.hasPrefix("\r100  1000  100  1000") == true)
    }

    @Test("certificate dates print as curl's")
    func dates() {
        #expect(Verbose.date(Date(timeIntervalSince1970: 0)) == "Jan  1 00:00:00 1970 GMT")
        #expect(Verbose.date(Date(timeIntervalSince1970: 1_900_000_000)) == "Mar 17 17:46:40 2030 GMT")
        #expect(Verbose.date(Date(timeIntervalSince1970: 951_782_400)) == "Feb 29 00:00:00 2000 GMT")
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
        let out = Self.temp("body")
        let heads = Self.temp("heads")
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: heads)
        }
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
        let out = Self.temp("body")
        let heads = Self.temp("heads")
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: heads)
        }
        let status = await GetCommand.run(["-s", "-o", out, "-D", heads, server.baseURL + "/interim"])
        #expect(status == 0)
        let head = try String(contentsOfFile: heads, encoding: .utf8)
        #expect(head.components(separatedBy: "HTTP/1.1 ").count - 1 == 3)
        #expect(head.contains("100 Continue") && head.contains("103 Early Hints") && head.contains("200 OK"))
    }

    @Test(
        "failures exit with curl's codes",
        arguments: [
            ("/fault/garbage", Int32(1)), ("/fault/close-mid-body", Int32(18)), ("/status/404", Int32(22)),
            ("/fault/empty", Int32(52)), ("/fault/reset", Int32(56)), ("/fault/bad-chunk", Int32(56)),
        ]
    )
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

    @Test(
        "--max-time is the total, as curl's: a body trickled under every idle limit still ends with 28, part-way, as curl ends it"
    )
    func maxTimeIsTotal() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("trickled")
        defer { try? FileManager.default.removeItem(atPath: out) }
        // 40 bytes, one every 100 ms: bytes never stop for long, the body takes 4 s in all.
        let url = server.baseURL + "/fault/trickle?bytes=40&every=100"
        #expect(await GetCommand.run(["-s", "--max-time", "1", "-o", out, url]) == 28)
        let got = (try? Data(contentsOf: URL(fileURLWithPath: out)).count) ?? 0
        #expect(got < 40, "ended part-way, not after the whole body: \(got) bytes")
        #expect(try Curl.run(["-s", "--max-time", "1", "-o", out, url]) == 28, "curl's --max-time is the total too")
    }

    @Test("without -L a redirect is the response; -L follows and -D shows every head; --max-redirs stops with 47")
    func redirects() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        let heads = Self.temp("heads")
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: heads)
        }
        #expect(await GetCommand.run(["-s", "-o", out, "-D", heads, server.baseURL + "/redirect/2"]) == 0)
        #expect(try String(contentsOfFile: heads, encoding: .utf8).hasPrefix("HTTP/1.1 302"))

        #expect(await GetCommand.run(["-sL", "-o", out, "-D", heads, server.baseURL + "/redirect/2"]) == 0)
        let all = try String(contentsOfFile: heads, encoding: .utf8)
        #expect(all.components(separatedBy: "HTTP/1.1 302").count - 1 == 2)
        #expect(all.contains("HTTP/1.1 200 OK"))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "Hello, World!")

        #expect(
            await GetCommand.run(["-s", "-L", "--max-redirs", "1", "-o", out, server.baseURL + "/redirect/3"]) == 47
        )
    }

    @Test("-c writes curl's cookie file, -b reads it back, -b NAME=VALUE sends it literally")
    func cookies() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        let jar = Self.temp("jar")
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: jar)
        }
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

    #if Brotli && Zstd
    /// "hawser decodes br and zstd. " eight times, as `brotli` and `zstd --no-check` write it.
    static let coded: [(String, [UInt8])] = [
        (
            "br",
            [
                0xa1, 0xf8, 0x06, 0xc0, 0x2f, 0x6e, 0x63, 0xeb, 0x3a, 0x56, 0xf3, 0x1b, 0x06, 0xad, 0x46, 0x05, 0x41,
                0xb5, 0x8b, 0x80, 0xb5, 0xc2, 0x36, 0x26, 0x6f, 0xa2, 0xa1, 0x48, 0xdf, 0xf7, 0x06, 0x4b, 0xf8, 0x59,
                0x19, 0x00,
            ]
        ),
        (
            "zstd",
            [
                0x28, 0xb5, 0x2f, 0xfd, 0x20, 0xe0, 0x1d, 0x01, 0x00, 0xe0, 0x68, 0x61, 0x77, 0x73, 0x65, 0x72, 0x20,
                0x64, 0x65, 0x63, 0x6f, 0x64, 0x65, 0x73, 0x20, 0x62, 0x72, 0x20, 0x61, 0x6e, 0x64, 0x20, 0x7a, 0x73,
                0x74, 0x64, 0x2e, 0x20, 0x01, 0x00, 0x04, 0x9f, 0x9a, 0x4e,
            ]
        ),
    ]

    @Test("--compressed asks for br and zstd and decodes them; without it the coded bytes are written")
    func compressedBrotliZstd() async throws {
        for (coding, body) in Self.coded {
            let response =
                Array("HTTP/1.1 200 OK\r\nContent-Encoding: \(coding)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
                + body
            let script: [ScriptedServer.Step] = [.readRequest(), .send(response), .waitForClose]
            let server = try ScriptedServer([script, script])
            defer { server.stop() }
            let out = Self.temp("body-\(coding)")
            defer { try? FileManager.default.removeItem(atPath: out) }
            #expect(await GetCommand.run(["-s", "--compressed", "-o", out, server.baseURL + "/"]) == 0)
            #expect(
                try String(contentsOfFile: out, encoding: .utf8)
                    == String(repeating: "hawser decodes br and zstd. ", count: 8),
                "\(coding)"
            )
            let sent = String(decoding: try #require(server.requests.first), as: UTF8.self)
            #expect(sent.contains("\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"))
            #expect(await GetCommand.run(["-s", "-o", out, server.baseURL + "/"]) == 0)
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == body)
        }
    }
    #endif

    @Test("TLS flags: untrusted by default (60), -k, --cacert, --pinnedpubkey (match and mismatch)")
    func tls() async throws {
        let pki = try TestPKI.shared()
        let server = try TestServer(
            host: "127.0.0.1",
            tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
        )
        defer { server.shutdown() }
        let out = Self.temp("body")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let u = "https://localhost:\(server.port)/hello"
        #expect(await GetCommand.run(["-s", "-o", out, u]) == 60)
        #expect(await GetCommand.run(["-sk", "-o", out, u]) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "Hello, World!")
        #expect(await GetCommand.run(["-s", "--cacert", pki.rootPath, "-o", out, u]) == 0)
        let pin = pki.intermediate.publicKeySHA256Pin.replacing("sha256/", with: "sha256//")
        #expect(
            await GetCommand.run([
                "-s", "--cacert", pki.rootPath, "--pinnedpubkey",
                "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=;" + pin, "-o", out, u,
            ]) == 0
        )
        #expect(
            await GetCommand.run([
                "-s", "--cacert", pki.rootPath, "--pinnedpubkey",
                "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "-o", out, u,
            ]) == 90
        )
    }

    @Test("-u sends Basic credentials; -C - resumes a partial file with Range")
    func userAndResume() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let out = Self.temp("body")
        let heads = Self.temp("heads")
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: heads)
        }
        #expect(
            await GetCommand.run(["-s", "-u", "ada:lovelace", "-D", heads, "-o", out, server.baseURL + "/echo"]) == 0
        )
        #expect(
            try String(contentsOfFile: heads, encoding: .utf8).contains(
                "X-Echo-H-Authorization: Basic YWRhOmxvdmVsYWNl"
            )
        )
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
