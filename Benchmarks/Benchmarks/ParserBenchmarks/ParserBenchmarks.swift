import BenchSupport
// HTTP1ResponseParser on the three reference messages (see docs/PERFORMANCE.md).
//   swift package --package-path Benchmarks benchmark --target ParserBenchmarks --no-progress
// One parser is reused across iterations (a keep-alive connection's steady state);
// each scaled iteration parses one complete message from one buffer.
import Benchmark
import HawserHTTP1

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration.maxDuration = .seconds(2)
    for message in BenchMessage.allCases {
        let bytes = message.bytes
        precondition(bytes.count == message.size, "embedded \(message.rawValue) has \(bytes.count) bytes")
        Benchmark(
            "HTTP1ResponseParser \(message.rawValue) (\(bytes.count) B)",
            configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo)
        ) { benchmark in
            var parser = HTTP1ResponseParser()
            bytes.withUnsafeBytes { buffer in
                for _ in benchmark.scaledIterations {
                    do {
                        blackHole(try parseOne(buffer, &parser))
                    } catch {
                        fatalError("\(message.rawValue): \(error)")
                    }
                }
            }
        }
    }
}
