import Foundation
import HawserCore
import HawserTestServer
import Testing

extension NetworkTests {
    /// Content decoding in the request path, against the test server and scripted servers.
    @Suite("Content decoding on the wire", .serialized)
    struct DecodingNetworkTests {
        static func respond(_ encoding: String, _ body: [UInt8], chunked: Bool = false) -> [ScriptedServer.Step] {
            var head = "HTTP/1.1 200 OK\r\nContent-Encoding: \(encoding)\r\n"
            guard chunked else {
                head += "Content-Length: \(body.count)\r\n\r\n"
                return [.readRequest(), .send(Array(head.utf8) + body), .waitForClose]
            }
            head += "Transfer-Encoding: chunked\r\n\r\n"
            var wire = Array(head.utf8)
            var i = 0
            while i < body.count {
                let n = min(333, body.count - i)
                wire += Array((String(n, radix: 16) + "\r\n").utf8) + body[i..<(i + n)] + Array("\r\n".utf8)
                i += n
            }
            wire += Array("0\r\n\r\n".utf8)
            return [.readRequest(), .send(wire), .waitForClose]
        }

        static let text = Array(String(repeating: "Hawser decodes as bytes arrive. ", count: 2000).utf8)

        @Test("gzip from the test server is decoded; Accept-Encoding is sent")
        func testServerGzip() async throws {
            try await withServer { server, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/gzip")))
                #expect(r.headers["Content-Encoding"] == "gzip")
                #expect(String(decoding: r.body, as: UTF8.self).contains(#""gzipped":true"#))
                let echo = try await session.response(for: HTTPClientRequest(url: url(server.baseURL + "/echo")))
                #expect(echo.headers["X-Echo-H-Accept-Encoding"] == "gzip, deflate, br, zstd")
            }
        }

        @Test(
            "every coding, chunked or not, decodes to the original bytes",
            arguments: [
                ("gzip", false), ("gzip", true), ("x-gzip", false), ("deflate", false), ("deflate", true),
                ("deflate, gzip", true), ("br", false), ("br", true), ("zstd", false), ("zstd", true),
                ("gzip, br", true), ("br, zstd", false),
            ]
        )
        func codings(encoding: String, chunked: Bool) async throws {
            let encoded: [UInt8]
            switch encoding {
            case "deflate": encoded = chunked ? rawDeflate(Self.text) : zlibDeflate(Self.text)  // servers send either
            case "deflate, gzip": encoded = gzip(zlibDeflate(Self.text))
            case "br": encoded = brotli(Self.text)
            case "zstd": encoded = zstd(Self.text)
            case "gzip, br": encoded = brotli(gzip(Self.text))
            case "br, zstd": encoded = zstd(brotli(Self.text))
            default: encoded = gzip(Self.text)
            }
            try await FaultTests.withSession { session in
                let server = try ScriptedServer([Self.respond(encoding, encoded, chunked: chunked)])
                defer { server.stop() }
                let rec = await FaultTests.run(session, HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/")))
                #expect(rec.completions == 1)
                #expect(rec.body == Self.text)
                #expect(
                    rec.metrics.map { $0.bytesReceived < Int64(Self.text.count) } == true,
                    "metrics count the (smaller) wire bytes"
                )
            }
        }

        @Test("a decompression bomb fails with cannotDecodeContent, not memory", arguments: ["gzip", "br", "zstd"])
        func bomb(coding: String) async throws {
            let zeros = [UInt8](repeating: 0, count: 64 * 1024 * 1024)
            // ~64 KiB on the wire for gzip; a few hundred bytes for br and zstd.
            let encoded = coding == "br" ? brotli(zeros) : coding == "zstd" ? zstd(zeros) : gzip(zeros)
            try await FaultTests.withSession({
                $0.decodingLimits = DecodingLimits(
                    maxDecodedBytes: 1 << 30,
                    maxExpansionRatio: 100,
                    ratioCheckFloor: 1 << 20
                )
            }) { session in
                let server = try ScriptedServer([Self.respond(coding, encoded)])
                defer { server.stop() }
                let rec = await FaultTests.run(session, HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/")))
                #expect(rec.completions == 1)
                let e = try #require(FaultTests.error(rec))
                #expect(e.code == .cannotDecodeContent)
                #expect(e.underlying as? DecodingLimitError == .maxExpansionRatio)
                #expect(rec.body.count < 4 * 1024 * 1024, "decoding stopped near the bound")
            }
        }

        @Test(
            "corrupt and truncated coded bodies fail clearly",
            arguments: [
                ("corrupt", "deflate"), ("truncated", "gzip"), ("corrupt", "br"), ("truncated", "br"),
                ("corrupt", "zstd"), ("truncated", "zstd"),
            ]
        )
        func corrupt(kind: String, coding: String) async throws {
            let good = coding == "br" ? brotli(Self.text) : coding == "zstd" ? zstd(Self.text) : gzip(Self.text)
            let garbage = [UInt8](repeating: 0xFF, count: 200)
            // br and zstd: garbage after the stream (inside it, brotli and zstd wait for the rest
            // of a block, and the body ends truncated).
            let body =
                kind == "truncated"
                ? Array(good.prefix(good.count / 2))
                : coding == "br" || coding == "zstd" ? good + garbage : Array(good.prefix(20)) + garbage
            try await FaultTests.withSession { session in
                let server = try ScriptedServer([Self.respond(coding, body, chunked: coding != "gzip")])
                defer { server.stop() }
                let rec = await FaultTests.run(session, HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/")))
                #expect(rec.completions == 1)
                let e = try #require(FaultTests.error(rec))
                #expect(e.code == .cannotDecodeContent)
                #expect(
                    e.message.hasPrefix("\(coding): \(kind == "corrupt" ? "corrupt data" : "truncated stream")"),
                    "\(e)"
                )
            }
        }

        @Test("an unknown coding passes through; decoding can be turned off")
        func passThrough() async throws {
            let encoded = gzip(Self.text)
            try await FaultTests.withSession { session in
                let server = try ScriptedServer([Self.respond("compress", encoded)])
                defer { server.stop() }
                let rec = await FaultTests.run(session, HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/")))
                #expect(rec.body == encoded)
            }
            try await FaultTests.withSession({ $0.automaticallyDecodesContent = false }) { session in
                let server = try ScriptedServer([Self.respond("gzip", encoded)])
                defer { server.stop() }
                let rec = await FaultTests.run(session, HTTPClientRequest(url: url("http://127.0.0.1:\(server.port)/")))
                #expect(rec.body == encoded)
                let sent = String(decoding: try #require(server.requests.first), as: UTF8.self)
                #expect(!sent.contains("Accept-Encoding"))
            }
        }
    }
}
