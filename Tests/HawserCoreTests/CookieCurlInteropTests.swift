import Foundation
import HawserCore
import HawserTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Interop with the real curl, against the test server on loopback

/// Runs curl with `args`, its standard output to `stdoutPath`; returns the exit status.
private func runCurl(_ args: [String], stdoutPath: String) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv: [UnsafeMutablePointer<CChar>?] = (["curl"] + args).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, "curl", &actions, nil, argv, environ)
    guard rc == 0 else { throw HawserError(.ioError, "cannot start curl: \(rc)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status >> 8) & 0xFF
}

extension NetworkTests {
    @Suite("Cookie files shared with curl", .serialized)
    struct CurlCookieInteropTests {
        @Test("a file curl writes (-c) loads, and a file the jar writes is what curl sends (-b)")
        func curlInterop() async throws {
            let server = try TestServer()
            defer { server.shutdown() }
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
                "hawser-curl-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            )
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out").path

            // 1. curl receives two cookies and writes its file; the jar reads it.
            let curlJar = dir.appendingPathComponent("curl.txt").path
            #expect(
                try runCurl(["-s", "-c", curlJar, "\(server.baseURL)/cookies/set?a=1&b=two"], stdoutPath: out) == 0
            )
            let jar = try CookieJar(contentsOfNetscapeFile: curlJar)
            #expect(jar.cookieHeaderValue(for: URL(string: "\(server.baseURL)/cookies")!) == "a=1; b=two")
            #expect(
                jar.allCookies.allSatisfy {
                    $0.domain == "127.0.0.1" && $0.isHostOnly && $0.isSessionCookie && $0.path == "/"
                }
            )

            // 2. The jar writes a file with a domain cookie, a host-only one, a persistent one,
            //    an HttpOnly one, a Secure one and one for another path; curl sends what applies.
            let host = "www.example.test"
            let origin = "http://\(host):\(server.port)"
            let mine = CookieJar()
            let setFrom = URL(string: "https://\(host)/")!
            mine.setCookie(fromSetCookie: "dom=1; Domain=example.test; Path=/", for: setFrom)
            mine.setCookie(fromSetCookie: "host=2; Path=/; Max-Age=3600", for: setFrom)
            mine.setCookie(fromSetCookie: "ho=3; Path=/; HttpOnly", for: setFrom)
            mine.setCookie(fromSetCookie: "sec=4; Path=/; Secure", for: setFrom)
            mine.setCookie(fromSetCookie: "deep=5; Path=/elsewhere", for: setFrom)
            let myFile = dir.appendingPathComponent("mine.txt").path
            try mine.save(toNetscapeFile: myFile)
            let resolve = "\(host):\(server.port):127.0.0.1"
            let curlOut = dir.appendingPathComponent("curl-out.txt").path
            #expect(
                try runCurl(
                    ["-s", "--resolve", resolve, "-b", myFile, "-c", curlOut, "\(origin)/cookies"],
                    stdoutPath: out
                ) == 0
            )
            let sent = try String(contentsOfFile: out, encoding: .utf8)
            // curl orders by path length, then (for equal paths) its own internal order: compare as sets.
            #expect(Set(sent.components(separatedBy: "; ")) == ["dom=1", "host=2", "ho=3"])
            #expect(mine.cookieHeaderValue(for: URL(string: "\(origin)/cookies")!) == "dom=1; host=2; ho=3")

            // 3. curl read our file and wrote it back (-c): the same cookies come back.
            let again = try CookieJar(contentsOfNetscapeFile: curlOut)
            let key = { (c: Cookie) in
                "\(c.name)=\(c.value) \(c.domain) \(c.path) \(Int64(c.expires?.timeIntervalSince1970 ?? 0)) \(c.isSecure) \(c.isHTTPOnly) \(c.isHostOnly)"
            }
            #expect(Set(again.allCookies.map(key)) == Set(mine.allCookies.map(key)))
        }
    }
}
