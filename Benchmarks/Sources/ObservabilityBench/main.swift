// obs-bench: N keep-alive GETs in a row through one Session, for measuring what logging costs on
// the request path (docs/PERFORMANCE.md, "Logging, tracing and metrics overhead").
//
//   obs-bench URL N none|debug-noop|trace-noop
//
// none: no logger (the request path checks one optional); debug-noop / trace-noop: a Logger at
// that level whose handler drops every line (every log call is made, its metadata built; nothing
// is printed). Not swift-log's SwiftLogNoOpLogHandler: its level is fixed at critical, so the
// library would skip its debug and trace lines before building them.
// Built with -DOBS_BASELINE (no logger API: the library before logging existed) only `none` runs.
// Exits non-zero on a failed request. Run it under valgrind --tool=callgrind with two values of
// N: the difference divided by the difference in N is the instruction count per request.
import FoundationEssentials
import HawserCore

#if !OBS_BASELINE
import Logging
#endif

#if canImport(Glibc)
import Glibc
#endif

let args = CommandLine.arguments
guard args.count == 4, let n = Int(args[2]), let url = URL(string: args[1]) else {
    print("usage: obs-bench URL N none|debug-noop|trace-noop")
    exit(2)
}
var configuration = SessionConfiguration()
configuration.proxy = .none
switch args[3] {
case "none":
    break
#if !OBS_BASELINE
case "debug-noop", "trace-noop":
    var logger = Logger(label: "obs-bench", factory: { _ in DiscardingLogHandler() })
    logger.logLevel = args[3] == "debug-noop" ? .debug : .trace
    configuration.logger = logger
#endif
default:
    print("obs-bench: unknown mode \(args[3])")
    exit(2)
}
let session = Session(configuration: configuration)
let request = HTTPClientRequest(url: url)

/// Issues the requests one after another from each completion (on the session's loop); the main
/// thread waits on a semaphore. No Swift concurrency: valgrind 3.19 dies on the async main's
/// parked main thread (dispatch's sigsuspend).
final class Runner: @unchecked Sendable {
    var remaining: Int
    var failures = 0
    let done: UnsafeMutablePointer<sem_t>

    init(count: Int) {
        self.remaining = count
        self.done = .allocate(capacity: 1)
        sem_init(self.done, 0, 0)
    }

    func next() {
        guard self.remaining > 0 else {
            sem_post(self.done)
            return
        }
        self.remaining -= 1
        session.execute(request) { result in
            if case .success(let response) = result, response.status == 200 {} else { self.failures += 1 }
            self.next()
        }
    }
}

let runner = Runner(count: n)
runner.next()
sem_wait(runner.done)
session.shutdown()
print("obs-bench: \(n) requests, \(runner.failures) failed")
exit(runner.failures == 0 ? 0 : 1)

#if !OBS_BASELINE
/// Takes every level and drops every line.
struct DiscardingLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }
    func log(event: LogEvent) {}
}
#endif
