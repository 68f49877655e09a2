// Proxies for integration tests, on loopback, started and stopped by the test:
//   TinyproxyFixture       tinyproxy (HTTP forward proxy and CONNECT), optionally with Basic auth
//   DanteFixture           Dante's sockd (SOCKS5, no authentication)
//   ScriptedSOCKS5Server   a SOCKS5 server in Swift (threads, blocking sockets) with optional
//                          username/password, a forced reply code, and a record of what it was asked
// Processes are spawned like NginxFixture's (posix_spawn, empty signal mask) and stopped by pid
// (SIGKILL + waitpid). `.ci/run` must `apt-get install -y tinyproxy dante-server curl`.
import CHawser
import Foundation
import HawserCore
import HawserTestServer
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A SOCKS5 server written for tests: threads and blocking sockets on 127.0.0.1.
///
/// - `credentials`: require username/password (RFC 1929); otherwise only "no authentication".
/// - `forcedReply`: answer every CONNECT with this reply code instead of connecting.
/// - `requests`: what each client asked for (address type and host), for asserting remote DNS.
/// `stop()` closes every socket and joins every thread.
final class ScriptedSOCKS5Server: @unchecked Sendable {
    struct Request: Sendable, Equatable {
        /// 1 IPv4, 3 domain name, 4 IPv6.
        var addressType: UInt8
        var host: String
        var port: Int
        var user: String?
    }

    let port: Int
    let credentials: ProxyCredentials?
    let forcedReply: UInt8?
    private let listenFD: Int32
    private let stopFD: Int32
    private let state = Mutex<(requests: [Request], authFailures: Int, threads: [pthread_t])>(([], 0, []))

