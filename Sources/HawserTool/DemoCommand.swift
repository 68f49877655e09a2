#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HawserCore
import HawserTestServer

/// `hawser demo`: a short tour of real requests through the engine against the embedded
/// test server on a free loopback port.
enum DemoCommand {
    static func run() async -> Int32 {
        let server: TestServer
        do {
            server = try TestServer()
        } catch {
            OutputFile.stderr.write("hawser demo: cannot start the test server: \(error)\n")
            return 1
        }
        defer { server.shutdown() }
        let session = Session()
        defer { session.shutdown() }
        let base = server.baseURL
        say("Hawser demo: embedded test server at \(base)\n")
        var failures = 0

        func step(_ title: String, _ path: String, method: HTTPMethod = .get, body: [UInt8]? = nil,
                  headers: HTTPHeaders = [:], timeout: Double? = nil, expectFailure: Bool = false,
                  show: (HTTPClientResponse) -> String = { _ in "" }) async {
            var request = HTTPClientRequest(method: method, url: URL(string: base + path)!, headers: headers)
            if let body { request.body = .bytes(body) }
            request.timeoutInterval = timeout
            say("── \(title)\n   \(method) \(path)\n")
            do {
                let r = try await session.response(for: request)
                let m = r.metrics
                say("   \(r.head.version) \(r.status) \(r.head.reasonPhrase) · \(r.body.count) body bytes · \(r.headers.count) header fields\n")
                say("   connection \(m.isReusedConnection ? "reused" : "new") to \(m.remoteAddress?.description ?? "?")")
                if let c = TaskMetrics.span(m.connectStart, m.connectEnd) { say(" · connect \(ms(c))") }
                if let t = TaskMetrics.span(m.fetchStart, m.responseStart) { say(" · first byte \(ms(t))") }
                if let t = TaskMetrics.span(m.fetchStart, m.responseEnd) { say(" · total \(ms(t))") }
                say("\n")
                let extra = show(r)
                if !extra.isEmpty { say("   \(extra)\n") }
                if expectFailure { failures += 1; say("   ✗ expected a failure\n") }
            } catch {
                say("   → \(error.code): \(error.message)\n")
                if !expectFailure { failures += 1 }
            }
        }

        await step("A first GET on a fresh connection", "/hello") { "body: \(String(decoding: $0.body, as: UTF8.self))" }
        await step("The same origin again: the kept-alive connection is reused", "/hello")
        await step("JSON", "/json") { "content-type: \($0.headers["Content-Type"] ?? "-")" }
        await step("1 MiB with Content-Length", "/bytes/1048576") { r in
            let ok = r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
            return "body verified byte for byte: \(ok)"
        }
        await step("100 KB chunked in 4 KiB chunks", "/bytes/100000?chunk=4096") { "transfer-encoding: \($0.headers["Transfer-Encoding"] ?? "-")" }
        await step("POST with a body, echoed back", "/echo", method: .post, body: Array("name=hawser&answer=42".utf8),
                   headers: ["Content-Type": "application/x-www-form-urlencoded"]) {
            "server saw \($0.headers["X-Echo-Method"] ?? "?") with \($0.headers["X-Echo-Body-Length"] ?? "?") bytes: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step("Interim 100 and 103 heads, then the final response", "/interim") { "final body: \(String(decoding: $0.body, as: UTF8.self))" }
        await step("A 404 is a response, not an error", "/status/404")
        await step("A close-delimited body (no Content-Length)", "/close-delimited/5000")
        await step("Idle timeout: the server waits 2 s, the request allows 0.2 s", "/delay/2000", timeout: 0.2, expectFailure: true)
        await step("The server closes in the middle of the body", "/fault/close-mid-body", expectFailure: true)
        await step("The server answers with garbage", "/fault/garbage", expectFailure: true)

        say("── 32 concurrent GETs (the pool opens at most 6 connections per origin)\n")
        let before = server.acceptedConnections
        let start = TaskMetrics.now()
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    (try? await session.response(for: HTTPClientRequest(url: URL(string: base + "/hello")!)))?.status ?? 0
                }
            }
            var s: [Int] = []
            for await x in group { s.append(x) }
            return s
        }
        let elapsed = TaskMetrics.now() - start
        let ok = statuses.filter { $0 == 200 }.count
        say("   \(ok)/32 answered 200 in \(ms(elapsed)); new connections opened: \(server.acceptedConnections - before); pool: \(session.poolStatistics().openConnections) open\n")
        if ok != 32 { failures += 1 }

        say("\n\(failures == 0 ? "Tour complete: every step behaved as expected." : "Tour finished with \(failures) unexpected result(s).")\n")
        return failures == 0 ? 0 : 1
    }

    static func say(_ s: String) { OutputFile.stdout.write(s) }

    static func ms(_ ns: UInt64) -> String {
        let v = Double(ns) / 1e6
        return v < 10 ? String(format2: v) + " ms" : "\(Int(v.rounded())) ms"
    }
}
