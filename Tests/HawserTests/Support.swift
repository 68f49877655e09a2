// Shared by the AFNetworking-layer tests.
import Testing

/// Every suite that opens sockets or starts servers nests in this one, so they run one at a
/// time (the loopback servers and the file-descriptor leak checks must not interleave).
@Suite(.serialized) enum ManagerNetworkTests {}

import Foundation
import Hawser
import HawserTestServer
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Waiting on events

/// Counts fulfilments; `wait` suspends until the count reaches `expected` or the timeout passes.
final class Expectation: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var waiters: [(Int, CheckedContinuation<Bool, Never>)] = []

    func fulfill() {
        self.lock.lock()
        self.count += 1
        let ready = self.waiters.filter { $0.0 <= self.count }
        self.waiters.removeAll { $0.0 <= self.count }
        self.lock.unlock()
        for w in ready { w.1.resume(returning: true) }
    }

    var fulfilled: Int {
        self.lock.lock(); defer { self.lock.unlock() }
        return self.count
    }

    /// True when `expected` fulfilments happened within `timeout` seconds.
    func wait(for expected: Int = 1, timeout: Double = 20) async -> Bool {
        let id = UUID()
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            self.lock.lock()
            if self.count >= expected {
                self.lock.unlock()
                c.resume(returning: true)
                return
            }
            self.waiters.append((expected, c))
            self.lock.unlock()
            _ = id
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                self.lock.lock()
                let mine = self.waiters.firstIndex { $0.0 == expected && self.count < expected }
                var cont: CheckedContinuation<Bool, Never>? = nil
                if let mine { cont = self.waiters.remove(at: mine).1 }
                self.lock.unlock()
                cont?.resume(returning: false)
            }
        }
    }
}

/// A value set from any thread.
final class Box<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var v: T
    init(_ v: T) { self.v = v }
    var value: T {
        get { self.lock.lock(); defer { self.lock.unlock() }; return self.v }
        set { self.lock.lock(); self.v = newValue; self.lock.unlock() }
    }
    func mutate(_ body: (inout T) -> Void) { self.lock.lock(); body(&self.v); self.lock.unlock() }
}

// MARK: - Serializers for the tests (the concrete ones live on another branch)

struct StatusError: Error, Equatable { let status: Int }

/// Accepts 2xx and hands back the body as Data (AFHTTPResponseSerializer's job, minimal).
struct DataSerializer: ResponseSerialization {
    func responseObject(for response: HTTPResponse?, data: [UInt8]?) throws -> (any Sendable)? {
        if let s = response?.statusCode, !(200..<300).contains(s) { throw StatusError(status: s) }
        return data.map { Data($0) }
    }
}

struct ParameterError: Error {}

/// Parameters as a query (GET/HEAD/DELETE) or a form body, sorted; a `"fail"` key throws.
struct QuerySerializer: RequestSerialization {
    func request(bySerializing request: HTTPClientRequest, parameters: Parameters?) throws -> HTTPClientRequest {
        var r = request
        r.headers.replaceOrAdd(name: "X-Default", value: "serializer")
        guard let parameters, !parameters.isEmpty else { return r }
        if parameters["fail"] != nil { throw ParameterError() }
        let q = parameters.keys.sorted().map { "\($0)=\(parameters[$0]!)" }.joined(separator: "&")
        if [HTTPMethod.get, .head, .delete].contains(r.method) {
            r.url = URL(string: r.url.absoluteString + (r.url.query == nil ? "?" : "&") + q)!
        } else {
            r.body = .bytes(Array(q.utf8))
            r.headers.replaceOrAdd(name: "Content-Type", value: "application/x-www-form-urlencoded")
        }
        return r
    }
}

// MARK: - Processes and descriptors

/// Descriptors that can be ours: all but libdispatch's lazily made timerfds.
func ownFDs() -> [Int: String] {
    openDescriptors().filter { $0.value != "anon_inode:[timerfd]" }
}

/// Runs `body`, then expects no descriptor more than before (waiting, bounded, for loops to close sockets).
func expectNoFDLeak(_ what: String = "", _ body: () async throws -> Void) async rethrows {
    try? await Task.sleep(nanoseconds: 1)
    let before = Set(ownFDs().keys)
    try await body()
    var leaked: [String] = []
    for _ in 0..<400 {
        leaked = ownFDs().filter { !before.contains($0.key) }.map { "\($0.key) → \($0.value)" }.sorted()
        if leaked.isEmpty { break }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    #expect(leaked.isEmpty, "file descriptors leaked \(what): \(leaked)")
}

/// VmHWM (peak resident set) of this process, in KiB.
func peakRSSKiB() -> Int {
    guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in s.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0: write 5 to clear_refs), so growth is measured
/// from now. Returns false if the kernel refused.
@discardableResult
func resetPeakRSS() -> Bool {
    let fd = open("/proc/self/clear_refs", O_WRONLY)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return write(fd, "5", 1) == 1
}

func pattern(_ n: Int, from offset: Int = 0) -> [UInt8] {
    (0..<n).map { UInt8((offset + $0) % 251) }
}

func tempURL(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("hawser-test-\(UUID().uuidString)-\(name)")
}

/// Waits until `condition` holds, polling, for at most `timeout` seconds; returns whether it held.
/// For what other threads finish asynchronously after the event a test waited for (a completion
/// queue letting go of the objects its closure held).
func eventually(timeout: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    return true
}

// MARK: - A local httpbin

/// Debian's python3-httpbin on a free loopback port (as HawserCoreTests' fixture), for the
/// AFNetworking tests that ran against httpbin.org.
final class Httpbin: @unchecked Sendable {
    let port: Int
    private let pid: pid_t
    private let directory: URL
    private var stopped = false

    struct Unavailable: Error, CustomStringConvertible { let description: String }

    init() throws {
        guard FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/httpbin/__init__.py") else {
            throw Unavailable(description: "python3-httpbin is not installed (apt-get install -y python3-httpbin)")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hawser-httpbin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        self.directory = dir
        self.port = Self.freePort()
        let script = dir.appendingPathComponent("httpbin_server.py").path
        try """
        import logging
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        from werkzeug.serving import make_server
        from httpbin import app
        make_server("127.0.0.1", \(self.port), app, threaded=True).serve_forever()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let log = dir.appendingPathComponent("httpbin.log").path
        self.pid = try ChildProcess.spawn("/usr/bin/python3", [script], stdout: log, stderr: log, ownGroup: true)
        let deadline = Date().addingTimeInterval(15)
        while !Self.canConnect(self.port) {
            if Date() > deadline {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                self.stop()
                throw Unavailable(description: "httpbin did not start on port \(self.port): \(text)")
            }
            usleep(10_000)
        }
    }

    deinit { self.stop() }

    var baseURL: String { "http://127.0.0.1:\(self.port)" }

    /// Stops the process group we started (by its leader's pid). Idempotent.
    func stop() {
        guard !self.stopped else { return }
        self.stopped = true
        kill(-self.pid, SIGKILL)
        _ = ChildProcess.wait(self.pid)
        try? FileManager.default.removeItem(at: self.directory)
    }

    private static func freePort() -> Int {
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

    private static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        sin.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &sin) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}