    init(credentials: ProxyCredentials? = nil, forcedReply: UInt8? = nil) throws {
        self.credentials = credentials
        self.forcedReply = forcedReply
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("socket: \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw FixtureError("bind/listen failed: \(errno)")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.port = Int(UInt16(bigEndian: sin.sin_port))
        self.listenFD = fd
        self.stopFD = CHawser_eventfd()
        self.spawn { $0.acceptLoop() }
    }

    deinit { self.stop() }

    var requests: [Request] { self.state.withLock { $0.requests } }
    var authenticationFailures: Int { self.state.withLock { $0.authFailures } }

    private var stopped = false

    /// Wakes every thread, joins them, closes every socket. Idempotent; not from a server thread.
    func stop() {
        guard !self.stopped else { return }
        self.stopped = true
        var one: UInt64 = 1
        _ = write(self.stopFD, &one, 8)
        // Threads may start more threads until the accept loop has seen the stop: join until none are left.
        while true {
            let threads = self.state.withLock { s -> [pthread_t] in
                let t = s.threads
                s.threads = []
                return t
            }
            if threads.isEmpty { break }
            for t in threads { pthread_join(t, nil) }
        }
        close(self.listenFD)
        close(self.stopFD)
    }

    private final class Job {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    private func spawn(_ body: @escaping (ScriptedSOCKS5Server) -> Void) {
        let job = Job { body(self) }
        let box = Unmanaged.passRetained(job)
        var tid = pthread_t()
        let rc = pthread_create(
            &tid,
            nil,
            { arg in
                let job = Unmanaged<Job>.fromOpaque(arg!).takeRetainedValue()
                job.body()
                return nil
            },
            box.toOpaque()
        )
        if rc == 0 {
            self.state.withLock { $0.threads.append(tid) }
        } else {
            box.release()
        }
    }

    /// Waits until `fd` is readable or the server stops; false when stopping.
    private func waitReadable(_ fds: [Int32]) -> [Bool]? {
        var pfds = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        pfds.append(pollfd(fd: self.stopFD, events: Int16(POLLIN), revents: 0))
        while true {
            let n = poll(&pfds, nfds_t(pfds.count), -1)
            if n < 0 && errno == EINTR { continue }
            if n < 0 || pfds.last!.revents != 0 { return nil }
            return pfds.dropLast().map { $0.revents != 0 }
        }
    }

    private func acceptLoop() {
        while self.waitReadable([self.listenFD]) != nil {
            let c = accept4Blocking(self.listenFD)
            guard c >= 0 else { continue }
            self.spawn { $0.serve(c) }
        }
    }

    private func accept4Blocking(_ fd: Int32) -> Int32 {
        let c = accept(fd, nil, nil)
        if c >= 0 { _ = fcntl(c, F_SETFD, FD_CLOEXEC) }
        return c
    }

    /// Reads exactly `n` bytes (nil on EOF, error or stop).
    private func readExactly(_ fd: Int32, _ n: Int) -> [UInt8]? {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: max(n, 1))
        while out.count < n {
            guard self.waitReadable([fd]) != nil else { return nil }
            let r = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, n - out.count) }
            if r <= 0 { return nil }
            out += buf[0..<r]
        }
        return out
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var off = 0
        while off < bytes.count {
            let w = bytes[off...].withUnsafeBytes { CHawser_send(fd, $0.baseAddress, $0.count) }
            if w <= 0 { return false }
            off += w
        }
        return true
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard let hello = self.readExactly(client, 2), hello[0] == 5,
            let methods = self.readExactly(client, Int(hello[1]))
        else { return }
        var user: String?
        if let creds = self.credentials {
            guard methods.contains(2) else {
                _ = self.writeAll(client, [5, 0xFF])
                return
            }
            guard self.writeAll(client, [5, 2]),
                let head = self.readExactly(client, 2), head[0] == 1,
                let u = self.readExactly(client, Int(head[1])),
                let plen = self.readExactly(client, 1),
                let p = self.readExactly(client, Int(plen[0]))
            else { return }
            let given = ProxyCredentials(
                user: String(decoding: u, as: UTF8.self),
                password: String(decoding: p, as: UTF8.self)
            )
            guard given == creds else {
                self.state.withLock { $0.authFailures += 1 }
                _ = self.writeAll(client, [1, 1])
                return
            }
            user = given.user
            guard self.writeAll(client, [1, 0]) else { return }
        } else {
            guard methods.contains(0) else {
                _ = self.writeAll(client, [5, 0xFF])
                return
            }
            guard self.writeAll(client, [5, 0]) else { return }
        }
        guard let req = self.readExactly(client, 4), req[0] == 5 else { return }
        guard req[1] == 1 else {
            _ = self.writeAll(client, [5, 7, 0, 1, 0, 0, 0, 0, 0, 0])
            return
        }
        let host: String
        switch req[3] {
        case 1:
            guard let a = self.readExactly(client, 4) else { return }
            host = a.map(String.init).joined(separator: ".")
        case 3:
            guard let l = self.readExactly(client, 1), let n = self.readExactly(client, Int(l[0])) else { return }
            host = String(decoding: n, as: UTF8.self)
        case 4:
            guard let a = self.readExactly(client, 16) else { return }
            host = ipv6Text(a)
        default:
            _ = self.writeAll(client, [5, 8, 0, 1, 0, 0, 0, 0, 0, 0])
            return
        }
        guard let pb = self.readExactly(client, 2) else { return }
        let port = Int(pb[0]) << 8 | Int(pb[1])
        self.state.withLock { $0.requests.append(Request(addressType: req[3], host: host, port: port, user: user)) }
        if let code = self.forcedReply {
            _ = self.writeAll(client, [5, code, 0, 1, 0, 0, 0, 0, 0, 0])
            return
        }
        guard let upstream = Self.connect(host: host, port: port) else {
            _ = self.writeAll(client, [5, 5, 0, 1, 0, 0, 0, 0, 0, 0])  // connection refused
            return
        }
        defer { close(upstream) }
        guard self.writeAll(client, [5, 0, 0, 1, 127, 0, 0, 1, 0, 0]) else { return }
        self.relay(client, upstream)
    }

    private func relay(_ a: Int32, _ b: Int32) {
        var buf = [UInt8](repeating: 0, count: 16384)
        while let ready = self.waitReadable([a, b]) {
            for (i, r) in ready.enumerated() where r {
                let from = i == 0 ? a : b
                let to = i == 0 ? b : a
                let n = buf.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if n <= 0 { return }
                if !self.writeAll(to, Array(buf[0..<n])) { return }
            }
        }
    }

    /// Connects to the first address of `host` that accepts (blocking).
    private static func connect(host: String, port: Int) -> Int32? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &res) == 0 else { return nil }
        defer { freeaddrinfo(res) }
        var p = res
        while let ai = p {
            p = ai.pointee.ai_next
            let fd = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { continue }
            if Glibc.connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 { return fd }
            close(fd)
        }
        return nil
    }
}

/// An IPv6 address's text form.
private func ipv6Text(_ bytes: [UInt8]) -> String {
    var a = in6_addr()
    withUnsafeMutableBytes(of: &a) { $0.copyBytes(from: bytes) }
    var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count))
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

// MARK: - Running curl

/// curl's exit status and what it wrote to stdout.
struct ProxyCurlRun {
    var exitCode: Int32
    var body: String
    var stderr: String
}

/// Runs the real `curl` with `args` (stdout and stderr captured), waiting for it to exit.
func runProxyCurl(_ args: [String]) throws -> ProxyCurlRun {
    guard
        let curl = ["/usr/bin/curl", "/usr/local/bin/curl"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        })
    else {
        throw FixtureError("curl is not installed (apt-get install -y curl)")
    }
    let dir = FileManager.default.temporaryDirectory
    let out = dir.appendingPathComponent("hawser-curl-\(UUID().uuidString).out").path
    let err = dir.appendingPathComponent("hawser-curl-\(UUID().uuidString).err").path
    defer {
        unlink(out)
        unlink(err)
    }
    // --max-time bounds every run; no proxy settings leak in from the environment.
    let pid = try ChildProcess.spawn(
        curl,
        ["--silent", "--show-error", "--max-time", "20", "--noproxy", ""] + args,
        stdout: out,
        stderr: err,
        environment: ["PATH=/usr/bin:/bin"]
    )
    let code = ChildProcess.wait(pid).exitCode ?? -1
    return ProxyCurlRun(
        exitCode: code,
        body: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
    )
}

