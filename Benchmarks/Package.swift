// swift-tools-version: 6.1
//
// Hawser benchmarks: a separate package so the library's own graph never sees
// ordo-one/benchmark.  See docs/PERFORMANCE.md for the commands.
//
//   ParserBenchmarks  ordo-one/benchmark suite: HTTP1ResponseParser on R1, R2, R3
//   parser-bench      `parser-bench FILE|R1|R2|R3 N`: parse N times, print ns/message
//                     (N=0 only loads the message: the callgrind baseline)
//   LoopbackBenchmarks ordo-one suite: Session GETs against the in-process test server
//   AllocationBenchmarks ordo-one suite: mallocs per keep-alive request (Session, HTTPSessionManager,
//                     the parser), checked in CI against Thresholds/ (README.md there)
//   decode-bench      `decode-bench [N] [PIECE]`: ContentDecoder vs a bare zlib inflate loop on
//                     the same ~1 MiB gzip body, interleaved; MB/s and the ratio
//   hawser-manager-load  the same load through HTTPSessionManager.get (--serializer json|http,
//                     --cacert FILE for https)
//   psl-bench         `psl-bench [ROUNDS] [ITERATIONS]`: ns per public-suffix lookup, PublicSuffixes
//                     vs libpsl (dlopen), interleaved; `psl-bench --check FILE|-` compares the two
//   peer-ahc          the same load through AsyncHTTPClient 1.37 (peer, issue 4 / issue 2 targets)
//   peer-urlsession   the same load through Foundation's URLSession (FoundationNetworking, libcurl)
//   openapi-load      the generated OpenAPI example client's getGreeting over HawserTransport or
//                     AsyncHTTPClientTransport (--transport hawser|ahc; builds AHC: not in CI)
//   stream-bench      a large download read through the delegate API or the AsyncSequence body
//   obs-bench         `obs-bench URL N none|debug-noop|trace-noop`: N keep-alive GETs, no logger or a
//                     logger on swift-log's no-op handler (the logging overhead, under callgrind)
//   BenchSupport      the three messages (embedded) and the shared parse loop
//
// The C peers (Benchmarks/peers) are built by Benchmarks/peers/build.sh with gcc,
// not by SwiftPM.
import PackageDescription

let package = Package(
    name: "benchmarks",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "parser-bench", targets: ["ParserBench"]),
        .executable(name: "decode-bench", targets: ["DecodeBench"]),
        .executable(name: "hawser-manager-load", targets: ["HawserManagerLoad"]),
        .executable(name: "psl-bench", targets: ["PSLBench"]),
        .executable(name: "peer-ahc", targets: ["PeerAHC"]),
        .executable(name: "peer-urlsession", targets: ["PeerURLSession"]),
        .executable(name: "openapi-load", targets: ["OpenAPILoad"]),
        .executable(name: "stream-bench", targets: ["StreamBench"]),
        .executable(name: "cache-latency", targets: ["CacheLatency"]),
        .executable(name: "obs-bench", targets: ["ObservabilityBench"]),
    ],
    dependencies: [
        // `name:` makes the reference independent of the checkout folder's name.
        .package(name: "Hawser", path: ".."),
        // MallocInterposer: the default trait pulls swift-runtime-interposer, which
        // is not in the mirror.  No jemalloc needed.
        .package(
            url: "https://github.com/ordo-one/benchmark",
            exact: "1.38.1",
            traits: ["MallocInterposer"]
        ),
        // Peer for the request-rate comparisons (Benchmarks/scripts/compare-peers.sh).  Only
        // this package sees it; it brings swift-nio, swift-nio-ssl (BoringSSL), -http2, -extras,
        // swift-log, swift-configuration, ...  swift-nio is listed only to name NIOCore/NIOPosix;
        // its version is whatever AHC 1.37.0 resolves to (2.101.x from the mirror).
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.100.0"),
        // The OpenAPI transport's peer (openapi-load --transport ahc), on the same AHC.
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", exact: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(
            name: "BenchSupport",
            dependencies: [.product(name: "HawserHTTP1", package: "Hawser")],
            path: "Sources/BenchSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "ParserBench",
            dependencies: ["BenchSupport", .product(name: "HawserHTTP1", package: "Hawser")],
            path: "Sources/ParserBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "DecodeBench",
            dependencies: [.product(name: "HawserCore", package: "Hawser")],
            path: "Sources/DecodeBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "PSLBench",
            dependencies: [.product(name: "HawserCore", package: "Hawser")],
            path: "Sources/PSLBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "PeerSupport",
            path: "Sources/PeerSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "PeerAHC",
            dependencies: [
                "PeerSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/PeerAHC",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // URLSession is allowed here (the Benchmarks package) and never in Sources/.
        .executableTarget(
            name: "PeerURLSession",
            dependencies: ["PeerSupport"],
            path: "Sources/PeerURLSession",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "HawserManagerLoad",
            dependencies: [.product(name: "Hawser", package: "Hawser")],
            path: "Sources/HawserManagerLoad",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The client generated from ../Tests/HawserOpenAPIExample/openapi.yaml: its Generated
        // folder (a symbolic link), compiled here, since Hawser publishes no example as a product.
        .target(
            name: "OpenAPIExampleClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Sources/OpenAPIExampleClient",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "OpenAPILoad",
            dependencies: [
                "PeerSupport",
                .product(name: "HawserCore", package: "Hawser"),
                .product(name: "HawserOpenAPI", package: "Hawser"),
                "OpenAPIExampleClient",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/OpenAPILoad",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "StreamBench",
            dependencies: [.product(name: "HawserCore", package: "Hawser")],
            path: "Sources/StreamBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "CacheLatency",
            dependencies: [
                .product(name: "HawserCore", package: "Hawser"),
                .product(name: "HawserTestServer", package: "Hawser"),
            ],
            path: "Sources/CacheLatency",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "ObservabilityBench",
            dependencies: [
                .product(name: "HawserCore", package: "Hawser"), .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/ObservabilityBench",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "LoopbackBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HawserCore", package: "Hawser"),
                .product(name: "HawserTestServer", package: "Hawser"),
            ],
            path: "Benchmarks/LoopbackBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "AllocationBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Hawser", package: "Hawser"),
                .product(name: "HawserHTTP1", package: "Hawser"),
                "BenchSupport",
            ],
            path: "Benchmarks/AllocationBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ParserBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "HawserHTTP1", package: "Hawser"),
                "BenchSupport",
            ],
            path: "Benchmarks/ParserBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
