import Foundation
import HawserCore
import HawserTestServer
import Testing

@testable import HawserTool

/// Real loads on loopback against the project's test server: what the report counts is what the
/// server saw.
@Suite("hawser load: the report's counts equal the server's", .serialized)
struct LoadCountsTests {
    static let targets = ["/hello": 200, "/status/404": 404, "/status/503": 503]

    func load(_ server: TestServer, _ t: TempFiles, _ lines: String, _ flags: [String]) throws -> LoadReport {
        let path = t.path("requests.txt")
        try Data(lines.utf8).write(to: URL(fileURLWithPath: path))
        let o = try LoadOptions.parse(flags + ["--requests", path, "-q", "http://127.0.0.1:\(server.port)/"])
        return try LoadCommand.measure(o)
    }

    @Test(
        "-n 500 -c 4, three targets: requests and status counts as the server counted them",
        arguments: [
            ["--engine", "raw"], ["--engine", "session"],
            ["--engine", "session", "--api", "async", "--executor", "default"],
            ["--engine", "session", "--api", "async", "--executor", "loop"],
            ["--engine", "session", "--api", "async", "--executor", "loop", "-t", "2"],
        ]
    )
    func counts(engine: [String]) throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let report = try self.load(
            server,
            t,
            "GET /hello\nGET /status/404\nGET /status/503\nGET /hello\n",
            ["-n", "500", "-c", "4"] + engine
        )
        #expect(report.requests == 500)
        #expect(report.errorCount == 0)
        var seen = 0
        for (target, status) in Self.targets {
            let n = server.requestCount(target: target)
            seen += n
            #expect(report.status[status] == UInt64(n), "\(target): report \(report.status[status] ?? 0), server \(n)")
        }
        #expect(seen == 500)
        #expect(report.corrected.totalCount == 500 && report.uncorrected.totalCount == 500)
        #expect(report.timeline.reduce(0) { $0 + $1.requests } == 500)
        // 200 responses carry "Hello, World!": at least that many body bytes were read.
        #expect(report.bytesRead >= UInt64(server.requestCount(target: "/hello") * 13))
    }

    @Test("a server that resets: every reset the server made is a reset error, every answer a response")
    func resets() throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let report = try self.load(
            server,
            t,
            "GET /hello\nGET /fault/reset\n",
            ["-n", "200", "-c", "2", "--engine", "raw"]
        )
        let resets = server.requestCount(target: "/fault/reset")
        let hellos = server.requestCount(target: "/hello")
        #expect(resets == 100 && hellos == 100)
        #expect(report.requests == UInt64(hellos))
        #expect(report.status == [200: UInt64(hellos)])
        #expect(report.errors[.reset]?.count == UInt64(resets))
        #expect(report.errorCount == UInt64(resets))
        #expect(report.errors[.reset]?.firstMessage.isEmpty == false)
    }

    @Test("a refused connection counts as a connect error and the run still ends")
    func refused() throws {
        // A port nothing listens on: bind one, read its number, close it.
        let server = try TestServer()
        let port = server.port
        server.shutdown()
        let o = try LoadOptions.parse(["-n", "3", "-c", "1", "-q", "http://127.0.0.1:\(port)/"])
        let report = try LoadCommand.measure(o)
        #expect(report.requests == 0)
        #expect(report.errors[.connect]?.count == 3)
        #expect(report.errors[.connect]?.firstMessage.contains("refused") == true)
    }
}
