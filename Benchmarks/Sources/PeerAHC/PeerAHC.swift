// peer-ahc: hawser-load's load, through AsyncHTTPClient 1.37 (the peer of issues 4 and 2).
//
//   peer-ahc [-c N] [-t THREADS] [-d SECONDS | -n REQUESTS] [--api future|future-channel|async|async-nio] URL
//
// One HTTPClient on its own MultiThreadedEventLoopGroup: -t threads (default 1 for -c 1, one
// per core otherwise), connection pool soft limit = -c, -c requests in flight (keep-alive GETs,
// each worker sends its next request when the previous one has finished).
//
//   --api future (default; AHC's best configuration): `execute(request:delegate:eventLoop:)`
//       with `.delegate(on: loop)`: worker i is pinned to loop i % THREADS, the delegate runs
//       there and the next request is sent from the completion callback on that loop.  The pool
//       prefers an idle connection on the same loop (with 1 thread there is no other).  The
//       delegate counts the body bytes (no accumulation; the bodies here are ~60 bytes).
//   --api future-channel: the same with `.delegateAndChannel(on: loop)`, which looks like the
//       better fit but is not: AHC 1.37 serves an event-loop-*required* request on an "overflow"
//       connection and closes overflow connections when they go idle with nothing waiting for
//       their loop, so a worker that sends its next request from the completion callback gets a
//       new TCP connection for every request (strace: 4,000 connect() for 4,000 requests at -c 1
//       and at -c 64; `.delegate(on:)`: 1 and 64).  Kept to show it.
//   --api async: the async/await API (`execute(_ HTTPClientRequest, timeout:)` + `body.collect`)
//       from -c tasks on Swift's global (cooperative) executor: what `await client.execute` gives
//       an application by default (two thread hops per request).
//   --api async-nio: the same async/await API with NIO's singleton group (-t loops) installed as
//       Swift's global executor (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAs-
//       ConcurrencyGlobalExecutor()`) and used as the client's group: every `await` runs on the
//       loops, NIO's own answer to the hops (the peer of `hawser load --executor installed`).
//
// Last line: `RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K ...`
// (see PeerSupport).  Non-2xx responses and failures count as errors.
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import PeerSupport

#if canImport(Glibc)
import Glibc
#endif

let tool = "peer-ahc"
let extra = " [--api future|future-channel|async|async-nio]"

/// One request slot of the future API: sends, on its own loop, the next request when the
/// previous one completes.  Reused for its sequential requests: its state is touched only
/// on `loop`.
final class Worker: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Int  // body bytes, or -1 for a non-2xx status

    let client: HTTPClient
    let loop: any EventLoop
    let request: HTTPClient.Request
    let budget: PeerBudget
    let counters: PeerCounters
    let finished: @Sendable () -> Void
    let preference: HTTPClient.EventLoopPreference
    private var status: UInt = 0
    private var bytes = 0

    init(
        client: HTTPClient,
        loop: any EventLoop,
        request: HTTPClient.Request,
        budget: PeerBudget,
        counters: PeerCounters,
        requireChannelOnLoop: Bool,
        finished: @escaping @Sendable () -> Void
    ) {
        self.preference = requireChannelOnLoop ? .delegateAndChannel(on: loop) : .delegate(on: loop)
        self.client = client
        self.loop = loop
        self.request = request
        self.budget = budget
        self.counters = counters
        self.finished = finished
    }

    func didReceiveHead(task: HTTPClient.Task<Int>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        self.status = head.status.code
        self.bytes = 0
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Int>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        self.bytes += buffer.readableBytes
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Int>) throws -> Int {
        (200..<300).contains(self.status) ? self.bytes : -1
    }

    /// Runs on `loop`.
    func next() {
        guard self.budget.next() else {
            self.finished()
            return
        }
        self.status = 0
        self.client.execute(request: self.request, delegate: self, eventLoop: self.preference)
            .futureResult.whenComplete { result in
                switch result {
                case .success(let n) where n >= 0: self.counters.ok(bytes: n)
                default:
                    self.counters.error()
                    // a failure may complete at once: through the loop, not the stack
                    self.loop.execute { self.next() }
                    return
                }
                self.next()
            }
    }
}

