import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

/// nginx on loopback, started by the test with a generated configuration on a free port and
/// stopped by its pid afterwards. `.ci/run` installs nginx; a missing nginx is a failure.
final class NginxFixture: @unchecked Sendable {
    let port: Int
    /// The https port (the test PKI's valid localhost certificate with its intermediate).
    let tlsPort: Int
    let directory: URL
    private let pid: pid_t

    static let binary = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    init() throws {
        guard let binary = Self.binary else {
            throw FixtureError("nginx is not installed (run .ci/run, or apt-get install nginx-light)")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("html"), withIntermediateDirectories: true)
        self.directory = dir
        // 8 MiB static file of a known pattern.
        let big = Data((0..<(8 * 1024 * 1024)).map { UInt8($0 % 251) })
        try big.write(to: dir.appendingPathComponent("html/big.bin"))
        try Data("Hello, World!".utf8).write(to: dir.appendingPathComponent("html/hello.txt"))
        try Data(String(repeating: "nginx compresses this line. ", count: 4000).utf8).write(to: dir.appendingPathComponent("html/big-gzip.txt"))
        try Data("fresh for a minute".utf8).write(to: dir.appendingPathComponent("html/fresh.txt"))
        try Data("always revalidated".utf8).write(to: dir.appendingPathComponent("html/stale.txt"))
        let port = try Self.freePort()
        self.port = port
        let tlsPort = try Self.freePort()
        self.tlsPort = tlsPort
        let pki = try TestPKI.shared()
        let config = """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(dir.path)/nginx.pid;
        error_log \(dir.path)/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            client_body_temp_path \(dir.path)/body;
            proxy_temp_path \(dir.path)/proxy;
            fastcgi_temp_path \(dir.path)/fastcgi;
            uwsgi_temp_path \(dir.path)/uwsgi;
            scgi_temp_path \(dir.path)/scgi;
            keepalive_requests 100000;
            keepalive_timeout 60s;
            server {
                listen 127.0.0.1:\(port);
                root \(dir.path)/html;
                location = /hello { default_type text/plain; return 200 "Hello, World!"; }
                location = /json { default_type application/json; return 200 '{"ok":true}'; }
                location = /close { keepalive_timeout 0; default_type text/plain; return 200 "bye"; }
                # HTTP completeness: compression, redirects, caching headers (static files carry
                # ETag and Last-Modified, and nginx answers If-None-Match with 304).
                location = /moved { return 301 /hello; }
                location = /found-post { return 307 /echo-method; }
                location = /echo-method { default_type text/plain; return 200 "$request_method $content_length"; }
                location = /big-gzip.txt { gzip on; gzip_min_length 1; gzip_types text/plain; default_type text/plain; }
                location = /fresh.txt { add_header Cache-Control "max-age=60"; default_type text/plain; }
                location = /stale.txt { add_header Cache-Control "max-age=0"; default_type text/plain; }
            }
            server {
                listen 127.0.0.1:\(tlsPort) ssl;
                ssl_certificate \(pki.valid.chainPath);
                ssl_certificate_key \(pki.valid.keyPath);
                ssl_protocols TLSv1.2 TLSv1.3;
                ssl_session_cache shared:hawser:1m;
                ssl_session_tickets on;
                root \(dir.path)/html;
                location = /hello { default_type text/plain; return 200 "Hello, World!"; }
                location = /close { keepalive_timeout 0; default_type text/plain; return 200 "bye"; }
            }
        }
        """
        let confURL = dir.appendingPathComponent("nginx.conf")
        try config.write(to: confURL, atomically: true, encoding: .utf8)
        // posix_spawn + waitpid: Foundation's Process.waitUntilExit spins a run loop and can
        // stall on a cooperative thread.
        self.pid = try ChildProcess.spawn(binary, ["-c", confURL.path, "-p", dir.path, "-e", dir.appendingPathComponent("error.log").path])
        // Ready when the port accepts (bounded: 10 s).
        let deadline = Date().addingTimeInterval(10)
        while !Self.canConnect(port) {
            if !self.isRunning || Date() > deadline {
                let log = (try? String(contentsOf: dir.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
                self.stop()
                throw FixtureError("nginx did not start on port \(port): \(log)")
            }
            usleep(10_000)
        }
    }

    var baseURL: String { "http://127.0.0.1:\(self.port)" }

    private var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(self.pid, &status, WNOHANG) == 0
    }

    private var reaped = false

    func stop() {
        if !self.reaped {
            kill(self.pid, SIGKILL)   // our own child, by pid; nothing in it needs a graceful stop
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) < 0 && errno == EINTR {}
            self.reaped = true
        }
        try? FileManager.default.removeItem(at: self.directory)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: sin.sin_port))
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        sin.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { self.description = d }
}

extension NetworkTests {
    @Suite("Session against nginx", .serialized)
    struct NginxTests {
        static func withNginx(_ configure: (inout SessionConfiguration) -> Void = { _ in },
                              _ body: (NginxFixture, Session) async throws -> Void) async throws {
            let nginx = try NginxFixture()
            defer { nginx.stop() }
            try await expectNoFDLeak("talking to nginx") {
                var config = SessionConfiguration()
                configure(&config)
                let loop = try EventLoop()
                let session = Session(configuration: config, eventLoop: loop)
                defer { session.shutdown(); loop.shutdown() }
                try await body(nginx, session)
            }
        }

        @Test("1000 sequential GETs reuse a single keep-alive connection")
        func keepAlive() async throws {
            try await Self.withNginx { nginx, session in
                var fresh = 0
                for _ in 0..<1000 {
                    let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/hello")))
                    #expect(r.status == 200)
                    if !r.metrics.isReusedConnection { fresh += 1 }
                }
                #expect(fresh == 1)
                #expect(session.poolStatistics().openConnections == 1)
            }
        }

