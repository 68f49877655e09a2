import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@testable import HawserTool

/// Runs `/usr/bin/curl` (scripts/test.sh installs it) with the same flags the tool gets, so
/// the tests can hold the tool's output to curl's byte for byte.
enum Curl {
    static let path = "/usr/bin/curl"

    struct Missing: Error, CustomStringConvertible {
        var description: String { "\(Curl.path) is missing (scripts/test.sh installs Debian's curl)" }
    }

    /// curl's exit status; `-q` keeps a ~/.curlrc out, the proxy variables are removed (and
    /// `environment` added).
    @discardableResult
    static func run(_ args: [String], stdin: FileHandle? = nil, environment: [String: String] = [:]) throws -> Int32 {
        guard FileManager.default.isExecutableFile(atPath: self.path) else { throw Missing() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: self.path)
        p.arguments = ["-q"] + args
        var env = ProcessInfo.processInfo.environment
        for k in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            env[k] = nil
        }
        env.merge(environment) { $1 }
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        if let stdin { p.standardInput = stdin }
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// Temporary files removed at the end of a test.
final class TempFiles {
    private var paths: [String] = []

    func path(_ name: String) -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-\(name)-\(UUID().uuidString)")
            .path
        self.paths.append(p)
        return p
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = self.path(name)
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }

    static func read(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    deinit {
        for p in self.paths { try? FileManager.default.removeItem(atPath: p) }
    }
}

@Suite("hawser get side by side with curl", .serialized)
struct CurlSideBySideTests {
    @Test("-D and -i write a header value's obs-text bytes as received, as curl does")
    func obsText() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let url = server.baseURL + "/obs-text"
        let heads = t.path("heads")
        let out = t.path("out")
        let curlHeads = t.path("curl-heads")
        let curlOut = t.path("curl-out")
        #expect(await GetCommand.run(["-s", "-D", heads, "-o", out, url]) == 0)
        #expect(try Curl.run(["-s", "-D", curlHeads, "-o", curlOut, url]) == 0)
        let ours = try TempFiles.read(heads)
        #expect(ours == (try TempFiles.read(curlHeads)))
        let raw: [UInt8] = Array("X-Obs-Text: caf".utf8) + [0xE9, 0x20, 0xFF, 0xA0] + Array("end\r\n".utf8)
        #expect(ours.firstRange(of: raw) != nil, "the bytes 0xE9 0xFF 0xA0 arrive unchanged")

        // -i with -o: the head and the body go to the file, as curl writes them.
        #expect(await GetCommand.run(["-s", "-i", "-o", out, url]) == 0)
        #expect(try Curl.run(["-s", "-i", "-o", curlOut, url]) == 0)
        #expect(try TempFiles.read(out) == (try TempFiles.read(curlOut)))
    }

    @Test(
        "-D keeps a reason phrase's and a Set-Cookie's bytes that are not UTF-8; -c writes the cookie's bytes; as curl"
    )
    func nonUTF8HeadAndCookie() async throws {
        let response: [UInt8] =
            Array("HTTP/1.1 200 Caf".utf8) + [0xE9, 0x20, 0xFF] + Array("\r\nSet-Cookie: n".utf8) + [0x80]
            + Array("=v".utf8) + [0xFF, 0x80] + Array("\r\nContent-Length: 2\r\n\r\nok".utf8)
        let script: [ScriptedServer.Step] = [.readRequest(), .send(response), .waitForClose]
        let server = try ScriptedServer([script, script])
        defer { server.stop() }
        let t = TempFiles()
        let url = server.baseURL + "/"
        let (heads, jar, curlHeads, curlJar) = (
            t.path("heads"), t.path("jar"), t.path("curl-heads"), t.path("curl-jar")
        )
        #expect(await GetCommand.run(["-s", "-D", heads, "-c", jar, "-o", "/dev/null", url]) == 0)
        #expect(try Curl.run(["-s", "-D", curlHeads, "-c", curlJar, "-o", "/dev/null", url]) == 0)
        let ours = try TempFiles.read(heads)
        #expect(Array(ours.prefix(21)) == Array(response.prefix(21)), "the status line as received")
        #expect(ours == (try TempFiles.read(curlHeads)))
        // The cookie file: the same line as curl's, with the octets as received.
        let line: [UInt8] = Array("127.0.0.1\tFALSE\t/\tFALSE\t0\tn".utf8) + [0x80, 0x09, 0x76, 0xFF, 0x80, 0x0A]
        #expect(try TempFiles.read(jar).firstRange(of: line) != nil)
        #expect(try TempFiles.read(curlJar).firstRange(of: line) != nil)
    }
}

