// hawser get: the TLS policy (https proxies, the policy flags, refusals as curl), -v, ALPN,
// %{ssl_verify_result} and the help text.
import Foundation
import HawserCore
import HawserTestServer
import HawserTestSupport
import Testing

@testable import HawserTool

@Suite("hawser get: the TLS policy, -v and help", .serialized)
struct ToolTLSAndVerboseTests {
    static func tlsServer(_ leaf: TestPKI.Leaf) throws -> TestServer {
        try TestServer(
            host: "127.0.0.1",
            tls: .init(certificateChainPath: leaf.chainPath, privateKeyPath: leaf.keyPath)
        )
    }

    @Test(
        "-x https://: TLS to the proxy with --proxy-cacert, --proxy-insecure, -U; its refusal as curl's: the same exit and body"
    )
    func httpsProxy() async throws {
        let pki = try TestPKI.shared()
        let creds = ProxyCredentials(user: "ada", password: "lovelace")
        let proxy = try TestProxy(
            tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath),
            credentials: creds
        )
        defer { proxy.shutdown() }
        let origin = try Self.tlsServer(pki.valid)
        defer { origin.shutdown() }
        let plain = try TestServer()
        defer { plain.shutdown() }
        let t = TempFiles()
        let viaProxy = ["-x", "https://ada:lovelace@127.0.0.1:\(proxy.port)"]
        let secure = "https://localhost:\(origin.port)/hello"
        let insecure = plain.baseURL + "/hello"
        let cases: [([String], String, Int32)] = [
            (viaProxy + ["--proxy-cacert", pki.rootPath, "--cacert", pki.rootPath], secure, 0),  // TLS inside TLS
            (viaProxy + ["--proxy-cacert", pki.rootPath], insecure, 0),  // forwarded over TLS
            (viaProxy + ["--proxy-insecure", "--cacert", pki.rootPath], secure, 0),
            (
                ["-x", "https://127.0.0.1:\(proxy.port)", "-U", "ada:lovelace", "--proxy-cacert", pki.rootPath],
                insecure, 0
            ),
            (viaProxy + ["--cacert", pki.rootPath], secure, 60),  // the proxy's chain: the system store refuses it
            (viaProxy + ["-k"], insecure, 60),  // -k is about origins, not the proxy
        ]
        for (args, target, expected) in cases {
            let ours = t.path("ours")
            let theirs = t.path("theirs")
            let status = await GetCommand.run(["-s", "-o", ours] + args + [target])
            let curlStatus = try Curl.run(["-s", "-o", theirs] + args + [target])
            #expect(
                status == expected && curlStatus == expected,
                "\(args) \(target): hawser \(status), curl \(curlStatus)"
            )
            if expected == 0 {
                #expect(try TempFiles.read(ours) == Array("Hello, World!".utf8))
                #expect(try TempFiles.read(ours) == (try TempFiles.read(theirs)))
            }
        }
        // The origin's chain, refused inside the tunnel: 60 (curl 7.88 exits 35 here, reporting
        // its own SSL_ERROR_SYSCALL after the "unknown CA" alert instead of the verify failure).
        let inside = try HawserBinary.run(
            ["get", "-o", "/dev/null", "--proxy-cacert", pki.rootPath] + viaProxy + [secure]
        )
        #expect(inside.status == 60)
        #expect(
            inside.stderr.contains("the certificate of localhost:\(origin.port) is not trusted"),
            "\(inside.stderr)"
        )
        let refused = try HawserBinary.run(["get", "-o", "/dev/null"] + viaProxy + [insecure])
        #expect(refused.status == 60)
        #expect(
            refused.stderr.contains("the certificate of the proxy https://127.0.0.1:\(proxy.port) is not trusted"),
            "\(refused.stderr)"
        )
        #expect(!refused.stderr.contains("lovelace"))
        // Without credentials: a forward proxy's 407 is the response (22 with -f); CONNECT fails.
        let anonymous = ["-x", "https://127.0.0.1:\(proxy.port)", "--proxy-cacert", pki.rootPath]
        #expect(await GetCommand.run(["-s", "-f", "-o", t.path("o")] + anonymous + [insecure]) == 22)
        #expect(await GetCommand.run(["-s", "-o", t.path("o"), "--cacert", pki.rootPath] + anonymous + [secure]) == 5)
        let unreadable = await GetCommand.run(
            ["-s", "-o", t.path("o"), "--proxy-cacert", "/nonexistent/ca.pem"] + viaProxy + [insecure]
        )
        #expect(unreadable == 77)
    }

    @Test("https_proxy from the environment; an unparsable proxy variable is exit 5 with a message naming it")
    func proxyEnvironment() throws {
        let pki = try TestPKI.shared()
        let proxy = try TestProxy(
            tls: .init(certificateChainPath: pki.valid.chainPath, privateKeyPath: pki.valid.keyPath)
        )
        defer { proxy.shutdown() }
        let origin = try Self.tlsServer(pki.valid)
        defer { origin.shutdown() }
        let secure = "https://localhost:\(origin.port)/hello"
        let ok = try HawserBinary.run(
            ["get", "--proxy-cacert", pki.rootPath, "--cacert", pki.rootPath, secure],
            environment: ["https_proxy": proxy.url]
        )
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout == Array("Hello, World!".utf8))
        #expect(proxy.requestLines == ["CONNECT localhost:\(origin.port) HTTP/1.1"])

        let bad = ["HTTPS_PROXY": "https://ada:lovelace@proxy.example:99999"]
        let r = try HawserBinary.run(["get", "--cacert", pki.rootPath, secure], environment: bad)
        #expect(r.status == 5)
        #expect(
            try Curl.run(["-s", "--cacert", pki.rootPath, secure], environment: bad) == 5,
            "curl's exit for a bad proxy port"
        )
        #expect(r.stderr.contains("HTTPS_PROXY") && r.stderr.contains("bad port '99999'"), "\(r.stderr)")
        #expect(
            r.stderr.contains("https://ada:***@proxy.example:99999") && !r.stderr.contains("lovelace"),
            "\(r.stderr)"
        )
        // -x replaces the environment's proxies, the broken one included (as curl).
        let overridden = try HawserBinary.run(
            ["get", "-x", proxy.url, "--proxy-cacert", pki.rootPath, "--cacert", pki.rootPath, secure],
            environment: bad
        )
        #expect(overridden.status == 0, "\(overridden.stderr)")
        // A broken variable for https does not touch http URLs.
        let plain = try TestServer()
        defer { plain.shutdown() }
        let direct = try HawserBinary.run(["get", plain.baseURL + "/hello"], environment: bad)
        #expect(direct.status == 0 && direct.stdout == Array("Hello, World!".utf8))
    }

    @Test(
        "--pinning, --pinned-cert (PEM and DER), --allow-invalid-certificates, --no-validate-domain-name: 0, 60 or 90"
    )
    func policyFlags() async throws {
        let pki = try TestPKI.shared()
        let server = try Self.tlsServer(pki.valid)
        let wrongHost = try Self.tlsServer(pki.wrongHost)
        defer {
            server.shutdown()
            wrongHost.shutdown()
        }
        let t = TempFiles()
        let u = "https://localhost:\(server.port)/hello"
        let ca = ["--cacert", pki.rootPath]
        func run(_ args: [String], _ url: String = u) async -> Int32 {
            await GetCommand.run(["-s", "-o", t.path("o")] + args + [url])
        }
        // Certificate pinning (PEM or DER): the chain must also verify, as AFSecurityPolicy's does
        // unless invalid certificates are allowed, and contain a pinned certificate.
        #expect(await run(ca + ["--pinning", "certificate", "--pinned-cert", pki.rootPath]) == 0)
        #expect(await run(ca + ["--pinned-cert", pki.valid.derPath]) == 0, "--pinned-cert alone pins certificates")
        #expect(await run(ca + ["--pinned-cert", pki.untrustedRootPath]) == 90)
        #expect(
            await run(["--pinned-cert", pki.rootPath]) == 60,
            "the chain does not verify against the system's roots"
        )
        #expect(await run(["--allow-invalid-certificates", "--pinned-cert", pki.rootPath]) == 0)
        // Public-key pinning from certificates: the intermediate's key is in the verified chain.
        #expect(await run(ca + ["--pinning", "public-key", "--pinned-cert", pki.intermediatePath]) == 0)
        #expect(await run(ca + ["--pinning", "public-key", "--pinned-cert", pki.untrustedRootPath]) == 90)
        // An invalid chain with a matching pin on the leaf.
        #expect(
            await run([
                "--allow-invalid-certificates", "--pinning", "public-key", "--pinned-cert", pki.valid.certificatePath,
            ]) == 0
        )
        // Invalid certificates with the domain name checked need pins (AFSecurityPolicy's rule): 60, saying so.
        #expect(await run(["--allow-invalid-certificates"]) == 60)
        #expect(await run(["--allow-invalid-certificates", "--no-validate-domain-name"]) == 0)
        // The host name: refused by default, accepted without the check.
        let w = "https://localhost:\(wrongHost.port)/hello"
        #expect(await run(ca, w) == 60)
        #expect(await run(ca + ["--no-validate-domain-name"], w) == 0)
        // --pinning none with pins is plain validation; a pinning mode without pins is a usage error.
        #expect(await run(ca + ["--pinning", "none"]) == 0)
        #expect(await run(["--pinning", "certificate"]) == 2)
        #expect(await run(["--pinned-cert", "/nonexistent/pin.pem"]) == 26)
    }

    @Test(
        "a refused certificate exits as curl does: 60 untrusted, 90 for a pinned key that does not match; the reason is printed"
    )
    func refusedLikeCurl() async throws {
        let pki = try TestPKI.shared()
        let server = try Self.tlsServer(pki.valid)
        defer { server.shutdown() }
        let t = TempFiles()
        let u = "https://localhost:\(server.port)/hello"
        let wrongPin = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        for args in [[String](), ["--cacert", pki.rootPath, "--pinnedpubkey", wrongPin], ["--cacert", pki.rootPath]] {
            let ours = await GetCommand.run(["-s", "-o", t.path("o")] + args + [u])
            let theirs = try Curl.run(["-s", "-o", t.path("o")] + args + [u])
            #expect(ours == theirs, "\(args): hawser \(ours), curl \(theirs)")
        }
        let r = try HawserBinary.run([
            "get", "-o", "/dev/null", "--cacert", pki.rootPath, "--pinnedpubkey", wrongPin, u,
        ])
        #expect(r.status == 90)
        #expect(r.stderr.contains("hawser: (90)") && r.stderr.contains("pinned public keys"), "\(r.stderr)")
    }

    @Test(
        "-v shows the connection, TLS version, cipher, ALPN, the certificate, the pin verdict, the request head as sent, reuse and resumption"
    )
    func verbose() async throws {
        let pki = try TestPKI.shared()
        let server = try Self.tlsServer(pki.valid)
        defer { server.shutdown() }
        let base = "https://localhost:\(server.port)"
        let pin = pki.intermediate.publicKeySHA256Pin.replacing("sha256/", with: "sha256//")
        // First request on a connection that closes (Connection: close), the redirect on a new
        // connection (a resumed TLS session), the last one on that connection again (reused).
        let target = base + "/redirect-to?close=1&url=" + "/redirect-to%3Furl%3D%252Fhello"
        let r = try HawserBinary.run([
            "get", "-v", "-L", "-o", "/dev/null", "--cacert", pki.rootPath, "--pinnedpubkey", pin,
            "-H", "X-Mine: 1", target,
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        func has(_ prefix: String) -> Bool { lines.contains { $0.hasPrefix(prefix) } }
        #expect(has("* Connected to localhost (127.0.0.1) port \(server.port)"))
        #expect(has("* SSL connection using TLSv1.3 / TLS_"), "\(r.stderr)")
        #expect(has("* ALPN: server did not agree on a protocol. Uses default."), "the test server does no ALPN")
        #expect(has("*  subject: ") && has("*  issuer: ") && has("*  start date: ") && has("*  expire date: "))
        #expect(has("*  SSL certificate verify ok."))
        #expect(has("*  pinning (public-key): matched"))
        #expect(has("> GET /redirect-to?close=1&url=/redirect-to%3Furl%3D%252Fhello HTTP/1.1"))
        #expect(
            has("> Host: localhost:\(server.port)") && has("> User-Agent: hawser/0.1") && has("> Accept: */*")
                && has("> X-Mine: 1")
        )
        #expect(has("< HTTP/1.1 302 Found") && has("< Connection: close") && has("< HTTP/1.1 200 OK"))
        #expect(has("* SSL session resumed"), "\(r.stderr)")
        #expect(has("* Re-using existing connection with host localhost"))
        #expect(lines.filter { $0.hasPrefix("> GET ") }.count == 3)

        // A refused pin: the certificate and the verdict, no request.
        let bad = try HawserBinary.run([
            "get", "-v", "-o", "/dev/null", "--cacert", pki.rootPath, "--pinnedpubkey",
            "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", base + "/hello",
        ])
        #expect(bad.status == 90)
        #expect(
            bad.stderr.contains("*  pinning (public-key): no match") && bad.stderr.contains("*  subject: "),
            "\(bad.stderr)"
        )
        #expect(!bad.stderr.contains("> GET"))
    }

    @Test("-v shows the protocol a server accepted with ALPN (openssl s_server -alpn http/1.1)")
    func alpnAccepted() throws {
        let pki = try TestPKI.shared()
        let probe = try TestServer()
        let port = probe.port
        probe.shutdown()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = [
            "s_server", "-accept", "127.0.0.1:\(port)", "-cert", pki.valid.certificatePath, "-key", pki.valid.keyPath,
            "-alpn", "http/1.1", "-www", "-quiet",
        ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // SIGKILL: a child of the test runner may inherit a mask that blocks SIGTERM.
        defer {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        // Wait until it listens (bounded): a refused connect is retried, nothing else.
        var ready = false
        for _ in 0..<200 where !ready {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            ready = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(fd)
            if !ready { usleep(25_000) }
        }
        #expect(ready, "openssl s_server did not start")
        let r = try HawserBinary.run(["get", "-v", "-k", "-o", "/dev/null", "https://localhost:\(port)/"])
        #expect(r.stderr.contains("* ALPN: server accepted http/1.1\n"), "\(r.stderr)")
    }

    @Test("-w %{ssl_verify_result} is OpenSSL's verify result, as curl's: 0 trusted, the X509 error with -k")
    func sslVerifyResult() async throws {
        let pki = try TestPKI.shared()
        let server = try Self.tlsServer(pki.valid)
        defer { server.shutdown() }
        let u = "https://localhost:\(server.port)/hello"
        let trusted = try HawserBinary.run([
            "get", "-s", "-o", "/dev/null", "--cacert", pki.rootPath, "-w", "%{ssl_verify_result}", u,
        ])
        #expect(String(decoding: trusted.stdout, as: UTF8.self) == "0")
        let insecure = try HawserBinary.run(["get", "-s", "-k", "-o", "/dev/null", "-w", "%{ssl_verify_result}", u])
        #expect(String(decoding: insecure.stdout, as: UTF8.self) == "20", "unable to get local issuer certificate")
    }

    @Test("hawser get without a URL lists every flag and the exit codes; hawser serve --help prints help and exits")
    func help() throws {
        let get = try HawserBinary.run(["get"])
        #expect(get.status == 2)
        for flag in [
            "--pinning", "--pinned-cert", "--allow-invalid-certificates", "--no-validate-domain-name", "--resolve",
            "-F, --form", "-A, --user-agent", "-e, --referer", "-G, --get", "-T, --upload-file", "-O, --remote-name",
            "--json", "--retry", "--retry-delay", "--retry-max-time", "--limit-rate", "--unix-socket",
            "%{time_namelookup}", "%{time_appconnect}", "%{time_redirect}", "%{speed_download}",
            "%{ssl_verify_result}", "%{http_version}", "%{num_redirects}", "%{errormsg}",
            "18 partial body", "52 empty reply", "1 unsupported protocol", "90 pinned",
            "--retry-all-errors", "--cn-fallback", "%{json}", "%{header_json}",
        ] {
            #expect(get.stderr.contains(flag), "\(flag) is not in the help")
        }
        let serve = try HawserBinary.run(["serve", "--help"])
        #expect(serve.status == 0)
        #expect(String(decoding: serve.stdout, as: UTF8.self).hasPrefix("Usage: hawser serve [PORT]"))
    }
}
