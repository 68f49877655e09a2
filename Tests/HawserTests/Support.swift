import Foundation
import Hawser
import HawserTestServer
// Shared by the AFNetworking-layer tests.
@_exported import HawserTestSupport
import Synchronization
import Testing

/// Every suite that opens sockets or starts servers nests in this one, so they run one at a
/// time (the loopback servers and the file-descriptor leak checks must not interleave).
@Suite(.serialized) enum ManagerNetworkTests {}

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
        self.lock.lock()
        defer { self.lock.unlock() }
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
        get {
            self.lock.lock()
            defer { self.lock.unlock() }
            return self.v
        }
        set {
            self.lock.lock()
            self.v = newValue
            self.lock.unlock()
        }
    }
    func mutate(_ body: (inout T) -> Void) {
        self.lock.lock()
        body(&self.v)
        self.lock.unlock()
    }
}

// MARK: - Serializers for the tests (the concrete ones live on another branch)

struct StatusError: Error, Equatable { let status: Int }

/// Accepts 2xx and hands back the body as Data (AFHTTPResponseSerializer's job, minimal).
struct DataSerializer: ResponseSerialization {
    func responseObject(for response: HawserResponse?, data: [UInt8]?) throws -> (any Sendable)? {
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