/// The `hawser` executable built next to the test bundle, run as a process (for what goes to
/// stderr and stdout: -v, help).
enum HawserBinary {
    static var path: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("hawser").path
    }

    struct Result {
        var status: Int32
        var stdout: [UInt8]
        var stderr: String
    }

    /// Runs `hawser ARGS` without the proxy variables of this process, plus `environment`.
    static func run(_ args: [String], environment: [String: String] = [:]) throws -> Result {
        let t = TempFiles()
        let out = t.path("stdout")
        let err = t.path("stderr")
        guard FileManager.default.createFile(atPath: out, contents: nil),
            FileManager.default.createFile(atPath: err, contents: nil)
        else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: out]) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: self.path)
        p.arguments = args
        var env = ProcessInfo.processInfo.environment
        for k in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            env[k] = nil
        }
        env.merge(environment) { $1 }
        p.environment = env
        p.standardOutput = FileHandle(forWritingAtPath: out)
        p.standardError = FileHandle(forWritingAtPath: err)
        try p.run()
        p.waitUntilExit()
        return Result(
            status: p.terminationStatus,
            stdout: try TempFiles.read(out),
            stderr: String(decoding: try TempFiles.read(err), as: UTF8.self)
        )
    }
}

/// The lines of an `/echo` response's head that describe the request as the server saw it.
func echoed(_ heads: [UInt8], _ names: [String]) -> [String] {
    String(decoding: heads, as: UTF8.self).split(separator: "\r\n").map(String.init).filter { line in
        names.contains { line.lowercased().hasPrefix($0.lowercased() + ":") }
    }
}

/// Where two byte arrays first differ (with a little context), nil when they are equal: big
/// bodies compare without printing megabytes.
func firstDifference(_ a: [UInt8], _ b: [UInt8]) -> String? {
    if a == b { return nil }
    let i = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
    func show(_ x: [UInt8]) -> String {
        String(decoding: x[max(0, i - 40)..<min(x.count, i + 40)], as: UTF8.self).debugDescription
    }
    return "sizes \(a.count) and \(b.count), first difference at byte \(i): \(show(a)) vs \(show(b))"
}

/// A multipart body with its boundary replaced, so curl's and ours compare.
func withoutBoundary(_ body: [UInt8], contentType: String) -> [UInt8] {
    guard let r = contentType.range(of: "boundary=") else { return body }
    let boundary = Array(contentType[r.upperBound...].utf8)
    var out: [UInt8] = []
    var rest = body[...]
    while let hit = rest.firstRange(of: boundary) {
        out += rest[..<hit.lowerBound]
        out += Array("BOUNDARY".utf8)
        rest = rest[hit.upperBound...]
    }
    out += rest
    return out
}

extension CurlSideBySideTests {
    /// Runs the tool and curl with `args` + `[url]`, each writing heads and body to its own files.
    struct Pair {
        var ours: (status: Int32, heads: [UInt8], body: [UInt8])
        var curl: (status: Int32, heads: [UInt8], body: [UInt8])
    }

    static func both(_ args: [String], _ url: String, _ t: TempFiles) async throws -> Pair {
        let h1 = t.path("h")
        let b1 = t.path("b")
        let h2 = t.path("h")
        let b2 = t.path("b")
        let s1 = await GetCommand.run(["-s", "-D", h1, "-o", b1] + args + [url])
        let s2 = try Curl.run(["-s", "-D", h2, "-o", b2] + args + [url])
        func read(_ p: String) -> [UInt8] { (try? TempFiles.read(p)) ?? [] }
        return Pair(ours: (s1, read(h1), read(b1)), curl: (s2, read(h2), read(b2)))
    }

