// hawser get side by side with curl: -O, --retry and its limits, --limit-rate.
import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@testable import HawserTool

extension CurlSideBySideTests {
    @Test("-O names the file after the URL's last path segment; a URL without one is curl's error 23")
    func remoteName() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let dir = t.path("dir")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let previous = FileManager.default.currentDirectoryPath
        #expect(FileManager.default.changeCurrentDirectoryPath(dir))
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        #expect(await GetCommand.run(["-s", "-O", server.baseURL + "/bytes/1000"]) == 0)
        #expect(try TempFiles.read(dir + "/1000") == (0..<1000).map { UInt8($0 % 251) })
        #expect(await GetCommand.run(["-s", "-O", server.baseURL + "/"]) == 23)
        #expect(try Curl.run(["-s", "-O", server.baseURL + "/"]) == 23)
    }

    @Test(
        "--retry: transient statuses are retried N times (the server counts), a retried -o file holds only the last body"
    )
    func retry() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let out = t.path("out")
        let target = "/flaky?fail=2&id=a"
        #expect(
            await GetCommand.run(["-s", "--retry", "3", "--retry-delay", "0", "-o", out, server.baseURL + target]) == 0
        )
        #expect(server.requestCount(target: target) == 3)
        #expect(try String(decoding: TempFiles.read(out), as: UTF8.self) == "ok after 2")
        // Fewer retries than failures: the last 503 is the result (22 with -f).
        let few = "/flaky?fail=5&id=b"
        #expect(
            await GetCommand.run(["-s", "-f", "--retry", "2", "--retry-delay", "0", "-o", out, server.baseURL + few])
                == 22
        )
        #expect(server.requestCount(target: few) == 3)
        // curl counts the same way.
        let curls = "/flaky?fail=5&id=c"
        #expect(
            try Curl.run(["-s", "-f", "--retry", "2", "--retry-delay", "0", "-o", out, server.baseURL + curls]) == 22
        )
        #expect(server.requestCount(target: curls) == 3)
        // Not transient: 404 is not retried.
        let notFound = "/flaky?fail=5&status=404&id=d"
        #expect(
            await GetCommand.run(["-s", "--retry", "3", "--retry-delay", "0", "-o", out, server.baseURL + notFound])
                == 0
        )
        #expect(server.requestCount(target: notFound) == 1)
        // Not idempotent: a POST is not retried.
        let post = "/flaky?fail=1&id=e"
        #expect(
            await GetCommand.run([
                "-s", "-d", "x", "--retry", "3", "--retry-delay", "0", "-o", out, server.baseURL + post,
            ]) == 0
        )
        #expect(server.requestCount(target: post) == 1)
        // A PUT is: the upload is sent again.
        let file = try t.file("put", Array("payload".utf8))
        let put = "/flaky?fail=1&id=f"
        #expect(
            await GetCommand.run([
                "-s", "-T", file, "--retry", "1", "--retry-delay", "0", "-o", out, server.baseURL + put,
            ]) == 0
        )
        #expect(server.requestCount(target: put) == 2)
    }

    @Test("--retry retries a timeout; --retry-max-time stops the retries once it has passed")
    func retryTimeoutAndMaxTime() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let slow = "/delay/3000?id=retry"
        #expect(
            await GetCommand.run([
                "-s", "--max-time", "0.2", "--retry", "2", "--retry-delay", "0", "-o", t.path("o"),
                server.baseURL + slow,
            ]) == 28
        )
        #expect(server.requestCount(target: slow) == 3)
        // The first retry waits for what is left of --retry-max-time (1 s of the 2 s delay); then
        // the time is up and no second retry is made, whatever --retry says.
        let capped = "/flaky?fail=5&id=max"
        #expect(
            await GetCommand.run([
                "-s", "--retry", "5", "--retry-delay", "2", "--retry-max-time", "1", "-o", t.path("o"),
                server.baseURL + capped,
            ]) == 0
        )
        #expect(server.requestCount(target: capped) == 2)
    }

    @Test("--retry-connrefused adds refused connections to what is retried; without it they are not")
    func retryConnectionRefused() async throws {
        let probe = try TestServer()
        let url = "http://127.0.0.1:\(probe.port)/"
        probe.shutdown()
        let with = try HawserBinary.run(["get", "--retry", "2", "--retry-delay", "0", "--retry-connrefused", url])
        #expect(with.status == 7)
        #expect(
            with.stderr.components(separatedBy: "Warning: Problem : connection refused. Will retry").count - 1 == 2,
            "\(with.stderr)"
        )
        let without = try HawserBinary.run(["get", "--retry", "2", "--retry-delay", "0", url])
        #expect(without.status == 7)
        #expect(!without.stderr.contains("Will retry"), "\(without.stderr)")
    }

    @Test("--limit-rate: the body arrives whole through pauses, downloads and uploads")
    func limitRate() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let out = t.path("out")
        #expect(
            await GetCommand.run(["-s", "--limit-rate", "2M", "-o", out, server.baseURL + "/stream/1000000?chunked=1"])
                == 0
        )
        #expect(firstDifference(try TempFiles.read(out), (0..<1_000_000).map { UInt8($0 % 251) }) == nil)
        let file = try t.file("up", (0..<300_000).map { UInt8($0 % 251) })
        let heads = t.path("h")
        #expect(
            await GetCommand.run([
                "-s", "--limit-rate", "1M", "-T", file, "-D", heads, "-o", out, server.baseURL + "/sink",
            ]) == 0
        )
        #expect(
            echoed(try TempFiles.read(heads), ["X-Sink-Length", "X-Sink-Pattern"]) == [
                "X-Sink-Length: 300000", "X-Sink-Pattern: ok",
            ]
        )
    }
}