func runFuture(
    _ o: PeerOptions,
    client: HTTPClient,
    group: MultiThreadedEventLoopGroup,
    counters: PeerCounters,
    requireChannelOnLoop: Bool
) -> UInt64 {
    let request: HTTPClient.Request
    do {
        request = try HTTPClient.Request(url: o.url, method: .GET)
    } catch {
        peerUsage(tool, "bad URL \(o.url): \(error)", extra: extra)
    }
    let loops = Array(group.makeIterator())
    let done = PeerSemaphore()
    let remaining = PeerCountdown(o.connections)
    let start = peerNow()
    let budget = PeerBudget(o, start: start)
    let workers = (0..<o.connections).map { i in
        Worker(
            client: client,
            loop: loops[i % loops.count],
            request: request,
            budget: budget,
            counters: counters,
            requireChannelOnLoop: requireChannelOnLoop
        ) {
            if remaining.arrive() { done.signal() }
        }
    }
    for w in workers { w.loop.execute { w.next() } }
    done.wait()
    return peerNow() - start
}

func runAsync(_ o: PeerOptions, client: HTTPClient, counters: PeerCounters) async -> UInt64 {
    let request = HTTPClientRequest(url: o.url)
    let start = peerNow()
    let budget = PeerBudget(o, start: start)
    await withTaskGroup(of: Void.self) { g in
        for _ in 0..<o.connections {
            g.addTask {
                while budget.next() {
                    do {
                        let r = try await client.execute(request, timeout: .seconds(30))
                        let body = try await r.body.collect(upTo: 64 << 20)
                        if (200..<300).contains(r.status.code) {
                            counters.ok(bytes: body.readableBytes)
                        } else {
                            counters.error()
                        }
                    } catch {
                        counters.error()
                    }
                }
            }
        }
    }
    return peerNow() - start
}

@main
struct PeerAHC {
    static func main() async throws {
        peerProcessSetup()
        let o = parsePeerOptions(tool, extra: extra)
        let api = o.api ?? "future"
        guard ["future", "future-channel", "async", "async-nio"].contains(api) else {
            peerUsage(tool, "--api takes future, future-channel, async or async-nio", extra: extra)
        }
        let threads = o.threads > 0 ? o.threads : (o.connections == 1 ? 1 : peerCoreCount())
        let group: MultiThreadedEventLoopGroup
        if api == "async-nio" {
            NIOSingletons.groupLoopCountSuggestion = threads
            guard NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor() else {
                peerUsage(tool, "NIO could not install its loops as the global executor", extra: extra)
            }
            group = MultiThreadedEventLoopGroup.singleton
        } else {
            group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        }
        var config = HTTPClient.Configuration()
        config.connectionPool = .init(
            idleTimeout: .seconds(60),
            concurrentHTTP1ConnectionsPerHostSoftLimit: o.connections
        )
        config.timeout = .init(connect: .seconds(10), read: .seconds(30))
        config.httpVersion = .http1Only
        let client = HTTPClient(eventLoopGroup: group, configuration: config)
        print("Running \(o.seconds.map { "\(fixed($0))s" } ?? "\(o.requests!)-request") test @ \(o.url)")
        print(
            "  AsyncHTTPClient 1.37.0, \(threads) event loop thread(s), \(o.connections) connections, "
                + (api == "async" || api == "async-nio"
                    ? "async/await execute from \(o.connections) tasks on the global executor"
                        + (api == "async-nio" ? " (NIO's loops installed as it)" : "")
                    : "execute(request:delegate:eventLoop: \(api == "future" ? ".delegate(on:)" : ".delegateAndChannel(on:)")) chained on the loops")
        )
        let counters = PeerCounters()
        let elapsed =
            api == "async" || api == "async-nio"
            ? await runAsync(o, client: client, counters: counters)
            : runFuture(
                o,
                client: client,
                group: group,
                counters: counters,
                requireChannelOnLoop: api == "future-channel"
            )
        let status = peerReport(counters, elapsedNanos: elapsed)
        try await client.shutdown()
        if api != "async-nio" { try await group.shutdownGracefully() }  // the singleton is never shut down
        exit(status)
    }
}