    @Test(
        "exit statuses match curl's for the failures loopback can provoke",
        arguments: [
            "/fault/close-mid-body", "/fault/empty", "/fault/reset", "/fault/bad-chunk", "/fault/garbage",
            "/status/404",
            "/redirect/5", "/hello",
        ]
    )
    func exitStatuses(path: String) async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let p = try await Self.both(["-f", "-L", "--max-redirs", "2"], server.baseURL + path, t)
        #expect(p.ours.status == p.curl.status, "\(path): hawser \(p.ours.status), curl \(p.curl.status)")
    }

    @Test(
        "exit statuses for what never reaches a server: unsupported protocol 1, malformed URL 3, refused 7, unwritable output 23, unreadable upload 26"
    )
    func localFailures() async throws {
        let probe = try TestServer()
        let port = probe.port
        probe.shutdown()
        let t = TempFiles()
        let cases: [[String]] = [
            ["foo://127.0.0.1/x"], ["http://"], ["http://127.0.0.1:\(port)/"],
            ["-T", "/nonexistent/upload", "http://127.0.0.1:\(port)/"],
            ["-F", "f=@/nonexistent/upload", "http://127.0.0.1:\(port)/"],
        ]
        // curl opens the output when the first byte arrives: an unwritable one fails with 23 once a server answers.
        let server = try TestServer()
        defer { server.shutdown() }
        let cases2 = cases + [["-o", "/nonexistent/dir/x", server.baseURL + "/hello"]]
        for args in cases2 {
            let out = args.contains("-o") ? [] : ["-o", t.path("out")]
            let ours = await GetCommand.run(["-s"] + out + args)
            let theirs = try Curl.run(["-s"] + out + args)
            #expect(ours == theirs, "\(args): hawser \(ours), curl \(theirs)")
            #expect([1, 3, 7, 23, 26].contains(ours), "\(args): \(ours)")
            if args.contains("-o") { #expect(ours == 23) }
        }
    }

    @Test(
        "the output file as curl leaves it: created at the first byte, empty for an empty body, no body with -f on an HTTP error"
    )
    func outputFile() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let probe = try TestServer()
        let refused = "http://127.0.0.1:\(probe.port)/"
        probe.shutdown()
        let t = TempFiles()
        for (args, url) in [
            ([String](), server.baseURL + "/status/204"), (["-f"], server.baseURL + "/status/404"),
            (["-f", "-i"], server.baseURL + "/status/404"), (["-f"], server.baseURL + "/basic-auth/u/p"),
            ([], server.baseURL + "/basic-auth/u/p"),
            ([], refused), ([], server.baseURL + "/fault/empty"),
        ] {
            let ours = t.path("ours")
            let theirs = t.path("curl")
            let a = await GetCommand.run(["-s", "-o", ours] + args + [url])
            let b = try Curl.run(["-s", "-o", theirs] + args + [url])
            #expect(a == b, "\(args) \(url): hawser \(a), curl \(b)")
            let fm = FileManager.default
            #expect(
                fm.fileExists(atPath: ours) == fm.fileExists(atPath: theirs),
                "\(args) \(url): the file exists for one only"
            )
            if fm.fileExists(atPath: ours) && fm.fileExists(atPath: theirs) {
                #expect(try TempFiles.read(ours) == TempFiles.read(theirs), "\(args) \(url)")
            }
        }
        // An output that cannot be created: curl's 7 when nothing arrives, 23 once bytes do.
        #expect(await GetCommand.run(["-s", "-o", "/nonexistent/dir/x", refused]) == 7)
        #expect(try Curl.run(["-s", "-o", "/nonexistent/dir/x", refused]) == 7)
    }

    @Test("-L with -D and -i: every head byte for byte as curl writes them, and the same body")
    func redirectHeads() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let p = try await Self.both(["-L", "-i"], server.baseURL + "/redirect/2", t)
        #expect(p.ours.status == 0 && p.curl.status == 0)
        #expect(p.ours.heads == p.curl.heads)
        #expect(p.ours.body == p.curl.body)
        let interim = try await Self.both([], server.baseURL + "/interim", t)
        #expect(interim.ours.heads == interim.curl.heads)
    }

    @Test("-w: every variable that is not a timing prints what curl prints")
    func writeOutValues() async throws {
        let pki = try TestPKI.shared()
        let server = try TestServer()
        let tls = try TestServer(
            host: "127.0.0.1",
            tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
        )
        defer {
            server.shutdown()
            tls.shutdown()
        }
        let t = TempFiles()
        let format =
            "%{http_code} %{response_code} %{http_version} %{size_download} %{size_header} %{num_redirects} "
            + "%{num_connects} %{url_effective} %{content_type} %{remote_ip} %{remote_port} %{ssl_verify_result} "
            + "%{exitcode} %{scheme} %{method} %{size_upload}"
        for (args, url) in [
            (["-L"], server.baseURL + "/redirect/2"), ([], server.baseURL + "/json"),
            (["-d", "a=1"], server.baseURL + "/echo"), ([], server.baseURL + "/fault/empty"),
            (["--cacert", pki.rootPath], "https://localhost:\(tls.port)/hello"),
            (["-k"], "https://localhost:\(tls.port)/hello"),
        ] {
            let theirs = t.path("w")
            // -w goes to stdout: both run as processes, stdout to a file.
            let args = args + ["-A", "t/1"]
            let mine = try HawserBinary.run(["get", "-s", "-o", t.path("o"), "-w", format] + args + [url])
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Curl.path)
            p.arguments = ["-q", "-s", "-o", t.path("o"), "-w", format] + args + [url]
            #expect(FileManager.default.createFile(atPath: theirs, contents: nil))
            p.standardOutput = FileHandle(forWritingAtPath: theirs)
            try p.run()
            p.waitUntilExit()
            let curlOut = String(decoding: try TempFiles.read(theirs), as: UTF8.self)
            #expect(String(decoding: mine.stdout, as: UTF8.self) == curlOut, "\(args) \(url)")
        }
    }

    @Test("-w timings: six decimals, in the order the phases happen; time_redirect within the total")
    func writeOutTimings() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let r = try HawserBinary.run([
            "get", "-s", "-L", "-o", "/dev/null", "-w",
            "%{time_namelookup} %{time_connect} %{time_appconnect} %{time_pretransfer} %{time_redirect} %{time_starttransfer} %{time_total} %{speed_download}",
            server.baseURL + "/redirect/1?x=" + UUID().uuidString,
        ])
        let values = String(decoding: r.stdout, as: UTF8.self).split(separator: " ").map(String.init)
        #expect(values.count == 8)
        let times = values.prefix(7).compactMap(Double.init)
        #expect(times.count == 7 && values.prefix(7).allSatisfy { $0.split(separator: ".").last?.count == 6 })
        if times.count == 7 {
            #expect(
                times[0] <= times[1] && times[1] <= times[3] && times[3] <= times[5] && times[5] <= times[6],
                "\(String(decoding: r.stdout, as: UTF8.self))"
            )
            #expect(times[2] == 0, "no TLS, no appconnect (as curl)")
            #expect(times[4] > 0 && times[4] <= times[5], "the redirect ended before the final response began")
        }
        #expect(Int(values.last ?? "") != nil)
    }

    @Test("-G puts -d in the query; --json sends the JSON fields; -A, -e, and -H 'Name:' as curl")
    func requestFlags() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let fields = [
            "X-Echo-Method", "X-Echo-Target", "X-Echo-H-Content-Type", "X-Echo-H-Accept", "X-Echo-H-Referer",
            "X-Echo-H-User-Agent", "X-Echo-H-X-Empty", "X-Echo-Body-Length",
        ]
        // The order of the fields on the wire is not curl's (the engine writes the caller's first):
        // compare them as sets. -A gives both the same User-Agent where the test is not about it.
        for args in [
            ["-G", "-d", "a=1", "-d", "b=2", "-A", "t/1"], ["--json", "{\"a\":1}", "-A", "t/1"],
            ["-A", "agent/1", "-e", "http://from/"], ["-H", "Accept:", "-H", "X-Empty;", "-A", "x"],
            ["-X", "DELETE", "-d", "z", "-A", "t/1"], ["-I", "-A", "t/1"], ["-A", ""],
        ] {
            let p = try await Self.both(args, server.baseURL + "/echo?q=0", t)
            #expect(p.ours.status == 0 && p.curl.status == 0)
            #expect(echoed(p.ours.heads, fields).sorted() == echoed(p.curl.heads, fields).sorted(), "\(args)")
            if args.contains("-I") {
                #expect(
                    echoed(p.ours.body, fields).sorted() == echoed(p.curl.body, fields).sorted(),
                    "-I writes the head as the body"
                )
            } else {
                #expect(p.ours.body == p.curl.body, "\(args)")
            }
        }
    }

    @Test("-F sends the body curl sends (modulo the boundary): fields, <FILE, @FILE streamed, ;type, ;filename")
    func multipart() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let text = try t.file("notes.txt", Array("line one\nline two\n".utf8))
        let big = try t.file("big.bin", (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let args = [
            "-F", "name=Ada Lovelace", "-F", "notes=<" + text, "-F", "file=@" + text, "-F",
            "blob=@" + big + ";type=image/png;filename=pic.png",
            "-F", "quote=\"x;\\\"y\";type=text/x", "-F", "plain=a;skipped",
        ]
        let p = try await Self.both(args, server.baseURL + "/echo", t)
        #expect(p.ours.status == 0 && p.curl.status == 0)
        func contentType(_ heads: [UInt8]) -> String {
            echoed(heads, ["X-Echo-H-Content-Type"]).first.map { String($0.dropFirst("X-Echo-H-Content-Type: ".count)) }
                ?? ""
        }
        #expect(contentType(p.ours.heads).hasPrefix("multipart/form-data; boundary="))
        let ours = withoutBoundary(p.ours.body, contentType: contentType(p.ours.heads))
        let theirs = withoutBoundary(p.curl.body, contentType: contentType(p.curl.heads))
        #expect(ours.count > 3_000_000)
        #expect(firstDifference(ours, theirs) == nil)
        #expect(echoed(p.ours.heads, ["X-Echo-Method"]) == ["X-Echo-Method: POST"])
    }

    @Test(
        "-T streams a file with PUT (Content-Length), a URL ending in '/' gets the file's name; -T - sends stdin chunked"
    )
    func upload() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let file = try t.file("up.bin", (0..<2_000_000).map { UInt8($0 % 251) })
        let sink = try await Self.both(["-T", file], server.baseURL + "/sink", t)
        let fields = ["X-Sink-Length", "X-Sink-Pattern"]
        #expect(echoed(sink.ours.heads, fields) == ["X-Sink-Length: 2000000", "X-Sink-Pattern: ok"])
        #expect(echoed(sink.ours.heads, fields) == echoed(sink.curl.heads, fields))
        let echo = try await Self.both(["-T", file], server.baseURL + "/echo", t)
        #expect(
            echoed(echo.ours.heads, ["X-Echo-Method", "X-Echo-H-Content-Length", "X-Echo-H-Transfer-Encoding"])
                == ["X-Echo-Method: PUT", "X-Echo-H-Content-Length: 2000000"]
        )
        #expect(firstDifference(echo.ours.body, try TempFiles.read(file)) == nil)
        // A directory URL: the upload goes to /NAME, which this server does not route (404 both).
        let w1 = try HawserBinary.run([
            "get", "-s", "-T", file, "-o", "/dev/null", "-w", "%{url_effective} %{http_code}", server.baseURL + "/",
        ])
        #expect(
            String(decoding: w1.stdout, as: UTF8.self) == server.baseURL + "/" + FormParts.lastPathComponent(file)
                + " 404"
        )
        // stdin: chunked, as curl sends it.
        let heads = t.path("h")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: HawserBinary.path)
        p.arguments = ["get", "-s", "-T", "-", "-D", heads, "-o", "/dev/null", server.baseURL + "/echo"]
        p.standardInput = FileHandle(forReadingAtPath: file)
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(
            echoed(try TempFiles.read(heads), ["X-Echo-H-Transfer-Encoding", "X-Echo-Body-Length"])
                == ["X-Echo-Body-Length: 2000000", "X-Echo-H-Transfer-Encoding: chunked"]
        )
    }
}