        @Test("HTTPS to nginx: keep-alive reuse, an 8 MiB file intact, resumption on a new connection, and the trust decision")
        func https() async throws {
            let pki = try TestPKI.shared()
            try await Self.withNginx({ $0.serverTrustEvaluator = DefaultTrustEvaluator(anchors: .custom([pki.root])) }) { nginx, session in
                let base = "https://localhost:\(nginx.tlsPort)"
                var fresh = 0
                for _ in 0..<200 {
                    let r = try await session.response(for: HTTPClientRequest(url: url(base + "/hello")))
                    #expect(r.status == 200)
                    if !r.metrics.isReusedConnection { fresh += 1 }
                }
                #expect(fresh == 1)
                let big = try await session.response(for: HTTPClientRequest(url: url(base + "/big.bin")))
                #expect(big.body.count == 8 * 1024 * 1024 && big.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
                let first = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                let second = try await session.response(for: HTTPClientRequest(url: url(base + "/close")))
                #expect(!second.metrics.isReusedConnection)
                #expect(second.metrics.isResumedTLSSession == true, "nginx resumed the session (first: \(String(describing: first.metrics.isResumedTLSSession)))")
                #expect(first.metrics.tlsProtocolVersion == "TLSv1.3")
            }
            try await Self.withNginx { nginx, session in
                do {
                    _ = try await session.response(for: HTTPClientRequest(url: url("https://localhost:\(nginx.tlsPort)/hello")))
                    Issue.record("the system store trusted the test PKI")
                } catch let error as HawserError {
                    #expect(error.code == .serverCertificateUntrusted)
                }
            }
        }

        @Test("nginx configured for gzip, redirects and caching: decoded, followed, cached and revalidated")
        func httpCompleteness() async throws {
            try await Self.withNginx({ $0.urlCache = HTTPCache(memoryCapacity: 4 << 20) }) { nginx, session in
                let gz = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/big-gzip.txt")))
                #expect(gz.headers["Content-Encoding"] == "gzip")
                #expect(String(decoding: gz.body, as: UTF8.self) == String(repeating: "nginx compresses this line. ", count: 4000))
                #expect(gz.metrics.bytesReceived < 10_000, "the wire carried the compressed body")

                let moved = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/moved")))
                #expect(moved.status == 200 && moved.metrics.redirectCount == 1)
                let post = try await session.response(for: HTTPClientRequest(method: .post, url: url(nginx.baseURL + "/found-post"), body: .bytes([1, 2, 3])))
                #expect(String(decoding: post.body, as: UTF8.self) == "POST 3", "307 kept the method and the body")

                _ = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/fresh.txt")))
                let fresh = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/fresh.txt")))
                #expect(fresh.metrics.cacheUse == .fresh)
                #expect(String(decoding: fresh.body, as: UTF8.self) == "fresh for a minute")
                _ = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/stale.txt")))
                let revalidated = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/stale.txt")))
                #expect(revalidated.metrics.cacheUse == .validated, "nginx answered If-None-Match with 304")
                #expect(String(decoding: revalidated.body, as: UTF8.self) == "always revalidated")
            }
        }

        @Test("an 8 MiB static file arrives intact")
        func largeFile() async throws {
            try await Self.withNginx { nginx, session in
                let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/big.bin")))
                #expect(r.status == 200)
                #expect(r.body.count == 8 * 1024 * 1024)
                #expect(r.body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
            }
        }

        @Test("500 concurrent requests complete, each exactly once, within the connection limit")
        func manyConcurrent() async throws {
            try await Self.withNginx({ $0.maximumConnectionsPerHost = 16 }) { nginx, session in
                let bodies = try await withThrowingTaskGroup(of: String.self) { g in
                    for i in 0..<500 {
                        let path = i % 2 == 0 ? "/hello" : "/json"
                        g.addTask {
                            let r = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + path)))
                            return String(decoding: r.body, as: UTF8.self)
                        }
                    }
                    var out: [String] = []
                    for try await b in g { out.append(b) }
                    return out
                }
                #expect(bodies.count == 500)
                #expect(bodies.filter { $0 == "Hello, World!" }.count == 250)
                #expect(bodies.filter { $0 == #"{"ok":true}"# }.count == 250)
                #expect(session.poolStatistics().openConnections <= 16)
            }
        }

        @Test("HEAD and 404 keep the connection usable; keepalive_timeout 0 closes it")
        func connectionManagement() async throws {
            try await Self.withNginx { nginx, session in
                let head = try await session.response(for: HTTPClientRequest(method: .head, url: url(nginx.baseURL + "/big.bin")))
                #expect(head.status == 200 && head.body.isEmpty && head.headers["Content-Length"] == String(8 * 1024 * 1024))
                let missing = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/nope")))
                #expect(missing.status == 404 && missing.metrics.isReusedConnection)
                let close = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/close")))
                #expect(close.headers.contains(name: "Connection", token: "close"))
                let after = try await session.response(for: HTTPClientRequest(url: url(nginx.baseURL + "/hello")))
                #expect(after.metrics.isReusedConnection == false)
            }
        }

        @Test("POST to a static location gets nginx's 405 and the body is drained")
        func postToStatic() async throws {
            try await Self.withNginx { nginx, session in
                let r = try await session.response(for: HTTPClientRequest(method: .post, url: url(nginx.baseURL + "/hello.txt"),
                                                                          body: .bytes(Array(repeating: 1, count: 1000))))
                #expect(r.status == 405)
            }
        }
    }
}
