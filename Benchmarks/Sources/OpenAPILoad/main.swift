// openapi-load: the client generated from Tests/HawserOpenAPIExample/openapi.yaml, calling one
// operation in a loop over either transport, so the two are measured on the same generated code.
//
//   openapi-load --transport hawser|ahc [--executor global|loop|installed] [-c N] [-t THREADS] [-d SECONDS | -n REQUESTS] BASE_URL
//
// BASE_URL is the API's base (e.g. http://127.0.0.1:PORT/api; Benchmarks/scripts/nginx.sh serves
// /api/greeting). -c tasks on Swift's global executor each call `getGreeting()` and decode its
// small JSON body, one call after another.
//   hawser: HawserTransport on one Session (the shared group's loops), maximumConnectionsPerHost = -c.
//           `--executor loop` runs the calling tasks on the session's event loop (task executor
//           preference), so a request makes no thread hop; the default is the global executor,
//           as for the ahc transport (which has no such option). `--executor installed` makes
//           Hawser's shared loops Swift's global executor first (`EventLoopGroup.shared
//           .installAsGlobalExecutor()`), so the callers are plain tasks that run on the loops.
//   ahc:    AsyncHTTPClientTransport 1.5.0 on an HTTPClient (AsyncHTTPClient 1.37.0) with its own
//           MultiThreadedEventLoopGroup: -t threads (default 1 for -c 1, one per core otherwise,
//           as peer-ahc), connection pool soft limit = -c, HTTP/1.1 only.
// Last line: `RESULT requests=N errors=E seconds=S rps=R ... req_per_cpu_s=Q peak_rss_mib=M`
// (PeerSupport). A response that is not 200 with the expected message counts as an error.
import AsyncHTTPClient
import Foundation
import HawserCore
import HawserOpenAPI
import NIOPosix
import OpenAPIAsyncHTTPClient
import OpenAPIExampleClient
import OpenAPIRuntime
import PeerSupport

let tool = "openapi-load"
let extra = " --transport hawser|ahc [--executor global|loop|installed]"

/// PeerSupport's flags (`-c`, `-t`, `-d`, `-n`, the URL) plus `--transport`.
func parse() -> (PeerOptions, String, Bool, Bool) {
    var o = PeerOptions()
    var transport = "hawser"
    var onLoop = false
    var installed = false
    var args = CommandLine.arguments.dropFirst()[...]
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else { peerUsage(tool, "\(flag) needs a value", extra: extra) }
        return v
    }
    while let a = args.popFirst() {
        switch a {
        case "--transport": transport = value(a)
        case "--executor":
            switch value(a) {
            case "loop": onLoop = true
            case "global": onLoop = false
            case "installed": installed = true
            default: peerUsage(tool, "--executor takes global, loop or installed", extra: extra)
            }
        case "-c", "--connections": o.connections = Int(value(a)) ?? 0
        case "-t", "--threads": o.threads = Int(value(a)) ?? -1
        case "-d", "--duration":
            var v = value(a)
            if v.hasSuffix("s") { v.removeLast() }
            guard let d = Double(v) else { peerUsage(tool, "bad duration", extra: extra) }
            o.seconds = d
        case "-n", "--requests": o.requests = Int(value(a))
        default:
            if a.hasPrefix("-") { peerUsage(tool, "unknown option '\(a)'", extra: extra) }
            o.url = a
        }
    }
    guard transport == "hawser" || transport == "ahc" else {
        peerUsage(tool, "--transport takes hawser or ahc", extra: extra)
    }
    guard (!onLoop && !installed) || transport == "hawser" else {
        peerUsage(tool, "--executor loop and installed are for the hawser transport", extra: extra)
    }
    guard !o.url.isEmpty else { peerUsage(tool, "no base URL", extra: extra) }
    guard o.connections > 0, o.threads >= 0 else {
        peerUsage(tool, "-c must be positive, -t not negative", extra: extra)
    }
    if o.seconds == nil && o.requests == nil { o.seconds = 10 }
    return (o, transport, onLoop, installed)
}

func run(_ o: PeerOptions, client: Client, counters: PeerCounters, executor: (any TaskExecutor)? = nil) async -> UInt64
{
    let start = peerNow()
    let budget = PeerBudget(o, start: start)
    await withTaskGroup(of: Void.self) { g in
        for _ in 0..<o.connections {
            g.addTask(executorPreference: executor) {
                while budget.next() {
                    do {
                        let message = try await client.getGreeting().ok.body.json.message
                        if message == "Hello, World!" {
                            counters.ok(bytes: message.utf8.count)
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
struct OpenAPILoad {
    static func main() async throws {
        peerProcessSetup()
        let (o, transportName, onLoop, installed) = parse()
        if installed {
            do {
                try EventLoopGroup.shared.installAsGlobalExecutor()
            } catch {
                peerUsage(tool, "\(error)", extra: extra)
            }
        }
        guard let base = URL(string: o.url) else { peerUsage(tool, "bad URL \(o.url)", extra: extra) }
        print("Running \(o.seconds.map { "\(fixed($0))s" } ?? "\(o.requests!)-request") test @ \(o.url)/greeting")
        let counters = PeerCounters()
        let elapsed: UInt64
        if transportName == "hawser" {
            var config = SessionConfiguration()
            config.maximumConnectionsPerHost = o.connections
            let session = Session(configuration: config)
            print(
                "  HawserTransport, one Session (the shared group's loops), \(o.connections) callers on \(onLoop ? "the session's loop" : installed ? "the loops installed as the global executor" : "the global executor")"
            )
            elapsed = await run(
                o,
                client: Client(serverURL: base, transport: HawserTransport(session: session)),
                counters: counters,
                executor: onLoop ? session.eventLoop : nil
            )
            session.shutdown()
        } else {
            let threads = o.threads > 0 ? o.threads : (o.connections == 1 ? 1 : peerCoreCount())
            let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
            var config = HTTPClient.Configuration()
            config.connectionPool = .init(
                idleTimeout: .seconds(60),
                concurrentHTTP1ConnectionsPerHostSoftLimit: o.connections
            )
            config.timeout = .init(connect: .seconds(10), read: .seconds(30))
            config.httpVersion = .http1Only
            let http = HTTPClient(eventLoopGroup: group, configuration: config)
            print(
                "  AsyncHTTPClientTransport 1.5.0 (AsyncHTTPClient 1.37.0), \(threads) event loop thread(s), \(o.connections) callers"
            )
            let transport = AsyncHTTPClientTransport(configuration: .init(client: http, timeout: .seconds(30)))
            elapsed = await run(o, client: Client(serverURL: base, transport: transport), counters: counters)
            try await http.shutdown()
            try await group.shutdownGracefully()
        }
        exit(peerReport(counters, elapsedNanos: elapsed))
    }
}
