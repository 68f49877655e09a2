// peer-urlsession: hawser-load's load, through Foundation's URLSession on Linux
// (swift-corelibs-foundation's FoundationNetworking: libcurl's multi interface underneath).
// Allowed here, in the Benchmarks package only; never in the library (Sources/).
//
//   peer-urlsession [-c N] [-d SECONDS | -n REQUESTS] URL
//
// One URLSession (default configuration, httpMaximumConnectionsPerHost = -c, no URLCache, no
// cookie storage: nothing a plain GET needs), its own delegate queue (URLSession's default serial
// OperationQueue), -c requests in flight as `dataTask(with:completionHandler:)`, each completion
// handler starting that worker's next request.  -c 1: sequential on one connection.
//
// Last line: `RESULT requests=N errors=E seconds=S rps=R cpu_user=U cpu_sys=S maxrss_kb=K ...`
// (see PeerSupport).  Non-2xx responses and failures count as errors.  -t is accepted and ignored.
import Foundation
import FoundationNetworking
import PeerSupport

let tool = "peer-urlsession"

final class Worker: Sendable {
    let session: URLSession
    let request: URLRequest
    let budget: PeerBudget
    let counters: PeerCounters
    let finished: @Sendable () -> Void

    init(
        session: URLSession,
        request: URLRequest,
        budget: PeerBudget,
        counters: PeerCounters,
        finished: @escaping @Sendable () -> Void
    ) {
        self.session = session
        self.request = request
        self.budget = budget
        self.counters = counters
        self.finished = finished
    }

    func next() {
        guard self.budget.next() else {
            self.finished()
            return
        }
        self.session.dataTask(with: self.request) { data, response, error in
            if error == nil, let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) {
                self.counters.ok(bytes: data?.count ?? 0)
            } else {
                self.counters.error()
            }
            self.next()
        }.resume()
    }
}

peerProcessSetup()
let o = parsePeerOptions(tool)
guard let url = URL(string: o.url) else { peerUsage(tool, "bad URL \(o.url)") }

let config = URLSessionConfiguration.default
config.httpMaximumConnectionsPerHost = o.connections
config.urlCache = nil
config.requestCachePolicy = .reloadIgnoringLocalCacheData
config.httpCookieStorage = nil
config.httpShouldSetCookies = false
config.timeoutIntervalForRequest = 30
let session = URLSession(configuration: config)
let request = URLRequest(url: url)

print("Running \(o.seconds.map { "\(fixed($0))s" } ?? "\(o.requests!)-request") test @ \(o.url)")
print(
    "  URLSession (FoundationNetworking), httpMaximumConnectionsPerHost \(o.connections), \(o.connections) dataTasks in flight"
)
let counters = PeerCounters()
let done = PeerSemaphore()
let remaining = PeerCountdown(o.connections)
let start = peerNow()
let budget = PeerBudget(o, start: start)
let workers = (0..<o.connections).map { _ in
    Worker(session: session, request: request, budget: budget, counters: counters) {
        if remaining.arrive() { done.signal() }
    }
}
for w in workers { w.next() }
done.wait()
let status = peerReport(counters, elapsedNanos: peerNow() - start)
session.invalidateAndCancel()
exit(status)
