// Loopback request rates through the engine against the in-process test server.
//   swift package --package-path Benchmarks benchmark --target LoopbackBenchmarks --no-progress
// Each scaled iteration is one complete GET /hello on a kept-alive connection (the first
// request of a run opens it). mallocCountTotal per request is the figure to gate on: it does
// not move with machine load. The test server shares the process (its own loop thread).
import Benchmark
import FoundationEssentials
import HawserCore
import HawserTestServer

#if canImport(Glibc)
import Glibc
#endif

/// A request delegate that signals completion to a blocked benchmark thread.
final class Done: ResponseDelegate, @unchecked Sendable {
    private var m = pthread_mutex_t()
    private var c = pthread_cond_t()
    private var finished = false
    init() {
        pthread_mutex_init(&m, nil)
        pthread_cond_init(&c, nil)
    }
    func reset() {
        pthread_mutex_lock(&m)
        finished = false
        pthread_mutex_unlock(&m)
    }
    func task(_ task: RequestTask, didReceiveHead head: HTTPResponseHead) {}
    func task(_ task: RequestTask, didReceiveBody bytes: UnsafeRawBufferPointer) {}
    func task(_ task: RequestTask, didCompleteWith result: Result<HTTPHeaders?, HawserError>, metrics: TaskMetrics) {
        if case .failure(let e) = result { fatalError("request failed: \(e)") }
        pthread_mutex_lock(&m)
        finished = true
        pthread_cond_signal(&c)
        pthread_mutex_unlock(&m)
    }
    func wait() {
        pthread_mutex_lock(&m)
        while !finished { pthread_cond_wait(&c, &m) }
        pthread_mutex_unlock(&m)
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration.maxDuration = .seconds(3)
    let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal]

    Benchmark(
        "Session GET /hello, streaming delegate, sequential",
        configuration: .init(metrics: metrics, scalingFactor: .kilo)
    ) { benchmark in
        let server = try! TestServer()
        let loop = try! EventLoop()
        let session = Session(eventLoop: loop)
        let request = HTTPClientRequest(url: URL(string: server.baseURL + "/hello")!)
        let done = Done()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            done.reset()
            session.execute(request, delegate: done)
            done.wait()
        }
        benchmark.stopMeasurement()
        session.shutdown()
        loop.shutdown()
        server.shutdown()
    }

    Benchmark(
        "Session GET /hello, async response(for:), sequential",
        configuration: .init(metrics: metrics, scalingFactor: .kilo)
    ) { benchmark in
        let server = try! TestServer()
        let loop = try! EventLoop()
        let session = Session(eventLoop: loop)
        let request = HTTPClientRequest(url: URL(string: server.baseURL + "/hello")!)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await session.response(for: request).status)
        }
        benchmark.stopMeasurement()
        session.shutdown()
        loop.shutdown()
        server.shutdown()
    }
}