// MARK: - The fixtures, checked with curl

extension NetworkTests {
    @Suite("Proxy fixtures work with curl", .serialized)
    struct ProxyFixtureTests {
        static func withServer(_ body: (TestServer) async throws -> Void) async throws {
            try await expectNoFDLeak("proxy fixtures") {
                let server = try TestServer()
                defer { server.shutdown() }
                try await body(server)
            }
        }

        @Test("tinyproxy forwards http requests and opens CONNECT tunnels")
        func tinyproxyPlain() async throws {
            try await Self.withServer { server in
                let proxy = try TinyproxyFixture()
                defer { proxy.stop() }
                let forward = try runProxyCurl(["-x", proxy.url, "\(server.baseURL)/hello"])
                #expect(forward.exitCode == 0 && forward.body == "Hello, World!", "\(forward.stderr) \(proxy.log)")
                let tunnel = try runProxyCurl(["-p", "-x", proxy.url, "\(server.baseURL)/hello"])
                #expect(tunnel.exitCode == 0 && tunnel.body == "Hello, World!", "\(tunnel.stderr) \(proxy.log)")
            }
        }

        @Test("tinyproxy with Basic auth: 407 without credentials, 200 with them, for forwarding and CONNECT")
        func tinyproxyAuth() async throws {
            try await Self.withServer { server in
                let creds = ProxyCredentials(user: "alice", password: "s3cret")
                let proxy = try TinyproxyFixture(credentials: creds)
                defer { proxy.stop() }
                let bare = "http://127.0.0.1:\(proxy.port)"
                let refused = try runProxyCurl([
                    "-o", "/dev/null", "-w", "%{http_code}", "-x", bare, "\(server.baseURL)/hello",
                ])
                #expect(refused.body == "407", "\(refused)")
                let refusedTunnel = try runProxyCurl(["-p", "-x", bare, "\(server.baseURL)/hello"])
                // CURLE_RECV_ERROR: 407 to CONNECT.
                #expect(refusedTunnel.exitCode == 56, "CONNECT without credentials: \(refusedTunnel)")
                let ok = try runProxyCurl(["-x", proxy.url, "\(server.baseURL)/hello"])
                #expect(ok.exitCode == 0 && ok.body == "Hello, World!", "\(ok.stderr)")
                let tunnel = try runProxyCurl(["-p", "-x", proxy.url, "\(server.baseURL)/hello"])
                #expect(tunnel.exitCode == 0 && tunnel.body == "Hello, World!", "\(tunnel.stderr)")
            }
        }

        @Test("Dante's sockd relays SOCKS5 with local and with remote DNS")
        func dante() async throws {
            try await Self.withServer { server in
                let proxy = try DanteFixture()
                defer { proxy.stop() }
                let local = try runProxyCurl(["-x", "socks5://127.0.0.1:\(proxy.port)", "\(server.baseURL)/hello"])
                #expect(local.exitCode == 0 && local.body == "Hello, World!", "\(local.stderr) \(proxy.log)")
                let remote = try runProxyCurl([
                    "--socks5-hostname", "127.0.0.1:\(proxy.port)", "http://localhost:\(server.port)/hello",
                ])
                #expect(remote.exitCode == 0 && remote.body == "Hello, World!", "\(remote.stderr) \(proxy.log)")
            }
        }

        @Test(
            "the scripted SOCKS5 server: username/password, remote DNS recorded, wrong password and forced reply codes refused"
        )
        func scripted() async throws {
            try await Self.withServer { server in
                let socks = try ScriptedSOCKS5Server(credentials: ProxyCredentials(user: "alice", password: "s3cret"))
                defer { socks.stop() }
                let ok = try runProxyCurl([
                    "--socks5-hostname", "127.0.0.1:\(socks.port)", "--proxy-user", "alice:s3cret",
                    "http://localhost:\(server.port)/hello",
                ])
                #expect(ok.exitCode == 0 && ok.body == "Hello, World!", "\(ok.stderr)")
                #expect(socks.requests == [.init(addressType: 3, host: "localhost", port: server.port, user: "alice")])
                let wrong = try runProxyCurl([
                    "--socks5-hostname", "127.0.0.1:\(socks.port)", "--proxy-user", "alice:nope",
                    "http://localhost:\(server.port)/hello",
                ])
                #expect(wrong.exitCode == 97, "\(wrong)")  // CURLE_PROXY
                #expect(socks.authenticationFailures == 1)
                let none = try runProxyCurl([
                    "--socks5", "127.0.0.1:\(socks.port)", "http://127.0.0.1:\(server.port)/hello",
                ])
                #expect(none.exitCode == 97, "no credentials offered: \(none)")

                let refusing = try ScriptedSOCKS5Server(forcedReply: 0x02)
                defer { refusing.stop() }
                let denied = try runProxyCurl(["--socks5", "127.0.0.1:\(refusing.port)", "\(server.baseURL)/hello"])
                #expect(denied.exitCode == 97, "\(denied)")
                #expect(refusing.requests.first?.addressType == 1)  // socks5:// resolves locally: an IPv4 address
            }
        }
    }
}
