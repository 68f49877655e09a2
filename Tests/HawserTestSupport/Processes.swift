// Servers the tests start as child processes on free loopback ports, with generated
// configurations, stopped by the pid (or process group) they started.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// nginx on loopback, started by the test with a generated configuration on a free port and
/// stopped by its pid afterwards. `.ci/run` installs nginx; a missing nginx is a failure.
public final class NginxFixture: @unchecked Sendable {
    let port: Int
    /// The https port (the test PKI's valid localhost certificate with its intermediate).
    public let tlsPort: Int
    let directory: URL
    private let pid: pid_t

    static let binary = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    public init() throws {
        guard let binary = Self.binary else {
            throw FixtureError("nginx is not installed (run .ci/run, or apt-get install nginx-light)")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("html"),
            withIntermediateDirectories: true
        )
        self.directory = dir
        // 8 MiB static file of a known pattern.
        let big = Data((0..<(8 * 1024 * 1024)).map { UInt8($0 % 251) })
        try big.write(to: dir.appendingPathComponent("html/big.bin"))
        try Data("Hello, World!".utf8).write(to: dir.appendingPathComponent("html/hello.txt"))
        try Data(String(repeating: "nginx compresses this line. ", count: 4000).utf8).write(
            to: dir.appendingPathComponent("html/big-gzip.txt")
        )
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
        self.pid = try ChildProcess.spawn(
            binary,
            ["-c", confURL.path, "-p", dir.path, "-e", dir.appendingPathComponent("error.log").path]
        )
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

    public var baseURL: String { "http://127.0.0.1:\(self.port)" }

    private var isRunning: Bool {
        var status: Int32 = 0
        return waitpid(self.pid, &status, WNOHANG) == 0
    }

    private var reaped = false

    public func stop() {
        if !self.reaped {
            kill(self.pid, SIGKILL)  // our own child, by pid; nothing in it needs a graceful stop
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) < 0 && errno == EINTR {}
            self.reaped = true
        }
        try? FileManager.default.removeItem(at: self.directory)
    }

    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return Int(UInt16(bigEndian: sin.sin_port))
    }

    static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        sin.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { self.description = d }
}

/// A proxy server process on a free loopback port with a generated configuration in a temp directory.
public class SpawnedProxyFixture: @unchecked Sendable {
    public let port: Int
    let directory: URL
    private let pid: pid_t
    private var reaped = false
    private let name: String
    private let logName: String

    init(
        name: String,
        binaryCandidates: [String],
        installHint: String,
        logName: String,
        config: (_ port: Int, _ directory: URL) -> (file: String, text: String),
        arguments: (_ configPath: String) -> [String]
    ) throws {
        guard let binary = binaryCandidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw FixtureError("\(name) is not installed (\(installHint))")
        }
        self.name = name
        self.logName = logName
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        self.directory = dir
        let port = try NginxFixture.freePort()
        self.port = port
        let (file, text) = config(port, dir)
        let configPath = dir.appendingPathComponent(file).path
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
        self.pid = try ChildProcess.spawn(binary, arguments(configPath), ownGroup: true)
        let deadline = Date().addingTimeInterval(10)
        while !NginxFixture.canConnect(port) {
            if !self.isRunning || Date() > deadline {
                let log = self.log
                self.stop()
                throw FixtureError("\(name) did not start on port \(port): \(log)")
            }
            usleep(10_000)
        }
    }

    deinit { self.stop() }

    /// The proxy's log so far (for failure messages).
    public var log: String {
        (try? String(contentsOf: self.directory.appendingPathComponent(self.logName), encoding: .utf8)) ?? "(no log)"
    }

    private var isRunning: Bool {
        guard !self.reaped else { return false }
        var status: Int32 = 0
        return waitpid(self.pid, &status, WNOHANG) == 0
    }

    /// Stops the process group we started (by its leader's pid) and removes the directory. Idempotent.
    public func stop() {
        if !self.reaped {
            kill(-self.pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) < 0 && errno == EINTR {}
            self.reaped = true
        }
        try? FileManager.default.removeItem(at: self.directory)
    }
}

/// tinyproxy on 127.0.0.1: forwards http requests and opens CONNECT tunnels to any port.
/// With `credentials`, every request needs `Proxy-Authorization: Basic` (407 otherwise).
public final class TinyproxyFixture: SpawnedProxyFixture, @unchecked Sendable {
    let credentials: ProxyCredentials?

    public init(credentials: ProxyCredentials? = nil) throws {
        self.credentials = credentials
        try super.init(
            name: "tinyproxy",
            binaryCandidates: ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy", "/usr/local/bin/tinyproxy"],
            installHint: "apt-get install -y tinyproxy",
            logName: "tinyproxy.log",
            config: { port, dir in
                // No ConnectPort line: CONNECT is allowed to every port. No User/Group: it stays
                // the test's user. -d keeps it in the foreground (no daemonizing).
                var text = """
                    Port \(port)
                    Listen 127.0.0.1
                    Timeout 30
                    LogFile "\(dir.path)/tinyproxy.log"
                    LogLevel Info
                    MaxClients 64
                    Allow 127.0.0.1
                    DisableViaHeader Yes

                    """
                if let c = credentials { text += "BasicAuth \(c.user) \(c.password)\n" }
                return ("tinyproxy.conf", text)
            },
            arguments: { ["-d", "-c", $0] }
        )
    }

    /// `http://[user:password@]127.0.0.1:port` (for curl -x or the environment).
    public var url: String {
        if let c = self.credentials { return "http://\(c.user):\(c.password)@127.0.0.1:\(self.port)" }
        return "http://127.0.0.1:\(self.port)"
    }
}

/// Dante's SOCKS5 server (sockd) on 127.0.0.1, no authentication, CONNECT to anywhere from
/// loopback clients, outgoing connections from 127.0.0.1.
public final class DanteFixture: SpawnedProxyFixture, @unchecked Sendable {
    public init() throws {
        try super.init(
            name: "dante",
            binaryCandidates: ["/usr/sbin/danted", "/usr/sbin/sockd", "/usr/local/sbin/sockd"],
            installHint: "apt-get install -y dante-server",
            logName: "danted.log",
            config: { port, dir in
                let text = """
                    logoutput: \(dir.path)/danted.log
                    internal: 127.0.0.1 port = \(port)
                    external: 127.0.0.1
                    socksmethod: none
                    clientmethod: none
                    user.privileged: root
                    user.unprivileged: nobody
                    client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
                    socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 command: connect }

                    """
                return ("danted.conf", text)
            },
            // Without -D it stays in the foreground; one process is enough.
            arguments: { ["-f", $0, "-N", "1"] }
        )
    }
}

/// A local httpbin (Debian's python3-httpbin on Werkzeug), on a free loopback port.
public final class HttpbinFixture: SpawnedProxyFixture, @unchecked Sendable {
    public init() throws {
        try super.init(
            name: "httpbin",
            binaryCandidates: ["/usr/bin/python3"],
            installHint: "apt-get install -y python3-httpbin",
            logName: "httpbin.log",
            config: { port, _ in
                (
                    "httpbin_server.py",
                    """
                    import logging
                    logging.getLogger("werkzeug").setLevel(logging.ERROR)
                    from werkzeug.serving import make_server
                    from httpbin import app
                    make_server("127.0.0.1", \(port), app, threaded=True).serve_forever()
                    """
                )
            },
            arguments: { [$0] }
        )
    }

    public var baseURL: String { "http://127.0.0.1:\(self.port)" }
}
