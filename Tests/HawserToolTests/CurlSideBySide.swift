import Foundation
import HawserCore
import HawserTestServer
@testable import HawserTool
import Testing

/// Runs `/usr/bin/curl` (scripts/test.sh installs it) with the same flags the tool gets, so
/// the tests can hold the tool's output to curl's byte for byte.
enum Curl {
    static let path = "/usr/bin/curl"

    struct Missing: Error, CustomStringConvertible {
        var description: String { "\(Curl.path) is missing (scripts/test.sh installs Debian's curl)" }
    }

    /// curl's exit status; `-q` keeps a ~/.curlrc out, the proxy variables are removed.
    @discardableResult
    static func run(_ args: [String], stdin: FileHandle? = nil) throws -> Int32 {
        guard FileManager.default.isExecutableFile(atPath: self.path) else { throw Missing() }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: self.path)
        p.arguments = ["-q"] + args
        var env = ProcessInfo.processInfo.environment
        for k in ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] { env[k] = nil }
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        if let stdin { p.standardInput = stdin }
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}

/// Temporary files removed at the end of a test.
final class TempFiles {
    private var paths: [String] = []

    func path(_ name: String) -> String {
        let p = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-\(name)-\(UUID().uuidString)").path
        self.paths.append(p)
        return p
    }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = self.path(name)
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }

    static func read(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    deinit {
        for p in self.paths { try? FileManager.default.removeItem(atPath: p) }
    }
}

@Suite("hawser get side by side with curl", .serialized)
struct CurlSideBySideTests {
    @Test("-D and -i write a header value's obs-text bytes as received, as curl does")
    func obsText() async throws {
        let server = try TestServer()
        defer { server.shutdown() }
        let t = TempFiles()
        let url = server.baseURL + "/obs-text"
        let heads = t.path("heads"), out = t.path("out"), curlHeads = t.path("curl-heads"), curlOut = t.path("curl-out")
        #expect(await GetCommand.run(["-s", "-D", heads, "-o", out, url]) == 0)
        #expect(try Curl.run(["-s", "-D", curlHeads, "-o", curlOut, url]) == 0)
        let ours = try TempFiles.read(heads)
        #expect(ours == (try TempFiles.read(curlHeads)))
        let raw: [UInt8] = Array("X-Obs-Text: caf".utf8) + [0xE9, 0x20, 0xFF, 0xA0] + Array("end\r\n".utf8)
        #expect(ours.firstRange(of: raw) != nil, "the bytes 0xE9 0xFF 0xA0 arrive unchanged")

        // -i with -o: the head and the body go to the file, as curl writes them.
        #expect(await GetCommand.run(["-s", "-i", "-o", out, url]) == 0)
        #expect(try Curl.run(["-s", "-i", "-o", curlOut, url]) == 0)
        #expect(try TempFiles.read(out) == (try TempFiles.read(curlOut)))
    }
}
