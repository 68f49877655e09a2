import HawserCore
import HawserTestServer

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

        func step(
            _ title: String,
            _ path: String,
            method: HTTPMethod = .get,
            body: [UInt8]? = nil,
            headers: HTTPHeaders = [:],
            timeout: Double? = nil,
            expectFailure: Bool = false,
            show: (HTTPClientResponse) -> String = { _ in "" }
        ) async {
            var request = HTTPClientRequest(method: method, url: URL(string: base + path)!, headers: headers)
            if let body { request.body = .bytes(body) }
            request.timeoutInterval = timeout
            say("── \(title)\n   \(method) \(path)\n")
            do {
                let r = try await session.response(for: request)
                let m = r.metrics
                say(
                    "   \(r.head.version) \(r.status) \(r.head.reasonPhrase) · \(r.body.count) body bytes · \(r.headers.count) header fields\n"
                )
                say(
                    "   connection \(m.isReusedConnection ? "reused" : "new") to \(m.remoteAddress?.description ?? "?")"
                )
                if let c = TaskMetrics.span(m.connectStart, m.connectEnd) { say(" · connect \(ms(c))") }
                if let t = TaskMetrics.span(m.fetchStart, m.responseStart) { say(" · first byte \(ms(t))") }
                if let t = TaskMetrics.span(m.fetchStart, m.responseEnd) { say(" · total \(ms(t))") }
                say("\n")
                let extra = show(r)
                if !extra.isEmpty { say("   \(extra)\n") }
                if expectFailure {
                    failures += 1
                    say("   ✗ expected a failure\n")
                }
            } catch {
                say("   → \(error.code): \(error.message)\n")
                if !expectFailure { failures += 1 }
            }
        }

        await step("A first GET on a fresh connection", "/hello") {
            "body: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step("The same origin again: the kept-alive connection is reused", "/hello")
        await step("JSON", "/json") { "content-type: \($0.headers["Content-Type"] ?? "-")" }
        await step("1 MiB with Content-Length", "/bytes/1048576") { r in
            let ok = r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) }
            return "body verified byte for byte: \(ok)"
        }
        await step("100 KB chunked in 4 KiB chunks", "/bytes/100000?chunk=4096") {
            "transfer-encoding: \($0.headers["Transfer-Encoding"] ?? "-")"
        }
        await step(
            "POST with a body, echoed back",
            "/echo",
            method: .post,
            body: Array("name=hawser&answer=42".utf8),
            headers: ["Content-Type": "application/x-www-form-urlencoded"]
        ) {
            "server saw \($0.headers["X-Echo-Method"] ?? "?") with \($0.headers["X-Echo-Body-Length"] ?? "?") bytes: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step("Interim 100 and 103 heads, then the final response", "/interim") {
            "final body: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step(
            "Three redirects, followed (the engine drains each redirect's body and reuses the connection)",
            "/redirect/3"
        ) {
            "landed on \(String(decoding: $0.body, as: UTF8.self)) after \($0.metrics.redirectCount) redirects"
        }
        await step("A gzip body, decoded as it arrives (Accept-Encoding: gzip, deflate)", "/gzip") {
            "content-encoding: \($0.headers["Content-Encoding"] ?? "-"), decoded: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step("Set-Cookie goes into the session's cookie jar", "/cookies/set?flavour=oatmeal")
        await step("… and comes back on the next request", "/cookies") {
            "the server saw Cookie: \(String(decoding: $0.body, as: UTF8.self))"
        }
        await step("A 404 is a response, not an error", "/status/404")
        await step("A close-delimited body (no Content-Length)", "/close-delimited/5000")
        await step(
            "Idle timeout: the server waits 2 s, the request allows 0.2 s",
            "/delay/2000",
            timeout: 0.2,
            expectFailure: true
        )
        await step("The server closes in the middle of the body", "/fault/close-mid-body", expectFailure: true)
        await step("The server answers with garbage", "/fault/garbage", expectFailure: true)

        say("── 32 concurrent GETs (the pool opens at most 6 connections per origin)\n")
        let before = server.acceptedConnections
        let start = TaskMetrics.now()
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    (try? await session.response(for: HTTPClientRequest(url: URL(string: base + "/hello")!)))?.status
                        ?? 0
                }
            }
            var s: [Int] = []
            for await x in group { s.append(x) }
            return s
        }
        let elapsed = TaskMetrics.now() - start
        let ok = statuses.filter { $0 == 200 }.count
        say(
            "   \(ok)/32 answered 200 in \(ms(elapsed)); new connections opened: \(server.acceptedConnections - before); pool: \(session.poolStatistics().openConnections) open\n"
        )
        if ok != 32 { failures += 1 }

        failures += await Self.httpsTour()

        say(
            "\n\(failures == 0 ? "Tour complete: every step behaved as expected." : "Tour finished with \(failures) unexpected result(s).")\n"
        )
        return failures == 0 ? 0 : 1
    }

    /// HTTPS against the embedded server with a certificate from a PKI made for this run: pinned
    /// and trusted, resumed on a second connection, and refused by the default policy.
    static func httpsTour() async -> Int {
        var failures = 0
        say("── HTTPS: a test PKI is generated for this run; the embedded server presents its localhost certificate\n")
        let pki: TestPKI
        let server: TestServer
        do {
            pki = try TestPKI.shared()
            server = try TestServer(
                host: "127.0.0.1",
                tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
            )
        } catch {
            say("   cannot start the TLS server: \(error)\n")
            return 1
        }
        defer { server.shutdown() }
        let u = URL(string: "https://localhost:\(server.port)/close")!
        var config = SessionConfiguration()
        // AFSecurityPolicy's certificate pinning of a private CA: as in AFNetworking, the chain
        // cannot pass the system store first, so allowInvalidCertificates lets the pinned root
        // alone decide (the chain must still validate against it, and the host name must match).
        var policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pki.root])
        policy.allowInvalidCertificates = true
        config.serverTrustEvaluator = policy
        let pinned = Session(configuration: config)
        defer { pinned.shutdown() }
        for round in 1...2 {
            do {
                let r = try await pinned.response(for: HTTPClientRequest(url: u))
                let m = r.metrics
                let handshake = TaskMetrics.span(m.secureConnectionStart, m.secureConnectionEnd).map(ms) ?? "-"
                say(
                    "   \(round == 1 ? "pinned to the test root" : "second connection  ") → \(r.status) over \(m.tlsProtocolVersion ?? "?") \(m.tlsCipherSuite ?? "")"
                )
                say(" · handshake \(handshake) · session \(m.isResumedTLSSession == true ? "resumed" : "full")\n")
                if round == 2 && m.isResumedTLSSession != true {
                    failures += 1
                    say("   ✗ expected a resumed session\n")
                }
            } catch {
                say("   → \(error.code): \(error.message)\n")
                failures += 1
            }
        }
        let plain = Session()
        defer { plain.shutdown() }
        do {
            _ = try await plain.response(for: HTTPClientRequest(url: u))
            say("   ✗ the system trust store accepted a test certificate\n")
            failures += 1
        } catch {
            say(
                "   the default policy (system trust store) refuses it: \(error.code) (\(error.urlErrorCode)): \(error.message)\n"
            )
        }
        return failures
    }

    static func say(_ s: String) { OutputFile.stdout.write(s) }

    static func ms(_ ns: UInt64) -> String {
        let v = Double(ns) / 1e6
        return v < 10 ? String(format2: v) + " ms" : "\(Int(v.rounded())) ms"
    }
}
