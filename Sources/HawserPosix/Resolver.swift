import CHawser
// Name resolution off the event loop. getaddrinfo blocks, so it runs on a small pool of
// resolver threads; the answer is handed back to the requesting loop with `execute`.
// Numeric addresses never leave the loop.
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why a name could not be resolved.
public struct ResolutionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name that could not be resolved, as it was asked for.
    public var host: String
    /// `gai_strerror`'s text for getaddrinfo's error (for example "Name or service not known"),
    /// or "no addresses" when it answered with none.
    public var message: String
    public var description: String { "cannot resolve '\(self.host)': \(self.message)" }

    /// The error for `host`, with the resolver's `message`.
    public init(host: String, message: String) {
        self.host = host
        self.message = message
    }
}

/// Resolves host names with getaddrinfo on a bounded pool of threads.
public final class Resolver: Sendable {
    private struct Job: Sendable {
        var host: String
        var port: Int
        var completion: @Sendable (Result<[SocketAddress], ResolutionError>) -> Void
    }

    private struct State {
        var queue: [Job] = []
        var threads = 0
    }

    private let state = Mutex(State())
    private let cond = ConditionVariable()
    private let maxThreads: Int

    /// The process-wide resolver (up to 4 threads, started on demand, parked when idle).
    public static let shared = Resolver(maxThreads: 4)

    /// Creates a resolver that runs at most `maxThreads` getaddrinfo calls at once, on threads it
    /// starts when lookups are waiting and parks when idle. Most programs use ``shared`` instead.
    public init(maxThreads: Int) {
        self.maxThreads = maxThreads
    }

    /// Resolves `host`, calling `completion` on a resolver thread (or inline for literals).
    /// IPv6 and IPv4 answers are interleaved, starting with the family getaddrinfo put first
    /// (RFC 8305 §4), so connecting "in turn" alternates families.
    public func resolve(
        host: String,
        port: Int,
        completion: @escaping @Sendable (Result<[SocketAddress], ResolutionError>) -> Void
    ) {
        if let literal = SocketAddress(ipAddress: host, port: port) {
            completion(.success([literal]))
            return
        }
        let startThread: Bool = self.state.withLock { s in
            s.queue.append(Job(host: host, port: port, completion: completion))
            // Threads are started lazily, up to the cap, and then park on the condition.
            if s.threads < self.maxThreads && s.queue.count > 0 {
                s.threads += 1
                return true
            }
            return false
        }
        if startThread { self.spawn() }
        self.cond.broadcast()
    }

    private func spawn() {
        if !startDetachedThread(name: "hawser-dns", { self.work() }) {
            self.state.withLock { $0.threads -= 1 }
        }
    }

    private func work() {
        while true {
            var job: Job? = nil
            // `wait(until:)` evaluates the closure under the condition's mutex, so a job queued
            // between the check and the wait cannot be missed (its broadcast needs that mutex).
            self.cond.wait {
                job = self.state.withLock { s in s.queue.isEmpty ? nil : s.queue.removeFirst() }
                return job != nil
            }
            if let j = job {
                j.completion(Self.lookup(host: j.host, port: j.port))
            }
        }
    }

    static func lookup(host: String, port: Int) -> Result<[SocketAddress], ResolutionError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var result: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, String(port), &hints, &result)
        if rc != 0 {
            return .failure(ResolutionError(host: host, message: String(cString: gai_strerror(rc))))
        }
        defer { freeaddrinfo(result) }
        var v6: [SocketAddress] = []
        var v4: [SocketAddress] = []
        var firstIsV6: Bool? = nil
        var p = result
        while let ai = p {
            if let sa = ai.pointee.ai_addr {
                let a = SocketAddress(sockaddr: sa, length: Int(ai.pointee.ai_addrlen))
                if firstIsV6 == nil { firstIsV6 = a.family == AF_INET6 }
                if a.family == AF_INET6 {
                    if !v6.contains(a) { v6.append(a) }
                } else if !v4.contains(a) {
                    v4.append(a)
                }
            }
            p = ai.pointee.ai_next
        }
        var out: [SocketAddress] = []
        let (a, b) = firstIsV6 == false ? (v4, v6) : (v6, v4)
        for i in 0..<max(a.count, b.count) {
            if i < a.count { out.append(a[i]) }
            if i < b.count { out.append(b[i]) }
        }
        if out.isEmpty {
            return .failure(ResolutionError(host: host, message: "no addresses"))
        }
        return .success(out)
    }
}
